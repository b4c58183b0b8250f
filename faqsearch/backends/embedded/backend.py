"""The embedded backend: FAISS + SQLite (+ a delta) in the version directory.

Opening checks what is cheap to check: every file present with its recorded size and fingerprint,
the store belonging to this index, readable, with the recorded number of questions, the FAISS
index holding one vector per question and unit vectors in three sampled blocks.
"""
from __future__ import annotations

import errno
import os
import sqlite3
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ...index import config as cfg
from ...defaults import TOKEN_STORE_MAX
from ...index.format import (CONFIG, DELTA, FAISS, IDS, SQLITE_SIDE, STORE, TMP, TOKENS, VECTORS, Config, IndexSection,
                             delta_file)
from ...errors import IndexFormatError
from ...files import link_or_copy, load_npy, sqlite_file
from ...tokenmatch import gives_states
from ...tokenmatch import supported as tokens_supported
from . import tokenstates
from .store import Store
from ...whitening import Moments
from ..base import Opened
from . import editor
from .delta import Delta, DeltaIndex
from .faiss import DEFAULT_FACTORY, VectorIndex, check_factory, factory_for, index_section, write_vector_index

if TYPE_CHECKING:
    from ...index.snapshot import Snapshot


class RawVectors:
    """The raw encoder vectors of one version's live questions: the base files memory-mapped (opened
    with the version, so they stay readable after a writer removes it) and the delta's additions."""

    def __init__(self, path: str, version: str, store: Store, delta: Delta | None):
        self.delta = delta
        vec_path = os.path.join(version, VECTORS)
        if not os.path.exists(vec_path):
            raise IndexFormatError(cfg.damaged(path, "vectors", "missing"))
        try:
            self.base_raw = load_npy(vec_path, mmap_mode="r")
            ids_path = os.path.join(version, IDS)
            self.has_ids = os.path.exists(ids_path)
            self.base_ids = load_npy(ids_path) if self.has_ids else None
        except (ValueError, OSError) as exc:
            raise IndexFormatError(cfg.damaged(path, "vectors", f"{type(exc).__name__}: {exc}")) from None
        self._store, self._path = store, path

    @property
    def ids(self) -> np.ndarray:
        """Question ids of the base rows, in id order (an index from before deltas: from its store)."""
        if self.base_ids is None:
            self.base_ids = np.array([q[0] for q in self._store.all_questions()], dtype=np.int64)
        if len(self.base_ids) != self.base_raw.shape[0]:
            raise IndexFormatError(f"index {self._path} is inconsistent: {len(self.base_ids)} questions but "
                                   f"{self.base_raw.shape[0]} stored vectors; re-run faqsearch ingest")
        return self.base_ids

    @property
    def dim(self) -> int:
        return int(self.base_raw.shape[1])

    def get(self, ids: np.ndarray, found: bool = False):
        """Raw vectors of these question ids (from the delta or the base); rows of ids that are
        neither (removed questions) are zero. ``found``: also return which ids were found."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.zeros((len(ids), self.dim), np.float32)
        rest = np.ones(len(ids), bool)
        if self.delta is not None and len(self.delta.ids):
            pos = np.minimum(np.searchsorted(self.delta.ids, ids), len(self.delta.ids) - 1)
            mine = self.delta.ids[pos] == ids
            out[mine] = self.delta.raw[pos[mine]]
            rest &= ~mine
        base = self.ids
        if rest.any() and len(base):
            pos = np.minimum(np.searchsorted(base, ids[rest]), len(base) - 1)
            hit = base[pos] == ids[rest]
            rows = np.flatnonzero(rest)[hit]
            if len(rows):
                order = np.argsort(pos[hit], kind="stable")  # memory-mapped reads in file order
                out[rows[order]] = np.asarray(self.base_raw[pos[hit][order]])
                rest[rows] = False
        return (out, ~rest) if found else out

    def all(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, raw vectors) of every live question in id order: the base memory-mapped, held in
        memory only when a delta adds or removes questions."""
        ids, raw = self.ids, self.base_raw
        if not self.delta:
            return ids, raw
        keep = ~np.isin(ids, self.delta.removed)
        return (np.concatenate([ids[keep], self.delta.ids]),
                np.concatenate([np.asarray(raw)[keep], self.delta.raw]))


class EmbeddedBackend:
    kind = "embedded"

    # -- building
    def prepare(self, path: str, storage: Any) -> dict[str, Any]:
        return {"index_type": storage.index_type}

    def check_index_type(self, index_type: str, n: int, dim: int) -> None:
        check_factory(index_type, n, dim)

    def check_faqs(self, faqs, questions=()) -> None:
        pass  # SQLite and FAISS take any length

    def new_store(self, directory: str) -> Store:
        return Store(os.path.join(directory, STORE))

    def write_base(self, directory: str, prepared: dict[str, Any], store: Store, ids: np.ndarray, raw: np.ndarray,
                   white, generation: int, progress: bool) -> dict[str, Any]:
        index_type = prepared["index_type"]
        factory = factory_for(index_type, len(ids), white.dim_out)
        target, vectors = os.path.join(directory, FAISS), os.path.join(directory, VECTORS)
        vindex = write_vector_index(white, ids, factory, target, vectors)
        np.save(os.path.join(directory, IDS), ids)
        store.write_postings(directory)
        return {"index": index_section(index_type, vindex)}

    def after_commit(self, config: Config) -> None:
        pass

    def drop(self, config: Config) -> None:
        pass  # everything is in the index directory

    # -- opening
    def open(self, path: str, version: str, config: Config, whitening, base: "Snapshot | None") -> Opened:
        cfg.check_files(version, config, path)
        ix = config.index or IndexSection()
        if base is not None:
            vindex = getattr(base.index, "base", base.index)
        else:
            try:
                factory = DEFAULT_FACTORY if ix.factory is None else ix.factory
                vindex = VectorIndex.load(os.path.join(version, FAISS), factory, ix.nprobe, ix.ef_search,
                                          mmap=True)
            except RuntimeError as exc:
                raise IndexFormatError(cfg.damaged(path, "faiss", str(exc).strip().splitlines()[-1])) from None
            why = vindex.damaged_sample(unit=whitening.residual is None)
            if why:
                raise IndexFormatError(cfg.damaged(path, "faiss", why))
        if vindex.dim != whitening.dim_out:
            raise IndexFormatError(f"index {path} is inconsistent (transform gives {whitening.dim_out} dimensions, "
                                   f"FAISS holds {vindex.dim}); re-run faqsearch ingest")
        store = Store.open_existing(os.path.join(version, STORE), path,
                                    generation=int(config.generation or 0))
        store.read_arrays, store.index = "lexical" in cfg.recorded_dirs(config), path
        try:
            _check_owner(path, config, store)
            delta = None
            if config.delta is not None and config.delta.to_dict():
                delta = _load_delta(path, version, config.delta.to_dict())
                if delta.moments:
                    whitening = replace(whitening, moments=Moments.from_arrays(delta.moments))
                index = DeltaIndex(vindex, delta, whitening)
            else:
                index = vindex
            expected = config.counts.questions if config.counts is not None else None
            # counted once per version directory; an in-place edit's reload trusts its writer's count
            n = int(expected) if base is not None and expected is not None else store.question_count()
            expected = n if expected is None else int(expected)
            store.known_count = n
            tomb = int(ix.tombstones or 0)
            if n != expected or len(index) != n + tomb:
                raise IndexFormatError(
                    f"index {path} is inconsistent: {STORE} holds {n} questions, {CONFIG} "
                    f"{expected}, {FAISS} {len(index)} vectors ({tomb} removed). Restore the index "
                    "from a backup or re-run faqsearch ingest")
            raw = RawVectors(path, version, store, delta)
        except BaseException:
            store.close()
            raise
        if "PQ" in vindex.factory and vindex.refiner is None:  # PQ codes choose candidates, float vectors rank
            vindex.refiner = _refiner(raw, whitening)
        return Opened(index, store, raw, whitening)

    def open_store(self, path: str, version: str, config: Config) -> Store:
        store = Store.open_existing(os.path.join(version, STORE), path,
                                    generation=int(config.generation or 0))
        store.read_arrays, store.index = "lexical" in cfg.recorded_dirs(config), path
        try:
            _check_owner(path, config, store)
        except BaseException:
            store.close()
            raise
        return store

    # -- writing
    def apply(self, writer, snap: "Snapshot", plan, raw_new: np.ndarray, source: str) -> tuple[int, int]:
        return editor.apply(writer, snap, plan, raw_new, source)

    def rebuild(self, writer, snap: "Snapshot", white, config: Config, calibrate=None) -> None:
        editor.rebuild(writer, snap, white, config, calibrate)

    def reencode(self, writer, snap: "Snapshot", encoder, config: Config, refit, calibrate=None,
                 batch_size: int = 32, progress: bool = False) -> str:
        return editor.reencode(writer, snap, encoder, config, refit, calibrate,
                               lambda directory, n: self.token_sink(directory, encoder, n), batch_size, progress)

    # -- the questions' token states (tokens/ of a version)
    def token_sink(self, directory: str, encoder, n: int) -> tokenstates.TokenWriter | None:
        """Token states are kept for an encoder that gives them and token matching supports, up to
        TOKEN_STORE_MAX questions."""
        if n > TOKEN_STORE_MAX or not tokens_supported(encoder.spec()) or not gives_states(encoder):
            return None
        return tokenstates.TokenWriter(directory, encoder.spec(), encoder.dimension)

    def drop_token_states(self, directory: str) -> None:
        tokenstates.remove(directory)

    def token_states(self, version: str, config: Config) -> tokenstates.TokenStates | None:
        """Only those config.json records: a version written before they were recorded computes them."""
        if TOKENS not in cfg.recorded_dirs(config):
            return None
        return tokenstates.TokenStates.open(version, config.encoder_spec)

    def restore(self, writer, src: str, config: Config) -> str:
        """The kept version's files hard-linked into the new version (they are written once), its
        store copied with exactly the rows that version saw, and its delta renamed for the new
        generation."""
        generation = int(config.generation or 0)
        tmp = writer.new_version()
        delta = config.delta.to_dict() if config.delta is not None else {}
        for root, dirs, files in os.walk(src):
            rel = os.path.relpath(root, src)
            for d in dirs:
                os.makedirs(os.path.join(tmp, rel, d), exist_ok=True)
            for f in files:
                name = os.path.normpath(os.path.join(rel, f))
                if name in (CONFIG, STORE) or name.endswith((TMP, *SQLITE_SIDE)):
                    continue  # written by the restore itself: the config by the commit, the store copied
                if DELTA.match(name) and name != delta.get("file"):
                    continue  # a delta of an earlier generation, kept only for readers of that moment
                target = delta_file(writer.generation + 1) if name == delta.get("file") else name
                link_or_copy(os.path.join(src, name), os.path.join(tmp, target))
        if delta:
            config = config.merged(delta={**delta, "file": delta_file(writer.generation + 1)})
        _copy_store(os.path.join(src, STORE), os.path.join(tmp, STORE), generation)
        return os.path.basename(writer.commit(config, tmp, config.files or None))


def _copy_store(src: str, dst: str, generation: int) -> None:
    """A private copy of a kept store, read only (the kept file is never written), holding exactly the
    rows ``generation`` saw (none of a killed writer's, none removed)."""
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    dest = sqlite3.connect(sqlite_file(dst))
    try:
        source.backup(dest)
    finally:
        dest.close()
        source.close()
    store = Store(dst, generation=generation)
    try:
        store.keep_only(generation)
    finally:
        store.close()


def _check_owner(path: str, config: Config, store: Store) -> None:
    """A store.db from another index (swapped in by hand, or restored from the wrong backup) is refused."""
    want = config.index_id
    if want is None:
        return  # an index from before ids were recorded
    have = store.get_setting("index_id")
    if have != want:
        raise IndexFormatError(cfg.damaged(path, "store", f"it belongs to another index ({have or 'none'}, this "
                                                          f"one is {want})"))


def _load_delta(path: str, version: str, info: dict[str, Any]) -> Delta:
    from ...files import sample_digest

    file = os.path.join(version, str(info["file"]))
    if not os.path.exists(file):
        raise FileNotFoundError(errno.ENOENT, "missing", file)  # open_snapshot retries: a writer may have moved on
    size = os.path.getsize(file)

    def bad(why: str) -> IndexFormatError:
        return IndexFormatError(f"index {path}: {info['file']} is damaged ({why}). Restore the index directory "
                                "from a backup, or rebuild it with: faqsearch ingest CORPUS --force")

    if size != int(info.get("bytes", size)):
        raise bad(f"{size} bytes, {info['bytes']} expected")
    if info.get("sample") and sample_digest(file, size) != info["sample"]:
        raise bad("its content is not the one this version recorded")
    try:
        return Delta.load(file)
    except Exception as exc:  # noqa: BLE001 - zip and EOF errors alike: a damaged file
        raise bad(f"{type(exc).__name__}: {exc}") from None


def _refiner(raw: RawVectors, whitening):
    """Exact re-scoring for PQ indexes from the memory-mapped float vectors (only candidates' rows are read)."""
    def exact(wanted: np.ndarray) -> np.ndarray:
        vecs, found = raw.get(wanted, found=True)
        vecs = whitening.transform(vecs)
        vecs[~found] = 0.0  # tombstones (no stored vector any more) never win
        return vecs

    return exact
