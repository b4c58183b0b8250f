"""The index directory's config.json: what built the index and with which parameters."""
from __future__ import annotations

import datetime
import json
import os
from typing import Any

from .errors import IndexFormatError, IndexNotFoundError

FORMAT_VERSION = 1
FILES = {
    "config": "config.json",
    "whitening": "whitening.npz",
    "faiss": "index.faiss",
    "store": "store.db",
    "vectors": "vectors.npy",  # raw encoder vectors, so the transform can be re-tuned without re-encoding
    "ids": "ids.npy",  # the question id of each row of vectors.npy (indexes from before deltas lack it)
}
DEFAULT_HOME = "indexes"
DEFAULT_NAME = "default"


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("faqsearch", "torch", "transformers", "faiss-cpu", "numpy", "sqlite-utils"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def resolve_index_path(index: str | os.PathLike | None) -> str:
    """A name ('default', 'support') lives under $FAQSEARCH_HOME or ./indexes; anything path-like is a path."""
    index = str(index or DEFAULT_NAME)
    if os.sep in index or "/" in index or index.startswith(".") or os.path.isdir(index):
        return os.path.abspath(index)
    return os.path.abspath(os.path.join(os.environ.get("FAQSEARCH_HOME", DEFAULT_HOME), index))


def new_config(**fields: Any) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": versions(),
        **fields,
    }


SIZED = ("whitening", "faiss", "vectors", "ids")  # files written once per version: their sizes are recorded


def save_config(directory: str, config: dict[str, Any]) -> None:
    """Write config.json last (atomically), recording the sizes of the version's other files."""
    config["files"] = {FILES[k]: os.path.getsize(os.path.join(directory, FILES[k])) for k in SIZED
                       if os.path.exists(os.path.join(directory, FILES[k]))}
    path = os.path.join(directory, FILES["config"])
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(config, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    os.replace(tmp, path)


def load_config(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, FILES["config"])
    if not os.path.isdir(directory):
        raise IndexNotFoundError(
            f"no index at {directory}. Create one with: faqsearch ingest CORPUS.csv "
            f"--index {os.path.basename(directory)}")
    if not os.path.exists(path):
        raise IndexFormatError(f"{directory} is not a faqsearch index (no {FILES['config']}); re-run faqsearch ingest")
    try:
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IndexFormatError(f"{path} is damaged ({exc}); re-run faqsearch ingest") from None
    fv = config.get("format_version")
    if fv != FORMAT_VERSION:
        built = (config.get("versions") or {}).get("faqsearch")
        newer = isinstance(fv, int) and fv > FORMAT_VERSION
        raise IndexFormatError(
            f"index {directory} has format version {fv} (built by faqsearch {built}); this faqsearch reads "
            f"version {FORMAT_VERSION}. "
            + ("Upgrade faqsearch (pip install -U faqsearch)." if newer else "Re-run faqsearch ingest to rebuild it.")
        )
    for key in ("encoder", "whitening", "dim_in", "dim_out"):
        if key not in config:
            raise IndexFormatError(f"{path} lacks {key!r}; re-run faqsearch ingest")
    return config


def damaged(path: str, key: str, why: Any) -> str:
    """The message for a damaged or missing file of the index at ``path``."""
    what = why if why in ("missing", "empty") else f"damaged ({why})"
    return (f"index {path}: {FILES[key]} is {what}. Restore the index directory from a "
            f"backup, or rebuild it with: faqsearch ingest CORPUS --index {path} --force")


def check_files(directory: str, config: dict[str, Any], path: str) -> None:
    """Every file of the version present, and those with a recorded size of that size (cheap checks)."""
    for key in ("whitening", "faiss", "store"):
        if not os.path.exists(os.path.join(directory, FILES[key])):
            raise IndexFormatError(damaged(path, key, "missing"))
    for name, size in (config.get("files") or {}).items():
        key = next(k for k, v in FILES.items() if v == name)
        try:
            actual = os.path.getsize(os.path.join(directory, name))
        except OSError:
            raise IndexFormatError(damaged(path, key, "missing")) from None
        if actual != size:
            raise IndexFormatError(damaged(path, key, f"{actual} bytes, {size} expected"))
