"""FAQ prototypes: the mean direction of an FAQ's questions, a second view of the FAQ beside its best
question. Hybrid ranking adds ``weight * max(0, cosine to the prototype - cosine of the best
question)``: a query close to what an FAQ's questions share moves up, while an FAQ is never ranked
below its best question's cosine, so a stored question asked as it is finds its own FAQ (a signed
term lost 2 of Banking77's 385 questions asked verbatim at weight 0.5, and ranked a question typed
into the console under another FAQ). Where FAQs have a few questions each this ranks better
(Banking77 with 5 questions per FAQ; benchmarks/results/quality.md); each index chooses the weight
from its own questions (:func:`choose_weight`), 0 where too few FAQs have three or more.

Pure numpy on unit vectors in the space scores are given in (:meth:`faqsearch.whitening.Whitening.full`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .defaults import PROTOTYPE_DOCS, PROTOTYPE_QUERIES, PROTOTYPE_WEIGHTS

BLOCK = 4096  # rows transformed or scored at a time (bounded memory)
MIN_FAQS = 10  # FAQs with three or more questions needed to choose a weight


def group_sums(vectors: np.ndarray, groups: np.ndarray, n: int) -> np.ndarray:
    """The sum of the rows of ``vectors`` in each of ``n`` groups (float64)."""
    out = np.zeros((n, vectors.shape[1]), np.float64)
    add_groups(out, vectors, groups)
    return out


def add_groups(out: np.ndarray, vectors: np.ndarray, groups: np.ndarray) -> None:
    """Add each row of ``vectors`` to the row of ``out`` its group names: the rows sorted by group and
    summed a run at a time (``np.add.at``, a row at a time, made a version's prototypes 7x slower)."""
    groups = np.asarray(groups)
    if len(groups) != len(vectors):
        raise ValueError(f"{len(vectors)} rows and {len(groups)} groups")
    if not len(groups):
        return
    order = np.argsort(groups, kind="stable")  # each group's rows in their order, as np.add.at adds them
    g = groups[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    out[g[starts]] += np.add.reduceat(np.asarray(vectors)[order], starts, axis=0, dtype=np.float64)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def aligned(ids: np.ndarray, raw, qids: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, object, np.ndarray]:
    """The raw vectors' ids and rows, and their FAQ keys, for the questions both lists hold: a
    backend's raw vectors and its store's (question id, FAQ key) pairs both list the visible
    questions by id, so this is the identity unless they differ."""
    ids = np.asarray(ids)
    if np.array_equal(ids, qids):
        return ids, raw, keys
    common, at_raw, at_keys = np.intersect1d(ids, qids, return_indices=True)
    return common, np.asarray(raw)[at_raw], keys[at_keys]


class Prototypes:
    """The prototypes of one version of an index: for each question id, its FAQ's unit mean vector."""

    def __init__(self, ids: np.ndarray, groups: np.ndarray, centroids: np.ndarray):
        self.ids = ids  # question ids, sorted
        self.groups = groups  # the prototype row of each question's FAQ
        self.centroids = centroids.astype(np.float32)

    @classmethod
    def build(cls, ids: np.ndarray, faq_keys: np.ndarray, raw: np.ndarray,
              full: Callable[[np.ndarray], np.ndarray]) -> "Prototypes":
        """From every question's id, FAQ key and raw vector (in the same order), ``full`` mapping raw
        vectors to the unit vectors scores are given in."""
        order = np.argsort(ids, kind="stable")
        ids, faq_keys = np.asarray(ids)[order], np.asarray(faq_keys)[order]
        keys, groups = np.unique(faq_keys, return_inverse=True)
        sums = np.zeros((len(keys), raw.shape[1] if len(raw) else 0), np.float64)
        for start in range(0, len(ids), BLOCK):
            rows = order[start:start + BLOCK]
            part = np.asarray(raw[np.sort(rows)])[np.argsort(np.argsort(rows))]  # memory-mapped reads in file order
            vec = full(part)
            if not sums.shape[1]:
                sums = np.zeros((len(keys), vec.shape[1]), np.float64)
            add_groups(sums, vec, groups[start:start + BLOCK])
        return cls(ids, groups, unit(sums))

    def scores(self, question_ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The cosine of ``query`` (a unit vector) to the prototype of each question's FAQ (NaN for an
        id this version does not hold)."""
        question_ids = np.asarray(question_ids, dtype=np.int64)
        at = np.clip(np.searchsorted(self.ids, question_ids), 0, max(len(self.ids) - 1, 0))
        known = (len(self.ids) > 0) & (self.ids[at] == question_ids) if len(self.ids) else np.zeros(len(at), bool)
        out = np.full(len(question_ids), np.nan, np.float32)
        if known.any():
            out[known] = self.centroids[self.groups[at[known]]] @ np.asarray(query, np.float32)
        return out


def sample_rows(groups: np.ndarray, seed: int = 0) -> np.ndarray:
    """The rows :func:`choose_weight` searches: all, or where there are more than PROTOTYPE_DOCS,
    whole FAQs drawn at random until that many questions (so a caller transforms only those)."""
    groups = np.asarray(groups)
    if len(groups) <= PROTOTYPE_DOCS:
        return np.arange(len(groups))
    keys, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    picked, budget = [], PROTOTYPE_DOCS
    for g in np.random.default_rng(seed).permutation(len(keys)):
        if budget >= counts[g]:
            picked.append(g)
            budget -= counts[g]
    return np.flatnonzero(np.isin(inverse, picked))


def choose_weight(vectors: np.ndarray, groups: np.ndarray, seed: int = 0,
                  weights: tuple[float, ...] = PROTOTYPE_WEIGHTS) -> dict:
    """The prototype weight that ranks the index's own questions best, each asked in turn of the
    others (its FAQ's prototype made without it; MRR@10 over FAQs, ties to the lower weight), on up to
    PROTOTYPE_QUERIES questions of FAQs with three or more (two left make a prototype that is not a
    single question) and up to PROTOTYPE_DOCS questions searched. ``vectors``: unit rows; ``groups``:
    the FAQ number of each row. Returns {"weight", "queries", "mrr@10": {weight: value}}; weight 0
    with no measure where fewer than MIN_FAQS FAQs have three or more questions."""
    groups = np.asarray(groups)
    rng = np.random.default_rng(seed)
    rows = sample_rows(groups, seed)
    vec = np.asarray(vectors, np.float32)[rows] if len(rows) < len(groups) else np.asarray(vectors, np.float32)
    _, grp, sizes = np.unique(groups[rows], return_inverse=True, return_counts=True)
    asked = np.flatnonzero(sizes[grp] >= 3)
    if len(np.unique(grp[asked])) < MIN_FAQS:
        return {"weight": 0.0, "queries": 0, "mrr@10": {}}
    asked = np.sort(rng.choice(asked, min(len(asked), PROTOTYPE_QUERIES), replace=False))
    order = np.argsort(grp, kind="stable")  # columns grouped by FAQ, for the best question of each
    column = np.argsort(order)  # each row's column
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    sums = group_sums(vec, grp, len(sizes))
    norms2 = (sums * sums).sum(1)
    cols = vec[order]
    rr = np.zeros((len(weights), len(asked)))
    for start in range(0, len(asked), 256):
        q = asked[start:start + 256]
        sim = vec[q] @ cols.T
        sim[np.arange(len(q)), column[q]] = -np.inf  # the question itself is not searched
        best = np.maximum.reduceat(sim, starts, axis=1)
        dots = vec[q].astype(np.float64) @ sums.T
        own = grp[q]
        at = np.arange(len(q))
        own_dot = dots[at, own] - 1.0  # its FAQ's sum without it (unit rows: q.q = 1)
        own_norm = np.sqrt(np.maximum(norms2[own] - 2.0 * dots[at, own] + 1.0, 1e-12))
        proto = dots / np.sqrt(np.maximum(norms2, 1e-12))
        proto[at, own] = own_dot / own_norm
        for w, weight in enumerate(weights):
            score = best + weight * np.maximum(proto - best, 0.0)
            rank = (score > score[at, own][:, None]).sum(1)
            rr[w, start:start + len(q)] = np.where(rank < 10, 1.0 / (rank + 1), 0.0)
    mrr = rr.mean(1)
    chosen = int(np.flatnonzero(mrr >= mrr.max() - 1e-12)[0])
    return {"weight": float(weights[chosen]), "queries": int(len(asked)),
            "mrr@10": {f"{w:g}": round(float(100 * m), 2) for w, m in zip(weights, mrr)}}
