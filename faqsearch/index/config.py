"""A version's config.json: what built the index, with which parameters, and what its files are.

Only :class:`faqsearch.index.directory.Writer` writes it (that write is the commit), through
:class:`faqsearch.index.format.Config`, which types and checks it; this module finds and reads it,
checks the version's files against its records, and builds its sections.
"""
from __future__ import annotations

import os
import re
from typing import Any

from ..errors import IndexFormatError, InvalidOptionError, TextTypeError
from ..lexical import stem_in_use
from ..tokenmatch import supported as tokens_supported
from .format import (BUILDING, CURRENT, FILES, OWN_FILES, RECORDED_DIRS, SIZED, TOP, VERSION_NAME, Config, home,
                     read_json)

DEFAULT_NAME = "default"


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for pkg in ("faqsearch", "torch", "transformers", "faiss-cpu", "numpy", "sqlite-utils"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def resolve_index_path(index: str | os.PathLike | None) -> str:
    """A name ('default', 'support') lives under $FAQSEARCH_HOME or ./indexes; anything path-like
    (a '/', a leading '.') is a path. A bare name is read as a directory of the current directory
    only where that directory is a faqsearch index and the home has none of that name (an index
    built by path before): a user folder of that name never hides the index. None is 'default';
    an empty name is an error (an unset shell variable must not mean the default index). An address
    ``milvus://HOST:PORT/NAME`` is an index in Milvus, read through its local cache (index/remote.py)."""
    if index is None:
        return os.path.join(home(), DEFAULT_NAME)
    if not isinstance(index, (str, os.PathLike)):
        raise TextTypeError(f"an index is a name or a path, got {type(index).__name__}")
    index = os.fspath(index)
    if not str(index).strip():
        raise InvalidOptionError("the index name is empty; give a name or a path (an unset shell variable?)")
    from .address import local_path, parse

    remote = parse(str(index))
    if remote is not None:
        return local_path(remote, home())
    if index.startswith("~"):  # as a shell expands it (a quoted --index '~/x', a service's setting)
        index = os.path.expanduser(index)
    if os.sep in index or "/" in index or index.startswith(".") or os.path.isabs(index):
        return os.path.abspath(index)
    named = os.path.join(home(), index)
    if not os.path.lexists(named) and _looks_like_index(index):
        return os.path.abspath(index)
    return named


def read_current(directory: str) -> str | None:
    """The live version's directory that ``directory``'s CURRENT names; None without a CURRENT (another
    layout, or nothing there); IndexFormatError where it names no version."""
    try:
        with open(os.path.join(directory, CURRENT), encoding="utf-8", errors="replace") as fh:  # not UTF-8: damaged
            name = fh.read().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not VERSION_NAME.match(name):
        raise IndexFormatError(f"{os.path.join(directory, CURRENT)} is damaged (it names {name[:40]!r}, not a "
                               "version). Delete it (the index then answers from its newest version, and the next edit names "
                               "that one again), restore the index directory from a backup, or rebuild it with: "
                               "faqsearch ingest CORPUS --index INDEX --force")
    return os.path.join(directory, name)


def current_names(path: str, strict: bool = False) -> str | None:
    """What ``path``'s CURRENT names, read once: "ours" (a version holding faqsearch's files, or faqsearch's
    config.json where they are not there; ``strict``: the config.json it must be), "other" (an existing folder
    of someone else's: a folder of releases naming "v20240101", whose own config.json makes no index), or None
    (no CURRENT, a damaged one, or a missing version: opening says which). "ours" lets a folder with files of a
    person's beside ours be opened and edited (writers remove only what is ours); "other" is never written to
    (a writer took its LOCK)."""
    try:
        version = read_current(path)
    except IndexFormatError:  # damaged, or another program's (LevelDB writes a CURRENT): "ours" it is not
        return None
    if version is None or not os.path.isdir(version):
        return None
    if not strict and any(OWN_FILES.match(e) and not e.startswith(FILES["config"]) for e in os.listdir(version)):
        return "ours"  # store.db, whitening.npz...: only faqsearch writes them (a damaged config: "damaged")
    try:
        config = read_json(version)
    except (OSError, ValueError):
        return "other"
    return "ours" if isinstance(config, dict) and "format_version" in config else "other"


_SYSTEM = re.compile(r"^(?:lost\+found|\.DS_Store|\._.*|Thumbs\.db|desktop\.ini|\.snapshot|\.nfs[0-9a-fA-F]+)$")


def foreign_entries(directory: str) -> list[str]:
    """Names in an index directory that faqsearch did not write (and so must never delete); what a file
    system or an operating system puts in any folder (lost+found of a volume mounted there, NFS's .nfs*
    files of removed files still open, .DS_Store) is neither ours nor a sign of someone else's folder."""
    out = []
    for e in os.listdir(directory):
        if OWN_FILES.match(e) or TOP.match(e) or _SYSTEM.match(e):
            continue
        if (VERSION_NAME.match(e) or BUILDING.match(e)) and (os.path.isdir(f := os.path.join(directory, e))
                                                          or not os.path.lexists(f)):  # one being removed: ours
            continue
        out.append(e)
    return sorted(out)


def _looks_like_index(directory: str) -> bool:
    """A faqsearch index of any layout: CURRENT (versions), config.json (plain), or a link to a version."""
    return os.path.isdir(directory) and (os.path.islink(directory) or any(
        os.path.isfile(os.path.join(directory, f)) for f in (CURRENT, FILES["config"])))


def lexical_settings(directory: str) -> dict[str, str] | None:
    """How the store of the version ``directory`` tokenises for BM25 ({'cjk': ..., 'stem': ...}, a
    store still empty reading 'none'), read without changing the file; None where it has no such
    settings (a Milvus index keeps its tokens in the collection)."""
    import sqlite3

    path = os.path.join(directory, FILES["store"])
    if not os.path.isfile(path):
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            found = dict(conn.execute("select key, value from settings where key in ('cjk', 'stem')").fetchall())
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    if "cjk" not in found:
        return None
    stem = found.get("stem", "none")  # a store made before the setting: its words as written
    return {"cjk": found["cjk"], "stem": stem_in_use(stem)}


def format_version(stem: str) -> int:
    """The oldest format that describes an index whose store stems with ``stem``."""
    return 1 if stem_in_use(stem) == "none" else 2


def new_config(stem: str = "none", **fields: Any) -> Config:
    """The config of a new index (``fields``: its keys after format version, creation time and versions)."""
    from ..files import now

    return Config.from_dict({"format_version": format_version(stem), "created": now(), "versions": versions(),
                             **fields})


def whitening_section(white, enabled: bool, fitted_on: str, fit_count: int, **extra: Any) -> dict[str, Any]:
    """config["whitening"] for a transform (the same keys whoever fits it: build, refit, tune)."""
    return {"enabled": enabled, "beta": white.beta, "gamma": white.gamma, "k": white.k if enabled else None,
            "k_effective": white.dim_out, "rank": white.rank, "fitted_on": fitted_on, "fit_count": fit_count,
            **extra}


def load_config(directory: str, path: str | None = None) -> Config:
    """Read and check a version's config.json (``path``: the index, for messages): :meth:`Config.load`."""
    return Config.load(directory, path)


def damaged(path: str, key: str, why: Any) -> str:
    """The message for a damaged or missing file of the index at ``path`` (``key``: a FILES key, or
    the file's name inside the version, such as 'lexical/rows.npy')."""
    what = why if why in ("missing", "empty") else f"damaged ({why})"
    return (f"index {path}: {FILES.get(key, key)} is {what}. Restore the index directory from a "
            f"backup, or rebuild it with: faqsearch ingest CORPUS --index {path} --force")


def version_records(version: str, staged: dict[str, dict[str, dict[str, Any]]],
                    given: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """The records of every file of a version being built (:func:`recorded_files`): those ``given``
    (files shared unchanged), those computed when it was staged (``staged[version]``, kept for the
    commit, if the file is unchanged since), the others computed now; SHA-256 for the base files
    writers build on (:class:`faqsearch.index.directory.Writer`)."""
    from ..files import file_record

    kept = staged.setdefault(version, {})
    out = {}
    for name in recorded_files(version):
        full = os.path.join(version, name)
        if given and name in given:
            out[name] = given[name]
        elif name in kept and kept[name]["bytes"] == os.path.getsize(full):
            out[name] = kept[name]
        else:
            out[name] = kept[name] = file_record(full, full=name.split("/", 1)[0] not in RECORDED_DIRS)
    return out


def recorded_files(directory: str) -> list[str]:
    """The names (relative to the version ``directory``) of the files config.json records: the
    SIZED files present and every file under the RECORDED_DIRS folders."""
    out = [FILES[k] for k in SIZED if os.path.exists(os.path.join(directory, FILES[k]))]
    for sub in RECORDED_DIRS:
        folder = os.path.join(directory, sub)
        if os.path.isdir(folder):
            out += sorted(f"{sub}/{n}" for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n)))
    return out


def recorded_dirs(config: Config) -> set[str]:
    """The RECORDED_DIRS folders whose files config.json records: only those are read (a version
    written before they were recorded keeps its folders unread: BM25 is then scored by FTS5 and
    token states are computed, the answers those files would give)."""
    return {name.split("/", 1)[0] for name in config.recorded if name.split("/", 1)[0] in RECORDED_DIRS}


def check_files(directory: str, config: Config, path: str, required=("whitening", "faiss", "store")) -> None:
    """Every file of the version present with its recorded size and fingerprint (cheap checks: a
    file from another index, a truncated or a replaced one is refused), and a record for every file
    the version has (records emptied by hand would turn every check off)."""
    from ..files import sample_digest

    for key in required:
        if not os.path.exists(os.path.join(directory, FILES[key])):
            raise IndexFormatError(damaged(path, key, "missing"))
    records = config.recorded
    names = {v: k for k, v in FILES.items()}
    if config.next_question_id is not None:  # written by a faqsearch that records its files (since 2026-11-22)
        kept = recorded_dirs(config)
        for name in recorded_files(directory):
            folder = name.split("/", 1)[0] if "/" in name else None
            if name in records or (folder is not None and folder not in kept):
                continue
            raise IndexFormatError(
                f"index {path}: {FILES['config']} keeps no record of {name} (its 'files' records are missing or "
                f"incomplete), so that file cannot be checked. Restore {FILES['config']} or the index directory "
                f"from a backup, or rebuild it with: faqsearch ingest CORPUS --index {path} --force")
    for name, record in records.items():
        if name not in names and name.split("/", 1)[0] not in RECORDED_DIRS:
            continue
        key = names.get(name, name)
        size = record if isinstance(record, int) else (record or {}).get("bytes")
        full = os.path.join(directory, name)
        try:
            actual = os.path.getsize(full)
        except OSError:
            raise IndexFormatError(damaged(path, key, "missing")) from None
        if size is not None and actual != size:
            raise IndexFormatError(damaged(path, key, f"{actual} bytes, {size} expected"))
        if isinstance(record, dict) and record.get("sample") and sample_digest(full, actual) != record["sample"]:
            raise IndexFormatError(damaged(path, key, "its content is not the one this version recorded; it may "
                                                      "come from another index"))


def verify_files(directory: str, config: Config, path: str, keys=("vectors", "ids")) -> None:
    """Full SHA-256 check of files a writer is about to build on (refit, tune, a compaction)."""
    from ..files import file_digest

    for key in keys:
        record = config.recorded.get(FILES[key])
        full = os.path.join(directory, FILES[key])
        if isinstance(record, dict) and record.get("sha256") and os.path.exists(full):
            if file_digest(full) != record["sha256"]:
                raise IndexFormatError(damaged(path, key, "its SHA-256 differs from the one recorded when it was "
                                                          "written"))


def fusion_weights(config: Config) -> dict[str, float | None]:
    """The weights hybrid mode ranks with (None for all in another mode): BM25's ('hybrid_weight',
    HYBRID_WEIGHT unless chosen), token matching's ('token_weight', TOKEN_WEIGHT where the encoder
    has token states and the store BM25 statistics, i.e. not USE and not Milvus, else 0) and the FAQ
    prototypes' ('prototype_weight', 0 unless chosen: faqsearch.prototypes)."""
    from ..defaults import HYBRID_WEIGHT, MODE, TOKEN_WEIGHT

    if (config.mode or MODE) != "hybrid":
        return {"hybrid_weight": None, "token_weight": None, "prototype_weight": None}
    usable = tokens_supported(config.encoder_spec) and config.backend_kind != "milvus"
    return {"hybrid_weight": float(HYBRID_WEIGHT if config.hybrid_weight is None else config.hybrid_weight),
            "token_weight": float((TOKEN_WEIGHT if usable else 0.0) if config.token_weight is None else config.token_weight),
            "prototype_weight": float(config.prototype_weight or 0.0)}
