"""Search filters: ``{"category": "x", "product": ["a", "b"]}`` keeps the FAQs whose category or
metadata field holds one of the given values. Checked once (:func:`check_filters`) before any
backend sees them, so a value no backend can compare is an error naming the field, and turned into
SQL for the embedded store here (the Milvus backend makes its own expression)."""
from __future__ import annotations

import json
import math
import numbers
from typing import Any

from .errors import CorpusError, InvalidOptionError
from .text import clean_text

MAX_METADATA_DEPTH = 32  # levels of objects and lists in an FAQ's metadata

INT64 = (-(2 ** 63), 2 ** 63 - 1)  # what SQLite (and Milvus) can hold of an integer


def check_filters(filters: dict[str, Any] | None) -> dict[str, list[Any]] | None:
    """The filters with every field's accepted values as a list; InvalidOptionError for a field
    that is not a non-empty string, or a value that is not a string, a finite number or a boolean
    (integers within 64 bits). None or {} for no filter."""
    if not filters:
        return None
    if not isinstance(filters, dict):
        raise InvalidOptionError(f"filters must be a mapping of field to value(s), got {type(filters).__name__}")
    out = {}
    for key, value in filters.items():
        if not isinstance(key, str) or not key:
            raise InvalidOptionError(f"a filter field must be a non-empty string, got {key!r}")
        values = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
        if not values:
            raise InvalidOptionError(f"filter {key!r}: give at least one accepted value")
        out[key] = [_plain(key, v) for v in values]
        if key == "category":  # stored as read (NFC, spaces trimmed): " Shipping " or a decomposed "Café" matched none
            out[key] = [clean_text(v) if isinstance(v, str) else v for v in out[key]]
    return out


def _plain(key: str, v: Any) -> Any:
    """A filter value as the plain Python value SQLite binds (numpy numbers become int or float)."""
    if isinstance(v, (bool, str)):
        return v
    if type(v).__name__ == "bool_":  # numpy's
        return bool(v)
    if isinstance(v, numbers.Integral):
        if not INT64[0] <= int(v) <= INT64[1]:
            raise InvalidOptionError(f"filter {key!r}: {v} is outside the 64-bit integers that metadata "
                                     "values are compared as; give it as a string if it is an identifier")
        return int(v)
    if isinstance(v, numbers.Real):
        if not math.isfinite(float(v)):
            raise InvalidOptionError(f"filter {key!r}: {v} is not a value metadata can hold")
        return float(v)
    raise InvalidOptionError(f"filter {key!r}: values are strings, numbers or booleans, got {type(v).__name__}")


def filter_sql(filters: dict[str, Any] | None) -> tuple[str, list[Any]]:
    """SQL conditions on the FAQ (alias ``f``) and their arguments, for filters checked here (a
    second check of filters already checked costs nothing). A metadata field is looked up by its key
    as written (json_each: a JSON path cannot quote a key holding '"')."""
    parts, args = [], []
    for key, values in (check_filters(filters) or {}).items():
        if key == "category":
            parts.append(f"f.category in ({','.join('?' * len(values))})")
            args += values
        else:  # JSON types kept: true is not 1, false is not 0, "1" is not 1 (1 and 1.0 are one number);
            # a field holding a list matches where the list holds an accepted value ("tags": ["refund", "card"])
            alts, items = [_typed(v, "m") for v in values], [_typed(v, "e") for v in values]
            parts.append(f"exists (select 1 from json_each(f.metadata) m where m.key = ? and "
                         f"(({' or '.join(sql for sql, _ in alts)}) or (m.type = 'array' and exists (select 1 from "
                         f"json_each(m.value) e where {' or '.join(sql for sql, _ in items)}))))")
            args.append(key)
            args += [a for _, arg in alts + items for a in arg]
    return " and ".join(parts), args


def _typed(value: Any, row: str) -> tuple[str, list[Any]]:
    """The SQL test of one accepted value against the json_each row named ``row``, and its arguments."""
    if isinstance(value, bool):
        return f"{row}.type = '{'true' if value else 'false'}'", []
    if isinstance(value, (int, float)):
        return f"({row}.type in ('integer', 'real') and {row}.value = ?)", [value]
    return f"({row}.type = 'text' and {row}.value = ?)", [value]


def check_metadata(meta: dict[str, Any], path: str, line: int | None, where: str) -> None:
    """Metadata is plain JSON (no NaN or Infinity, integers within 64 bits) nested at most
    MAX_METADATA_DEPTH levels: deeper values were stored, then every answer that carried them failed
    to serialise (RecursionError)."""
    try:
        json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise CorpusError(path, line, f"{where}: metadata must be plain JSON values ({type(exc).__name__}: "
                                      f"{str(exc)[:120]}); NaN and Infinity are not JSON") from None
    level = [meta]
    for depth in range(MAX_METADATA_DEPTH + 1):
        values = [v for x in level for v in (x.values() if isinstance(x, dict) else x)]
        big = next((v for v in values if isinstance(v, int) and not isinstance(v, bool)
                    and not INT64[0] <= v <= INT64[1]), None)
        if big is not None:  # SQLite and Milvus hold 64-bit integers: no filter could ever match it
            raise CorpusError(path, line, f"{where}: metadata value {big} is beyond the 64-bit integers an index holds; "
                                          "give it as a string if it is an identifier")
        level = [v for v in values if isinstance(v, (dict, list))]
        if not level:
            return
    raise CorpusError(path, line, f"{where}: metadata is nested more than {MAX_METADATA_DEPTH} levels deep; "
                                  "flatten it")
