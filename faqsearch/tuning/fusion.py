"""Choose the weights of BM25 and of token matching in hybrid mode (0 and 0 = dense only), from labelled queries or from the
index's own question variants, by 5-fold cross-validated MRR@10. Nothing here writes: the engine
stores a chosen weight (:meth:`faqsearch.engine.FAQSearch.set_fusion`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..defaults import (CONFIDENCE_ROUNDS, CONFIDENCE_SAMPLE, FOLDS, FUSION_POOL, FUSION_WEIGHTS, LEXICAL_POOL,
                        PROTOTYPE_MAX_QUESTIONS, SELF_FUSION_DOCS, SELF_FUSION_MAX, SELF_TOKEN_MAX, TOKEN_WEIGHTS)
from ..errors import FAQSearchError, TooFewVariantsError
from ..evaluation import LabelledQuery, check_gold, reciprocal_rank
from ..lexical import bm25_scorer, fts_words, topk
from ..progress import progress_bar
from ..prototypes import choose_weight, sample_rows, unit
from ..results import Answer
from ..search import fuse
from .transform import cross_validate, held_out_variants


@dataclass
class FusionReport:
    """Cross-validated choice of the hybrid (BM25) weight; 0 = no BM25."""

    rows: list[dict[str, Any]]
    current: float
    chosen: float
    cv_current: float
    cv_tuned: float
    n: int
    lexical: float  # MRR@10 of lexical mode alone, for reference
    applied: bool = False
    chosen_by: str = "labelled queries"
    token_weight: float = 0.0  # the chosen weight of token matching (0 where the index has none)
    current_token: float = 0.0  # the index's token matching weight
    prototype_weight: float = 0.0  # the chosen weight of the FAQ prototype term (faqsearch.prototypes)
    current_prototype: float = 0.0
    prototype: dict[str, Any] | None = None  # how the prototype weight was chosen (choose_weight's record)

    @property
    def gain(self) -> float:
        return self.cv_tuned - self.cv_current

    def to_dict(self) -> dict[str, Any]:
        return {"metric": "mrr@10", "n": self.n, "current_weight": self.current, "chosen_weight": self.chosen,
                "cv_current": self.cv_current, "cv_tuned": self.cv_tuned, "gain": self.gain,
                "lexical_mrr@10": self.lexical, "applied": self.applied, "chosen_by": self.chosen_by,
                "current_token_weight": self.current_token, "chosen_token_weight": self.token_weight,
                "current_prototype_weight": self.current_prototype, "chosen_prototype_weight": self.prototype_weight,
                "prototype_choice": self.prototype, "rows": self.rows}


def self_fusion_candidates(searcher, progress: bool = False, seed: int = 0, limit: int | None = None,
                           texts: list[str] | None = None, avoid: set[int] | None = None
                           ) -> tuple[list[list[Answer]], list[set[str]]]:
    """Hybrid candidates for the index's own held-out question variants, each searched against the
    other questions only (dense: the stored raw vectors and the index's transform; lexical: BM25 over
    the store's tokens, FTS5's formula). Raises TooFewVariantsError below 10 such FAQs. ``seed``
    draws which question of each FAQ is held out; ``limit``: how many at most (default: fewer where
    token matching is on); ``texts``: gets the held-out questions' texts, in order; ``avoid``: ids of
    questions not to hold out, and gets the ids of those it holds out (for further rounds)."""
    snap = searcher.snap
    _, raw = snap.raw.all()
    qids, faq_keys = snap.store.question_faqs()  # 16 bytes a question; texts are read for the chosen rows only
    # token matching encodes each candidate's question not kept with the version (tokenstates): fewer
    # queries bound that work
    if limit is None:
        limit = SELF_FUSION_MAX if snap.token_weight <= 0 else SELF_TOKEN_MAX
    held = held_out_variants(faq_keys, seed, limit=limit,
                             avoid=np.flatnonzero(np.isin(qids, list(avoid))) if avoid else None)
    if avoid is not None:
        avoid.update(int(q) for q in qids[held])
    if len(held) < 10:
        raise TooFewVariantsError(f"only {len(held)} FAQs have two or more questions: too few to tune on; "
                                  "give labelled queries instead (faqsearch tune fusion QUERIES)")
    keys, counts = np.unique(faq_keys, return_counts=True)
    siblings = counts[np.searchsorted(keys, faq_keys[held])] - 1
    if siblings.sum() > SELF_FUSION_DOCS:  # FAQs with many questions: fewer queries, so the docs fit
        order = np.random.default_rng(seed).permutation(len(held))
        fits = max(int(np.sum(np.cumsum(siblings[order]) <= SELF_FUSION_DOCS)), min(10, len(held)))
        held = np.sort(held[order[:fits]])
    keep = np.setdiff1d(np.arange(len(qids)), held)
    if len(keep) > SELF_FUSION_DOCS:
        held_faqs = set(faq_keys[held].tolist())
        sizes = dict(zip(keys.tolist(), counts.tolist()))
        others = sorted(set(sizes) - held_faqs)
        order = [others[i] for i in np.random.default_rng(seed).permutation(len(others))]
        budget = SELF_FUSION_DOCS - sum(sizes[f] - 1 for f in held_faqs)
        chosen = set(held_faqs)
        for f in order:
            if budget <= 0:
                break
            chosen.add(f)
            budget -= sizes[f]
        keep = keep[np.isin(faq_keys[keep], np.fromiter(chosen, dtype=np.int64, count=len(chosen)))]
    text = {r[0]: r for r in snap.store.question_rows(qids[np.concatenate([held, keep])])}
    rows = {int(i): text[int(qids[i])] for i in np.concatenate([held, keep])}  # position -> (id, faq_id, text)
    docs = np.empty((len(keep), raw.shape[1]), np.float32)  # calibrated, as the searcher scores
    for i in range(0, len(keep), 4096):
        docs[i:i + 4096] = snap.whitening.full(np.asarray(raw[keep[i:i + 4096]]))
    queries = snap.whitening.full(np.asarray(raw[held]))
    doc_faq = np.array([rows[i][1] for i in keep], dtype=object)
    faq_docs: dict[str, list[int]] = {}
    for d, f in enumerate(doc_faq):
        faq_docs.setdefault(f, []).append(d)
    centroids = {f: unit(docs[d].sum(0)) for f, d in faq_docs.items()}  # prototypes of the kept questions
    cjk, stem = snap.store.cjk, snap.store.stem
    bm25 = bm25_scorer([fts_words(rows[i][2], cjk, stem) for i in keep])  # the words as FTS5 holds them
    cands, gold = [], []
    texts = texts if texts is not None else []
    with progress_bar(len(held), progress, "self-supervised fusion") as bar:
        for start in range(0, len(held), 256):
            block = queries[start:start + 256] @ docs.T
            for j, qi in enumerate(held[start:start + 256]):
                dense = block[j]
                best: dict[str, float] = {}
                where: dict[str, int] = {}  # the question each candidate FAQ is matched by
                for d in topk(dense, FUSION_POOL * 8):
                    if doc_faq[d] not in best:
                        best[doc_faq[d]], where[doc_faq[d]] = float(dense[d]), int(d)
                lex_scores = bm25(fts_words(rows[qi][2], cjk, stem))
                lex: dict[str, float] = {}
                lex_at: dict[str, int] = {}
                for d in topk(lex_scores, LEXICAL_POOL * 4):
                    if lex_scores[d] <= 0:
                        break
                    if doc_faq[d] not in lex:
                        lex[doc_faq[d]], lex_at[doc_faq[d]] = float(lex_scores[d]), int(d)
                pool = list(best)[:FUSION_POOL] + [f for f in list(lex)[:LEXICAL_POOL] if f not in best]
                for f in pool:
                    if f not in best:  # a lexical-only candidate gets its FAQ's best cosine
                        best[f], where[f] = float(dense[faq_docs[f]].max()), lex_at[f]
                cands.append([Answer(f, "", best[f], rows[keep[where[f]]][2], -1, dense=best[f], lexical=lex.get(f),
                                     prototype=float(centroids[f] @ queries[start + j])) for f in pool])
                gold.append({rows[qi][1]})
                texts.append(rows[qi][2])
                bar.update(1)
    return searcher.add_token_scores(texts, cands), gold


def variant_rounds(searcher, progress: bool = False, seed: int = 0) -> tuple[list[list[Answer]], list[set[str]]]:
    """:func:`self_fusion_candidates`, and on a small FAQ further rounds that hold out another question
    of each FAQ, never one held out before (seeds ``seed`` + 1, + 2, ...; up to CONFIDENCE_ROUNDS in
    all) until CONFIDENCE_SAMPLE are found: 77 held-out questions choose the weights and the confidence
    by chance more often than 300 do. ``seed``: the first round's (0 for every index; another draws
    other questions, benchmarks/experiments/operating_point.py).
    Raises TooFewVariantsError as the first round does."""
    held: set[int] = set()  # each question is held out once at most: no query twice in the folds
    cands, gold = self_fusion_candidates(searcher, progress, seed=seed, avoid=held)
    rounds = 1
    while cands and len(cands) < CONFIDENCE_SAMPLE and rounds < CONFIDENCE_ROUNDS:
        try:
            more = self_fusion_candidates(searcher, progress, seed=seed + rounds, avoid=held)
        except TooFewVariantsError:  # fewer than 10 FAQs have a question not yet held out
            break
        rounds += 1
        cands, gold = cands + more[0], gold + more[1]
    return cands, gold


def tune_fusion(searcher, queries: Sequence[LabelledQuery] | None = None, folds: int = FOLDS,
                progress: bool = False, self_supervised: bool = False,
                candidates: tuple[list[list[Answer]], list[set[str]]] | None = None) -> FusionReport:
    """Choose the weight of BM25 in hybrid mode (5-fold cross-validated MRR@10) from labelled queries,
    or from the index's own question variants (``self_supervised``: one question of every FAQ that
    has several is the query, searched against the others; ``candidates``: those already computed)."""
    snap = searcher.snap
    if candidates is not None:
        (cands, gold), texts, self_supervised = candidates, None, True
    elif self_supervised:
        cands, gold = variant_rounds(searcher, progress)
        texts = None
    else:
        if not queries:
            raise FAQSearchError("no labelled queries to tune on")
        check_gold(snap, queries)
        texts = [q.text for q in queries]
        gold = [q.gold for q in queries]
        cands = searcher.candidates(texts, searcher.vectors(texts, progress=progress), FUSION_POOL)
    cur_w = snap.hybrid_weight if snap.mode == "hybrid" else 0.0
    cur_t = snap.token_weight if snap.mode == "hybrid" else 0.0
    cur_p = snap.prototype_weight
    # the prototype weight: the one the index's questions left out one at a time (thousands) rank best
    # with, or none; the grid chooses between the two with the other weights
    choice = prototype_choice(snap) if self_supervised else None
    protos = sorted({0.0, cur_p if cur_p > 0 and snap.prototypes is not None else 0.0, choice["weight"] if choice else 0.0})
    tokens = [0.0] + ([t for t in TOKEN_WEIGHTS if t > 0] if any(a.token is not None for c in cands for a in c) else [])
    if cur_t not in tokens:
        tokens.append(cur_t)
    # (BM25 weight, token match weight, prototype weight)
    weights = [(w, t, p) for p in protos for t in tokens for w in FUSION_WEIGHTS]
    if (cur_w, cur_t, cur_p) not in weights:
        weights.append((cur_w, cur_t, cur_p))
    per = grid_reciprocal_ranks(cands, gold, weights)
    if texts is None:  # lexical alone, from the candidates' BM25
        lexical = float(np.mean([reciprocal_rank([a.faq_id for a in sorted((a for a in c if a.lexical),
                                                                            key=lambda a: -a.lexical)], g)
                                 for c, g in zip(cands, gold)]))
    else:
        lex = searcher.lexical(texts, 10)
        lexical = float(np.mean([reciprocal_rank([a.faq_id for a in found], g) for found, g in zip(lex, gold)]))
    current = weights.index((cur_w, cur_t, cur_p))
    n = len(gold)

    def score(s, idx):
        return float(per[s][idx].mean())

    full = [score(i, np.arange(n)) for i in range(len(weights))]
    chosen = max(range(len(weights)), key=lambda i: (full[i], i == current))
    cv_cur, cv_tuned = cross_validate(score, n, len(weights), current, folds)
    dense = weights.index((0.0, 0.0, 0.0))
    cv_dense, _ = cross_validate(score, n, len(weights), dense, folds)
    if cv_tuned < cv_dense:  # the choice procedure loses to dense alone held out: keep (or choose) dense
        chosen, cv_tuned = dense, cv_dense
    rows = [{"weight": w, "token_weight": t, "prototype_weight": pw, "mrr@10": full[i], "current": i == current,
             "chosen": i == chosen} for i, (w, t, pw) in enumerate(weights)]
    return FusionReport(rows, cur_w, weights[chosen][0], cv_cur, cv_tuned, n, lexical,
                        chosen_by="self-supervised (question variants)" if self_supervised else "labelled queries",
                        token_weight=weights[chosen][1], current_token=cur_t, prototype_weight=weights[chosen][2],
                        current_prototype=cur_p, prototype=choice)


def grid_reciprocal_ranks(cands: Sequence[Sequence[Answer]], gold: Sequence[set[str]],
                          weights: Sequence[tuple[float, float, float]], cutoff: int = 10) -> list[np.ndarray]:
    """Each query's reciprocal rank (first ``cutoff``) of its gold FAQ in ``fuse(c, w, cutoff, t, p)``'s
    list, for every (BM25, token, prototype) weight of the grid: the same numbers as that loop, from
    arrays built once (:func:`faqsearch.search.fusion_score`'s operations in its order, in float64,
    and a stable sort, so ties keep the candidates' order as ``fuse`` does)."""
    n, width = len(cands), max((len(c) for c in cands), default=0)
    if n == 0 or width == 0:
        return [np.zeros(n) for _ in weights]
    dense = np.full((n, width), -np.inf)
    lexical, token, lift = (np.zeros((n, width)) for _ in range(3))
    hit = np.zeros((n, width), dtype=bool)
    for i, (c, g) in enumerate(zip(cands, gold)):
        m = len(c)
        dense[i, :m] = [a.dense for a in c]
        lexical[i, :m] = [a.lexical or 0.0 for a in c]
        token[i, :m] = [a.token or 0.0 for a in c]
        lift[i, :m] = [np.nan if a.prototype is None else a.prototype for a in c]
        hit[i, :m] = [a.faq_id in g for a in c]
    top = np.max(np.where(np.isfinite(dense), lexical, -np.inf), axis=1)  # lexical_top: the best BM25,
    top = np.where((top == 0.0) | ~np.isfinite(top), 1.0, top)[:, None]  # 1 when it is 0 (or no candidate)
    lift = np.where(np.isfinite(dense), lift, np.nan) - np.where(np.isfinite(dense), dense, 0.0)
    lift = np.where(lift > 0, lift, 0.0)  # max(0, prototype - cosine); no prototype (NaN) lifts nothing
    out = []
    for w, t, p in weights:
        score = dense + t * token + w * lexical / top
        if p:
            score = score + p * lift
        order = np.argsort(-score, axis=1, kind="stable")[:, :cutoff]
        found = np.take_along_axis(hit, order, axis=1)
        first = found.argmax(axis=1)
        out.append(np.where(found.any(axis=1), 1.0 / (first + 1), 0.0))
    return out


def prototype_choice(snap) -> dict[str, Any]:
    """The FAQ prototype weight the index's own questions rank best with, each left out in turn
    (:func:`faqsearch.prototypes.choose_weight`, on up to PROTOTYPE_DOCS of its questions)."""
    found = snap.prototype_rows()
    if found is None:
        return {"weight": 0.0, "queries": 0, "mrr@10": {}, "why": f"more than {PROTOTYPE_MAX_QUESTIONS} questions"}
    _, keys, raw = found
    rows = sample_rows(keys)
    vectors = np.concatenate([snap.whitening.full(np.asarray(raw[rows[i:i + 4096]]))
                              for i in range(0, len(rows), 4096)] or [np.zeros((0, 1), np.float32)])
    return choose_weight(vectors, keys[rows])
