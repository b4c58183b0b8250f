"""An index that lives in Milvus, opened by its address: ``milvus://HOST:PORT/NAME`` (or
``milvus+https://`` for TLS; credentials from ``FAQSEARCH_MILVUS_TOKEN``).

Every machine keeps a local cache of it, an ordinary index directory under
``$FAQSEARCH_HOME/.milvus/HOST_PORT/NAME`` (``./indexes`` by default) whose :data:`REMOTE` file holds
the address; the truth is in Milvus (:mod:`faqsearch.backends.milvus.shared`). Readers bring the
cache to Milvus' newest commit whenever they look for a new version (:func:`sync`, at most every
:data:`POLL_S`), so a replica answers from another's edit within about a second. A writer takes the
index's lease in Milvus first, brings its cache up to date under the local lock, and publishes each
commit to Milvus before it makes it live locally (:class:`RemoteWriting`).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import shutil
import threading
import time
from typing import Any

from ..errors import ChangedMeanwhileError, FAQSearchError, IndexNotFoundError, StorageError, said
from ..files import FileLock, atomic_write, fsync_dir
from .address import Remote
from .format import CONFIG, CURRENT, LOCK, TMP, VERSION_NAME

log = logging.getLogger(__name__)

POLL_S = 0.25  # a reader asks Milvus for its newest commit at most this often
_KEEP_LOCAL = 3  # versions a cache keeps (readers of older ones hold their files open)
_polled: dict[str, float] = {}
_poll_lock = threading.Lock()


def _local(path: str) -> tuple[int | None, str | None]:
    """(generation, SHA-256 of config.json) of the cache's live version; (None, None) without one."""
    try:
        with open(os.path.join(path, CURRENT), encoding="utf-8") as fh:
            version = fh.read().strip()
        with open(os.path.join(path, version, CONFIG), "rb") as fh:
            data = fh.read()
        return int(json.loads(data).get("generation", 0)), hashlib.sha256(data).hexdigest()
    except (OSError, ValueError, TypeError, AttributeError):
        return None, None


def sync(path: str, remote: Remote, force: bool = False, locked: bool = False) -> None:
    """Bring the cache at ``path`` to Milvus' newest commit (at most every :data:`POLL_S` unless
    ``force``): the one whose config.json differs from the cache's (a new generation, or the index
    made again from scratch). A reader does it only when no local writer holds the cache (it tries
    again at its next look) unless it has no version at all; a writer (``locked``) does it under the
    lock it holds. A reader that cannot reach Milvus keeps answering from the version it has."""
    if not force:
        with _poll_lock:
            if time.monotonic() - _polled.get(path, 0.0) < POLL_S:
                if path in _gone:  # said until Milvus has the index again, between polls too
                    raise IndexNotFoundError(_gone[path])
                return
            _polled[path] = time.monotonic()
    try:
        _sync(path, remote, locked)
        _gone.pop(path, None)
    except IndexNotFoundError as exc:
        _gone[path] = str(exc)
        raise
    except Exception as exc:  # noqa: BLE001 - Milvus unreachable or failing: a reader keeps its version
        if force or _local(path)[0] is None:
            raise _storage(remote, exc) from exc
        with _poll_lock:
            warn = time.monotonic() - _warned.get(path, -1e9) > 60
            if warn:
                _warned[path] = time.monotonic()
        if warn:
            log.warning("cannot read the newest commit of %s (%s); reading on with the version this machine "
                        "last took", remote.address, said(exc))


def _sync(path: str, remote: Remote, locked: bool) -> None:
    meta = _meta(remote)
    head = meta.head()
    generation, sha = _local(path)
    if head is None and generation is not None and not meta.exists():
        raise IndexNotFoundError(f"{remote.address} is no longer in Milvus (dropped?); this machine's copy at {path} "
                                 "is of no use without it. Build it again with: faqsearch ingest CORPUS.csv --index "
                                 f"{remote.address}")
    if head is None or head[1]["files"][CONFIG][0] == sha:
        return
    lock = None if locked else FileLock(os.path.join(path, LOCK)).acquire(block=generation is None)
    if lock is None and not locked:
        return
    try:
        if head[1]["files"][CONFIG][0] != _local(path)[1]:
            _install(path, head[1], meta.files(head[1]))
    finally:
        if lock is not None:
            lock.release()


def _storage(remote: Remote, exc: BaseException) -> FAQSearchError:
    """A failure of Milvus itself, said with the index's address (faqsearch's own errors pass as they are)."""
    if isinstance(exc, FAQSearchError):
        return exc
    return StorageError(f"{remote.address}: Milvus failed ({said(exc, 300)}); nothing was committed. Check that the server "
                        "runs and this machine reaches it, then retry")


_warned: dict[str, float] = {}
_gone: dict[str, str] = {}  # caches whose index Milvus no longer has, and what to say
_metas: dict[Remote, Any] = {}


def _meta(remote: Remote):
    """One metadata reader per index and process (the polls of every engine of it share it)."""
    from ..backends import shared_meta

    with _poll_lock:
        if remote not in _metas:
            _metas[remote] = shared_meta(remote.uri, remote.base)
        return _metas[remote]


def _install(path: str, manifest: dict[str, Any], files: dict[str, bytes]) -> None:
    """Make a commit read from Milvus the cache's live version (config.json last, or CURRENT last)."""
    version = manifest["version"]
    if not VERSION_NAME.match(version):
        raise IndexNotFoundError(f"Milvus index commit names {version!r}, not a version; rebuild the index")
    target = os.path.join(path, version)
    if os.path.isdir(target):  # a commit in place (the same version, a new config), or a re-made index
        for name in sorted(files, key=lambda n: n == CONFIG):
            atomic_write(os.path.join(target, name), files[name])
    else:
        tmp = f"{target}{TMP}-{secrets.token_hex(4)}"
        os.makedirs(tmp)
        for name, data in files.items():
            atomic_write(os.path.join(tmp, name), data)
        os.rename(tmp, target)
        fsync_dir(path)
    atomic_write(os.path.join(path, CURRENT), (version + "\n").encode())
    # then what is no longer of use: versions of an index since made again (numbered past the new
    # live one) and the oldest beyond a few (readers of those hold their files open)
    kept = sorted((e for e in os.listdir(path) if VERSION_NAME.match(e)), key=lambda e: int(e[1:]))
    newer = [e for e in kept if int(e[1:]) > int(version[1:])]
    older = [e for e in kept if int(e[1:]) <= int(version[1:])]
    for e in newer + older[:-_KEEP_LOCAL]:
        shutil.rmtree(os.path.join(path, e), ignore_errors=True)


class RemoteWriting:
    """What :class:`faqsearch.index.directory.Writer` does beside its local work for an index in
    Milvus: take the lease before the local lock, sync under it, publish every commit, let go."""

    def __init__(self, path: str, remote: Remote):
        from ..backends import writer_lease

        self.path, self.remote = path, remote
        try:
            self.lease = writer_lease(remote.uri, remote.base, remote.address).acquire()
        except Exception as exc:  # noqa: BLE001 - Milvus' own errors, said with the address
            raise _storage(remote, exc) from exc

    def sync(self) -> None:
        sync(self.path, self.remote, force=True, locked=True)

    def publish(self, generation: int, name: str, directory: str, config: bytes) -> None:
        """Before a commit is made live locally: the files of ``directory`` (with ``config`` as its
        config.json) into Milvus as version ``name`` of ``generation``, then the commit row."""
        try:
            self._publish(generation, name, directory, config)
        except Exception as exc:  # noqa: BLE001 - Milvus' own errors, said with the address
            raise _storage(self.remote, exc) from exc

    def _publish(self, generation: int, name: str, directory: str, config: bytes) -> None:
        self.lease.check()
        head = self.lease.meta.head()
        if head is not None and head[0] >= generation:  # compare, then set: never true while the lease holds
            raise ChangedMeanwhileError(f"{self.remote.address} moved to generation {head[0]} while this writer "
                                        f"worked on {generation - 1}; nothing was committed. Retry")
        files = {CONFIG: config}
        for entry in os.listdir(directory):
            full = os.path.join(directory, entry)
            if entry != CONFIG and os.path.isfile(full) and not entry.endswith(TMP):
                with open(full, "rb") as fh:
                    files[entry] = fh.read()
        self.lease.meta.publish(generation, name, files)

    def close(self) -> None:
        try:
            if not self.lease.lost:  # the holder alone removes old commits
                self.lease.meta.prune()
        except Exception as exc:  # noqa: BLE001 - pruning is housekeeping; the next writer does it
            log.debug("pruning the commits of %s failed: %s", self.remote.address, exc)
        self.lease.release()
