"""The confidence of an answer and the answer-or-abstain decision."""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from faqsearch import FAQSearch
from faqsearch.confidence import FEATURES, POOL, ConfidenceModel, features, fit_logistic
from faqsearch.corpus import FAQ, read_texts
from faqsearch.evaluation import read_labelled_queries
from faqsearch.errors import InvalidOptionError
from faqsearch.querylog import QueryLog
from faqsearch.tuning import tune_threshold
from faqsearch.results import Answer

from .conftest import SAMPLE, FakeEncoder, build_index


def _answer(faq, cos, fused=None, token=None, prototype=None):
    return Answer(faq, "", cos, "q", 1, dense=cos, fused=fused, token=token, prototype=prototype)


def test_confidences_never_rise_down_a_list_whatever_the_scores():
    """Each answer's confidence is at most the one above it and at most 1 - the first one's, for any
    model (an older one of three features too) and any ranked list, margins that grow down the list
    included."""
    rng = np.random.default_rng(0)
    for trial in range(300):
        names = FEATURES if trial % 3 else FEATURES[:3]
        model = ConfidenceModel(tuple(rng.uniform(0, 10, len(names))), float(rng.uniform(-8, 2)), 0.5, names=names)
        n = int(rng.integers(1, 25))
        fused = np.sort(rng.uniform(-0.5, 2.5, n))[::-1]
        ranked = [_answer(f"f{i}", float(rng.uniform(-1, 1)), float(fused[i]),
                          None if rng.random() < 0.3 else float(rng.uniform(0, 1)),
                          None if rng.random() < 0.2 else float(rng.uniform(-1, 1))) for i in range(n)]
        c = model.confidences(ranked)
        assert len(c) == n and all(0.0 <= v <= 1.0 for v in c)
        assert all(b <= a for a, b in zip(c, c[1:])), c
        assert all(v <= 1 - c[0] + 1e-9 for v in c[1:])


def test_the_prototype_margin_is_taken_over_the_first_pool_answers():
    """The first answer's features do not depend on how long the list is beyond POOL answers (so k
    never changes the first answer's confidence), and an answer without a prototype counts its cosine."""
    rng = np.random.default_rng(2)
    ranked = [_answer(f"f{i}", float(c), float(c), None, float(c) + 0.05) for i, c in
              enumerate(np.sort(rng.uniform(0, 1, POOL + 5))[::-1])]
    assert np.allclose(features(ranked)[0], features(ranked[:POOL])[0])
    ranked[-1] = _answer("far", 0.0, 0.0, None, 5.0)  # beyond the pool: not an "other" FAQ of the first
    assert np.allclose(features(ranked)[0], features(ranked[:POOL])[0])
    row = features([_answer("a", 0.8, 0.8), _answer("b", 0.6, 0.6, prototype=0.7)])[0]
    assert np.allclose(row, [0.8, 0.2, 0.8, 0.8, 0.1])


def test_a_damaged_confidence_section_is_no_model_and_an_older_one_keeps_its_features():
    good = ConfidenceModel((5.0, 2.0, 1.0, 0.5, 0.0), -3.0, 0.4).to_dict()
    assert ConfidenceModel.from_dict(good) == ConfidenceModel((5.0, 2.0, 1.0, 0.5, 0.0), -3.0, 0.4)
    older = {**good, "features": ["cosine", "margin", "token"], "coef": [5.0, 2.0, 1.0]}
    model = ConfidenceModel.from_dict(older)
    assert model is not None and model.names == FEATURES[:3] and not model.uses_prototypes
    assert ConfidenceModel.from_dict(good).uses_prototypes
    for bad in (None, [], {}, {**good, "coef": [5.0, -2.0, 1.0, 0.0, 0.0]}, {**good, "coef": [5.0, 2.0]},
                {**good, "intercept": float("nan")}, {**good, "operating_point": 1.5}, {**good, "features": ["x"]},
                {**older, "features": ["cosine", "cosine", "token"]}, {**good, "features": []},
                {**good, "coef": "abc"}):
        assert ConfidenceModel.from_dict(bad) is None, bad


def test_logistic_fit_keeps_the_evidence_positive():
    """A feature whose fitted weight would be negative is dropped: the confidence only rises with evidence."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2000, 3))
    y = (x[:, 0] - 0.8 * x[:, 1] + 0.3 * rng.normal(size=2000) > 0).astype(float)
    coef, _ = fit_logistic(x, y, np.ones(len(y)))
    assert coef[0] > 1 and coef[1] == 0 and coef.min() >= 0


@pytest.fixture
def sample_index(tmp_path):
    """sample_data (150 FAQs of 3 questions) on the fake encoder: enough variants to learn from."""
    e = build_index(os.path.join(SAMPLE, "faq.csv"), tmp_path / "s", encoder=FakeEncoder(64))
    yield e
    e.close()


def _asked(e, **kw):
    queries = [q.text for q in read_labelled_queries(os.path.join(SAMPLE, "queries.csv"))]
    return e.ask_many(queries + read_texts(os.path.join(SAMPLE, "offtopic.txt")), **kw)


def test_an_index_learns_its_confidence_and_answers_by_it(sample_index):
    e = sample_index
    model = e.snapshot.confidence
    assert model is not None and model.chosen_by == "self-calibrated" and not model.stats["pseudo"]
    assert model.stats["positives"] >= 100 and model.stats["in_domain"] >= 100 and model.stats["general"] >= 100
    op = e.snapshot.min_confidence
    assert op == model.operating_point and 0 < op < 1
    for r in _asked(e, k=10):
        shown = [a.confidence for a in r.answers]
        assert all(b <= a for a, b in zip(shown, shown[1:]))  # no list shows a rising confidence
        assert r.answered == (r.nearest.confidence >= op)
        assert all(c >= op for c in shown)
        d = r.to_dict()
        assert d["answered"] == r.answered and d["min_confidence"] == op
        assert (d["nearest"] is None) == r.answered
        if not r.answered:
            assert d["nearest"]["faq_id"] == r.nearest.faq_id and d["nearest"]["confidence"] == r.nearest.confidence
    # a cosine threshold still decides when given; the confidence is shown all the same
    r = e.ask("how do I return an item", threshold=-1.0)
    assert r.answered and r.min_confidence is None and r.answers[0].confidence is not None


def test_the_confidence_weighs_prototypes_in_both_modes_whatever_k(sample_index):
    """Where the model weighs the prototype features, answers carry their prototype cosine in dense
    and hybrid mode, also once the ranking gives prototypes no weight, and k changes no confidence."""
    e = sample_index
    assert e.snapshot.confidence.uses_prototypes  # the fake encoder's sample index learns to weigh them
    queries = [q.text for q in read_labelled_queries(os.path.join(SAMPLE, "queries.csv"))][:20]
    for unranked in (False, True):
        if unranked:
            e._set_config("tune", prototype_weight=0.0)
            assert e.snapshot.prototype_weight == 0.0 and e.snapshot.prototypes is not None
        for mode in ("dense", "hybrid"):
            got = {k: e.ask_many(queries, k=k, mode=mode) for k in (1, 3, 25)}
            for rs in zip(*got.values()):
                assert all(r.nearest.prototype is not None for r in rs)
                assert len({(r.nearest.faq_id, r.nearest.confidence, r.answered) for r in rs}) == 1, rs


def test_k_changes_no_confidence_where_the_nearest_questions_hold_few_faqs(tmp_path):
    """Dense mode on FAQs of 250 questions each: the nearest 256 questions hold 2 to 6 FAQs, so
    listing k answers widens the search for some k and not others; the first answer's evidence stays
    the first pass's, so its confidence and the decision are the same whatever k is."""
    topics = ["card", "loan", "refund", "parcel", "account", "travel", "cash", "fee", "pin", "app", "tax", "gift"]
    rows = [(t, f"{t} {t} w{i} question", f"answer {t}") for t in topics for i in range(250)]
    older = {**ConfidenceModel((4.0, 3.0, 0.0), -4.0, 0.5, names=FEATURES[:3]).to_dict()}  # a 3-score model too
    with build_index(rows, tmp_path / "big", encoder=FakeEncoder(64)) as e:
        queries = [f"{t} w{i}" for t in topics for i in (3, 700)] + ["card loan refund"]
        s = e.searcher()
        first_pass = [len(f) for f in s.dense(s.vectors(queries), POOL, widen=False)]
        assert min(first_pass) < 4 and max(first_pass) < 11  # k=1..3 and k=10 widen differently
        for model in (ConfidenceModel((4.0, 3.0, 0.0, 2.0, 5.0), -4.0, 0.5).to_dict(), older):
            e._set_config("tune", mode="dense", confidence=model)
            assert e.snapshot.mode == "dense" and e.snapshot.confidence.names == tuple(model["features"])
            got = {k: e.ask_many(queries, k=k) for k in (1, 3, 10)}
            for rs in zip(*got.values()):
                assert len({(r.nearest.faq_id, r.nearest.confidence, r.answered) for r in rs}) == 1, rs
                assert all(b.confidence <= a.confidence for r in rs for a, b in zip(r.answers, r.answers[1:]))
        assert all(len(r.answers) == 10 for r in e.ask_many(queries, k=10, threshold=-1.0))


def test_answers_keep_their_ranking(sample_index):
    """The confidence decides and is shown; it never re-orders a list (ranking quality is unchanged)."""
    e = sample_index
    for r, plain in zip(_asked(e, k=5, threshold=-1.0), _asked(e, k=5, min_confidence=0.0)):
        assert [a.faq_id for a in r.answers][:len(plain.answers)] == [a.faq_id for a in plain.answers]


def test_min_confidence_is_stored_shown_and_undone(sample_index, run):
    e = sample_index
    path = e.path
    e.close()
    out = run("tune", "--min-confidence", "0.9", "--index", path, "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["min_confidence"] == 0.9
    info = run("info", "--index", path).output
    assert "confidence: 90% or more (given" in info
    assert json.loads(run("info", "--index", path, "--json").output)["min_confidence"] == 0.9
    with FAQSearch.open(path, encoder=FakeEncoder(64)) as again:
        assert again.snapshot.min_confidence == 0.9
        assert all(not r.answered or r.answers[0].confidence >= 0.9 for r in _asked(again))
    run("tune", "--min-confidence", "auto", "--index", path)
    with FAQSearch.open(path, encoder=FakeEncoder(64)) as again:
        assert again.snapshot.min_confidence == again.snapshot.confidence.operating_point
    bad = run("tune", "--min-confidence", "1.5", "--index", path)
    assert bad.exit_code != 0 and "1.5" in bad.output


def test_the_operating_point_is_chosen_for_the_share_of_unknowns_given(tmp_path, run):
    """`tune confidence auto --unknowns S` chooses the index's own point again for S in-domain unknowns
    among its out-of-scope questions: stored, shown, kept when edits make it recalibrate."""
    with build_index(os.path.join(SAMPLE, "faq.csv"), tmp_path / "s") as e:  # the CLI's fake encoder
        path = e.path
    out = run("tune", "confidence", "auto", "--unknowns", "0.9", "--index", path, "--json")
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    assert got["unknown_share"] == 0.9 and got["given"] is False and got["simulated"]["right"] is not None
    assert "10% general, 90% in-domain" in run("info", "--index", path).output
    with FAQSearch.open(path, encoder=FakeEncoder()) as again:
        many = again.snapshot.confidence
        assert again.snapshot.min_confidence == many.operating_point
        again.set_min_confidence(None, 0.0)
        none = again.snapshot.confidence
        assert "100% general, 0% in-domain" in none.stats["rule"]
        assert many.stats["simulated"]["in_domain_answered"] <= none.stats["simulated"]["in_domain_answered"]
        assert many.operating_point != none.operating_point  # the share moved the point
        again.set_min_confidence(None, 0.9)
        again.add([FAQ(f"new-{i}", "a new answer", [f"brand new topic {i} question {j}" for j in range(3)])
                   for i in range(20)])  # a tenth more questions: the index recalibrates, for the same share
        assert again.snapshot.config.calibration["questions"] == 510 and again.snapshot.unknown_share == 0.9
        assert "90% in-domain" in again.snapshot.confidence.stats["rule"]
    bad = run("tune", "confidence", "auto", "--unknowns", "1.5", "--index", path)
    assert bad.exit_code == 2 and "--unknowns" in bad.output
    bad = run("tune", "confidence", "0.5", "--unknowns", "0.4", "--index", path)  # it said to do what was typed
    assert bad.exit_code == 2 and "--unknowns goes with auto" in bad.output
    bad = run("tune", "confidence", "-0.1", "--index", path)  # it was read as an option: "No such option '-0'"
    assert bad.exit_code == 2 and "'-0.1': give a confidence between 0 and 1" in bad.output
    bad = run("tune", "confidence", "150%", "--index", path)  # it said "1.5 is not in the range 0<=x<=1"
    assert bad.exit_code == 2 and "'150%': give a confidence between 0 and 1 (0.8), a percentage from 0% to 100%" in bad.output
    bad = run("tune", "confidence", "abc", "--index", path)
    assert bad.exit_code == 2 and "a percentage from 0% to 100% (80%), or auto" in bad.output
    ok = run("tune", "confidence", "80%", "--index", path, "--json")  # as the CLI shows confidences
    assert ok.exit_code == 0 and json.loads(ok.stdout)["min_confidence"] == pytest.approx(0.8)
    with FAQSearch.open(path, encoder=FakeEncoder()) as again:  # a confidence learned from labels has no unknowns
        again.set_threshold(tune_threshold(again.searcher(), read_labelled_queries(os.path.join(SAMPLE, "queries.csv")),
                                           read_texts(os.path.join(SAMPLE, "offtopic.txt"))))
        with pytest.raises(InvalidOptionError, match="labelled"):
            again.set_min_confidence(None, 0.5)
        assert again.snapshot.confidence.chosen_by == "labelled"


def test_every_share_of_unknowns_fits_and_small_indexes_refuse_it(tmp_path, small_corpus):
    """A share of 1 (no general questions counted) still fits, a labelled fit after it too (labels hold
    no in-domain unknowns); an index answering at its cosine threshold's confidence refuses a share."""
    with build_index(os.path.join(SAMPLE, "faq.csv"), tmp_path / "s") as e:
        for share in (1.0, 0.0):
            e.set_min_confidence(None, share)
            assert e.snapshot.unknown_share == share and 0 < e.snapshot.confidence.operating_point < 1
        e.set_min_confidence(None, 1.0)
        e.set_threshold(tune_threshold(e.searcher(), read_labelled_queries(os.path.join(SAMPLE, "queries.csv")),
                                       read_texts(os.path.join(SAMPLE, "offtopic.txt"))))
        rule = e.snapshot.confidence.stats["rule"]  # it said "25% in-domain" of labels that hold none
        assert e.snapshot.confidence.chosen_by == "labelled" and "queries it was fitted on" in rule and "in-domain" not in rule
    with build_index(small_corpus, tmp_path / "small") as e:
        assert e.snapshot.confidence.stats["pseudo"]
        with pytest.raises(InvalidOptionError, match="cosine threshold"):
            e.set_min_confidence(None, 0.5)
        assert e.snapshot.config.unknown_share is None


def test_few_variants_fall_back_to_pseudo_queries_and_the_cosine_threshold(tmp_path, small_corpus):
    """Under CONFIDENCE_MIN_VARIANTS FAQs with several questions, the positives are word-dropout
    pseudo-queries, only the cosine counts, and the operating point is the confidence at the threshold
    the index chose: the decision is the cosine threshold's."""
    with build_index(small_corpus, tmp_path / "ix") as e:
        model = e.snapshot.confidence
        assert model is not None and model.stats["pseudo"] and not any(model.coef[1:]) and not model.uses_prototypes
        for q in ["reset my password", "shipping time", "volcano eruption", "return an item please", "abroad"]:
            r = e.ask(q)
            assert r.answered == (r.best_score >= e.threshold - 1e-6)


def test_a_threshold_given_at_ingest_decides(tmp_path, small_corpus):
    with build_index(small_corpus, tmp_path / "ix", threshold=0.9) as e:
        assert e.snapshot.confidence is not None and e.snapshot.min_confidence is None
        r = e.ask("reset password")
        assert r.min_confidence is None and r.answered == (r.best_score >= 0.9)


def test_gaps_leave_out_a_group_an_added_faq_now_answers(tmp_path, small_corpus):
    from faqsearch.gaps import find_gaps
    from faqsearch.querylog import log_answered

    path = str(tmp_path / "ix")
    e = build_index(small_corpus, path, threshold=0.8)
    qlog = QueryLog.for_index(path)
    asked = ["opening hours on sunday", "sunday opening hours", "opening hours sunday please"]
    log_answered(qlog, e.ask_many(asked), "hybrid", "api")
    gaps = find_gaps(e, qlog, similarity=0.2)
    assert gaps and gaps[0].answered_now == 0 and set(gaps[0].examples) == set(asked)
    csv = tmp_path / "new.csv"
    csv.write_text("id,question,answer\nhours,opening hours on sunday,Ten to four.\n", encoding="utf-8")
    e.add(str(csv))
    assert all(r.answered for r in e.ask_many(asked))
    assert not any(set(g.examples) & set(asked) for g in find_gaps(e, qlog, similarity=0.2))  # covered now
    qlog.close()
    e.close()


def test_an_assignment_counts_only_while_its_faq_holds_the_query(tmp_path, small_corpus, monkeypatch):
    """A query assigned by feedback stayed marked in the log after its FAQ was removed (or edited without
    it): gaps never listed it again, and other FAQs' suggestions skipped it, for good (found by a
    hostile probe). The mark counts while the FAQ holds a question that reads as the query."""
    from faqsearch.gaps import find_gaps
    from faqsearch.generators.suggest import suggest
    from faqsearch.querylog import log_answered

    import faqsearch.generators.suggest as sg

    monkeypatch.setattr(sg, "NEAR_MIN_CONFIDENCE", 0.0)  # the fake encoder's confidences are low: any near offer
    path = str(tmp_path / "ix")
    e = build_index(small_corpus, path, threshold=0.8)
    qlog = QueryLog.for_index(path)
    asked = ["will you mount my television", "will you mount my television", "mount my television please"]
    log_answered(qlog, e.ask_many(asked), "hybrid", "api")
    assert find_gaps(e, qlog, similarity=0.2, min_count=1)
    e.feedback("will you mount my television", "4")
    qlog.mark_assigned(["will you mount my television"], "4")
    listed = lambda: {x for g in find_gaps(e, qlog, similarity=0.2, min_count=1) for x in g.examples}  # noqa: E731
    assert "will you mount my television" not in listed()  # assigned: FAQ 4 answers it now
    e.update([FAQ("4", "We ship to the EU.", ["Do you ship abroad?"], "shipping")], replace=True)
    assert "will you mount my television" in listed()  # 4 was edited without it: a gap again
    offered = lambda: [x.text for x in suggest(e.searcher(), "2", qlog).suggestions]  # noqa: E731 (near FAQ 2)
    assert "will you mount my television" in offered()
    e.feedback("will you mount my television", "4")
    assert "will you mount my television" not in listed() and "will you mount my television" not in offered()
    e.remove(["4"])
    assert "will you mount my television" in listed() and "will you mount my television" in offered()  # 4 is gone
    assert "will you mount my television" in qlog.distinct_unassigned(10, e.snapshot.store)
    assert "will you mount my television" not in qlog.distinct_unassigned(10)  # without the index: as marked
    qlog.close()
    e.close()


@pytest.mark.slow
def test_no_rising_confidence_with_the_real_encoder(minilm, tmp_path):
    """The bundled encoder on sample_data: every list, in-scope and off-topic, k=10."""
    with FAQSearch.build(os.path.join(SAMPLE, "faq.csv"), str(tmp_path / "s"), encoder=minilm) as e:
        assert e.snapshot.confidence is not None
        for r in _asked(e, k=10, threshold=-1.0):  # every list whole, answered or not
            shown = [a.confidence for a in r.answers]
            assert len(shown) == 10 and all(b <= a for a, b in zip(shown, shown[1:]))
        off = _asked(e)[-30:]
        assert sum(r.answered for r in off) <= 1  # off-topic answered at most 1 of 30
        assert all(math.isfinite(v) and v >= 0 for v in e.snapshot.confidence.coef)
        assert list(FEATURES) == e.config["confidence"]["features"]


def test_pseudo_queries_drop_a_third_of_the_words_in_english_and_chinese():
    """Pseudo-queries (single-question FAQs) drop about a third of a question's words; Chinese has no
    spaces, so a word there is two characters of a CJK run: before, a Chinese question made none and a
    Chinese single-question index had no confidence at all."""
    import random

    from faqsearch.tuning.confidence import dropped

    def by_spaces(text, rng):  # the rule for spaced text, as it was before CJK pieces
        words = text.split()
        keep = [w for w in words if rng.random() > 1 / 3]
        return " ".join(words[:-1] if len(keep) < 2 or len(keep) == len(words) else keep)

    for seed in range(20):
        for text in ("How do I reset my password?", "can i pay with a card abroad or not", "is it free ?",
                     "비밀번호를 잊어버렸어요 어떻게 하나요"):  # Korean is written with spaces: words as in English
            assert dropped(text, random.Random(seed)) == by_spaces(text, random.Random(seed))
    made = [dropped("密码想不起来了登录不了", random.Random(s)) for s in range(20)]
    assert all(m and " " not in m and len(m) < 11 for m in made) and len(set(made)) > 5
    for m in made:  # the characters left, in their order
        rest = iter("密码想不起来了登录不了")
        assert all(ch in rest for ch in m)
    assert dropped("卡丢了", random.Random(0)) is None  # two pieces: too short, as a two-word English question
    assert dropped("卡丢了？", random.Random(0)) is None  # punctuation is no word
    # a word is always dropped, never only the question mark; the text's own spaces are kept
    assert all(dropped("如何注册手机银行？", random.Random(s)) not in ("如何注册手机银行", "如何注册手机银行？") for s in range(50))
    assert {dropped("Visa card 怎么用", random.Random(s)) for s in range(30)} >= {"Visa card 怎么", "card 怎么用"}
    assert {dropped("如何使用Visa卡？", random.Random(s)) for s in range(30)} >= {"如何使用Visa", "使用Visa卡？"}


def test_suggest_offers_a_logged_query_as_near_wherever_the_faq_ranks_in_its_top_three(tmp_path):
    """An unanswered query is 'near' each FAQ among its nearest three, not only its best guess (the
    ranks after the first used to be lost with the answers an unanswered result drops)."""
    from faqsearch.generators.suggest import suggest
    from faqsearch.querylog import log_answered

    path = str(tmp_path / "ix")
    with build_index(os.path.join(SAMPLE, "faq.csv"), path, threshold=0.99) as e:
        qlog = QueryLog.for_index(path)
        asked = "where is my parcel"
        log_answered(qlog, e.ask_many([asked]), "dense", "api")
        r = e.ask(asked, k=3)
        assert not r.answered and len(r.ranked) == 3 and r.ranked[0] is r.nearest
        for a in r.ranked:
            got = suggest(e.searcher(), a.faq_id, qlog).suggestions
            assert [(s.text, s.source) for s in got] == [(asked, "near")], a.faq_id
            assert got[0].confidence == a.confidence
        # below NEAR_MIN_CONFIDENCE it is no near offer: off-topic queries were offered to three FAQs each
        # at 0.4% (a hostile probe); here the floor is set just above the first answer's
        import faqsearch.generators.suggest as sg

        assert all(a.confidence >= sg.NEAR_MIN_CONFIDENCE for a in r.ranked)
        sg.NEAR_MIN_CONFIDENCE, kept = r.ranked[0].confidence + 1e-3, sg.NEAR_MIN_CONFIDENCE
        try:
            assert not any(suggest(e.searcher(), a.faq_id, qlog).suggestions for a in r.ranked)
        finally:
            sg.NEAR_MIN_CONFIDENCE = kept
        qlog.close()


def test_gaps_list_queries_in_a_script_the_encoder_does_not_read_by_script(tmp_path, small_corpus, monkeypatch):
    """Twenty Chinese questions on twenty topics, logged on an English MiniLM index, came out as one gap
    (to that encoder they read alike; a hostile probe): queries written mostly in a script the index's
    encoder does not read are one entry per script, not grouped by meaning, and say so."""
    import faqsearch.encoders as encoders
    from faqsearch.gaps import find_gaps
    from faqsearch.querylog import log_answered

    path = str(tmp_path / "ix")
    with build_index(small_corpus, path, threshold=0.99) as e:
        qlog = QueryLog.for_index(path)
        chinese = ["信用卡找不到了可能丢了", "买了电脑想分12期付款", "信用卡额度太低了想调高", "信用卡找不到了可能丢了"]
        english = ["opening hours on sunday", "sunday opening hours"]
        log_answered(qlog, e.ask_many(chinese + english), "dense", "api")
        assert not any(g.script for g in find_gaps(e, qlog, similarity=0.2, min_count=1))  # an encoder that reads it
        monkeypatch.setattr(encoders, "reads_latin_only", lambda spec: True)
        gaps = find_gaps(e, qlog, similarity=0.2, min_count=1)
        zh = [g for g in gaps if g.script]
        assert [(g.script, g.count, g.distinct, g.nearest_faq) for g in zh] == [("Han", 4, 3, None)]
        assert zh[0].examples[0] == "信用卡找不到了可能丢了" and not any(set(g.examples) & set(chinese) for g in gaps if not g.script)
        qlog.close()


def test_gaps_count_one_query_whatever_its_case_and_punctuation(tmp_path, small_corpus):
    """`gaps` groups logged queries by their text up to case, width and punctuation: "Opening hours on
    Sunday?" and "opening hours on sunday" are one distinct query asked twice (they were two)."""
    from faqsearch.gaps import find_gaps
    from faqsearch.querylog import log_answered

    path = str(tmp_path / "ix")
    with build_index(small_corpus, path, threshold=0.8) as e:
        qlog = QueryLog.for_index(path)
        asked = ["opening hours on sunday", "Opening hours on Sunday?", "opening hours  on sunday!!",
                 "ＯＰＥＮＩＮＧ hours on sunday"]
        log_answered(qlog, e.ask_many(asked), "hybrid", "api")
        log_answered(qlog, e.ask_many(["?", "??", "?!"]), "hybrid", "api")  # no word: asks for no FAQ
        gaps = find_gaps(e, qlog, similarity=0.99, min_count=2)
        assert [(g.count, g.distinct) for g in gaps] == [(4, 1)] and gaps[0].examples[0] in asked
        qlog.close()


def test_gaps_keep_answers_of_low_confidence_within_the_margin(tmp_path):
    """`gaps` lists queries answered just above the confidence the index answers at (they used to leave
    the list as 'answered now', so --margin changed nothing); the margin says how far above counts."""
    from faqsearch.gaps import find_gaps, low_bar
    from faqsearch.querylog import log_answered

    assert low_bar(0.4, 0.25) == pytest.approx(0.65) and low_bar(0.8, 0.25) == pytest.approx(0.9)  # at most halfway
    path = str(tmp_path / "ix")
    with build_index(os.path.join(SAMPLE, "faq.csv"), path) as e:
        e.set_min_confidence(0.1)
        asked = ["where is my parcel", "parcel not here yet", "where is my parcel now"]
        got = e.ask_many(asked)
        assert all(r.answered and r.answers[0].confidence < low_bar(0.1, 0.25) for r in got)
        qlog = QueryLog.for_index(path)
        log_answered(qlog, got, "hybrid", "api")
        assert {r["query"] for r in qlog.candidates(0.25)} == set(asked)
        gaps = find_gaps(e, qlog, similarity=0.2, min_count=2)
        mine = [g for g in gaps if set(g.examples) & set(asked)]
        assert len(mine) == 1 and mine[0].answered_now == 1.0 and mine[0].count >= 2
        assert qlog.candidates(0.0) == [] and find_gaps(e, qlog, similarity=0.2, margin=0.0) == []
        qlog.close()


def test_gaps_ask_again_only_the_clusters_they_list(tmp_path, small_corpus, monkeypatch):
    """Every logged query was asked again (5,000 logged: 18 s on 2 cores, most for clusters never listed):
    clusters are asked largest first, in batches, until enough gaps are found."""
    import faqsearch.gaps as gaps_mod
    from faqsearch.querylog import log_answered
    from faqsearch.search import Searcher

    monkeypatch.setattr(gaps_mod, "ASK_CLUSTERS", 2)
    path = str(tmp_path / "ix")
    with build_index(small_corpus, path, threshold=0.8) as e:
        qlog = QueryLog.for_index(path)
        words = ["zebra crossing", "quantum physics", "violin lessons", "glacier hiking", "saxophone repair"]
        log_answered(qlog, e.ask_many([w for n, w in enumerate(words) for _ in range(6 - n)]), "hybrid", "api")
        seen: list[int] = []
        answer = Searcher.answer
        monkeypatch.setattr(Searcher, "answer", lambda self, texts, **kw: seen.append(len(texts)) or answer(self, texts, **kw))
        found = gaps_mod.find_gaps(e, qlog, similarity=0.99, min_count=2, limit=1)
        assert [(g.examples[0], g.count) for g in found] == [("zebra crossing", 6)]
        assert seen == [2]  # one batch of the two largest clusters, not all five
        assert [g.count for g in gaps_mod.find_gaps(e, qlog, similarity=0.99, min_count=2, limit=3)] == [6, 5, 4]
        qlog.close()
