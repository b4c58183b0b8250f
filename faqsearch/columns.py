"""Which column of a corpus file holds what: :class:`Columns` (the names, the defaults or those given),
and :func:`resolve`, which finds them in a file's header (a JSONL file: its first record's keys) and
refuses a header that lacks one, saying what to do.

A default name matches a header whatever its case, the spaces around it and the spaces or hyphens
within it ("Question", " ID ", "FAQ-ID": what spreadsheet and CMS exports write), unless the header
holds it exactly; a name given with ``--question-column`` and the like is matched exactly. An "ID"
column read as a field of each FAQ made every FAQ a new one, so an upsert of such an export replaced
the whole index.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Iterable

from .errors import CorpusError, InvalidOptionError

ID_ALIASES = ("id", "faq_id")


@dataclass
class Columns:
    """Column names of a corpus file; None means "use the default / auto-detect"."""

    question: str = "question"
    answer: str = "answer"
    id: str | None = None
    category: str = "category"
    variants: str = "variants"
    variant_sep: str = "|"


def given(columns: Columns | None) -> Columns:
    """``columns`` with each name left None the default (``id`` None: found by its aliases); a name that
    is not a string is refused (``variant_sep=None`` split the variants at every space)."""
    cols = columns or Columns()
    for f in ("question", "answer", "category", "variants", "variant_sep", "id"):
        value = getattr(cols, f)
        if value is not None and (not isinstance(value, str) or not value):
            raise InvalidOptionError(f"Columns.{f} must be a column name (a string), or None for the default, not {value!r}")
    return replace(cols, **{f: getattr(Columns, f) for f in ("question", "answer", "category", "variants", "variant_sep")
                            if getattr(cols, f) is None})


def _key(name: str) -> str:
    return re.sub(r"[\s-]+", "_", name.strip()).casefold()


def find(name: str, keys: Iterable, exact: bool = False) -> str | None:
    """The key of ``keys`` that is the column ``name``: itself, else (unless ``exact``) the one key that
    reads as it up to case, surrounding spaces and inner spaces or hyphens."""
    keys = list(keys)
    if name in keys:
        return name
    alike = [] if exact else [k for k in keys if isinstance(k, str) and _key(k) == _key(name)]
    return alike[0] if len(alike) == 1 else None


def separator_hint(keys: list) -> str | None:
    """What to do with a CSV header read as one column that holds another separator (None: it holds none)."""
    sep = next((c for c in (";", "\t", "|", "\uff0c") if len(keys) == 1 and c in str(keys[0])), None)
    commas = "ASCII commas (a Chinese keyboard types full-width ones)" if sep == "\uff0c" else \
        "commas (a spreadsheet's regional CSV)"
    return ("the header is one column holding tabs: pass --format tsv (or name the file .tsv)" if sep == "\t" else
            f"the header is one column holding {sep!r}: this file separates its fields with {sep!r}, not {commas}. "
            "Save it as CSV with commas, or as tab-separated .tsv" if sep else None)


def resolve(cols: Columns, keys: list, path: str, line: int, tabular: bool) -> tuple[Columns, str | None]:
    """``cols`` as the header ``keys`` name them, and the id column (None: the file has none). ``line``:
    the line an error points at; ``tabular``: CSV or TSV (a JSONL record may lack optional keys)."""
    by_caller = {f: getattr(cols, f) != getattr(Columns, f) for f in ("question", "answer", "category", "variants")}
    named = {f: find(getattr(cols, f), keys, exact=by_caller[f]) for f in by_caller}
    missing = [getattr(cols, f) for f in ("question", "answer") if named[f] is None]
    if missing:
        raise CorpusError(path, line, f"missing column(s) {', '.join(missing)} (found: {', '.join(map(str, keys)) or 'none'}); "
                                      + (separator_hint(keys) or "rename them or pass --question-column / --answer-column"))
    if cols.id is None:
        id_col = next((k for alias in ID_ALIASES if (k := find(alias, keys)) is not None), None)
    elif (id_col := find(cols.id, keys, exact=True)) is None:
        raise CorpusError(path, line, f"id column {cols.id!r} not found (found: {', '.join(map(str, keys))})")
    for option, f in (("--variants-column", "variants"), ("--category-column", "category")):
        if tabular and by_caller[f] and named[f] is None:  # a typo dropped every variant in silence
            raise CorpusError(path, line, f"{option} {getattr(cols, f)!r} not found (found: {', '.join(map(str, keys))})")
    return replace(cols, **{f: named[f] or getattr(cols, f) for f in named}), id_col
