"""Writing files durably: fsync of files and directories, atomic replacement, and the records a
version keeps of its files (size, a fingerprint of three samples, SHA-256)."""
from __future__ import annotations

import datetime
import errno
import hashlib
import os
from typing import Any

SAMPLE = 1 << 16  # bytes read at each of three places of a large file for its cheap fingerprint


def fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # not POSIX (directories cannot be opened): nothing to sync
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path: str) -> None:
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one rename: the file and its directory fsynced."""
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    fsync_dir(os.path.dirname(path) or ".")


def file_record(path: str, full: bool = True) -> dict[str, Any]:
    """What config.json records of a file written once: its size, a fingerprint of three samples
    (checked on every open, O(1)) and its SHA-256 (checked by writers before they build on it)."""
    size = os.path.getsize(path)
    out: dict[str, Any] = {"bytes": size, "sample": sample_digest(path, size)}
    if full:
        out["sha256"] = file_digest(path)
    return out


def sample_digest(path: str, size: int | None = None) -> str:
    size = os.path.getsize(path) if size is None else size
    h = hashlib.sha256(str(size).encode())
    with open(path, "rb") as fh:
        for start in sorted({0, max(0, size // 2 - SAMPLE // 2), max(0, size - SAMPLE)}):
            fh.seek(start)
            h.update(fh.read(SAMPLE))
    return h.hexdigest()[:32]


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def preallocate(path: str) -> None:
    """Reserve a (sparse, memory-mapped) file's blocks now: a full disk is then an error here, not a
    SIGBUS when a page of the map is first written."""
    try:
        with open(path, "r+b") as fh:
            os.posix_fallocate(fh.fileno(), 0, os.fstat(fh.fileno()).st_size)
    except (AttributeError, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            raise
        # no posix_fallocate here (or the filesystem does not support it): the map is written as it comes


FULL = (errno.ENOSPC, errno.EDQUOT)
DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)


def storage_error(exc: BaseException, where: str):
    """A StorageError that says what happened to a write under ``where`` and what to do, or None
    when ``exc`` is not a storage failure (disk full, read-only, permission denied)."""
    import sqlite3

    from .errors import StorageError

    text = str(exc)
    full = denied = False
    if isinstance(exc, OSError):
        full, denied = exc.errno in FULL, exc.errno in DENIED
    elif isinstance(exc, sqlite3.OperationalError):
        full = "disk is full" in text or "disk I/O error" in text
        denied = "readonly" in text or "unable to open" in text
    elif isinstance(exc, RuntimeError):  # FAISS reports a failed fwrite as a RuntimeError
        full = "fwrite" in text or "No space" in text
    if full:
        return StorageError(f"no space left on the device holding {where}; free some space and run it again "
                            "(nothing was committed: the index is as it was)")
    if denied:
        name = getattr(exc, "filename", None) or where
        return StorageError(f"cannot write to {name} ({getattr(exc, 'strerror', None) or text}); check the folder's "
                            "permissions or choose another --index (nothing was committed)")
    return None
