"""Writing files durably: fsync of files and directories, atomic replacement, and the records a
version keeps of its files (size, a fingerprint of three samples, SHA-256)."""
from __future__ import annotations

import datetime
import errno
import hashlib
import os
import shutil
import threading
from typing import Any, Iterator, Sequence

import numpy as np

SAMPLE = 1 << 16  # bytes read at each of three places of a large file for its cheap fingerprint
_UMASK_LOCK = threading.Lock()


def umask() -> int:
    """The process's umask (read by setting it, so under a lock: threads may make files at once)."""
    with _UMASK_LOCK:
        mask = os.umask(0)
        os.umask(mask)
    return mask


def as_umask_gives(path: str) -> str:
    """``path`` (a directory made by mkdtemp, 0700) given the mode the umask gives, so a team's cache or
    index made by one user is read, and with umask 002 written, by the others."""
    os.chmod(path, 0o777 & ~umask())
    return path


def sqlite_file(path: str) -> str:
    """``path``, created empty with the mode the umask gives where nothing is there yet: SQLite creates its
    files 0644 whatever the umask (a store or query log made with umask 002 could not be written by the
    group), and gives its -wal and -shm files the mode of the database. An in-memory database
    (``:memory:``, a ``file:`` URI) is no file: nothing is created (a file named ':memory:' appeared
    in the working directory of every Milvus ingest)."""
    if path == ":memory:" or path.startswith("file:"):
        return path
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    except OSError:  # there already, or not creatable: SQLite opens it, or says why it cannot
        pass
    return path


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


def read_through(path: str, block: int = 1 << 23) -> None:
    """Read a file once, keeping nothing: its pages come into the page cache in large sequential
    reads, so a mapping of it then faults no disk reads (a cold 1 GB FAISS file searched through a
    map alone took 7-8 s for its first query, against 1.3 s read through first)."""
    buf = bytearray(block)
    with open(path, "rb", buffering=0) as fh:
        if hasattr(os, "posix_fadvise"):  # a larger readahead window
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        while fh.readinto(buf):
            pass


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def link_or_copy(src: str, dst: str) -> None:
    """``dst`` as a hard link to ``src`` (no copy), or a copy where the filesystem has no links."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def share_file(src_dir: str, dst_dir: str, filename: str) -> None:
    """Put an unchanged file into a new version: a hard link (no copy) where the filesystem allows."""
    link_or_copy(os.path.join(src_dir, filename), os.path.join(dst_dir, filename))


def unshare(path: str) -> None:
    """Give ``path`` a private copy of its bytes when it is a hard link shared with another version: a
    file written in place (store.db) must never change a kept version through the link."""
    if os.path.exists(path) and os.stat(path).st_nlink > 1:
        shutil.copy2(path, f"{path}.tmp")
        os.replace(f"{path}.tmp", path)


def share_dir(src: str, dst: str, names: Sequence[str], meta: str = "meta.json") -> bool:
    """Put the files ``names`` of the directory ``src`` and its ``meta`` (last: what readers check
    first) into ``dst`` as hard links (copies where the filesystem has none); False where ``src``
    holds no meta."""
    if not os.path.isfile(os.path.join(src, meta)):
        return False
    os.makedirs(dst, exist_ok=True)
    for name in [*names, meta]:
        link_or_copy(os.path.join(src, name), os.path.join(dst, name))
    return True


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
    else:  # safetensors' SafetensorError (a model saved by `learn`) says the errno in its text
        full = "No space left on device" in text or "(os error 28)" in text
    if full:
        return StorageError(f"no space left on the device holding {where}; free some space and run it again "
                            "(nothing was committed: the index is as it was)")
    if denied:
        name = getattr(exc, "filename", None) or where
        return StorageError(f"cannot write to {name} ({getattr(exc, 'strerror', None) or text}); check the folder's "
                            "permissions or choose another --index (nothing was committed)")
    return None


class NpyWriter:
    """``rows`` x ``dim`` float32 rows, appended in order; the file's blocks are reserved up front
    (a full disk fails at the start, not halfway)."""

    def __init__(self, path: str, rows: int, dim: int):
        self.path, self.rows, self.dim, self.written = path, rows, dim, 0
        self._fh = open(path, "wb")
        np.lib.format.write_array_header_1_0(self._fh, {"descr": "<f4", "fortran_order": False, "shape": (rows, dim)})
        self._data = self._fh.tell()
        self._fh.truncate(self._data + rows * dim * 4)
        self._fh.flush()
        preallocate(path)

    def write(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype="<f4")
        if block.ndim != 2 or block.shape[1] != self.dim or self.written + len(block) > self.rows:
            raise ValueError(f"block of shape {block.shape} does not fit {self.path} ({self.written}/{self.rows} rows)")
        self._fh.write(block.tobytes())
        self.written += len(block)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> "NpyWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# numpy parses a .npy header with ast.literal_eval, and CPython 3.11's AST constructor counts its
# recursion depth in state that threads share (gh-106905): two threads parsing at once can fail with
# "SystemError: AST constructor recursion depth mismatch" (seen with readers opening postings arrays
# while a writer loaded a delta). faqsearch's own .npy / .npz reads take turns under this lock.
NPY_LOCK = threading.RLock()


def load_npy(path: str, **kwargs: Any) -> Any:
    """``np.load`` under :data:`NPY_LOCK` (for .npy files; an .npz file parses its members' headers
    as they are read, so read them inside ``with NPY_LOCK``)."""
    with NPY_LOCK:
        return np.load(path, **kwargs)


def npy_chunks(path: str, chunk: int = 4096) -> Iterator[np.ndarray]:
    """The rows of a 2-d ``.npy`` file, ``chunk`` at a time, read (not mapped)."""
    with open(path, "rb") as fh:
        major, _ = np.lib.format.read_magic(fh)
        read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        with NPY_LOCK:
            shape, fortran, dtype = read_header(fh)
        if fortran or len(shape) != 2:
            raise ValueError(f"{path}: expected a C-ordered 2-d array, found shape {shape}")
        width = shape[1] * dtype.itemsize
        for first in range(0, shape[0], chunk):
            n = min(chunk, shape[0] - first)
            yield np.frombuffer(fh.read(n * width), dtype=dtype).reshape(n, shape[1])


class FileLock:
    """flock on a lock file, re-checked against the path after it is taken (a removed lock file must
    not be locked by one process while another creates and locks a new one)."""

    def __init__(self, path: str):
        self.path = path
        self.fh = None

    def acquire(self, block: bool = True) -> "FileLock | None":
        """Take the lock (``block=False``: None at once where another holds it)."""
        try:
            import fcntl
        except ImportError:  # not POSIX: one writer at a time is then up to the user
            return self
        while True:
            fh = open(self.path, "a")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX if block else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.close()
                return None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fh.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.fh = fh
                return self
            fh.close()

    def release(self) -> None:
        if self.fh is not None:
            self.fh.close()  # closing drops the flock
            self.fh = None
