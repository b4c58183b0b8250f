"""The query log: what users asked and what they got, in SQLite with the index.

``indexes/NAME/queries.db`` (inside the index directory, beside its versions, so it outlives them
and travels with a copy; an index of an older layout keeps ``indexes/NAME.queries.db`` beside it):
one row per query with its time, text, mode, top FAQ, score, confidence and the bar that decided
(operating point or threshold), whether it was answered, and the FAQ it was later assigned to by
feedback. Nothing else is stored (no headers, no keys).
Used by `faqsearch gaps` and the service's traffic views.
"""
from __future__ import annotations

import datetime
import logging
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

from sqlite_utils import Database, Migrations

from .errors import InvalidOptionError
from .files import sqlite_file
from .index.format import CONFIG, CURRENT, QUERY_LOG, legacy_query_log
from .text import clean_text, read_alike, search_key

migrations = Migrations("faqsearch-querylog")
log = logging.getLogger(__name__)


@migrations()
def m001_queries(db: Database) -> None:
    db["queries"].create({
        "id": int, "time": str, "query": str, "mode": str, "channel": str, "top_faq": str, "top_question": str,
        "score": float, "threshold": float, "answered": int, "feedback_faq": str,
    }, pk="id", not_null={"time", "query", "answered"})
    db["queries"].create_index(["time"])
    db["queries"].create_index(["answered", "time"])


@migrations()
def m002_confidence(db: Database) -> None:
    """The first answer's (or best guess's) confidence and the confidence that decided (None where the
    cosine threshold did), so that gaps can tell answers that barely passed."""
    for column in ("confidence", "min_confidence"):
        try:
            db["queries"].add_column(column, float)
        except sqlite3.OperationalError as exc:  # another process of this index added it a moment before
            if "duplicate column" not in str(exc):
                raise


@migrations()
def m003_bare_query(db: Database) -> None:
    """An index on a query without its case and end punctuation, which feedback marks by (:data:`_BARE`):
    a full scan took 0.37 s a marked text at 1M logged queries, with the log's write lock held."""
    db.execute(f"create index if not exists queries_bare on queries ({_BARE})")


def log_path(index_path: str) -> str:
    """Inside the index directory; beside it for an index of an older layout (a link, or a plain
    directory of version files) or where such a log already exists."""
    legacy = legacy_query_log(index_path)
    if os.path.exists(legacy) or (os.path.islink(index_path) and not os.path.exists(os.path.join(index_path, CURRENT))) \
            or os.path.exists(os.path.join(index_path, CONFIG)):  # (a link a person made to an index: the log inside)
        return legacy
    return os.path.join(index_path, QUERY_LOG)


def log_time(when: datetime.datetime | None = None) -> str:
    """A time as the log stores it (UTC, ISO 8601 to the millisecond), so times compare as strings."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    return when.astimezone(datetime.timezone.utc).isoformat(timespec="milliseconds")


def parse_since(since: str | None) -> str | None:
    """A ``since`` bound as the log's times are written: '2026-11-01', '2026-11-01T08:00' (UTC) or
    with an offset ('...T08:00+02:00'). Anything else is an InvalidOptionError (it used to be
    compared as a string, so 'yesterday' silently matched nothing)."""
    if since is None:
        return None
    try:
        when = datetime.datetime.fromisoformat(str(since).strip())
        return log_time(when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc))
    except (ValueError, OverflowError):  # 9999-12-31T23:59-01:00 is past the last UTC time Python has
        raise InvalidOptionError(f"since must be a date or time like 2026-11-01 or 2026-11-01T08:00 (UTC, or "
                                 f"with an offset such as +02:00) between the years 1 and 9999, got {since!r}") from None


def log_answered(qlog: "QueryLog", results: list[Any], mode: str, channel: str) -> list[int]:
    """Log answered queries, where a failure to log (a full disk, a log locked past its timeout) is a
    warning: the answers were found and are returned all the same. Returns the rows' ids ([] then)."""
    try:
        return qlog.record(results, mode, channel)
    except sqlite3.Error as exc:
        log.warning("query log %s: %d queries not logged (%s)", qlog.path, len(results), exc)
        return []


_ENDS = " ?!.,;:。？！，、；：…"  # what a query may end with that reads the same without it
_BARE = f"lower(trim(query, '{_ENDS}'))"  # SQL: a logged query without its case and end punctuation


def _file_of(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _read_only(path: str) -> sqlite3.Connection:
    """The log opened read only; where SQLite cannot make its shared-memory file beside it (a read-only
    mount, a folder of another user), as an unchanging file (no writer can reach it through this mount)."""
    from urllib.parse import quote

    def opened(flags: str) -> sqlite3.Connection:
        conn = sqlite3.connect(f"file:{quote(path)}?{flags}", uri=True, check_same_thread=False)
        try:
            conn.execute("select count(*) from sqlite_master").fetchone()
        except sqlite3.OperationalError:
            conn.close()
            raise
        return conn

    try:
        return opened("mode=ro")
    except sqlite3.OperationalError:
        conn = opened("mode=ro&immutable=1")
    if os.path.exists(path + "-wal") and os.path.getsize(path + "-wal"):
        log.warning("%s-wal holds queries not yet in %s; read only here, they are not shown", path, path)
    return conn


class QueryLog:
    """Append-only log of queries (thread-safe: one connection, one lock, WAL; several processes,
    such as servers of one index, write it each in turn)."""

    TIMEOUT = 10.0  # seconds a write waits for another process's
    FOLLOW = 1.0  # seconds between two checks that the log file is still the one at its path

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        deadline = time.monotonic() + self.TIMEOUT
        with self._lock:
            while True:  # two processes making a new log at once (two workers started together): one found it
                try:  # locked while the other set it up, and logged nothing for its whole life
                    self._open()
                    return
                except (sqlite3.OperationalError, sqlite3.IntegrityError) as exc:  # locked, or set up by the other
                    said = str(exc)  # meanwhile ("table queries already exists", its migration recorded): again
                    if not any(s in said for s in ("locked", "already exists", "_sqlite_migrations")) \
                            or time.monotonic() > deadline:
                        raise
                    self._conn.close()
                    time.sleep(0.05)

    def _open(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        try:
            self._conn = sqlite3.connect(sqlite_file(self.path), check_same_thread=False, timeout=self.TIMEOUT)
            self._conn.execute("pragma journal_mode=wal")
        except sqlite3.OperationalError as exc:
            if not os.path.isfile(self.path) or "locked" in str(exc):
                raise
            self._conn = _read_only(self.path)  # a read-only mount or folder: read it as it is (writes say why not)
        self.db = Database(self._conn)
        try:
            migrations.apply(self.db)
        except sqlite3.OperationalError as exc:  # a log written by an older faqsearch, in a folder read only here
            if "readonly" not in str(exc):
                raise
            log.warning("the query log %s is read only here and from an older faqsearch: read as it is", self.path)
        self._confidences = "confidence" in self.db["queries"].columns_dict  # older logs lack them
        self._file, self._checked, self.moved = _file_of(self.path), time.monotonic(), False

    def _follow(self) -> bool:
        """Before a write: whether the file at the log's path is still the one open. Moved away (to rotate it)
        or deleted, the open one gets every row (a checkpoint: its newest rows were in the -wal file, so a
        moved log was empty, and the next process's open of a new log truncated them) and this process
        logs no more: starting a new file at the path would share the -wal file's name with other processes
        still writing the moved one, and bring back the folder of an index renamed or dropped. Checked at
        most once a second; the next start opens a new log."""
        if self.moved or time.monotonic() - self._checked < self.FOLLOW:
            return not self.moved
        self._checked = time.monotonic()
        if self._file is None or _file_of(self.path) == self._file:
            return True
        try:
            self._conn.execute("pragma wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass
        self.moved = True
        log.warning("the query log %s was moved away or deleted: every row logged until now is in that file; this "
                    "process logs no more queries until it starts again (then in a new log)", self.path)
        return False

    @classmethod
    def for_index(cls, index_path: str) -> "QueryLog":
        return cls(log_path(index_path))

    @classmethod
    def open_or_none(cls, index_path: str) -> "QueryLog | None":
        """The index's log, or None with a warning where it cannot be opened (a folder or log file
        this process may not write): queries are answered all the same, unlogged."""
        try:
            return cls.for_index(index_path)
        except (sqlite3.Error, OSError) as exc:
            log.warning("the query log of %s cannot be opened (%s); queries are not logged", index_path, exc)
            return None

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One write transaction that holds SQLite's write lock from its start (BEGIN IMMEDIATE): a
        deferred one that reads first cannot wait for another process's write (SQLite answers 'database
        is locked' at once rather than risk a deadlock), so servers sharing a log lost records."""
        with self._lock:
            if not self._follow():
                raise sqlite3.OperationalError(f"the query log {self.path} was moved away or deleted while open")
            self._conn.execute("begin immediate")  # waits up to the connection's timeout for the lock
            try:
                yield
            except BaseException:
                self._conn.execute("rollback")
                raise
            self._conn.execute("commit")

    def record(self, results: Iterable[Any], mode: str, channel: str = "api") -> list[int]:
        """Log results (``faqsearch.engine.Result``); returns their row ids."""
        now = log_time()
        rows = []
        for r in results:
            top = r.answers[0] if r.answers else getattr(r, "nearest", None)
            top = top.public() if hasattr(top, "public") else top  # never a copy of another user's query
            rows.append({"time": now, "query": r.query, "mode": mode, "channel": channel,
                         "top_faq": top.faq_id if top else None, "top_question": top.question if top else None,
                         "score": r.best_score, "threshold": r.threshold, "answered": int(bool(r.answers)),
                         "feedback_faq": None, **({"confidence": getattr(top, "confidence", None),
                                                   "min_confidence": getattr(r, "min_confidence", None)}
                                                  if self._confidences else {})})
        if not rows or self.moved:  # (said once, when it was found moved)
            return []
        with self._writing():
            start = self.db.execute("select coalesce(max(id), 0) from queries").fetchone()[0] + 1
            for i, row in enumerate(rows):
                row["id"] = start + i
            self.db["queries"].insert_all(rows)
        return [row["id"] for row in rows]

    def _rows(self, sql: str, args: list[Any]) -> list[dict[str, Any]]:
        with self._lock:
            cur = self.db.execute(sql, args)
            cols = [c[0] for c in cur.description]
            rows = [dict(zip(cols, r)) for r in cur.fetchall()]
        for row in rows:  # stored as 0/1: JSON says true/false, as a Result does
            if row.get("answered") is not None:
                row["answered"] = bool(row["answered"])
        return rows

    def recent(self, limit: int = 50, offset: int = 0, unanswered: bool = False,
               since: str | None = None) -> list[dict[str, Any]]:
        """Logged queries, newest first (``since``: logged at or after it, see :func:`parse_since`)."""
        since = parse_since(since)
        where = [w for w, on in (("answered = 0", unanswered), ("time >= ?", since)) if on]
        return self._rows("select * from queries" + (" where " + " and ".join(where) if where else "")
                          + " order by id desc limit ? offset ?", ([since] if since else []) + [limit, offset])

    def text_of(self, query_id: int) -> str | None:
        """The query logged as row ``query_id`` (as it was answered: cleaned), None where there is none."""
        rows = self._rows("select query from queries where id = ?", [int(query_id)])
        return rows[0]["query"] if rows else None

    def mark_feedback(self, query_id: int | None, query: str, faq_id: str) -> None:
        """Record that a query (this row, and every row with its text) was assigned to an FAQ."""
        self.mark_assigned([query], faq_id, query_id)

    def mark_assigned(self, texts: Iterable[str], faq_id: str, query_id: int | None = None) -> None:
        """Record that a person assigned these texts to an FAQ (feedback, approve): every row with one
        of them (and row ``query_id``) shows it as assigned, so gaps and other FAQs' suggestions skip them."""
        with self._writing():
            if query_id is not None:
                self.db.execute("update queries set feedback_faq = ? where id = ?", [faq_id, query_id])
            for text in texts:  # logged as asked: cleaned, as every query is before it is answered; its case and
                self.db.execute(  # end punctuation aside, as the index holds it ("Where is it?" marks "where is it")
                    f"update queries set feedback_faq = ? where {_BARE} = lower(trim(?, '{_ENDS}'))",  # (m003's index)
                    [faq_id, clean_text(text)])  # the latest assignment wins

    def clear_feedback(self, query: str, faq_id: str) -> None:
        """Undo :meth:`mark_assigned` for a query that was taken out of an FAQ again (unassign): every row
        assigned to that FAQ whose text reads as ``query`` (as unassign compares them: "外汇额度是多少？"
        takes out "外汇额度是多少")."""
        key = read_alike(query)
        with self._writing():
            rows = self.db.execute("select id, query from queries where feedback_faq = ?", [faq_id]).fetchall()
            ids = [i for i, text in rows if read_alike(text) == key]
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                self.db.execute(f"update queries set feedback_faq = null where id in ({','.join('?' * len(chunk))})",
                                chunk)

    def candidates(self, margin: float, since: str | None = None, limit: int = 20000, store: Any = None
                   ) -> list[dict[str, Any]]:
        """Unanswered and low-confidence queries without feedback, newest first: low-confidence is
        answered within ``margin`` of what decided and at most halfway from it to certain
        (:func:`faqsearch.gaps.low_bar`: the confidence's operating point where it decided, else the
        cosine threshold; rows logged before confidences were, by their cosine). With the index's
        ``store``, a query assigned to an FAQ that no longer holds it counts as without feedback
        (:func:`still_held`)."""
        since = parse_since(since)
        by_cosine = "score < min(threshold + ?, (threshold + 1) / 2)"
        low = (f"case when min_confidence is not null then coalesce(confidence < min(min_confidence + ?, "
               f"(min_confidence + 1) / 2), 1) else {by_cosine} end") if self._confidences else by_cosine
        kept = "confidence, min_confidence" if self._confidences else "null as confidence, null as min_confidence"
        sql = (f"select id, time, query, score, threshold, answered, top_faq, feedback_faq, {kept} from queries "
               f"where {'1' if store is not None else 'feedback_faq is null'} and (answered = 0 or score is null or {low})"
               + (" and time >= ?" if since else "") + " order by id desc limit ?")
        return unassigned(self._rows(sql, [margin] * (1 + self._confidences) + ([since] if since else []) + [limit]),
                          store)

    def distinct_unassigned(self, limit: int, store: Any = None) -> list[str]:
        """Up to ``limit`` distinct logged queries no person assigned to an FAQ (with ``store``: to an FAQ
        that still holds them), most recent first."""
        rows = self._rows("select query, max(id) as last, max(feedback_faq) as feedback_faq from queries "
                          f"{'' if store is not None else 'where feedback_faq is null '}"
                          "group by query order by last desc limit ?", [limit])
        return [r["query"] for r in unassigned(rows, store)]

    def delete_before(self, before: str) -> int:
        """Delete the queries logged before ``before`` (a retention policy), their text overwritten on disk
        (SQLite's secure delete) and the -wal file emptied, so no copy of them stays in the log's files;
        returns how many were deleted."""
        before = parse_since(before)
        with self._writing():
            self._conn.execute("pragma secure_delete = on")
            gone = self._conn.execute("delete from queries where time < ?", [before]).rowcount
        self._empty_wal()
        return int(gone)

    def delete_containing(self, text: str) -> int:
        """Delete the queries holding ``text`` in any case (a person's request to erase what they typed:
        their email, name or number), text overwritten on disk as :meth:`delete_before` does; a copy of
        it in another query's row (the question that matched, as logged before 2026-11-28) is cleared.
        Returns how many queries were deleted."""
        key = search_key(clean_text(text)) if isinstance(text, str) else ""
        if len(key.strip()) < 3:
            raise InvalidOptionError("give at least 3 characters of the text to delete the queries holding it")
        with self._writing():
            self._conn.create_function("search_key", 1, search_key, deterministic=True)
            self._conn.execute("pragma secure_delete = on")
            gone = self._conn.execute("delete from queries where instr(search_key(query), ?)", [key]).rowcount
            self._conn.execute("update queries set top_question = null where instr(search_key(top_question), ?)", [key])
        self._empty_wal()
        return int(gone)

    def _empty_wal(self) -> None:
        with self._lock:
            busy = self._conn.execute("pragma wal_checkpoint(TRUNCATE)").fetchone()[0]
        if busy:  # another process reads the log now: the -wal file keeps a copy until a later checkpoint
            log.warning("the deleted queries' text stays in %s-wal until the processes reading the log now are done "
                        "(run it again later to empty it)", self.path)

    def count(self, since: str | None = None) -> dict[str, int]:
        """Queries logged (at or after ``since``), answered and not."""
        since = parse_since(since)
        with self._lock:
            total, answered = self.db.execute("select count(*), coalesce(sum(answered), 0) from queries"
                                              + (" where time >= ?" if since else ""), [since] if since else []).fetchone()
        return {"total": int(total), "answered": int(answered), "unanswered": int(total - answered)}


def still_held(store: Any, pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """Of (query, FAQ id) assignments the log marks, those the index still holds: the FAQ is there and has
    a question that reads as the query. Removed, or edited without it (`update --replace`, `restore` of
    an older version), it no longer answers the query for the person who assigned it, and gaps and
    suggestions count the query as unassigned again."""
    by_faq: dict[str, set[str]] = {}
    for query, faq_id in pairs:
        by_faq.setdefault(faq_id, set()).add(query)
    held = set()
    for faq_id, queries in by_faq.items():
        faq = store.faq(faq_id)
        have = {read_alike(q["text"]) for q in faq["questions"]} if faq else set()
        held |= {(q, faq_id) for q in queries if read_alike(q) in have}
    return held


def held_marks(rows: list[dict[str, Any]], store: Any) -> list[dict[str, Any]]:
    """The rows, each one's ``feedback_faq`` set to None where that FAQ no longer holds its query (:func:`still_held`)."""
    held = still_held(store, {(r["query"], r["feedback_faq"]) for r in rows if r.get("feedback_faq") is not None})
    return [{**r, "feedback_faq": r.get("feedback_faq") if (r["query"], r.get("feedback_faq")) in held else None}
            for r in rows]


def unassigned(rows: list[dict[str, Any]], store: Any, keep: str | None = None) -> list[dict[str, Any]]:
    """Rows without an assignment the index still holds (all rows' ``feedback_faq`` None without a store),
    each row's ``feedback_faq`` set to None where its FAQ no longer holds it (:func:`held_marks`); those
    assigned to FAQ ``keep`` stay, with their mark (its own suggestions)."""
    if store is None:
        return rows
    return [r for r in held_marks(rows, store) if r["feedback_faq"] is None or r["feedback_faq"] == keep]
