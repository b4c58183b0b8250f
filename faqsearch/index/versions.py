"""The versions an index keeps, and restoring one of them.

Every commit of a new version leaves the previous ones in the index directory, the newest
``KEEP_VERSIONS`` of them and the undo points (the last version before each of the latest
``KEEP_UNDO_POINTS`` commits of anything but phrasings, listed by the live version's config;
faqsearch/index/directory.py prunes older ones after the new CURRENT is durable). A kept version never changes: edits in place write only into the live version, and its
store.db, the one file written in place, is never a hard link to a kept version's.

:func:`restore` makes a kept version's content live again as a new commit (made by "restore
vNNNNNNNN"), so a restore can itself be undone the same way.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from ..backends import backend_for
from ..errors import IndexFormatError, InvalidOptionError, VersionNotFoundError
from .directory import Writer, remove_version, resolve
from .format import CONFIG, VERSION_NAME, Config, Counts, read_json, version_name


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
    edits: list[str] | None = None  # every kind of edit committed inside it, in the order first made

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


def version_configs(path: str | os.PathLike) -> list[tuple[str, Config | None]]:
    """Each version directory of the index at ``path``, oldest first, with its config (None where it
    cannot be read)."""
    out: list[tuple[str, Config | None]] = []
    for name in _names(os.path.abspath(path)):
        try:
            out.append((name, _config(os.path.join(os.path.abspath(path), name))))
        except IndexFormatError:
            out.append((name, None))
    return out


def list_versions(path: str | os.PathLike) -> list[Version]:
    """The versions the index at ``path`` holds, oldest first, the live one marked."""
    path = os.path.abspath(path)
    where = resolve(path)
    live = os.path.basename(where)
    out = []
    names = _names(path)
    if not names:  # an older layout (a plain directory, a link): its one version, named as its first write names it
        names = [live := version_name(int(_config(where).generation or 0))]
    for name in names:
        try:
            config = _config(os.path.join(path, name) if os.path.isdir(os.path.join(path, name)) else where)
        except IndexFormatError:
            config = Config()
        made, counts = config.made or {}, config.counts or Counts()
        out.append(Version(name, made.get("at") or config.modified, made.get("by"), counts.faqs,
                           counts.questions, name == live, (config.edited or {}).get("by"),
                           (config.edited or {}).get("kinds")))
    return out


def previous(path: str | os.PathLike) -> str | None:
    """The newest kept version before the live one: what undoes the last new version."""
    rows = list_versions(path)
    live = next((int(v.version[1:]) for v in rows if v.live), None)
    older = [v.version for v in rows if not v.live and (live is None or int(v.version[1:]) < live)]
    return older[-1] if older else None


def left_behind(path: str | os.PathLike, version: str) -> dict[str, Any]:
    """What a restore of ``version`` leaves behind: the kept versions after it (the live one last), what
    made them and was edited inside them, and the version that brings them back (the live one, kept
    by the restore). Said before restoring, as feedback and approvals after an undo point are lost
    from the live index with it (`versions` keeps them)."""
    n = int(version[1:]) if VERSION_NAME.match(version) else -1
    rows = [v for v in list_versions(path) if int(v.version[1:]) > n]
    made = list(dict.fromkeys(k for v in rows for k in (v.made_by, *(v.edits or [v.edited_by])) if k))
    live = next((v.version for v in rows if v.live), None)
    return {"versions": [v.version for v in rows], "made_by": made, "undo": live}


def restored(path: str | os.PathLike, version: str) -> dict[str, Any]:
    """:func:`restore`, said as `faqsearch restore --json` and POST .../restore say it: the version
    restored, the new live one, and what it leaves behind (:func:`left_behind`; None where the version
    was live already and nothing changed)."""
    behind = left_behind(path, version)
    live = restore(path, version)
    return {"restored": version, "version": live, "left_behind": behind if live != version else None}


def restore(path: str | os.PathLike, version: str) -> str:
    """Make the content of the kept ``version`` live again as a new version; returns its name.

    The backend makes it (:meth:`faqsearch.backends.base.Backend.restore`): the embedded one
    hard-links its files into the new version (they are written once), copies its store with exactly
    the rows that version saw and renames its delta file for the new generation; Milvus keeps no
    versions."""
    path = os.path.abspath(path)
    resolve(path)  # no index there: IndexNotFoundError, before a writer takes a lock (and makes a folder) there
    with Writer(path, f"restore {version}") as writer:
        if writer.config is not None and backend_for(writer.config).kind != "embedded":  # before naming versions it
            backend_for(writer.config).restore(writer, "", writer.config)  # cannot restore: refused (Milvus keeps none)
        known = _names(path)
        if version not in known:
            raise VersionNotFoundError(f"the index at {path} keeps no version {version!r}; it keeps "
                                       f"{', '.join(known) or 'none'} (`faqsearch versions --index {path}`; over HTTP, GET .../versions)")
        src = os.path.join(path, version)
        if os.path.realpath(src) == os.path.realpath(resolve(path, sync_remote=False)):
            return version  # already live: a restore would add a version and push the oldest kept one out
        config = _config(src)
        return backend_for(config).restore(writer, src, config)  # refused by a backend that keeps no versions


def delete_kept(path: str | os.PathLike) -> list[str]:
    """Delete every version the index at ``path`` keeps but the live one, under the writers' lock; returns
    their names. They hold what edits took out (a user's query that feedback made a phrasing, removed
    FAQs) until newer versions replace them: what a person's request to erase their text needs gone too.
    No `restore` can undo the edits before then; readers of a deleted version keep their open files."""
    path = os.path.abspath(path)
    resolve(path)  # no index there: IndexNotFoundError, before a writer takes a lock (and makes a folder) there
    with Writer(path, "delete kept versions") as writer:
        if writer.config is not None and backend_for(writer.config).kind != "embedded":
            raise InvalidOptionError(f"{path} lives in Milvus, which keeps no versions: there are none to delete")
        live = os.path.basename(resolve(path, sync_remote=False))
        gone = [name for name in _names(path) if name != live]
        for name in gone:
            remove_version(os.path.join(path, name))
        return gone
