"""Gaps: the FAQs an index is missing, found in its traffic.

Unanswered and low-confidence queries from the query log (answered within a margin of the bar that
decides, the confidence's operating point or the cosine threshold: :func:`low_bar`) are grouped by
meaning and ranked by how often they were asked: each group is a question users keep asking that no
FAQ answers well. Each group is asked again of the index as it is now, and leaves the list when most
of its queries are answered above that range.

Grouping uses the encoder's own vectors (L2-normalised, before the index's transform: on a small
FAQ the transform projects onto the FAQ's own span, which is exactly what unanswered queries lie
outside of). Clustering is average-similarity leader clustering: distinct queries, most frequent
first, join the group whose centroid they are most similar to when that similarity reaches
``similarity``, else start a new group; one reassignment pass then moves each query to its best
centroid. O(queries x groups), no extra dependency.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from .defaults import GAP_MARGIN as DEFAULT_MARGIN  # chosen on sample_data's held-out FAQs
from .defaults import GAP_MIN_COUNT as DEFAULT_MIN_COUNT
from .defaults import GAP_SIMILARITY as DEFAULT_SIMILARITY

COVERED = 0.5  # a group whose distinct queries the index now answers (not low-confidence) this often is covered
ASK_CLUSTERS = 32  # clusters asked again per batch, largest first, until enough gaps are found
ASK_PER_CLUSTER = 8  # of a cluster's distinct queries, the most frequent asked again (its share answered now)


@dataclass
class Gap:
    """A group of unanswered or low-confidence queries about one missing topic."""

    count: int  # queries in the group, repeats included
    distinct: int  # distinct texts
    examples: list[str]  # most frequent first
    nearest_faq: str | None  # the FAQ its queries came closest to (maybe a near miss)
    nearest_score: float | None
    first_seen: str
    last_seen: str
    query_ids: list[int] = field(default_factory=list)
    nearest_confidence: float | None = None  # the index's confidence in nearest_faq for these queries, now
    answered_now: float = 0.0  # share of its distinct queries the index answers now (re-asked, not as logged),
    # low-confidence answers included
    script: str | None = None  # set for the queries written mostly in a script the index's encoder does not
    # read ("Han", "Cyrillic"...): one entry per script, not grouped by meaning (to that encoder they mean alike)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cluster(vectors: np.ndarray, weights: Sequence[int], similarity: float) -> np.ndarray:
    """Group unit vectors (rows; heaviest first is best) into clusters; returns a label per row.

    Each row joins the nearest centroid (the unit weighted mean of a cluster) at ``similarity`` or
    more, else starts a cluster; then every row is assigned once more against the final centroids.
    Only the centroid a row joins is normalised again, and the last pass runs in blocks: renormalising
    every centroid for each row and one rows x clusters matrix took 116 s and 1.1 GB at 20k queries."""
    n, d = vectors.shape if vectors.ndim == 2 else (len(vectors), 0)
    labels = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return labels
    w = np.asarray(weights, dtype=np.float64)
    sums, cent, g = np.zeros((64, d)), np.zeros((64, d)), 0  # grown by doubling; the first g rows are used
    for i in range(n):
        if g:
            sims = cent[:g] @ vectors[i]
            j = int(np.argmax(sims))
            if sims[j] >= similarity:
                labels[i] = j
                sums[j] += w[i] * vectors[i]
                cent[j] = sums[j] / np.linalg.norm(sums[j])
                continue
        if g == len(sums):
            sums, cent = (np.concatenate([a, np.zeros_like(a)]) for a in (sums, cent))
        labels[i], sums[g] = g, w[i] * vectors[i]
        cent[g] = sums[g] / np.linalg.norm(sums[g])
        g += 1
    for start in range(0, n, 2048):  # one reassignment pass against the final centroids
        sims = vectors[start:start + 2048] @ cent[:g].T
        best = sims.argmax(axis=1)
        ok = sims[np.arange(len(best)), best] >= similarity
        labels[start:start + 2048] = np.where(ok, best, labels[start:start + 2048])
    _, labels = np.unique(labels, return_inverse=True)
    return labels


def find_gaps(engine, log, *, similarity: float = DEFAULT_SIMILARITY, margin: float = DEFAULT_MARGIN,
              min_count: int = DEFAULT_MIN_COUNT, since: str | None = None, limit: int = 20,
              max_queries: int = 20000) -> list[Gap]:
    """Ranked gaps (largest first) from the unanswered and low-confidence queries in ``log``."""
    from .text import clean_text, folded

    rows = log.candidates(margin, since, max_queries, store=engine.snapshot.store)  # marks FAQs still hold
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:  # one query whatever its case and punctuation ("Refund?" and "refund")
        key = folded(clean_text(r["query"]))
        if key:  # a query of no word ("?", an emoji, a blank logged before) asks for no FAQ
            groups.setdefault(key, []).append(r)
    unread = [g for g in _unread(engine, groups, margin) if g.count >= min_count]
    if not groups:
        return unread[:limit]
    keys = sorted(groups, key=lambda k: -len(groups[k]))
    texts = [groups[k][0]["query"] for k in keys]
    vecs = np.asarray(engine.encoder.encode(texts), dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-12
    labels = cluster(vecs, [len(groups[k]) for k in keys], similarity)
    clusters = [[keys[i] for i in np.flatnonzero(labels == c)] for c in np.unique(labels)]
    clusters = [m for m in clusters if sum(len(groups[k]) for k in m) >= min_count]
    # largest first, as listed; each is asked again of the index as it is now (one that an FAQ added since
    # answers leaves the list), by its most frequent queries, in batches until ``limit`` gaps are found
    # (every logged query was asked: 18 s of 5,000 on 2 cores, most of it for clusters never listed)
    clusters.sort(key=lambda m: (-sum(len(groups[k]) for k in m), -len(m), max(r["time"] for k in m for r in groups[k])))
    gaps: list[Gap] = []
    searcher = engine.searcher()
    for start in range(0, len(clusters), ASK_CLUSTERS):
        batch = clusters[start:start + ASK_CLUSTERS]
        asked = [groups[k][0]["query"] for m in batch for k in m[:ASK_PER_CLUSTER]]
        now = dict(zip(asked, searcher.answer(asked, k=1)))
        gaps += [g for g in (_gap(members, groups, now, margin) for members in batch) if g is not None]
        if len(gaps) >= limit:
            break
    gaps = sorted(gaps + unread, key=lambda g: (-g.count, -g.distinct, g.last_seen))
    return gaps[:limit]


ASK_UNREAD = 200  # the most asked queries of a script the encoder does not read, asked again of the index now


def _unread(engine, groups: dict[str, list[dict[str, Any]]], margin: float = DEFAULT_MARGIN) -> list[Gap]:
    """Where the index's encoder reads Latin script only, the query groups written mostly in another script
    (taken out of ``groups``), one Gap per script: to that encoder twenty Chinese questions on twenty topics
    came out alike and were listed as one missing FAQ."""
    from .encoders import reads_latin_only
    from .generators.languages import main_script

    if not reads_latin_only(engine.config.encoder_spec):
        return []
    by_script: dict[str, list[str]] = {}
    for key, rows in groups.items():
        script = main_script([rows[0]["query"]])
        if script not in (None, "Latin"):
            by_script.setdefault(script, []).append(key)
    out = []
    for script, keys in by_script.items():
        keys.sort(key=lambda k: -len(groups[k]))
        asked = [groups[k][0]["query"] for k in keys[:ASK_UNREAD]]  # asked again, as clusters are: one an FAQ added
        answered = {k for k, r in zip(keys, engine.searcher().answer(asked, k=1)) if settled(r, margin)}  # since goes
        for k in keys:
            if k in answered:
                del groups[k]  # (answered now: no gap, whatever script)
        keys = [k for k in keys if k not in answered]
        if keys:
            out.append(_grouped(keys, groups, script=script))
        for k in keys:
            del groups[k]
    return out


def _grouped(members: list[str], groups: dict[str, list[dict[str, Any]]], **fields: Any) -> Gap:
    """The Gap of query groups (most frequent first): counts, examples, when they were asked, ``fields``."""
    qrows = [r for m in members for r in groups[m]]
    times = sorted(r["time"] for r in qrows)
    return Gap(count=len(qrows), distinct=len(members), examples=[groups[m][0]["query"] for m in members[:5]],
               first_seen=times[0], last_seen=times[-1], query_ids=sorted(r["id"] for r in qrows),
               **{"nearest_faq": None, "nearest_score": None, **fields})


def _gap(members: list[str], groups: dict[str, list[dict[str, Any]]], now: dict[str, Any], margin: float
         ) -> Gap | None:
    """The gap of one cluster of query groups (most frequent first), from the answers ``now`` of its first
    ASK_PER_CLUSTER; None where the index now answers most of those (:data:`COVERED`)."""
    results = [now[groups[m][0]["query"]] for m in members[:ASK_PER_CLUSTER]]
    answered = float(np.mean([r.answered for r in results]))
    if np.mean([settled(r, margin) for r in results]) >= COVERED:
        return None
    near: dict[str, list[Any]] = {}
    for r in results:
        if r.nearest is not None:
            near.setdefault(r.nearest.faq_id, []).append(r.nearest)
    nearest = max(near, key=lambda f: (len(near[f]), max(_value(a) for a in near[f])), default=None)
    best = max(near[nearest], key=_value) if nearest else None
    return _grouped(members, groups, nearest_faq=nearest, nearest_score=best.score if best else None,
                    nearest_confidence=best.confidence if best else None, answered_now=round(answered, 4))


def low_bar(bar: float, margin: float) -> float:
    """Below this an answer is low-confidence: within ``margin`` of the bar that decided (an operating
    point or a cosine threshold), and at most halfway from it to certain (a bar of 0.8 with a margin of
    0.25 would leave nothing above it). The query log's ``candidates`` applies the same rule in SQL."""
    return min(bar + margin, (bar + 1) / 2)


def settled(result, margin: float) -> bool:
    """Whether the index answers a query now above its low-confidence range: not a gap any more."""
    if not result.answers:
        return False
    top = result.answers[0]
    if result.min_confidence is not None and top.confidence is not None:
        return top.confidence >= low_bar(result.min_confidence, margin)
    return result.threshold is None or top.score >= low_bar(result.threshold, margin)  # lexical: any match answers


def _value(a) -> float:
    return a.confidence if a.confidence is not None else a.score
