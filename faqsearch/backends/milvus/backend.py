"""The Milvus backend's writes: a build fills a new collection, an edit writes rows of generation
G+1 and marks removed rows dead at G+1, a rebuild (refit, tune, compaction) copies the live rows
into a new collection and switches the alias. Each commits a new version directory (config.json and
whitening.npz, about 2 MB for MiniLM) through the index's Writer, so readers switch in one step.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from ...index import config as cfg
from ...index.format import CONFIG, VECTORS, WHITENING, BackendSection, Config
from ...corpus import faq_hash
from ...errors import CorpusError, FAQSearchError, IndexFormatError, InvalidOptionError
from ...progress import progress_bar
from ..embedded.store import Store
from ...whitening import Moments
from ..base import Opened, delta_limit
from .collection import _ALL, ALIVE, BATCH, INDEX_TYPES, Collection, client, collections
from .faces import MilvusIndex, MilvusStore
from .shared import Meta, drop_shared

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ...index.snapshot import Snapshot

# Milvus VARCHAR limits of the schema (bytes), checked before anything is encoded
LIMITS = {"question": 8192, "id": 512, "category": 512}


class MilvusRaw:
    """Raw encoder vectors read from the collection's ``raw`` field."""

    def __init__(self, collection: Collection):
        self.c = collection

    def get(self, ids: np.ndarray, found: bool = False):
        ids = np.asarray(ids, dtype=np.int64)
        kept = self.c.raw_kept  # read with the questions of FAQs found (another thread may drop some meanwhile)
        rows = {int(i): v for i, v in ((i, kept.get(int(i))) for i in ids) if v is not None}
        todo = [int(i) for i in ids if int(i) not in rows]
        if todo:
            rows.update((int(r["id"]), r["raw"]) for r in self.c.by_ids(todo, ["id", "raw"], visible=False))
        out = np.array([rows.get(int(i), [0.0] * self.c.dim_in) for i in ids], dtype=np.float32).reshape(
            len(ids), self.c.dim_in)
        return (out, np.array([int(i) in rows for i in ids], bool)) if found else out

    def all(self) -> tuple[np.ndarray, np.ndarray]:
        rows = sorted(self.c.query("", ["id", "raw"]), key=lambda r: r["id"])
        ids = np.array([r["id"] for r in rows], dtype=np.int64)
        raw = np.array([r["raw"] for r in rows], dtype=np.float32).reshape(len(rows), self.c.dim_in)
        return ids, raw


def check_limits(faqs: Iterable, questions: Iterable[tuple[str, str]] = ()) -> None:
    """Texts over the collection's field limits are refused, naming the FAQ, before any encoding."""
    def over(text: str | None, limit: int) -> bool:
        return text is not None and len(text.encode("utf-8")) > limit

    pairs = list(questions)
    for f in faqs:
        if over(f.id, LIMITS["id"]):
            raise CorpusError("<records>", f.line or None, f"FAQ id {f.id[:40]!r}... is over {LIMITS['id']} bytes, the "
                                                           "Milvus backend's limit; use a shorter id")
        if over(f.category, LIMITS["category"]):
            raise CorpusError("<records>", f.line or None, f"FAQ {f.id!r}: its category is over {LIMITS['category']} "
                                                           "bytes, the Milvus backend's limit")
        if over(f.answer, 65535):
            raise CorpusError("<records>", f.line or None, f"FAQ {f.id!r}: the answer is over 65535 bytes, Milvus' "
                                                           "limit for a text field; shorten it or use the embedded backend")
        pairs += [(f.id, q) for q in f.questions]
    for fid, q in pairs:
        if over(q, LIMITS["question"]):
            raise CorpusError("<records>", None, f"FAQ {fid!r}: a question is over {LIMITS['question']} bytes, the "
                                                 "Milvus backend's limit; shorten it or use the embedded backend")


def _collection(config: Config, path: str) -> Collection:
    """The collection of the generation ``config`` describes."""
    return Collection(spec_of(config, path), int(config.generation or 0), int(config.dim_out), int(config.dim_in),
                      int(1 if config.next_question_id is None else config.next_question_id))


def _questions(config: Config) -> int:
    return int(config.counts.questions or 0) if config.counts is not None else 0


def spec_of(config: Config, path: str) -> dict[str, Any]:
    """The Milvus section of an index's config, refused with the fix where a key it needs is missing
    (a config edited by hand, or restored from another index)."""
    spec = config.backend.to_dict() if isinstance(config.backend, BackendSection) else {}
    missing = [k for k in ("uri", "base", "collection", "index_type") if not isinstance(spec.get(k), str) or not spec[k]]
    if missing:
        raise IndexFormatError(f"index {path}: {CONFIG} names no Milvus {' or '.join(missing)} (its backend section "
                               "is damaged). Restore the index directory from a backup, or rebuild it with: faqsearch "
                               f"ingest CORPUS --index {path} --backend milvus --uri URI --force")
    return spec


class MilvusBackend:
    kind = "milvus"

    # -- building
    def prepare(self, path: str, storage: Any) -> dict[str, Any]:
        """The backend section recorded in config.json (validated before anything is encoded)."""
        uri, index_type = storage.uri, storage.index_type
        if not uri:
            raise InvalidOptionError("--backend milvus needs --uri: a local file such as ./faq.milvus.db "
                                     "(milvus-lite) or http://host:19530 (a Milvus server)")
        if index_type.lower() not in INDEX_TYPES:
            raise InvalidOptionError(f"unknown --index-type {index_type!r} for Milvus; choose one of "
                                     f"{', '.join(INDEX_TYPES)}")
        if "://" not in uri:
            uri = os.path.abspath(uri)
        base = storage.collection or "faqsearch_" + re.sub(r"[^A-Za-z0-9_]", "_", os.path.basename(path))
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,200}", base):
            raise InvalidOptionError(f"--collection {base!r}: use letters, digits and underscores, starting with a "
                                     "letter")
        from ...index.address import remote_of

        shared = {"shared": True} if remote_of(path) is not None else {}  # lives in Milvus alone (shared.py)
        c = client(uri)  # unreachable or missing extra: fail now
        try:
            _refuse_a_name_in_use(c, base, path, uri, bool(shared), storage.collection)
        finally:
            c.close()
        return {"kind": "milvus", "uri": uri, "base": base, "index_type": index_type.lower(), **shared}

    def check_faqs(self, faqs, questions=()) -> None:
        check_limits(faqs, questions)

    def check_index_type(self, index_type: str, n: int, dim: int) -> None:
        pass  # checked by prepare

    def new_store(self, directory: str) -> Store:
        return Store(":memory:")  # assigns ids and holds the rows until they are written to the collection

    def write_base(self, directory: str, prepared: dict[str, Any], store: Store, ids: np.ndarray, raw: np.ndarray,
                   white, generation: int, progress: bool) -> dict[str, Any]:
        questions = store.all_questions()
        sources = {q[0]: "corpus" for q in questions}
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
                    yield Collection.rows([(q[0], q[1], q[2], sources[q[0]]) for q in chunk], fields,
                                          white.transform(block), block, generation)
                    bar.update(len(chunk))

        spec = _new_collection(prepared, generation, white.dim_out, raw.shape[1], batches())
        os.remove(os.path.join(directory, VECTORS))  # Milvus keeps the raw vectors
        return {"backend": spec, "index": {"type": prepared["index_type"], "factory": f"milvus:{prepared['index_type']}",
                                           "tombstones": 0}}

    def after_commit(self, config: Config) -> None:
        drop_stale(config.backend.to_dict())

    def drop(self, config: Config) -> None:
        """Drop the alias and every collection of this index; where the alias names a collection this
        index never had (another index took the name since), Milvus is left alone."""
        spec = config.backend.to_dict()
        c = client(spec["uri"], spec.get("token"))
        try:
            live = _live(c, spec["base"])
            if live is not None and live not in (spec.get("collection"), spec.get("previous")) and \
                    not spec.get("shared"):
                log.warning("Milvus at %s stores another index as %r now (collection %s, not this index's %s): "
                            "its data is left alone", spec["uri"], spec["base"], live, spec.get("collection"))
                return
            try:
                c.drop_alias(spec["base"])
            except Exception:  # noqa: BLE001 - no alias left: nothing to drop
                pass
            for n in collections(c):
                if n.startswith(f"{spec['base']}__g"):
                    c.drop_collection(n)
        finally:
            c.close()
        if spec.get("shared"):
            drop_shared(spec["uri"], spec["base"])

    # -- opening
    def open(self, path: str, version: str, config: Config, whitening, base: "Snapshot | None") -> Opened:
        c = _collection(config, path)
        store = MilvusStore(c)
        n, expected = store.question_count(), _questions(config)
        if n != expected:
            c.close()
            raise IndexFormatError(f"index {path} is inconsistent: Milvus collection {c.collection} shows {n} "
                                   f"questions at generation {c.generation}, {CONFIG} {expected}; re-run "
                                   "faqsearch ingest")
        return Opened(MilvusIndex(c), store, MilvusRaw(c), whitening)

    def open_store(self, path: str, version: str, config: Config) -> MilvusStore:
        return MilvusStore(_collection(config, path))

    # -- token states: none (token matching needs the BM25 statistics of the embedded store)
    def token_sink(self, directory: str, encoder, n: int) -> None:
        return None

    def drop_token_states(self, directory: str) -> None:
        pass  # a Milvus version keeps none

    def token_states(self, version: str, config: Config) -> None:
        return None

    def restore(self, writer, src: str, config: Config) -> str:
        raise FAQSearchError(f"restore works on embedded indexes only; {os.path.basename(writer.path)!r} keeps its "
                             "rows in Milvus, which keeps no versions")

    # -- writing
    def apply(self, writer, snap: "Snapshot", plan, raw_new: np.ndarray, source: str) -> tuple[int, int]:
        """Rows of generation G+1 and removed rows marked dead at G+1, then the config commit (in a
        new version directory: the transform's moments change)."""
        b: Collection = snap.index.b
        g1 = b.generation + 1
        writer.check_lease()  # an index shared by replicas: only the lease holder writes rows
        b.repair()
        store: MilvusStore = snap.store
        removed: list[int] = []
        for fid in plan.removed_faqs:
            f = store.faq(fid)
            removed += [q["id"] for q in f["questions"]] if f else []
        removed += [int(i) for i in plan.removed_questions]
        # FAQ fields live on every question row: a changed FAQ's rows are replaced (copied, new ids)
        changed = {f.id: f for f in plan.changed_faqs}
        gone = set(removed)
        keep_rows = [r for r in b.query(f"faq_id in {json.dumps(list(changed), ensure_ascii=False)}", _ALL)
                     if r["id"] not in gone] if changed else []
        next_id = max(b.next_id, int(1 if snap.config.next_question_id is None else snap.config.next_question_id))
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
                           "category": category, "metadata": metadata or None, "content_hash": chash,
                           "faq_seq": seq, "gen": g1, "dead": ALIVE})
            copy_id += 1
        texts = plan.texts()
        new_faq_ids = [f.id for f in plan.new_faqs for _ in f.questions] + [fid for fid, _ in plan.new_questions]
        new_rows = [(copy_id + i, fid, text, source) for i, (fid, text) in enumerate(zip(new_faq_ids, texts))]
        moments = Moments.from_arrays(snap.whitening.moments.to_arrays())
        if snap.config.whitening.fitted_on == "corpus questions":
            if removed:
                dead = b.by_ids(removed, ["raw"], visible=False)
                moments.remove(np.array([r["raw"] for r in dead], dtype=np.float32).reshape(-1, b.dim_in))
            moments.update(raw_new)
        white = dataclasses.replace(snap.whitening, moments=moments)
        rows = copies + Collection.rows(new_rows, fields, white.transform(raw_new), raw_new, g1)
        copy_id += len(new_rows)
        tmp = writer.new_version()
        writer.check_lease()
        b.insert(rows)
        writer.check_lease()
        b.kill(removed + [r["id"] for r in keep_rows], g1)
        b.client.flush(b.collection)
        white.save(os.path.join(tmp, WHITENING))
        after = Collection(b.spec, g1, b.dim, b.dim_in, copy_id)
        try:
            counts = MilvusStore(after).counts()
            expected = _questions(snap.config) + len(new_rows) - len(gone)
            if counts["questions"] != expected:
                raise FAQSearchError(f"the edit would leave {counts['questions']} questions, {expected} "
                                     "expected; nothing was committed")
            dead = after.count_dead()
        finally:
            after.close()
        config = snap.config.merged(plan.config, next_question_id=copy_id, counts=counts)
        writer.commit(config.merged(backend={**config.backend.to_dict(), "dead": dead}), tmp)
        if b.spec.get("shared"):  # collections replicas stopped reading a while ago
            drop_stale(writer.config.backend.to_dict())
        if dead > delta_limit(counts["questions"]):  # removed rows kept for older readers: compact
            after = Collection(b.spec, g1, b.dim, b.dim_in, copy_id)
            try:
                _rebuild(writer, after, white, writer.config)
            finally:
                after.close()
        return len(new_rows), len(removed)

    def rebuild(self, writer, snap: "Snapshot", white, config: Config, calibrate=None) -> None:
        """A new collection with every live row re-transformed (refit, tune --apply)."""
        _rebuild(writer, snap.index.b, white, config, calibrate)

    def reencode(self, writer, snap: "Snapshot", encoder, config: Config, refit, calibrate=None,
                 batch_size: int = 32, progress: bool = False) -> str:
        """A new collection with every live row encoded again by ``encoder`` (learn), the transform
        fitted again by ``refit(config, moments)``."""
        writer.check_lease()
        b = snap.index.b
        b.repair()
        rows = sorted(b.query("", _ALL), key=lambda r: r["id"])
        from types import SimpleNamespace

        from ...encoders.stream import encode_stream

        chunks: list[np.ndarray] = []  # the vectors, chunk by chunk (the rows are in memory already)
        moments = encode_stream(encoder, [r["text"] for r in rows], batch_size, progress,
                                out=SimpleNamespace(write=chunks.append), desc="encoding again")
        for r, v in zip(rows, np.concatenate(chunks) if chunks else ()):
            r["raw"] = v.tolist()
        white, config = refit(config, moments)
        return _rebuild(writer, b, white, config, calibrate, rows)


def _rebuild(writer, b: Collection, white, config: Config, calibrate=None,
             rows: list[dict[str, Any]] | None = None) -> str:
    """Copy the live rows of ``b`` (its generation) into a new collection, transformed by ``white``,
    and commit ``config`` naming it (``calibrate(config, version)``: the config to commit, measured
    on the new version first; failing, the new collection is dropped and the alias put back)."""
    writer.check_lease()
    if rows is None:  # given: rows encoded again (learn), read by the caller
        b.repair()
        rows = sorted(b.query("", _ALL), key=lambda r: r["id"])
    spec = {k: v for k, v in b.spec.items() if k not in ("collection", "previous", "generation", "dead")}
    generation = writer.generation + 1

    def batches():
        for start in range(0, len(rows), BATCH):
            chunk = rows[start:start + BATCH]
            vec = white.transform(np.array([r["raw"] for r in chunk], dtype=np.float32))
            for r, v in zip(chunk, vec):
                r.pop("sparse", None)
                r["vector"], r["gen"], r["dead"] = v.tolist(), generation, ALIVE
            yield chunk

    tmp = writer.new_version()
    config = config.merged(backend=_new_collection(spec, generation, white.dim_out, b.dim_in, batches(),
                                                   writer.check_lease))
    white.save(os.path.join(tmp, WHITENING))
    if calibrate is not None:
        try:
            config = calibrate(config, tmp)
        except BaseException:
            c = client(spec["uri"], spec.get("token"))
            try:
                _switch_alias(c, spec["base"], b.collection)
                c.drop_collection(config.backend.collection)
            finally:
                c.close()
            raise
    live = writer.commit(config, tmp)
    drop_stale(config.backend.to_dict())
    return os.path.basename(live)


def _new_collection(spec: dict[str, Any], generation: int, dim: int, dim_in: int,
                    batches: Iterable[list[dict[str, Any]]], check=None) -> dict[str, Any]:
    """Create a collection, insert the row batches, seal and load it, switch the alias (``check()``
    first, when given); returns the spec naming it. On any failure the new collection is dropped and
    the alias left alone."""
    name = Collection.create_collection(spec, generation, dim, dim_in, spec["index_type"])
    c = client(spec["uri"], spec.get("token"))
    try:
        for rows in batches:
            if rows:
                c.insert(name, rows)
        c.flush(name)  # sealed segments are searched through the index: 10x faster than growing ones
        c.load_collection(name)
        if check is not None:
            check()
        previous = _switch_alias(c, spec["base"], name)
    except BaseException:
        c.drop_collection(name)
        c.close()
        raise
    c.close()
    return {**spec, "collection": name, "previous": previous, "generation": generation}


def _live(c, base: str) -> str | None:
    """The collection the alias ``base`` names (an index's current one), None where there is none."""
    return next((n for n in collections(c)
                 if n.startswith(f"{base}__g") and base in c.list_aliases(n).get("aliases", [])), None)


def _owns(path: str, uri: str, base: str) -> bool:
    """Whether the index at ``path`` is the one stored in Milvus as ``base`` at ``uri`` (its config says so)."""
    try:  # the live version (CURRENT names it; the plain layout keeps its files in the index folder)
        spec = cfg.load_config(cfg.read_current(path) or path, path).backend
    except FAQSearchError:
        return False
    spec = spec.to_dict() if spec is not None else {}
    return spec.get("kind") == "milvus" and spec.get("base") == base and spec.get("uri") == uri


def _refuse_a_name_in_use(c, base: str, path: str, uri: str, shared: bool, named: str | None) -> None:
    """Two indexes stored under one name in one Milvus write the same alias and collections: the second
    ingest replaced the first one's data, and a later refit or drop of either broke the other. Ingesting
    again the index that holds the name is fine (its own directory, or the shared index by address)."""
    if _live(c, base) is None:
        return
    from .shared import meta_name

    held_shared = meta_name(base) in collections(c)
    if (held_shared and shared) or (not shared and not held_shared and _owns(path, uri, base)):
        return
    owner = "an index that lives in Milvus (milvus://...)" if held_shared else "another index directory"
    fix = "give --collection another name" if named else "ingest under another --index name, or give --collection NAME"
    raise InvalidOptionError(f"Milvus at {uri} already stores {owner} as {base!r}; this ingest would replace its data. "
                             f"{fix[0].upper() + fix[1:]} (letters, digits and underscores), or drop that index first "
                             "(`faqsearch drop`; where its folder is gone, only --collection avoids the name)")


def _switch_alias(c, base: str, collection: str) -> str | None:
    before = _live(c, base)
    if before is None:
        c.create_alias(collection, base)
    else:
        c.alter_alias(collection, base)
    return before


def drop_stale(spec: dict[str, Any]) -> list[str]:
    """After a commit: drop this index's collections other than the current and previous ones. An index
    shared by replicas (``shared``) keeps each collection :data:`.shared.GRACE_S` after it stopped
    being current instead, since a replica on another machine may still be reading it."""
    c = client(spec["uri"], spec.get("token"))
    try:
        others = [n for n in collections(c) if n.startswith(f"{spec['base']}__g") and n != spec["collection"]]
        if spec.get("shared"):
            meta = Meta(spec["uri"], spec["base"])
            try:
                dropped = meta.retire(spec["collection"], others)
                for n in dropped:
                    c.drop_collection(n)
                meta.forget(dropped)
            finally:
                meta.close()
            return dropped
        dropped = [n for n in others if n != spec.get("previous")]
        for n in dropped:
            c.drop_collection(n)
        return dropped
    finally:
        c.close()
