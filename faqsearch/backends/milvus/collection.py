"""The Milvus backend: questions, FAQ fields, transformed and raw vectors in one Milvus collection.

faqsearch keeps what is small and its own (config.json and whitening.npz in the local index
directory, versioned as usual); Milvus holds one row per question: its id, FAQ id, text, source,
the FAQ's answer, category, metadata and content hash, the transformed vector (searched), the raw
encoder vector (so refit and tune need no re-encoding), the pre-tokenised text with Milvus' own
BM25 function for lexical and hybrid search, and two generation numbers. This module holds the
connection and the row I/O; :mod:`.faces` the faces searching reads, :mod:`.backend` the writes.

Consistency without transactions: every row carries ``gen`` (the generation that created it) and
``dead`` (the generation that removed it; ``ALIVE`` while alive), and every read filters
``gen <= G and dead > G`` for the generation G of the reader's config. An edit at G writes new
rows with gen G+1 and marks removed rows dead at G+1, then commits by switching the local index
link to a config of generation G+1 (one atomic rename, as for the embedded backend). Until then
readers see G exactly; a killed edit leaves rows no committed config can see, and the next
writer deletes them (and revives rows it had marked) before it starts. Rows that committed edits
removed stay, so a reader that lags any number of generations reads its own, until the removed rows
pass 5% of the collection (at least 1,000): then the edit is followed by a compaction into a new
collection, as a rebuild.

A rebuild (ingest, refit, tune --apply) writes a new collection ``<base>__g<G>_<random>``, switches
the alias ``<base>`` to it and commits the config that names it; readers of the previous config keep
reading the previous collection, which the next rebuild drops.
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from typing import Any, Iterable, Sequence

import numpy as np

from ...errors import FAQSearchError, MissingExtraError, StorageError, said
from ...lexical import tokenize

log = logging.getLogger(__name__)

ALIVE = 1 << 62
BATCH = 1000
WINDOW = 16384  # Milvus returns at most this many rows per query
RAW_KEPT = 20_000  # raw vectors a reader keeps of the rows it read (about 30 MB at 384 dimensions)
MAX_ANSWER = 65535  # bytes: Milvus VARCHAR limit
INDEX_WAIT_S = 600  # a new collection's indexes are built on empty data: ready at once, or the server is stuck
INDEX_TYPES = {"flat": ("FLAT", {}), "auto": ("FLAT", {}), "hnsw": ("HNSW", {"M": 32, "efConstruction": 200}),
               "ivf": ("IVF_FLAT", {"nlist": 1024}), "ivf-sq8": ("IVF_SQ8", {"nlist": 1024}),
               "ivf-pq": ("IVF_PQ", {"nlist": 1024, "m": 32}), "sq8": ("IVF_SQ8", {"nlist": 1})}
FIELDS = ["id", "faq_id", "text", "source", "answer", "category", "metadata", "content_hash", "faq_seq"]
# Milvus collections tokenise CJK text as they always have (the SQLite store's default is unigrams
# since the zh_lexical measurement; a collection would need to record its mode to change)
CJK = "unigram+bigram"


_expected = threading.local()


class _Expected(logging.Filter):
    """pymilvus logs every failed call with its traceback at ERROR; a lost race for the lock, or a
    collection another machine dropped, is expected here and said (or not) by faqsearch itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_expected, "on", False)


_LOGGER = logging.getLogger("pymilvus.decorators")
if not any(isinstance(f, _Expected) for f in _LOGGER.filters):
    _LOGGER.addFilter(_Expected())


class expected:
    """``with expected():`` a failing pymilvus call in this thread is not logged (the caller handles it)."""

    def __enter__(self) -> None:
        _expected.on = True

    def __exit__(self, *exc) -> None:
        _expected.on = False


def collections(c) -> list[str]:
    """The server's collection names. A listing that meets a collection renamed or dropped meanwhile
    (another machine taking the writers' lock) fails on some servers; it is read again."""
    for attempt in range(10):
        try:
            with expected():
                return list(c.list_collections())
        except Exception:  # noqa: BLE001 - raced with a rename or drop
            if attempt == 9:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


_ROUTED: list[bool] = []  # pymilvus' loggers routed through this process's handlers (once)


def _through_ours(pymilvus_log: logging.Logger) -> None:
    """pymilvus logs through stderr handlers of its own (plain text under `serve --log-format json`), and
    a server outage as a warning with a traceback at each look, 4 a second: faqsearch says an outage
    once itself (8,812 lines in 10 s). Its errors still pass, through this process's own handlers."""
    for handler in list(pymilvus_log.handlers):
        pymilvus_log.removeHandler(handler)
    pymilvus_log.propagate = True
    pymilvus_log.setLevel(max(pymilvus_log.level, logging.ERROR))


def client(uri: str, token: str | None = None):
    try:
        from pymilvus import MilvusClient
    except ImportError as exc:
        raise MissingExtraError(f"the Milvus backend needs pymilvus (and milvus-lite for a local file): "
                                f"pip install 'faqsearch[milvus]' ({exc})") from None
    if not _ROUTED:  # once: handlers an application adds later are its own
        _ROUTED.append(True)
        for name in ("pymilvus", "pymilvus.milvus_client", "pymilvus.bulk_writer"):
            _through_ours(logging.getLogger(name))
    quiet = [logging.getLogger(n) for n in ("pymilvus", "milvus_lite", "grpc")] if "://" not in uri else []
    levels = [lg.level for lg in quiet]
    for lg in quiet:  # a file another process holds fails with tracebacks in their logs: we say it once, below
        lg.setLevel(logging.CRITICAL)
    attempts = 3 if "://" in uri else 1  # a server resetting the shared channel (GOAWAY): try again
    try:
        for attempt in range(attempts):
            try:
                return MilvusClient(uri, token=token or os.environ.get("FAQSEARCH_MILVUS_TOKEN") or "")
            except Exception:  # noqa: BLE001 - the last try's failure is said below
                if attempt == attempts - 1:
                    raise
                time.sleep(0.5)
    except Exception as exc:  # noqa: BLE001 - connection errors come in many classes
        if "://" not in uri:
            folder = os.path.dirname(os.path.abspath(uri))
            if not os.path.isdir(folder):
                raise FAQSearchError(f"cannot open the milvus-lite file {uri}: its folder {folder} does not exist; "
                                     "create it, or give --uri a file in a folder that does") from None
            if not uri.endswith(".db") or os.path.isdir(uri):  # (it was blamed on another process's lock)
                raise FAQSearchError(f"cannot open the milvus-lite file {uri}: --uri takes a file whose name ends in "
                                     ".db (e.g. ./faq.milvus.db), or http://host:19530 for a Milvus server") from None
            raise FAQSearchError(f"cannot open the milvus-lite file {uri} ({said(exc)}). "
                                 "milvus-lite lets one process use a file at a time: stop the other process (a running "
                                 "`faqsearch serve`?), or run a Milvus server for several processes") from None
        raise StorageError(f"cannot reach Milvus at {uri} ({exc}); check that the server runs, and --uri (a local "
                             ".db file for milvus-lite, or http://host:19530 for a server) or the index address "
                             "(milvus://host:19530/NAME)") from None
    finally:
        for lg, level in zip(quiet, levels):
            lg.setLevel(level)


def create_loaded(c, name: str, schema, indexes, **options: Any) -> None:
    """Create collection ``name`` with ``indexes``, wait until Milvus has built them, and load it.

    pymilvus' own wait (``create_collection(index_params=...)``) sleeps 0.5 s before its first look at
    each index: 1.5 s of every build and refit, though an empty collection's indexes are ready at once.
    Here the first look is at once and the pause doubles from 10 ms, up to INDEX_WAIT_S in all."""
    c.create_collection(name, schema=schema, **options)
    c.create_index(name, indexes, sync=False)
    pending = [i.index_name or i.field_name for i in indexes]
    pause, deadline = 0.01, time.monotonic() + INDEX_WAIT_S
    while pending:
        states = {n: c.describe_index(name, n).get("state") for n in pending}
        failed = [n for n, state in states.items() if state == "Failed"]
        if failed:
            raise StorageError(f"Milvus could not build the {', '.join(failed)} index of collection {name}: "
                               "see the Milvus server's log")
        pending = [n for n, state in states.items() if state != "Finished"]
        if pending and time.monotonic() > deadline:
            raise StorageError(f"Milvus did not build the {', '.join(pending)} index of the new collection {name} "
                               f"within {INDEX_WAIT_S} s: check the server's load, then run the command again")
        if pending:
            time.sleep(pause)
            pause = min(2 * pause, 0.5)
    c.load_collection(name)


class Reloading:
    """A client whose reads load a collection the server released and ask again, once: a Milvus server
    that restarted loads no collection until asked, and every search failed ("collection ... is in
    state 'released'") until some other process loaded it. Any failure of a call is a StorageError (HTTP
    503), said in one line: an edit with the server down raised pymilvus' own exception (HTTP 500, and
    no FAQSearchError for a bot to catch)."""

    READS = ("search", "query", "get")

    def __init__(self, inner, uri: str):
        self._inner, self._uri = inner, uri

    def __getattr__(self, name: str):
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr
        if name not in self.READS:
            def call(*args, **kwargs):
                try:
                    return attr(*args, **kwargs)
                except FAQSearchError:
                    raise
                except Exception as exc:  # noqa: BLE001 - connection errors come in many classes
                    raise self._failed(exc, name.replace("_", " "), "this index's collection",
                                       " (an edit that stopped here was not committed)") from None
            return call

        def read(collection_name, *args, **kwargs):
            try:
                try:
                    return attr(collection_name, *args, **kwargs)
                except Exception as exc:  # noqa: BLE001 - pymilvus' error for it has no class of its own
                    if "released" not in str(exc) and "not loaded" not in str(exc).lower():
                        raise
                    log.warning("Milvus had released collection %s (a restart?): loading it again", collection_name)
                    self._inner.load_collection(collection_name)
                    return attr(collection_name, *args, **kwargs)
            except FAQSearchError:
                raise
            except Exception as exc:  # noqa: BLE001 - a server down or failing: said in one line (HTTP 503)
                raise self._failed(exc, f"read collection {collection_name}", f"collection {collection_name}") from None
        return read

    def _failed(self, exc: BaseException, doing: str, collection: str, after: str = "") -> StorageError:
        """A failed call in one line (HTTP 503): the collection gone where the server says so (it answered:
        the index is what is missing), else the server down or failing."""
        if gone(exc):
            return StorageError(f"Milvus at {self._uri} no longer holds {collection} ({said(exc)}): the index was "
                                "dropped there, or the server's data was removed; build it again with faqsearch ingest")
        return StorageError(f"Milvus at {self._uri} failed to {doing} ({said(exc)}); check that the server runs and "
                            f"this machine reaches it, then retry{after}")


def gone(exc: BaseException) -> bool:
    """Whether a Milvus error says the collection does not exist (the server answered)."""
    text = str(exc).lower()
    return "collection" in text and ("not exist" in text or "not found" in text or "can't find" in text)


def _quote(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)


def filter_expr(filters: dict[str, Any] | None) -> str:
    """A Milvus boolean expression for faqsearch filters (category and metadata fields)."""
    parts = []
    for key, value in (filters or {}).items():
        values = list(value) if isinstance(value, (list, tuple, set)) else [value]
        if key == "category":
            parts.append(f"category in [{', '.join(_quote(v) for v in values)}]")
        else:  # JSON paths take no `in`: a disjunction of equalities, or a list holding one of the values
            field = f"metadata[{json.dumps(str(key), ensure_ascii=False)}]"  # Milvus reads no \\u escapes
            quoted = [_quote(v) for v in values]  # json_contains_any, unlike json_contains, takes -1 in its list
            parts.append("(" + " or ".join([*(f"{field} == {q}" for q in quoted),
                                            f"json_contains_any({field}, [{', '.join(quoted)}])"]) + ")")
    return " and ".join(parts)


class Collection:
    """One index's rows in Milvus, read at one generation: the connection and the row I/O."""

    def __init__(self, spec: dict[str, Any], generation: int, dim: int, dim_in: int, next_id: int):
        self.spec = spec
        self.uri = spec["uri"]
        self.collection = spec["collection"]
        self.generation = int(generation)
        self.dim = dim
        self.dim_in = dim_in
        self.next_id = next_id
        self.raw_kept: dict[int, np.ndarray] = {}  # of committed rows (ids below next_id): they never change
        self.client = Reloading(client(self.uri, spec.get("token")), self.uri)
        if not self.client.has_collection(self.collection):
            again = ("--index milvus://HOST:PORT/NAME (the index's address)" if spec.get("shared") else
                     f"--backend milvus --uri {self.uri}")
            raise FAQSearchError(f"Milvus collection {self.collection} is missing at {self.uri} (dropped, or the "
                                 f"server's data was removed); build the index again: faqsearch ingest CORPUS {again}")
        self.client.load_collection(self.collection)

    # -- visibility ---------------------------------------------------------------------------
    def visible(self, extra: str = "", generation: int | None = None) -> str:
        g = self.generation if generation is None else generation
        base = f"gen <= {g} and dead > {g}"
        return f"({base}) and ({extra})" if extra else base

    def query(self, expr: str, fields: Sequence[str], all_rows: bool = False) -> list[dict[str, Any]]:
        """Every visible row (every row with ``all_rows``) matching ``expr``. Read in windows of
        question ids no wider than Milvus' result limit, so nothing is cut off (query iterators are
        not served by milvus-lite)."""
        out: list[dict[str, Any]] = []
        cond = expr if all_rows else self.visible(expr)
        top = max(self.next_id, self.max_stored_id() + 1)
        for lo in range(0, top, WINDOW):
            window = f"id >= {lo} and id < {lo + WINDOW}"
            out += self.client.query(self.collection, filter=f"({window}) and ({cond})" if cond else window,
                                     output_fields=list(fields), limit=WINDOW)
        return out

    def by_ids(self, ids: Sequence[int], fields: Sequence[str], visible: bool = True) -> list[dict[str, Any]]:
        """Rows with these ids (visible ones only, unless ``visible`` is false)."""
        ids = [int(i) for i in ids]
        out: list[dict[str, Any]] = []
        for start in range(0, len(ids), BATCH):
            cond = f"id in {ids[start:start + BATCH]}"
            out += self.client.query(self.collection, filter=self.visible(cond) if visible else cond,
                                     output_fields=list(fields), limit=BATCH)
        return out

    def keep_raw(self, rows: Iterable[dict[str, Any]]) -> None:
        """Keep the raw vectors of committed rows read anyway (the questions of the FAQs a search found),
        so that scoring them reads no row twice; the oldest half goes where more than RAW_KEPT are kept."""
        kept = self.raw_kept
        for r in rows:
            if int(r["id"]) < self.next_id and r.get("raw") is not None:
                kept[int(r["id"])] = np.asarray(r["raw"], dtype=np.float32)
        if len(kept) > RAW_KEPT:
            for i in list(kept)[:len(kept) - RAW_KEPT // 2]:
                kept.pop(i, None)

    def max_stored_id(self) -> int:
        """The largest id in the collection, uncommitted rows of a killed edit included."""
        hi = self.next_id + 1
        while self.client.query(self.collection, filter=f"id >= {hi}", output_fields=["id"], limit=1):
            hi *= 2
        return hi

    def count_dead(self) -> int:
        """Rows committed edits removed, kept for readers of older generations."""
        res = self.client.query(self.collection, filter=f"dead <= {self.generation}", output_fields=["count(*)"])
        return int(res[0]["count(*)"])

    def count(self, expr: str = "") -> int:
        res = self.client.query(self.collection, filter=self.visible(expr), output_fields=["count(*)"])
        return int(res[0]["count(*)"])

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # noqa: BLE001
            pass

    # -- writes -------------------------------------------------------------------------------
    @staticmethod
    def create_collection(spec: dict[str, Any], generation: int, dim: int, dim_in: int, index_type: str) -> str:
        """A new, empty collection for a rebuild; returns its name (the alias still names the old one)."""
        from pymilvus import DataType, Function, FunctionType

        c = client(spec["uri"], spec.get("token"))
        name = f"{spec['base']}__g{generation}_{secrets.token_hex(3)}"
        kind = index_type.lower()
        if kind not in INDEX_TYPES:
            raise FAQSearchError(f"unknown --index-type {index_type!r} for Milvus; choose one of "
                                 f"{', '.join(INDEX_TYPES)}")
        schema = c.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("faq_id", DataType.VARCHAR, max_length=512)
        schema.add_field("text", DataType.VARCHAR, max_length=8192)
        schema.add_field("lex", DataType.VARCHAR, max_length=16384, enable_analyzer=True,
                         analyzer_params={"tokenizer": "standard"})
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_field("source", DataType.VARCHAR, max_length=32)
        schema.add_field("answer", DataType.VARCHAR, max_length=MAX_ANSWER)
        schema.add_field("category", DataType.VARCHAR, max_length=512, nullable=True)
        schema.add_field("metadata", DataType.JSON, nullable=True)
        schema.add_field("content_hash", DataType.VARCHAR, max_length=64)
        schema.add_field("faq_seq", DataType.INT64)
        schema.add_field("gen", DataType.INT64)
        schema.add_field("dead", DataType.INT64)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        schema.add_field("raw", DataType.FLOAT_VECTOR, dim=dim_in)
        schema.add_function(Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["lex"],
                                     output_field_names=["sparse"]))
        ix = c.prepare_index_params()
        mtype, params = INDEX_TYPES[kind]
        ix.add_index("vector", index_type=mtype, metric_type="IP", params=params)
        ix.add_index("raw", index_type="FLAT", metric_type="IP")
        ix.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        create_loaded(c, name, schema, ix, consistency_level="Strong")
        c.close()
        return name

    @staticmethod
    def rows(question_rows: Iterable[tuple], faqs: dict[str, Any], vectors: np.ndarray, raw: np.ndarray,
             generation: int) -> list[dict[str, Any]]:
        """Milvus rows from (id, faq_id, text, source) and FAQ fields ({faq_id: (answer, category, metadata,
        hash, seq)})."""
        out = []
        for (qid, fid, text, source), v, r in zip(question_rows, vectors, raw):
            answer, category, metadata, chash, seq = faqs[fid]
            if len(answer.encode("utf-8")) > MAX_ANSWER:
                raise FAQSearchError(f"FAQ {fid}: the answer is over {MAX_ANSWER} bytes, Milvus' limit for a text "
                                     "field; shorten it or use the embedded backend")
            out.append({"id": int(qid), "faq_id": fid, "text": text, "lex": " ".join(tokenize(text, CJK)) or "_",
                        "source": source, "answer": answer, "category": category, "metadata": metadata or None,
                        "content_hash": chash, "faq_seq": int(seq), "gen": int(generation), "dead": ALIVE,
                        "vector": np.asarray(v, dtype=np.float32).tolist(),
                        "raw": np.asarray(r, dtype=np.float32).tolist()})
        return out

    def insert(self, rows: list[dict[str, Any]], collection: str | None = None) -> None:
        name = collection or self.collection
        for start in range(0, len(rows), BATCH):
            self.client.insert(name, rows[start:start + BATCH])

    def kill(self, ids: Sequence[int], generation: int) -> None:
        """Mark rows removed at ``generation`` (readers of earlier generations still see them)."""
        rows = self.by_ids(ids, _ALL, visible=False)
        for r in rows:
            r["dead"] = int(generation)
            r.pop("sparse", None)
        for start in range(0, len(rows), BATCH):
            self.client.upsert(self.collection, rows[start:start + BATCH])

    def repair(self) -> None:
        """Before an edit (under the writer lock): undo what a killed edit left. Rows that committed
        edits removed stay for readers of older generations until a compaction copies the live rows."""
        g = self.generation
        self.client.delete(self.collection, filter=f"gen > {g}")
        marked = self.query(f"dead > {g} and dead < {ALIVE}", _ALL, all_rows=True)
        for r in marked:
            r["dead"] = ALIVE
            r.pop("sparse", None)
        for start in range(0, len(marked), BATCH):
            self.client.upsert(self.collection, marked[start:start + BATCH])


_ALL = ["id", "faq_id", "text", "lex", "source", "answer", "category", "metadata", "content_hash", "faq_seq", "gen",
        "dead", "vector", "raw"]
