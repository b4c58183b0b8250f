"""The faces of a Milvus collection that searching and listing read (what the embedded backend's
FAISS index and SQLite store offer), at the collection's generation."""
from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

import numpy as np

from ...lexical import former_width_tokens, tokenize
from ...results import USER_SOURCES
from ...text import clean_text, search_key
from .collection import CJK, Collection, _quote, filter_expr

SIBLINGS_MAX = 16384  # Milvus' bound on the rows of one search or query
SIBLINGS_FAQS = 256  # FAQs whose other questions one query fetches (a batch's, at 64 dimensions, ran past the bound)
SIBLINGS_WIDER = 5  # FAQs searched beyond k with siblings at 256 dimensions: one the full scores lift into the top k
# is among them; fewer dimensions score further from the full ones, so (256 / dims)^2 times as many: sample_data's 159
# queries, top-10 lists unlike the embedded backend's at 64 dims with 5 / 20 / 40 / 80 more: 29 / 7 / 1 / 0, at 128
# with 5 / 10 / 20 / 40: 10 / 7 / 2 / 1 (2026-11-28, milvus-lite)
# Milvus' grouping search returns fewer FAQs than asked where FAQs hold many questions (Banking77's 77 FAQs of
# about 130 questions: 15.3 of 25 on average, 260 of 300 queries short, milvus-lite 2.5; known upstream), but
# the FAQs it returns are the first ones, best first: a search that leaves them out by a filter returns the next
# ones. Where FAQs hold few questions it is the slow search (sample_data, 450 queries: 6.2 s for 25 FAQs each,
# 2.6 s for a plain search of 100 questions each; Banking77's: 1.8 s, against 9.9 s for 1,024 questions). So a
# plain search of PLAIN_SPREAD questions per FAQ wanted comes first, grouped here, while it gives most queries
# enough FAQs (it stops where a quarter of PLAIN_SAMPLE queries or more were short); the rest are searched by
# grouping, and a query still short again, without the FAQs it has (2026-11-29).
PLAIN_SPREAD = 4
PLAIN_SAMPLE = 20


class MilvusIndex:
    """The VectorIndex face of the backend (what the engine's search calls)."""

    supports_removal = True
    delta = None  # edits are rows of the collection, never a delta beside it

    def __init__(self, backend: Collection):
        self.b = backend
        self.factory = f"milvus:{backend.spec.get('index_type', 'flat')}"
        self.nprobe = None
        self.ef_search = None
        self._len: int | None = None
        self.plain = [0, 0]  # queries searched plainly, and those of them short of FAQs

    @property
    def dim(self) -> int:
        return self.b.dim

    @property
    def wider(self) -> int:
        """FAQs searched beyond k where the full scores choose (SIBLINGS_WIDER, more below 256 dimensions)."""
        return max(SIBLINGS_WIDER, round(SIBLINGS_WIDER * (256 / max(1, self.dim)) ** 2))

    def __len__(self) -> int:
        if self._len is None:
            self._len = self.b.count()
        return self._len

    def max_id(self) -> int:
        return self.b.next_id - 1

    def search(self, queries: np.ndarray, k: int, ids: Any = None) -> tuple[np.ndarray, np.ndarray]:
        k = max(1, min(int(k), 16384))
        expr = f"id in {[int(i) for i in ids]}" if ids is not None else ""
        hits = self.b.client.search(self.b.collection, data=np.asarray(queries, dtype=np.float32).tolist(),
                                    anns_field="vector", limit=k, filter=self.b.visible(expr),
                                    output_fields=["id"], search_params={"metric_type": "IP"})
        scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        out = np.full((len(queries), k), -1, dtype=np.int64)
        for i, row in enumerate(hits):
            for j, h in enumerate(row[:k]):
                scores[i, j] = h["distance"]
                out[i, j] = h["id"]
        return scores, out

    def search_distinct(self, queries: np.ndarray, k: int, filters: dict[str, Any] | None = None,
                        siblings: bool = False) -> tuple[list[list[tuple[int, float]]], dict[int, dict[str, Any]]]:
        """Top-k distinct FAQs per query (the nearest questions grouped by FAQ, :meth:`_nearest_faqs`),
        with the rows of their best questions: what the embedded backend gets by widening a FAISS
        search. With ``siblings``, each query's hits also hold the other questions of its FAQs (at its
        FAQ's score in k dimensions; one more call), so that full-dimensional scores choose each FAQ's
        best question, as the embedded backend's re-scoring of its nearest questions does: grouping keeps
        one question per FAQ by the k-dimensional score, and where two were near-tied the answer showed
        the wrong one, at a lower score. The search then takes SIBLINGS_WIDER FAQs more than k, so that
        one the full scores lift into the top k is among them."""
        fields = ["id", "faq_id", "text", "source", "answer", "category", "metadata"]
        expr = filter_expr(filters)
        data = np.asarray(queries, dtype=np.float32).tolist()
        limit = max(1, min(int(k) + siblings * self.wider, SIBLINGS_MAX))
        hits = self._nearest_faqs(data, limit, self.b.visible(expr))
        out = [[(i, d) for i, d, _ in h] for h in hits]
        rows: dict[int, dict[str, Any]] = {}
        if siblings:  # the other questions of each FAQ found, its best one among them
            faqs = sorted({f for h in hits for _, _, f in h})
            by_faq: dict[str, list[int]] = {}
            for r in self._questions_of(faqs, expr, fields):
                rows.setdefault(int(r["id"]), _row(r))
                by_faq.setdefault(r["faq_id"], []).append(int(r["id"]))
            out = [h + [(i, s) for qid, s, f in hq for i in by_faq.get(f, []) if i != qid] for h, hq in zip(out, hits)]
        missing = sorted({i for h in hits for i, _, _ in h} - set(rows))
        rows.update((int(r["id"]), _row(r)) for r in self.b.by_ids(missing, fields))
        return out, rows

    def _questions_of(self, faqs: list[str], expr: str, fields: list[str]) -> list[dict[str, Any]]:
        """The visible questions of these FAQs with their raw vectors (kept for the scoring that follows),
        read SIBLINGS_FAQS FAQs at a time; a part whose questions reach Milvus' bound on one query's rows
        is read again in halves, and one FAQ of that many questions in windows of question ids."""
        out: list[dict[str, Any]] = []
        parts = [faqs[start:start + SIBLINGS_FAQS] for start in range(0, len(faqs), SIBLINGS_FAQS)]
        while parts:
            part = parts.pop()
            cond = f"faq_id in [{', '.join(_quote(f) for f in part)}]" + (f" and ({expr})" if expr else "")
            found = self.b.client.query(self.b.collection, filter=self.b.visible(cond),
                                        output_fields=[*fields, "raw"], limit=SIBLINGS_MAX)
            if len(found) >= SIBLINGS_MAX and len(part) > 1:
                parts += [part[:len(part) // 2], part[len(part) // 2:]]
                continue
            if len(found) >= SIBLINGS_MAX:
                found = self.b.query(cond, [*fields, "raw"])
            self.b.keep_raw(found)  # they are scored next: their raw vectors are not read again
            out += found
        return out

    def _nearest_faqs(self, data: list[list[float]], limit: int, cond: str) -> list[list[tuple[int, float, str]]]:
        """Each query's best question of each of its ``limit`` nearest FAQs, best first: (id, score, FAQ),
        fewer only where fewer visible FAQs are there."""
        def hit(h: dict[str, Any]) -> tuple[int, float, str]:
            return int(h["id"]), float(h["distance"]), h["entity"]["faq_id"]

        def search(rows: list[list[float]], n: int, where: str, grouped: bool) -> list[list[tuple[int, float, str]]]:
            got = self.b.client.search(self.b.collection, data=rows, anns_field="vector", limit=n, filter=where,
                                       output_fields=["faq_id"], search_params={"metric_type": "IP"},
                                       **({"group_by_field": "faq_id"} if grouped else {}))
            return [[hit(h) for h in row] for row in got]

        found: list[list[tuple[int, float, str]]] = [[] for _ in data]
        todo = list(range(len(data)))
        searched, short = self.plain
        if short * 4 < max(searched, PLAIN_SAMPLE):  # the plain search still pays here
            nearest = min(limit * PLAIN_SPREAD, SIBLINGS_MAX)
            left = []
            for i, row in zip(todo, search(data, nearest, cond, False)):
                best: dict[str, tuple[int, float, str]] = {}
                for h in row:  # best first: an FAQ's first question is its best
                    best.setdefault(h[2], h)
                found[i] = list(best.values())[:limit]
                if len(best) < limit and len(row) == nearest:  # more FAQs beyond the questions seen
                    left.append(i)
            self.plain = [searched + len(todo), short + len(left)]
            todo = left
        if todo:  # by grouping: the first FAQs, best first; where it gives more than the plain search, its list
            for i, row in zip(todo, search([data[i] for i in todo], limit, cond, True)):
                if len(row) > len(found[i]):
                    found[i] = row
        for i in todo:  # still short: the next FAQs, without those found (none found: no visible FAQ)
            while 0 < len(found[i]) < limit:
                have = ", ".join(_quote(f) for _, _, f in found[i])
                more = search([data[i]], limit - len(found[i]), f"({cond}) and faq_id not in [{have}]", True)[0]
                if not more:
                    break
                found[i] += more
        return found

    def reconstruct(self, ids: np.ndarray) -> np.ndarray:
        if not len(ids):
            return np.empty((0, self.dim), np.float32)
        rows = {r["id"]: r["vector"] for r in self.b.by_ids(ids, ["id", "vector"], visible=False)}
        return np.array([rows[int(i)] for i in ids], dtype=np.float32)


def _row(r: dict[str, Any]) -> dict[str, Any]:
    """A Milvus row as the store's question row (joined with its FAQ)."""
    return {"question_id": r["id"], "faq_id": r["faq_id"], "question": r["text"], "source": r["source"],
            "answer": r["answer"], "category": r["category"], "metadata": r["metadata"] or {}}


class MilvusStore:
    """The Store face of the backend (what the engine's reads, edits and listing call)."""

    cjk = CJK  # faqsearch tokenises the collection's ``lex`` field so, and Milvus' BM25 reads it as is
    stem = "none"

    def __init__(self, backend: Collection):
        self.b = backend
        self.path = f"{backend.uri}#{backend.collection}"

    def close(self) -> None:
        self.b.close()

    def question_ids(self, filters: dict[str, Any]) -> list[int]:
        return [r["id"] for r in self.b.query(filter_expr(filters), ["id"])]

    def lexical(self, texts: Sequence[str], n: int, filters: dict[str, Any] | None = None) -> list[list[tuple[int, float]]]:
        """BM25 by Milvus' own full-text search over faqsearch's tokens (CJK n-grams included)."""
        queries = [" ".join(tokenize(t, CJK) + former_width_tokens(t, CJK)) for t in texts]  # (collections made before)
        out: list[list[tuple[int, float]]] = [[] for _ in texts]
        todo = [i for i, q in enumerate(queries) if q]
        if not todo:
            return out
        hits = self.b.client.search(self.b.collection, data=[queries[i] for i in todo], anns_field="sparse", limit=n,
                                    filter=self.b.visible(filter_expr(filters)), output_fields=["id"],
                                    search_params={"metric_type": "BM25"})
        for i, row in zip(todo, hits):
            out[i] = [(int(h["id"]), abs(float(h["distance"]))) for h in row]
        return out

    def doc_freqs(self, tokens: Sequence[str]) -> tuple[dict[str, int], int]:
        """(visible rows holding each lexical token, visible rows), counted over the collection's
        ``lex`` field (the tokens its BM25 scores): one read of that field."""
        wanted = set(tokens)
        df = dict.fromkeys(tokens, 0)
        rows = self.b.query("", ["lex"])
        for r in rows:
            for t in wanted.intersection(r["lex"].split(" ")):
                df[t] += 1
        return df, len(rows)

    def questions(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        rows = self.b.by_ids(ids, ["id", "faq_id", "text", "source", "answer", "category", "metadata"])
        return {r["id"]: _row(r) for r in rows}

    def all_questions(self) -> list[tuple[int, str, str]]:
        return sorted((r["id"], r["faq_id"], r["text"]) for r in self.b.query("", ["id", "faq_id", "text"]))

    def question_faqs(self) -> tuple[np.ndarray, np.ndarray]:
        """(question ids by id, a number per FAQ), as the embedded store gives them."""
        rows, keys = self.all_questions(), {}
        return (np.array([r[0] for r in rows], dtype=np.int64),
                np.array([keys.setdefault(r[1], len(keys)) for r in rows], dtype=np.int64))

    def question_rows(self, ids: Sequence[int]) -> list[tuple[int, str, str]]:
        found = self.questions(ids)
        return [(i, found[i]["faq_id"], found[i]["question"]) for i in sorted(found)]

    def raw_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, raw vectors) of every visible question, in id order."""
        rows = sorted(self.b.query("", ["id", "raw"]), key=lambda r: r["id"])
        ids = np.array([r["id"] for r in rows], dtype=np.int64)
        raw = np.array([r["raw"] for r in rows], dtype=np.float32).reshape(len(rows), self.b.dim_in)
        return ids, raw

    def _faq_rows(self, expr: str = "") -> list[dict[str, Any]]:
        return self.b.query(expr, ["id", "faq_id", "text", "source", "answer", "category", "metadata", "content_hash",
                                   "faq_seq"])

    def faq(self, faq_id: str) -> dict[str, Any] | None:
        rows = sorted(self._faq_rows(f"faq_id == {_quote(faq_id)}"), key=lambda r: r["id"])
        if not rows:
            return None
        f = rows[0]
        return {"id": f["faq_id"], "answer": f["answer"], "category": f["category"], "metadata": f["metadata"] or {},
                "content_hash": f["content_hash"],
                "questions": [{"id": r["id"], "text": r["text"], "source": r["source"]} for r in rows]}

    def first_questions(self, faq_ids: Sequence[str]) -> dict[str, str]:
        ids = sorted({str(f) for f in faq_ids})
        if not ids:
            return {}
        out: dict[str, tuple[int, str]] = {}
        for start in range(0, len(ids), SIBLINGS_FAQS):  # one query per part (a windowed scan cost 0.4 s an ask)
            cond = (f"faq_id in [{', '.join(_quote(f) for f in ids[start:start + SIBLINGS_FAQS])}] and source not in "
                    f"{json.dumps(list(USER_SOURCES))}")
            found = self.b.client.query(self.b.collection, filter=self.b.visible(cond), output_fields=["id", "faq_id", "text"],
                                        limit=SIBLINGS_MAX)
            for r in found:
                if r["faq_id"] not in out or r["id"] < out[r["faq_id"]][0]:
                    out[r["faq_id"]] = (r["id"], r["text"])
        return {f: t for f, (_, t) in out.items()}

    def faq_fields(self, faq_ids: Iterable[str]) -> dict[str, tuple]:
        ids = list(faq_ids)
        if not ids:
            return {}
        out = {}
        for r in self._faq_rows(f"faq_id in {json.dumps(ids, ensure_ascii=False)}"):
            out.setdefault(r["faq_id"], (r["answer"], r["category"], r["metadata"], r["content_hash"], r["faq_seq"]))
        return out

    def list_faqs(self, limit: int | None = None, offset: int = 0, category: str | None = None,
                  contains: str | None = None) -> list[dict[str, Any]]:
        rows = self._faq_rows(f"category == {_quote(clean_text(category))}" if category else "")  # as stored
        faqs: dict[str, dict[str, Any]] = {}
        texts: dict[str, list[str]] = {}
        for r in sorted(rows, key=lambda r: (r["faq_seq"], r["id"])):
            f = faqs.setdefault(r["faq_id"], {"id": r["faq_id"], "category": r["category"], "answer": r["answer"],
                                              "questions": 0})
            f["questions"] += 1
            texts.setdefault(r["faq_id"], []).append(r["text"])
        out = list(faqs.values())
        if contains:
            low = search_key(contains)
            out = [f for f in out if low in search_key(f["id"]) or low in search_key(f["answer"])
                   or any(low in search_key(t) for t in texts[f["id"]])]
        return out[offset:offset + limit] if limit is not None else out[offset:]

    def categories(self) -> list[str]:
        """The categories of the visible FAQs, sorted."""
        return sorted({r["category"] for r in self.b.query("", ["category"]) if r["category"] is not None})

    def faq_hashes(self) -> dict[str, str | None]:
        return {r["faq_id"]: r["content_hash"] for r in self.b.query("", ["faq_id", "content_hash"])}

    def faq_ids(self, source: str | None = None) -> set[str]:
        return {r["faq_id"] for r in self.b.query(f"source == {_quote(source)}" if source else "", ["faq_id"])}

    def question_count(self) -> int:
        return self.b.count()

    def source_counts(self, exclude: str | None = None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.b.query("", ["source"]):
            counts[r["source"]] = counts.get(r["source"], 0) + 1
        return {k: v for k, v in counts.items() if k != exclude}

    def counts(self) -> dict[str, int]:
        per: dict[str, int] = {}
        for r in self.b.query("", ["faq_id"]):
            per[r["faq_id"]] = per.get(r["faq_id"], 0) + 1
        return {"faqs": len(per), "questions": sum(per.values()), "max_questions_per_faq": max(per.values(), default=0)}
