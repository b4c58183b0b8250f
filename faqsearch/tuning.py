"""Choose beta, gamma and k from labelled data without re-encoding the corpus.

The index keeps the raw encoder vectors of its questions (``vectors.npy``) and the moments the
transform was fitted from, so every candidate transform is recomputed from those. Each setting
gets a per-query score; the choice is cross-validated (k folds: choose on the other folds,
measure on the held-out one), so the reported gain is not measured on the data it was chosen on.
"""
from __future__ import annotations

import itertools
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from . import config as cfg
from .encoders.base import progress_bar
from .errors import FAQSearchError, TooFewVariantsError
from .evaluation import LabelledQuery, reciprocal_rank, spearman
from .index import factory_for
from .whitening import Moments, Whitening

log = logging.getLogger(__name__)

BETAS = (0.0, 0.5, 1.0)
GAMMAS = (0.0, 0.5, 1.0)
KS = (64, 128, 256, None)  # None = every dimension the data supports
FOLDS = 5


@dataclass(frozen=True)
class Setting:
    whiten: bool
    beta: float = 0.0
    gamma: float = 0.0
    k: int | None = None

    @property
    def label(self) -> str:
        if not self.whiten:
            return "no transform"
        return f"beta={self.beta:g} gamma={self.gamma:g} k={'all' if self.k is None else self.k}"


@dataclass
class TuneReport:
    metric: str
    current: Setting
    chosen: Setting
    rows: list[dict[str, Any]]  # one per setting: label, full-data score, dims
    cv_current: float  # held-out score of the current setting
    cv_tuned: float  # held-out score of the setting chosen on the other folds
    n: int
    applied: bool = False
    new_threshold: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def gain(self) -> float:
        return self.cv_tuned - self.cv_current

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "n": self.n, "current": self.current.label, "chosen": self.chosen.label,
                "cv_current": self.cv_current, "cv_tuned": self.cv_tuned, "gain": self.gain,
                "applied": self.applied, "new_threshold": self.new_threshold, "rows": self.rows, "notes": self.notes}


def grid(dim: int, rank: int) -> list[Setting]:
    """The candidate settings: no transform, plus beta x gamma x k (k limited to what the data supports)."""
    top = max(1, min(dim, rank))
    ks = sorted({k for k in KS if k is not None and k < top} | {top})
    out = [Setting(False)]
    for beta, gamma, k in itertools.product(BETAS, GAMMAS, ks):
        out.append(Setting(True, beta, gamma, None if k == dim else k))
    return out


def current_setting(config: dict[str, Any]) -> Setting:
    w = config["whitening"]
    if not w.get("enabled", True):
        return Setting(False)
    k = int(w.get("k_effective") or config["dim_out"])
    return Setting(True, float(w["beta"]), float(w["gamma"]), None if k == config["dim_in"] else k)


def _transform(setting: Setting, moments: Moments, dim: int) -> Whitening:
    if not setting.whiten:
        return Whitening.identity(dim)
    return Whitening.from_moments(moments, setting.beta, setting.gamma, setting.k)


def _reciprocal_ranks(docs: np.ndarray, doc_faq: np.ndarray, queries: np.ndarray,
                      gold: Sequence[set[str]], cutoff: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Per-query reciprocal rank of the first gold FAQ among the top distinct FAQs (0 past the cutoff),
    and per-query best score."""
    scores = queries @ docs.T
    depth = min(scores.shape[1], cutoff * 20)
    top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth] if depth < scores.shape[1] else \
        np.tile(np.arange(scores.shape[1]), (len(queries), 1))
    out = np.zeros(len(queries))
    for i in range(len(queries)):
        order = top[i][np.argsort(-scores[i, top[i]], kind="stable")]
        out[i] = reciprocal_rank(list(dict.fromkeys(doc_faq[order])), gold[i], cutoff)  # distinct FAQs, in order
    return out, scores.max(axis=1)


def _folds(n: int, folds: int, seed: int = 0) -> list[np.ndarray]:
    perm = np.random.default_rng(seed).permutation(n)
    return [perm[i::folds] for i in range(min(folds, n))]


def _cross_validate(score_fn, n: int, n_settings: int, current: int, folds: int) -> tuple[float, float]:
    """Held-out score of the current setting and of the one chosen on the other folds, averaged over folds."""
    parts = _folds(n, folds)
    cur, tuned = [], []
    for held in parts:
        train = np.setdiff1d(np.arange(n), held)
        best = max(range(n_settings), key=lambda s: (score_fn(s, train), s == current))
        cur.append(score_fn(current, held) * len(held))
        tuned.append(score_fn(best, held) * len(held))
    return sum(cur) / n, sum(tuned) / n


def default_offtopic() -> list[str]:
    """Generic questions no FAQ should answer (English and Chinese), shipped with faqsearch."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "offtopic.txt")
    with open(path, encoding="utf-8") as fh:
        return [line.strip() for line in fh if line.strip()]


def tune(engine, queries: Sequence[LabelledQuery] | None = None, pairs: tuple | None = None,
         self_supervised: bool = False, folds: int = FOLDS, progress: bool = False,
         offtopic: Sequence[str] | None = None) -> TuneReport:
    """Evaluate the grid on labelled queries, sentence pairs, or the index's own question variants.

    A new threshold (for a new transform's score scale) keeps the share of tuning queries
    answered, but is never set where more of ``offtopic`` (default: a generic English and Chinese
    list shipped with faqsearch) would be answered than at the current setting."""
    _, raw = engine.raw_vectors()
    rows = engine.store.all_questions()  # (id, faq_id, text), in id order = the raw vectors' order
    dim = raw.shape[1]
    doc_faq = np.array([r[1] for r in rows], dtype=object)
    moments = engine.whitening.moments
    notes = []
    metric = "mrr@10"
    if pairs is not None:
        metric = "spearman"
        a, b, y = pairs
        qa = engine.encoder.encode(list(a), progress=progress)
        qb = engine.encoder.encode(list(b), progress=progress)
    elif self_supervised:
        # hold out one question of every FAQ that has several; the rest stay as documents
        by_faq: dict[str, list[int]] = {}
        for i, r in enumerate(rows):
            by_faq.setdefault(r[1], []).append(i)
        rng = np.random.default_rng(0)
        held = np.array(sorted(int(rng.choice(ix)) for ix in by_faq.values() if len(ix) >= 2), dtype=np.int64)
        if len(held) < 10:
            raise TooFewVariantsError(f"only {len(held)} FAQs have two or more questions: too few to tune on; "
                                 "give labelled queries instead (faqsearch tune QUERIES)")
        keep = np.setdiff1d(np.arange(len(rows)), held)
        q_raw = np.asarray(raw[held])
        gold = [{doc_faq[i]} for i in held]
        raw_docs, doc_faq = np.asarray(raw[keep]), doc_faq[keep]
        if engine.config["whitening"].get("fitted_on") == "corpus questions":
            moments = Moments(dim).update(raw_docs)  # the held-out questions must not shape the transform
        notes.append(f"self-supervised: {len(held)} held-out question variants as queries")
    else:
        if not queries:
            raise FAQSearchError("no labelled queries to tune on")
        q_raw = engine.encoder.encode([q.text for q in queries], progress=progress)
        gold = [q.gold for q in queries]
    if pairs is None and not self_supervised:
        raw_docs = np.asarray(raw)
    settings = grid(dim, moments_rank(moments))
    cur = current_setting(engine.config)
    if cur not in settings:
        settings.append(cur)
    current = settings.index(cur)
    per_item: list[np.ndarray] = []
    bests: list[np.ndarray] = []
    dims = []
    with progress_bar(len(settings), progress, "tuning") as bar:
        for s in settings:
            w = _transform(s, moments, dim)
            dims.append(w.dim_out)
            if pairs is not None:
                per_item.append((w.transform(qa) * w.transform(qb)).sum(axis=1))
            else:
                rr, best = _reciprocal_ranks(w.transform(raw_docs), doc_faq, w.transform(q_raw), gold)
                per_item.append(rr)
                bests.append(best)
            bar.update(1)
    if pairs is not None:
        y = np.asarray(pairs[2])
        n = len(y)

        def score(s, idx):
            return 100.0 * spearman(per_item[s][idx], y[idx])
    else:
        n = len(per_item[0])

        def score(s, idx):
            return float(per_item[s][idx].mean())
    everything = np.arange(n)
    full = [score(s, everything) for s in range(len(settings))]
    chosen = max(range(len(settings)), key=lambda s: (full[s], s == current))
    cv_cur, cv_tuned = _cross_validate(score, n, len(settings), current, folds)
    table = [{"setting": s.label, metric: full[i], "dims": dims[i], "current": i == current, "chosen": i == chosen}
             for i, s in enumerate(settings)]
    report = TuneReport(metric, cur, settings[chosen], table, cv_cur, cv_tuned, n, notes=notes)
    if bests and chosen != current:
        # scores of another transform live on another scale: keep the share of queries answered
        share = float(np.mean(bests[current] >= engine.threshold))
        report.new_threshold = float(np.quantile(bests[chosen], 1.0 - share)) if share > 0 else float(
            bests[chosen].max() + 1e-6)
        notes.append(f"threshold {engine.threshold:.3f} -> {report.new_threshold:.3f} keeps {share:.0%} of the "
                     "tuning queries answered")
        off_raw = engine.encoder.encode(list(offtopic if offtopic is not None else default_offtopic()))
        if len(off_raw):
            def off_best(s: Setting) -> np.ndarray:
                w = _transform(s, moments, dim)
                docs = w.transform(np.asarray(raw))
                return (w.transform(off_raw) @ docs.T).max(axis=1)

            allowed = float(np.mean(off_best(cur) >= engine.threshold))
            off = off_best(settings[chosen])
            floor = float(np.quantile(off, 1.0 - allowed)) if allowed > 0 else float(off.max() + 1e-6)
            if floor > report.new_threshold:
                report.new_threshold = floor
                notes.append(f"raised to {floor:.3f}: off-topic questions answered stay at {allowed:.0%} "
                             f"({len(off)} checked)")
    return report


def moments_rank(moments: Moments) -> int:
    if moments.n < 2:
        return moments.dim
    s = np.linalg.eigvalsh(moments.covariance)
    return int(np.sum(s > s.max() * 1e-7)) if s.max() > 0 else 0


def apply(engine, setting: Setting, threshold: float | None = None) -> str:
    """Rewrite the transform and the FAISS index of an index directory for ``setting``, atomically.

    Nothing is re-encoded: the stored raw vectors are transformed again. The writer lock is taken
    before anything is read, and the engine reloaded to the latest version under it, so an edit
    made by another process meanwhile is kept. Unchanged files are hard-linked into the new version.
    """
    from .engine import build_vector_index
    from .indexdir import next_version, share_file

    path = engine.path
    with engine._exclusive():
        current = engine.dir
        white = _transform(setting, engine.whitening.moments, int(engine.config["dim_in"]))
        white.moments = engine.whitening.moments
        ixc = dict(engine.config.get("index", {}))
        with next_version(path, "tuning") as tmp:
            config = dict(engine.config)
            if engine.backend == "milvus":
                from .backends.milvus import rebuild

                config["backend"] = rebuild(engine, white)
                config["generation"] = config["backend"]["generation"]
            else:
                from .edits import purge_leftovers, write_live_vectors

                purge_leftovers(engine)  # the store is shared with the new version: no killed edit's rows in it
                share_file(current, tmp, cfg.FILES["store"])
                ids, raw = write_live_vectors(engine, tmp)  # the delta, if any, folded into the new base
                config.pop("delta", None)
                factory = factory_for(ixc.get("type", ixc.get("factory", "Flat")), len(ids), white.dim_out)
                vindex = build_vector_index(white, raw, ids, factory)  # rebuilt from live vectors: no tombstones
                vindex.save(os.path.join(tmp, cfg.FILES["faiss"]))
                ixc = {**ixc, "factory": factory, "tombstones": 0, "nprobe": getattr(vindex, "nprobe", None),
                       "ef_search": getattr(vindex, "ef_search", None)}
                config["generation"] = int(config.get("generation", 0)) + 1
            white.save(os.path.join(tmp, cfg.FILES["whitening"]))
            config["whitening"] = {**config["whitening"], "enabled": setting.whiten, "beta": white.beta,
                                   "gamma": white.gamma, "k": setting.k if setting.whiten else None,
                                   "k_effective": white.dim_out, "rank": white.rank, "tuned": True}
            config["dim_out"] = white.dim_out
            config["index"] = ixc
            config["next_question_id"] = max(int(config.get("next_question_id", 0)), engine.index.max_id() + 1)
            if threshold is not None:
                config["threshold"] = threshold
            cfg.save_config(tmp, config)
        if engine.backend == "milvus":
            from .backends.milvus import drop_stale

            drop_stale(config["backend"])
        engine.reload()
    return path


def apply_if_better(engine, report: TuneReport) -> bool:
    """Apply the chosen setting only when its cross-validated held-out score beats the current one."""
    if report.gain > 0 and report.chosen != report.current:
        apply(engine, report.chosen, report.new_threshold)
        report.applied = True
    return report.applied


FUSION_WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)


@dataclass
class FusionReport:
    """Cross-validated choice of the hybrid weight (0 = dense only)."""

    rows: list[dict[str, Any]]
    current: float
    chosen: float
    cv_current: float
    cv_tuned: float
    n: int
    lexical: float  # MRR@10 of lexical mode alone, for reference
    applied: bool = False

    @property
    def gain(self) -> float:
        return self.cv_tuned - self.cv_current

    def to_dict(self) -> dict[str, Any]:
        return {"metric": "mrr@10", "n": self.n, "current_weight": self.current, "chosen_weight": self.chosen,
                "cv_current": self.cv_current, "cv_tuned": self.cv_tuned, "gain": self.gain,
                "lexical_mrr@10": self.lexical, "applied": self.applied, "rows": self.rows}


# held-out variants searched at most by the self-supervised fusion (a seeded sample beyond): each is
# searched against every other question, so all of them would cost hours at 1M questions
SELF_FUSION_MAX = 2_000
# ... searched among at most this many questions: the held-out FAQs' other variants and the questions
# of FAQs drawn at random (BM25 postings and transformed vectors of every question took 10 GB at 1M)
SELF_FUSION_DOCS = 50_000


def held_out_variants(rows: Sequence[tuple], seed: int = 0, limit: int | None = None) -> np.ndarray:
    """Positions (in ``rows``: (id, faq_id, ...)) of one question of every FAQ that has two or more
    (of ``limit`` such FAQs drawn at random when there are more)."""
    by_faq: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_faq.setdefault(r[1], []).append(i)
    rng = np.random.default_rng(seed)
    held = np.array(sorted(int(rng.choice(ix)) for ix in by_faq.values() if len(ix) >= 2), dtype=np.int64)
    if limit is not None and len(held) > limit:
        held = np.sort(rng.choice(held, size=limit, replace=False))
    return held


def _top(scores: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` highest scores, best first (a partial sort: the rest stay unsorted)."""
    top = np.argpartition(-scores, min(n, len(scores) - 1))[:n]
    return top[np.argsort(-scores[top], kind="stable")]


def _bm25(doc_tokens: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75):
    """A BM25 scorer with FTS5's formula and defaults, over the given documents: f(tokens) -> scores."""
    postings: dict[str, dict[int, int]] = {}
    lengths = np.array([len(t) for t in doc_tokens], dtype=np.float64)
    for d, toks in enumerate(doc_tokens):
        for t in toks:
            postings.setdefault(t, {}).setdefault(d, 0)
            postings[t][d] += 1
    n, avg = len(doc_tokens), max(lengths.mean() if len(lengths) else 1.0, 1e-9)
    norm = k1 * (1 - b + b * lengths / avg)

    def score(tokens: Sequence[str]) -> np.ndarray:
        out = np.zeros(n)
        for t in set(tokens):
            p = postings.get(t)
            if not p:
                continue
            idf = max(np.log((n - len(p) + 0.5) / (len(p) + 0.5)), 1e-6)
            docs = np.fromiter(p.keys(), dtype=np.int64, count=len(p))
            tf = np.fromiter(p.values(), dtype=np.float64, count=len(p))
            out[docs] += idf * tf * (k1 + 1) / (tf + norm[docs])
        return out

    return score


def self_fusion_candidates(engine, progress: bool = False) -> tuple[list[list], list[set[str]]]:
    """Hybrid candidates for the index's own held-out question variants, each searched against the
    other questions only (dense: the stored raw vectors and the index's transform; lexical: BM25 over
    the store's tokens, FTS5's formula). Raises TooFewVariantsError below 10 such FAQs."""
    from .engine import FUSION_POOL, LEXICAL_POOL, Answer
    from .lexical import tokenize

    _, raw = engine.raw_vectors()
    rows = engine.store.all_questions()
    held = held_out_variants(rows, limit=SELF_FUSION_MAX)
    if len(held) < 10:
        raise TooFewVariantsError(f"only {len(held)} FAQs have two or more questions: too few to tune on; "
                                  "give labelled queries instead (faqsearch tune QUERIES --fusion)")
    keep = np.setdiff1d(np.arange(len(rows)), held)
    if len(keep) > SELF_FUSION_DOCS:
        held_faqs = {rows[i][1] for i in held}
        sizes = Counter(r[1] for r in rows)
        others = sorted(set(sizes) - held_faqs)
        order = [others[i] for i in np.random.default_rng(0).permutation(len(others))]
        budget = SELF_FUSION_DOCS - sum(sizes[f] - 1 for f in held_faqs)
        chosen = set(held_faqs)
        for f in order:
            if budget <= 0:
                break
            chosen.add(f)
            budget -= sizes[f]
        keep = np.array([i for i in keep if rows[i][1] in chosen], dtype=np.int64)
    docs = engine.whitening.transform(np.asarray(raw[keep]))
    queries = engine.whitening.transform(np.asarray(raw[held]))
    doc_faq = np.array([rows[i][1] for i in keep], dtype=object)
    faq_docs: dict[str, list[int]] = {}
    for d, f in enumerate(doc_faq):
        faq_docs.setdefault(f, []).append(d)
    cjk = getattr(engine.store, "cjk", "unigram+bigram")
    bm25 = _bm25([tokenize(rows[i][2], cjk) for i in keep])
    cands, gold = [], []
    with progress_bar(len(held), progress, "self-supervised fusion") as bar:
        for start in range(0, len(held), 256):
            block = queries[start:start + 256] @ docs.T
            for j, qi in enumerate(held[start:start + 256]):
                dense = block[j]
                best: dict[str, float] = {}
                for d in _top(dense, FUSION_POOL * 8):
                    best.setdefault(doc_faq[d], float(dense[d]))
                lex_scores = bm25(tokenize(rows[qi][2], cjk))
                lex: dict[str, float] = {}
                for d in _top(lex_scores, LEXICAL_POOL * 4):
                    if lex_scores[d] <= 0:
                        break
                    lex.setdefault(doc_faq[d], float(lex_scores[d]))
                pool = list(best)[:FUSION_POOL] + [f for f in list(lex)[:LEXICAL_POOL] if f not in best]
                for f in pool:
                    if f not in best:  # a lexical-only candidate gets its FAQ's best cosine
                        best[f] = float(dense[faq_docs[f]].max())
                cands.append([Answer(f, "", best[f], "", -1, dense=best[f], lexical=lex.get(f)) for f in pool])
                gold.append({rows[qi][1]})
                bar.update(1)
    return cands, gold


def tune_fusion(engine, queries: Sequence[LabelledQuery] | None = None, folds: int = FOLDS, progress: bool = False,
                self_supervised: bool = False) -> FusionReport:
    """Choose the weight of BM25 in hybrid mode (5-fold cross-validated MRR@10) from labelled queries,
    or from the index's own question variants (``self_supervised``: one question of every FAQ that
    has several is the query, searched against the others)."""
    from .engine import FUSION_POOL, fuse

    if self_supervised:
        cands, gold = self_fusion_candidates(engine, progress)
        texts = None
    else:
        if not queries:
            raise FAQSearchError("no labelled queries to tune on")
        texts = [q.text for q in queries]
        gold = [q.gold for q in queries]
        cands = engine.hybrid_candidates(texts, engine.embed(texts, progress=progress), FUSION_POOL)

    weights = list(FUSION_WEIGHTS)
    cur_w = engine.hybrid_weight if engine.mode == "hybrid" else 0.0
    if cur_w not in weights:
        weights.append(cur_w)
    per = [np.array([reciprocal_rank([a.faq_id for a in fuse(c, w, 10)], g) for c, g in zip(cands, gold)])
           for w in weights]
    if texts is None:  # lexical alone, from the candidates' BM25
        lexical = float(np.mean([reciprocal_rank([a.faq_id for a in sorted((a for a in c if a.lexical),
                                                                            key=lambda a: -a.lexical)], g)
                                 for c, g in zip(cands, gold)]))
    else:
        lex = engine.search_lexical(texts, 10)
        lexical = float(np.mean([reciprocal_rank([a.faq_id for a in l], g) for l, g in zip(lex, gold)]))
    current = weights.index(cur_w)
    n = len(gold)

    def score(s, idx):
        return float(per[s][idx].mean())

    full = [score(i, np.arange(n)) for i in range(len(weights))]
    chosen = max(range(len(weights)), key=lambda i: (full[i], i == current))
    cv_cur, cv_tuned = _cross_validate(score, n, len(weights), current, folds)
    cv_dense, _ = _cross_validate(score, n, len(weights), weights.index(0.0), folds)
    if cv_tuned < cv_dense:  # the choice procedure loses to dense alone held out: keep (or choose) dense
        chosen, cv_tuned = weights.index(0.0), cv_dense
    rows = [{"weight": w, "mrr@10": full[i], "current": i == current, "chosen": i == chosen}
            for i, w in enumerate(weights)]
    return FusionReport(rows, cur_w, weights[chosen], cv_cur, cv_tuned, n, lexical)


def apply_fusion_if_better(engine, report: FusionReport, chosen_by: str = "labelled queries") -> bool:
    """Store the chosen weight (and hybrid mode) in the index config when it wins held out."""
    if report.gain > 0 and report.chosen != report.current:
        from .indexdir import resolve, writer_lock

        with writer_lock(engine.path):
            config = cfg.load_config(resolve(engine.path))  # the latest version, if another process edited it
            config["mode"] = "hybrid" if report.chosen > 0 else "dense"
            config["hybrid_weight"] = report.chosen
            config["fusion"] = {"chosen_by": chosen_by, "queries": report.n, "cv_current": report.cv_current,
                                "cv_tuned": report.cv_tuned}
            cfg.save_config(resolve(engine.path), config)  # one file, replaced atomically
        report.applied = True
    return report.applied


def auto_fusion(engine) -> FusionReport | None:
    """At ingest: learn the hybrid weight from the corpus's own question variants when at least 10
    FAQs have several, and keep it only where it beats the current weight held out (cross-validated).
    Without enough variants the default weight stays (README, "Quality by default"). Returns the
    report when a new weight was applied."""
    if engine.mode != "hybrid":
        return None
    try:
        report = tune_fusion(engine, self_supervised=True)
    except TooFewVariantsError:
        return None
    return report if apply_fusion_if_better(engine, report, chosen_by="self-supervised (question variants)") else None
