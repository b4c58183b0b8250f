"""Calibrated scores (the full-dimensional cosine, whatever k), a threshold each index
chooses for itself, and `tune --threshold` with labels."""
from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest

from faqsearch import FAQSearch
from faqsearch.tuning import calibrate, needs_recalibration, tune, tune_threshold
from faqsearch.whitening import Whitening

from .conftest import SAMPLE, SHARED_DATA, FakeEncoder


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("beta,gamma,k", [(0.0, 0.0, 8), (0.5, 0.0, 8), (1.0, 1.0, 16), (0.5, 0.5, 8)])
def test_full_transform_is_the_explicit_formula(beta, gamma, k):
    """full(x) = (x - beta mu) U max(Lambda, lambda_k)^(-gamma/2), all d directions, L2-normalised:
    for a rotation the cosine of x - beta mu; for k = d the classic transform."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 16)).astype(np.float32) @ rng.standard_normal((16, 16)).astype(np.float32)
    w = Whitening.fit(x, beta=beta, gamma=gamma, k=k)
    q = rng.standard_normal((5, 16)).astype(np.float32) * 3
    mu = x.mean(0)
    u, s, _ = np.linalg.svd(np.cov(x.T.astype(np.float64)))
    want = unit((q - beta * mu) @ (u * np.maximum(s, s[k - 1]) ** (-gamma / 2)))
    got = w.full(q)
    # scores are what matter: cosines between vectors (coordinates may differ by a rotation)
    np.testing.assert_allclose(got @ got.T, want @ want.T, atol=2e-4)
    if gamma == 0:
        np.testing.assert_allclose(got @ got.T, unit(q - beta * mu) @ unit(q - beta * mu).T, atol=1e-5)
    if k == 16:
        t = w.transform(q)
        np.testing.assert_allclose(got @ got.T, t @ t.T, atol=2e-4)


def test_scores_are_full_dimensional_cosines_whatever_k(tmp_path, small_corpus):
    """A k=4 index (of 32 dims) ranks and scores by the raw cosine: the same answers and scores as
    an index that keeps every dimension, and pair scores are the raw cosine."""
    enc = FakeEncoder()
    cut = FAQSearch.build(small_corpus, str(tmp_path / "cut"), encoder=enc, k=4)
    whole = FAQSearch.build(small_corpus, str(tmp_path / "whole"), encoder=enc, whiten=False)
    queries = ["reset password", "shipping abroad time", "return policy item", "password link forgot"]
    for a, b in zip(cut.ask_many(queries, k=4, threshold=-1, mode="dense"),
                    whole.ask_many(queries, k=4, threshold=-1, mode="dense")):
        assert [x.faq_id for x in a.answers] == [x.faq_id for x in b.answers]
        np.testing.assert_allclose([x.score for x in a.answers], [x.score for x in b.answers], atol=1e-5)
    v = unit(enc.encode(["reset password", "How do I reset my password?"]))
    got = cut.searcher().pair_scores(["reset password"], ["How do I reset my password?"])[0]
    assert got == pytest.approx(float(v[0] @ v[1]), abs=1e-5)


@pytest.mark.slow
def test_a_new_topic_added_after_ingest_scores_its_raw_cosine(tmp_path, minilm):
    """The issue's example: an FAQ on a topic the transform was not fitted on, added later, scores its
    paraphrases at their raw cosine (within 0.02) and answers them."""
    e = FAQSearch.build(os.path.join(SAMPLE, "faq.csv"), str(tmp_path / "ix"), encoder=minilm)
    new = tmp_path / "new.csv"
    new.write_text("id,question,answer\npet-1,How do I feed my pet axolotl?,Worms and pellets.\n", encoding="utf-8")
    e.add(str(new))
    for para in ("what food should I give an axolotl", "axolotl diet advice"):
        r = e.ask(para, k=1)
        v = unit(minilm.encode([para, "How do I feed my pet axolotl?"]))
        assert r.answers and r.answers[0].faq_id == "pet-1"
        assert abs(r.best_score - float(v[0] @ v[1])) <= 0.02


def test_the_index_chooses_its_threshold_and_says_how(tmp_path, run):
    """Without --threshold the index calibrates itself (positives: held-out variants; negatives: the
    shipped out-of-scope questions); info names how; --threshold given is kept as given."""
    rows = [("id", "question", "answer")]
    for i in range(14):
        words = f"topic{i} alpha{i} beta{i}"
        rows += [(f"f{i}", f"how do I {words} now", f"answer {i}"), (f"f{i}", f"{words} help please", f"answer {i}"),
                 (f"f{i}", f"question about {words}", f"answer {i}")]
    corpus = tmp_path / "faq.csv"
    with open(corpus, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    ix = str(tmp_path / "ix")
    out = run("ingest", str(corpus), "--index", ix, "--json")
    summary = json.loads(out.stdout)
    assert summary["calibration"]["chosen_by"] == "self-calibrated"
    assert summary["calibration"]["positives"] >= 10 and summary["calibration"]["negatives"] >= 100
    assert 0.3 <= summary["threshold"] <= 0.8
    assert "chosen by the index from" in run("info", "--index", ix).stdout
    out = run("ingest", str(corpus), "--index", str(tmp_path / "given"), "--threshold", "0.61", "--json")
    assert json.loads(out.stdout)["threshold"] == 0.61
    assert json.loads(out.stdout)["calibration"]["chosen_by"] == "given"
    assert "given at ingest" in run("info", "--index", str(tmp_path / "given")).stdout


def test_a_self_calibrated_threshold_follows_the_index_as_it_grows(tmp_path, small_corpus, fake_encoder):
    e = FAQSearch.build(small_corpus, str(tmp_path / "ix"), encoder=fake_encoder)
    calib = e.config["calibration"]
    assert calib["chosen_by"] == "self-calibrated" and calib["questions"] == 6
    assert not needs_recalibration(e.config, 6) and needs_recalibration(e.config, 7)
    new = tmp_path / "new.csv"
    new.write_text("id,question,answer\n9,Where is my parcel?,Track it.\n", encoding="utf-8")
    e.add(str(new))
    assert e.config["calibration"]["questions"] == 7  # chosen again: the index grew by a tenth
    given = FAQSearch.build(small_corpus, str(tmp_path / "given"), encoder=fake_encoder, threshold=0.7)
    assert given.config["confidence"]["questions"] == 6 and needs_recalibration(given.config, 7) == "confidence"
    given.add(str(new))
    assert given.threshold == 0.7 and given.config["calibration"]["chosen_by"] == "given"
    # the confidence beside it is the index's own, learned again as it grew (the threshold a person gave stays)
    assert given.config["confidence"] == calibrate(given.searcher()).confidence_section()
    assert given.config["confidence"]["questions"] == 7


def test_an_edit_is_committed_when_choosing_the_confidence_again_fails(tmp_path, small_corpus, fake_encoder,
                                                                       monkeypatch, caplog):
    """The recalibration after an edit is a commit of its own: Milvus going down there (or a full disk)
    raised a traceback after the edit had been committed, which read as a failed edit. It is a warning
    now; the edit stands, and the next one tries again."""
    from faqsearch.errors import StorageError
    from faqsearch.tuning import threshold

    e = FAQSearch.build(small_corpus, str(tmp_path / "ix"), encoder=fake_encoder)
    before = e.config["calibration"]

    def down(encoder):
        def changes(snap):
            raise StorageError("cannot reach Milvus at http://127.0.0.1:1 (down)")
        return changes

    monkeypatch.setattr(threshold, "recalibrated", down)
    new = tmp_path / "new.csv"
    new.write_text("id,question,answer\n9,Where is my parcel?,Track it.\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        report = e.add(str(new))
    assert report.added_faqs == ["9"] and e.show("9")["answer"] == "Track it."
    assert any("the add is committed, but choosing the index's confidence again failed" in r.getMessage()
               for r in caplog.records)
    assert e.config["calibration"] == before  # not chosen again: the next edit tries
    monkeypatch.undo()
    e.add([{"id": "10", "question": "Do you ship abroad?", "answer": "Yes."}])
    assert e.config["calibration"]["questions"] == 8
    e.close()


def test_ctrl_c_while_the_confidence_is_chosen_again_says_the_edit_stands(tmp_path, small_corpus, fake_models,
                                                                        monkeypatch, run):
    """Ctrl-C after an add had committed printed "Aborted!" (exit 1): a retry then said the FAQs were already
    there. The message says the edit stands and how the confidence is chosen again."""
    from faqsearch.tuning import threshold

    ix = str(tmp_path / "ix")
    FAQSearch.build(small_corpus, ix).close()

    def interrupted(encoder):
        raise KeyboardInterrupt()

    monkeypatch.setattr(threshold, "recalibrated", interrupted)
    new = tmp_path / "new.csv"
    new.write_text("id,question,answer\n9,Where is my parcel?,Track it.\n", encoding="utf-8")
    r = run("add", str(new), "--index", ix)
    assert r.exit_code == 1 and "Interrupted: the add is committed; interrupted while the index chose its " \
        "confidence again (the next edit does it, or: faqsearch tune threshold --self --apply)." in r.stderr
    with FAQSearch.open(ix) as e:
        assert e.show("9")["answer"] == "Track it."


def test_a_confidence_that_cannot_be_learned_again_is_kept(tmp_path, small_corpus, fake_encoder, monkeypatch):
    """An edit's recalibration whose fit fails (too few right or wrong answers for a moment) keeps the
    confidence the index had, beside a given threshold too: it used to store none, and nothing learned
    it again after that."""
    import faqsearch.tuning.threshold as threshold_mod

    given = FAQSearch.build(small_corpus, str(tmp_path / "given"), encoder=fake_encoder, threshold=0.7)
    before = given.config["confidence"]
    assert before is not None

    def cannot(*a, **k):
        raise ValueError("the confidence needs both right and wrong first answers to learn from")

    monkeypatch.setattr(threshold_mod.conf, "fit", cannot)
    new = tmp_path / "new.csv"
    new.write_text("id,question,answer\n9,Where is my parcel?,Track it.\n", encoding="utf-8")
    given.add(str(new))
    assert given.config["confidence"] == before and given.threshold == 0.7
    monkeypatch.undo()
    more = tmp_path / "more.csv"
    more.write_text("id,question,answer\n10,Can I pay by card?,Yes.\n", encoding="utf-8")
    given.add(str(more))
    assert given.config["confidence"]["questions"] == 8  # learned again on the next growth by a tenth
    given.close()


def test_ingest_commits_its_calibration_with_the_build_or_nothing(tmp_path, small_corpus, fake_encoder, monkeypatch):
    """The self-tuned weight and threshold are measured on the new version before it is committed and
    committed with it, in one commit: an ingest interrupted while calibrating leaves the old version
    (it used to leave the new one live with the default threshold 0.5, after printing 'Aborted!'),
    and two ingests one after the other never give one's contents with the other's threshold."""
    import faqsearch.tuning.threshold as threshold_mod

    ix = str(tmp_path / "ix")
    e = FAQSearch.build(small_corpus, ix, encoder=fake_encoder)
    assert e.config["generation"] == 1 and e.config["calibration"]["chosen_by"] == "self-calibrated"
    before = (e.config["threshold"], e.config["counts"], e.config["index_id"])
    e.close()
    bigger = tmp_path / "bigger.csv"
    bigger.write_text("id,question,answer\n" + "".join(f"{i},How do I reach desk number {i}?,Floor {i}.\n"
                                                        for i in range(30)), encoding="utf-8")

    def interrupted(*a, **k):
        raise KeyboardInterrupt()

    monkeypatch.setattr(threshold_mod, "calibrate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        FAQSearch.build(str(bigger), ix, encoder=fake_encoder, force=True)
    monkeypatch.undo()
    with FAQSearch.open(ix, encoder=fake_encoder) as again:
        assert (again.config["threshold"], again.config["counts"], again.config["index_id"]) == before
        assert sorted(os.listdir(ix)) == ["CURRENT", "LOCK", "v00000001"]  # the half-built version is gone
    e = FAQSearch.build(str(bigger), ix, encoder=fake_encoder, force=True)
    assert e.config["generation"] == 2 and e.config["counts"]["faqs"] == 30
    assert e.config["calibration"]["questions"] == 30  # chosen on its own rows
    e.close()


def test_refit_chooses_a_self_calibrated_threshold_again(tmp_path, small_corpus, fake_encoder):
    """A refit moves every score with the transform: a threshold the index chose itself is chosen
    again on the new scores (it was kept, so a refit to beta=0.5 gamma=1 k=64 of sample_data left
    0.492 where 0.358 is chosen, and answered-right fell from 87.4% to 66.7%); a given one is kept."""
    from faqsearch.tuning import Setting

    e = FAQSearch.build(small_corpus, str(tmp_path / "ix"), encoder=fake_encoder)
    e.refit(Setting(True, 1.0, 1.0, 8))
    assert e.config["calibration"]["chosen_by"] == "self-calibrated" and e.config["whitening"]["gamma"] == 1.0
    assert e.threshold == calibrate(e.searcher()).threshold
    e.refit(Setting(True, 1.0, 1.0, 8), threshold=0.66)  # given now: it stays through the edits that follow
    assert e.threshold == 0.66 and e.config["calibration"]["chosen_by"] == "given"
    new = tmp_path / "new.csv"
    new.write_text("id,question,answer\n9,Where is my parcel?,Track it.\n", encoding="utf-8")
    e.add(str(new))
    assert e.threshold == 0.66 and e.config["confidence"]["questions"] == 7
    e.close()
    given = FAQSearch.build(small_corpus, str(tmp_path / "given"), encoder=fake_encoder, threshold=0.7)
    before = given.config["confidence"]
    given.refit(Setting(True, 1.0, 1.0, 8))
    assert given.threshold == 0.7 and given.config["calibration"]["chosen_by"] == "given"
    # the confidence shown beside a given threshold is the index's own: learned again on the new scores
    assert given.config["confidence"] == calibrate(given.searcher()).confidence_section() != before
    given.close()


@pytest.mark.parametrize("backend", ["embedded", pytest.param("milvus", marks=pytest.mark.slow)])
def test_refit_commits_its_transform_with_the_threshold_chosen_again_or_nothing(tmp_path, small_corpus, fake_encoder,
                                                                                  monkeypatch, backend):
    """#40 N4: a refit committed the new transform, then chose its threshold and confidence again in a
    second commit; killed between the two (15 of 20 SIGKILLs) it left the new transform with the old
    threshold while `info` said "chosen by the index". Now they are measured on the staged version and
    committed with it, in one commit: interrupted while calibrating, the index keeps its old transform
    and threshold."""
    import faqsearch.tuning.threshold as threshold_mod
    from faqsearch.tuning import Setting

    if backend == "milvus":
        pytest.importorskip("milvus_lite")
    kw = {"backend": "milvus", "uri": str(tmp_path / "m.db")} if backend == "milvus" else {}
    e = FAQSearch.build(small_corpus, str(tmp_path / "ix"), encoder=fake_encoder, **kw)
    assert e.config["calibration"]["chosen_by"] == "self-calibrated"
    before = {k: e.config[k] for k in ("whitening", "threshold", "calibration", "confidence", "generation")}

    def interrupted(*a, **k):
        raise KeyboardInterrupt()

    monkeypatch.setattr(threshold_mod, "calibrate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        e.refit(Setting(True, 0.5, 0.5, 8))
    monkeypatch.undo()
    with FAQSearch.open(e.path, encoder=fake_encoder) as again:
        assert {k: again.config[k] for k in before} == before
        assert again.ask("How long does shipping take?").answers[0].faq_id == "2"
    e.refit(Setting(True, 0.5, 0.5, 8))
    assert e.config["generation"] == before["generation"] + 1  # one commit
    assert e.config["whitening"]["beta"] == 0.5 and e.threshold == calibrate(e.searcher()).threshold
    assert e.config["confidence"] == calibrate(e.searcher()).confidence_section()
    e.close()


def test_labelled_threshold_maximises_right_minus_out_of_scope(tmp_path, small_corpus, fake_encoder):
    from faqsearch.evaluation import LabelledQuery

    e = FAQSearch.build(small_corpus, str(tmp_path / "ix"), encoder=fake_encoder)
    queries = [LabelledQuery("reset my password", {"1"}, 1), LabelledQuery("shipping take how long", {"2"}, 2),
               LabelledQuery("return an item", {"3"}, 3)]
    off = ["weather in paris tomorrow", "tell me a joke", "capital of australia"]
    report = tune_threshold(e.searcher(), queries, off)
    s = e.searcher()
    right = [r.best_score for r, q in zip(s.answer([q.text for q in queries], k=1, threshold=-1), queries)
             if r.nearest.faq_id in q.gold]
    worst_off = max(r.best_score for r in s.answer(off, k=1, threshold=-1))
    if min(right) > worst_off:  # separable: every in-scope answered, no out-of-scope one
        assert worst_off < report.threshold <= min(right)
    assert report.chosen_by == "labelled" and report.rows
    e.set_threshold(report)
    assert e.threshold == report.threshold and e.config["calibration"]["chosen_by"] == "labelled"
    assert calibrate(e.searcher()).chosen_by == "self-calibrated"


def test_tune_threshold_cli(tmp_path, run, small_corpus):
    ix = str(tmp_path / "ix")
    run("ingest", small_corpus, "--index", ix)
    q = tmp_path / "q.csv"
    q.write_text("query,faq_id\nreset my password,1\nreturn an item,3\n", encoding="utf-8")
    off = tmp_path / "off.txt"
    off.write_text("weather in paris\ntell me a joke\n", encoding="utf-8")
    res = run("tune", str(q), "--threshold", "--index", ix)
    assert res.exit_code != 0 and "--offtopic" in res.output
    res = run("tune", str(q), "--threshold", "--offtopic", str(off), "--index", ix, "--apply", "--json")
    assert res.exit_code == 1 and "2 labelled queries: too few" in res.output  # two stored a threshold far off
    q.write_text("query,faq_id\n" + "".join(f"reset my password {i},1\nreturn an item {i},3\n" for i in range(10)),
                 encoding="utf-8")
    res = run("tune", str(q), "--threshold", "--offtopic", str(off), "--index", ix, "--apply", "--json")
    # two off-topic questions are too few too: one "tell me a joke" took the threshold from 0.49 to 0.40
    assert res.exit_code == 1 and "2 off-topic questions in --offtopic: too few" in res.output, res.output
    off.write_text("".join(f"weather in city number {i}\ntell me joke number {i}\n" for i in range(10)), encoding="utf-8")
    res = run("tune", str(q), "--threshold", "--offtopic", str(off), "--index", ix, "--apply", "--json")
    chosen = json.loads(res.stdout)
    assert chosen["applied"] and chosen["chosen_by"] == "labelled"
    assert json.loads(run("info", "--index", ix, "--json").stdout)["threshold"] == chosen["threshold"]
    assert "out-of-scope answered" in run("tune", "--self", "--threshold", "--index", ix).stdout


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(SHARED_DATA), reason="needs ../shared/data")
def test_pairs_through_a_small_index_match_the_raw_encoder(tmp_path, minilm):
    """`eval --pairs` through an index of 450 questions is within 1 point of the raw encoder on STSB-en
    (its first 600 test pairs)."""
    from faqsearch.evaluation import evaluate_pairs, read_pairs, spearman

    a, b, y = (part[:600] for part in read_pairs(os.path.join(SHARED_DATA, "STSB-en", "sts-test.tsv")))
    e = FAQSearch.build(os.path.join(SAMPLE, "faq.csv"), str(tmp_path / "ix"), encoder=minilm)
    got = evaluate_pairs(e, a, b, y)["spearman"]
    va, vb = unit(minilm.encode(a)), unit(minilm.encode(b))
    assert abs(got - 100 * spearman((va * vb).sum(1), y)) <= 1.0


def test_label_tuning_measures_the_mode_the_index_answers_in(tmp_path, small_corpus, fake_encoder):
    """`tune QUERIES` on a hybrid index scores every transform as hybrid `ask` ranks: the current
    setting's figure is what `eval` reports for the index."""
    from faqsearch.evaluation import LabelledQuery, evaluate
    from faqsearch.tuning import tune

    e = FAQSearch.build(small_corpus, str(tmp_path / "ix"), encoder=fake_encoder)
    assert e.mode == "hybrid"
    queries = [LabelledQuery(t, {g}, i) for i, (t, g) in enumerate(
        [("password reset", "1"), ("forgot password", "1"), ("shipping days", "2"), ("return item policy", "3"),
         ("ship to the EU", "4"), ("do you ship", "4"), ("how long shipping", "2")])]
    report = tune(e.searcher(), queries)
    current = next(r for r in report.rows if r["current"])
    assert current["mrr@10"] == pytest.approx(evaluate(e, queries)["mrr@10"])
    assert any("hybrid" in n for n in report.notes)


def test_what_labels_tuned_stays_and_what_the_index_chose_is_chosen_again(tmp_path, run):
    """Labels with unknown FAQ ids are refused before anything changes (they used to be learned from,
    and could delete the confidence); learn's recalibration keeps a confidence tuned on labels (it
    replaced it with a self-calibrated one while its note said the tuning was kept); tune transform
    --apply on an index that chose its threshold chooses threshold and confidence again, as refit does
    (the confidence of the old transform stayed), and the version says tune made it."""
    from faqsearch.corpus import read_texts
    from faqsearch.evaluation import read_labelled_queries
    from faqsearch.tuning.threshold import self_tuned
    from faqsearch.tuning.transform import Setting, TuneReport

    path = str(tmp_path / "ix")
    bad = tmp_path / "bad.csv"
    bad.write_text("query,faq_id\nwhere is my stuff,zzz-99\nrefund please,ret-01\n", encoding="utf-8")
    with FAQSearch.build(os.path.join(SAMPLE, "faq.csv"), path, encoder=FakeEncoder()) as e:
        before = e.config["confidence"]
        for args in (["tune", "threshold", bad, "--offtopic", os.path.join(SAMPLE, "offtopic.txt"), "--apply"],
                     ["tune", "fusion", bad, "--apply"], ["tune", "transform", bad, "--apply"]):
            r = run(*args, "--index", path)
            assert r.exit_code == 1 and "bad.csv: 1 query has gold FAQ ids" in r.output and "line 2" in r.output, r.output
        # one unknown id among a query's several is a typo too (it was dropped in silence)
        multi = tmp_path / "multi.csv"
        multi.write_text("query,faq_id\nreset my password,acc-02|zzz-99\n", encoding="utf-8")
        r = run("eval", multi, "--index", path)
        assert r.exit_code == 1 and "line 2: ['zzz-99']" in r.output, r.output
        # the corpus given as labelled queries: every metric 1.0, and a threshold learned from it
        r = run("eval", os.path.join(SAMPLE, "faq.csv"),
                "--index", path)
        assert r.exit_code == 1 and "are questions the index holds, word for word: is it the corpus?" in r.output, r.output
        # a threshold is not stored from a handful of labelled queries (3 chose one that answered a quarter)
        few = tmp_path / "few.csv"
        few.write_text("query,faq_id\nreset my password,acc-02\nwhere is my parcel,shp-03\nrefund please,ret-04\n",
                       encoding="utf-8")
        r = run("tune", "threshold", few, "--offtopic", os.path.join(SAMPLE, "offtopic.txt"), "--apply", "--index", path)
        assert r.exit_code == 1 and "3 labelled queries: too few" in r.output and "nothing was changed" in r.output, r.output
        assert run("tune", "threshold", few, "--offtopic", os.path.join(SAMPLE, "offtopic.txt"), "--index", path).exit_code == 0
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        assert e.config["confidence"] == before
        e.set_threshold(tune_threshold(e.searcher(), read_labelled_queries(os.path.join(SAMPLE, "queries.csv")),
                                       read_texts(os.path.join(SAMPLE, "offtopic.txt"))))
        assert e.config["confidence"]["chosen_by"] == "labelled"
        assert "confidence" not in self_tuned(e.snapshot, e.encoder, fusion=False, threshold=False)

        class Engine:
            def refit(self, setting, threshold, made_by):
                self.args = (setting, threshold, made_by)

        labelled = TuneReport("mrr@10", Setting(True), Setting(True, 0.5, 0.5, 8), [], 0.5, 0.6, 10,
                              new_threshold=0.42)
    with FAQSearch.build(os.path.join(SAMPLE, "faq.csv"), str(tmp_path / "own"), encoder=FakeEncoder()) as own:
        chose = tune(own.searcher(), self_supervised=True)  # on an index that chose its threshold itself
        assert chose.chosen != chose.current
        chose.cv_tuned = chose.cv_current + 0.1  # worth applying, whatever the fake encoder's gain
        for report, given in ((chose, None), (labelled, 0.42)):
            fake = Engine()
            assert report.apply_to(fake) and fake.args == (report.chosen, given, "tune")


def test_refit_without_options_keeps_an_index_without_a_transform_so(tmp_path, small_corpus, run):
    path = str(tmp_path / "ix")
    FAQSearch.build(small_corpus, path, encoder=FakeEncoder(), whiten=False).close()
    assert run("refit", "--index", path).exit_code == 0
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        assert not e.config["whitening"].get("enabled", True)


def test_tune_transform_refuses_too_few_sentence_pairs(tmp_path, run, small_corpus):
    """Three pairs and five folds printed "current 0.00, tuned 0.00" (no fold could correlate: a hostile
    probe); under 20 pairs (3 per fold) it is refused, saying how many it needs."""
    ix = str(tmp_path / "ix")
    run("ingest", small_corpus, "--index", ix, "-q")
    p = tmp_path / "p.csv"
    p.write_text("sentence1,sentence2,score\nreset password,forgot password,4\nship abroad,return item,1\n"
                 "return policy,return an item,4.5\n", encoding="utf-8")
    res = run("tune", "transform", "--pairs", str(p), "--index", ix)
    assert res.exit_code == 1 and "3 sentence pairs: too few to tune on" in res.output and "at least 20" in res.output
    p.write_text("sentence1,sentence2,score\n" + "".join(f"words {i} here,other words {i},{i % 5}\n" for i in range(20)),
                 encoding="utf-8")
    res = run("tune", "transform", "--pairs", str(p), "--index", ix, "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["n"] == 20, res.output


def test_a_minimum_confidence_on_an_index_without_a_confidence_is_refused_not_ignored(tmp_path, run):
    """Found by a hostile run: where labels left an index without a confidence model (every labelled query
    gold to a wrong FAQ), `ask --min-confidence 0.99` (or 0) was dropped in silence and the cosine threshold
    decided. Any minimum above 0 is refused, naming what to do; 0 ("answer anything") answers, as in lexical
    mode; info and tune confidence say why there is no model."""
    from faqsearch.corpus import read_texts
    from faqsearch.errors import InvalidOptionError
    from faqsearch.evaluation import LabelledQuery, read_labelled_queries

    path = str(tmp_path / "ix")
    with FAQSearch.build(os.path.join(SAMPLE, "faq.csv"), path, encoder=FakeEncoder()) as e:
        ids = sorted(f["id"] for f in e.list())
        queries = read_labelled_queries(os.path.join(SAMPLE, "queries.csv"))
        firsts = [r.answers[0].faq_id for r in e.ask_many([q.text for q in queries], k=1, threshold=-1)]
        wrong = [LabelledQuery(q.text, {next(i for i in ids if i != first)}, q.line) for q, first in zip(queries, firsts)]
        e.set_threshold(tune_threshold(e.searcher(), wrong, read_texts(os.path.join(SAMPLE, "offtopic.txt"))))
        assert e.config["confidence"] is None
        with pytest.raises(InvalidOptionError, match="no confidence for a minimum confidence to apply to"):
            e.ask("where is my parcel", min_confidence=0.99)
        r = e.ask("zzz qqq unrelated words", min_confidence=0)
        assert r.answered and r.answers
    r = run("ask", "where is my parcel", "--min-confidence", "0.5", "--index", path)
    assert r.exit_code == 1 and "tune threshold --self --apply" in r.output, r.output
    assert "too few right and wrong answers" in run("info", "--index", path).output
    assert "too few right and wrong answers" in run("tune", "confidence", "0.5", "--index", path).output
