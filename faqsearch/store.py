"""SQLite store of FAQs and their questions (sqlite-utils). Question ids are the FAISS ids."""
from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any, Iterable, Sequence

from sqlite_utils import Database

from .corpus import FAQ
from .migrations import migrations

SOURCES = ("corpus", "generated", "added")


class Store:
    """FAQs (id, answer, category, metadata) and questions (id, faq_id, text, source)."""

    def __init__(self, path: str):
        self.path = path
        # one connection shared by threads, serialised by a lock (reads are tiny)
        self._conn = sqlite3.connect(path, check_same_thread=False)
        self.db = Database(self._conn)
        self._lock = threading.Lock()
        with self._lock:
            migrations.apply(self.db)

    def close(self) -> None:
        self._conn.close()

    def insert_faqs(self, faqs: Iterable[FAQ], source: str = "corpus") -> list[tuple[int, str]]:
        """Insert FAQs and their questions; return (question_id, text) in insertion order."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}")
        faqs = list(faqs)
        with self._lock, self.db.atomic():
            self.db["faqs"].insert_all(
                ({"id": f.id, "answer": f.answer, "category": f.category,
                  "metadata": json.dumps(f.metadata, ensure_ascii=False) if f.metadata else None} for f in faqs),
                batch_size=500,
            )
            start = (self.db.execute("select coalesce(max(id), 0) from questions").fetchone()[0]) + 1
            rows = [{"id": start + i, "faq_id": f.id, "text": q, "source": source}
                    for i, (f, q) in enumerate((f, q) for f in faqs for q in f.questions)]
            self.db["questions"].insert_all(rows, batch_size=1000)
        return [(r["id"], r["text"]) for r in rows]

    def questions(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Question rows joined with their FAQ, keyed by question id."""
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        sql = ("select q.id as question_id, q.faq_id, q.text as question, q.source, f.answer, f.category, "
               "f.metadata from questions q join faqs f on f.id = q.faq_id "
               f"where q.id in ({','.join('?' * len(ids))})")
        with self._lock:
            cur = self.db.execute(sql, ids)
            cols = [c[0] for c in cur.description]
            rows = [dict(zip(cols, r)) for r in cur.fetchall()]
        for r in rows:
            r["metadata"] = json.loads(r["metadata"]) if r["metadata"] else {}
        return {r["question_id"]: r for r in rows}

    def all_questions(self) -> list[tuple[int, str, str]]:
        with self._lock:
            return [tuple(r) for r in self.db.execute("select id, faq_id, text from questions order by id")]

    def faq_ids(self) -> set[str]:
        with self._lock:
            return {r[0] for r in self.db.execute("select id from faqs")}

    def counts(self) -> dict[str, int]:
        with self._lock:
            faqs = self.db.execute("select count(*) from faqs").fetchone()[0]
            qs = self.db.execute("select count(*) from questions").fetchone()[0]
            most = self.db.execute("select coalesce(max(c), 0) from (select count(*) c from questions group by faq_id)").fetchone()[0]
        return {"faqs": faqs, "questions": qs, "max_questions_per_faq": most}
