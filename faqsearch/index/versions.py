"""The versions an index keeps, and restoring one of them.

Every commit of a new version leaves the previous ones in the index directory, the newest
``KEEP_VERSIONS`` of them (faqsearch/indexdir.py prunes older ones after the new CURRENT is
durable). A kept version never changes: edits in place write only into the live version, and its
store.db, the one file written in place, is never a hard link to a kept version's.

:func:`restore` makes a kept version's content live again as a new commit (made by "restore
vNNNNNNNN"), so a restore can itself be undone the same way.
"""
from __future__ import annotations

import os
import sqlite3
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import FAQSearchError, IndexFormatError, VersionNotFoundError
from ..files import link_or_copy
from .directory import Writer, resolve
from .format import CONFIG, DELTA, SQLITE_SIDE, STORE, TMP, VERSION_NAME, Config, Counts, delta_file, read_json
from ..backends.embedded.store import Store

_SKIP = (CONFIG, STORE)  # written by restore itself: the config by the commit, the store copied


@dataclass
class Version:
    """One kept version (``faqsearch versions``): what made it, when, and what it holds."""

    version: str
    time: str | None
    made_by: str | None
    faqs: int | None
    questions: int | None
    live: bool
    edited_by: str | None = None  # the last edit committed inside it (in place), if any

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _names(path: str) -> list[str]:
    """The version directories of an index, oldest first (the names indexdir gives and prunes)."""
    return sorted((e for e in os.listdir(path) if VERSION_NAME.match(e) and os.path.isdir(os.path.join(path, e))),
                  key=lambda e: int(e[1:]))


def _config(directory: str) -> Config:
    try:
        config = read_json(directory)
    except (OSError, ValueError) as exc:
        raise IndexFormatError(f"{directory} has no readable {CONFIG}; choose another version") from exc
    return Config.from_dict(config if isinstance(config, dict) else {}, check=False)


def list_versions(path: str | os.PathLike) -> list[Version]:
    """The versions the index at ``path`` holds, oldest first, the live one marked."""
    path = os.path.abspath(path)
    live = os.path.basename(resolve(path))
    out = []
    for name in _names(path):
        try:
            config = _config(os.path.join(path, name))
        except IndexFormatError:
            config = Config()
        made, counts = config.made or {}, config.counts or Counts()
        out.append(Version(name, made.get("at") or config.modified, made.get("by"), counts.faqs,
                           counts.questions, name == live, (config.edited or {}).get("by")))
    return out


def previous(path: str | os.PathLike) -> str | None:
    """The newest kept version before the live one: what undoes the last new version."""
    rows = list_versions(path)
    live = next((int(v.version[1:]) for v in rows if v.live), None)
    older = [v.version for v in rows if not v.live and (live is None or int(v.version[1:]) < live)]
    return older[-1] if older else None


def restore(path: str | os.PathLike, version: str) -> str:
    """Make the content of the kept ``version`` live again as a new version; returns its name.

    Its files are hard-linked into the new version (they are written once), its store is copied
    with exactly the rows that version saw, and its delta file renamed for the new generation."""
    path = os.path.abspath(path)
    with Writer(path, f"restore {version}") as writer:
        known = _names(path)
        if version not in known:
            raise VersionNotFoundError(f"index {os.path.basename(path)!r} keeps no version {version!r}; it keeps "
                                       f"{', '.join(known)}. "
                                       f"See them with: faqsearch versions --index {os.path.basename(path)}")
        src = os.path.join(path, version)
        config = _config(src)
        if config.backend_kind != "embedded":
            raise FAQSearchError(f"restore works on embedded indexes only; {os.path.basename(path)!r} keeps its "
                                 "rows in Milvus, which keeps no versions")
        generation = int(config.generation or 0)
        tmp = writer.new_version()
        delta = config.delta.to_dict() if config.delta is not None else {}
        for root, dirs, files in os.walk(src):
            rel = os.path.relpath(root, src)
            for d in dirs:
                os.makedirs(os.path.join(tmp, rel, d), exist_ok=True)
            for f in files:
                name = os.path.normpath(os.path.join(rel, f))
                if name in _SKIP or name.endswith((TMP, *SQLITE_SIDE)):
                    continue
                if DELTA.match(name) and name != delta.get("file"):
                    continue  # a delta of an earlier generation, kept only for readers of that moment
                target = delta_file(writer.generation + 1) if name == delta.get("file") else name
                link_or_copy(os.path.join(src, name), os.path.join(tmp, target))
        if delta:
            config = config.merged(delta={**delta, "file": delta_file(writer.generation + 1)})
        _copy_store(os.path.join(src, STORE), os.path.join(tmp, STORE), generation)
        return os.path.basename(writer.commit(config, tmp, config.files or None))


def _copy_store(src: str, dst: str, generation: int) -> None:
    """A private copy of a kept store, read only (the kept file is never written), holding exactly the
    rows ``generation`` saw (none of a killed writer's, none removed)."""
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    dest = sqlite3.connect(dst)
    try:
        source.backup(dest)
    finally:
        dest.close()
        source.close()
    store = Store(dst, generation=generation)
    try:
        store.keep_only(generation)
    finally:
        store.close()
