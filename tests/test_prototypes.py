"""FAQ prototypes (faqsearch.prototypes): the weight an index chooses from its own questions, the
cosines the search adds, and an index that ranks with them."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from faqsearch import FAQSearch
from faqsearch.prototypes import Prototypes, choose_weight
from faqsearch.results import Answer
from faqsearch.search import fuse

from .conftest import SAMPLE


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _faqs(rng, faqs: int, per: int, spread: float, modes: int = 1, dim: int = 48):
    """Questions scattered around ``modes`` centres per FAQ."""
    centres = _unit(rng.normal(size=(faqs, modes, dim)))
    groups = np.repeat(np.arange(faqs), per)
    which = rng.integers(0, modes, len(groups))
    vectors = _unit(centres[groups, which] + spread * rng.normal(size=(len(groups), dim)) / np.sqrt(dim))
    return vectors, groups


def test_the_weight_is_chosen_where_the_mean_of_a_faq_is_what_its_questions_share():
    rng = np.random.default_rng(0)
    vectors, groups = _faqs(rng, 40, 5, spread=2.0)  # noisy phrasings of one meaning each
    got = choose_weight(vectors, groups)
    assert got["weight"] > 0 and got["queries"] == 200
    assert got["mrr@10"][f"{got['weight']:g}"] > got["mrr@10"]["0"]


def test_no_weight_where_faqs_gather_unlike_phrasings_or_have_too_few_questions():
    rng = np.random.default_rng(1)
    vectors, groups = _faqs(rng, 40, 12, spread=0.6, modes=4, dim=16)  # four unlike clusters per FAQ
    got = choose_weight(vectors, groups)  # their means lift no FAQ: ties go to no weight
    assert got["weight"] == 0.0 and got["mrr@10"]["1"] <= got["mrr@10"]["0"]
    single = choose_weight(*_faqs(rng, 40, 2, spread=1.0))  # two questions: none left to average over
    assert single == {"weight": 0.0, "queries": 0, "mrr@10": {}}


def test_prototype_scores_are_cosines_to_each_faqs_unit_mean():
    rng = np.random.default_rng(2)
    vectors, groups = _faqs(rng, 6, 3, spread=1.0)
    ids = np.arange(100, 100 + len(groups))
    protos = Prototypes.build(ids[::-1].copy(), groups[::-1].copy(), vectors[::-1].copy(), lambda x: _unit(x))
    query = _unit(rng.normal(size=vectors.shape[1]))
    got = protos.scores(np.array([100, 104, 117, 5]), query)
    for qid, value in zip((100, 104, 117), got[:3]):
        g = groups[qid - 100]
        assert value == pytest.approx(float(_unit(vectors[groups == g].mean(0)) @ query), abs=1e-5)
    assert np.isnan(got[3])  # an id the version does not hold


def test_group_sums_match_a_row_at_a_time_sum_across_blocks(monkeypatch):
    """Sums made a run of sorted rows at a time equal adding each row in turn, where a group's rows
    fall in several blocks of a build, and groups no row names stay zero."""
    import faqsearch.prototypes as prototypes

    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(1000, 8)).astype(np.float32)
    groups = rng.integers(0, 50, len(vectors))  # groups 50-59 hold no row
    ref = np.zeros((60, 8))
    for v, g in zip(vectors, groups):
        ref[g] += v
    np.testing.assert_allclose(prototypes.group_sums(vectors, groups, 60), ref, rtol=0, atol=1e-12)
    monkeypatch.setattr(prototypes, "BLOCK", 64)  # 16 blocks, each holding rows of most groups
    ids = rng.permutation(5000)[:len(vectors)]
    protos = Prototypes.build(ids, groups, vectors, lambda x: x)
    for qid, g in zip(ids[:40], groups[:40]):
        at = int(np.searchsorted(protos.ids, qid))
        np.testing.assert_allclose(protos.centroids[protos.groups[at]], _unit(ref[g]), atol=1e-6)


def test_fuse_lifts_an_faq_by_its_prototype_and_never_sinks_one_below_its_best_question():
    a = Answer("a", "", 0.8, "q", 1, dense=0.8, prototype=0.5)  # one close phrasing, the others far
    b = Answer("b", "", 0.7, "q", 2, dense=0.7, prototype=0.95)  # what b's phrasings share is the query
    assert [x.faq_id for x in fuse([a, b], 0.0, 2)] == ["a", "b"]
    ranked = fuse([a, b], 0.0, 2, prototype_weight=0.5)
    assert [x.faq_id for x in ranked] == ["b", "a"]
    assert ranked[0].fused == pytest.approx(0.7 + 0.5 * (0.95 - 0.7))
    assert ranked[1].fused == pytest.approx(0.8)  # not sunk below its best question
    assert ranked[0].score == 0.7  # the score shown stays the cosine


def test_a_stored_question_asked_as_it_is_finds_its_own_faq(tmp_path, minilm):
    """The console's case: an FAQ whose questions differ, asked one of them word for word."""
    rows = [("gift", "Do gift cards expire?", "a"), ("gift", "Can I buy a gift voucher?", "a"),
            ("gift", "Do you have gift cards?", "a"), ("points", "Do my loyalty points expire?", "b"),
            ("points", "When do reward points run out?", "b"), ("points", "How long are points valid?", "b")]
    rows += [(f"f{i}", f"question number {i} about topic {i}", "c") for i in range(10)]
    from .conftest import build_index

    with build_index(rows, tmp_path / "ix", encoder=minilm) as e:
        e._set_config("test", mode="hybrid", prototype_weight=1.0)
        for q in ("Do gift cards expire?", "How long are points valid?"):
            got = e.ask(q, k=3, threshold=-1).answers[0]
            assert got.question == q


def test_an_index_that_chose_a_prototype_weight_ranks_and_reports_with_it(tmp_path, minilm):
    e = FAQSearch.build(os.path.join(SAMPLE, "faq.csv"), str(tmp_path / "ix"), encoder=minilm)
    try:
        config = e.config
        weight = config.prototype_weight
        assert weight > 0 and config.mode == "hybrid"  # 150 FAQs of three questions: the sample chooses it
        chose = config.fusion["prototype"]
        assert chose["queries"] == 450 and chose["mrr@10"][f"{weight:g}"] > chose["mrr@10"]["0"]
        query = "how long does a refund take"
        result = e.ask(query, k=5)
        shown = result.answers or [result.nearest]
        assert all(a.prototype is not None for a in shown)
        searcher = e.searcher()
        cands = searcher.candidates([query], searcher.vectors([query], tokens=True))[0]
        snap = searcher.snap
        by_hand = fuse(cands, snap.hybrid_weight, 5, snap.token_weight, weight)
        assert [(a.faq_id, a.fused) for a in by_hand][:len(shown)] == [(a.faq_id, a.fused) for a in shown]
        plain = fuse(cands, snap.hybrid_weight, len(cands), snap.token_weight)
        moved = {a.faq_id: a.fused for a in fuse(cands, snap.hybrid_weight, len(cands), snap.token_weight, weight)}
        for a in plain:  # the term is weight * max(0, prototype cosine - best question's cosine), nothing else
            assert moved[a.faq_id] == pytest.approx(a.fused + weight * max(0.0, a.prototype - a.dense), abs=1e-9)
    finally:
        e.close()


def _tight_and_odd(faqs: int = 12) -> list[tuple[str, str, str]]:
    """FAQs of four questions sharing their subject word, each with one more that does not."""
    rows = []
    for i in range(faqs):
        rows += [(f"f{i}", f"subject{i} {w} question", f"answer {i}") for w in ("how", "when", "where", "who")]
        rows.append((f"f{i}", f"odd phrasing {i} unlike the rest", f"answer {i}"))
    return rows


def test_an_edit_gives_the_next_version_its_own_prototypes(tmp_path):
    from .conftest import build_index

    e = build_index(_tight_and_odd(), tmp_path / "ix")
    try:
        e._set_config("test", mode="hybrid", prototype_weight=0.5)  # as if chosen, whatever the fake vectors say
        q = "subject3 how question"
        before = {a.faq_id: a.prototype for a in e.ask(q, k=5, threshold=-1).answers}
        e.update([{"id": "f3", "answer": "answer 3", "questions": [f"completely different words {j}" for j in range(6)]}])
        after = {a.faq_id: a.prototype for a in e.ask(q, k=5, threshold=-1).answers}
        assert after["f3"] < before["f3"] - 0.05  # six unlike questions pull f3's mean away from the query
        snap = e.searcher().snap
        vectors = snap.whitening.full(snap.raw.all()[1])
        ids, keys = snap.store.question_faqs()
        f3 = keys[np.searchsorted(ids, e.ask(q, k=1, threshold=-1).answers[0].question_id)]
        mean = _unit(vectors[keys == f3].mean(0))
        assert after["f3"] == pytest.approx(float(mean @ e.searcher().vectors([q]).full[0]), abs=1e-5)
    finally:
        e.close()


def test_a_hand_edited_prototype_weight_is_refused(tmp_path):
    from faqsearch.errors import IndexFormatError
    from faqsearch.index.format import check_values

    from .conftest import build_index

    with build_index(_tight_and_odd(), tmp_path / "ix") as e:
        config = e.config.to_dict()
    check_values({**config, "prototype_weight": 0.5}, "config.json")
    for bad in (3, -0.5, True, "0.5"):
        with pytest.raises(IndexFormatError, match="prototype_weight"):
            check_values({**config, "prototype_weight": bad}, "config.json")


def test_tune_fusion_self_prints_the_prototype_weights_it_compared(tmp_path, run):
    corpus = tmp_path / "c.csv"
    corpus.write_text("id,question,answer\n" + "".join(f"{a},{b},{c}\n" for a, b, c in _tight_and_odd(14)),
                      encoding="utf-8")
    ix = str(tmp_path / "ix")
    assert run("ingest", str(corpus), "--index", ix).exit_code == 0
    out = run("tune", "fusion", "--self", "--index", ix)
    assert out.exit_code == 0, out.output
    assert "BM25 weight" in out.output and "held out (cross-validated)" in out.output
    report = json.loads(run("tune", "fusion", "--self", "--index", ix, "--json").output)
    assert report["prototype_choice"]["queries"] > 0
    weights = {row["prototype_weight"] for row in report["rows"]}
    assert 0.0 in weights
    if len(weights) > 1:
        assert "prototype weight" in out.output
