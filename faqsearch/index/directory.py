"""The index directory on disk: one real directory, its versions, the writers' lock and the commit.

An index at ``indexes/NAME`` is a directory::

    NAME/CURRENT         the name of the live version ("v00000007"), replaced by one atomic rename
    NAME/LOCK            the writers' lock (flock); readers never take it
    NAME/queries.db      the query log of `faqsearch serve` (outlives versions)
    NAME/v00000007/      a version: config.json, store.db, index.faiss, whitening.npz, vectors.npy, ...

as LevelDB's CURRENT or Lucene's segments_N: a writer builds a new version in ``v<G>.tmp-<random>``,
renames it to ``v<G>`` (G its generation) and commits by replacing CURRENT (the file and the
directory fsynced), so readers see the old version or the new one, never a mix and never nothing.
A small edit commits inside the live version instead, by replacing its ``config.json`` the same way.
The previous versions stay, the newest ``KEEP_VERSIONS`` of them and the undo points (faqsearch/versions.py restores one),
and a kept version never changes: the files written in place (store.db) are never shared by links.
:class:`Writer` alone does both, with one generation rule (every commit is the previous generation
plus one) and one fsync policy. Since nothing lives outside ``NAME/``, ``cp -a``, ``tar`` and
``rsync -a`` of it give an independent, working index.

Two older layouts open as they are and move to this one on their first write, crash-safely: a plain
directory holding the version's files itself, and a symbolic link ``NAME`` to a sibling version
``.NAME.<label>-<random>`` (locked through ``.NAME.lock``). Leftovers of killed writers (half-built
versions, versions that lost the switch, a migration cut short) are removed by the next writer,
under the lock, never by a reader, and only ever names that faqsearch writes.
"""
from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
from dataclasses import replace
from typing import Any

from ..defaults import KEEP_UNDO_POINTS, KEEP_VERSIONS, PHRASING_EDITS
from ..errors import IndexFormatError, IndexNotFoundError, IndexPathError
from ..files import FileLock, atomic_write, fsync_dir, fsync_file, link_or_copy, now, storage_error, umask, unshare
from .format import (BUILDING as _BUILDING, CONFIG, CURRENT, LOCK, OWN_FILES as _OWN_FILES, SQLITE_SIDE, TMP,
                     QUERY_LOG, STORE, VERSION_NAME, WHITENING, Config, index_argument, legacy_query_log,
                     read_json, version_name)
from .address import remote_of
from .config import current_names, foreign_entries, read_current
from .remote import RemoteWriting, sync

log = logging.getLogger(__name__)

# siblings of the symbolic-link layout: versions, temporary links, a migration's new directory
_SAID: set[tuple[str, str]] = set()  # warnings given, by (index, version)
_LEGACY_LABEL = re.compile(r"^(?:building|edit|tuning|old|v|link|oldlink|migrate)-[A-Za-z0-9_]+$")


# ---- reading the layout --------------------------------------------------------------------------
def _siblings(path: str) -> list[str]:
    """Sibling directories of the symbolic-link layout (``.NAME.<label>-<random>``)."""
    parent, name = os.path.split(path)
    prefix = f".{name}."
    try:
        entries = os.listdir(parent)
    except (FileNotFoundError, NotADirectoryError):  # (a path under a file: no index, nor siblings)
        return []
    return [os.path.join(parent, e) for e in entries
            if e.startswith(prefix) and _LEGACY_LABEL.match(e[len(prefix):])]


def _generation_of(version: str) -> int:
    try:
        return int(read_json(version).get("generation", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return -1


def newest_version(directory: str) -> str | None:
    """The version of highest generation in an index directory, None without one. Every ``vG`` is a
    whole committed version, so with CURRENT lost it is the one CURRENT named (docs/reliability.md)."""
    entries = os.listdir(directory) if os.path.isdir(directory) else []
    found = [(_generation_of(os.path.join(directory, e)), e) for e in entries if VERSION_NAME.match(e)]
    return os.path.join(directory, max(found)[1]) if found and max(found)[0] >= 0 else None


def layout(path: str) -> str:
    """'current' (this layout), 'plain' or 'link' (older ones), 'empty' (a directory of ours with no
    committed version, or an empty one), 'none' (nothing there) or 'foreign' (not ours)."""
    if os.path.islink(path):
        target = os.path.realpath(path)
        parent, name = os.path.split(path)
        base = os.path.basename(target)
        ours = (os.path.dirname(target) == os.path.realpath(parent) and base.startswith(f".{name}.")
                and _LEGACY_LABEL.match(base[len(name) + 2:]) is not None)
        if ours and os.path.isdir(target):
            return "link"
        return "current" if current_names(target, strict=True) == "ours" else "foreign"  # a person's link to an index
    if not os.path.lexists(path):
        return "none"
    if not os.path.isdir(path):
        return "foreign"
    entries = os.listdir(path)
    if foreign_entries(path):  # ours for certain, whatever a person or a tool put beside it (a note, a rotated log:
        return "current" if CURRENT in entries and current_names(path) == "ours" else "foreign"  # writers leave it)
    if CURRENT in entries:
        if current_names(path) == "other":
            return "foreign"
        return "current"
    if CONFIG in entries:
        return "plain"
    return "empty"


def resolve(path: str, sync_remote: bool = True) -> str:
    """The directory holding the live version of the index at ``path`` (for readers).

    A plain directory of the oldest layout is its own version; a link is followed; with nothing at
    the path, a migration or a first switch that was cut short is found among the siblings. The cache
    of an index in Milvus is first brought to Milvus' newest commit (faqsearch/index/remote.py), unless
    ``sync_remote`` is False: then it is the version this machine last took from there."""
    remote = remote_of(path) if sync_remote else None
    if remote is not None:
        sync(path, remote)
    kind = layout(path)
    if kind == "current":
        version = read_current(path)
        if version is None or not os.path.isdir(version):
            raise IndexFormatError(f"index {path}: {CURRENT} names a version that is missing. Restore the index "
                                   "directory from a backup, or rebuild it with: faqsearch ingest CORPUS --force")
        return version
    if kind in ("plain", "link"):
        return os.path.realpath(path)
    if kind == "none":
        moved = [s for s in _siblings(path) if os.path.basename(s).split(".", 2)[-1].startswith("migrate-")
                 and read_current(s) is not None]
        if moved:  # a migration renamed the link away and was killed before its directory took the name
            return read_current(max(moved, key=os.path.getmtime))  # type: ignore[return-value]
        complete = [v for v in _siblings(path) if os.path.isdir(v) and _generation_of(v) >= 0]
        if complete:
            best = max(complete, key=lambda v: (_generation_of(v), os.path.getmtime(v)))
            log.warning("no index at %s; using the last complete version %s", path, best)
            return best
        raise IndexNotFoundError(f"no index at {path}. Create one with: faqsearch ingest CORPUS.csv "
                                 f"--index {index_argument(path)}")
    if kind == "empty":
        newest = newest_version(path)  # CURRENT lost: the next writer writes it again
        if newest is not None:
            if (path, newest) not in _SAID:  # once a process: every open, reload check and stamp resolves it
                _SAID.add((path, newest))
                log.warning("index %s has no %s; answering from its newest version %s", path, CURRENT, newest)
            return newest
        if remote is not None:
            raise IndexNotFoundError(f"no index at {remote.address} yet. Create one with: faqsearch ingest CORPUS.csv "
                                     f"--index {remote.address}")
        why = "the folder is empty" if not os.listdir(path) else "an ingest there did not finish"
        raise IndexNotFoundError(f"no index at {path} yet ({why}). Create one with: "
                                 f"faqsearch ingest CORPUS.csv --index {index_argument(path)}")
    raise IndexFormatError(f"{path} is not a faqsearch index; re-run faqsearch ingest with another --index")


def stamp(path: str) -> tuple | None:
    """Changes whenever a writer commits (a new CURRENT, or a config replaced in place): what a
    reader compares to know that it should reload. None when nothing is readable there."""
    try:
        version = resolve(path)
        st = os.stat(os.path.join(version, CONFIG))
    except (OSError, IndexFormatError, IndexNotFoundError):
        return None
    return (version, st.st_ino, st.st_mtime_ns, st.st_size)


def check_target(path: str) -> None:
    """Refuse to build at ``path`` unless it names nothing, an empty directory or a faqsearch index:
    building replaces what is there, and only an index of ours may be replaced. Called before any
    encoding."""
    kind = layout(path)
    if kind != "foreign":
        if kind in ("plain",):
            _check_own_config(path, path)
        elif kind == "link":
            _check_own_config(path, os.path.realpath(path))
        return
    if os.path.islink(path):
        what = f"is a symbolic link to {os.path.realpath(path)}, not an index faqsearch made"
    elif not os.path.isdir(path):
        what = "is a file, not an index directory"
    elif not (shown := foreign_entries(path)):  # only names of ours: a CURRENT naming a folder of someone else's
        what = f"has a {CURRENT} naming a folder without faqsearch's {CONFIG}, so it is not a faqsearch index"
    else:
        what = f"holds files that are not a faqsearch index ({', '.join(shown[:5])}{' ...' if len(shown) > 5 else ''})"
    raise IndexPathError(f"{path} {what}; faqsearch replaces only its own indexes. Choose another --index (a "
                         "new name or an empty directory), or move that away yourself")


def _check_own_config(path: str, directory: str) -> None:
    try:
        config = read_json(directory)
    except (OSError, ValueError):  # our files with a damaged config (rebuilding is the fix), or someone else's
        config = None if os.path.exists(os.path.join(directory, WHITENING)) else []
    if config is not None and (not isinstance(config, dict) or "format_version" not in config):
        raise IndexPathError(f"{path} holds a {CONFIG} that faqsearch did not write; faqsearch replaces only its "
                             "own indexes. Choose another --index, or move that away yourself")


def _mkdir(path: str) -> None:
    """A directory with the permissions the umask gives (a service running as another user reads it)."""
    os.mkdir(path, 0o777 & ~umask())


def _remove(path: str) -> None:
    """Remove a file or a directory (a version): a link is removed, never what it points to."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


# ---- the writer ------------------------------------------------------------------------------------
class Writer:
    """The one writer of an index directory: holds the lock, starts from the latest committed
    version, and alone commits (a new version, or a config replaced inside the live one).

    ``with Writer(path) as w:`` takes the lock (older layouts are moved to this one first), removes
    what killed writers left, and reads the committed config (``w.config``, None for a new index).
    Then ``w.new_version()`` gives a directory to build in and ``w.commit(config, version)`` makes
    it live; ``w.commit(config)`` commits in place. On any failure inside the block nothing is
    committed and the half-built directory is removed.
    """

    def __init__(self, path: str, made_by: str | None = None):
        self.path = os.path.abspath(path)
        self.made_by = made_by  # what the commits record as having made the version (`faqsearch versions`)
        self._locks: list[FileLock] = []
        self._building: list[str] = []
        self._staged: dict[str, dict[str, dict[str, Any]]] = {}  # records computed by stage(), per version
        self._created = False
        self.version: str | None = None
        self.config: Config | None = None
        self._remote: RemoteWriting | None = None  # an index in Milvus: its lease, taken before the local lock

    # -- the lock, migration and repair
    def __enter__(self) -> "Writer":
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            remote = remote_of(self.path)
            self._remote = RemoteWriting(self.path, remote) if remote is not None else None
            self._enter()
        except BaseException as exc:
            self._let_go()
            mapped = storage_error(exc, self.path)
            if mapped is not None:
                raise mapped from exc
            raise
        return self

    def _enter(self) -> None:
        while True:
            kind = layout(self.path)
            if kind in ("foreign", "plain", "link"):
                check_target(self.path)  # a folder that is not ours, before anything in or beside it is touched
            if kind in ("current", "empty"):
                self._locks.append(FileLock(os.path.join(self.path, LOCK)).acquire())
                if layout(self.path) in ("current", "empty"):
                    break
                self._release()
                continue
            if kind == "none" and self._legacy_source() is None:
                try:
                    _mkdir(self.path)
                    self._created = True
                except FileExistsError:
                    pass
                continue
            # an older layout (or a move to this one that was cut short): under the older lock, move it
            legacy = FileLock(os.path.join(os.path.dirname(self.path), f".{os.path.basename(self.path)}.lock"))
            self._locks.append(legacy.acquire())
            kind = layout(self.path)
            if kind in ("plain", "link") or (kind == "none" and self._legacy_source() is not None):
                self._migrate(kind)
                break
            self._release()
        if self._remote is not None:
            self._remote.sync()
        self._repair()
        version = read_current(self.path)
        if version is not None:
            from .config import load_config

            self.version = version
            self.config = load_config(version, self.path)

    def _migration_leftover(self) -> str | None:
        moved = [s for s in _siblings(self.path) if os.path.basename(s).split(".", 2)[-1].startswith("migrate-")
                 and read_current(s) is not None]
        return max(moved, key=os.path.getmtime) if moved else None

    def _legacy_source(self) -> str | None:
        """With nothing at the path: a cut-short move's new directory, else the last complete version
        of the link layout (its first switch was cut short), else None (a new index)."""
        leftover = self._migration_leftover()
        if leftover is not None:
            return leftover
        complete = [v for v in _siblings(self.path) if os.path.isdir(v) and not os.path.islink(v)
                    and _generation_of(v) >= 0]
        return max(complete, key=lambda v: (_generation_of(v), os.path.getmtime(v))) if complete else None

    def _migrate(self, kind: str) -> None:
        """Move an index of an older layout to this one; every step leaves something readers open."""
        if kind == "plain":
            self._locks.append(FileLock(os.path.join(self.path, LOCK)).acquire())
            for e in os.listdir(self.path):  # a migration killed before its CURRENT was written
                if VERSION_NAME.match(e) or _BUILDING.match(e):
                    _remove(os.path.join(self.path, e))
            gen = max(_generation_of(self.path), 0)
            self._link_version(self.path, self.path, gen)
            atomic_write(os.path.join(self.path, CURRENT), (version_name(gen) + "\n").encode())
            log.info("moved index %s to the directory layout (version %s)", self.path, version_name(gen))
            return  # the old top-level files are removed by _repair
        parent, name = os.path.split(self.path)
        target = self._migration_leftover() if kind == "none" else None
        if target is None:
            old = os.path.realpath(self.path) if kind == "link" else self._legacy_source()
            for s in _siblings(self.path):  # a migration killed before the link was moved away
                if os.path.basename(s).split(".", 2)[-1].startswith("migrate-"):
                    _remove(s)
            target = os.path.join(parent, f".{name}.migrate-{secrets.token_hex(4)}")
            _mkdir(target)
            self._locks.append(FileLock(os.path.join(target, LOCK)).acquire())
            gen = max(_generation_of(old), 0)
            self._link_version(old, target, gen)
            atomic_write(os.path.join(target, CURRENT), (version_name(gen) + "\n").encode())
            if kind == "link":
                os.replace(self.path, os.path.join(parent, f".{name}.oldlink-{secrets.token_hex(4)}"))
        else:
            self._locks.append(FileLock(os.path.join(target, LOCK)).acquire())
        os.rename(target, self.path)  # readers of the moment between the two renames find ``target``
        fsync_dir(parent)
        log.info("moved index %s to the directory layout", self.path)

    def _link_version(self, src: str, directory: str, gen: int) -> None:
        tmp = os.path.join(directory, f"{version_name(gen)}{TMP}-{secrets.token_hex(4)}")
        _mkdir(tmp)
        for e in os.listdir(src):
            if _OWN_FILES.match(e) and not e.endswith((TMP, *SQLITE_SIDE)):
                link_or_copy(os.path.join(src, e), os.path.join(tmp, e))
        fsync_dir(tmp)
        os.rename(tmp, os.path.join(directory, version_name(gen)))
        fsync_dir(directory)

    def _repair(self) -> None:
        """Remove what killed writers left: half-built versions and those that lost the switch (not the kept, older ones), a
        stale CURRENT.tmp, the old top-level files of a migrated plain directory, the siblings of the link layout."""
        current = read_current(self.path)
        if current is None and (current := newest_version(self.path)) is not None:  # CURRENT lost: named again
            log.warning("index %s had no %s; it names the newest version %s again", self.path, CURRENT, current)
            atomic_write(os.path.join(self.path, CURRENT), (os.path.basename(current) + "\n").encode())
        for e in os.listdir(self.path):
            full = os.path.join(self.path, e)
            if _BUILDING.match(e) or e == f"{CURRENT}{TMP}":
                _remove(full)
            elif VERSION_NAME.match(e) and (current is None or _number(e) > _number(current)):
                _remove(full)
            elif current is not None and _OWN_FILES.match(e):
                _remove(full)
        for s in _siblings(self.path):
            _remove(s)
        legacy_lock = os.path.join(os.path.dirname(self.path), f".{os.path.basename(self.path)}.lock")
        if os.path.exists(legacy_lock) and layout(self.path) == "current":
            _remove(legacy_lock)
        legacy_log = legacy_query_log(self.path)
        if os.path.exists(legacy_log) and layout(self.path) == "current" and not os.path.exists(os.path.join(
                self.path, QUERY_LOG)) and not any(os.path.exists(legacy_log + side) for side in SQLITE_SIDE):  # unused
            os.rename(legacy_log, os.path.join(self.path, QUERY_LOG))  # inside, it travels with a copy (cp -a NAME/)

    def _release(self) -> None:
        for lock in reversed(self._locks):
            lock.release()
        self._locks = []

    def _let_go(self) -> None:
        """The local locks, then the lease of an index in Milvus."""
        self._release()
        if self._remote is not None:
            self._remote.close()
            self._remote = None

    def __exit__(self, exc_type, exc, tb) -> None:
        for tmp in list(self._building):
            _remove(tmp)
        if exc_type is not None and self._created and self.version is None:
            # a first build that failed: leave nothing behind where there was nothing
            _remove(os.path.join(self.path, LOCK))
            try:
                os.rmdir(self.path)
            except OSError:
                pass
        self._let_go()
        mapped = storage_error(exc, self.path) if exc is not None else None
        if mapped is not None:
            raise mapped from exc

    def check_lease(self) -> None:
        """An index in Milvus: raise unless this writer still holds the lease (before each write there)."""
        if self._remote is not None:
            self._remote.lease.check()

    # -- committing
    @property
    def generation(self) -> int:
        return int(self.config.generation or 0) if self.config is not None else 0

    def new_version(self) -> str:
        """An empty directory to build the next version in (removed unless committed)."""
        tmp = os.path.join(self.path, f"{version_name(self.generation + 1)}{TMP}-{secrets.token_hex(4)}")
        _mkdir(tmp)
        self._building.append(tmp)
        return tmp

    def stage(self, config: Config | dict[str, Any], version: str) -> None:
        """Write ``config`` into a version being built, as :meth:`commit` will (generation G+1), so the
        version can be opened and measured before it is committed; nothing becomes live."""
        from .config import version_records

        staged = replace(_typed(config), generation=self.generation + 1, files=version_records(version, self._staged))
        atomic_write(os.path.join(version, CONFIG), _config_bytes(staged))

    def commit(self, config: Config | dict[str, Any], version: str | None = None,
               records: dict[str, dict[str, Any]] | None = None) -> str:
        """Commit ``config`` as generation G+1: written into ``version`` (from :meth:`new_version`),
        which then becomes live, or, with no ``version``, into the live version in place. Files of a
        new version are fsynced and recorded (size, sample, SHA-256) unless ``records`` gives them.
        Returns the live version directory."""
        from .config import version_records

        config = _typed(config)
        if version is not None:
            config = config.without("edited")  # a new version: unedited
        modified = now()
        stamp = {"by": self.made_by or "edit", "at": modified}
        if version is not None:  # undo points: kept past the newest KEEP_VERSIONS, listed by each version in turn
            points = list(((self.config.made if self.config is not None else None) or {}).get("undo_points") or ())
            if self.version is not None and self.made_by not in PHRASING_EDITS:  # this edit drops or rewrites
                points.append(_number(self.version))
            stamp["undo_points"] = points[-KEEP_UNDO_POINTS:]
        else:  # every kind of edit made inside the version, for what a restore of an older one leaves behind
            before = (self.config.edited if self.config is not None else None) or {}
            kinds = [*(before.get("kinds") or [before.get("by")]), stamp["by"]]
            stamp["kinds"] = list(dict.fromkeys(k for k in kinds if isinstance(k, str)))
        config = replace(config, generation=self.generation + 1, modified=modified,
                         **{"made" if version else "edited": stamp})
        if version is None:
            if self.version is None:
                raise IndexNotFoundError(f"no index at {self.path} to edit")
            if self._remote is not None:
                self._remote.publish(config.generation, os.path.basename(self.version), self.version,
                                     _config_bytes(config))
            atomic_write(os.path.join(self.version, CONFIG), _config_bytes(config))
            self.config = config
            return self.version
        unshare(os.path.join(version, STORE))  # written in place later: never a link to a kept version
        files = version_records(version, self._staged, records)
        for name in files:
            fsync_file(os.path.join(version, name))
        if os.path.exists(os.path.join(version, STORE)):
            fsync_file(os.path.join(version, STORE))
        config = replace(config, files=files)
        atomic_write(os.path.join(version, CONFIG), _config_bytes(config))
        final = os.path.join(self.path, version_name(config.generation))
        if self._remote is not None:
            self._remote.publish(config.generation, os.path.basename(final), version, _config_bytes(config))
        if os.path.lexists(final):
            _remove(final)
        os.rename(version, final)
        self._building.remove(version)
        fsync_dir(self.path)
        atomic_write(os.path.join(self.path, CURRENT), (version_name(config.generation) + "\n").encode())
        self.version, self.config = final, config
        older = sorted(_number(e) for e in os.listdir(self.path) if VERSION_NAME.match(e) and _number(e) < _number(final))
        keep = set((config.made or {}).get("undo_points") or ())  # the undo of the latest removes, updates...
        for g in older[:max(0, len(older) - KEEP_VERSIONS)]:  # after the switch; readers keep their open files
            if g not in keep:
                _remove(os.path.join(self.path, version_name(g)))
        return final


def _number(version: str) -> int:
    return int(os.path.basename(version)[1:])


def _typed(config: Config | dict[str, Any]) -> Config:
    return config if isinstance(config, Config) else Config.from_dict(config)


def _config_bytes(config: Config | dict[str, Any]) -> bytes:
    """config.json's bytes (:meth:`Config.to_json`), for the commit and the stage."""
    return _typed(config).to_json()


remove_version = _remove
