"""One contract for every storage-and-search backend (txtai's runTests(name) is the model): the
same calls through the same facade must give the same results on ``embedded``, ``milvus`` (milvus-lite
on a local file) and ``milvus-server`` (the Milvus protocol: conftest's ``milvus-lite server`` on 127.0.0.1,
marked slow)."""
from __future__ import annotations

import importlib.util
import os
import re
import uuid

import numpy as np
import pytest

from faqsearch import FAQ, FAQSearch
from faqsearch.errors import BlankQueryError, CorpusError, DuplicateFAQError, FAQSearchError, InvalidOptionError, UnknownFAQError
from faqsearch.tuning import Setting

from .conftest import FakeEncoder

CORPUS = [FAQ(f"f{i}", f"answer {i}", [f"question about topic{i} variant{j}" for j in range(3)],
              "even" if i % 2 == 0 else "odd", {"product": f"p{i % 3}"}) for i in range(12)]
_MILVUS = pytest.mark.skipif(importlib.util.find_spec("milvus_lite") is None, reason="pip install 'faqsearch[milvus]'")
BACKENDS = ["embedded", pytest.param("milvus", marks=_MILVUS),
            pytest.param("milvus-server", marks=[_MILVUS, pytest.mark.slow]),
            pytest.param("milvus-shared", marks=[_MILVUS, pytest.mark.slow])]


def storage(case: str, tmp_path, request) -> dict[str, str]:
    """``FAQSearch.build``'s storage options for a backend case: none (embedded), a milvus-lite file,
    or the session's gRPC server with a collection alias of this test's own (tests share the server);
    ``milvus-shared``: an index that lives in that server alone, addressed milvus://HOST:PORT/NAME (its
    local cache under this test's FAQSEARCH_HOME), given as ``index``."""
    if case == "embedded":
        return {}
    if case == "milvus":
        return {"backend": "milvus", "uri": str(tmp_path / "m.db")}
    name = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:80]
    if case == "milvus-shared":
        request.getfixturevalue("monkeypatch").setenv("FAQSEARCH_HOME", str(tmp_path / "home"))
        server = request.getfixturevalue("milvus_server").split("://", 1)[1]
        return {"index": f"milvus://{server}/s_{re.sub('_+', '_', name).strip('_')}_{uuid.uuid4().hex[:8]}"}
    return {"backend": "milvus", "uri": request.getfixturevalue("milvus_server"),
            "collection": f"t_{name}_{uuid.uuid4().hex[:8]}"}


def storage_options(kw: dict[str, str]) -> list[str]:
    """The CLI's options for :func:`storage`'s result."""
    return [a for k, v in kw.items() for a in (f"--{k.replace('_', '-')}", v)]


def located(kw: dict[str, str], tmp_path) -> tuple[str, dict[str, str]]:
    """(the index to build, the rest of :func:`storage`'s options)."""
    rest = dict(kw)
    return rest.pop("index", str(tmp_path / "ix")), rest


@pytest.fixture(params=BACKENDS)
def engine(request, tmp_path):
    index, kw = located(storage(request.param, tmp_path, request), tmp_path)
    e = FAQSearch.build(CORPUS, index, encoder=FakeEncoder(), threshold=-1, self_fusion=False, **kw)
    yield e
    e.close()


def ids(result):
    return [a.faq_id for a in result.answers]


def test_ask_in_every_mode(engine):
    for mode in ("dense", "lexical", "hybrid"):
        assert ids(engine.ask("question about topic7 variant2", mode=mode))[0] == "f7"
    blank = engine.ask_many(["   "])[0]  # in a batch: an empty result, never encoded; alone, refused (#42)
    assert blank.answers == [] and blank.best_score is None and not blank.answered
    with pytest.raises(BlankQueryError):
        engine.ask("   ")
    r = engine.ask("question about topic7 variant2", k=2, mode="dense")
    assert len(r.answers) == 2 and r.answers[0].score == pytest.approx(1.0, abs=1e-4)


def test_filters_apply_inside_the_search(engine):
    r = engine.ask("question about topic1 variant0", k=3, filters={"category": "even"}, mode="dense")
    assert len(r.answers) == 3 and all(int(a.faq_id[1:]) % 2 == 0 for a in r.answers)
    r = engine.ask("question about topic1 variant0", k=3, filters={"product": ["p1"]}, mode="hybrid")
    assert r.answers and {a.metadata["product"] for a in r.answers} == {"p1"}


def test_filters_on_any_key_and_bad_values_are_errors(engine):
    """A metadata key holding '"' or '.' is filtered on as written; numbers and booleans compare as
    JSON holds them; a value no backend can compare is an InvalidOptionError naming the field (an
    integer past 64 bits was an OverflowError from SQLite, a 500 in the service)."""
    engine.add([FAQ("odd-keys", "keys answer", ["do you sell quoted widgets"], None,
                    {'a"b': "x", "a.b": "y", "n": 5, "flag": True})])
    for filters in ({'a"b': "x"}, {"a.b": "y"}, {"n": 5}, {"n": [4, 5]}, {"flag": True}, {'a"b': ["z", "x"], "n": 5}):
        assert ids(engine.ask("do you sell quoted widgets", k=1, filters=filters, mode="dense")) == ["odd-keys"], filters
    for mode in ("lexical", "hybrid"):
        assert ids(engine.ask("quoted widgets", k=1, filters={'a"b': "x"}, mode=mode)) == ["odd-keys"]
    assert engine.ask("do you sell quoted widgets", filters={'a"b': "y"}, mode="dense").answers == []
    # JSON types kept: true is not 1, 5 is not "5" or true, false is not 0 (SQLite's json_each read them alike;
    # Milvus' expressions compare true equal to 1, a difference docs/library.md states)
    strict = ({"n": "5"}, {"flag": "true"}) if engine.config.backend_kind != "embedded" else \
        ({"flag": 1}, {"n": "5"}, {"n": True}, {"flag": [0, 1, "true"]})
    for filters in strict:
        assert "odd-keys" not in ids(engine.ask("do you sell quoted widgets", k=3, filters=filters, mode="dense")), filters
    assert ids(engine.ask("do you sell quoted widgets", k=1, filters={"n": 5.0, "flag": [False, True]}, mode="dense")) \
        == ["odd-keys"]
    # a field holding a list matches where the list holds a value (it matched nothing, and nothing said so)
    engine.add([FAQ("tagged", "tags answer", ["how are refunds tagged"], None, {"tags": ["退款", "card", 7]})])
    for filters in ({"tags": "退款"}, {"tags": ["x", "card"]}, {"tags": 7}):
        assert ids(engine.ask("how are refunds tagged", k=1, filters=filters, mode="dense")) == ["tagged"], filters
    assert engine.ask("how are refunds tagged", filters={"tags": "refund"}, mode="dense").answers == []
    for bad, words in (({"tier": 10 ** 30}, "64-bit"), ({"x": float("inf")}, "inf"), ({"x": []}, "at least one"),
                       ({"x": {"y": 1}}, "strings, numbers or booleans"), ({"": "x"}, "non-empty string")):
        with pytest.raises(InvalidOptionError, match=words):
            engine.ask("do you sell quoted widgets", filters=bad)


def test_edits(engine):
    engine.add([FAQ("new", "new answer", ["brand new wording", "another new wording"])])
    engine.update([FAQ("f1", "changed answer", ["question about topic1 variant0", "a fresh variant"], "odd")],
                  replace=True)  # a question added and two removed in one edit
    engine.remove(["f2"])
    engine.feedback("user words for topic three", "f3")
    assert ids(engine.ask("brand new wording", mode="dense"))[0] == "new"
    assert engine.show("f1")["answer"] == "changed answer"
    assert [q["text"] for q in engine.show("f1")["questions"]] == ["question about topic1 variant0", "a fresh variant"]
    assert "f2" not in ids(engine.ask("question about topic2 variant1", k=10, mode="dense"))
    assert ids(engine.ask("user words for topic three", mode="dense"))[0] == "f3"
    engine.unassign("user words for topic three", "f3")
    assert "user words for topic three" not in [q["text"] for q in engine.show("f3")["questions"]]
    engine.approve("f4", ["an approved phrasing of four"])
    assert engine.show("f4")["questions"][-1] == {**engine.show("f4")["questions"][-1], "source": "approved"}
    assert [f["id"] for f in engine.list()][:3] == ["f0", "f1", "f3"]
    assert engine.info()["counts"] == {"faqs": 12, "questions": 35, "max_questions_per_faq": 4}
    with pytest.raises(UnknownFAQError):
        engine.remove(["f2"])
    with pytest.raises(DuplicateFAQError):
        engine.add([FAQ("f5", "x", ["y"])])


def test_a_batch_that_names_an_faq_twice_writes_nothing(engine):
    g = engine.config["generation"]
    for call in (engine.add, engine.update, engine.upsert):
        with pytest.raises(CorpusError, match="'d1' is given twice"):
            call([FAQ("d1", "answer X", ["first wording"]), FAQ("d1", "answer Y", ["second wording"])])
    engine.reload()
    assert engine.config["generation"] == g and engine.info()["counts"]["faqs"] == 12


def test_a_lagging_reader_keeps_its_rows(engine):
    """A reader that has not reloaded answers from its own generation, whatever edits commit meanwhile."""
    reader = FAQSearch.open(engine.path, encoder=FakeEncoder())
    reader.auto_reload = False
    for n in range(4):
        engine.update([FAQ("f0", f"answer 0 v{n}", ["question about topic0 variant0"])])
        engine.remove([f"f{n + 6}"])
    for n in range(4):
        r = reader.ask(f"question about topic{n + 6} variant1", k=1, mode="dense")
        assert ids(r) == [f"f{n + 6}"] and r.answers[0].answer == f"answer {n + 6}"
    assert reader.ask("question about topic0 variant1", mode="dense").answers[0].answer == "answer 0"
    assert reader.show("f6")["answer"] == "answer 6"
    reader.reload()
    assert reader.ask("question about topic0 variant1", mode="dense").answers[0].answer == "answer 0 v3"
    reader.close()


def test_refit_keeps_answers(engine):
    engine.add([FAQ("new", "new answer", ["brand new wording"])])
    engine.refit(Setting(True, 1.0, 1.0, 8))
    assert engine.config["dim_out"] <= 8 and engine.config["whitening"]["tuned"]
    assert ids(engine.ask("question about topic4 variant1", mode="dense"))[0] == "f4"
    assert ids(engine.ask("brand new wording", mode="dense"))[0] == "new"


class SaltedEncoder(FakeEncoder):
    """Another encoder with the same shape (what `learn` trains): other vectors for the same words."""

    name = "fake-learned"

    def _word(self, w: str) -> np.ndarray:
        return super()._word("salted " + w)


def test_reencode_puts_every_question_through_another_encoder(engine):
    """`learn`'s write: every live question (edits included) encoded again, the transform fitted again,
    one commit; the index then answers with the new encoder and refuses the old one."""
    from faqsearch.errors import EncoderMismatchError
    from faqsearch.tuning import refit_config

    engine.add([FAQ("new", "new answer", ["brand new wording"])])
    engine.remove(["f3"])
    new = SaltedEncoder()
    with engine._writing("learn") as (writer, snap):
        done = snap.backend.reencode(writer, snap, new, snap.config.merged(encoder=new.spec()), refit_config)
    assert done and engine.snapshot.generation == snap.generation + 1
    with FAQSearch.open(engine.path, encoder=new) as again:
        assert again.config["counts"]["questions"] == 34 and again.config["encoder"]["name"] == "fake-learned"
        for mode in ("dense", "hybrid"):
            assert ids(again.ask("question about topic4 variant1", mode=mode))[0] == "f4"
            assert ids(again.ask("brand new wording", mode=mode))[0] == "new"
        assert "f3" not in ids(again.ask("question about topic3 variant1", k=5))
    with pytest.raises(EncoderMismatchError):
        FAQSearch.open(engine.path, encoder=FakeEncoder())


def test_an_interrupted_edit_is_invisible_and_repaired(engine, monkeypatch):
    import faqsearch.index.directory as indexdir

    before = engine.info()["counts"]

    def crash(*a, **k):
        raise KeyboardInterrupt()

    monkeypatch.setattr(indexdir.Writer, "commit", crash)  # after the rows were written, before the commit
    with pytest.raises(KeyboardInterrupt):
        engine.add([FAQ("ghost", "ghost answer", ["ghost question words"])])
    with pytest.raises(KeyboardInterrupt):
        engine.remove(["f5"])
    monkeypatch.undo()
    fresh = FAQSearch.open(engine.path, encoder=FakeEncoder())
    assert fresh.info()["counts"] == before
    assert "ghost" not in ids(fresh.ask("ghost question words", k=5, mode="dense"))
    assert ids(fresh.ask("question about topic5 variant1", mode="dense"))[0] == "f5"
    fresh.add([FAQ("real", "real answer", ["a real new question"])])  # repairs the leftovers first
    assert fresh.info()["counts"]["questions"] == before["questions"] + 1
    fresh.close()


def test_errors_name_what_to_do(engine):
    with pytest.raises(FAQSearchError, match="unknown mode"):
        engine.ask("x", mode="fuzzy")
    with pytest.raises(FAQSearchError, match="at least 1"):
        engine.ask("x", k=0)
    with pytest.raises(UnknownFAQError, match="faqsearch list"):
        engine.show("nope")


# -- the protocol in code: conformance, callers, every member on both backends -----------------------

def _protocols() -> dict[str, type]:
    """Every Protocol class that faqsearch/backends/base.py defines."""
    import inspect

    from faqsearch.backends import base

    return {n: c for n, c in vars(base).items() if inspect.isclass(c) and getattr(c, "_is_protocol", False)
            and c.__module__ == base.__name__}


def _members(proto: type) -> tuple[set[str], set[str]]:
    """(methods, data attributes) a Protocol declares: its own functions (dunders aside, ``__len__``
    included) and its annotated names."""
    import inspect

    methods = {n for n, v in vars(proto).items() if inspect.isfunction(v) and (not n.startswith("_") or n == "__len__")}
    return methods, set(vars(proto).get("__annotations__", {})) - methods


def _implementations() -> dict[str, list[type]]:
    from faqsearch.backends.embedded import EmbeddedBackend
    from faqsearch.backends.embedded.backend import RawVectors
    from faqsearch.backends.embedded.delta import DeltaIndex
    from faqsearch.backends.embedded.faiss import VectorIndex
    from faqsearch.backends.embedded.store import Store
    from faqsearch.backends.milvus import MilvusBackend
    from faqsearch.backends.milvus.backend import MilvusRaw
    from faqsearch.backends.milvus.faces import MilvusIndex, MilvusStore

    from faqsearch.backends.embedded.tokenstates import TokenStates, TokenWriter

    return {"VectorSearch": [VectorIndex, DeltaIndex, MilvusIndex], "StoreView": [Store, MilvusStore],
            "BuildStore": [Store], "RawSource": [RawVectors, MilvusRaw], "Backend": [EmbeddedBackend, MilvusBackend],
            "TokenSink": [TokenWriter], "TokenSource": [TokenStates]}  # Milvus keeps no token states


def _mismatches(proto: type, cls: type) -> list[str]:
    """What ``cls`` lacks of ``proto``'s methods, or takes differently: each declared parameter by the
    same name, kind and position (a default where the protocol has one); extra parameters only with
    defaults. Data attributes are checked on live objects (they may be set in ``__init__``)."""
    import inspect

    methods, _ = _members(proto)
    out = []
    for name in sorted(methods):
        impl = getattr(cls, name, None)
        if impl is None or not callable(impl):
            out.append(f"{cls.__name__}.{name} is missing")
            continue
        want = list(inspect.signature(getattr(proto, name)).parameters.values())
        have = list(inspect.signature(impl).parameters.values())
        for i, p in enumerate(want):
            q = have[i] if i < len(have) else None
            if q is None or q.name != p.name or q.kind != p.kind:
                out.append(f"{cls.__name__}.{name}: parameter {i} is {q and q.name!r}, the protocol's {p.name!r}")
            elif p.default is not p.empty and q.default is q.empty:
                out.append(f"{cls.__name__}.{name}: {p.name} needs a default")
        for q in have[len(want):]:
            if q.default is q.empty and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD):
                out.append(f"{cls.__name__}.{name}: extra parameter {q.name} has no default")
    return out


def test_every_implementation_has_every_protocol_method_with_its_signature():
    impls = _implementations()
    assert set(impls) == set(_protocols()), "a Protocol of base.py without its implementations listed here"
    for name, proto in _protocols().items():
        for cls in impls[name]:
            assert _mismatches(proto, cls) == [], (name, cls)

    class Partial:  # the check itself: a missing method and a renamed parameter are both found
        def search(self, queries, n, ids=None):
            return queries

    found = _mismatches(_protocols()["VectorSearch"], Partial)
    assert "Partial.max_id is missing" in found and any("'n', the protocol's 'k'" in f for f in found)


def test_live_faces_are_instances_of_their_protocols(engine, tmp_path):
    """isinstance on a runtime-checkable Protocol checks data attributes too (dim, factory, cjk...)."""
    from faqsearch.backends import Backend, BuildStore, Opened, RawSource, StoreView, VectorSearch

    snap = engine._current()
    for obj, proto in ((snap.index, VectorSearch), (snap.store, StoreView), (snap.raw, RawSource),
                       (snap.backend, Backend)):
        assert isinstance(obj, proto), (type(obj).__name__, proto.__name__)
        assert not _mismatches(proto, type(obj))
    engine.add([FAQ("new", "new answer", ["brand new wording"])])  # embedded: a DeltaIndex now
    assert isinstance(engine._current().index, VectorSearch)
    build = snap.backend.new_store(str(tmp_path))
    assert isinstance(build, BuildStore)
    build.close()
    assert set(Opened.__dataclass_fields__) == {"index", "store", "raw", "whitening"}


# faqsearch code outside backends/ that is known to reach a backend object: names bound from these
FACES = {"store": "StoreView", "index": "VectorSearch", "raw": "RawSource", "backend": "Backend"}
OPENERS = {"open_store": "StoreView", "backend_named": "Backend", "backend_for": "Backend"}
MADE_BY = {("Backend", "new_store"): "BuildStore", ("Backend", "open"): "Opened", ("Backend", "open_store"): "StoreView"}
PARAMETERS = {"store": "StoreView", "backend": "Backend"}


def backend_uses(source: str) -> list[tuple[str, str, int]]:
    """(protocol, member, line) of every attribute read on a backend object in ``source``.

    The heuristic, per function (lambdas included): an expression is a backend object when it is
    ``<anything>.store`` / ``.index`` / ``.raw`` / ``.backend`` (a snapshot's, an engine's, an
    Opened's faces; not on a ``config``, whose ``index`` and ``backend`` are sections of the typed Config); a call of ``open_store``, ``backend_named`` or ``backend_for``; ``new_store``,
    ``open`` or ``open_store`` called on a backend; a parameter named ``store`` or ``backend``; or a
    name assigned (``=`` or ``with ... as``) from one of these earlier in the function. Every
    ``obj.member`` and ``getattr(obj, "member", ...)`` on such an object is a use. It misses objects
    passed on under other names (a parameter ``s``) and attributes read through containers; it
    counts ``x.index.member`` on anything, which finds no false hit today (list.index is called, not
    read through)."""
    import ast

    out = []
    tree = ast.parse(source)
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))):
        args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        bound = {a.arg: PARAMETERS[a.arg] for a in args if a.arg in PARAMETERS}

        def is_config(e):  # a typed Config's sections (config.index, config.backend) are no faces
            return (isinstance(e, ast.Attribute) and e.attr == "config") or \
                (isinstance(e, ast.Name) and e.id in ("config", "typed"))

        def kind(e):
            if isinstance(e, ast.Name):
                return bound.get(e.id)
            if isinstance(e, ast.Attribute) and e.attr in FACES and not is_config(e.value):
                return FACES[e.attr]
            if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
                return OPENERS.get(e.func.id)
            if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
                return MADE_BY.get((kind(e.func.value), e.func.attr))
            return None

        body = fn.body if isinstance(fn.body, list) else [fn.body]
        nodes = sorted((n for b in body for n in ast.walk(b) if hasattr(n, "lineno") or isinstance(n, ast.withitem)),
                       key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
        for node in nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if kind(node.value):
                    bound[node.targets[0].id] = kind(node.value)
            elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
                if kind(node.context_expr):
                    bound[node.optional_vars.id] = kind(node.context_expr)
            elif isinstance(node, ast.Attribute) and kind(node.value):
                out.append((kind(node.value), node.attr, node.lineno))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                  and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and kind(node.args[0])):
                out.append((kind(node.args[0]), node.args[1].value, node.lineno))
    return out


def test_every_member_used_outside_backends_is_declared():
    import pathlib

    from faqsearch.backends.base import Opened

    declared = {name: set().union(*_members(proto)) for name, proto in _protocols().items()}
    declared["Opened"] = set(Opened.__dataclass_fields__)
    package = pathlib.Path(__file__).resolve().parent.parent / "faqsearch"
    undeclared, seen = [], set()
    for path in sorted(package.rglob("*.py")):
        if "backends" in path.relative_to(package).parts:
            continue
        for proto, member, line in backend_uses(path.read_text(encoding="utf-8")):
            seen.add((proto, member))
            if member not in declared[proto]:
                undeclared.append(f"{path.relative_to(package)}:{line}: {proto}.{member}")
    assert undeclared == []
    # the scan sees what it must (members the protocol once left out among them) ...
    assert {("StoreView", "question_faqs"), ("StoreView", "question_rows"), ("StoreView", "doc_freqs"),
            ("StoreView", "categories"), ("VectorSearch", "search_distinct"), ("RawSource", "all"),
            ("BuildStore", "insert_corpus"), ("Backend", "apply")} <= seen
    # ... and would catch a new undeclared call, however the object was reached
    new = '''
def f(snap, store, path):
    snap.store.shards()
    s = snap.index
    s.probe(1)
    store.vacuum()
    with open_store(path) as st:
        getattr(st, "cache", None)
    backend_for({}).new_store("d").flush()
'''
    assert sorted((p, m) for p, m, _ in backend_uses(new)) == [
        ("Backend", "new_store"), ("BuildStore", "flush"), ("StoreView", "cache"), ("StoreView", "shards"),
        ("StoreView", "vacuum"), ("VectorSearch", "probe")]


def _keys(typed_dict) -> set[str]:
    return set(typed_dict.__annotations__)


def test_every_store_view_member_answers_the_same_on_both_backends(engine):
    """Each StoreView member, called and checked against the corpus (12 FAQs of 3 questions, even and
    odd categories): the same figures from SQLite and from a Milvus collection."""
    from faqsearch.backends import Counts, FAQRecord, FAQSummary, QuestionRow, StoreView
    from faqsearch.lexical import CJK_MODES

    store = engine._current().store
    exercised = {"cjk", "stem"}
    assert store.cjk in CJK_MODES and store.stem in ("none", "english")
    rows = store.all_questions()
    assert len(rows) == 36 and [r[0] for r in rows] == sorted(r[0] for r in rows)
    assert {(f, t) for _, f, t in rows} == {(f.id, q) for f in CORPUS for q in f.questions}
    text = {qid: t for qid, _, t in rows}
    of = {qid: f for qid, f, _ in rows}
    exercised.add("all_questions")

    got = store.questions([rows[4][0], rows[30][0], 10 ** 6])
    assert set(got) == {rows[4][0], rows[30][0]} and all(set(r) == _keys(QuestionRow) for r in got.values())
    assert got[rows[4][0]]["question"] == rows[4][2] and got[rows[4][0]]["faq_id"] == rows[4][1]
    assert got[rows[30][0]]["metadata"] == {"product": f"p{int(rows[30][1][1:]) % 3}"}
    assert store.questions([]) == {}
    exercised.add("questions")

    hits = store.lexical(["question about topic7 variant2", "!!!"], 5)
    assert len(hits) == 2 and hits[1] == [] and of[hits[0][0][0]] == "f7" and text[hits[0][0][0]].endswith("variant2")
    assert [s for _, s in hits[0]] == sorted((s for _, s in hits[0]), reverse=True) and hits[0][0][1] > 0
    even = store.lexical(["question about topic7 variant2"], 5, {"category": "even"})[0]
    assert even and all(int(of[q][1:]) % 2 == 0 for q, _ in even)
    exercised.add("lexical")

    df, n = store.doc_freqs(["topic7", "question", "nowhere"])
    assert n == 36 and df["topic7"] == 3 and df["question"] == 36 and df.get("nowhere", 0) == 0
    exercised.add("doc_freqs")

    odd = store.question_ids({"category": "odd"})
    assert sorted(odd) == sorted(q for q, f in of.items() if int(f[1:]) % 2 == 1)
    assert sorted(store.question_ids({"product": ["p1"]})) == sorted(q for q, f in of.items() if int(f[1:]) % 3 == 1)
    exercised.add("question_ids")

    faq = store.faq("f3")
    assert set(faq) == _keys(FAQRecord) and faq["answer"] == "answer 3" and faq["category"] == "odd"
    assert [q["text"] for q in faq["questions"]] == CORPUS[3].questions and faq["metadata"] == {"product": "p0"}
    assert all(q["source"] == "corpus" for q in faq["questions"]) and store.faq("nope") is None
    exercised.add("faq")

    assert store.first_questions(["f3", "f7", "f3", "nope"]) == {"f3": CORPUS[3].questions[0], "f7": CORPUS[7].questions[0]}
    assert store.first_questions([]) == {}
    exercised.add("first_questions")

    listed = store.list_faqs()
    assert [f["id"] for f in listed] == [f.id for f in CORPUS] and all(set(f) == _keys(FAQSummary) for f in listed)
    assert listed[5] == {"id": "f5", "category": "odd", "answer": "answer 5", "questions": 3}
    assert [f["id"] for f in store.list_faqs(limit=2, offset=1)] == ["f1", "f2"]
    assert [f["id"] for f in store.list_faqs(category="even")] == [f"f{i}" for i in range(0, 12, 2)]
    assert [f["id"] for f in store.list_faqs(contains="TOPIC11")] == ["f11"]
    exercised.add("list_faqs")

    assert store.categories() == ["even", "odd"]
    hashes = store.faq_hashes()
    assert set(hashes) == {f.id for f in CORPUS} and len(set(hashes.values())) == 12
    assert store.faq_ids() == set(hashes) == store.faq_ids("corpus") and store.faq_ids("generated") == set()
    exercised |= {"categories", "faq_hashes", "faq_ids"}

    qids, keys = store.question_faqs()
    assert qids.tolist() == [r[0] for r in rows]
    assert len(set(keys.tolist())) == 12 and all((keys[i] == keys[j]) == (of[a] == of[b])
                                                for i, a in enumerate(qids.tolist()) for j, b in enumerate(qids.tolist()))
    assert store.question_rows([rows[7][0], rows[2][0], 10 ** 6]) == [rows[2], rows[7]]
    exercised |= {"question_faqs", "question_rows"}

    counts = store.counts()
    assert set(counts) == _keys(Counts) and counts == {"faqs": 12, "questions": 36, "max_questions_per_faq": 3}
    assert store.question_count() == 36
    assert store.source_counts() == {"corpus": 36} and store.source_counts(exclude="corpus") == {}
    exercised |= {"counts", "question_count", "source_counts"}

    from faqsearch.index.snapshot import open_store

    alone = open_store(engine.path)  # the rows alone, then closed
    assert alone.counts() == counts and alone.categories() == ["even", "odd"]
    alone.close()
    exercised.add("close")
    assert exercised == set().union(*_members(StoreView))


def test_every_vector_and_raw_member_answers_on_both_backends(engine):
    from faqsearch.backends import QuestionRow, RawSource, VectorSearch

    snap = engine._current()
    index, raw = snap.index, snap.raw
    ids = np.array([r[0] for r in snap.store.all_questions()], dtype=np.int64)
    exercised = set()
    assert len(index) == 36 and index.max_id() == ids.max() and index.dim == snap.whitening.dim_out
    assert isinstance(index.factory, str) and isinstance(index.supports_removal, bool) and index.delta is None
    exercised |= {"__len__", "max_id", "dim", "factory", "supports_removal", "delta"}

    got_ids, vectors = raw.all()
    assert got_ids.tolist() == ids.tolist() and vectors.shape == (36, snap.whitening.dim_in)
    some = ids[[3, 17, 35]]
    assert np.allclose(raw.get(some), vectors[[3, 17, 35]])
    both, found = raw.get(np.append(some, 10 ** 6), found=True)
    assert found.tolist() == [True, True, True, False] and not both[3].any()
    exercised |= {"all", "get"}

    mine = index.reconstruct(some)
    assert np.allclose(mine, snap.whitening.transform(vectors[[3, 17, 35]]), atol=1e-4)
    assert index.reconstruct(np.array([], dtype=np.int64)).shape == (0, index.dim)
    scores, found_ids = index.search(mine, 2)
    assert found_ids[:, 0].tolist() == some.tolist() and np.allclose(scores[:, 0], 1.0, atol=1e-4)
    allowed = ids[[0, 1, 2]]
    _, only = index.search(mine[:1], 5, allowed)
    assert set(only[0][only[0] >= 0].tolist()) <= set(allowed.tolist()) and (only[0] >= 0).sum() == 3
    exercised |= {"reconstruct", "search"}

    if index.search_distinct is not None:  # Milvus: grouped by FAQ in one call
        hits, rows = index.search_distinct(mine, 3, {"category": "odd"})
        assert all(set(r) == _keys(QuestionRow) for r in rows.values())
        for h in hits:
            faqs = [rows[q]["faq_id"] for q, _ in h]
            assert len(faqs) == len(set(faqs)) == 3 and all(rows[q]["category"] == "odd" for q, _ in h)
    else:
        assert snap.backend.kind == "embedded"  # the searcher widens a plain search instead
    exercised.add("search_distinct")
    assert exercised == set().union(*_members(VectorSearch), *_members(RawSource))


def test_every_backend_and_build_store_member_is_called_by_build_edit_refit_and_drop(tmp_path, request):
    """The writes: each Backend and BuildStore member, spied on its class, is called by a build, an
    edit, a refit, a restore, an open of the rows alone and a drop, and each left what it should."""
    from faqsearch.backends import Backend, BuildStore, backend_named
    from faqsearch.index.snapshot import open_store
    from faqsearch.index.versions import list_versions, restore
    from faqsearch.manage import drop_index
    from faqsearch.tuning import refit_config

    for kind in ("embedded", "milvus"):
        if kind == "milvus" and importlib.util.find_spec("milvus_lite") is None:
            continue
        backend_cls = type(backend_named(kind))
        store_cls = type(backend_named(kind).new_store(str(tmp_path)))
        called: set[str] = set()
        mp = pytest.MonkeyPatch()
        for cls, proto in ((backend_cls, Backend), (store_cls, BuildStore)):
            for name in _members(proto)[0]:
                def spy(*a, _f=getattr(cls, name), _n=f"{proto.__name__}.{name}", **k):
                    called.add(_n)
                    return _f(*a, **k)
                mp.setattr(cls, name, spy)
        try:
            path = str(tmp_path / kind)
            kw = {"backend": "milvus", "uri": str(tmp_path / "m.db")} if kind == "milvus" else {}
            e = FAQSearch.build(CORPUS, path, encoder=FakeEncoder(), threshold=-1, self_fusion=False, **kw)
            e.add([FAQ("new", "new answer", ["brand new wording"])])
            e.refit(Setting(True, 1.0, 1.0, 8))
            assert ids(e.ask("brand new wording", mode="dense"))[0] == "new" and e.config["dim_out"] <= 8
            with e._writing("learn") as (writer, snap):  # what `learn` writes, with an encoder of the same shape
                snap.backend.reencode(writer, snap, FakeEncoder(), snap.config, refit_config)
            e.close()
            first = list_versions(path)[0]  # the build's version, with the edit made in place
            if kind == "embedded":
                made = restore(path, first.version)
                assert made != first.version and list_versions(path)[-1].live
                with FAQSearch.open(path, encoder=FakeEncoder()) as again:
                    assert again.config["counts"]["faqs"] == first.faqs == 13 and again.config["dim_out"] > 8
            else:
                with pytest.raises(FAQSearchError, match="embedded indexes only"):
                    restore(path, first.version)
            rows = open_store(path)
            assert rows.counts()["faqs"] == 13
            rows.close()
            drop_index(path)
            assert not os.path.exists(path)
        finally:
            mp.undo()
        declared = {f"Backend.{n}" for n in _members(Backend)[0]} | {f"BuildStore.{n}" for n in _members(BuildStore)[0]}
        assert declared - called == set(), kind


@pytest.mark.parametrize("kind", BACKENDS)
def test_ask_category_through_the_cli(run, tmp_path, small_corpus, kind, request):
    """`faqsearch ask --category X` answers from that category alone on both backends (issue #41
    reported a traceback on Milvus), and a category no FAQ has is named with those that exist."""
    import json

    index, kw = located(storage(kind, tmp_path, request), tmp_path)
    assert run("ingest", small_corpus, "--index", index, *storage_options(kw)).exit_code == 0
    for category, want in (("returns", {"3"}), ("shipping", {"2", "4"})):
        r = run("ask", "how long does shipping take to return an item abroad", "--index", index, "--category", category,
                "-k", "5", "-t", "-1", "--json")
        assert r.exit_code == 0, r.output
        answers = json.loads(r.stdout)["answers"]
        assert {a["faq_id"] for a in answers} == want and {a["category"] for a in answers} == {category}
    r = run("ask", "how long does shipping take", "--index", index, "--category", "Shipping", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["answers"] == []
    assert "no FAQ has category 'Shipping'" in r.stderr and "account, returns, shipping" in r.stderr


class StatesEncoder(FakeEncoder):
    """The fake encoder with token states (one per word, with its span), declared as a mean-pooled
    transformers model: what the embedded backend keeps token states for."""

    def token_states(self, texts, batch_size: int = 32):
        import re

        out = []
        for t in texts:
            words = list(re.finditer(r"\w+", t.lower())) or []
            states = np.array([self._word(w.group()) for w in words], dtype=np.float32).reshape(-1, self.dimension)
            out.append((states, np.array([w.span() for w in words], dtype=np.int64).reshape(-1, 2)))
        return out

    def spec(self):
        return {**super().spec(), "backend": "transformers", "pooling": "mean"}


@pytest.mark.parametrize("kind", BACKENDS)
def test_token_states_through_the_protocol(tmp_path, kind, request):
    """A build keeps its questions' token states through the backend's TokenSink and a snapshot reads
    them back as its TokenSource (embedded); Milvus keeps none, and hybrid answers there all the same."""
    from faqsearch.backends import TokenSink, TokenSource, backend_named
    from faqsearch.defaults import TOKEN_STORE_MAX

    index, kw = located(storage(kind, tmp_path, request), tmp_path)
    backend, enc = backend_named("milvus" if kind.startswith("milvus") else "embedded"), StatesEncoder()
    with FAQSearch.build(CORPUS, index, encoder=enc, threshold=-1, self_fusion=False, **kw) as e:
        kept = e._current().tokens
        assert ids(e.ask("question about topic3 variant1", mode="hybrid"))[0] == "f3"
    assert backend.token_sink(str(tmp_path / "big"), enc, TOKEN_STORE_MAX + 1) is None
    if kind != "embedded":
        assert kept is None and backend.token_sink(str(tmp_path / "v"), enc, 3) is None
        return
    assert isinstance(kept, TokenSource) and len(kept) == 36  # 12 FAQs x 3 distinct questions
    assert kept.summary()["texts"] == 36
    got = kept.get(["question about topic3 variant1", "never stored"])
    assert list(got) == ["question about topic3 variant1"] and got["question about topic3 variant1"].shape == (4, 32)
    sink = backend.token_sink(str(tmp_path / "v"), enc, 2)
    assert isinstance(sink, TokenSink)
    vecs = sink.encode(enc, ["a b", "c"], 2)
    assert np.allclose(vecs, enc.encode(["a b", "c"])) and sink.finish()["texts"] == 2
    backend.drop_token_states(str(tmp_path / "v"))
    assert not os.listdir(str(tmp_path / "v"))
