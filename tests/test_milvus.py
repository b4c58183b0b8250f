"""The Milvus backend against milvus-lite (a local file): the same answers, edits and eval figures
as the embedded backend; a test against a Milvus server runs on the session's ``milvus-lite server`` (conftest's
``milvus_server``), or on FAQSEARCH_MILVUS_URI where a user sets it."""
import json
import logging
import os
import uuid

import numpy as np
import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")
pytestmark = pytest.mark.slow  # every test here runs milvus-lite: seconds each

from faqsearch import FAQ, FAQSearch  # noqa: E402
from faqsearch.errors import FAQSearchError  # noqa: E402
from faqsearch.evaluation import evaluate, read_labelled_queries  # noqa: E402
from faqsearch.tuning import Setting  # noqa: E402

from .conftest import SAMPLE, SHARED_DATA, FakeEncoder, build_index  # noqa: E402

logging.getLogger("pymilvus").setLevel(logging.CRITICAL)


class CachingEncoder:
    def __init__(self, inner):
        self.inner, self.name, self.dimension, self.cache = inner, inner.name, inner.dimension, {}

    def encode(self, texts, batch_size=64, progress=False):
        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if todo:
            self.cache.update(zip(todo, self.inner.encode(todo, batch_size=batch_size)))
        return np.stack([self.cache[t] for t in texts]) if texts else np.empty((0, self.dimension), np.float32)

    def spec(self):
        return self.inner.spec()


def both(tmp_path, corpus, encoder, uri=None, collection=None, **kw):
    """The same corpus built on the embedded backend and on Milvus (a milvus-lite file unless ``uri``)."""
    emb = FAQSearch.build(corpus, str(tmp_path / "emb"), encoder=encoder, index_type="flat", **kw)
    mil = FAQSearch.build(corpus, str(tmp_path / "mil"), encoder=encoder, backend="milvus",
                          uri=uri or str(tmp_path / "m.db"), collection=collection, **kw)
    return emb, mil


def assert_same_top10(emb, mil, texts):
    vecs = emb.embed(texts)
    for a, b in zip(emb.searcher().dense(vecs, 10), mil.searcher().dense(vecs, 10)):
        assert [x.faq_id for x in a] == [x.faq_id for x in b]
        assert np.allclose([x.score for x in a], [x.score for x in b], atol=1e-4)
    # as `ask` searches: full-dimensional scores choose each FAQ's question (Milvus kept the one its grouping
    # search chose in k dimensions: another question, a lower score, where two were near-tied)
    full = emb.searcher().vectors(texts[:200])  # (200 of CovidFAQ's 400: each Milvus search is a call)
    for a, b in zip(emb.searcher().dense(full, 10), mil.searcher().dense(full, 10)):
        assert [(x.faq_id, x.question) for x in a] == [(x.faq_id, x.question) for x in b]
        assert np.allclose([x.score for x in a], [x.score for x in b], atol=1e-5)


@pytest.mark.parametrize("name", ["sample_data", "CovidFAQ"])
def test_parity_top10_and_eval_with_the_embedded_backend(tmp_path, minilm, name):
    if name == "sample_data":
        corpus, queries = os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv")
    else:
        corpus = os.path.join(SHARED_DATA, "CovidFAQ", "faqs.csv")
        queries = os.path.join(SHARED_DATA, "CovidFAQ", "queries.csv")
        if not os.path.exists(corpus):
            pytest.skip("../shared/data is not here")
    enc = CachingEncoder(minilm)
    emb, mil = both(tmp_path, corpus, enc)
    labelled = read_labelled_queries(queries)[:400]  # CovidFAQ's first 400 of 1,073: each search is a Milvus call
    assert_same_top10(emb, mil, [q.text for q in labelled])
    # each index chose its threshold in its hybrid mode, whose BM25 differs a little (below): close
    assert abs(emb.threshold - mil.threshold) < 0.02
    for mode in ("dense", "hybrid"):
        a = evaluate(emb, labelled, mode=mode, threshold=0.5)
        b = evaluate(mil, labelled, mode=mode, threshold=0.5)
        if mode == "dense":
            assert a == b
        else:  # Milvus' own BM25 differs from SQLite FTS5's in its statistics: close, not equal
            assert abs(a["mrr@10"] - b["mrr@10"]) < 0.03, (a, b)
    if name == "sample_data":  # a transform that keeps few dimensions (tune transform chose 64 for a user): 29
        for engine in (emb, mil):  # of 159 top-10 lists differed, Milvus searching 5 FAQs beyond k at any size
            engine.refit(Setting(True, 1.0, 0.5, 64))
        assert_same_top10(emb, mil, [q.text for q in labelled])
    emb.close()
    mil.close()


CORPUS = [FAQ(f"f{i}", f"answer {i}", [f"question about topic{i} variant{j}" for j in range(3)],
              "even" if i % 2 == 0 else "odd", {"product": f"p{i % 3}", "地区": "华东" if i % 2 else "华北",
                                                 "prio": -(i % 4), "tags": [i % 5, -1 if i % 2 else 7.5]})
          for i in range(12)]


def test_distinct_faqs_where_faqs_hold_many_questions(tmp_path):
    """Milvus' grouping search returned 3 FAQs of the 10 asked here (3 FAQs of 60 near-identical questions
    come first): a query short of FAQs is searched again without those it has, until 10 are found, as the
    embedded backend widens its search; an index where the plain search leaves most queries short stops
    searching plainly first."""
    crowded = [FAQ(f"c{i}", f"answer c{i}", [f"refund card order {i} n{j}" for j in range(60)]) for i in range(3)]
    sparse = [FAQ(f"s{i}", f"answer s{i}", [f"refund topic{i}", f"card topic{i} again"]) for i in range(20)]
    emb, mil = both(tmp_path, crowded + sparse, FakeEncoder(), threshold=-1)
    texts = ["refund card order", "refund card order 1", "card order n7", "refund topic7 order"]
    vecs = emb.embed(texts)
    assert [len(found) for found in mil.searcher().dense(vecs, 10)] == [10] * 4
    assert_same_top10(emb, mil, texts)
    index = mil.searcher().snap.index
    index.plain = [0, 0]
    many = [f"refund card order {i % 3} n{i}" for i in range(20)]
    assert_same_top10(emb, mil, many)
    assert index.plain == [20, 20]  # every query was short after the plain search: it stops here
    assert_same_top10(emb, mil, texts)
    assert index.plain == [20, 20]
    hits, rows = index.search_distinct(vecs, 10, {"category": "nope"})  # a filter that keeps nothing
    assert hits == [[]] * 4 and rows == {}
    emb.close()
    mil.close()


def test_raw_vectors_read_with_the_questions_of_faqs_found_are_kept_for_scoring(pair):
    """The questions of the FAQs a search found are read with their raw vectors, which the scoring then
    takes without reading them again; only committed rows' are kept (an edit's rows above next_id may be
    undone by a repair), and the scores are those of a fresh read."""
    emb, mil = pair
    snap = mil.searcher().snap
    b = snap.index.b
    b.raw_kept.clear()
    texts = ["question about topic3", "topic7 variant1"]
    assert_same_top10(emb, mil, texts)
    kept = dict(b.raw_kept)
    assert kept and all(i < b.next_id for i in kept)
    ids = np.array(sorted(kept), dtype=np.int64)
    fresh = {r["id"]: r["raw"] for r in b.by_ids(ids.tolist(), ["id", "raw"], visible=False)}
    assert np.allclose(snap.raw.get(ids), np.array([fresh[int(i)] for i in ids], dtype=np.float32))
    b.keep_raw([{"id": b.next_id, "raw": [1.0] * b.dim_in}])
    assert b.next_id not in b.raw_kept


def test_the_other_questions_of_large_faqs_are_read_in_parts(tmp_path, monkeypatch):
    """The questions of the FAQs found (to score each FAQ by its best question in full dimensions) are
    read in parts under Milvus' bound on one query's rows: FAQs over it were scored by the question the
    k-dimensional search chose, with a warning per query. Here the bound is 100 rows."""
    import faqsearch.backends.milvus.faces as faces
    big = [FAQ(f"b{i}", f"answer b{i}", [f"refund card order {i} n{j}" for j in range(60 + 70 * (i == 0))])
           for i in range(3)]
    rest = [FAQ(f"s{i}", f"answer s{i}", [f"refund topic{i}", f"card topic{i} again"]) for i in range(12)]
    emb, mil = both(tmp_path, big + rest, FakeEncoder(), threshold=-1, k=8)  # few dimensions: the full ones choose
    monkeypatch.setattr(faces, "SIBLINGS_MAX", 100)
    assert_same_top10(emb, mil, ["refund card order", "refund card order 0 n3", "card order n7 topic2"])
    emb.close()
    mil.close()


@pytest.fixture(params=["file", "server"])
def pair(request, tmp_path):
    """(embedded, milvus) engines over CORPUS; Milvus on a milvus-lite file, then on the session's
    gRPC server with a collection of this test's own."""
    server = {"uri": request.getfixturevalue("milvus_server"),
              "collection": f"pair_{request.node.originalname}_{uuid.uuid4().hex[:8]}"} if request.param == "server" else {}
    emb, mil = both(tmp_path, CORPUS, FakeEncoder(), threshold=-1, **server)
    yield emb, mil
    emb.close()
    mil.close()


def test_edits_match_the_embedded_backend(pair):
    emb, mil = pair
    for e in (emb, mil):
        e.add([FAQ("new", "new answer", ["brand new wording", "another new wording"])])
        e.update([FAQ("f1", "changed answer", ["question about topic1 variant0", "a fresh variant"], "odd")])
        e.remove(["f2"])
        e.feedback("user words for topic three", "f3")
    for e in (emb, mil):
        e._checked -= 10
    texts = ["brand new wording", "a fresh variant", "question about topic2 variant1", "user words for topic three",
             "question about topic1 variant2"]
    assert_same_top10(emb, mil, texts)
    assert mil.show("f1")["answer"] == "changed answer"
    assert [q["text"] for q in mil.show("f1")["questions"]] == [q["text"] for q in emb.show("f1")["questions"]]
    assert [f["id"] for f in mil.list()] == [f["id"] for f in emb.list()]
    assert mil.info()["counts"] == emb.info()["counts"]
    assert mil.info()["lexical"] is None and emb.info()["lexical"]["cjk"] == "unigram"  # Milvus: its own tokens
    assert mil.store.source_counts() == emb.store.source_counts()
    with pytest.raises(FAQSearchError):
        mil.remove(["f2"])


def test_filters_and_hybrid_on_milvus(pair):
    emb, mil = pair
    for e in (emb, mil):
        r = e.ask("question about topic1 variant0", k=3, filters={"category": "even"}, mode="dense")
        assert [a.faq_id for a in r.answers] and all(int(a.faq_id[1:]) % 2 == 0 for a in r.answers)
        r = e.ask("question about topic1 variant0", k=3, filters={"product": ["p1"]}, mode="dense")
        assert {a.metadata["product"] for a in r.answers} == {"p1"}
        assert e.ask("topic7 variant2", mode="lexical").answers[0].faq_id == "f7"
    # a key in Chinese, negative numbers and list members: the same FAQs in both backends
    for filters in ({"地区": "华东"}, {"prio": -3}, {"prio": [-1, -2]}, {"tags": -1}, {"tags": [7.5, 3]},
                    {"地区": "华北", "prio": 0}):
        got = [sorted(a.faq_id for a in e.ask("question about topic1 variant0", k=12, filters=filters,
                                               mode="dense").answers) for e in (emb, mil)]
        assert got[0] == got[1] and got[0], (filters, got)
        assert e.ask("question about topic7 variant2", mode="hybrid").answers[0].faq_id == "f7"


def test_interrupted_milvus_edit_is_invisible_and_repaired(pair, monkeypatch):
    _, mil = pair
    import faqsearch.index.directory as indexdir

    before = mil.info()["counts"]

    def crash(*a, **k):
        raise KeyboardInterrupt()

    monkeypatch.setattr(indexdir.Writer, "commit", crash)  # killed after the rows were written, before the commit
    with pytest.raises(KeyboardInterrupt):
        mil.add([FAQ("ghost", "ghost answer", ["ghost question words"])])
    with pytest.raises(KeyboardInterrupt):
        mil.remove(["f5"])
    monkeypatch.undo()
    fresh = FAQSearch.open(mil.path, encoder=FakeEncoder())
    assert fresh.info()["counts"] == before
    assert "ghost" not in [a.faq_id for a in fresh.ask("ghost question words", k=5, mode="dense").answers]
    assert fresh.ask("question about topic5 variant1", mode="dense").answers[0].faq_id == "f5"
    fresh.add([FAQ("real", "real answer", ["a real new question"])])  # repairs the leftovers first
    assert fresh.store.counts()["questions"] == before["questions"] + 1
    b = fresh.index.b
    assert not b.query(f"gen > {b.generation}", ["id"], all_rows=True)  # no uncommitted rows left
    fresh.close()


def test_refit_makes_a_new_collection_and_keeps_answers(pair):
    _, mil = pair
    old = mil.index.b.collection
    mil.refit(Setting(True, 1.0, 1.0, 8))
    assert mil.index.b.collection != old and mil.config["dim_out"] <= 8
    assert mil.ask("question about topic4 variant1", mode="dense").answers[0].faq_id == "f4"
    mil.refit(Setting(True, 0.0, 0.0, None))
    names = mil.index.b.client.list_collections()
    assert old not in names and len([n for n in names if n.startswith(f"{mil.index.b.spec['base']}__g")]) == 2


@pytest.mark.parametrize("where", ["file", "server"])
def test_cli_ingest_and_ask_on_milvus(tmp_path, fake_models, small_corpus, where, request):
    from click.testing import CliRunner

    from faqsearch.cli import cli

    uri = ["--uri", str(tmp_path / "f.db")] if where == "file" else [
        "--uri", request.getfixturevalue("milvus_server"), "--collection", f"cli_{uuid.uuid4().hex[:8]}"]
    r = CliRunner().invoke(cli, ["ingest", small_corpus, "--index", str(tmp_path / "m"), "--backend", "milvus",
                                 *uri, "-q"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["ask", "How long does shipping take?", "--index", str(tmp_path / "m"), "--json"])
    assert json.loads(r.output)["answers"][0]["faq_id"] == "2"
    r = CliRunner().invoke(cli, ["list", "--index", str(tmp_path / "m"), "--json"])  # the store alone, on Milvus
    assert r.exit_code == 0 and [f["id"] for f in json.loads(r.output)["faqs"]] == ["1", "2", "3", "4"]
    r = CliRunner().invoke(cli, ["show", "3", "--index", str(tmp_path / "m"), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["questions"][1]["text"] == "What is the return policy?"
    r = CliRunner().invoke(cli, ["ingest", small_corpus, "--index", str(tmp_path / "x"), "--backend", "milvus"])
    assert r.exit_code == 1 and "--uri" in r.output
    # built again without --backend, it stays in Milvus (it became an embedded index, its Milvus data left
    # behind under an alias a later --backend milvus ingest refused as another index's: a hostile probe)
    r = CliRunner().invoke(cli, ["ingest", small_corpus, "--index", str(tmp_path / "m"), "-q"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["info", "--index", str(tmp_path / "m"), "--json"])
    assert json.loads(r.output)["backend"]["kind"] == "milvus", r.output
    r = CliRunner().invoke(cli, ["ingest", small_corpus, "--index", str(tmp_path / "m"), "--backend", "milvus", *uri, "-q"])
    assert r.exit_code == 0, r.output


@pytest.fixture
def server_uri(request):
    """A user's server (FAQSEARCH_MILVUS_URI=http://host:19530) or else the session's ``milvus-lite server``."""
    return os.environ.get("FAQSEARCH_MILVUS_URI") or request.getfixturevalue("milvus_server")


def test_against_a_milvus_server(tmp_path, server_uri):
    from pymilvus import MilvusClient

    from faqsearch.manage import drop_index

    base = f"faqsearch_test_{uuid.uuid4().hex[:8]}"
    e = FAQSearch.build(CORPUS, str(tmp_path / "srv"), encoder=FakeEncoder(), backend="milvus",
                        uri=server_uri, collection=base)
    e.add([FAQ("new", "new answer", ["brand new wording"])])
    assert e.ask("brand new wording", mode="dense").answers[0].faq_id == "new"
    e.close()
    drop_index(str(tmp_path / "srv"))  # a user's server keeps nothing of the test
    c = MilvusClient(server_uri)
    assert not [n for n in c.list_collections() if n.startswith(base)]
    c.close()


def test_a_config_without_its_milvus_uri_and_an_unknown_category_are_one_line_errors(tmp_path, fake_models,
                                                                                      small_corpus):
    from click.testing import CliRunner

    from faqsearch.cli import cli
    from faqsearch.index.directory import resolve

    ix = str(tmp_path / "m")
    r = CliRunner().invoke(cli, ["ingest", small_corpus, "--index", ix, "--backend", "milvus",
                                 "--uri", str(tmp_path / "f.db"), "-q"])
    assert r.exit_code == 0, r.output
    # a category no FAQ has: nothing found, and a note naming the categories there are
    r = CliRunner().invoke(cli, ["ask", "How long does shipping take?", "--index", ix, "--category", "Shipping"])
    assert r.exit_code == 0 and r.exception is None, r.output
    assert "no FAQ has category 'Shipping'" in r.output and "account, returns, shipping" in r.output
    r = CliRunner().invoke(cli, ["list", "--index", ix, "--category", "nothing"])
    assert r.exit_code == 0 and "account, returns, shipping" in r.output
    config = os.path.join(resolve(ix), "config.json")
    with open(config, encoding="utf-8") as fh:
        data = json.load(fh)
    del data["backend"]["uri"]
    with open(config, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    for args in (["ask", "How long does shipping take?"], ["list"], ["add", small_corpus]):
        r = CliRunner().invoke(cli, args + ["--index", ix])
        assert r.exit_code == 1 and not isinstance(r.exception, KeyError), (args, r.output)
        assert "uri" in r.output and "faqsearch ingest" in r.output and len(r.output.strip().splitlines()) == 1
    with pytest.raises(FAQSearchError, match="uri"):
        FAQSearch.open(ix)


@pytest.mark.parametrize("made_before", [False, True])
def test_full_width_words_match_their_ascii_forms_in_milvus_bm25(tmp_path, monkeypatch, made_before):
    """Milvus' BM25 reads the tokens faqsearch writes: ＡＰＰ and １２ as APP and 12 since 2026-11-27. A
    collection made before holds them as written, and a full-width query still finds those questions."""
    import faqsearch.backends.milvus.collection as collection_mod
    from faqsearch import lexical

    if made_before:
        monkeypatch.setattr(collection_mod, "tokenize", lambda text, *a: lexical.tokenize(text, *a, width=False))
    corpus = [FAQ("1", "去应用商店。", ["怎么下载ＡＰＰ"]), FAQ("2", "免费。", ["转账手续费是多少"]),
              FAQ("3", "请重置。", ["密码输错１２次"]), FAQ("4", "请更新。", ["APP登录不了"])]
    e = FAQSearch.build(corpus, str(tmp_path / "ix"), encoder=FakeEncoder(), backend="milvus",
                        uri=str(tmp_path / "m.db"), threshold=-1, self_fusion=False)
    monkeypatch.undo()
    found = lambda q: {a.faq_id for a in e.ask(q, mode="lexical", k=4).answers}  # noqa: E731
    assert found("ＡＰＰ") == {"1", "4"} and found("１２") == {"3"}
    if not made_before:  # the ASCII forms find the full-width questions
        assert found("APP") == {"1", "4"} and found("12") == {"3"}
    e.close()


def test_a_second_index_of_the_same_name_in_one_milvus_is_refused_and_drop_spares_the_other(tmp_path, monkeypatch):
    """Milvus stores an index under its name: a second index directory of that name on the same
    Milvus replaced the first one's data at ingest (its refit or drop then broke the other). It is
    refused, naming the fix; ingesting the same index again is not; a drop spares data another index
    took the name for."""
    import faqsearch.backends.milvus.backend as milvus_backend
    from faqsearch.errors import InvalidOptionError
    from faqsearch.manage import drop_index

    uri = str(tmp_path / "m.db")
    first, second = str(tmp_path / "a" / "mv"), str(tmp_path / "b" / "mv")
    FAQSearch.build(CORPUS, first, encoder=FakeEncoder(), backend="milvus", uri=uri).close()
    with pytest.raises(InvalidOptionError, match="already stores another index directory as 'faqsearch_mv'.*--collection"):
        FAQSearch.build(CORPUS[:3], second, encoder=FakeEncoder(), backend="milvus", uri=uri)
    with FAQSearch.open(first, encoder=FakeEncoder()) as again:
        assert again.info()["counts"]["faqs"] == len(CORPUS)  # untouched
    FAQSearch.build(CORPUS[:4], first, encoder=FakeEncoder(), backend="milvus", uri=uri, replace=True).close()  # its own
    FAQSearch.build(CORPUS[:3], second, encoder=FakeEncoder(), backend="milvus", uri=uri, collection="faqsearch_mv_b").close()
    with FAQSearch.open(second, encoder=FakeEncoder()) as o:
        assert o.info()["counts"]["faqs"] == 3
    # the name taken over behind the first index's back (as before this check): dropping it spares the new owner
    third = str(tmp_path / "c" / "mv")
    monkeypatch.setattr(milvus_backend, "_refuse_a_name_in_use", lambda *a: None)
    FAQSearch.build(CORPUS[:2], third, encoder=FakeEncoder(), backend="milvus", uri=uri).close()
    monkeypatch.undo()
    drop_index(first)
    with FAQSearch.open(third, encoder=FakeEncoder()) as t:
        assert t.info()["counts"]["faqs"] == 2 and t.ask(CORPUS[0].questions[0], mode="dense").answers


def test_a_collection_the_server_released_is_loaded_again_on_the_next_read(tmp_path, caplog):
    """A Milvus server that restarted loads no collection until asked: every ask failed ("in state
    'released'", a 500 from the service) until another process loaded it. A read loads it and asks
    again; a read Milvus fails is a StorageError (the service's 503), not a raw pymilvus error."""
    from pymilvus import MilvusClient

    from faqsearch.errors import StorageError

    uri = str(tmp_path / "m.db")
    with FAQSearch.build(CORPUS, str(tmp_path / "ix"), encoder=FakeEncoder(), backend="milvus", uri=uri) as e:
        text = CORPUS[1].questions[0]
        assert e.ask(text, mode="dense").answers[0].faq_id == CORPUS[1].id
        name = e.config.backend.to_dict()["collection"]
        c = MilvusClient(uri)
        c.release_collection(name)
        with caplog.at_level("WARNING"):
            assert e.ask(text, mode="hybrid").answers[0].faq_id == CORPUS[1].id
        assert any("released collection" in r.getMessage() for r in caplog.records)
        c.drop_collection(name)  # gone altogether: one line, not a traceback, and not "check that the server runs"
        with pytest.raises(StorageError, match=f"no longer holds collection {name} .*build it again with faqsearch ingest"):
            e.ask(text + " again", mode="dense")
        c.close()

def test_a_milvus_lite_file_in_a_missing_folder_is_said_so(tmp_path):
    """--uri in a folder that does not exist was blamed on another process holding the file."""
    with pytest.raises(FAQSearchError, match="its folder .*nowhere does not exist; create it"):
        FAQSearch.build(CORPUS, str(tmp_path / "ix"), encoder=FakeEncoder(), backend="milvus",
                        uri=str(tmp_path / "nowhere" / "m.db"))


def test_an_edit_with_the_milvus_server_down_is_a_storage_error(tmp_path):
    """An index in a Milvus server by --uri (its directory here): with the server stopped, reads said so
    in one line, but add and remove raised pymilvus' own exception (HTTP 500, nothing a bot catching
    FAQSearchError catches; a hostile probe). Every failed call is now a StorageError (503)."""
    from faqsearch.errors import StorageError

    from .conftest import _start_milvus_server, _stop

    with open(tmp_path / "server.log", "w+b") as log:
        proc, uri, why = _start_milvus_server(tmp_path / "data", log)
        try:
            assert uri, why
            e = FAQSearch.build(CORPUS, str(tmp_path / "ix"), encoder=FakeEncoder(), backend="milvus", uri=uri)
            assert e.ask(CORPUS[2].questions[0], mode="dense").answers[0].faq_id == CORPUS[2].id
        finally:
            _stop(proc)
    for edit in (lambda: e.add([FAQ("later", "a later answer", ["a later question"])]), lambda: e.remove(["f3"])):
        with pytest.raises(StorageError, match=f"Milvus at {uri} failed to"):
            edit()
    e.close()


def test_a_new_collection_is_indexed_and_loaded_and_a_failed_index_is_said(tmp_path):
    """faqsearch waits for a new collection's indexes itself (pymilvus' wait sleeps 0.5 s before its first
    look at each): the collection is searchable when it returns, and an index Milvus could not build is
    a StorageError that names it, not a collection left unloaded."""
    from pymilvus import DataType

    from faqsearch.backends.milvus.collection import client, create_loaded
    from faqsearch.errors import StorageError

    c = client(str(tmp_path / "m.db"))

    def made(name):
        schema = c.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=4)
        ix = c.prepare_index_params()
        ix.add_index("vector", index_type="FLAT", metric_type="IP")
        create_loaded(c, name, schema, ix, consistency_level="Strong")

    made("ready")
    c.insert("ready", [{"id": 1, "vector": [1.0, 0.0, 0.0, 0.0]}])
    assert c.search("ready", [[1.0, 0.0, 0.0, 0.0]], anns_field="vector", limit=1)[0][0]["id"] == 1
    real = c.describe_index
    c.describe_index = lambda name, index: real(name, index) | {"state": "Failed"}
    with pytest.raises(StorageError, match="could not build the vector index of collection broken"):
        made("broken")
    c.close()


def test_a_milvus_outage_is_said_once_and_pymilvus_logs_through_the_process(tmp_path, milvus_server, run):
    """ingest and restore on a Milvus index named an undo (`restore vN`) that Milvus refuses, and a restore
    of an unknown version listed versions as restorable; pymilvus logged through handlers of its own
    (plain text under `serve --log-format json`), a server outage as a warning with a traceback 4 times
    a second (8,812 lines in 10 s)."""
    import logging

    from faqsearch.backends.milvus.collection import client
    from faqsearch.index.versions import restore

    client(milvus_server)
    for wrong in (str(tmp_path), str(tmp_path / "faq.txt")):  # blamed on another process's lock
        with pytest.raises(FAQSearchError, match="--uri takes a file whose name ends in .db"):
            client(wrong)
    for name in ("pymilvus", "pymilvus.milvus_client"):
        log = logging.getLogger(name)
        assert not log.handlers and log.propagate and log.level >= logging.ERROR, name
    ix = str(tmp_path / "ix")
    uri = str(tmp_path / "r.milvus.db")
    build_index(CORPUS, ix, backend="milvus", uri=uri).close()
    small = tmp_path / "small.csv"
    small.write_text("id,question,answer\nf1,question about topic1 variant0,answer 1\n", encoding="utf-8")
    done = run("ingest", small, "--index", ix, "--replace")
    assert done.exit_code == 0 and "Undo with" not in done.output, done.output
    for version in ("v00000001", "v00000099"):
        with pytest.raises(FAQSearchError, match="restore works on embedded indexes only"):
            restore(ix, version)
    from faqsearch.traffic import Traffic  # replicas log apart: another's X-Query-Id is not this log's (it was a 422)

    with FAQSearch.open(ix, encoder=FakeEncoder()) as engine, Traffic.open(ix) as traffic:
        engine.ask("a wording from another replica", log=True)
        assert traffic.feedback(engine, "a wording from another replica", "f1", query_id=999).added_questions == 1
        assert traffic.queries(5, store=engine.store)["queries"][0]["feedback_faq"] == "f1"
