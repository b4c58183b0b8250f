"""Token matching, hybrid mode's third signal: spans to words, IDF weights, MaxSim, runtimes agree,
and an index that uses it ranks by it (and one that does not, does not)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from faqsearch import FAQSearch
from faqsearch.results import Answer
from faqsearch.search import fuse
from faqsearch.tokenmatch import score, supported, weights, word_tokens

from .conftest import ROOT

TEXTS = ["How do I reset my passwords?", "Can my dog catch COVID-19?", "退货需要多长时间？", "",
         "résumé upload_limit for card_holders"]


@pytest.mark.slow
def test_spans_map_to_the_stores_words(minilm):
    (states, spans), = minilm.token_states(["How do I reset my passwords?"])
    assert states.shape == (len(spans), minilm.dimension) and states.dtype == np.float16
    assert np.allclose(np.linalg.norm(states.astype(np.float32), axis=1), 1.0, atol=1e-2)
    words = word_tokens("How do I reset my passwords?", spans, "english")
    assert words[-1] == [] and ["password"] in words and ["reset"] in words  # '?' has no word; stemmed


def test_cjk_tokens_map_to_characters():
    text = "退货时间"
    spans = np.array([[0, 1], [1, 2], [2, 4]])
    assert word_tokens(text, spans, "none") == [["退"], ["货"], ["时", "间"]]


def test_weights_follow_idf_and_fall_back_to_uniform():
    tokens = [["how"], ["refund"], [], ["zzz"]]
    w = weights(tokens, {"how": 90, "refund": 3}, 100)
    assert w[0] == 0.0 and w[2] == 0.0 and 0 < w[1] < w[3]  # common word nothing, unknown word most
    assert np.array_equal(weights([["how"], ["the"]], {"how": 90, "the": 95}, 100), np.ones(2))
    assert np.array_equal(weights([["gone"]], {"gone": 3}, 2), np.ones(1))  # removed rows counted: no error


def test_score_is_a_weighted_maxsim():
    q = np.eye(3, dtype=np.float32)[:2]
    doc = np.eye(3, dtype=np.float32)[[0, 2]]
    assert score(q, np.array([1.0, 1.0]), q) == pytest.approx(1.0)
    assert score(q, np.array([1.0, 0.0]), doc) == pytest.approx(1.0)  # only the matched token counts
    assert score(q, np.array([1.0, 1.0]), doc) == pytest.approx(0.5)
    assert score(q, np.array([1.0, 1.0]), doc[:0]) == 0.0


def test_fuse_ranks_by_token_weight():
    a = Answer("a", "", 0.60, "", 1, dense=0.60, lexical=None, token=0.50)
    b = Answer("b", "", 0.55, "", 2, dense=0.55, lexical=None, token=0.70)
    assert [x.faq_id for x in fuse([a, b], 0.1, 2)] == ["a", "b"]
    top = fuse([a, b], 0.1, 2, token_weight=1.0)
    assert [x.faq_id for x in top] == ["b", "a"] and top[0].score == 0.55  # the shown score stays the cosine


def test_which_encoders_support_it():
    assert supported({"backend": "transformers", "pooling": "mean"})
    assert not supported({"backend": "transformers", "pooling": "cls"})
    assert not supported({"backend": "use", "pooling": None}) and not supported(None)


@pytest.mark.slow
def test_onnx_and_torch_token_states_agree(minilm):
    from faqsearch.encoders import load_encoder

    ref = load_encoder("minilm", runtime="torch")
    for (a, sa), (b, sb) in zip(minilm.token_states(TEXTS, batch_size=2), ref.token_states(TEXTS)):
        assert np.array_equal(sa, sb)
        if len(a):
            cos = (a.astype(np.float32) * b.astype(np.float32)).sum(1)
            assert cos.min() >= 0.999


@pytest.mark.slow
def test_an_index_ranks_by_token_match(tmp_path, minilm):
    corpus = tmp_path / "faq.csv"
    corpus.write_text("id,question,answer\npets,Can pets get the coronavirus?,Rarely.\n"
                      "masks,Should I wear a mask outside?,Where crowded.\n"
                      "travel,Can I travel abroad this summer?,Check the rules.\n", encoding="utf-8")
    e = FAQSearch.build(str(corpus), str(tmp_path / "ix"), encoder=minilm)
    assert e.mode == "hybrid" and e.searcher().snap.token_weight == 1.0
    q = ["is my dog at risk of catching covid"]
    cands = e.searcher().candidates(q, e.searcher().vectors(q))[0]
    assert all(a.token is not None and -1.0 <= a.token <= 1.0 for a in cands)
    best = max(cands, key=lambda a: a.token)
    assert best.faq_id == "pets"
    r = e.ask(q[0], k=3)
    assert r.nearest.faq_id == "pets" and r.nearest.token == pytest.approx(best.token)
    e._set_config(token_weight=0.0)  # an index told not to: no token states computed at all
    assert all(a.token is None for a in e.searcher().candidates(q, e.searcher().vectors(q))[0])
    e.close()


@pytest.mark.slow
def test_tuning_ranks_as_the_index_answers_with_token_matching(tmp_path, minilm):
    """tune (transform) and tune --fusion measure the ranking `ask` gives, token matching included."""
    from faqsearch.evaluation import evaluate, read_labelled_queries
    from faqsearch.tuning import tune, tune_fusion

    e = FAQSearch.build(os.path.join(ROOT, "sample_data", "faq.csv"), str(tmp_path / "ix"), encoder=minilm,
                        self_fusion=False)  # the default weights: token matching on
    s = e.searcher()
    assert e.mode == "hybrid" and s.snap.token_weight > 0
    queries = read_labelled_queries(os.path.join(ROOT, "sample_data", "queries.csv"))
    asked = evaluate(s, queries)["mrr@10"]
    row = next(r for r in tune(s, queries).rows if r["current"])
    assert row["mrr@10"] == pytest.approx(asked, abs=1e-9)
    fusion = tune_fusion(s, queries)
    current = next(r for r in fusion.rows if r["current"])
    assert (current["weight"], current["token_weight"]) == (e.hybrid_weight, s.snap.token_weight)
    assert current["mrr@10"] == pytest.approx(asked, abs=1e-9)
    assert {r["token_weight"] for r in fusion.rows} == {0.0, 0.5, 1.0}
    e.close()
