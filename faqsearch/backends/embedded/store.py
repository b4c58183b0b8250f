"""SQLite store of FAQs and their questions (sqlite-utils). Question ids are the FAISS ids.

Rows carry generation numbers (migration m006): a row is visible at generation G when
``gen <= G < dead``. A store opened at a generation reads exactly that generation, so an edit can
write the next generation into the same file (``gen=`` on the write methods) while readers keep
their view, and commit it elsewhere (the index's config.json). Rows a committed edit removed stay
until the next compaction copies the store (:meth:`Store.keep_only`), so a reader that lags any
number of generations still reads its own exactly. Without ``generation`` a store reads every live row.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from . import postings
from .connection import connect, copy_in_memory, sqlite_file
from ...corpus import FAQ, faq_hash
from ...filters import filter_sql
from ...lexical import choose_stemmer, stem_in_use, tokenize
from ...results import USER_SOURCES
from ...text import clean_text, search_key

BLOCK = 2000  # corpus records written per step of a build
SOURCES = ("corpus", "generated", "added", "feedback", "approved")
# names of every migration in migrations.py (a test keeps them equal): a store that has them all is
# opened without importing sqlite-utils
MIGRATIONS = ("m001_initial", "m002_content_hash", "m003_lexical", "m004_lexical_vocab", "m005_settings",
              "m006_generations", "m007_stemming")
ALIVE = 1 << 62  # ``dead`` of a row no edit has removed


class Store:
    """FAQs (id, answer, category, metadata) and questions (id, faq_id, text, source)."""

    def __init__(self, path: str, cjk: str | None = None, generation: int | None = None, index: str | None = None,
                 migrate: bool = True):
        """``cjk``: CJK tokenisation for a store that holds no questions yet (default DEFAULT_CJK); an existing store
        keeps its own. ``generation``: read the rows visible at that generation (default: every live row).
        ``migrate`` False (a reader): an older schema is upgraded in a copy in memory, never in the file."""
        self.path = path
        self.generation = generation
        g = ALIVE - 1 if generation is None else int(generation)
        self._g = g
        self.known_count: int | None = None  # visible questions, when the caller knows them (a reader's config)
        self.read_arrays = True  # BM25 from the postings arrays beside it (False: they are not recorded, FTS5 scores)
        self.index: str | None = None  # the index it belongs to, for messages
        self._conn = connect(path, index, owner=self)  # shared by threads under _lock; ``index``: named by errors
        self._db = None
        self._lock = threading.Lock()
        with self._lock:
            if not self._up_to_date():
                from .migrations import migrations

                if not migrate:
                    self._conn = copy_in_memory(self._conn, owner=self)
                migrations.apply(self.db)
            if cjk is not None and not self._conn.execute("select 1 from questions limit 1").fetchone():
                from ...lexical import CJK_MODES

                if cjk not in CJK_MODES:
                    raise ValueError(f"cjk must be one of {CJK_MODES}")
                with self._conn:
                    self._conn.execute("update settings set value = ? where key = 'cjk'", [cjk])
            self.cjk = str(self._conn.execute("select value from settings where key = 'cjk'").fetchone()[0])
            self._stem = str(self._conn.execute("select value from settings where key = 'stem'").fetchone()[0])

    @property
    def stem(self) -> str:
        """How Latin words are stemmed for BM25 ('none' or 'english'; a store still empty: 'none')."""
        if self._stem == "auto":  # not chosen yet, or chosen since by another connection or a committed insert
            self._stem = str(self._conn.execute("select value from settings where key = 'stem'").fetchone()[0])
        return stem_in_use(self._stem)

    def _vis(self, alias: str) -> str:
        """SQL: the row ``alias`` is visible at this store's generation (an int literal, never user input)."""
        return f"({alias}.gen <= {self._g} and {alias}.dead > {self._g})"

    @property
    def db(self):
        """The sqlite-utils view of the connection, made on the first write (it imports pandas when
        present: a query never needs it)."""
        if self._db is None:
            from sqlite_utils import Database

            self._db = Database(self._conn)
        return self._db

    def _up_to_date(self) -> bool:
        try:
            done = {r[0] for r in self._conn.execute(
                "select name from _sqlite_migrations where migration_set = 'faqsearch'")}
        except sqlite3.OperationalError:  # a new database: no migrations table yet
            return False
        return set(MIGRATIONS) <= done

    @classmethod
    def open_existing(cls, path: str, index: str | None = None, generation: int | None = None) -> "Store":
        """Open the store of a built index to read it, never creating or changing one: a missing, empty or
        foreign file is an IndexFormatError naming the file and the fix."""
        from ...index.config import damaged
        from ...errors import IndexFormatError

        bad = lambda why: IndexFormatError(damaged(index or path, "store", why))  # noqa: E731

        if not os.path.exists(path):
            raise bad("missing")
        if os.path.getsize(path) == 0:
            raise bad("empty")
        try:
            conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, check_same_thread=False)
            tables = {r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")}
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # a damaged schema page: undecodable names
            raise bad(f"not a faqsearch database ({exc})") from None
        conn.close()
        if not {"faqs", "questions"} <= tables:
            raise bad("not a faqsearch database (no faqs/questions tables)")
        try:
            return cls(path, generation=generation, index=index, migrate=False)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # a StoreDamagedError says so already
            raise (exc if isinstance(exc, IndexFormatError) else bad(f"damaged ({exc})")) from None

    def close(self) -> None:
        with self._lock:  # after the read in progress: closing under it crashed the process (SQLite frees its statements)
            self._conn.close()

    def _n_docs(self) -> int:
        """Visible questions, counted again only after a connection changed rows (a count scans the
        table: about a millisecond per 100k rows, on every lexical query otherwise)."""
        if self.known_count is not None:
            return self.known_count
        changes = (self._conn.total_changes, self._conn.execute("pragma data_version").fetchone()[0])
        if getattr(self, "_count", None) is None or self._count[0] != changes:
            self._count = (changes, int(self._conn.execute(
                f"select count(*) from questions q where {self._vis('q')}").fetchone()[0]))
        return self._count[1]

    def question_count(self) -> int:
        with self._lock:
            return int(self._conn.execute(f"select count(*) from questions q where {self._vis('q')}").fetchone()[0])

    def source_counts(self, exclude: str | None = None) -> dict[str, int]:
        """Questions per source (corpus, added, generated, feedback)."""
        with self._lock:
            return {r[0]: r[1] for r in self._conn.execute(
                f"select source, count(*) from questions q where {self._vis('q')} group by source") if r[0] != exclude}

    # Writes. ``gen=None`` changes rows for good (a store being built, or a private copy);
    # ``gen=G+1`` writes generation G+1 beside G, which readers of G do not see.
    def insert_faqs(self, faqs: Iterable[FAQ], source: str = "corpus", first_id: int = 1,
                    gen: int | None = None) -> list[tuple[int, str]]:
        """Insert FAQs and their questions; return (question_id, text) in insertion order."""
        faqs = list(faqs)
        with self._lock, self.db.atomic():
            self._insert_faq_rows(faqs, gen)
            return self._insert_questions([(f.id, q) for f in faqs for q in f.questions], source, first_id, gen)

    def insert_corpus(self, faqs: list[FAQ]) -> np.ndarray:
        """Fill a new store from corpus records, emptying ``faqs`` as it goes (an ingest then holds
        neither the records nor the rows); returns the question ids, in order."""
        faqs.reverse()  # popped from the end: the file's order, each record freed once written
        ids: list[int] = []
        with self._lock, self.db.atomic():
            while faqs:
                block = [faqs.pop() for _ in range(min(BLOCK, len(faqs)))]
                self._insert_faq_rows(block, None)
                ids += [i for i, _ in self._insert_questions([(f.id, q) for f in block for q in f.questions],
                                                             "corpus", 1, None)]
        return np.array(ids, dtype=np.int64)

    def _insert_faq_rows(self, faqs: Sequence[FAQ], gen: int | None) -> None:
        seq = int(self._conn.execute("select coalesce(max(seq), 0) from faqs").fetchone()[0]) + 1
        self.db["faqs"].insert_all(({"id": f.id, "answer": f.answer, "category": f.category, "content_hash": faq_hash(f),
                                     "metadata": json.dumps(f.metadata, ensure_ascii=False) if f.metadata else None,
                                     "seq": seq + i, "gen": gen or 0} for i, f in enumerate(faqs)), batch_size=500)

    def iter_texts(self, chunk: int = 4096) -> Iterator[list[str]]:
        """Question texts by id, ``chunk`` at a time (a build's encoding order)."""
        rows = [(0, "")]
        while rows:
            with self._lock:
                rows = self._conn.execute(f"select id, text from questions q where id > ? and {self._vis('q')} "
                                          "order by id limit ?", [rows[-1][0], chunk]).fetchall()
            if rows:
                yield [r[1] for r in rows]

    def question_faqs(self) -> tuple[np.ndarray, np.ndarray]:
        """(visible question ids by id, a number per FAQ): 16 bytes a question, to choose held-out rows by."""
        with self._lock:
            cur = self._conn.execute(f"select q.id, f.rid from questions q join faqs f on f.id = q.faq_id and "
                                     f"{self._vis('f')} where {self._vis('q')} order by q.id")
            both = np.concatenate([np.zeros((0, 2), np.int64)] + [np.array(b, np.int64) for b in iter(
                lambda: cur.fetchmany(65536), [])])
        return both[:, 0], both[:, 1]

    def question_rows(self, ids: Sequence[int]) -> list[tuple[int, str, str]]:
        """(id, faq_id, text) of these questions, by id (read 30,000 at a time: SQLite's parameter limit)."""
        ids, out = sorted(int(i) for i in ids), []
        with self._lock:
            for part in (ids[s:s + 30_000] for s in range(0, len(ids), 30_000)):
                out += self._conn.execute(f"select id, faq_id, text from questions q where id in "
                                          f"({','.join('?' * len(part))}) and {self._vis('q')} order by id", part)
        return [tuple(r) for r in out]

    def add_questions(self, faq_id: str, texts: Sequence[str], source: str = "added",
                      first_id: int = 1, gen: int | None = None) -> list[tuple[int, str]]:
        with self._lock, self.db.atomic():
            return self._insert_questions([(faq_id, t) for t in texts], source, first_id, gen)

    def _insert_questions(self, pairs: list[tuple[str, str]], source: str, first_id: int,
                          gen: int | None) -> list[tuple[int, str]]:
        """New ids continue after the largest stored id and never start below ``first_id`` (the
        engine passes one past every id a vector may still carry, so removed ids are not reused)."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}")
        start = max(first_id, (self._conn.execute("select coalesce(max(id), 0) from questions").fetchone()[0]) + 1)
        cjk, stem = self.cjk, self.stem
        if self._stem == "auto" and pairs:  # the first questions of a new store choose its stemmer
            stem = choose_stemmer(q for _, q in pairs[:5000])  # recorded with the rows (a rollback undoes both)
            self._conn.execute("update settings set value = ? where key = 'stem' and value = 'auto'", [stem])
        self.db["questions"].insert_all(
            ({"id": start + i, "faq_id": fid, "text": q, "source": source, "lex": " ".join(tokenize(q, cjk, stem)),
              "gen": gen or 0} for i, (fid, q) in enumerate(pairs)), batch_size=1000)  # rows made as they are written
        return [(start + i, q) for i, (_, q) in enumerate(pairs)]

    def update_faq(self, faq: FAQ, gen: int | None = None) -> None:
        """Answer, category, metadata and content hash of an existing FAQ (questions are separate).
        With ``gen``, a new row of that generation replaces the visible one (kept for older readers)."""
        content = {"answer": faq.answer, "category": faq.category,
                   "metadata": json.dumps(faq.metadata, ensure_ascii=False) if faq.metadata else None,
                   "content_hash": faq_hash(faq)}
        with self._lock, self.db.atomic():
            row = self._conn.execute(f"select rid, seq from faqs f where id = ? and {self._vis('f')}", [faq.id]).fetchone()
            if row is None:
                raise KeyError(faq.id)
            if gen is None:
                self._conn.execute("update faqs set answer = ?, category = ?, metadata = ?, content_hash = ? "
                                   "where rid = ?", [*content.values(), row[0]])
                return
            self._conn.execute("update faqs set dead = ? where rid = ?", [gen, row[0]])
            self._conn.execute("insert into faqs (id, answer, category, metadata, content_hash, seq, gen) "
                               "values (?, ?, ?, ?, ?, ?, ?)", [faq.id, *content.values(), row[1], gen])

    # in the marking updates below, ``+dead`` keeps SQLite off the index on dead: ``dead = ALIVE``
    # holds for every live row, while the id / faq_id lookups find a few
    def delete_questions(self, question_ids: Sequence[int], gen: int | None = None) -> None:
        ids = [int(i) for i in question_ids]
        with self._lock, self.db.atomic():
            for chunk in (ids[start:start + 500] for start in range(0, len(ids), 500)):
                marks = ",".join("?" * len(chunk))
                if gen is None:
                    self._conn.execute(f"delete from questions where id in ({marks})", chunk)
                else:
                    self._conn.execute(f"update questions set dead = ? where id in ({marks}) and +dead = {ALIVE}",
                                       [gen, *chunk])

    def delete_faqs(self, faq_ids: Sequence[str], gen: int | None = None) -> list[int]:
        """Delete FAQs with all their questions; return the deleted question ids."""
        ids = list(faq_ids)
        removed: list[int] = []
        with self._lock, self.db.atomic():
            for chunk in (ids[start:start + 500] for start in range(0, len(ids), 500)):
                marks = ",".join("?" * len(chunk))
                removed += [r[0] for r in self._conn.execute(
                    f"select id from questions q where faq_id in ({marks}) and {self._vis('q')}", chunk)]
                if gen is None:
                    self._conn.execute(f"delete from questions where faq_id in ({marks})", chunk)
                    self._conn.execute(f"delete from faqs where id in ({marks})", chunk)
                else:
                    self._conn.execute(f"update questions set dead = ? where faq_id in ({marks}) and +dead = {ALIVE}",
                                       [gen, *chunk])
                    self._conn.execute(f"update faqs set dead = ? where id in ({marks}) and +dead = {ALIVE}",
                                       [gen, *chunk])
        return removed

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around several writes (each write's own a savepoint), rolled back on any error."""
        with self.db.atomic():
            yield

    def count_questions(self, faq_ids: Sequence[str]) -> int:
        """Visible questions of these FAQs."""
        ids, n = list(faq_ids), 0
        with self._lock:
            for chunk in (ids[start:start + 500] for start in range(0, len(ids), 500)):
                n += int(self._conn.execute(f"select count(*) from questions q where faq_id in ({','.join('?' * len(chunk))}) "
                                            f"and {self._vis('q')}", chunk).fetchone()[0])
        return n

    def discard_uncommitted(self, generation: int) -> int:
        """For a writer about to write ``generation + 1``: drop rows of later generations (a killed
        edit that never committed) and revive rows it had marked. Rows that committed generations
        removed stay: a reader of any older generation may still read them (they go with the next
        compaction, :meth:`keep_only`). Returns the rows changed."""
        g = int(generation)
        changed = 0
        with self._lock, self.db.atomic():
            for table in ("questions", "faqs"):
                changed += self._conn.execute(f"delete from {table} where gen > ?", [g]).rowcount
                changed += self._conn.execute(f"update {table} set dead = {ALIVE} where dead > ? and dead < {ALIVE}",
                                              [g]).rowcount
        return changed

    def keep_only(self, generation: int) -> int:
        """For a private copy (a compaction's new store): delete every row ``generation`` does not see."""
        g = int(generation)
        changed = 0
        with self._lock, self.db.atomic():
            for table in ("questions", "faqs"):
                changed += self._conn.execute(f"delete from {table} where gen > ? or dead <= ?", [g, g]).rowcount
                changed += self._conn.execute(f"update {table} set dead = {ALIVE} where dead < {ALIVE}").rowcount
        return changed

    def check_integrity(self, where: str) -> None:
        """SQLite's own quick check of the whole file (writers run it before they build on the store)."""
        from ...index.config import damaged
        from ...errors import IndexFormatError

        try:
            with self._lock:
                rows = self._conn.execute("pragma quick_check(3)").fetchall()
        except sqlite3.DatabaseError as exc:
            raise (exc if isinstance(exc, IndexFormatError) else IndexFormatError(damaged(where, "store", str(exc)))) from None
        if [r[0] for r in rows] != ["ok"]:
            raise IndexFormatError(damaged(where, "store", "; ".join(r[0] for r in rows)[:200]))

    def rows_of_generation(self, generation: int) -> dict[str, int]:
        """Question rows a generation wrote and removed (what a writer checks before its commit)."""
        g = int(generation)
        with self._lock:
            added = self._conn.execute("select count(*) from questions where gen = ?", [g]).fetchone()[0]
            removed = self._conn.execute("select count(*) from questions where dead = ?", [g]).fetchone()[0]
        return {"added": int(added), "removed": int(removed)}

    def faqs_visible_twice(self, faq_ids: Sequence[str]) -> list[str]:
        """Of these FAQ ids, those with more than one row visible at this store's generation."""
        ids, out = list(dict.fromkeys(faq_ids)), []
        with self._lock:
            for chunk in (ids[start:start + 500] for start in range(0, len(ids), 500)):
                out += [r[0] for r in self._conn.execute(
                    f"select id from faqs f where id in ({','.join('?' * len(chunk))}) and {self._vis('f')} "
                    "group by id having count(*) > 1", chunk)]
        return out

    def dead_rows(self) -> int:
        """Rows removed by committed edits and kept for older readers (a compaction drops them)."""
        with self._lock:
            return sum(int(self._conn.execute(f"select count(*) from {t} where dead <= {self._g}").fetchone()[0])
                       for t in ("questions", "faqs"))

    def get_setting(self, key: str) -> str | None:
        with self._lock:
            row = self._conn.execute("select value from settings where key = ?", [key]).fetchone()
        return None if row is None else str(row[0])

    def set_setting(self, key: str, value: str) -> None:
        with self._lock, self._conn:
            self._conn.execute("insert or replace into settings (key, value) values (?, ?)", [key, value])

    def uncommitted(self) -> int:
        """Question rows of generations after this one (a writer at work, or one killed before its commit)."""
        with self._lock:
            return int(self._conn.execute(f"select count(*) from questions where gen > {self._g}").fetchone()[0])

    def hidden(self) -> int:
        """Rows that this generation does not see but the file still holds (kept for older readers, or uncommitted)."""
        with self._lock:
            return int(self._conn.execute(f"select count(*) from questions q where not {self._vis('q')}").fetchone()[0])

    def faq_hashes(self) -> dict[str, str | None]:
        with self._lock:
            return dict(self._conn.execute(f"select id, content_hash from faqs f where {self._vis('f')}"))

    def faq(self, faq_id: str) -> dict[str, Any] | None:
        """One FAQ with its questions (id, text, source), or None."""
        with self._lock:
            row = self._conn.execute("select id, answer, category, metadata, content_hash from faqs f "
                                     f"where id = ? and {self._vis('f')}", [faq_id]).fetchone()
            if row is None:
                return None
            qs = self._conn.execute(f"select id, text, source from questions q where faq_id = ? and {self._vis('q')} "
                                    "order by id", [faq_id])
            questions = [{"id": q[0], "text": q[1], "source": q[2]} for q in qs]
        return {"id": row[0], "answer": row[1], "category": row[2],
                "metadata": json.loads(row[3]) if row[3] else {}, "content_hash": row[4], "questions": questions}

    def list_faqs(self, limit: int | None = None, offset: int = 0, category: str | None = None,
                  contains: str | None = None) -> list[dict[str, Any]]:
        """FAQs in insertion order; ``contains``: only those whose id, answer or a question holds the text."""
        conds, args = [], []
        if category:
            conds.append("f.category = ?")
            args.append(clean_text(category))  # as stored: NFC, spaces trimmed
        if contains:  # LIKE folds ASCII letters only: other text is compared by search_key (a Python function, slower)
            test = "{} like ? escape '\\'" if (ascii_ := contains.isascii()) else "instr(search_key({}), ?)"
            conds.append(f"({test.format('f.id')} or {test.format('f.answer')} or exists (select 1 from questions x "
                         f"where x.faq_id = f.id and {self._vis('x')} and {test.format('x.text')}))")
            like = "%" + contains.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            args += [like if ascii_ else search_key(contains)] * 3
        conds.append(self._vis("f"))  # the page is read first (by the seq index), then its rows' questions counted
        sql = (f"select f.id, f.category, f.answer, (select count(*) from questions q where q.faq_id = f.id and "
               f"{self._vis('q')}) from faqs f where " + " and ".join(conds) + " order by f.seq limit ? offset ?")
        args += [-1 if limit is None else limit, offset]  # -1: no limit (an offset alone was ignored)
        with self._lock:
            return [{"id": r[0], "category": r[1], "answer": r[2], "questions": r[3]} for r in self._conn.execute(sql, args)]

    def categories(self) -> list[str]:
        """The categories of the visible FAQs, sorted."""
        with self._lock:
            return [r[0] for r in self._conn.execute(
                f"select distinct f.category from faqs f where f.category is not null and {self._vis('f')} order by 1")]

    def question_ids(self, filters: dict[str, Any]) -> list[int]:
        """Ids of the questions whose FAQ passes the filters."""
        where, args = filter_sql(filters)
        with self._lock:
            return [r[0] for r in self._conn.execute(  # the FAQs first, their questions by the faq_id index:
                f"select q.id from questions q where q.faq_id in (select f.id from faqs f where {self._vis('f')} "
                f"and {where}) and {self._vis('q')}", args)]  # 62 -> 15 ms a filtered ask at 100k questions

    def lexical(self, texts: Sequence[str], n: int, filters: dict[str, Any] | None = None) -> list[list[tuple[int, float]]]:
        """BM25 (FTS5's scores) top-n question ids with scores (higher is better) for each text; the
        rows of a large version scored from its postings arrays (:func:`faqsearch.backends.embedded.postings.search`)."""
        with self._lock:
            return postings.search(self, self._conn, texts, n, filters)

    def doc_freqs(self, tokens: Sequence[str]) -> tuple[dict[str, int], int]:
        """Rows holding each lexical token, and the visible rows (BM25's statistics)."""
        with self._lock:
            return postings.doc_freqs(self, self._conn, tokens)

    def write_postings(self, directory: str, previous: str | None = None) -> bool:
        """The BM25 postings arrays of this store's rows for the version ``directory``, when it is
        large (:func:`faqsearch.backends.embedded.postings.write`); those of ``previous`` shared instead where they
        still describe these rows (rows only added since). Returns whether the version has arrays."""
        with self._lock:
            if previous is not None and postings.still_valid(self._conn, previous):
                return postings.share(previous, directory)
            return postings.write(self._conn, directory)

    def questions(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Question rows joined with their FAQ, keyed by question id."""
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        sql = ("select q.id as question_id, q.faq_id, q.text as question, q.source, f.answer, f.category, "
               f"f.metadata from questions q join faqs f on f.id = q.faq_id and {self._vis('f')} "
               f"where q.id in ({','.join('?' * len(ids))}) and {self._vis('q')}")
        with self._lock:
            cur = self._conn.execute(sql, ids)
            rows = [dict(zip([c[0] for c in cur.description], r)) for r in cur.fetchall()]
        return {r["question_id"]: {**r, "metadata": json.loads(r["metadata"]) if r["metadata"] else {}} for r in rows}

    def first_questions(self, faq_ids: Sequence[str]) -> dict[str, str]:
        """Each FAQ's first question written for it (its lowest id not from USER_SOURCES), by FAQ id."""
        ids, out, users = sorted({str(f) for f in faq_ids}), {}, ",".join("?" * len(USER_SOURCES))
        with self._lock:
            for part in (ids[s:s + 30_000] for s in range(0, len(ids), 30_000)):
                out.update(self._conn.execute(
                    f"select faq_id, text from questions where id in (select min(id) from questions q where faq_id in "
                    f"({','.join('?' * len(part))}) and source not in ({users}) and {self._vis('q')} group by faq_id)",
                    [*part, *USER_SOURCES]).fetchall())
        return out

    def all_questions(self) -> list[tuple[int, str, str]]:
        """(id, faq_id, text) of every question, by id: the order of the stored raw vectors."""
        with self._lock:
            return [tuple(r) for r in self._conn.execute(
                f"select id, faq_id, text from questions q where {self._vis('q')} order by id")]

    def backup(self, path: str) -> None:
        """A consistent copy of the database (SQLite online backup)."""
        with self._lock:
            dest = sqlite3.connect(sqlite_file(path))
            try:
                self._conn.backup(dest)
            finally:
                dest.close()

    def faq_ids(self, source: str | None = None) -> set[str]:
        """Ids of all FAQs, or of those with at least one question from ``source``."""
        with self._lock:
            if source is None:
                return {r[0] for r in self._conn.execute(f"select id from faqs f where {self._vis('f')}")}
            return {r[0] for r in self._conn.execute(
                f"select distinct faq_id from questions q where source = ? and {self._vis('q')}", [source])}

    def counts(self) -> dict[str, int]:
        with self._lock:
            faqs = self._conn.execute(f"select count(*) from faqs f where {self._vis('f')}").fetchone()[0]
            qs = self._conn.execute(f"select count(*) from questions q where {self._vis('q')}").fetchone()[0]
            most = self._conn.execute("select coalesce(max(c), 0) from (select count(*) c from questions q "
                                      f"where {self._vis('q')} group by faq_id)").fetchone()[0]
        return {"faqs": faqs, "questions": qs, "max_questions_per_faq": most}
