"""The SQLite connection of a store (:mod:`faqsearch.backends.embedded.store`): SQLite's reports of a damaged file,
found by any read or write past the open checks, become a :class:`faqsearch.errors.StoreDamagedError`
that names the index and the fix instead of a bare ``sqlite3.DatabaseError``; a call still using the
store when another thread closed the engine gets a :class:`faqsearch.errors.ClosedError`."""
from __future__ import annotations

import os
import re
import sqlite3
import weakref

from ...files import sqlite_file
from ...text import search_key


def connect(path: str, index: str | None = None, owner: object = None) -> "_Connection":
    """A connection to the store file ``path`` of the index ``index`` (default: found from the path),
    shared by threads (its callers serialise it), closed when ``owner`` is: a connection holds itself
    through its statement cache (CPython's sqlite3), so one merely dropped stayed open, with its file,
    until a garbage collection (each edit swaps a reader's store for a new version's)."""
    conn = sqlite3.connect(sqlite_file(path), check_same_thread=False, factory=_Connection)
    conn.create_function("search_key", 1, search_key, deterministic=True)  # a listing's "contains"
    conn.index = index or _index_of(path)
    if owner is not None:
        weakref.finalize(owner, conn.close)
    return conn


def copy_in_memory(conn: "_Connection", owner: object = None) -> "_Connection":
    """A copy in memory of ``conn``'s database, ``conn`` closed: what a reader upgrades when a store is
    older than this faqsearch (a reader never writes the file: one that did broke an older faqsearch's
    edits, and failed on a read-only index as "damaged"; the next write upgrades the file, under the lock)."""
    mem = sqlite3.connect(":memory:", check_same_thread=False, factory=_Connection)
    mem.create_function("search_key", 1, search_key, deterministic=True)
    mem.index = conn.index
    conn.backup(mem)
    conn.close()
    if owner is not None:
        weakref.finalize(owner, mem.close)
    return mem


def _checked(conn: "_Connection", call, *args):
    """``call(*args)``, where SQLite's report of a damaged file (SQLITE_CORRUPT, SQLITE_NOTADB: a bare
    DatabaseError; locks, a full disk and permissions are OperationalErrors, left as they are)
    becomes a StoreDamagedError naming the index and the fix."""
    try:
        return call(*args)
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.ProgrammingError) and "closed database" in str(exc):
            from ...errors import ClosedError  # FAQSearch.close() in another thread, while this call read

            raise ClosedError(f"the store of {conn.index} was closed while this call was using it (its FAQSearch "
                              "closed in another thread?); open the index again") from None
        if type(exc) is not sqlite3.DatabaseError and "Could not decode" not in str(exc):  # a damaged text too
            raise
        from ...index.config import damaged
        from ...errors import StoreDamagedError

        raise StoreDamagedError(damaged(conn.index, "store", str(exc))) from None


class _Cursor(sqlite3.Cursor):
    def execute(self, *args):
        return _checked(self.connection, super().execute, *args)

    def executemany(self, *args):
        return _checked(self.connection, super().executemany, *args)

    def fetchone(self):
        return _checked(self.connection, super().fetchone)

    def fetchmany(self, *args):
        return _checked(self.connection, super().fetchmany, *args)

    def fetchall(self):
        return _checked(self.connection, super().fetchall)

    def __next__(self):
        return _checked(self.connection, super().__next__)


class _Connection(sqlite3.Connection):
    """A store's connection: every cursor a :class:`_Cursor` (``execute`` included, which sqlite3
    runs on a plain cursor of its own otherwise)."""

    index = ""  # the index the store belongs to, for the message

    def cursor(self, factory=None):
        return _checked(self, super().cursor, factory or _Cursor)

    def execute(self, *args):
        return self.cursor().execute(*args)

    def executemany(self, *args):
        return self.cursor().executemany(*args)

    def __enter__(self):  # `with conn:` is a transaction, committed or rolled back at its end
        return _checked(self, super().__enter__)

    def __exit__(self, *exc):
        return _checked(self, super().__exit__, *exc)

    def commit(self):
        return _checked(self, super().commit)

    def rollback(self):
        return _checked(self, super().rollback)

    @property
    def in_transaction(self):
        return _checked(self, sqlite3.Connection.in_transaction.__get__, self)

    @property
    def total_changes(self):
        return _checked(self, sqlite3.Connection.total_changes.__get__, self)


def _index_of(path: str) -> str:
    """The index directory of a store file (its version directory's parent)."""
    directory = os.path.dirname(os.path.abspath(path))
    return os.path.dirname(directory) if re.match(r"^v\d{8,}(?:\.tmp-[0-9a-f]+)?$", os.path.basename(directory)) \
        else directory
