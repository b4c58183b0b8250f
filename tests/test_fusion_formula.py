"""The hybrid fusion (cosine + token weight x token match + BM25 weight x BM25 / best BM25) is one
function: the search, its token pool and the tuning's held-out ranking give the same fused values."""
from __future__ import annotations

import numpy as np
import pytest

from faqsearch.results import Answer
from faqsearch.search import TOKEN_POOL, _token_pool, fuse
from faqsearch.tuning.transform import _reciprocal_ranks, fused_scores


def _candidates(seed: int, n: int = 12) -> list[Answer]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        lexical = None if rng.random() < 0.3 else float(rng.uniform(0, 12))
        token = None if rng.random() < 0.4 else float(rng.uniform(0, 1))
        out.append(Answer(f"f{i}", "a", 0.0, "q", i, dense=float(rng.uniform(-0.2, 0.9)), lexical=lexical,
                          token=token))
    return out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("weight,token_weight", [(0.0, 0.0), (0.3, 0.0), (0.25, 0.5), (2.0, 1.5)])
def test_search_and_tuning_fuse_alike(seed, weight, token_weight):
    cands = _candidates(seed)
    searched = fuse(cands, weight, len(cands), token_weight)
    tuned = fused_scores({a.faq_id: a.dense for a in cands},
                         {a.faq_id: a.lexical for a in cands if a.lexical is not None},
                         {a.faq_id: a.token for a in cands if a.token is not None}, weight, token_weight)
    assert [a.faq_id for a in searched] == sorted(tuned, key=lambda f: -tuned[f])
    assert {a.faq_id: a.fused for a in searched} == tuned  # exactly equal, not close
    top = max((a.lexical or 0.0) for a in cands) or 1.0  # the formula as the docs state it
    by_hand = {a.faq_id: a.dense + token_weight * (a.token or 0.0) + weight * (a.lexical or 0.0) / top for a in cands}
    assert tuned == pytest.approx(by_hand, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_the_token_pool_ranks_by_the_fusion_without_tokens(seed):
    cands = _candidates(seed, n=TOKEN_POOL + 20)
    pool = _token_pool(cands, 0.4)
    assert len(pool) == TOKEN_POOL
    assert [a.faq_id for a in pool] == [a.faq_id for a in fuse(cands, 0.4, TOKEN_POOL)]


@pytest.mark.parametrize("seed", range(4))
def test_the_tuning_ranks_each_faq_where_the_search_does(seed):
    """_reciprocal_ranks (the tuning's held-out score) ranks the FAQs as fuse does for the same inputs."""
    rng = np.random.default_rng(seed)
    docs = rng.standard_normal((8, 6))
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    doc_faq = np.array([f"f{i}" for i in range(8)])  # one question per FAQ: its cosine is the FAQ's best
    query = rng.standard_normal((1, 6))
    query /= np.linalg.norm(query)
    lexical = {f"f{i}": float(rng.uniform(0, 9)) for i in range(8) if rng.random() < 0.6}
    tokens = {f"f{i}": float(rng.uniform(0, 1)) for i in range(8) if rng.random() < 0.5}
    cosines = (query @ docs.T)[0]
    cands = [Answer(f, "a", 0.0, "q", i, dense=float(cosines[i]), lexical=lexical.get(f), token=tokens.get(f))
             for i, f in enumerate(doc_faq)]
    order = [a.faq_id for a in fuse(cands, 0.7, 8, 0.3)]
    for rank, faq in enumerate(order, 1):
        rr, _ = _reciprocal_ranks(docs, doc_faq, query, [{faq}], cutoff=10, lexical=[lexical], weight=0.7,
                                  tokens=[tokens], token_weight=0.3)
        assert rr[0] == pytest.approx(1.0 / rank)


def test_the_fusion_grid_ranks_as_fuse_does():
    """tune_fusion scores its whole grid from arrays: the reciprocal ranks are fuse's, exactly, with
    ties (kept in the candidates' order), missing BM25, token or prototype scores, NaN prototypes,
    negative BM25 and empty lists among the candidates."""
    from faqsearch.evaluation import reciprocal_rank
    from faqsearch.tuning.fusion import grid_reciprocal_ranks

    rng = np.random.default_rng(5)
    cands, gold = [], []
    for _ in range(600):
        lst = []
        for _ in range(int(rng.choice([0, 1, 3, 12, 30]))):
            dense = float(rng.choice([0.5, 0.25, round(float(rng.uniform(-0.2, 1)), 3)]))
            lexical = [None, 0.0, -0.3, 3.0, round(float(rng.uniform(0, 12)), 2)][int(rng.integers(5))]
            token = [None, 0.0, round(float(rng.uniform(0, 1)), 3)][int(rng.integers(3))]
            proto = [None, float("nan"), dense, round(float(rng.uniform(-0.2, 1)), 3)][int(rng.integers(4))]
            lst.append(Answer(f"f{rng.integers(15)}", "", dense, "q", -1, dense=dense, lexical=lexical, token=token,
                              prototype=proto))
        cands.append(lst)
        gold.append({f"f{rng.integers(15)}", f"f{rng.integers(15)}"})
    weights = [(w, t, p) for p in (0.0, 0.5, 1.0) for t in (0.0, 1.0) for w in (0.0, 0.1, 1.0)]
    grid = grid_reciprocal_ranks(cands, gold, weights)
    for (w, t, p), got in zip(weights, grid):
        loop = [reciprocal_rank([a.faq_id for a in fuse(c, w, 10, t, p)], g) for c, g in zip(cands, gold)]
        assert got.tolist() == loop, (w, t, p)  # exactly equal
    assert any(r.any() for r in grid) and any((r == 0).any() for r in grid)
    assert [r.tolist() for r in grid_reciprocal_ranks([], [], weights)] == [[]] * len(weights)
