"""The Milvus backend: questions, FAQ fields, transformed and raw vectors in one Milvus collection.

The engine keeps what is small and its own (config.json and whitening.npz in the local index
directory, versioned as usual); Milvus holds one row per question: its id, FAQ id, text, source,
the FAQ's answer, category, metadata and content hash, the transformed vector (searched), the raw
encoder vector (so refit and tune need no re-encoding), the pre-tokenised text with Milvus' own
BM25 function for lexical and hybrid search, and two generation numbers.

Consistency without transactions: every row carries ``gen`` (the generation that created it) and
``dead`` (the generation that removed it; ``ALIVE`` while alive), and every read filters
``gen <= G and dead > G`` for the generation G of the reader's config. An edit at G writes new
rows with gen G+1 and marks removed rows dead at G+1, then commits by switching the local index
link to a config of generation G+1 (one atomic rename, as for the embedded backend). Until then
readers see G exactly; a killed edit leaves rows no committed config can see, and the next
writer deletes them (and revives rows it had marked) before it starts. Rows dead before the
previous generation are deleted for good by later edits.

A rebuild (ingest, refit, tune --apply) writes a new collection ``<base>__g<G>_<random>``, switches
the alias ``<base>`` to it and commits the config that names it; readers of the previous config keep
reading the previous collection, which the next rebuild drops.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import secrets
from typing import Any, Iterable, Sequence

import numpy as np

from ..errors import FAQSearchError, MissingExtraError
from ..lexical import tokenize

log = logging.getLogger(__name__)

ALIVE = 1 << 62
BATCH = 1000
WINDOW = 16384  # Milvus returns at most this many rows per query
MAX_ANSWER = 65535  # bytes: Milvus VARCHAR limit
INDEX_TYPES = {"flat": ("FLAT", {}), "auto": ("FLAT", {}), "hnsw": ("HNSW", {"M": 32, "efConstruction": 200}),
               "ivf": ("IVF_FLAT", {"nlist": 1024}), "ivf-sq8": ("IVF_SQ8", {"nlist": 1024}),
               "ivf-pq": ("IVF_PQ", {"nlist": 1024, "m": 32}), "sq8": ("IVF_SQ8", {"nlist": 1})}
FIELDS = ["id", "faq_id", "text", "source", "answer", "category", "metadata", "content_hash", "faq_seq"]
# Milvus collections tokenise CJK text as they always have (the SQLite store's default is unigrams
# since the zh_lexical measurement; a collection would need to record its mode to change)
CJK = "unigram+bigram"


class _LiteNoise(logging.Filter):
    """milvus-lite's embedded server does not implement AllocTimestamp, which pymilvus calls while it
    waits for an index; the call fails harmlessly but logs a traceback on every collection created."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Method not implemented" not in record.getMessage() and "mvccTs" not in record.getMessage()


def client(uri: str, token: str | None = None):
    if "://" not in uri:
        for name in ("grpc._server", "pymilvus"):
            lg = logging.getLogger(name)
            if not any(isinstance(f, _LiteNoise) for f in lg.filters):
                lg.addFilter(_LiteNoise())
    try:
        from pymilvus import MilvusClient
    except ImportError as exc:
        raise MissingExtraError(f"the Milvus backend needs pymilvus (and milvus-lite for a local file): "
                                f"pip install 'faqsearch[milvus]' ({exc})") from None
    try:
        return MilvusClient(uri, token=token or "")
    except Exception as exc:  # noqa: BLE001 - connection errors come in many classes
        if "://" not in uri:
            raise FAQSearchError(f"cannot open the milvus-lite file {uri} ({exc}). milvus-lite lets one process "
                                 "use a file at a time: stop the other process (a running `faqsearch serve`?), or "
                                 "run a Milvus server for several processes") from None
        raise FAQSearchError(f"cannot reach Milvus at {uri} ({exc}); check --uri (a local .db file for "
                             "milvus-lite, or http://host:19530 for a server)") from None


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
        else:  # JSON paths take no `in`: a disjunction of equalities
            field = f"metadata[{json.dumps(str(key))}]"
            parts.append("(" + " or ".join(f"{field} == {_quote(v)}" for v in values) + ")")
    return " and ".join(parts)


class MilvusBackend:
    """One index's rows in Milvus, read at one generation."""

    def __init__(self, spec: dict[str, Any], generation: int, dim: int, dim_in: int, next_id: int):
        self.spec = spec
        self.uri = spec["uri"]
        self.collection = spec["collection"]
        self.generation = int(generation)
        self.dim = dim
        self.dim_in = dim_in
        self.next_id = next_id
        self.client = client(self.uri, spec.get("token"))
        if not self.client.has_collection(self.collection):
            raise FAQSearchError(f"Milvus collection {self.collection} is missing at {self.uri}; re-run "
                                 "faqsearch ingest --backend milvus")
        self.client.load_collection(self.collection)
        self.store = MilvusStore(self)
        self.index = MilvusIndex(self)

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

    def max_stored_id(self) -> int:
        """The largest id in the collection, uncommitted rows of a killed edit included."""
        hi = self.next_id + 1
        while self.client.query(self.collection, filter=f"id >= {hi}", output_fields=["id"], limit=1):
            hi *= 2
        return hi

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
        c.create_collection(name, schema=schema, index_params=ix, consistency_level="Strong")
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
        """Before an edit (under the writer lock): undo what a killed edit left, drop long-dead rows."""
        g = self.generation
        self.client.delete(self.collection, filter=f"gen > {g}")
        marked = self.query(f"dead > {g} and dead < {ALIVE}", _ALL, all_rows=True)
        for r in marked:
            r["dead"] = ALIVE
            r.pop("sparse", None)
        for start in range(0, len(marked), BATCH):
            self.client.upsert(self.collection, marked[start:start + BATCH])
        self.client.delete(self.collection, filter=f"dead < {g}")  # invisible to this and the previous generation


_ALL = ["id", "faq_id", "text", "lex", "source", "answer", "category", "metadata", "content_hash", "faq_seq", "gen",
        "dead", "vector", "raw"]


class MilvusIndex:
    """The VectorIndex face of the backend (what the engine's search calls)."""

    supports_removal = True

    def __init__(self, backend: MilvusBackend):
        self.b = backend
        self.factory = f"milvus:{backend.spec.get('index_type', 'flat')}"
        self.nprobe = None
        self.ef_search = None
        self._len: int | None = None

    @property
    def dim(self) -> int:
        return self.b.dim

    def __len__(self) -> int:
        if self._len is None:
            self._len = self.b.count()
        return self._len

    def max_id(self) -> int:
        return self.b.next_id - 1

    def search(self, queries: np.ndarray, k: int, ids: Any = None) -> tuple[np.ndarray, np.ndarray]:
        k = max(1, min(int(k), 16384))
        expr = f"id in {[int(i) for i in ids]}" if ids is not None else ""
        hits = self.b.client.search(self.b.collection, data=np.asarray(queries, dtype=np.float32).tolist(),
                                    anns_field="vector", limit=k, filter=self.b.visible(expr),
                                    output_fields=["id"], search_params={"metric_type": "IP"})
        scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        out = np.full((len(queries), k), -1, dtype=np.int64)
        for i, row in enumerate(hits):
            for j, h in enumerate(row[:k]):
                scores[i, j] = h["distance"]
                out[i, j] = h["id"]
        return scores, out

    def search_distinct(self, queries: np.ndarray, k: int, filters: dict[str, Any] | None = None
                        ) -> tuple[list[list[tuple[int, float]]], dict[int, dict[str, Any]]]:
        """Top-k distinct FAQs per query in one Milvus call (grouping search on faq_id), with the rows
        of their best questions: what the embedded backend gets by widening a FAISS search."""
        fields = ["id", "faq_id", "text", "source", "answer", "category", "metadata"]
        hits = self.b.client.search(self.b.collection, data=np.asarray(queries, dtype=np.float32).tolist(),
                                    anns_field="vector", limit=max(1, min(int(k), 16384)),
                                    filter=self.b.visible(filter_expr(filters)), output_fields=fields,
                                    search_params={"metric_type": "IP"}, group_by_field="faq_id")
        out, rows = [], {}
        for row in hits:
            out.append([(int(h["id"]), float(h["distance"])) for h in row])
            for h in row:
                rows[int(h["id"])] = _row(h["entity"] | {"id": h["id"]})
        return out, rows

    def reconstruct(self, ids: np.ndarray) -> np.ndarray:
        if not len(ids):
            return np.empty((0, self.dim), np.float32)
        rows = {r["id"]: r["vector"] for r in self.b.by_ids(ids, ["id", "vector"], visible=False)}
        return np.array([rows[int(i)] for i in ids], dtype=np.float32)


def _row(r: dict[str, Any]) -> dict[str, Any]:
    """A Milvus row as the store's question row (joined with its FAQ)."""
    return {"question_id": r["id"], "faq_id": r["faq_id"], "question": r["text"], "source": r["source"],
            "answer": r["answer"], "category": r["category"], "metadata": r["metadata"] or {}}


class MilvusStore:
    """The Store face of the backend (what the engine's reads, edits and listing call)."""

    def __init__(self, backend: MilvusBackend):
        self.b = backend
        self.path = f"{backend.uri}#{backend.collection}"

    def close(self) -> None:
        self.b.close()

    def question_ids(self, filters: dict[str, Any]) -> list[int]:
        return [r["id"] for r in self.b.query(filter_expr(filters), ["id"])]

    def lexical(self, texts: Sequence[str], n: int, filters: dict[str, Any] | None = None) -> list[list[tuple[int, float]]]:
        """BM25 by Milvus' own full-text search over faqsearch's tokens (CJK n-grams included)."""
        queries = [" ".join(tokenize(t, CJK)) for t in texts]
        out: list[list[tuple[int, float]]] = [[] for _ in texts]
        todo = [i for i, q in enumerate(queries) if q]
        if not todo:
            return out
        hits = self.b.client.search(self.b.collection, data=[queries[i] for i in todo], anns_field="sparse", limit=n,
                                    filter=self.b.visible(filter_expr(filters)), output_fields=["id"],
                                    search_params={"metric_type": "BM25"})
        for i, row in zip(todo, hits):
            out[i] = [(int(h["id"]), abs(float(h["distance"]))) for h in row]
        return out

    def questions(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        rows = self.b.by_ids(ids, ["id", "faq_id", "text", "source", "answer", "category", "metadata"])
        return {r["id"]: _row(r) for r in rows}

    def all_questions(self) -> list[tuple[int, str, str]]:
        return sorted((r["id"], r["faq_id"], r["text"]) for r in self.b.query("", ["id", "faq_id", "text"]))

    def raw_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, raw vectors) of every visible question, in id order."""
        rows = sorted(self.b.query("", ["id", "raw"]), key=lambda r: r["id"])
        ids = np.array([r["id"] for r in rows], dtype=np.int64)
        raw = np.array([r["raw"] for r in rows], dtype=np.float32).reshape(len(rows), self.b.dim_in)
        return ids, raw

    def _faq_rows(self, expr: str = "") -> list[dict[str, Any]]:
        return self.b.query(expr, ["id", "faq_id", "text", "source", "answer", "category", "metadata", "content_hash",
                                   "faq_seq"])

    def faq(self, faq_id: str) -> dict[str, Any] | None:
        rows = sorted(self._faq_rows(f"faq_id == {_quote(faq_id)}"), key=lambda r: r["id"])
        if not rows:
            return None
        f = rows[0]
        return {"id": f["faq_id"], "answer": f["answer"], "category": f["category"], "metadata": f["metadata"] or {},
                "content_hash": f["content_hash"],
                "questions": [{"id": r["id"], "text": r["text"], "source": r["source"]} for r in rows]}

    def faq_fields(self, faq_ids: Iterable[str]) -> dict[str, tuple]:
        ids = list(faq_ids)
        if not ids:
            return {}
        out = {}
        for r in self._faq_rows(f"faq_id in {json.dumps(ids, ensure_ascii=False)}"):
            out.setdefault(r["faq_id"], (r["answer"], r["category"], r["metadata"], r["content_hash"], r["faq_seq"]))
        return out

    def list_faqs(self, limit: int | None = None, offset: int = 0, category: str | None = None,
                  contains: str | None = None) -> list[dict[str, Any]]:
        rows = self._faq_rows(f"category == {_quote(category)}" if category else "")
        faqs: dict[str, dict[str, Any]] = {}
        texts: dict[str, list[str]] = {}
        for r in sorted(rows, key=lambda r: (r["faq_seq"], r["id"])):
            f = faqs.setdefault(r["faq_id"], {"id": r["faq_id"], "category": r["category"], "answer": r["answer"],
                                              "questions": 0})
            f["questions"] += 1
            texts.setdefault(r["faq_id"], []).append(r["text"])
        out = list(faqs.values())
        if contains:
            low = contains.lower()
            out = [f for f in out if low in f["id"].lower() or low in f["answer"].lower()
                   or any(low in t.lower() for t in texts[f["id"]])]
        return out[offset:offset + limit] if limit is not None else out[offset:]

    def faq_hashes(self) -> dict[str, str | None]:
        return {r["faq_id"]: r["content_hash"] for r in self.b.query("", ["faq_id", "content_hash"])}

    def faq_ids(self, source: str | None = None) -> set[str]:
        return {r["faq_id"] for r in self.b.query(f"source == {_quote(source)}" if source else "", ["faq_id"])}

    def question_count(self) -> int:
        return self.b.count()

    def source_counts(self, exclude: str | None = None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.b.query("", ["source"]):
            counts[r["source"]] = counts.get(r["source"], 0) + 1
        return {k: v for k, v in counts.items() if k != exclude}

    def counts(self) -> dict[str, int]:
        per: dict[str, int] = {}
        for r in self.b.query("", ["faq_id"]):
            per[r["faq_id"]] = per.get(r["faq_id"], 0) + 1
        return {"faqs": len(per), "questions": sum(per.values()), "max_questions_per_faq": max(per.values(), default=0)}


# ---- what the engine calls ------------------------------------------------------------------
def build_spec(path: str, uri: str | None, collection: str | None, index_type: str) -> dict[str, Any]:
    """The backend spec recorded in config.json (validated before anything is encoded)."""
    import os
    import re

    if not uri:
        raise FAQSearchError("--backend milvus needs --uri: a local file such as ./faq.milvus.db (milvus-lite) "
                             "or http://host:19530 (a Milvus server)")
    if index_type.lower() not in INDEX_TYPES:
        raise FAQSearchError(f"unknown --index-type {index_type!r} for Milvus; choose one of {', '.join(INDEX_TYPES)}")
    if "://" not in uri:
        uri = os.path.abspath(uri)
    base = collection or "faqsearch_" + re.sub(r"[^A-Za-z0-9_]", "_", os.path.basename(path))
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,200}", base):
        raise FAQSearchError(f"--collection {base!r}: use letters, digits and underscores, starting with a letter")
    client(uri).close()  # unreachable or missing extra: fail now
    return {"kind": "milvus", "uri": uri, "base": base, "index_type": index_type.lower()}


def write_collection(spec: dict[str, Any], generation: int, white, raw: np.ndarray, store, progress: bool) -> dict:
    """Fill a new collection from an in-memory store of the build and switch the alias to it."""
    from ..encoders.base import progress_bar

    questions = store.all_questions()
    seq = {f["id"]: i for i, f in enumerate(store.list_faqs())}
    fields = {}
    for fid in seq:
        f = store.faq(fid)
        fields[fid] = (f["answer"], f["category"], f["metadata"], f["content_hash"], seq[fid])

    def batches():
        with progress_bar(len(questions), progress, "writing to Milvus") as bar:
            for start in range(0, len(questions), BATCH):
                chunk = questions[start:start + BATCH]
                block = np.asarray(raw[start:start + len(chunk)])
                yield MilvusBackend.rows([(q[0], q[1], q[2], "corpus") for q in chunk], fields,
                                         white.transform(block), block, generation)
                bar.update(len(chunk))

    return _new_collection(spec, generation, white.dim_out, raw.shape[1], batches())


def _new_collection(spec: dict[str, Any], generation: int, dim: int, dim_in: int,
                    batches: Iterable[list[dict[str, Any]]]) -> dict[str, Any]:
    """Create a collection, insert the row batches, seal and load it, switch the alias; returns the
    spec naming it. On any failure the new collection is dropped and the alias left alone."""
    name = MilvusBackend.create_collection(spec, generation, dim, dim_in, spec["index_type"])
    c = client(spec["uri"], spec.get("token"))
    try:
        for rows in batches:
            if rows:
                c.insert(name, rows)
        c.flush(name)  # sealed segments are searched through the index: 10x faster than growing ones
        c.load_collection(name)
        previous = _switch_alias(c, spec["base"], name)
    except BaseException:
        c.drop_collection(name)
        c.close()
        raise
    c.close()
    return {**spec, "collection": name, "previous": previous, "generation": generation}


def _switch_alias(c, base: str, collection: str) -> str | None:
    before = next((n for n in c.list_collections() if base in c.list_aliases(n).get("aliases", [])), None)
    if before is None:
        c.create_alias(collection, base)
    else:
        c.alter_alias(collection, base)
    return before


def drop_stale(spec: dict[str, Any]) -> list[str]:
    """After a rebuild is committed: drop this index's collections other than the current and previous."""
    c = client(spec["uri"], spec.get("token"))
    keep = {spec["collection"], spec.get("previous")}
    dropped = [n for n in c.list_collections() if n.startswith(f"{spec['base']}__g") and n not in keep]
    for n in dropped:
        c.drop_collection(n)
    c.close()
    return dropped


def open_backend(config: dict[str, Any]) -> MilvusBackend:
    return MilvusBackend(config["backend"], int(config.get("generation", 0)), int(config["dim_out"]),
                         int(config["dim_in"]), int(config.get("next_question_id", 1)))


def edit(engine, plan, source: str, progress: bool) -> tuple[int, int]:
    """Apply an edit plan at generation G+1: new rows, removed rows marked dead, then the config commit."""
    import os

    from .. import config as cfg
    from ..corpus import faq_hash
    from ..indexdir import next_version
    from ..whitening import Moments

    b: MilvusBackend = engine.index.b
    g, g1 = b.generation, b.generation + 1
    b.repair()
    store: MilvusStore = engine.store
    removed: list[int] = []
    for fid in plan.removed_faqs:
        f = store.faq(fid)
        removed += [q["id"] for q in f["questions"]] if f else []
    removed += [int(i) for i in plan.removed_questions]
    # FAQ fields live on every question row: a changed FAQ's rows are replaced (copied, new ids)
    changed = {f.id: f for f in plan.changed_faqs}
    keep_rows = []
    if changed:
        for r in b.query(f"faq_id in {json.dumps(list(changed), ensure_ascii=False)}", _ALL):
            if r["id"] not in set(removed):
                keep_rows.append(r)
    next_id = max(b.next_id, int(engine.config.get("next_question_id", 1)))
    # the listing order of new FAQs: after every stored one (a scan, so only when FAQs are added)
    seq_base = max([r["faq_seq"] for r in b.query("", ["faq_seq"])] or [-1]) + 1 if plan.new_faqs else 0
    fields = store.faq_fields({fid for fid, _ in plan.new_questions} - set(changed))
    for i, f in enumerate(plan.new_faqs):
        fields[f.id] = (f.answer, f.category, f.metadata, faq_hash(f), seq_base + i)
    for f in plan.changed_faqs:
        old_seq = next((r["faq_seq"] for r in keep_rows if r["faq_id"] == f.id), seq_base + len(plan.new_faqs))
        fields[f.id] = (f.answer, f.category, f.metadata, faq_hash(f), old_seq)
    # a changed FAQ's surviving rows are copied first, so its questions keep their order
    copies = []
    copy_id = next_id
    for r in sorted(keep_rows, key=lambda r: r["id"]):
        answer, category, metadata, chash, seq = fields[r["faq_id"]]
        copies.append({**{k: v for k, v in r.items() if k != "sparse"}, "id": copy_id, "answer": answer,
                       "category": category, "metadata": metadata or None, "content_hash": chash, "faq_seq": seq,
                       "gen": g1, "dead": ALIVE})
        copy_id += 1
    new_q = [(f.id, q) for f in plan.new_faqs for q in f.questions] + list(plan.new_questions)
    new_rows = [(copy_id + i, fid, text, source) for i, (fid, text) in enumerate(new_q)]
    raw_new = engine.encoder.encode([r[2] for r in new_rows], progress=progress) if new_rows else \
        np.empty((0, b.dim_in), np.float32)
    moments = Moments.from_arrays(engine.whitening.moments.to_arrays())
    if engine.config["whitening"].get("fitted_on") == "corpus questions":
        if removed:
            gone = b.by_ids(removed, ["raw"], visible=False)
            moments.remove(np.array([r["raw"] for r in gone], dtype=np.float32).reshape(-1, b.dim_in))
        moments.update(raw_new)
    w = engine.whitening
    white = dataclasses.replace(w, moments=moments)
    rows = copies + MilvusBackend.rows(new_rows, fields, white.transform(raw_new), raw_new, g1)
    copy_id += len(new_rows)
    path = engine.path
    with next_version(path, "edit") as tmp:
        b.insert(rows)
        b.kill(removed + [r["id"] for r in keep_rows], g1)
        b.client.flush(b.collection)
        white.save(os.path.join(tmp, cfg.FILES["whitening"]))
        config = {**engine.config, **plan.config}
        config["generation"] = g1
        config["next_question_id"] = copy_id
        b.generation = g1
        config["counts"] = MilvusStore(b).counts()
        b.generation = g
        config["modified"] = cfg.new_config()["created"]
        cfg.save_config(tmp, config)
    return len(new_rows), len(removed)


def rebuild(engine, white, progress: bool = False) -> dict[str, Any]:
    """A new collection with every row re-transformed (refit, tune --apply); returns the new spec."""
    b: MilvusBackend = engine.index.b
    rows = sorted(b.query("", _ALL), key=lambda r: r["id"])
    spec = {k: v for k, v in b.spec.items() if k not in ("collection", "previous", "generation")}
    generation = b.generation + 1

    def batches():
        for start in range(0, len(rows), BATCH):
            chunk = rows[start:start + BATCH]
            vec = white.transform(np.array([r["raw"] for r in chunk], dtype=np.float32))
            for r, v in zip(chunk, vec):
                r.pop("sparse", None)
                r["vector"], r["gen"], r["dead"] = v.tolist(), generation, ALIVE
            yield chunk

    return _new_collection(spec, generation, white.dim_out, b.dim_in, batches())
