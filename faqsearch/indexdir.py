"""The index directory on disk: versions, the writer lock, the atomic switch and crash recovery.

An index at ``indexes/NAME`` is a symbolic link to its current version, a sibling directory
``indexes/.NAME.<label>-<random>``. A writer (ingest, edits, refit, tune --apply) builds a new
version beside the current one and switches the link with one ``rename(2)``, so at every instant
the path names a complete index: readers see the old version or the new one, never a mix and
never nothing. A writer holds ``indexes/.NAME.lock`` (flock) for the whole read-modify-switch.

Indexes written by faqsearch before versions existed are plain directories. The first write
moves such a directory aside as a version and links it; if that is interrupted between the two
steps, :func:`resolve` finds the moved version, so readers still open it, and the next writer
restores the link.

Leftovers of killed writers (half-built versions, versions that lost the switch) are removed by
the next writer, under the lock, never by a reader.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
from contextlib import contextmanager
from typing import Iterator

log = logging.getLogger(__name__)

_LABEL = re.compile(r"^(?:building|edit|tuning|old|v)-[A-Za-z0-9_]+$")
_UMASK_LOCK = threading.Lock()


def _siblings(path: str) -> list[str]:
    """Version and leftover directories of the index at ``path`` (``.NAME.<label>-<random>``)."""
    parent, name = os.path.split(path)
    prefix = f".{name}."
    try:
        entries = os.listdir(parent)
    except FileNotFoundError:
        return []
    return [os.path.join(parent, e) for e in entries
            if e.startswith(prefix) and _LABEL.match(e[len(prefix):]) and os.path.isdir(os.path.join(parent, e))]


def _generation(version: str) -> tuple[int, float]:
    cfg = os.path.join(version, "config.json")
    try:
        with open(cfg, encoding="utf-8") as fh:
            gen = int(json.load(fh).get("generation", 0))
        return gen, os.stat(cfg).st_mtime
    except (OSError, ValueError, TypeError, AttributeError):
        return -1, 0.0


def resolve(path: str) -> str:
    """The directory holding the current version of the index at ``path``.

    Follows the link; a plain directory (an index from before versions) is its own version. With
    nothing at the path, a complete version left by an interrupted first switch is used."""
    if os.path.lexists(path):
        return os.path.realpath(path)
    complete = [v for v in _siblings(path) if _generation(v)[0] >= 0]
    if not complete:
        return path
    best = max(complete, key=_generation)
    log.warning("no index link at %s; using the last complete version %s", path, best)
    return best


# what faqsearch writes into an index (version) directory; anything else there is the user's
_OWN_FILES = re.compile(r"^(?:config\.json|whitening\.npz|index\.faiss|vectors\.npy|ids\.npy|store\.db"
                        r"|delta-\d+\.npz)(?:\.tmp|-journal|-wal|-shm)?$")


def foreign_entries(directory: str) -> list[str]:
    """Names in ``directory`` that faqsearch did not write (so must never delete)."""
    return sorted(e for e in os.listdir(directory) if not _OWN_FILES.match(e))


def check_target(path: str) -> None:
    """Refuse to build at ``path`` unless what is there is a faqsearch index (or nothing, or an empty
    directory): building replaces what the path names, and only an index of ours may be replaced.
    Called before any encoding."""
    from .errors import IndexPathError

    def refuse(what: str) -> IndexPathError:
        return IndexPathError(f"{path} {what}; faqsearch replaces only its own indexes. Choose another --index "
                              "(a new name or an empty directory), or move that away yourself")

    if not os.path.lexists(path):
        return
    if os.path.islink(path):
        target = os.path.realpath(path)
        parent, name = os.path.split(path)
        if os.path.dirname(target) != os.path.realpath(parent) or not os.path.basename(target).startswith(f".{name}.") \
                or not _LABEL.match(os.path.basename(target)[len(name) + 2:]):
            raise refuse(f"is a symbolic link to {target}, not an index faqsearch made")
        path_dir = target
    elif os.path.isdir(path):
        path_dir = path
    else:
        raise refuse("is a file, not an index directory")
    if not os.path.isdir(path_dir):
        raise refuse("is a dangling link")
    entries = os.listdir(path_dir)
    if not entries:
        return
    foreign = foreign_entries(path_dir)
    if foreign or "config.json" not in entries:
        shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        raise refuse(f"holds files that are not a faqsearch index ({shown or 'no config.json'})")
    try:
        with open(os.path.join(path_dir, "config.json"), encoding="utf-8") as fh:
            config = json.load(fh)
    except (OSError, ValueError):
        return  # our files with a damaged config: rebuilding is the fix
    if not isinstance(config, dict) or "format_version" not in config:
        raise refuse("holds a config.json that faqsearch did not write")


def _umask() -> int:
    with _UMASK_LOCK:
        mask = os.umask(0)
        os.umask(mask)
    return mask


def new_version(path: str, label: str) -> str:
    """An empty sibling directory for a new version, with the permissions the umask gives (mkdtemp
    alone would make it 0700, unreadable to a service running as another user)."""
    parent, name = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}.{label}-", dir=parent)
    os.chmod(tmp, 0o777 & ~_umask())
    return tmp


def switch(path: str, version: str) -> None:
    """Make ``path`` name ``version`` in one atomic step, then remove what it named before."""
    parent, name = os.path.split(path)
    old = os.path.realpath(path) if os.path.lexists(path) else None
    if old is not None and not os.path.islink(path):
        # a plain directory from before versions: move it aside as a version and link it first;
        # between these two renames resolve() finds it
        legacy = new_version(path, "v")
        os.rmdir(legacy)
        os.rename(path, legacy)
        _link(parent, name, legacy)
        old = legacy
    try:
        _link(parent, name, version)
    except (OSError, NotImplementedError) as exc:  # no symbolic links here (some Windows setups)
        log.debug("symbolic link failed (%s); falling back to two renames", exc)
        _two_renames(path, version)
        return
    if old is not None and os.path.realpath(old) != os.path.realpath(version):
        shutil.rmtree(old, ignore_errors=True)


def _link(parent: str, name: str, version: str) -> None:
    tmp_link = os.path.join(parent, f".{name}.link-{os.getpid()}-{threading.get_ident()}")
    if os.path.lexists(tmp_link):
        os.remove(tmp_link)
    os.symlink(os.path.basename(version), tmp_link)
    try:
        os.replace(tmp_link, os.path.join(parent, name))
    except BaseException:
        if os.path.lexists(tmp_link):
            os.remove(tmp_link)
        raise


def _two_renames(path: str, version: str) -> None:
    old = None
    if os.path.exists(path):
        old = new_version(path, "old")
        os.rmdir(old)
        os.replace(path, old)
    try:
        os.replace(version, path)
    except BaseException:
        if old is not None:
            os.replace(old, path)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def repair(path: str) -> list[str]:
    """Under the writer lock: restore a missing link and remove leftovers of killed writers.

    Returns the removed directories. Only directories named like versions of this index
    (``.NAME.<label>-<random>``) are touched, and never the current version."""
    parent, name = os.path.split(path)
    if not os.path.lexists(path):
        current = resolve(path)
        if current != path:
            _link(parent, name, current)
            log.warning("restored the link %s -> %s", path, os.path.basename(current))
    for stale in [e for e in os.listdir(parent) if e.startswith(f".{name}.link-")] if os.path.isdir(parent) else []:
        os.remove(os.path.join(parent, stale))
    current = os.path.realpath(path) if os.path.lexists(path) else None
    removed = []
    for d in _siblings(path):
        if current is not None and os.path.realpath(d) == current:
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    if removed:
        log.info("removed %d leftover director%s of interrupted writes beside %s", len(removed),
                 "y" if len(removed) == 1 else "ies", path)
    return removed


@contextmanager
def writer_lock(path: str) -> Iterator[None]:
    """Exclusive lock for the writers of one index (other processes included), held for the whole
    read-modify-switch. Readers never take it. Leftovers of killed writers are cleaned on entry."""
    parent, name = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: one writer at a time is then up to the user
        yield
        return
    with open(os.path.join(parent, f".{name}.lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            repair(path)
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def next_version(path: str, label: str) -> Iterator[str]:
    """A new version directory that becomes the index at ``path`` when the block succeeds.

    Call it with the writer lock held. On any failure (an interrupt too) the new directory is
    removed and ``path`` still names the previous version, untouched."""
    tmp = new_version(path, label)
    try:
        yield tmp
        switch(path, tmp)
    except BaseException:
        if os.path.realpath(path) != os.path.realpath(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def share_file(src_dir: str, dst_dir: str, filename: str) -> None:
    """Put an unchanged file into a new version: a hard link (no copy) where the filesystem allows."""
    src, dst = os.path.join(src_dir, filename), os.path.join(dst_dir, filename)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
