"""Answering queries over one snapshot: dense, lexical and hybrid candidates, fusion, distinct FAQs,
score checks and the threshold. The library, the CLI and the HTTP service all answer through
:meth:`Searcher.answer`, so blank queries, defaults and thresholds behave the same everywhere.

A query is answered when its best-ranked answer reaches the threshold, whatever ``k`` is: ``k``
only sets how long the list of answers is.
"""
from __future__ import annotations

import numbers
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .index import config as cfg
from .confidence import POOL, ConfidenceModel, check_lexical_options, check_probability, cosine_of, threshold_without_model
from .defaults import (ASK_K, BATCH_SIZE, DENSE_BLOCK, DENSE_CANDIDATES, FUSION_POOL, LEXICAL_POOL, MAX_COUNT, MODES,
                       QUERY_CACHE, TOKEN_BLOCK, TOKEN_CACHE, TOKEN_POOL)
from .errors import IndexFormatError, InvalidOptionError
from .filters import check_filters
from .results import Answer, Result, with_faq_questions
from .index.snapshot import Snapshot
from .text import as_items, check_whole, clean_text, for_search, is_blank
from .tokenmatch import gives_states
from .tokenmatch import scores as token_scores


@dataclass(frozen=True)
class Queries:
    """Query vectors: ``reduced`` (the index's k dimensions) finds candidates, ``full`` scores them."""

    reduced: np.ndarray
    full: np.ndarray

    def __len__(self) -> int:
        return len(self.reduced)

    def __getitem__(self, rows) -> "Queries":
        return Queries(self.reduced[rows], self.full[rows])


class QueryEncoder:
    """An index's encoder, loaded on first use, with an LRU cache of the raw vectors of the last
    queries (raw, so the cache stays valid across versions of the index: same encoder)."""

    def __init__(self, load: Callable[[], Any], size: int = QUERY_CACHE):
        self._load = load
        self._encoder = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._tokens: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._cache_lock = threading.Lock()
        self.size = size

    @property
    def encoder(self):
        if self._encoder is None:
            with self._lock:
                if self._encoder is None:
                    self._encoder = self._load()
        return self._encoder

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    def encode(self, texts: Sequence[str], batch_size: int = BATCH_SIZE, progress: bool = False,
               tokens: bool = False) -> np.ndarray:
        """Raw vectors of ``texts`` (cached). ``tokens``: their token states are wanted next (token
        matching): texts new to either cache are encoded once for both, where the encoder can."""
        texts, batch_size = list(texts), check_whole(batch_size, "batch_size")
        if tokens and hasattr(self.encoder, "encode_with_tokens") and gives_states(self.encoder):
            self._fill_both(texts, batch_size)
        out: np.ndarray | None = None
        missing: dict[str, list[int]] = {}
        hits: list[tuple[int, np.ndarray]] = []
        with self._cache_lock:
            for i, t in enumerate(texts):
                v = self._cache.get(t)
                if v is None:
                    missing.setdefault(t, []).append(i)
                else:
                    self._cache.move_to_end(t)
                    hits.append((i, v))
        if missing:
            todo = list(missing)
            vecs = np.asarray(self.encoder.encode(todo, batch_size=batch_size, progress=progress), dtype=np.float32)
            out = np.empty((len(texts), vecs.shape[1]), np.float32)
            with self._cache_lock:
                for t, v in zip(todo, vecs):
                    out[missing[t]] = v
                    self._cache[t] = v
                self._trim()
        for i, v in hits:
            if out is None:
                out = np.empty((len(texts), len(v)), np.float32)
            out[i] = v
        if out is None:  # no texts at all
            return np.empty((0, int(getattr(self.encoder, "dimension", 0))), np.float32)
        return out

    def _fill_both(self, texts: Sequence[str], batch_size: int) -> None:
        """Put the vectors and token states of the texts missing from either cache into both, from
        one encoder run (a hybrid query with token matching used to run the encoder twice)."""
        with self._cache_lock:
            todo = [t for t in dict.fromkeys(texts) if t not in self._cache or t not in self._tokens]
        if not todo:
            return
        vecs, states = self.encoder.encode_with_tokens(todo, batch_size=batch_size)
        with self._cache_lock:
            for t, v, st in zip(todo, np.asarray(vecs, dtype=np.float32), states):
                self._cache[t], self._tokens[t] = v, st
            self._trim()

    def _trim(self) -> None:
        """Drop the least recently used entries beyond each cache's size (the cache lock held)."""
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)
        while len(self._tokens) > TOKEN_CACHE:
            self._tokens.popitem(last=False)

    def tokens(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> "dict[str, tuple[np.ndarray, np.ndarray]] | None":
        """Token states and spans of each distinct text (an LRU of the last TOKEN_CACHE texts); None
        where the encoder gives none (USE)."""
        if not gives_states(self.encoder):
            return None
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        with self._cache_lock:
            for t in texts:
                hit = self._tokens.get(t)
                if hit is not None:
                    self._tokens.move_to_end(t)
                    out[t] = hit
        todo = [t for t in dict.fromkeys(texts) if t not in out]
        if todo:
            got = self.encoder.token_states(todo, batch_size=batch_size)
            with self._cache_lock:
                for t, v in zip(todo, got):
                    out[t] = self._tokens[t] = v
                self._trim()
        return out

    def clear(self) -> None:
        with self._cache_lock:
            self._cache.clear()
            self._tokens.clear()


def check_options(k: int, mode: str) -> None:
    if not isinstance(k, numbers.Integral) or isinstance(k, (bool, np.bool_)) or k < 1:
        raise InvalidOptionError(f"k must be a whole number of at least 1, got {k!r}")
    if mode not in MODES:
        raise InvalidOptionError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")


class Searcher:
    """Searches one snapshot with an index's query encoder."""

    def __init__(self, snap: Snapshot, queries: QueryEncoder):
        self.snap = snap
        self.queries = queries

    # -- vectors
    def embed(self, texts: Sequence[str], batch_size: int = BATCH_SIZE, progress: bool = False) -> np.ndarray:
        """Search vectors: encoder, then the snapshot's transform cut to k dimensions (norm at most 1:
        the energy of the cut dimensions stays out); :meth:`embed_full` gives unit vectors whose dot
        products are the scores."""
        return self.snap.whitening.transform(self.queries.encode(as_items(texts), batch_size, progress))

    def vectors(self, texts: Sequence[str], batch_size: int = BATCH_SIZE, progress: bool = False,
                tokens: bool = False) -> Queries:
        """Both vectors of each query: reduced (k dims, to find candidates) and full (to score them).
        ``tokens``: the queries' token states are wanted too (one encoder run for both)."""
        raw = self.queries.encode(as_items(texts), batch_size, progress, tokens=tokens)
        return Queries(self.snap.whitening.transform(raw), self.snap.whitening.full(raw))

    def embed_full(self, texts: Sequence[str], batch_size: int = BATCH_SIZE, progress: bool = False) -> np.ndarray:
        """Calibrated query vectors (full dimensions, L2-normalised): what scores are cosines of."""
        return self.vectors(texts, batch_size, progress).full

    def scores(self, ids: np.ndarray, full: np.ndarray) -> np.ndarray:
        """The calibrated score of each stored question (``ids``) for each query (rows of ``full``):
        cosines of full-dimensional vectors, from the raw vectors the index keeps."""
        return self.snap.whitening.full(self.snap.raw.get(np.asarray(ids, dtype=np.int64))) @ full.T

    def pair_scores(self, a: Sequence[str], b: Sequence[str], batch_size: int = BATCH_SIZE,
                    progress: bool = False) -> np.ndarray:
        """The score the index gives each pair of texts (the cosine `ask` would show)."""
        va = self.vectors(a, batch_size, progress).full
        vb = self.vectors(b, batch_size, progress).full
        return (va * vb).sum(axis=1)

    # -- answering
    def answer(self, texts: Sequence[str], k: int = ASK_K, mode: str | None = None, threshold: float | None = None,
               filters: dict[str, Any] | None = None, batch_size: int = BATCH_SIZE,
               progress: bool = False, min_confidence: float | None = None) -> list[Result]:
        """Up to ``k`` answers per query. mode: 'dense' (vectors), 'lexical' (BM25; no threshold: any
        token match answers) or 'hybrid' (both fused); default: the index's. ``filters``:
        {"category": "x"} and metadata fields ({"product": ["a", "b"]}), applied inside the search.
        Blank queries get an empty result without being encoded.

        The decision: the first answer's confidence against ``min_confidence`` (default: the index's
        operating point); given a cosine ``threshold`` instead, or on an index without a confidence
        model, its cosine against the threshold."""
        snap = self.snap
        mode = mode or snap.mode
        check_options(k, mode)
        filters = check_filters(filters)
        if threshold is not None and (not isinstance(threshold, numbers.Real) or isinstance(threshold, (bool, np.bool_))
                                      or not -1.0 <= float(threshold) <= 1.0):  # NaN fails the range too
            raise InvalidOptionError(f"the threshold is a calibrated cosine between -1 and 1, got {threshold!r}")
        min_confidence = check_probability(min_confidence)
        if threshold is not None and min_confidence is not None:
            raise InvalidOptionError("give a cosine threshold or a minimum confidence, not both")
        check_lexical_options(mode, threshold, min_confidence)
        thr = snap.threshold if threshold is None else float(threshold)
        model = snap.confidence if mode != "lexical" else None
        if model is None and mode != "lexical" and min_confidence is not None:
            thr = threshold_without_model(min_confidence)
        op = None if model is None or threshold is not None else \
            (min_confidence if min_confidence is not None else snap.min_confidence)
        k = min(int(k), MAX_COUNT)  # more than any index holds
        texts = [clean_text(t) for t in as_items(texts)]  # one string is one query
        asked = [i for i, t in enumerate(texts) if not is_blank(t)]
        out = [Result(t, [], None, thr, min_confidence=op) for t in texts]
        if not asked:
            return out
        q = [for_search(texts[i]) for i in asked]  # the Result keeps the query as it was written
        if mode == "lexical":  # BM25 scores are no cosines: no threshold applies, and none is reported
            out = [Result(t, [], None, None) for t in texts]
            for i, found in zip(asked, self.lexical(q, k, filters)):
                out[i] = Result(texts[i], found, found[0].score if found else None, None, found[0] if found else None,
                                ranked=list(found))  # every match answers: the top k are the list
            return with_faq_questions(out, snap.store.first_questions)
        vectors = self.vectors(q, batch_size=batch_size, progress=progress,
                               tokens=mode == "hybrid" and snap.token_weight > 0.0 and len(q) <= TOKEN_BLOCK)
        # the answer is decided on candidates that do not depend on k (the nearest DENSE_CANDIDATES
        # questions; for hybrid, a pool of max(k, FUSION_POOL) FAQs from them): k changes the length of
        # the list, never the answer; one answer more than k: the k-th one's margin over the next
        listed = k + int(model is not None)
        firsts: list = [None] * len(q)
        if mode == "hybrid":
            ranked = self.hybrid(q, vectors, max(k + 1, FUSION_POOL), filters=filters)
        elif model is not None:  # the first answer's evidence from the first pass, as the simulation takes it
            firsts = self.dense(vectors, max(listed, POOL), filters, widen=False)
            short = [i for i, f in enumerate(firsts) if len(f) < listed]  # widened to list k (rare)
            ranked = list(firsts)
            for i, found in zip(short, self.dense(vectors[short], listed, filters) if short else []):
                ranked[i] = found  # the same first answer, more FAQs listed after it
            self.add_prototype_scores(vectors.full, firsts)
            self.add_prototype_scores(vectors.full[short], [ranked[i] for i in short])
        else:
            ranked = self.dense(vectors, listed, filters)
        for i, found, first in zip(asked, ranked, firsts):
            out[i] = decided(texts[i], found[:max(k + 1, POOL)], k, thr, model, op, first)
        return with_faq_questions(out, snap.store.first_questions)

    def dense(self, vectors: "Queries | np.ndarray", k: int = ASK_K, filters: dict[str, Any] | None = None,
              widen: bool = True) -> list[list[Answer]]:
        """Top-k distinct FAQs for each query, best first. Candidates come from the k-dimensional index;
        given :class:`Queries` they are ranked and scored by the full-dimensional cosine (calibrated);
        given reduced vectors only, by the reduced cosine.

        The nearest DENSE_CANDIDATES questions (whatever k is, up to k = DENSE_CANDIDATES / 4) decide
        the first answer. Where they hold fewer than k FAQs the search widens (``widen``) to list
        more, keeping that first answer first, so the cost does not grow with the largest FAQ and k
        never changes the answer."""
        full = vectors.full if isinstance(vectors, Queries) else None
        reduced = vectors.reduced if isinstance(vectors, Queries) else vectors
        if len(reduced) > DENSE_BLOCK:  # bounded memory for the rescoring of large batches
            return [found for start in range(0, len(reduced), DENSE_BLOCK)
                    for found in self.dense(vectors[start:start + DENSE_BLOCK], k, filters, widen)]
        snap = self.snap
        distinct = snap.index.search_distinct
        if distinct is not None:  # the backend groups by FAQ itself (Milvus)
            hits, rows = distinct(reduced, k, filters, siblings=full is not None)  # full scores choose the question
            for h in hits:
                check_scores(np.array([s for _, s in h], dtype=np.float32), np.array([i for i, _ in h]), snap.path)
            if full is not None:
                hits = self._rescored(hits, full)
            return [distinct_faqs(h, rows, k, "dense") for h in hits]
        total = len(snap.index)
        allowed = None
        if filters:  # applied inside the vector search, so k FAQs still come back when the filter keeps few
            allowed = np.asarray(snap.store.question_ids(filters), dtype=np.int64)
            total = len(allowed)
        if total == 0:
            return [[] for _ in range(len(reduced))]
        results: list[list[Answer] | None] = [None] * len(reduced)
        todo = np.arange(len(reduced))
        # tombstones (removed ids an index type cannot delete) are skipped below
        n = min(total, max(4 * k, DENSE_CANDIDATES) + snap.tombstones)
        first: dict[int, Answer] = {}
        while len(todo):
            scores, ids = snap.index.search(reduced[todo], n, allowed)
            check_scores(scores, ids, snap.path)
            rows = snap.store.questions(np.unique(ids[ids >= 0]))
            hits = [list(zip(irow.tolist(), srow.tolist())) for srow, irow in zip(scores, ids)]
            if full is not None:
                hits = self._rescored(hits, full[todo], rows)
            again = []
            for qi, h in zip(todo, hits):
                found = distinct_faqs(h, rows, k, "dense")
                if found:
                    first.setdefault(int(qi), found[0])
                if widen and len(found) < k and n < total:
                    again.append(qi)
                else:
                    top = first.get(int(qi))
                    results[qi] = found if top is None or not found or found[0].faq_id == top.faq_id else \
                        [top] + [a for a in found if a.faq_id != top.faq_id][:k - 1]
            todo = np.array(again, dtype=np.int64)
            n = min(total, n * 4)
        return results  # type: ignore[return-value]

    def _rescored(self, hits: list[list[tuple[int, float]]], full: np.ndarray,
                  rows: dict[int, Any] | None = None) -> list[list[tuple[int, float]]]:
        """Each query's hits with their calibrated scores, best first (live ids only)."""
        live = np.unique([i for h in hits for i, _ in h if i >= 0 and (rows is None or i in rows)])
        if not len(live):
            return [[] for _ in hits]
        table = self.scores(live, full)  # (ids, queries)
        out = []
        for qi, h in enumerate(hits):
            ids = np.array([i for i, _ in h if i >= 0 and (rows is None or i in rows)], dtype=np.int64)
            s = table[np.searchsorted(live, ids), qi]
            order = np.argsort(-s, kind="stable")
            out.append(list(zip(ids[order].tolist(), s[order].tolist())))
        return out

    def lexical(self, texts: Sequence[str], k: int = ASK_K, filters: dict[str, Any] | None = None
                ) -> list[list[Answer]]:
        """Top-k distinct FAQs by BM25 over the questions; score = BM25."""
        snap = self.snap
        hits = snap.store.lexical(texts, k * min(snap.max_per_faq, 8), filters)
        rows = snap.store.questions(sorted({qid for h in hits for qid, _ in h}))
        return [distinct_faqs(h, rows, k, "lexical") for h in hits]

    def hybrid(self, texts: Sequence[str], vectors: "Queries", k: int = ASK_K, weight: float | None = None,
               filters: dict[str, Any] | None = None) -> list[list[Answer]]:
        """Fuse dense and lexical: ranked by cosine + weight * BM25 / (best BM25 of the query).

        Every candidate from either side gets its exact cosine (lexical-only candidates from their
        stored vectors), so the score stays a calibrated confidence and BM25 only re-ranks."""
        w = self.snap.hybrid_weight if weight is None else float(weight)
        t, p = self.snap.token_weight, self.snap.prototype_weight
        return [fuse(c, w, max(k, FUSION_POOL), t, p)
                for c in self.candidates(texts, vectors, max(k, FUSION_POOL), filters)]

    def candidates(self, texts: Sequence[str], vectors: "Queries", pool: int = FUSION_POOL,
                   filters: dict[str, Any] | None = None) -> list[list[Answer]]:
        """The union of dense and lexical candidates per query, each with .dense and .lexical set
        (a lexical-only candidate gets the calibrated cosine of its question)."""
        dense = self.dense(vectors, pool, filters, widen=False)
        lexical = self.lexical(texts, max(pool, LEXICAL_POOL), filters)
        out = []
        for qi, (dlist, llist) in enumerate(zip(dense, lexical)):
            cands = {a.faq_id: a for a in dlist}
            missing = [a for a in llist if a.faq_id not in cands]
            if missing:
                got = self.scores(np.array([a.question_id for a in missing]), vectors.full[qi:qi + 1])[:, 0]
                for a, v in zip(missing, got):
                    a.dense = float(v)
                    cands[a.faq_id] = a
            lex = {a.faq_id: a.lexical for a in llist}
            for fid, a in cands.items():
                a.lexical = lex.get(fid)
            out.append(list(cands.values()))
        self.add_prototype_scores(vectors.full, out)
        return self.add_token_scores(texts, out)

    def add_prototype_scores(self, full: np.ndarray, candidates: list[list[Answer]], always: bool = False) -> None:
        """Set ``.prototype`` (the cosine to the candidate's FAQ prototype) where the index ranks with it
        or its confidence weighs it; ``always``: wherever the index has prototypes (the confidence's
        simulation, before a model says whether it weighs them). Candidates that have one keep it."""
        protos = self.snap.all_prototypes() if always else self.snap.prototypes
        if protos is None:  # the index does not use them, or is past PROTOTYPE_MAX_QUESTIONS
            return
        for qi, cands in enumerate(candidates):
            cands = [a for a in cands if a.prototype is None] if always else cands
            if not cands:
                continue
            got = protos.scores(np.array([a.question_id for a in cands], dtype=np.int64), full[qi])
            for a, v in zip(cands, got):
                a.prototype = None if v != v else float(v)

    def add_token_scores(self, texts: Sequence[str], candidates: list[list[Answer]]) -> list[list[Answer]]:
        """Set ``.token`` (:mod:`faqsearch.tokenmatch`) on the TOKEN_POOL candidates of each query that
        rank first by cosine and BM25, from their questions, where the index uses token matching (the
        others keep None and rank below them); queries are taken TOKEN_BLOCK at a time (bounded memory)."""
        snap = self.snap
        if snap.token_weight <= 0.0 or not candidates:
            return candidates
        stem = snap.store.stem
        for start in range(0, len(texts), TOKEN_BLOCK):
            block = range(start, min(start + TOKEN_BLOCK, len(texts)))
            pools = {i: _token_pool(candidates[i], snap.hybrid_weight, snap.prototype_weight) for i in block}
            questions = [a.question for i in block for a in pools[i]]
            kept = snap.tokens.get(questions) if snap.tokens is not None else {}  # written at ingest
            states = self.queries.tokens([texts[i] for i in block] + [q for q in questions if q not in kept])
            if states is None:  # an encoder without token states
                return candidates
            kept.update((q, states[q][0]) for q in questions if q not in kept)
            for i in block:
                got = token_scores(texts[i], states[texts[i]], [kept[a.question] for a in pools[i]],
                                   snap.store.doc_freqs, stem)
                for a, v in zip(pools[i], got):
                    a.token = v
        return candidates


def _token_pool(candidates: list[Answer], weight: float, prototype_weight: float = 0.0) -> list[Answer]:
    """The candidates token matching re-ranks: the first TOKEN_POOL by the fusion without token match
    (each new question costs an encoder pass: this bounds the work of a query)."""
    top = lexical_top(a.lexical for a in candidates)
    return sorted(candidates, key=lambda a: -fusion_score(a.dense, a.lexical, None, weight, 0.0, top, a.prototype,
                                                          prototype_weight))[:TOKEN_POOL]


def decided(text: str, ranked: list[Answer], k: int, thr: float, model: ConfidenceModel | None,
            op: float | None, first: list[Answer] | None = None) -> Result:
    """The result of a ranked list (k answers, and one more whose score only informs the k-th
    answer's confidence): each answer gets its confidence where the index has a model; answered when
    the best-ranked answer's confidence reaches ``op`` (or, with ``op`` None, its cosine reaches
    ``thr``); then the first k answers that reach it. ``first``: the list before a search widened it."""
    if not ranked:
        return Result(text, [], None, thr, min_confidence=op)
    if model is not None:
        for a, c in zip(ranked, model.confidences(ranked, first)):
            a.confidence = c
    ranked = ranked[:k]
    best = ranked[0]
    score = cosine_of(best)
    if op is not None:
        kept = [a for a in ranked if a.confidence >= op]  # a prefix: confidences never rise down a list
    else:
        kept = [a for a in ranked if cosine_of(a) >= thr] if score >= thr else []
    return Result(text, kept, score, thr, best, below_threshold=len(ranked) - len(kept) if kept else 0,
                  min_confidence=op, ranked=ranked)


def lexical_top(scores: Iterable[float | None]) -> float:
    """What the fusion divides BM25 by: the query's best BM25 among its candidates (1 when none is positive)."""
    return max((s or 0.0 for s in scores), default=0.0) or 1.0


def fusion_score(dense: float, lexical: float | None, token: float | None, weight: float, token_weight: float,
                 top: float, prototype: float | None = None, prototype_weight: float = 0.0) -> float:
    """The hybrid ranking score, the one formula of the search, its token pool and the tuning:
    cosine + token_weight * token match + weight * BM25 / the query's best BM25 (``top``, :func:`lexical_top`)
    + prototype_weight * max(0, cosine to the FAQ's prototype - cosine) (:mod:`faqsearch.prototypes`: it
    lifts an FAQ, never sinks one below its best question); a missing BM25, token or prototype score
    counts 0."""
    shift = prototype_weight * max(0.0, prototype - dense) if prototype_weight and prototype is not None else 0.0
    # (a NaN prototype shifts nothing: max keeps the 0.0 it is compared with)
    return float(dense + token_weight * (token or 0.0) + weight * (lexical or 0.0) / top + shift)


def fuse(candidates: Sequence[Answer], weight: float, k: int, token_weight: float = 0.0,
         prototype_weight: float = 0.0) -> list[Answer]:
    """Rank candidates by cosine + token_weight * token match + weight * BM25 / max BM25
    + prototype_weight * max(0, prototype cosine - cosine) (new Answer objects; inputs untouched; a
    candidate without a token or prototype score counts 0 for it).

    ``score`` stays the cosine, the calibrated confidence the threshold applies to; ``fused`` orders."""
    top = lexical_top(a.lexical for a in candidates)
    scored = sorted(((fusion_score(a.dense, a.lexical, a.token, weight, token_weight, top, a.prototype,
                                   prototype_weight), i)
                     for i, a in enumerate(candidates)),
                    key=lambda x: -x[0])[:k]  # stable: ties keep the candidates' order
    return [replace(candidates[i], score=candidates[i].dense, fused=f) for f, i in scored]


def distinct_faqs(hits: Iterable[tuple[int, float]], rows: dict[int, dict[str, Any]], k: int,
                  kind: str) -> list[Answer]:
    """Question hits (id, score), best first, to at most k FAQs, each with its best question.

    Ids missing from ``rows`` (padding, tombstones) are skipped; ``kind`` names the score's side."""
    seen: dict[str, Answer] = {}
    for qid, score in hits:
        row = rows.get(int(qid))
        if row is None or row["faq_id"] in seen:
            continue
        seen[row["faq_id"]] = Answer(row["faq_id"], row["answer"], float(score), row["question"],
                                     int(row["question_id"]), row["source"], row["category"], row["metadata"],
                                     **{kind: float(score)})
        if len(seen) == k:
            break
    return list(seen.values())


def check_scores(scores: np.ndarray, ids: np.ndarray, path: str) -> None:
    """Cosines of unit vectors lie in [-1, 1] (a little beyond for quantised types): anything else
    means the vector file is damaged, and answering from it would be wrong."""
    valid = scores[ids >= 0]
    if valid.size and (not np.all(np.isfinite(valid)) or np.abs(valid).max() > 1.5):
        raise IndexFormatError(cfg.damaged(path, "faiss", f"a search returned the score {float(np.abs(valid).max()):.3g}"))
