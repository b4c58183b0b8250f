"""Retrieval metrics over distinct FAQs, and the STS protocol (Spearman of cosine vs gold score)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .confidence import check_lexical_options
from .columns import find
from .corpus import _cell, header_line, read_rows
from .errors import CorpusError
from .text import is_blank

QUERY_COLUMNS = ("query", "question", "text")
GOLD_COLUMNS = ("faq_id", "gold", "id", "gold_id")
PAIR_COLUMNS = (("sentence1", "text1", "a"), ("sentence2", "text2", "b"), ("score", "label", "similarity"))


@dataclass
class LabelledQuery:
    text: str
    gold: set[str]
    line: int
    source: str = field(default="", compare=False)  # the file it was read from, for errors


def _pick(row: dict, names: Sequence[str], given: str | None, path: str, line: int, what: str,
          option: str | None = None) -> str:
    """The column of ``row`` named ``given``, else the first of ``names`` it has; an error names ``line``
    (callers pass :func:`faqsearch.corpus.header_line`: a table's header, a JSONL record's own line)."""
    if given:
        if given not in row:
            raise CorpusError(path, line, f"column {given!r} not found (found: {', '.join(row)})")
        return given
    for n in names:  # whatever their case, as a corpus's columns (columns.find)
        if (found := find(n, row)) is not None:
            return found
    raise CorpusError(path, line, f"no {what} column: expected one of {', '.join(names)} (found: {', '.join(row)}); "
                      + (f"name yours with {option}" if option else "rename the columns"))


def read_labelled_queries(path: str, query_column: str | None = None, gold_column: str | None = None,
                          fmt: str | None = None) -> list[LabelledQuery]:
    """Queries with gold FAQ ids: several rows per query, or a list / '|'-separated ids in one row."""
    by_text: dict[str, LabelledQuery] = {}
    qcol = gcol = None
    for line, row in read_rows(path, fmt):
        if qcol is None:
            head = header_line(path, fmt, line)
            qcol = _pick(row, QUERY_COLUMNS, query_column, path, head, "query", "--query-column")
            gcol = _pick(row, GOLD_COLUMNS, gold_column, path, head, "gold FAQ id", "--gold-column")
        text = _cell(row.get(qcol)).strip()
        raw = row.get(gcol)
        golds = [_cell(g).strip() for g in raw] if isinstance(raw, list) else _cell(raw).split("|")
        golds = {g.strip() for g in golds if g.strip()}
        if not text:
            raise CorpusError(path, line, "empty query; remove the row or fill it in")
        if not golds:
            raise CorpusError(path, line, "no gold FAQ id; every query needs the id of the FAQ that answers it")
        if text in by_text:
            by_text[text].gold |= golds
        else:
            by_text[text] = LabelledQuery(text, golds, line, path)
    if not by_text:
        raise CorpusError(path, None, "no labelled queries in the file")
    return list(by_text.values())


def read_pairs(path: str, fmt: str | None = None) -> tuple[list[str], list[str], np.ndarray]:
    a, b, y = [], [], []
    cols = None
    for line, row in read_rows(path, fmt):
        if cols is None:
            cols = [_pick(row, names, None, path, header_line(path, fmt, line), what)
                    for names, what in zip(PAIR_COLUMNS, ("first sentence", "second sentence", "score/label"))]
        try:
            score = float(_cell(row[cols[2]]))
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise CorpusError(path, line, f"score {row[cols[2]]!r} is not a number") from None
        for col, what in ((cols[0], "first"), (cols[1], "second")):
            if is_blank(_cell(row[col])):
                raise CorpusError(path, line, f"the {what} sentence ({col!r}) is empty; every pair needs two "
                                              "sentences (or remove the row)")
        a.append(_cell(row[cols[0]]).strip())
        b.append(_cell(row[cols[1]]).strip())
        y.append(score)
    if len(y) < 2:
        raise CorpusError(path, None, "need at least two sentence pairs")
    if len(set(y)) < 2:
        raise CorpusError(path, None, f"every pair has the score {y[0]:g}: a rank correlation needs scores that "
                                      "differ")
    return a, b, np.asarray(y, dtype=np.float64)


def rankdata(x: np.ndarray) -> np.ndarray:
    """Ranks starting at 1, ties given their average rank (as scipy.stats.rankdata)."""
    x = np.asarray(x)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    sx = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sx[j + 1] == sx[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx, ry = rankdata(x), rankdata(y)
    rx -= rx.mean()
    ry -= ry.mean()
    denom = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / denom) if denom else 0.0


def reciprocal_rank(ranked: Sequence[str], gold: set[str], cutoff: int = 10) -> float:
    """1 / rank of the first gold FAQ in a list of distinct FAQ ids (0 if none in the first ``cutoff``)."""
    return next((1.0 / (i + 1) for i, f in enumerate(ranked[:cutoff]) if f in gold), 0.0)


def ranking_metrics(ranked: Sequence[Sequence[str]], gold: Sequence[set[str]], cutoff: int = 10) -> dict[str, float]:
    """Recall@1/5/10, MRR@10 and nDCG@10 (binary relevance) over lists of distinct FAQ ids.

    Recall@k is the share of queries with at least one gold FAQ in the top k (success@k), the
    usual FAQ-retrieval reading when most queries have a single gold FAQ.
    """
    n = len(ranked)
    if n == 0:
        raise ValueError("no queries")
    rec = {1: 0.0, 5: 0.0, 10: 0.0}
    mrr = ndcg = 0.0
    for ids, g in zip(ranked, gold):
        ids = list(ids)[:cutoff]
        hits = [i for i, f in enumerate(ids) if f in g]
        if hits:
            first = hits[0]
            for kk in rec:
                rec[kk] += first < kk
            mrr += reciprocal_rank(ids, g, cutoff)
            dcg = sum(1.0 / math.log2(i + 2) for i in hits)
            idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(g), cutoff)))
            ndcg += dcg / idcg
    out = {f"recall@{kk}": v / n for kk, v in rec.items()}
    out["mrr@10"] = mrr / n
    out["ndcg@10"] = ndcg / n
    return out


def check_gold(snap, queries: Sequence[LabelledQuery], source: str = "queries") -> None:
    """A CorpusError naming the lines whose gold FAQ ids the index does not hold (a typo, another
    index): eval, and every tuning on labels, refuse them rather than learn from wrong labels."""
    known = snap.store.faq_ids()
    unknown = [q for q in queries if not q.gold <= known]  # one unknown id among several is a typo too
    if unknown:
        shown = "; ".join(f"line {q.line}: {sorted(q.gold - known)}" for q in unknown[:5])
        raise CorpusError(
            unknown[0].source or source, None,
            f"{len(unknown)} quer{'y has' if len(unknown) == 1 else 'ies have'} gold FAQ ids that the index does not "
            f"contain ({shown}{' ...' if len(unknown) > 5 else ''}); check the ids or the --index")
    if len(queries) >= 10:  # a corpus file given for labelled queries: the index's own questions, all "right"
        stored = {text for _, _, text in snap.store.all_questions()}
        copies = sum(q.text in stored for q in queries)
        if copies >= 0.8 * len(queries):
            raise CorpusError(
                queries[0].source or source, None,
                f"{copies} of its {len(queries)} queries are questions the index holds, word for word: is it the "
                "corpus? Labelled queries are what users asked, other wordings than the index's own (an index "
                "answers its own questions right by construction)")


def evaluate(searcher, queries: Sequence[LabelledQuery], batch_size: int = 32, progress: bool = False,
             threshold: float | None = None, source: str = "queries", mode: str | None = None,
             offtopic: Sequence[str] | None = None, misses: int = 0) -> dict[str, Any]:
    """Retrieval quality of an index on labelled queries (distinct FAQs, top 10), and what `ask`
    decides for each query at the threshold (``searcher``: a :class:`faqsearch.search.Searcher`).

    ``answered`` and ``answered_right`` are exactly `ask`'s decisions (its best-ranked answer reaches
    the threshold; and is a gold FAQ); ``offtopic_answered``: the share of ``offtopic`` questions
    `ask` would answer."""
    searcher = searcher.searcher() if hasattr(searcher, "searcher") else searcher  # an engine works too
    snap = searcher.snap
    check_gold(snap, queries, source)
    mode = mode or snap.mode
    check_lexical_options(mode, threshold, None)  # as `ask` does: a threshold in lexical mode was ignored in silence
    thr = snap.threshold if threshold is None else float(threshold)
    # ask's own decision: the confidence against the operating point where the index has a model and
    # no cosine threshold is given, else the cosine against the threshold
    op = snap.min_confidence if threshold is None and mode != "lexical" else None
    results = searcher.answer([q.text for q in queries], k=10, threshold=-1.0, batch_size=batch_size,
                              progress=progress, mode=mode)
    ranked = [[a.faq_id for a in r.answers] for r in results]
    metrics = ranking_metrics(ranked, [q.gold for q in queries])

    def answered(r) -> bool:
        if mode == "lexical":
            return bool(r.answers)
        if op is not None:
            return r.nearest is not None and r.nearest.confidence is not None and r.nearest.confidence >= op
        return r.best_score is not None and r.best_score >= thr

    decided = [answered(r) for r in results]
    metrics["answered"] = float(np.mean(decided))
    metrics["answered_right"] = float(np.mean([d and bool(ids) and ids[0] in q.gold
                                               for d, ids, q in zip(decided, ranked, queries)]))
    out: dict[str, Any] = {"queries": len(queries), "mode": mode, "threshold": None if mode == "lexical" else thr,
                           "min_confidence": op, **metrics}  # lexical mode answers whatever shares a word
    if offtopic:
        off = searcher.answer(list(offtopic), k=1, threshold=thr if op is None and mode != "lexical" else None,
                              batch_size=batch_size, mode=mode)
        out["offtopic"] = len(off)
        out["offtopic_answered"] = float(np.mean([bool(r.answers) for r in off]))
    if misses:
        rows = []
        for r, ids, q in zip(results, ranked, queries):
            if ids and ids[0] in q.gold:
                continue
            rank = next((i + 1 for i, f in enumerate(ids) if f in q.gold), None)
            rows.append({"query": q.text, "got": ids[0] if ids else None, "score": r.best_score,
                         "gold": sorted(q.gold), "gold_rank": rank})
        out["misses"] = rows[:misses]
    return out


def evaluate_pairs(searcher, a: Sequence[str], b: Sequence[str], y: np.ndarray, batch_size: int = 64,
                   progress: bool = False) -> dict[str, Any]:
    """Spearman x100 of the index's score of each pair (what `ask` would show) against the gold scores."""
    searcher = searcher.searcher() if hasattr(searcher, "searcher") else searcher
    cos = searcher.pair_scores(a, b, batch_size=batch_size, progress=progress)
    return {"pairs": len(y), "spearman": 100.0 * spearman(cos, y)}
