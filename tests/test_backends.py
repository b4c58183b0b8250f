"""One contract for every storage-and-search backend (txtai's runTests(name) is the model): the
same calls through the same facade must give the same results on ``embedded`` and ``milvus``
(milvus-lite here; FAQSEARCH_MILVUS_URI adds a server in test_milvus.py)."""
from __future__ import annotations

import importlib.util

import pytest

from faqsearch import FAQ, FAQSearch
from faqsearch.errors import CorpusError, DuplicateFAQError, FAQSearchError, InvalidOptionError, UnknownFAQError
from faqsearch.tuning import Setting

from .conftest import FakeEncoder

CORPUS = [FAQ(f"f{i}", f"answer {i}", [f"question about topic{i} variant{j}" for j in range(3)],
              "even" if i % 2 == 0 else "odd", {"product": f"p{i % 3}"}) for i in range(12)]
BACKENDS = ["embedded", pytest.param("milvus", marks=pytest.mark.skipif(
    importlib.util.find_spec("milvus_lite") is None, reason="pip install 'faqsearch[milvus]'"))]


@pytest.fixture(params=BACKENDS)
def engine(request, tmp_path):
    kw = {"backend": "milvus", "uri": str(tmp_path / "m.db")} if request.param == "milvus" else {}
    e = FAQSearch.build(CORPUS, str(tmp_path / "ix"), encoder=FakeEncoder(), threshold=-1, self_fusion=False, **kw)
    yield e
    e.close()


def ids(result):
    return [a.faq_id for a in result.answers]


def test_ask_in_every_mode(engine):
    for mode in ("dense", "lexical", "hybrid"):
        assert ids(engine.ask("question about topic7 variant2", mode=mode))[0] == "f7"
    assert engine.ask("   ").answers == [] and engine.ask("   ").best_score is None  # blank: never encoded
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
