import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from faqsearch import FAQSearch
from faqsearch.cli import cli
from faqsearch.config import FILES
from faqsearch.corpus import FAQ
from faqsearch.errors import FAQSearchError
from faqsearch.whitening import Moments

from .conftest import FakeEncoder, index_entries


class CountingEncoder(FakeEncoder):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.texts: list[str] = []

    def encode(self, texts, batch_size=32, progress=False):
        self.texts += list(texts)
        return super().encode(texts, batch_size, progress)


def corpus_file(tmp_path, rows, name="c.csv"):
    p = tmp_path / name
    p.write_text("id,question,answer\n" + "".join(f"{i},{q},{a}\n" for i, q, a in rows))
    return str(p)


BASE = [(i, f"question about topic{i} number{j}", f"answer{i}") for i in range(20) for j in range(3)]


@pytest.fixture
def engine(tmp_path):
    enc = CountingEncoder(dimension=24)
    e = FAQSearch.build(corpus_file(tmp_path, BASE), str(tmp_path / "ix"), encoder=enc, threshold=-1)
    enc.texts.clear()
    yield e
    e.close()


def _files(path):
    return {f: open(os.path.join(path, f), "rb").read() for f in sorted(os.listdir(path))}


def test_add_encodes_only_new_questions(engine):
    report = engine.add([FAQ("new", "new answer", ["brand new wording", "another new wording"])])
    assert report.added_faqs == ["new"] and report.added_questions == 2
    assert engine.encoder.texts == ["brand new wording", "another new wording"]
    assert engine.ask("brand new wording").answers[0].faq_id == "new"
    assert engine.ask("brand new wording").answers[0].source == "added"
    assert engine.info()["counts"]["questions"] == 62
    with pytest.raises(FAQSearchError, match="already in the index"):
        engine.add([FAQ("new", "x", ["y"])])


def test_remove_and_update(engine):
    engine.remove(["3"])
    assert all(a.faq_id != "3" for a in engine.ask("question about topic3", k=5).answers)
    with pytest.raises(FAQSearchError, match="unknown FAQ"):
        engine.remove(["nope"])
    engine.encoder.texts.clear()
    report = engine.update([FAQ("4", "changed answer", ["question about topic4 number0", "fresh phrasing four"])])
    assert report.updated_faqs == ["4"] and report.added_questions == 1 and report.removed_questions == 2
    assert engine.encoder.texts == ["fresh phrasing four"]
    faq = engine.show("4")
    assert faq["answer"] == "changed answer"
    assert [q["text"] for q in faq["questions"]] == ["question about topic4 number0", "fresh phrasing four"]
    top = engine.ask("fresh phrasing four").answers[0]
    assert (top.faq_id, top.answer) == ("4", "changed answer")


def test_answer_only_change_encodes_nothing(engine):
    stored = engine.show("5")
    report = engine.update([FAQ("5", "new words for the answer", [q["text"] for q in stored["questions"]])])
    assert report.updated_faqs == ["5"] and report.added_questions == 0 and engine.encoder.texts == []
    assert engine.show("5")["answer"] == "new words for the answer"


def test_upsert_applies_only_the_difference(engine, tmp_path):
    rows = [r for r in BASE if r[0] != 7]  # FAQ 7 dropped
    rows = [(i, q, "edited" if i == 2 else a) for i, q, a in rows] + [(99, "question about a new topic", "a99")]
    report = engine.upsert(corpus_file(tmp_path, rows, "v2.csv"))
    assert report.removed_faqs == ["7"] and report.added_faqs == ["99"] and report.updated_faqs == ["2"]
    assert engine.encoder.texts == ["question about a new topic"]
    assert engine.upsert(corpus_file(tmp_path, rows, "v2.csv")).changed is False  # idempotent


def test_moments_stay_exact_after_edits(engine, tmp_path):
    engine.add([FAQ("n1", "a", ["one more question", "and another"])])
    engine.remove(["0", "1"])
    raw = np.load(tmp_path / "ix" / FILES["vectors"])
    fresh = Moments(raw.shape[1]).update(raw)
    m = engine.whitening.moments
    assert m.n == fresh.n == len(engine.store.all_questions())
    np.testing.assert_allclose(m.mean, fresh.mean, atol=1e-6)
    np.testing.assert_allclose(m.m2, fresh.m2, atol=1e-4)
    # the stored raw vectors are still aligned with the questions
    np.testing.assert_allclose(raw, engine.encoder.encode([q[2] for q in engine.store.all_questions()]), atol=1e-6)


@pytest.mark.parametrize("where", ["encode", "faiss-save"])
def test_interrupted_edit_leaves_index_unchanged(engine, tmp_path, monkeypatch, where):
    path = str(tmp_path / "ix")
    before = _files(path)
    if where == "encode":
        monkeypatch.setattr(engine.encoder, "encode", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    else:
        import faqsearch.index as index_mod

        monkeypatch.setattr(index_mod.VectorIndex, "save", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        engine.add([FAQ("x", "y", ["z words"])])
    monkeypatch.undo()
    assert _files(path) == before
    assert index_entries(tmp_path) == ["<ix version>", "c.csv", "ix"]
    with FAQSearch.open(path, encoder=FakeEncoder(dimension=24)) as again:
        assert again.info()["counts"]["faqs"] == 20


def test_other_instance_sees_the_change(engine, tmp_path):
    reader = FAQSearch.open(str(tmp_path / "ix"), encoder=FakeEncoder(dimension=24))
    assert reader.ask("totally novel phrasing", threshold=-1).answers[0].faq_id != "nov"
    engine.add([FAQ("nov", "novel", ["totally novel phrasing"])])
    reader._checked -= 10  # as if a second passed
    assert reader.ask("totally novel phrasing").answers[0].faq_id == "nov"
    reader.close()


def test_cli_edit_commands(tmp_path, fake_models):
    runner = CliRunner()
    ix = str(tmp_path / "ix")
    base = corpus_file(tmp_path, BASE)

    def run(*args):
        return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)

    assert run("ingest", base, "--index", ix, "-q").exit_code == 0
    added = corpus_file(tmp_path, [("n1", "new question", "new answer")], "add.csv")
    assert json.loads(run("add", added, "--index", ix, "--json", "-q").output)["added_faqs"] == ["n1"]
    assert run("add", added, "--index", ix, "-q").exit_code == 1
    shown = json.loads(run("show", "n1", "--index", ix, "--json").output)
    assert shown["questions"][0]["source"] == "added"
    assert "No changes." in run("update", added, "--index", ix, "-q").output
    assert json.loads(run("remove", "n1", "--index", ix, "--json").output)["removed_faqs"] == ["n1"]
    assert run("show", "n1", "--index", ix).exit_code == 1
    assert len(run("list", "--index", ix, "--json").output.strip().splitlines()) == 20
    v2 = corpus_file(tmp_path, BASE[3:], "v2.csv")  # FAQ 0 gone
    out = json.loads(run("ingest", v2, "--index", ix, "--upsert", "--json", "-q").output)
    assert out["removed_faqs"] == ["0"] and out["added_questions"] == 0
    refit = json.loads(run("refit", "--index", ix, "--json", "-q").output)
    assert refit["fit_count"] == 57


def test_a_stale_writer_does_not_lose_another_writers_edit(engine, tmp_path):
    """Two writers (e.g. two processes) on one index: each edit starts from the latest version."""
    other = FAQSearch.open(str(tmp_path / "ix"), encoder=CountingEncoder(dimension=24))
    engine.add([FAQ("first", "a", ["first writer question"])])
    other.add([FAQ("second", "b", ["second writer question"])])  # `other` had not reloaded yet
    with FAQSearch.open(str(tmp_path / "ix"), encoder=FakeEncoder(dimension=24)) as fresh:
        ids = {f["id"] for f in fresh.list()}
        assert {"first", "second"} <= ids and len(ids) == 22
    other.close()


def test_edits_from_threads_are_serialised(engine):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: engine.add([FAQ(f"t{i}", "x", [f"thread question {i}"])]), range(6)))
    assert len(engine.list()) == 26
