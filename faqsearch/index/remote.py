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

import json
import logging
import os
import secrets
import shutil
import threading
import time
from typing import Any

from ..errors import ChangedMeanwhileError, IndexNotFoundError
from ..files import FileLock, atomic_write, fsync_dir
from .address import Remote
from .format import CONFIG, CURRENT, LOCK, TMP, VERSION_NAME

log = logging.getLogger(__name__)

POLL_S = 0.25  # a reader asks Milvus for its newest commit at most this often
_KEEP_LOCAL = 3  # versions a cache keeps (readers of older ones hold their files open)
_polled: dict[str, float] = {}
_poll_lock = threading.Lock()


def _local_generation(path: str) -> int | None:
    try:
        with open(os.path.join(path, CURRENT), encoding="utf-8") as fh:
            version = fh.read().strip()
        with open(os.path.join(path, version, CONFIG), encoding="utf-8") as fh:
            return int(json.load(fh).get("generation", 0))
    except (OSError, ValueError, TypeError):
        return None


def sync(path: str, remote: Remote, force: bool = False, locked: bool = False) -> None:
    """Bring the cache at ``path`` to Milvus' newest commit (at most every :data:`POLL_S` unless
    ``force``). A reader does it only when no local writer holds the cache (it tries again at its next
    look); a writer (``locked``) does it under the lock it holds."""
    if not force:
        with _poll_lock:
            if time.monotonic() - _polled.get(path, 0.0) < POLL_S:
                return
            _polled[path] = time.monotonic()
    meta = _meta(remote)
    try:
        head = meta.head()
    except Exception as exc:  # noqa: BLE001 - Milvus unreachable: a reader keeps its version, a writer stops
        if force or _local_generation(path) is None:
            raise
        log.warning("cannot read the newest commit of %s (%s); answering from the version this machine has",
                    remote.address, str(exc).splitlines()[0][:200])
        return
    if head is None and _local_generation(path) is not None and not meta.exists():
        raise IndexNotFoundError(f"{remote.address} is no longer in Milvus (dropped?); this machine's copy at {path} "
                                 "is of no use without it. Build it again with: faqsearch ingest CORPUS.csv --index "
                                 f"{remote.address}")
    if head is None or head[0] == _local_generation(path):
        return
    lock = None if locked else FileLock(os.path.join(path, LOCK)).acquire(block=False)
    if lock is None and not locked:
        return
    try:
        if head[0] != _local_generation(path):
            _install(path, head[1], meta.files(head[1]))
    finally:
        if lock is not None:
            lock.release()


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
    current = _local_generation(path)
    if current is not None and current > int(manifest["generation"]):  # the index was made again from scratch
        for e in os.listdir(path):
            if VERSION_NAME.match(e):
                shutil.rmtree(os.path.join(path, e), ignore_errors=True)
    if os.path.isdir(target):  # a commit in place (the same version, a new config)
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
    kept = sorted((e for e in os.listdir(path) if VERSION_NAME.match(e)), key=lambda e: int(e[1:]))
    for e in kept[:-_KEEP_LOCAL]:
        shutil.rmtree(os.path.join(path, e), ignore_errors=True)


class RemoteWriting:
    """What :class:`faqsearch.index.directory.Writer` does beside its local work for an index in
    Milvus: take the lease before the local lock, sync under it, publish every commit, let go."""

    def __init__(self, path: str, remote: Remote):
        from ..backends import writer_lease

        self.path, self.remote = path, remote
        self.lease = writer_lease(remote.uri, remote.base, remote.address).acquire()

    def sync(self) -> None:
        sync(self.path, self.remote, force=True, locked=True)

    def publish(self, generation: int, name: str, directory: str, config: bytes) -> None:
        """Before a commit is made live locally: the files of ``directory`` (with ``config`` as its
        config.json) into Milvus as version ``name`` of ``generation``, then the commit row."""
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
            self.lease.meta.prune()
        except Exception as exc:  # noqa: BLE001 - pruning is housekeeping; the next writer does it
            log.debug("pruning the commits of %s failed: %s", self.remote.address, exc)
        self.lease.release()
