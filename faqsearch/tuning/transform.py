"""Choose beta, gamma and k from labelled data without re-encoding the corpus.

The index keeps the raw encoder vectors of its questions and the moments the transform was fitted
from, so every candidate transform is recomputed from those. Each setting gets a per-query score;
the choice is cross-validated (k folds: choose on the other folds, measure on the held-out one), so
the reported gain is not measured on the data it was chosen on. Nothing here writes: the engine
applies a chosen setting (:meth:`faqsearch.engine.FAQSearch.refit`).
"""
from __future__ import annotations

import itertools
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..defaults import BETAS, FOLDS, GAMMAS, KS, LEXICAL_POOL
from ..errors import FAQSearchError, TooFewVariantsError
from ..evaluation import LabelledQuery, check_gold, reciprocal_rank, spearman
from ..index.format import Config
from ..progress import progress_bar
from ..prototypes import unit
from ..search import fusion_score, lexical_top
from ..whitening import Moments, Whitening

log = logging.getLogger(__name__)


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
    new_threshold: float | None = None  # where a threshold was given or tuned on labels (else chosen again)
    notes: list[str] = field(default_factory=list)

    @property
    def gain(self) -> float:
        return self.cv_tuned - self.cv_current

    @property
    def worth_applying(self) -> bool:
        """The chosen setting beats the current one held out (what `tune transform --apply` requires)."""
        return self.gain > 0 and self.chosen != self.current

    def apply_to(self, engine) -> bool:
        """Refit ``engine`` (a FAQSearch) with the chosen setting and its threshold where it is worth
        applying; whether it was."""
        if self.worth_applying:
            engine.refit(self.chosen, self.new_threshold, made_by="tune")  # None: the index chooses again
            self.applied = True
        return self.applied

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


def current_setting(config: Config) -> Setting:
    w = config.whitening
    if not (w.enabled if w.has("enabled") else True):  # absent: enabled (a null: not)
        return Setting(False)
    k = int(w.k_effective or config.dim_out)
    return Setting(True, float(w.beta), float(w.gamma), None if k == config.dim_in else k)


def transform_for(setting: Setting, moments: Moments, dim: int) -> Whitening:
    if not setting.whiten:
        return Whitening.identity(dim)
    return Whitening.from_moments(moments, setting.beta, setting.gamma, setting.k)


def _reciprocal_ranks(docs: np.ndarray, doc_faq: np.ndarray, queries: np.ndarray,
                      gold: Sequence[set[str]], cutoff: int = 10, lexical: Sequence[dict[str, float]] | None = None,
                      weight: float = 0.0, tokens: Sequence[dict[str, float]] | None = None,
                      token_weight: float = 0.0, prototype_weight: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-query reciprocal rank of the first gold FAQ among the top distinct FAQs (0 past the cutoff),
    and per-query best score. ``lexical`` (per query: FAQ -> BM25) ranks as hybrid mode does: each
    FAQ's best cosine + ``token_weight`` x its token match (``tokens``: per query, FAQ -> score, of the
    candidates the index re-ranks; the transform does not change them) + ``weight`` x BM25 / the
    query's best BM25 + ``prototype_weight`` x max(0, cosine to the FAQ's prototype - its best cosine;
    the prototypes of ``docs``), over the dense and lexical candidates."""
    scores = queries @ docs.T
    depth = min(scores.shape[1], cutoff * 20)
    top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth] if depth < scores.shape[1] else \
        np.tile(np.arange(scores.shape[1]), (len(queries), 1))
    if lexical is not None:  # each FAQ's best cosine, for every query at once
        by_faq = np.argsort(doc_faq.astype(str), kind="stable")
        names = doc_faq[by_faq]
        starts = np.flatnonzero(np.r_[True, names[1:] != names[:-1]])
        column = {f: j for j, f in enumerate(names[starts])}
        faq_best = np.maximum.reduceat(scores[:, by_faq], starts, axis=1)
        protos = queries @ unit(np.add.reduceat(docs[by_faq], starts, axis=0)).T if prototype_weight else None
    out = np.zeros(len(queries))
    for i in range(len(queries)):
        order = top[i][np.argsort(-scores[i, top[i]], kind="stable")]
        ranked = list(dict.fromkeys(doc_faq[order]))  # distinct FAQs, in order
        if lexical is not None:
            dense = {f: float(faq_best[i, column[f]]) for f in ranked + [f for f in lexical[i] if f in column]}
            proto = {f: float(protos[i, column[f]]) for f in dense} if protos is not None else None
            fused = fused_scores(dense, lexical[i], tokens[i] if tokens is not None else {}, weight, token_weight,
                                 proto, prototype_weight)
            ranked = sorted(fused, key=lambda f: -fused[f])
        out[i] = reciprocal_rank(ranked, gold[i], cutoff)
    return out, scores.max(axis=1)


def fused_scores(dense: dict[str, float], lexical: dict[str, float], tokens: dict[str, float], weight: float,
                 token_weight: float, prototypes: dict[str, float] | None = None,
                 prototype_weight: float = 0.0) -> dict[str, float]:
    """Each FAQ of ``dense`` (FAQ -> best cosine) scored as the search fuses it (:func:`search.fusion_score`),
    BM25 divided by the query's best."""
    top = lexical_top(lexical.values())
    protos = prototypes or {}
    return {f: fusion_score(d, lexical.get(f), tokens.get(f), weight, token_weight, top, protos.get(f),
                            prototype_weight) for f, d in dense.items()}


def _folds(n: int, folds: int, seed: int = 0) -> list[np.ndarray]:
    perm = np.random.default_rng(seed).permutation(n)
    return [perm[i::folds] for i in range(min(folds, n))]


def cross_validate(score_fn, n: int, n_settings: int, current: int, folds: int) -> tuple[float, float]:
    """Held-out score of the current setting and of the one chosen on the other folds, averaged over folds."""
    parts = _folds(n, folds)
    cur, tuned = [], []
    for held in parts:
        train = np.setdiff1d(np.arange(n), held)
        best = max(range(n_settings), key=lambda s: (score_fn(s, train), s == current))
        cur.append(score_fn(current, held) * len(held))
        tuned.append(score_fn(best, held) * len(held))
    return sum(cur) / n, sum(tuned) / n


def held_out_variants(rows: Sequence[tuple] | np.ndarray, seed: int = 0, limit: int | None = None,
                      avoid: np.ndarray | None = None) -> np.ndarray:
    """Positions (in ``rows``: (id, faq_id, ...) tuples, or an array of each question's FAQ key) of one
    question of every FAQ that has two or more (of ``limit`` such FAQs drawn at random when there are more).
    ``avoid``: positions not to hold out (held out in an earlier round); an FAQ left without one is skipped."""
    keys = rows if isinstance(rows, np.ndarray) else np.array([r[1] for r in rows], dtype=object)
    if not len(keys):
        return np.zeros(0, dtype=np.int64)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    by_pos = np.argsort(inverse, kind="stable")  # positions grouped by FAQ, in order within each
    bounds = np.cumsum(np.bincount(inverse, minlength=len(first)))
    groups = np.split(by_pos, bounds[:-1])
    rng = np.random.default_rng(seed)
    # FAQs in the order they first appear, as the draws always were
    pools = (groups[g] if avoid is None or not len(avoid) else np.setdiff1d(groups[g], avoid)
             for g in np.argsort(first) if len(groups[g]) >= 2)
    held = np.array(sorted(int(rng.choice(p)) for p in pools if len(p)), dtype=np.int64)
    if limit is not None and len(held) > limit:
        held = np.sort(rng.choice(held, size=limit, replace=False))
    return held


def default_offtopic() -> list[str]:
    """Generic questions no FAQ should answer (English and Chinese), shipped with faqsearch."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "offtopic.txt")
    with open(path, encoding="utf-8") as fh:
        return [line.strip() for line in fh if line.strip()]


def tune(searcher, queries: Sequence[LabelledQuery] | None = None, pairs: tuple | None = None,
         self_supervised: bool = False, folds: int = FOLDS, progress: bool = False,
         offtopic: Sequence[str] | None = None) -> TuneReport:
    """Evaluate the grid on labelled queries, sentence pairs, or the index's own question variants
    (``searcher``: a :class:`faqsearch.search.Searcher` over the index).

    A new threshold (for a new transform's score scale) keeps the share of tuning queries
    answered, but is never set where more of ``offtopic`` (default: a generic English and Chinese
    list shipped with faqsearch) would be answered than at the current setting."""
    snap, encode = searcher.snap, searcher.queries.encode
    _, raw = snap.raw.all()
    rows = snap.store.all_questions()  # (id, faq_id, text), in id order = the raw vectors' order
    dim = raw.shape[1]
    doc_faq = np.array([r[1] for r in rows], dtype=object)
    moments = snap.whitening.moments
    notes = []
    metric = "mrr@10"
    lexical = tokens = None
    if pairs is not None:
        metric = "spearman"
        a, b, y = pairs
        need = max(20, 3 * folds)  # a Spearman correlation in each held-out fold (3 pairs and 5 folds printed 0.00)
        if len(a) < need:
            raise FAQSearchError(f"{len(a)} sentence pairs: too few to tune on ({folds} folds each need pairs to correlate); "
                                 f"give at least {need}")
        qa = encode(list(a), progress=progress)
        qb = encode(list(b), progress=progress)
    elif self_supervised:
        # hold out one question of every FAQ that has several; the rest stay as documents
        held = held_out_variants(rows)
        if len(held) < 10:
            raise TooFewVariantsError(f"only {len(held)} FAQs have two or more questions: too few to tune on; "
                                 "give labelled queries instead (faqsearch tune transform QUERIES)")
        keep = np.setdiff1d(np.arange(len(rows)), held)
        q_raw = np.asarray(raw[held])
        gold = [{doc_faq[i]} for i in held]
        raw_docs, doc_faq = np.asarray(raw[keep]), doc_faq[keep]
        if snap.config.whitening.fitted_on == "corpus questions":
            moments = Moments(dim).update(raw_docs)  # the held-out questions must not shape the transform
        notes.append(f"self-supervised: {len(held)} held-out question variants as queries")
    else:
        if not queries:
            raise FAQSearchError("no labelled queries to tune on")
        check_gold(snap, queries)
        q_raw = encode([q.text for q in queries], progress=progress)
        gold = [q.gold for q in queries]
        if snap.mode == "hybrid":  # measured in the mode the index answers in
            lexical = [{a.faq_id: a.lexical or 0.0 for a in found}
                       for found in searcher.lexical([q.text for q in queries], LEXICAL_POOL)]
            if snap.token_weight > 0:
                texts = [q.text for q in queries]
                tokens = [{a.faq_id: a.token for a in c if a.token is not None}
                          for c in searcher.candidates(texts, searcher.vectors(texts))]
            notes.append(f"ranked as the index answers: hybrid, BM25 weight {snap.hybrid_weight:g}, token match "
                         f"weight {snap.token_weight:g}"
                         + (f", prototype weight {snap.prototype_weight:g}" if snap.prototype_weight else ""))
    if pairs is None and not self_supervised:
        raw_docs = np.asarray(raw)
    settings = grid(dim, moments_rank(moments))
    cur = current_setting(snap.config)
    if cur not in settings:
        settings.append(cur)
    current = settings.index(cur)
    per_item: list[np.ndarray] = []
    bests: list[np.ndarray] = []
    dims = []
    with progress_bar(len(settings), progress, "tuning") as bar:
        for s in settings:
            w = transform_for(s, moments, dim)
            dims.append(w.dim_out)
            if pairs is not None:
                per_item.append((w.full(qa) * w.full(qb)).sum(axis=1))
            else:
                rr, best = _reciprocal_ranks(w.full(raw_docs), doc_faq, w.full(q_raw), gold, lexical=lexical,
                                             weight=snap.hybrid_weight, tokens=tokens,
                                             token_weight=snap.token_weight,
                                             prototype_weight=snap.prototype_weight)
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
    cv_cur, cv_tuned = cross_validate(score, n, len(settings), current, folds)
    table = [{"setting": s.label, metric: full[i], "dims": dims[i], "current": i == current, "chosen": i == chosen}
             for i, s in enumerate(settings)]
    report = TuneReport(metric, cur, settings[chosen], table, cv_cur, cv_tuned, n, notes=notes)
    if (snap.config.calibration or {}).get("chosen_by") == "self-calibrated" and chosen != current:
        notes.append("with --apply, the index chooses its threshold and confidence again on the new transform, as "
                     "refit does (it chose them itself; --offtopic then plays no part)")
    elif bests and chosen != current:
        # scores of another transform live on another scale: keep the share of queries answered
        share = float(np.mean(bests[current] >= snap.threshold))
        report.new_threshold = float(np.quantile(bests[chosen], 1.0 - share)) if share > 0 else float(
            bests[chosen].max() + 1e-6)
        notes.append(f"threshold {snap.threshold:.3f} -> {report.new_threshold:.3f} keeps {share:.0%} of the "
                     "tuning queries answered")
        off_raw = encode(list(offtopic if offtopic is not None else default_offtopic()))
        if len(off_raw):
            def off_best(s: Setting) -> np.ndarray:
                w = transform_for(s, moments, dim)
                docs = w.full(np.asarray(raw))
                return (w.full(off_raw) @ docs.T).max(axis=1)

            allowed = float(np.mean(off_best(cur) >= snap.threshold))
            off = off_best(settings[chosen])
            floor = float(np.quantile(off, 1.0 - allowed)) if allowed > 0 else float(off.max() + 1e-6)
            if floor > report.new_threshold:
                report.new_threshold = floor
                notes.append(f"raised to {floor:.3f}: off-topic questions answered stay at {allowed:.0%} "
                             f"({len(off)} checked)")
    return report


def refit_config(config: Config, moments: Moments, setting: Setting | None = None,
                 threshold: float | None = None) -> tuple[Whitening, Config]:
    """The transform for ``setting`` (default: the index's current one) from ``moments``, and the
    config that records it (what refit and tune --apply commit)."""
    from dataclasses import replace

    from ..index.config import whitening_section

    setting = setting or current_setting(config)
    if setting.whiten and moments.n < 2:  # (a ValueError's traceback)
        raise TooFewVariantsError(f"the index holds {moments.n} question(s): a transform is fitted on 2 or more; add "
                                  "questions first (faqsearch add)")
    white = replace(transform_for(setting, moments, int(config.dim_in)), moments=moments)
    fitted_on = config.whitening.fitted_on if config.whitening.has("fitted_on") else "corpus questions"
    section = whitening_section(white, setting.whiten, fitted_on, moments.n, tuned=True)
    section["k"] = setting.k if setting.whiten else None
    given = {}
    if threshold is not None:  # a threshold the index had chosen becomes one given: edits keep it
        chosen = (config.calibration or {}).get("chosen_by") in (None, "default", "self-calibrated")
        given = {"threshold": float(threshold), **({"calibration": {"chosen_by": "given", "rule": "given to refit"}} if chosen else {})}
    return white, config.merged({"dim_out": white.dim_out, "whitening": section}, **given)


def moments_rank(moments: Moments) -> int:
    if moments.n < 2:
        return moments.dim
    s = np.linalg.eigvalsh(moments.covariance)
    return int(np.sum(s > s.max() * 1e-7)) if s.max() > 0 else 0
