"""Read FAQ corpora and other tabular inputs (CSV, TSV, JSONL), validating as we go.

Every problem in an input file is a :class:`CorpusError` naming the file, the line and what
to do, raised before anything is built.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from .columns import Columns, find, given, resolve, separator_hint
from .errors import CorpusError
from .filters import check_metadata
from .text import answer_key, clean_text, is_blank, not_utf8_fix, read_alike, utf16_order

log = logging.getLogger(__name__)

FORMATS = ("csv", "tsv", "jsonl")
EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
FIELD_LIMIT = 64 * 1024 * 1024  # largest CSV/TSV field accepted (the csv module's default is 128 KiB)
_SIGNATURES = [  # (leading bytes, what the file is, what to do)
    (b"\x1f\x8b", "a gzip-compressed file", "decompress it first (gunzip FILE)"),
    (b"PK\x03\x04", "a ZIP archive (an Excel .xlsx or OpenDocument file is one)",
     "export the sheet as CSV (UTF-8) from your spreadsheet program"),
    (b"\xd0\xcf\x11\xe0", "an old Excel/Office file (.xls)", "export the sheet as CSV (UTF-8)"),
    (b"%PDF", "a PDF document", "export the FAQ as CSV, TSV or JSONL"),
    (b"SQLite format 3\x00", "an SQLite database", "export the table as CSV (sqlite-utils rows DB TABLE --csv)"),
    (b"\xff\xfe\x00\x00", "UTF-32 text", "re-save it as UTF-8 (iconv -f utf-32 -t utf-8 FILE > NEW)"),
    (b"\xff\xfe", "UTF-16 text", "re-save it as UTF-8 (iconv -f utf-16 -t utf-8 FILE > NEW.tsv: Excel's \"Unicode "
                                 "Text\" is tab-separated; or save the sheet as \"CSV UTF-8\")"),
    (b"\xfe\xff", "UTF-16 text", "re-save it as UTF-8 (iconv -f utf-16 -t utf-8 FILE > NEW)"),
]


@dataclass
class FAQ:
    """One answer with all the questions that lead to it."""

    id: str
    answer: str
    questions: list[str] = field(default_factory=list)
    category: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    line: int = 0  # first line of the FAQ in its file, for error messages


def faq_hash(faq: "FAQ") -> str:
    """Content hash of an FAQ (answer, category, metadata, questions), used to diff re-read corpora."""
    payload = json.dumps([faq.answer, faq.category, faq.metadata, sorted(faq.questions)], ensure_ascii=False,
                         sort_keys=True, default=str)
    return hashlib.sha1(payload.encode("utf-8")).hexdigest()


_JQ = ("; write one object per line: jq -c '.[]' FILE > NEW.jsonl for a JSON array, jq -c . FILE > NEW.jsonl for "
       "pretty-printed objects (pandas: to_json(orient='records', lines=True))")


def detect_format(path: str, fmt: str | None = None) -> str:
    if fmt:
        if fmt not in FORMATS:
            raise CorpusError(path, None, f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
        return fmt
    ext = os.path.splitext(path)[1].lower()
    if ext not in EXTENSIONS:
        if not path.startswith(("-", "<")) and not os.path.exists(path):  # a missing file says so, whatever its name
            raise CorpusError(path, None, "file not found; check the path")
        if os.path.isfile(path):  # an .xlsx or a PDF is said for what it is (renaming it .csv was the advice)
            with _readable(path), open(path, "rb") as fh:
                _check_head(path, fh.read(4096))
            if ext == ".json":
                raise CorpusError(path, None, "is JSON; faqsearch reads JSON Lines (.jsonl: one object a line)" + _JQ)
        raise CorpusError(path, None, f"cannot tell the format from the extension {ext or '(none)'!r}; name the file .csv, "
                          f".tsv or .jsonl (ingest, add, update and upsert also take --format {{{','.join(FORMATS)}}})")
    return EXTENSIONS[ext]


@contextmanager
def _readable(path: str) -> Iterator[None]:
    """Opening and reading ``path`` in this block fails with what to do: missing, a directory, not permitted..."""
    if not os.path.exists(path):
        raise CorpusError(path, None, "file not found; check the path")
    if os.path.isdir(path):
        raise CorpusError(path, None, "is a directory, expected a CSV, TSV or JSONL file")
    try:
        yield
    except PermissionError:
        raise CorpusError(path, None, "cannot be read: permission denied; check its permissions "
                                      "(ls -l) or run as a user who may read it") from None
    except OSError as exc:
        raise CorpusError(path, None, f"cannot be read ({exc.strerror}); check the file") from None


def _read_bytes(path: str) -> bytes:
    with _readable(path), open(path, "rb") as fh:
        return fh.read()


def _open_text(path: str, newline: str):
    """The file as a text stream, read as it is parsed (a large corpus is never held whole); its start checked first."""
    with _readable(path):
        with open(path, "rb") as fh:
            _check_head(path, fh.read(4096))
        return open(path, encoding="utf-8-sig", newline=newline)


def _check_head(path: str, data: bytes) -> None:
    for magic, what, fix in _SIGNATURES:
        if data.startswith(magic):
            raise CorpusError(path, None, f"is {what}, not {'UTF-8' if what.startswith('UTF') else 'a text file'}; {fix}")
    head = data[:4096]
    if b"\x00" in head:  # no UTF-8 text holds one; Thai or Japanese UTF-16 holds few (its commas, line ends)
        order = utf16_order(head)
        if order is not None:
            raise CorpusError(path, None, "looks like UTF-16 text without a byte-order mark; "
                                          f"re-save it as UTF-8 (iconv -f {order} -t utf-8 FILE > NEW)")
        if head.count(b"\x00") > len(head) // 8:
            raise CorpusError(path, None, "is a binary file, not CSV, TSV or JSONL text; export the FAQ as one of those")


def _read_text(path: str, data: bytes | None = None) -> str:
    """The file's text (``data``: its bytes when they came from elsewhere, e.g. stdin), refused with
    what to do when it is not UTF-8 text."""
    if data is None:
        data = _read_bytes(path)
    _check_head(path, data)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        start, end = data.rfind(b"\n", 0, exc.start) + 1, data.find(b"\n", exc.start)
        col = exc.start - start + 1
        raise CorpusError(path, line, f"byte 0x{data[exc.start]:02x} at column {col} is not valid UTF-8: "
                          + not_utf8_fix(data[start:end if end >= 0 else len(data)], whole=data)) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different ({"answer": "a", "answer": "b"} kept the second in silence)."""
    if len(obj := dict(pairs)) < len(pairs):
        twice = next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i]))
        raise ValueError(f"the key {twice!r} is given twice; give each field once")
    return obj


def header_line(path: str, fmt: str | None, line: int) -> int:
    """The line a column error points at: a CSV or TSV file's header (line 1), a JSONL record's own line."""
    try:
        return line if detect_format(str(path), fmt) == "jsonl" else 1
    except CorpusError:  # stdin, named by --format
        return 1 if fmt in ("csv", "tsv") else line


def read_rows(path: str, fmt: str | None = None, data: bytes | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, row)`` for every record of a CSV, TSV or JSONL file (``data``: its bytes,
    when they came from stdin). Rows are dicts keyed by the header (CSV/TSV) or the JSON object keys
    (JSONL). Ragged rows, bad JSON and non-object lines are errors with their line number.
    """
    path = str(path)
    if data is None and os.path.isdir(path):
        raise CorpusError(path, None, "is a directory, expected a CSV, TSV or JSONL file")
    if data is None and os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        data = _read_bytes(path)  # a pipe (/dev/stdin, a FIFO) reads once: opened twice, it lost its first 4 KB
    fmt = detect_format(path, fmt)
    # lines end at \n only in JSONL: U+2028, U+2029 and U+0085 are valid inside JSON strings
    stream = io.StringIO(_read_text(path, data), newline="") if data is not None else \
        _open_text(path, "\n" if fmt == "jsonl" else "")
    try:
        yield from _parse(path, fmt, stream)
    except UnicodeDecodeError:  # met while streaming: the whole file's check says where and what to do
        stream.close()
        _read_text(path)
        raise
    finally:
        stream.close()


def _parse(path: str, fmt: str, stream) -> Iterator[tuple[int, dict[str, Any]]]:
    if fmt == "jsonl":
        lines = stream.getvalue().split("\n") if isinstance(stream, io.StringIO) else stream
        for n, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
            except json.JSONDecodeError as exc:
                raise CorpusError(path, n, f"invalid JSON ({exc.msg}); each line must be one JSON object" + _JQ) from None
            except ValueError as exc:  # NaN, Infinity: not JSON, and no answer could be returned as JSON; a key twice
                fix = "" if "twice" in str(exc) else "; write numbers, or the value as a string"
                raise CorpusError(path, n, f"invalid JSON ({exc}){fix}") from None
            except RecursionError:
                raise CorpusError(path, n, "invalid JSON (nested too deeply); flatten this line's values") from None
            if not isinstance(obj, dict):
                raise CorpusError(path, n, "each line must be a JSON object like {\"question\": ..., \"answer\": ...}" + _JQ)
            yield n, obj
        return
    if csv.field_size_limit() < FIELD_LIMIT:
        csv.field_size_limit(FIELD_LIMIT)
    if fmt == "csv":  # RFC 4180: quoted fields may hold commas, quotes and newlines
        reader = csv.reader(stream, delimiter=",", strict=True)
    else:  # TSV (IANA text/tab-separated-values): a line is a row, a quote an ordinary character (but _unquoted)
        reader = csv.reader(stream, delimiter="\t", quoting=csv.QUOTE_NONE)
    try:
        header = _unquoted(next(reader)) if fmt == "tsv" else next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        stream.seek(0)
        first = stream.readline()
        sep = next((c for c in (";", "\t", "|", "\uff0c") if f'"{c}"' in first), None)  # "id";"question";"answer"
        raise CorpusError(path, 1, f"cannot parse the header ({exc})" + (
            "; it looks like JSONL (a JSON object per line): pass --format jsonl" if first.lstrip().startswith("{") else
            f"; its quoted names are separated by {sep!r}, not commas: save it as CSV with commas, or as "
            "tab-separated .tsv" if sep else "")) from None
    header = [h.strip() for h in header]
    if not any(header):  # "has 3 fields but the header has 0" on line 2 said nothing of the blank line 1
        raise CorpusError(path, 1, "the first line is blank: the header (the column names, e.g. question,answer) "
                                   "must be on line 1; delete the blank line(s) above it")
    if header[0].startswith("{"):
        raise CorpusError(path, 1, "this looks like JSONL (a JSON object per line), not a table: pass --format jsonl "
                                   "(or name the file .jsonl)")
    named = [h for h in header if h]  # a spreadsheet's export may end its header with empty cells
    if len(set(named)) != len(named):
        dup = sorted({h for h in named if named.count(h) > 1})
        raise CorpusError(path, 1, f"duplicate column name(s) {', '.join(dup)}; rename them")
    unnamed = [i for i, h in enumerate(header) if not h]
    start = reader.line_num + 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if "field larger than field limit" in str(exc):
                raise CorpusError(path, start, f"a field is over {FIELD_LIMIT // 2**20} MiB: an unclosed quote "
                                               "usually runs on to the end of the file; check this row's quotes") from None
            raise CorpusError(path, start, f"cannot parse this row ({exc}); check its quoting") from None
        if row and any(cell.strip() for cell in row):
            row = _unquoted(row) if fmt == "tsv" else row
            if len(row) != len(header):
                raise CorpusError(
                    path, start,
                    f"has {len(row)} fields but the header has {len(header)}; " + (
                        (separator_hint(header) or "quote fields that contain the delimiter or fix the row") if fmt == "csv" else
                        "TSV reads a line as a row: a tab or line break inside a field splits it, quoted or not (save the file as CSV, "
                        "whose quotes may hold them, or fix the row)"),
                )
            if [c.strip(" \ufeff").casefold() for c in row] == [h.strip(" \ufeff").casefold() for h in header]:
                raise CorpusError(path, start, "repeats the header (two exports joined into one file?); delete this line")
            filled = [i + 1 for i in unnamed if row[i].strip()]
            if filled:
                raise CorpusError(path, start, f"column {filled[0]} has a value but no name in the header; name "
                                               "the column, or clear its cells")
            yield start, {h: cell for h, cell in zip(header, row) if h}
        start = reader.line_num + 1


def _unquoted(cells: list[str]) -> list[str]:
    """TSV cells as pandas, Excel and Python's csv write them: a cell quoted whole, inner quotes doubled, is unquoted."""
    return [c[1:-1].replace('""', '"') if len(c) > 1 and c[0] == c[-1] == '"' and '"' not in c[1:-1].replace('""', "")
            else c for c in cells]


def _cell(value: Any, path: str = "", line: int = 0, column: str = "", multiline: bool = False) -> str:
    """A scalar field as clean text; lists and objects are refused (they would be stored as their repr)."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        raise CorpusError(path, line, f"{column!r} is a JSON {'list' if isinstance(value, list) else 'object'}, "
                                      "expected a string; write it as one string")
    return clean_text(value if isinstance(value, str) else str(value), multiline)


def _variants(value: Any, sep: str, path: str = "", line: int = 0, column: str = "") -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return [c for c in (_cell(v, path, line, column) for v in value) if not is_blank(c)]
    text = _cell(value, path, line, column)  # the default "|" also as Chinese keyboards type it, "｜"
    parts = (text.replace("\uff5c", "|") if sep == "|" else text).split(sep)
    return [c for c in (clean_text(v) for v in parts) if not is_blank(c)]


_RECORD_KEYS = ("id", "answer", "questions", "question", "category", "metadata")


def _from_mapping(record: Mapping[str, Any]) -> FAQ:
    """An FAQ from a dict: id, answer, questions (a list) and/or question (one text), category, metadata."""
    unknown = sorted(str(k) for k in record if k not in _RECORD_KEYS)
    if unknown:
        raise CorpusError("<records>", None, f"FAQ {record.get('id')!r}: unknown field(s) {', '.join(unknown)}; "
                                             f"an FAQ record has {', '.join(_RECORD_KEYS)}")
    questions = record.get("questions") or []
    questions = [questions] if isinstance(questions, str) else questions
    if record.get("question") is not None:
        questions = [record["question"], *questions] if isinstance(questions, (list, tuple)) else questions
    faq_id, answer = record.get("id"), record.get("answer")
    if isinstance(faq_id, int) and not isinstance(faq_id, bool):  # as a JSONL row's number
        faq_id = str(faq_id)
    elif faq_id is None and isinstance(answer, str) and not is_blank(clean_text(answer)):
        faq_id = _auto_id(clean_text(answer, multiline=True))  # as a file row without an id
    metadata = record.get("metadata")
    return FAQ(faq_id, answer, questions, record.get("category"),  # type: ignore[arg-type]
               {} if metadata is None else metadata)


def check_faq(faq: FAQ | Mapping[str, Any]) -> FAQ:
    """Validate and normalise an FAQ given as a record (library use), like a corpus row: an
    :class:`FAQ`, or a dict with its fields ('question' for one text, 'questions' for a list)."""
    if isinstance(faq, Mapping):
        faq = _from_mapping(faq)
    elif not isinstance(faq, FAQ):
        raise CorpusError("<records>", None, f"an FAQ record is a faqsearch.FAQ or a dict, got {type(faq).__name__} "
                                             f"{str(faq)[:60]!r}")
    where = f"FAQ {faq.id!r}"
    if not isinstance(faq.id, str) or is_blank(clean_text(faq.id)):
        raise CorpusError("<records>", None, f"{where}: the id must be a non-blank string")
    check_id(clean_text(faq.id), "<records>", None)
    if not isinstance(faq.answer, str) or is_blank(clean_text(faq.answer)):
        raise CorpusError("<records>", None, f"{where}: the answer must be a non-blank string")
    if not isinstance(faq.questions, (list, tuple)) or not all(isinstance(q, str) for q in faq.questions):
        raise CorpusError("<records>", None, f"{where}: questions must be a list of strings")
    questions = list(dict.fromkeys(q for q in map(clean_text, faq.questions) if not is_blank(q)))
    if not questions:
        raise CorpusError("<records>", None, f"{where}: needs at least one question with visible characters")
    if faq.category is not None and not isinstance(faq.category, str):
        raise CorpusError("<records>", None, f"{where}: the category must be a string")
    if faq.metadata is not None and not isinstance(faq.metadata, dict):
        raise CorpusError("<records>", None, f"{where}: metadata must be a JSON object (a dict)")
    check_metadata(faq.metadata or {}, "<records>", None, where)
    return FAQ(clean_text(faq.id), clean_text(faq.answer, multiline=True), questions,
               clean_text(faq.category) if faq.category else None, dict(faq.metadata or {}), faq.line)


def check_id(faq_id: str, path: str, line: int | None) -> None:
    """An id of dots alone ("." or "..") is no path segment a URL keeps: browsers and HTTP clients
    resolve it away, so the FAQ could not be shown, edited or removed over HTTP."""
    if faq_id and set(faq_id) == {"."}:
        raise CorpusError(path, line, f"FAQ id {faq_id!r} is dots alone, which a URL cannot address (a browser "
                                      "resolves /faqs/.. away); give it a letter or digit")


def _auto_id(answer: str) -> str:
    return "a" + hashlib.sha1(answer_key(answer).encode("utf-8")).hexdigest()[:10]


def read_corpus(path: str, columns: Columns | None = None, fmt: str | None = None,
                data: bytes | None = None) -> list[FAQ]:
    """Read a FAQ corpus into FAQ records, one per distinct id (or per distinct answer).

    Rows sharing an id are questions of one FAQ; rows without an id that share an answer are
    grouped too (their id is a stable hash of the answer). Extra phrasings may be given in one
    row, in a ``variants`` column separated by ``|`` (or as a JSON list, or as a list-valued
    ``question`` in JSONL).
    """
    path = str(path)
    cols = given(columns)  # None: the default name
    if cols.question == cols.answer:  # every answer was its question, the real answer kept as metadata
        raise CorpusError(path, None, f"the question and the answer are both column {cols.question!r}; give "
                                      "--question-column and --answer-column two different columns")
    faqs: dict[str, FAQ] = {}
    by_answer: dict[str, str] = {}  # an answer's first FAQ with a given id: rows without one join it, wherever they are
    made: set[str] = set()  # ids made from answers
    seen_columns = False
    n_rows = 0
    known: dict[str, set[str]] = {}  # each FAQ's questions, for constant-time duplicate checks
    for line, row in read_rows(path, fmt, data):
        n_rows += 1
        if not seen_columns:
            tabular = detect_format(path, fmt) != "jsonl"  # (read_rows knew it) JSONL keys vary by line
            cols, id_col = resolve(cols, list(row), path, header_line(path, fmt, line), tabular)
            seen_columns = True
        elif cols.question not in row or cols.answer not in row:
            raise CorpusError(path, line, f"record has no {cols.question!r} or {cols.answer!r} field")
        raw_q = row.get(cols.question)
        questions = (_variants(raw_q, "\x00", path, line, cols.question) if isinstance(raw_q, list)
                     else [_cell(raw_q, path, line, cols.question)])
        questions += _variants(row.get(cols.variants), cols.variant_sep, path, line, cols.variants)
        used = {cols.question, cols.answer, cols.category, cols.variants, id_col}
        shaped = {} if tabular else {k: row[k] for k, kind in (("questions", list), ("metadata", dict))
                                     if k not in used and isinstance(row.get(k), kind)}  # the library's record shape
        questions += _variants(shaped.get("questions"), "\x00", path, line, "questions")
        answer = _cell(row.get(cols.answer), path, line, cols.answer, multiline=True)
        if not questions or is_blank(questions[0]):
            raise CorpusError(path, line, f"empty {cols.question!r} (no visible characters); every row needs a "
                                          "question (or remove the row)")
        if is_blank(answer):
            raise CorpusError(path, line, f"empty {cols.answer!r} (no visible characters); every row needs an "
                                          "answer (or remove the row)")
        if id_col and isinstance(row.get(id_col), bool):  # it became "True"
            raise CorpusError(path, line, f"{id_col!r} is {str(row[id_col]).lower()}; an id is a string or a number")
        faq_id = _cell(row.get(id_col), path, line, id_col or "id") if id_col else ""
        check_id(faq_id, path, line)
        if not faq_id and not (faq_id := by_answer.get(answer_key(answer), "")):
            faq_id = _auto_id(answer)
            made.add(faq_id)
        category = _cell(row.get(cols.category), path, line, cols.category) or None
        faq = faqs.get(faq_id)
        fields = {k: v for k, v in row.items() if k not in used and k not in shaped and v not in (None, "")}
        for key in (k for k in fields if k in shaped.get("metadata", {}) and shaped["metadata"][k] != fields[k]):
            log.warning("%s:%d: FAQ %s has %s %r in its metadata object but %r as a field; keeping the field's",
                        path, line, faq_id, key, shaped["metadata"][key], fields[key])
        meta = {**shaped.get("metadata", {}), **fields}  # a JSONL "metadata" object holds fields, "questions" phrasings
        check_metadata(meta, path, line, f"FAQ {faq_id!r}")
        if faq is None:
            faq = faqs[faq_id] = FAQ(faq_id, answer, [], category, meta, line)
            if faq_id not in made:
                by_answer.setdefault(answer_key(answer), faq_id)
        elif answer_key(faq.answer) != answer_key(answer):
            raise CorpusError(
                path, line,
                f"id {faq_id!r} was given a different answer on line {faq.line}; "
                "one id must have one answer: give this row its own id or make the answers equal",
            )
        else:
            if answer != faq.answer:  # one answer as rows are grouped, but a reordered file stored the other spelling
                log.warning("%s:%d: FAQ %s has its answer spaced otherwise here than on line %d; keeping the first",
                            path, line, faq_id, faq.line)
            if category and faq.category and category != faq.category:
                log.warning("%s:%d: FAQ %s has category %r here but %r on line %d; keeping the first",
                            path, line, faq_id, category, faq.category, faq.line)
        if category and not faq.category:
            faq.category = category
        for key, value in meta.items():  # later rows of an FAQ: their fields were dropped without a word
            if key not in faq.metadata:
                faq.metadata[key] = value
            elif faq.metadata[key] != value:
                log.warning("%s:%d: FAQ %s has %s %r here but %r on line %d; keeping the first",
                            path, line, faq_id, key, value, faq.metadata[key], faq.line)
        have = known.setdefault(faq_id, set())
        for q in questions:
            if q not in have:
                have.add(q)
                faq.questions.append(q)
    if not faqs:
        raise CorpusError(path, None, "the corpus is empty: it needs a header and at least one question/answer row")
    for auto in [faqs[i] for i in made if i in faqs and answer_key(faqs[i].answer) in by_answer]:
        owner = faqs[by_answer[answer_key(auto.answer)]]  # rows without an id above their FAQ's first row
        owner.questions += [q for q in auto.questions if q not in known[owner.id]]
        owner.category, owner.metadata = owner.category or auto.category, {**auto.metadata, **owner.metadata}
        del faqs[auto.id]
    _warn_shared(path, faqs.values())
    log.info("read %d rows, %d FAQs from %s", n_rows, len(faqs), path)
    return list(faqs.values())


def _warn_shared(path: str, faqs) -> None:
    """Warn about questions that two FAQs share (up to case, width, spacing and punctuation): the index cannot tell those FAQs
    apart by them, and which one answers such a question is a tie."""
    owner: dict[tuple[str, ...], tuple[str, FAQ]] = {}
    shared = [(q, faq, *owner[k]) for faq in faqs for q in faq.questions  # each question read once (a million?)
              if owner.setdefault(k := read_alike(q), (q, faq))[1] is not faq]
    if shared:
        q, b, first, a = shared[0]
        log.warning("%s:%s: %d question(s) belong to more than one FAQ, up to case, width, spacing and punctuation (first: %r of FAQ %s from "
                    "line %s, and %r of FAQ %s from line %s); the index cannot tell those FAQs apart by them and "
                    "either may answer: give each question to one FAQ", path, b.line, len({read_alike(s[0]) for s in shared}), first, a.id, a.line,
                    q, b.id, b.line)


TEXT_COLUMNS = ("question", "text", "query", "sentence")
PAIR_TEXT_COLUMNS = ("sentence1", "sentence2")


def read_texts(path: str, column: str | None = None, fmt: str | None = None) -> list[str]:
    """Read a list of texts: a .txt file (one per line), one column of a CSV/TSV/JSONL file, or both
    sentences of a sentence-pair file (sentence1, sentence2)."""
    path = str(path)
    if os.path.splitext(path)[1].lower() in (".txt", ".text") and fmt is None:
        texts = [clean_text(t) for t in _read_text(path).split("\n")]
    else:
        texts = []
        col: str | tuple[str, ...] | None = column
        for line, row in read_rows(path, fmt):
            if col is None:
                col = next((k for c in TEXT_COLUMNS if (k := find(c, row)) is not None), None)
                if col is None and PAIR_TEXT_COLUMNS[0] in row and PAIR_TEXT_COLUMNS[1] in row:
                    col = PAIR_TEXT_COLUMNS  # a sentence-pair file: both sides are texts
                if col is None:
                    raise CorpusError(path, header_line(path, fmt, line), f"no text column: expected one of {', '.join(TEXT_COLUMNS)} "
                                                  f"(found: {', '.join(row)}); rename the column (or give the texts as a .txt file, one a line)")
            for c in (col if isinstance(col, tuple) else (col,)):
                if c not in row:
                    raise CorpusError(path, header_line(path, fmt, line), f"column {c!r} not found (found: {', '.join(row)})")
                texts.append(_cell(row[c], path, line, c))
    texts = [t for t in texts if not is_blank(t)]
    if not texts:
        raise CorpusError(path, None, "no texts found in the file")
    return texts
