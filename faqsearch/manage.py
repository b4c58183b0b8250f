"""Managing the indexes of a home folder: list them, rename one, drop one (with its Milvus collections);
the listing of one index's FAQs that `faqsearch list --json` and GET /indexes/NAME/faqs both return; and
its FAQs written back out as a corpus file (`faqsearch export`)."""
from __future__ import annotations

import logging
import os
import secrets
import shutil
from typing import Any

from .corpus import FAQ, FORMATS
from .results import USER_SOURCES
from .text import count
from .index import config as cfg
from .backends import backend_for
from .errors import FAQSearchError, IndexNotFoundError, IndexPathError, InvalidOptionError
from .index.config import foreign_entries
from .index.directory import Writer, layout, resolve
from .index.address import cached, remote_of
from .index.format import QUERY_LOG, SQLITE_SIDE, Counts, legacy_query_log


def with_first_question(store, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """FAQ rows (``store.list_faqs``), each given ``question``: its first question (the one people know it by)."""
    for row in rows:
        questions = (store.faq(row["id"]) or {}).get("questions") or [{"text": ""}]
        row["question"] = questions[0]["text"]
    return rows


def list_faqs(store, limit: int | None = None, offset: int = 0, category: str | None = None,
              contains: str | None = None) -> dict[str, Any]:
    """``{"faqs": [...], "total": N}``: id, category, answer, number of questions and first question of each
    FAQ of the page, in index order, and how many FAQs match whatever the page; the JSON of `faqsearch
    list --json` and GET /indexes/NAME/faqs (without ``q``)."""
    page = store.list_faqs(limit, offset, category, contains)
    if category is None and not contains:
        total = store.counts()["faqs"]
    elif limit is None and (page or not offset):
        total = offset + len(page)
    else:
        total = len(store.list_faqs(None, 0, category, contains))
    return {"faqs": with_first_question(store, page), "total": total}


def _size(path: str) -> int:
    """Bytes on disk under ``path``, a file hard-linked into several versions counted once (as du does)."""
    total, seen = 0, set()
    for root, _, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def describe(path: str, sync_remote: bool = True) -> dict[str, Any]:
    """One index: name, path, counts, encoder, backend, size on disk, last commit (or what is wrong).
    An index in Milvus is described as Milvus holds it now, or with ``sync_remote`` False as this
    machine's cache last took it from there (no call to the server)."""
    out: dict[str, Any] = {"name": os.path.basename(path), "path": path}
    if (remote := remote_of(path)) is not None:
        out["address"] = remote.address
    try:
        version = resolve(path, sync_remote)
        config = cfg.load_config(version, path)
    except FAQSearchError as exc:
        return {**out, "error": str(exc)}
    counts = config.counts or Counts()
    return {**out, "faqs": counts.faqs, "questions": counts.questions,
            "encoder": config.encoder.name, "backend": config.backend_kind,
            "generation": config.generation or 0, "modified": config.modified or config.created,
            "bytes": _size(os.path.realpath(path) if layout(path) == "link" else path)}


def info(index: str | None = None) -> dict[str, Any]:
    """What `faqsearch info` reports of an index, read from its files (no model loads): its path, the
    live version's config, how its store tokenises for BM25 ('lexical', embedded backend), the token
    states it keeps, the fusion weights it answers with and how many FAQs have three or more
    questions (embedded backend; None where its store cannot be read)."""
    path = cfg.resolve_index_path(index)
    version = resolve(path)
    typed = cfg.load_config(version, path)
    config = typed.to_dict()  # the JSON, with what info adds
    if typed.backend_kind != "milvus":
        config["lexical"] = cfg.lexical_settings(version)
    kept = backend_for(typed).token_states(version, typed)
    config["token_states"] = None if kept is None else kept.summary()
    config.update({k: v for k, v in cfg.fusion_weights(typed).items() if v is not None})  # what it answers with
    if typed.backend_kind != "milvus":  # what `learn` needs ten of (SQLite: one quick count)
        config["faqs_with_3_questions"] = _faqs_with_3(path)
    remote = remote_of(path)  # an index in Milvus: its address, and this machine's cache as the path
    return {"path": path, **({"address": remote.address} if remote is not None else {}), **config}


PATH_KEYS = ("corpus",)  # values that are paths even when relative ("sample_data/faq.csv")


def without_paths(value: Any, key: str = "") -> Any:
    """``value`` with every absolute path in it, and the relative ones of PATH_KEYS, cut to its last part
    (a corpus or model file, a Milvus database): what a server shows of an index, never where things
    live on it."""
    if isinstance(value, dict):
        return {k: without_paths(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [without_paths(v) for v in value]
    if isinstance(value, str) and (os.path.isabs(value) or key in PATH_KEYS):
        return os.path.basename(value.rstrip("/\\")) or value
    return value


def served_info(name: str, engine) -> dict[str, Any]:
    """What the service reports of the index it serves as ``name`` (GET /indexes/NAME): the engine's
    snapshot's :meth:`info` (the version it answers from), named, without the server's paths."""
    about = engine.info()
    del about["path"]
    return {"name": name, **without_paths(about)}


def list_indexes(home: str | None = None) -> list[dict[str, Any]]:
    """Every index in a home folder (default $FAQSEARCH_HOME or ./indexes), by name, then the indexes in
    Milvus this home caches (used from here by their address), by address, as the cache last took
    them (the servers are not called: one that is down does not hold the listing up). A folder given
    that does not exist is an error; empty folders are not indexes and are left out."""
    if home is not None and not os.path.isdir(home):
        raise IndexNotFoundError(f"{home} is not a folder; give the folder that holds the indexes (--home)")
    home = home or cfg.home()
    if not os.path.isdir(home):
        return []
    out = []
    for name in sorted(os.listdir(home)):
        path = os.path.join(home, name)
        kind = layout(path)
        if name.startswith(".") or kind not in ("current", "plain", "link", "empty"):
            continue
        if kind == "empty" and not os.listdir(path):  # a folder of nothing: no ingest ever started there
            continue
        out.append(describe(path))
    # the indexes in Milvus used from this home: those whose cache holds a version taken from there
    remotes = [p for p in cached(home) if remote_of(p) is not None and layout(p) in ("current", "plain", "link")]
    return out + sorted((describe(path, sync_remote=False) for path in remotes), key=lambda row: row["address"])


def check_droppable(path: str) -> None:
    """An IndexNotFoundError where there is no index to drop (before `drop` asks to delete it)."""
    if layout(path) in ("none", "foreign"):
        raise IndexNotFoundError(f"no index at {path}; see `faqsearch indexes`")
    others = [] if os.path.islink(path) else foreign_entries(path) + [
        e for e in ("lost+found",) if os.path.isdir(f := os.path.join(path, e)) and os.listdir(f)]  # files recovered
    if others:
        raise IndexPathError(f"{path} also holds files faqsearch did not write ({', '.join(others[:5])}"
                             f"{' ...' if len(others) > 5 else ''}); move them away, then drop the index")


def drop_index(path: str) -> dict[str, Any]:
    """Delete an index (under its writer lock, so no edit is cut in half), with its Milvus collections."""
    check_droppable(path)
    info = describe(path)
    if os.path.islink(path) and layout(path) == "current":  # a link a person made: it goes, the index it names
        os.remove(path)  # stays, and so do its Milvus collections (dropping them broke that index)
        return info
    if remote_of(path) is not None and layout(path) == "empty":  # Milvus has no such index: touch nothing there
        resolve(path)  # says so (IndexNotFoundError), or finds it committed meanwhile
    with Writer(path) as writer:
        if writer.config is not None:
            backend_for(writer.config).drop(writer.config)
        parent, name = os.path.split(path)
        gone = os.path.join(parent, f".{name}.dropped-{secrets.token_hex(4)}")
        os.rename(path, gone)  # the name is free at once; readers with open files keep them
    shutil.rmtree(gone, ignore_errors=True)
    legacy_log = legacy_query_log(path)
    for suffix in ("", *SQLITE_SIDE):
        if os.path.exists(legacy_log + suffix):
            os.remove(legacy_log + suffix)
    return info


def rename_index(path: str, new_path: str) -> str:
    """Give an index another name (its directory moves in one rename; Milvus collections keep theirs)."""
    if layout(path) in ("none", "foreign"):
        raise IndexNotFoundError(f"no index at {path}; see `faqsearch indexes`")
    if os.path.islink(path) and layout(path) == "current":  # moved elsewhere, a relative link would dangle
        raise IndexPathError(f"{path} is a symbolic link to {os.path.realpath(path)}: rename or move the link itself "
                             "(ln -s), or rename the index it names")
    if (remote := remote_of(path)) is not None:
        raise FAQSearchError(f"{remote.address} is named by its address in Milvus and cannot be renamed; build it "
                             "again under the new name (faqsearch ingest ... --index milvus://HOST:PORT/NEW)")
    name = os.path.basename(str(new_path))
    if not name.strip() or name.strip(".") == "" or name != name.strip():
        raise InvalidOptionError(f"{name!r} is no index name: give one with a letter or digit, "
                                 "and no space at either end (no command could reach the index by it)")
    if os.path.lexists(new_path):
        raise FAQSearchError(f"{new_path} exists already; choose another name or drop it first")
    parent = os.path.dirname(os.path.abspath(new_path))
    if not os.path.isdir(parent):
        raise FAQSearchError(f"cannot move the index to {new_path}: the folder {parent} does not exist (a new name "
                             "with a '/' is a path; give a plain name to keep it beside the others)")
    with Writer(path):  # moves an older layout to the directory layout first, so one rename moves it all
        os.rename(path, new_path)
    legacy_log = legacy_query_log(path)
    if os.path.exists(legacy_log):
        os.rename(legacy_log, os.path.join(new_path, QUERY_LOG))
    return new_path


def _faqs_with_3(path: str) -> int | None:
    """How many FAQs have three or more questions (None where the store cannot be read: info still
    reports the rest, as it did before it counted)."""
    import sqlite3

    from .index.snapshot import faqs_with, open_store

    try:
        store = open_store(path)
    except (FAQSearchError, OSError, sqlite3.Error):
        return None
    try:
        return faqs_with(store, 3)
    except (FAQSearchError, OSError, sqlite3.Error):
        return None
    finally:
        store.close()


# ---- an index's FAQs as a corpus file ----------------------------------------------------------------
_FORMULA = ("=", "+", "-", "@")  # a spreadsheet may run a cell starting so as a formula
_COLUMNS = ("id", "faq_id", "question", "answer", "category", "variants")  # what a corpus reader's columns mean


def export_faqs(store, everything: bool = False) -> list[FAQ]:
    """The FAQs of one version of an index (``store``: its snapshot's, so an edit meanwhile is not half in it)
    as corpus records: answer, category, metadata and the questions a corpus file speaks for (ingested or
    added: an upsert of the export changes nothing), or with ``everything`` the phrasings people assigned
    and the generated ones too (to move the index elsewhere). An FAQ holding none of the first keeps all."""
    from .edits.plan import EDITABLE

    out, users = [], 0
    for row in store.list_faqs(None):
        faq = store.faq(row["id"]) or {"questions": []}
        taken = [q for q in faq["questions"] if everything or q["source"] in EDITABLE] or faq["questions"]
        users += sum(q["source"] in USER_SOURCES for q in taken)
        out.append(FAQ(row["id"], faq["answer"], [q["text"] for q in taken], faq.get("category"), faq.get("metadata") or {}))
    if users:  # a file has no column for where a question came from
        logging.getLogger(__name__).warning(
            "the file holds %d users' queries that feedback or approve made phrasings: an index ingested from it "
            "counts them as written questions, shown to anyone who asks (not to keys only); erase personal text "
            "from the file first", users)
    return out


def corpus_bytes(faqs: list[FAQ], fmt: str) -> tuple[bytes, list[str]]:
    """``faqs`` written as a corpus file that `faqsearch ingest` and `upsert` read back alike (CSV: a row per
    question, metadata fields as columns; JSONL: an object per FAQ, metadata as an object), and warnings
    (metadata that CSV and TSV write as text, cells a spreadsheet may run as formulas)."""
    import csv
    import io
    import json

    if fmt not in FORMATS:
        raise InvalidOptionError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "jsonl":
        lines = [json.dumps({"id": f.id, "question": f.questions[0], **({"questions": f.questions[1:]} if f.questions[1:]
                                                                        else {}), "answer": f.answer,
                             **({"category": f.category} if f.category else {}),
                             **({"metadata": f.metadata} if f.metadata else {})}, ensure_ascii=False) for f in faqs]
        return ("\n".join(lines) + "\n").encode("utf-8") if lines else b"", []
    keys = list(dict.fromkeys(k for f in faqs for k in f.metadata))
    taken = [k for k in keys if k.casefold() in _COLUMNS or k != k.strip() or not k.strip()]
    if taken:  # a field named "variants" came back as questions; " Question " as "Question", "" not at all
        raise InvalidOptionError(f"metadata field {taken[0]!r} would not be read back as itself from a {fmt.upper()} "
                                 "header: export as .jsonl (metadata kept as an object)")
    typed = sum(1 for f in faqs if any(not isinstance(v, str) for v in f.metadata.values()))
    rows = [["id", "question", "answer", "category", *keys]]
    for f in faqs:
        meta = [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in (f.metadata.get(k, "") for k in keys)]
        rows += [[f.id, q, f.answer, f.category or "", *meta] for q in f.questions]
    cells = [c for r in rows[1:] for c in r]
    if fmt == "tsv" and any(("\t" in c or "\n" in c or "\r" in c) for c in cells):
        raise InvalidOptionError("a field holds a tab or a line break, which TSV cannot hold: export as CSV or JSONL")
    empty = sum(1 for f in faqs if any(v == "" for v in f.metadata.values()))
    warnings = [f"{count(typed, 'FAQ has', 'FAQs have')} metadata that is not text (numbers, lists, true/false): "
                f"{fmt.upper()} writes it as text, so an upsert of this file changes them; export as .jsonl to keep it"
                ] if typed else []
    warnings += [f"{count(empty, 'FAQ has', 'FAQs have')} a metadata field holding empty text, which {fmt.upper()} reads "
                 "back as no field; export as .jsonl to keep it"] if empty else []
    formulas = sum(1 for c in cells if c.startswith(_FORMULA))
    if formulas:
        warnings.append(f"{formulas} cells start with = + - or @: a spreadsheet may run them as formulas; open the file "
                        "as text (or import it with those columns as text)")
    if fmt == "tsv":  # a line a row; a cell quoted whole is written quoted, so that the reader's unquoting gives it back
        quoted = lambda c: f'"{c.replace(chr(34), 2 * chr(34))}"' if len(c) > 1 and c[0] == c[-1] == '"' else c  # noqa: E731
        return "".join("\t".join(map(quoted, r)) + "\n" for r in rows).encode("utf-8"), warnings
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode("utf-8"), warnings
