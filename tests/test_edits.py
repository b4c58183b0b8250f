import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from faqsearch import FAQSearch
from faqsearch.cli import cli
from faqsearch.index.config import FILES
from faqsearch.corpus import FAQ
from faqsearch.errors import CorpusError, FAQSearchError, InvalidOptionError, UnknownFAQError
from faqsearch.whitening import Moments

from .conftest import FakeEncoder, build_index, faq_rows, index_entries, index_files, version, write_corpus


class CountingEncoder(FakeEncoder):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.texts: list[str] = []

    def encode(self, texts, batch_size=32, progress=False):
        self.texts += list(texts)
        return super().encode(texts, batch_size, progress)


BASE = [(i, f"question about topic{i} number{j}", f"answer{i}") for i in range(20) for j in range(3)]


@pytest.fixture
def engine(tmp_path):
    enc = CountingEncoder(dimension=24)
    e = FAQSearch.build(write_corpus(tmp_path, BASE), str(tmp_path / "ix"), encoder=enc, threshold=-1)
    enc.texts.clear()
    yield e
    e.close()


def _files(path):
    return index_files(path)


ENTRIES = ["c.csv", "ix", "ix/CURRENT", "ix/LOCK", "ix/v<generation>"]


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
    report = engine.update([FAQ("4", "changed answer", ["question about topic4 number0", "fresh phrasing four"])],
                           replace=True)  # exactly these questions (a plain update keeps the others: #40.3)
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
    report = engine.upsert(write_corpus(tmp_path, rows, "v2.csv"))
    assert report.removed_faqs == ["7"] and report.added_faqs == ["99"] and report.updated_faqs == ["2"]
    assert engine.encoder.texts == ["question about a new topic"]
    assert engine.upsert(write_corpus(tmp_path, rows, "v2.csv")).changed is False  # idempotent


def test_moments_stay_exact_after_edits(engine, tmp_path):
    engine.add([FAQ("n1", "a", ["one more question", "and another"])])
    engine.remove(["0", "1"])
    ids, raw = engine.raw_vectors()  # the base file plus the edits' delta
    assert ids.tolist() == [q[0] for q in engine.store.all_questions()]
    fresh = Moments(raw.shape[1]).update(raw)
    m = engine.whitening.moments
    assert m.n == fresh.n == len(engine.store.all_questions())
    np.testing.assert_allclose(m.mean, fresh.mean, atol=1e-6)
    np.testing.assert_allclose(m.m2, fresh.m2, atol=1e-4)
    # the stored raw vectors are still aligned with the questions
    np.testing.assert_allclose(raw, engine.encoder.encode([q[2] for q in engine.store.all_questions()]), atol=1e-6)


@pytest.mark.parametrize("where", ["encode", "faiss-save", "delta-save", "config-save"])
def test_interrupted_edit_leaves_index_unchanged(engine, tmp_path, monkeypatch, where):
    """encode and delta-save: an in-place (delta) edit; faiss-save: one that writes a new base.
    Until the store commits, every file is as it was, byte for byte; config-save comes after the
    store's commit, so the rows of the next generation are in store.db, invisible, until the next
    writer discards them."""
    import faqsearch.backends.embedded.editor as edits_mod
    import faqsearch.index.directory as indexdir_mod

    path = str(tmp_path / "ix")
    if where == "delta-save":
        engine.add([FAQ("warm", "w", ["warm up question"])])  # a delta exists already
    before = _files(path)
    boom = lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt())  # noqa: E731
    if where == "encode":
        monkeypatch.setattr(engine.encoder, "encode", boom)
    elif where == "faiss-save":
        import faqsearch.backends.embedded.faiss as index_mod

        monkeypatch.setattr(edits_mod, "delta_limit", lambda n: 0)
        monkeypatch.setattr(index_mod.VectorIndex, "save", boom)
    elif where == "delta-save":
        monkeypatch.setattr(edits_mod.Delta, "save", boom)
    else:
        monkeypatch.setattr(indexdir_mod.Writer, "commit", boom)
    faqs_before = engine.info()["counts"]["faqs"]
    with pytest.raises(KeyboardInterrupt):
        engine.add([FAQ("x", "y", ["z words"])])
    monkeypatch.undo()
    store = os.path.relpath(version(path) / FILES["store"], path)
    if where == "config-save":
        assert _files(path).keys() == before.keys()
        assert {f: b for f, b in _files(path).items() if f != store} == {f: b for f, b in before.items() if f != store}
    else:
        assert _files(path) == before
    assert index_entries(tmp_path) == ENTRIES
    with FAQSearch.open(path, encoder=FakeEncoder(dimension=24)) as again:
        assert again.info()["counts"]["faqs"] == faqs_before
        assert "x" not in {f["id"] for f in again.list()}
        assert again.ask("z words", threshold=-1, mode="lexical").answers == [] or \
            again.ask("z words", threshold=-1, mode="lexical").answers[0].faq_id != "x"
        again.add([FAQ("x2", "y2", ["z words again"])])  # the next writer discards what the killed one left
        assert again.store.hidden() == 0
        assert {f["id"] for f in again.list()} >= {"x2"} and "x" not in {f["id"] for f in again.list()}


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
    base = write_corpus(tmp_path, BASE)

    def run(*args):
        return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)

    assert run("ingest", base, "--index", ix, "-q").exit_code == 0
    added = write_corpus(tmp_path, [("n1", "new question", "new answer")], "add.csv")
    assert json.loads(run("add", added, "--index", ix, "--json", "-q").output)["added_faqs"] == ["n1"]
    assert run("add", added, "--index", ix, "-q").exit_code == 1
    shown = json.loads(run("show", "n1", "--index", ix, "--json").output)
    assert shown["questions"][0]["source"] == "added"
    assert "No changes." in run("update", added, "--index", ix, "-q").output
    assert json.loads(run("remove", "n1", "--index", ix, "--json").output)["removed_faqs"] == ["n1"]
    assert run("show", "n1", "--index", ix).exit_code == 1
    assert len(json.loads(run("list", "--index", ix, "--json").output)["faqs"]) == 20
    v2 = write_corpus(tmp_path, BASE[3:], "v2.csv")  # FAQ 0 gone
    out = json.loads(run("upsert", v2, "--index", ix, "--json", "-q").stdout)
    assert out["removed_faqs"] == ["0"] and out["added_questions"] == 0
    old = run("ingest", v2, "--index", ix, "--upsert", "--json", "-q")  # the older spelling, kept for a release
    assert json.loads(old.stdout)["removed_faqs"] == [] and "faqsearch upsert" in old.stderr
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


def _state(e, queries):
    """FAQs and answers: dense and hybrid with their scores; lexical ranks exactly, BM25 values apart
    (:func:`_same_state`): their statistics count the rows that edits removed since the last
    compaction, kept for readers of older generations."""
    faqs = {f["id"]: (f["answer"], sorted(q["text"] for q in e.show(f["id"])["questions"])) for f in e.list()}
    answers = {(q, m): [(a.faq_id, round(a.score, 4) if m != "lexical" else None)
                        for a in e.ask(q, k=5, threshold=-1, mode=m).answers]
               for q in queries for m in ("dense", "lexical", "hybrid")}
    bm25 = [a.score for q in queries for a in e.ask(q, k=5, threshold=-1, mode="lexical").answers]
    return faqs, answers, e.info()["counts"], bm25


def _same_state(a, b) -> None:
    assert a[:3] == b[:3]
    np.testing.assert_allclose(a[3], b[3], rtol=0.05)


def test_small_edits_write_a_delta_and_leave_the_base_files_alone(engine, tmp_path):
    path = str(tmp_path / "ix")
    g = engine.config["generation"]
    version = str(globals()["version"](path))
    base = {f: os.stat(os.path.join(version, f)).st_ino for f in ("vectors.npy", "ids.npy", "index.faiss",
                                                                    "whitening.npz")}
    blobs = {f: open(os.path.join(version, f), "rb").read() for f in base}
    engine.add([FAQ("n1", "new one", ["brand new wording"])])
    engine.update([FAQ("3", "a changed answer", ["question about topic3 number0", "an extra wording for three"])])
    engine.feedback("a customer wording for four", "4")
    assert str(globals()["version"](path)) == version  # edited in place: no new version directory
    assert {f: os.stat(os.path.join(version, f)).st_ino for f in base} == base
    assert {f: open(os.path.join(version, f), "rb").read() for f in base} == blobs
    config = json.load(open(os.path.join(version, "config.json")))
    assert config["generation"] == g + 3 and config["delta"]["file"] == f"delta-{g + 3}.npz"
    assert sorted(f for f in os.listdir(version) if f.startswith("delta-")) == [f"delta-{g + 2}.npz",
                                                                                f"delta-{g + 3}.npz"]
    assert engine.ask("brand new wording", mode="dense").answers[0].faq_id == "n1"
    assert engine.ask("an extra wording for three", mode="dense").answers[0].faq_id == "3"
    assert engine.show("3")["answer"] == "a changed answer"
    assert engine.ask("a customer wording for four", mode="dense").answers[0].faq_id == "4"
    engine.remove(["4"])  # a drop makes a new version: the one before it is kept whole, to restore
    assert str(globals()["version"](path)) != version and os.path.isdir(version)
    assert all(a.faq_id != "4" for a in engine.ask("question about topic4 number1", k=20, threshold=-1).answers)


@pytest.mark.slow
@pytest.mark.parametrize("index_type", ["flat", "hnsw", "ivf"])
def test_delta_edits_answer_like_a_rewrite(tmp_path, monkeypatch, index_type):
    """Any sequence of edits applied as deltas gives the same FAQs and the same answers (dense,
    lexical, hybrid; scores included) as the same sequence written as new bases each time."""
    import random

    import faqsearch.backends.embedded.editor as edits_mod

    rng = random.Random(7)
    corpus = write_corpus(tmp_path, BASE)
    edits = []
    for step in range(12):
        kind = rng.choice(["add", "update", "remove", "feedback", "add"])
        i = rng.randrange(20)
        if kind == "add":
            edits.append(("add", [FAQ(f"new{step}", f"answer new{step}", [f"novel wording {step} about parcels",
                                                                        f"another phrasing {step}"])]))
        elif kind == "update":
            edits.append(("update", [FAQ(str(i), f"answer{i} v{step}", [f"question about topic{i} number0",
                                                                         f"fresh wording {step} for topic{i}"])]))
        elif kind == "remove":
            edits.append(("remove", [str(i)]))
        else:
            edits.append(("feedback", (f"user words {step} topic{i}", str(i))))
    queries = ["novel wording about parcels", "question about topic5 number1", "fresh wording for topic7",
               "user words topic2", "another phrasing"]
    states = []
    for limit in (None, 0):
        ix = str(tmp_path / f"ix{limit}")
        if limit is not None:
            monkeypatch.setattr(edits_mod, "delta_limit", lambda n: 0)
        e = build_index(corpus, ix, encoder=FakeEncoder(dimension=24), threshold=-1, index_type=index_type,
                        self_fusion=False)
        for kind, arg in edits:
            try:
                if kind == "feedback":
                    e.feedback(*arg)
                else:
                    getattr(e, kind)(arg)
            except FAQSearchError:
                pass  # removing or feeding back an FAQ removed before: refused the same way both times
        has_delta = bool(e.config.get("delta"))
        assert has_delta == (limit is None)
        states.append(_state(e, queries))
        e.close()
        monkeypatch.undo()
    _same_state(states[0], states[1])


def test_a_growing_delta_is_compacted_into_a_new_base(engine, tmp_path, monkeypatch):
    import faqsearch.backends.embedded.editor as edits_mod

    monkeypatch.setattr(edits_mod, "delta_limit", lambda n: 4)
    path = str(tmp_path / "ix")
    first = version(path)
    engine.add([FAQ("n1", "one", ["first new wording", "second new wording"])])
    assert version(path) == first and engine.config["delta"]["added"] == 2
    engine.add([FAQ("n2", "two", ["third new wording", "fourth new wording", "fifth new wording"])])
    assert version(path) != first and "delta" not in engine.config  # a new base
    assert index_entries(tmp_path) == sorted(ENTRIES + ["ix/v<generation>"])  # the previous version is kept
    ids, raw = engine.raw_vectors()
    assert len(ids) == engine.info()["counts"]["questions"] == 65
    assert engine.ask("fifth new wording", mode="dense").answers[0].faq_id == "n2"
    assert engine.ask("first new wording", mode="dense").answers[0].faq_id == "n1"


def test_filters_and_refit_see_the_delta(engine):
    engine.add([FAQ("cat", "in a category", ["category restricted wording"], category="billing")])
    hits = engine.ask("category restricted wording", filters={"category": "billing"}, threshold=-1).answers
    assert [a.faq_id for a in hits] == ["cat"]
    engine.remove(["5"])
    from faqsearch.tuning import Setting

    engine.refit(Setting(beta=1.0, gamma=1.0, k=8, whiten=True))
    assert "delta" not in engine.config
    ids, _ = engine.raw_vectors()
    assert ids.tolist() == [q[0] for q in engine.store.all_questions()]
    assert engine.ask("category restricted wording", mode="dense").answers[0].faq_id == "cat"


def test_refit_does_not_commit_rows_a_killed_edit_left(engine, tmp_path):
    """A killed in-place edit leaves rows of generation G+1 in store.db; refit commits G+1 with the
    same store, so it must remove them first."""
    from faqsearch.backends.embedded.store import Store
    from faqsearch.tuning import current_setting

    g = int(engine.config.get("generation", 0))
    killed = Store(str(version(tmp_path / "ix") / "store.db"), generation=g + 1)
    killed.insert_faqs([FAQ("ghost", "never committed", ["a ghost question"])], gen=g + 1, first_id=10_000)
    killed.close()
    engine.refit(current_setting(engine.config))
    assert engine.config["generation"] == g + 1
    assert engine.store.faq("ghost") is None and engine.info()["counts"]["faqs"] == 20
    assert all(a.faq_id != "ghost" for a in engine.ask("a ghost question", k=20, threshold=-1, mode="lexical").answers)


def test_reports_name_every_faq_an_edit_touches_and_count_the_rest(engine):
    """unchanged_faqs is the FAQs an edit left alone (it was 0 whenever anything changed), and an FAQ
    that only loses questions (unassign, removing generated ones) is updated (it was listed nowhere)."""
    r = engine.feedback("my own words for topic three", "3").to_dict()
    assert (r["updated_faqs"], r["added_questions"], r["unchanged_faqs"]) == (["3"], 1, 19)
    r = engine.unassign("my own words for topic three", "3").to_dict()
    assert (r["updated_faqs"], r["removed_questions"], r["unchanged_faqs"]) == (["3"], 1, 19)
    r = engine.remove(["4", "5"]).to_dict()
    assert (r["removed_faqs"], r["unchanged_faqs"]) == (["4", "5"], 18)
    r = engine.add([FAQ("new", "new answer", ["a new question"])]).to_dict()
    assert (r["added_faqs"], r["updated_faqs"], r["unchanged_faqs"]) == (["new"], [], 18)
    r = engine.remove([]).to_dict()  # nothing to do: everything unchanged
    assert r["unchanged_faqs"] == 19 and not r["updated_faqs"]


def test_feedback_for_another_faqs_question_moves_it_or_says_why_not(engine):
    """A text that is already a question of FAQ A tied with itself when feedback added it to B (the
    answer stayed A, by a rounding difference, and nothing said so): a question feedback put on A
    moves to B; one of A's own is refused, naming A."""
    engine.feedback("my own words for topic three", "3")
    r = engine.feedback("my own words for topic three", "7").to_dict()
    assert sorted(r["updated_faqs"]) == ["3", "7"] and (r["added_questions"], r["removed_questions"]) == (1, 1)
    assert "my own words for topic three" not in [q["text"] for q in engine.show("3")["questions"]]
    assert engine.ask("my own words for topic three", k=1).answers[0].faq_id == "7"
    with pytest.raises(FAQSearchError, match="is a corpus question of FAQ 4"):
        engine.feedback("question about topic4 number1", "7")
    # case, spacing and the space before a sign change nothing an uncased encoder reads: the same tie
    for variant in ("QUESTION ABOUT TOPIC4 NUMBER1", "question  about topic4 number1", "Question About Topic4 Number1"):
        with pytest.raises(FAQSearchError, match="'question about topic4 number1',? (which )?is a corpus question of FAQ 4"):
            engine.feedback(variant, "7")
        assert variant not in [q["text"] for q in engine.show("7")["questions"]]
    engine.add([FAQ("ru", "ответ", ["как оплатить заказ?"])])  # case beyond ASCII: SQL's LIKE does not fold it
    with pytest.raises(FAQSearchError, match="reads as 'как оплатить заказ\\?', which is an added question of FAQ ru"):
        engine.feedback("КАК ОПЛАТИТЬ ЗАКАЗ?", "7")
    engine.add([FAQ("zh", "答", ["忘记登录密码怎么办？"])])  # width: "?" is what "？" reads as (NFKC)
    with pytest.raises(FAQSearchError, match="reads as '忘记登录密码怎么办？', which is an added question of FAQ zh"):
        engine.feedback("忘记登录密码怎么办?", "7")
    # sentence punctuation changes nothing either: without the "?" it passed, and the query then
    # matched FAQ 7 where FAQ ru had answered it at 99% (found by a hostile probe)
    for variant in ("как оплатить заказ", "«Как оплатить заказ»!", "忘记登录密码怎么办", "「忘记登录密码」怎么办。"):
        with pytest.raises(FAQSearchError, match="which is an added question of FAQ (ru|zh)"):
            engine.feedback(variant, "7")
    assert not engine.approve("ru", ["как оплатить заказ"]).to_dict()["added_questions"]  # it has it already
    r = engine.approve("8", ["Fresh words for eight?", "fresh words for eight"]).to_dict()
    assert r["added_questions"] == 1  # the second reads as the first
    engine.unassign("Fresh words for eight?", "8")
    engine.feedback("MY OWN WORDS FOR TOPIC THREE", "9")  # feedback's own question moves, whatever its case
    assert "my own words for topic three" not in [q["text"] for q in engine.show("7")["questions"]]
    engine.feedback("my own words for topic three", "7")
    assert "question about topic4 number1" in [q["text"] for q in engine.show("4")["questions"]]
    r = engine.approve("8", ["my own words for topic three", "fresh words for eight"]).to_dict()
    assert sorted(r["updated_faqs"]) == ["7", "8"] and (r["added_questions"], r["removed_questions"]) == (2, 1)


def test_an_update_without_a_category_column_keeps_the_stored_category(tmp_path):
    """`update` from a file with no category (or metadata) column wiped the FAQ's category, silently
    dropping it from `list --category` and `ask --category`; upsert (a whole export) and --replace
    still take the file as given."""
    corpus = tmp_path / "c.csv"
    corpus.write_text("id,question,answer,category,owner\n1,How do I reset it?,Use the link.,account,team-a\n"
                      "2,Where is my parcel?,Track it.,shipping,team-b\n", encoding="utf-8")
    e = build_index(str(corpus), tmp_path / "ix", threshold=-1)
    e.update([FAQ("1", "Use the new link.", ["How do I reset it?"])])
    shown = e.show("1")
    assert (shown["answer"], shown["category"], shown["metadata"]) == ("Use the new link.", "account", {"owner": "team-a"})
    # a file with some metadata columns keeps the keys it does not give (one column wiped the others)
    e.update([FAQ("1", "Use the new link.", ["How do I reset it?"], None, {"region": "eu"})])
    assert e.show("1")["metadata"] == {"owner": "team-a", "region": "eu"}
    e.update([FAQ("1", "Use the new link.", ["How do I reset it?"], None, {"owner": "team-c"})])
    assert e.show("1")["metadata"] == {"owner": "team-c", "region": "eu"}
    e.update([FAQ("1", "Use the new link.", ["How do I reset it?"])], replace=True)
    assert (e.show("1")["category"], e.show("1")["metadata"]) == (None, {})
    e.close()


def test_an_update_with_one_row_keeps_the_faqs_other_questions(engine, tmp_path):
    """#40.3: `update FILE` with one row for an FAQ, the natural way to change its answer, dropped its
    other questions ("2 questions removed" the only hint). They stay; --replace still gives it
    exactly the listed ones."""
    report = engine.update(write_corpus(tmp_path, [(4, "question about topic4 number0", "changed answer")]))
    assert report.updated_faqs == ["4"] and (report.added_questions, report.removed_questions) == (0, 0)
    assert engine.encoder.texts == []  # an answer-only change encodes nothing
    faq = engine.show("4")
    assert faq["answer"] == "changed answer"
    assert [q["text"] for q in faq["questions"]] == [f"question about topic4 number{j}" for j in range(3)]
    report = engine.update([FAQ("4", "changed answer", ["fresh phrasing four"])])
    assert (report.added_questions, report.removed_questions) == (1, 0) and engine.encoder.texts == ["fresh phrasing four"]
    assert len(engine.show("4")["questions"]) == 4
    assert engine.update([FAQ("4", "changed answer", ["question about topic4 number1"])]).changed is False
    report = engine.update([FAQ("4", "changed answer", ["fresh phrasing four"])], replace=True)
    assert report.removed_questions == 3
    assert [q["text"] for q in engine.show("4")["questions"]] == ["fresh phrasing four"]


def test_upsert_still_drops_the_questions_an_export_no_longer_lists(engine, tmp_path):
    """upsert makes the index match an export: after an update that kept FAQ 4's questions, an export
    listing one of them removes the other two (the stored content hash is of the questions FAQ 4 holds,
    not of the one row the update gave, or the export would look unchanged)."""
    engine.update(write_corpus(tmp_path, [(4, "question about topic4 number0", "changed answer")], "one.csv"))
    rows = [r for r in BASE if r[0] != 4] + [(4, "question about topic4 number0", "changed answer")]
    report = engine.upsert(write_corpus(tmp_path, rows, "export.csv"))
    assert report.updated_faqs == ["4"] and report.removed_questions == 2 and report.removed_faqs == []
    assert [q["text"] for q in engine.show("4")["questions"]] == ["question about topic4 number0"]


def test_one_field_of_an_faq_is_edited_by_id(engine):
    """update_faq: a new answer or category, or a question added, without restating the FAQ."""
    engine.feedback("a wording from feedback", "6")
    engine.encoder.texts.clear()
    report = engine.update_faq("6", answer="a brand new answer")
    assert report.updated_faqs == ["6"] and (report.added_questions, report.removed_questions) == (0, 0)
    assert engine.encoder.texts == []
    faq = engine.show("6")
    assert faq["answer"] == "a brand new answer" and len(faq["questions"]) == 4  # feedback's question stays
    engine.update_faq("6", category="billing", questions=["one more wording for six"])
    faq = engine.show("6")
    assert (faq["answer"], faq["category"]) == ("a brand new answer", "billing")
    assert faq["questions"][-1] == {**faq["questions"][-1], "text": "one more wording for six", "source": "added"}
    assert engine.ask("one more wording for six", threshold=-1).answers[0].faq_id == "6"
    with pytest.raises(UnknownFAQError, match="unknown FAQ id 'nope'"):
        engine.update_faq("nope", answer="x")
    with pytest.raises(InvalidOptionError, match="nothing to change"):
        engine.update_faq("6")
    with pytest.raises(CorpusError, match="^FAQ '6': the answer must be a non-blank string$"):  # no "<records>:"
        engine.update_faq("6", answer="   ")
    # a blank question to add is an error (it was dropped: "no changes"); a blank category takes it away
    with pytest.raises(InvalidOptionError, match="question 2 to add to FAQ '6' is blank"):
        engine.update_faq("6", questions=["fine words", " \u200b "])
    assert "fine words" not in [q["text"] for q in engine.show("6")["questions"]]
    engine.update_faq("6", category="")
    assert engine.show("6")["category"] is None and engine.list(category="billing") == []


def test_cli_update_keeps_questions_and_edits_one_field(run, tmp_path):
    ix = tmp_path / "ix"
    assert run("ingest", write_corpus(tmp_path, BASE), "--index", ix, "-q").exit_code == 0
    one = write_corpus(tmp_path, [(4, "question about topic4 number0", "changed answer")], "one.csv")
    result = run("update", one, "--index", ix)
    assert result.exit_code == 0 and "0 questions removed" in result.output, result.output
    shown = json.loads(run("show", "4", "--index", ix, "--json").output)
    assert shown["answer"] == "changed answer" and len(shown["questions"]) == 3
    result = run("update", "4", "--answer", "typed answer", "--category", "misc", "--question", "typed wording",
                 "--index", ix, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["added_questions"] == 1
    shown = json.loads(run("show", "4", "--index", ix, "--json").output)
    assert (shown["answer"], shown["category"], len(shown["questions"])) == ("typed answer", "misc", 4)
    result = run("update", "4", "--question", "", "--index", ix)
    assert result.exit_code != 0 and "is blank" in result.output, result.output
    assert run("update", "4", "--category", "", "--index", ix).exit_code == 0
    assert json.loads(run("show", "4", "--index", ix, "--json").output)["category"] is None
    result = run("update", "nope", "--answer", "x", "--index", ix)
    assert result.exit_code == 1 and "unknown FAQ id 'nope'" in result.output
    result = run("update", "4", "--answer", "x", "--replace", "--index", ix)
    assert result.exit_code == 2 and "--replace" in result.output


def test_ids_of_removed_vectors_are_never_reused(tmp_path):
    e = build_index(write_corpus(tmp_path, faq_rows(15, 3)), tmp_path / "ix", index_type="hnsw", threshold=-1)
    removed_text = "question about subject14 variant2"  # the last FAQ: it holds the largest ids
    top = max(q[0] for q in e.store.all_questions())
    e.remove(["f14"])
    e.add([FAQ("other", "unrelated answer", ["zebra xylophone quartz"] * 1 + ["zebra xylophone", "quartz zebra"])])
    assert min(q[0] for q in e.store.all_questions() if q[1] == "other") > top
    hits = e.ask(removed_text, k=5, mode="dense").answers
    assert all(a.faq_id != "other" for a in hits), [(a.faq_id, a.score) for a in hits]
    e.close()


def test_an_edit_made_from_an_old_read_is_refused_and_changes_nothing(engine):
    """show() gives an FAQ's revision; update(revisions=...) made from that read is refused where the
    FAQ changed since (feedback, an approval, another edit), so a form saved from an old read cannot
    drop what came meanwhile. The check runs under the writer's lock, with the edit."""
    from faqsearch.errors import StaleRevisionError

    read = engine.show("3")
    assert len(read["revision"]) == 16 and engine.show("3")["revision"] == read["revision"]  # stable
    engine.feedback("words that came meanwhile", "3")
    now = engine.show("3")
    assert now["revision"] != read["revision"]
    form = FAQ("3", "an edited answer", [q["text"] for q in read["questions"]])
    with pytest.raises(StaleRevisionError, match="FAQ '3' changed since it was read"):
        engine.update([form], replace=True, revisions={"3": read["revision"]})
    assert engine.show("3") == now  # nothing written
    engine.update([FAQ("3", "an edited answer", [q["text"] for q in now["questions"]])], replace=True,
                  revisions={"3": now["revision"]})
    assert engine.show("3")["answer"] == "an edited answer"
    assert "words that came meanwhile" in [q["text"] for q in engine.show("3")["questions"]]
    with pytest.raises(UnknownFAQError):
        engine.update([form], revisions={"nope": "0" * 16})


def test_approving_a_generated_question_makes_it_the_persons_and_augment_remove_keeps_it(engine):
    """An approved (or fed back) phrasing that a generator had put there stayed 'generated', so
    `augment --remove` deleted what a person had approved. It becomes theirs; a text the FAQ has up to
    case and spacing is not added twice, nor are two that read alike in one approval."""
    from faqsearch.edits import plan as plans

    engine._edit("augment", lambda s: plans.Edit("generated", new_questions=[("3", "a generated wording for three"),
                                                                             ("5", "generated words for five")]))
    assert {q["text"]: q["source"] for q in engine.show("3")["questions"]}["a generated wording for three"] == "generated"
    r = engine.approve("3", ["A generated wording  for three", "one more for three", "ONE MORE FOR THREE"]).to_dict()
    assert (r["added_questions"], r["removed_questions"]) == (2, 1)
    engine.feedback("generated words for five", "5")
    engine.remove_generated()
    three = {q["text"]: q["source"] for q in engine.show("3")["questions"]}
    assert three["A generated wording for three"] == "approved" and three["one more for three"] == "approved"
    assert "a generated wording for three" not in three  # the person's words took the generator's place
    assert "ONE MORE FOR THREE" not in three
    assert {q["text"]: q["source"] for q in engine.show("5")["questions"]}["generated words for five"] == "feedback"
    assert engine.approve("3", ["One more for three"]).to_dict()["added_questions"] == 0  # it has it
    # the person's own words replace the generated ones, so that unassigning them finds them
    engine._edit("augment", lambda s: plans.Edit("generated", new_questions=[("6", "how do i pay in six")]))
    engine.feedback("HOW DO I PAY IN SIX", "6")
    six = {q["text"]: q["source"] for q in engine.show("6")["questions"]}
    assert six.get("HOW DO I PAY IN SIX") == "feedback" and "how do i pay in six" not in six
    engine.unassign("HOW DO I PAY IN SIX", "6")
    assert "HOW DO I PAY IN SIX" not in {q["text"] for q in engine.show("6")["questions"]}


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/self/fd")
def test_edits_do_not_keep_the_stores_they_swapped_out_open(engine):
    """Each edit swaps in a new version's store; the old connection stayed open (with its file, deleted
    once the version went) until a garbage collection: 60 deleted store.db held after 20 edit pairs."""
    import gc

    def deleted_stores():
        out = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                out += os.readlink(f"/proc/self/fd/{fd}").endswith("store.db (deleted)")
            except OSError:
                pass
        return out
    gc.collect()
    gc.disable()
    try:
        for i in range(8):  # more than the kept versions, so the first ones' files are deleted
            engine.add([FAQ(f"t{i}", "x", [f"question about gadget {i}"])])
            engine.remove([f"t{i}"])
            engine.ask("gadget")
        assert deleted_stores() == 0
    finally:
        gc.enable()


def test_a_call_using_the_store_when_another_thread_closes_it_gets_a_closed_error(engine):
    """close() while other threads asked gave them sqlite3.ProgrammingError (not a FAQSearchError), and an
    edit's store check said store.db was damaged, advising a rebuild that loses edits."""
    from faqsearch.errors import ClosedError, FAQSearchError

    store = engine.snapshot.store
    engine.close()  # what another thread's close() does to a store this call still holds
    for call in (lambda: store.doc_freqs(["topic"]), lambda: store.check_integrity(engine.path),
                 lambda: store.faq("3"), lambda: store.list_faqs()):
        with pytest.raises(ClosedError, match="was closed while this call was using it"):
            call()
    with pytest.raises(ClosedError):
        with store._conn:  # a transaction's end
            pass
    assert issubclass(ClosedError, FAQSearchError)


def test_an_engine_whose_index_was_dropped_says_it_is_gone(engine, tmp_path):
    """An edit said "no index at X yet (an ingest there did not finish)" and a reload advised an ingest by
    name alone, for an index another process had dropped or renamed."""
    from faqsearch.errors import IndexNotFoundError
    from faqsearch.manage import rename_index

    rename_index(engine.path, str(tmp_path / "moved"))
    for call in (lambda: engine.add([FAQ("z", "a", ["a question about zebras"])]), engine.reload):
        with pytest.raises(IndexNotFoundError, match="is gone: dropped, renamed or moved since it was opened"):
            call()
    assert not os.path.exists(engine.path)  # the edit made nothing there
    assert engine.ask("question about topic3 number0").answers  # it answers from the version it holds


def test_an_id_given_with_spaces_around_it_is_named_as_the_one_to_give(engine):
    """Ingest stores ids without the spaces around them; `show " 4 "` then said only "unknown FAQ id"."""
    from faqsearch.errors import UnknownFAQError

    for call in (lambda: engine.show(" 4 "), lambda: engine.feedback("some words", " 4"), lambda: engine.remove([" 4 "])):
        with pytest.raises(UnknownFAQError, match=r"unknown FAQ id ' ?4 ?'; did you mean '4'\?"):
            call()
    with pytest.raises(UnknownFAQError, match="unknown FAQ id 'nope'; the FAQs are listed by"):
        engine.show("nope")


def test_add_and_update_warn_of_a_question_another_faq_keeps(engine, caplog):
    """add and update gave an FAQ another FAQ's question in silence: the two then tied at 1.0 (a hostile
    probe); ingest warned of it within a corpus. They warn the same way (the edit still goes through)."""
    held = engine.show("4")["questions"][0]["text"]
    with caplog.at_level("WARNING"):
        engine.add([FAQ("zz", "another answer", [held.upper() + "?"])])
    said = [r.getMessage() for r in caplog.records if "read as one another FAQ keeps" in r.getMessage()]
    assert said and f"of FAQ zz, and {held!r} of FAQ 4" in said[0], said
    caplog.clear()
    with caplog.at_level("WARNING"):
        engine.update([FAQ("zz", "another answer", ["a wording of its own"])], replace=True)  # gone from zz: no tie
        engine.add([FAQ("zy", "a third answer", ["nothing like any other"])])
    assert not [r for r in caplog.records if "read as one another FAQ keeps" in r.getMessage()]
    caplog.clear()
    with caplog.at_level("WARNING"):  # past the questions it checks, the count says how many it checked
        engine.add([FAQ(f"c{i}", f"copy {i}", [f"question about topic{i % 20} number{i // 20}"]) for i in range(250)])
    said = [r.getMessage() for r in caplog.records if "read as one another FAQ keeps" in r.getMessage()]
    assert said and said[0].startswith("60 of the first 200 of its 250 question(s)"), said


def test_an_upsert_that_removes_judged_questions_says_so(tmp_path, caplog):
    """An id-less corpus whose answer was edited: upsert made a new FAQ and removed the old one with the
    feedback it held, said only as "1 removed" (a hostile probe). It warns, naming the question."""
    from .conftest import FakeEncoder

    first = tmp_path / "a.csv"
    first.write_text("question,answer\nCan I return a jacket?,Returns are free for 30 days.\nHow do I pay?,By card.\n")
    with FAQSearch.build(str(first), str(tmp_path / "ix"), encoder=FakeEncoder(), threshold=-1, self_fusion=False) as e:
        jacket = e.list(contains="jacket")[0]["id"]
        e.feedback("i want my money back for this jacket", jacket)
        edited = tmp_path / "b.csv"
        edited.write_text("question,answer\nCan I return a jacket?,Returns are free for 60 days.\nHow do I pay?,By card.\n")
        with caplog.at_level("WARNING"):
            report = e.upsert(str(edited))
        assert report.removed_faqs == [jacket]
        said = [r.getMessage() for r in caplog.records if "people assigned" in r.getMessage()]
        assert len(said) == 1 and f"hold 1 question(s) people assigned by feedback or approval (the first in FAQ {jacket})" \
            in said[0] and "money back" not in said[0]  # a user's query is never quoted into logs


def test_unassign_takes_out_what_feedback_took_in_whatever_its_punctuation(engine):
    """Found by a hostile run: feedback and approve compare texts as they read (punctuation, case, width
    aside), so "外汇额度是多少？" was "already" a question after "外汇额度是多少", but unassign of it was
    refused: "the FAQ has no such question". The log's assignment of the text taken out is cleared too."""
    from faqsearch.querylog import QueryLog
    from faqsearch.traffic import Traffic

    engine.ask("外汇额度是多少", log=True)
    with Traffic.existing(engine.path) as traffic:
        traffic.feedback(engine, "外汇额度是多少", "3")
        assert traffic.feedback(engine, "外汇额度是多少？", "3").added_questions == 0  # the same question
        traffic.unassign(engine, "外汇额度是多少？", "3")
    assert "外汇额度是多少" not in [q["text"] for q in engine.show("3")["questions"]]
    engine.approve("4", ["Where Is My Refund"])
    engine.unassign("where is my refund?", "4")
    assert [q["source"] for q in engine.show("4")["questions"]] == ["corpus"] * 3
    with pytest.raises(FAQSearchError, match="it is one of its corpus questions"):
        engine.unassign("QUESTION ABOUT TOPIC4 NUMBER1?", "4")
    log = QueryLog.for_index(engine.path)
    try:
        assert [r["feedback_faq"] for r in log.recent(10) if r["query"] == "外汇额度是多少"] == [None]
    finally:
        log.close()


def test_questions_in_a_script_the_encoder_does_not_read_are_warned_of_at_ingest_and_in_edits(tmp_path, caplog):
    """Found by a hostile run: Chinese FAQs added to an index on the English MiniLM, or a corpus under half
    Chinese (ingest keeps MiniLM), were indexed in silence, and unrelated Chinese questions then got
    confident answers. Both say how many questions it cannot read and what to do."""
    import logging

    from faqsearch.encoders import unread_questions

    class Latin(CountingEncoder):
        name = "minilm"  # an encoder that reads Latin script only, as the bundled one

    assert unread_questions({"name": "minilm"}, ["How do I pay?", "网银怎么开通", "可以用PayPal付款吗", "Где мой заказ?"]) == \
        ["网银怎么开通", "可以用PayPal付款吗", "Где мой заказ?"]
    assert unread_questions({"name": "use-multilingual"}, ["网银怎么开通"]) == []
    rows = BASE[:30] + [(90, "网银怎么开通", "请到柜台"), (91, "信用卡年费多少", "免年费")]
    with caplog.at_level(logging.WARNING):
        e = FAQSearch.build(write_corpus(tmp_path, rows), str(tmp_path / "ix"), encoder=Latin(dimension=24), threshold=-1)
    assert "2 of 32 questions are written mostly in Han script" in caplog.text and "--model use-multilingual" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        e.add([FAQ("zz", "答", ["外汇额度是多少"])])
        assert "1 of 1 questions are written mostly in Han script" in caplog.text
        caplog.clear()
        e.add([FAQ("en", "yes", ["can I pay with PayPal"])])
    assert "Han script" not in caplog.text
    with caplog.at_level(logging.WARNING):  # every emoji is one unknown token to it: 👎 matched 👍 at 1.0
        e.add([FAQ("up", "Glad we could help!", ["👍"])])
    assert "1 of 1 questions are written mostly in symbols alone (emoji)" in caplog.text
    assert "give those FAQs a question in words" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # Spanish on MiniLM: read as English words (a second reading)
        e.add([FAQ("es", "Sí", ["¿Cómo puedo cambiar mi contraseña?", "¿Dónde está mi paquete?"])])
    assert "read as a language other than English" in caplog.text and "--model use-multilingual" in caplog.text
    e.close()


def test_an_upsert_sharing_no_id_with_the_index_is_refused(engine, tmp_path):
    """A file whose ids changed (an id column under another name, or none: ids made from the answers)
    made upsert remove every FAQ and add them all again, exit 0; it is refused, naming the column and
    `ingest --replace`, and nothing is written."""
    from faqsearch.errors import WouldDropError

    before = _files(engine.path)
    renamed = tmp_path / "renamed.csv"
    renamed.write_text("key,question,answer\n" + "".join(f"{i},{q},{a}\n" for i, q, a in BASE), encoding="utf-8")
    with pytest.raises(WouldDropError, match=r"shares no FAQ id with the index: an upsert would remove all 20 FAQs.*"
                                             r"faqsearch ingest FILE --replace"):
        engine.upsert(str(renamed))
    assert _files(engine.path) == before
    kept = tmp_path / "one.csv"  # one id in common: an ordinary sync that removes the others
    kept.write_text("id,question,answer\n0,question about topic0 number0,answer0\n", encoding="utf-8")
    assert len(engine.upsert(str(kept)).removed_faqs) == 19


def test_an_id_stored_by_an_older_faqsearch_that_it_would_clean_now_is_still_updated(tmp_path):
    """An id ending in a zero-width space (kept before 2026-11-28, cleaned since): update_faq found it, then
    planned the cleaned id, and added a second FAQ instead of updating it (a second reading)."""
    import glob
    import sqlite3

    path = str(tmp_path / "ix")
    FAQSearch.build([FAQ("f1", "Card.", ["How do I pay?"]), FAQ("f2", "Here.", ["Where is it?"])], path,
                    encoder=FakeEncoder()).close()
    db = sqlite3.connect(glob.glob(os.path.join(path, "v*", "store.db"))[0])
    db.execute("update questions set faq_id = 'f1\u200b' where faq_id = 'f1'")
    db.execute("update faqs set id = 'f1\u200b' where id = 'f1'")
    db.commit()
    db.close()
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        report = e.update_faq("f1\u200b", answer="Cash.")
        assert report.added_faqs == [] and [(f["id"], f["answer"]) for f in e.list()] == [("f1\u200b", "Cash."),
                                                                                           ("f2", "Here.")]
        # an upsert of the file it came from (the id read as "f1" today) updates that FAQ, keeping its feedback
        e.feedback("paying at the till", "f1\u200b")
        sheet = tmp_path / "sheet.csv"
        sheet.write_text("id,question,answer\n\u200ff1,How do I pay?,Cash or card.\nf2,Where is it?,Here.\n", encoding="utf-8")
        report = e.upsert(str(sheet))
        assert (report.added_faqs, report.removed_faqs, report.updated_faqs) == ([], [], ["f1\u200b"])
        assert [q["source"] for q in e.show("f1\u200b")["questions"]] == ["corpus", "feedback"]


def test_a_users_query_taken_out_leaves_no_trace_in_the_live_version(engine):
    """Found by a privacy probe: unassign or remove marked the row of a phrasing that was a user's query
    (feedback, approve) as removed, so the live version's store.db kept its text, and its words in the
    full-text index, until a compaction 1,000 changes later. Such an edit is now written as one, its
    freed pages zeroed and FTS5 rewritten without the words; the version before it keeps them, for restore."""
    def live_bytes():
        return b"".join(data for name, data in index_files(version(engine.path)).items())

    before = version(engine.path)
    engine.feedback("zyxalpha my card 4111111111111111 is lost", "3")
    engine.approve("4", ["call qwvbeta on 07700900123 about it"])
    engine.feedback("a wording kept by a person", "2")
    assert b"zyxalpha" in live_bytes() and b"qwvbeta" in live_bytes()
    engine.unassign("zyxalpha my card 4111111111111111 is lost", "3")
    engine.remove(["4"])
    data = live_bytes()
    for word in (b"zyxalpha", b"4111111111111111", b"qwvbeta", b"07700900123"):
        assert word not in data, word
    assert b"wording kept" in data and engine.show("2")["questions"][-1]["source"] == "feedback"
    assert engine.ask("zyxalpha card", k=1, mode="lexical").answers == []
    assert engine.ask("a wording kept by a person", k=1).answers[0].faq_id == "2"
    assert version(engine.path) != before  # a compaction: the versions kept for restore still hold the text


def test_a_phrasing_moved_to_another_faq_is_no_erasure(engine):
    """Feedback that moves a user's phrasing to another FAQ (the page's "Wrong answer? The right FAQ is...")
    keeps the text in the index: it is written as the delta it always was, not as a compaction."""
    engine.feedback("where is parcel 42", "3")
    engine.feedback("Where is parcel 42?", "4")  # the latest judgement wins: moved from 3 to 4
    assert engine.snapshot.config.delta is not None  # a delta (a compaction folds it in and records none)
    assert [q["text"] for q in engine.show("4")["questions"] if q["source"] == "feedback"] == ["Where is parcel 42?"]
