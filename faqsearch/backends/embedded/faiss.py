"""FAISS inner-product index with 64-bit ids (the question ids of the store).

Index types, by name or as a FAISS factory string:

| name | factory | memory per vector (d dims) | removal |
| --- | --- | --- | --- |
| flat | Flat | 4d bytes | exact |
| sq8 | SQ8 | d bytes | exact |
| hnsw | HNSW32 | 4d + ~256 bytes of links | tombstones (FAISS cannot delete from HNSW) |
| ivf | IVF{nlist},Flat | 4d bytes | tombstones (IndexIDMap2 cannot renumber IVF lists) |
| ivf-sq8 | IVF{nlist},SQ8 | d bytes | tombstones |
| ivf-pq | IVF{nlist},PQ{d/4} | d/4 bytes (+ the float vectors on disk) | tombstones |

Any PQ index re-scores REFINE_FACTOR x k candidates with exact vectors (the engine passes its
memory-mapped ``vectors.npy``): the codes choose, the float vectors rank.

``auto`` picks flat below 100k vectors, hnsw up to 250k and ivf-sq8 above (docs/speed.md, "Scale").
"""
from __future__ import annotations

import math
import os
import threading
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from ...defaults import (AUTO_FLAT_MAX, AUTO_HNSW_MAX, EF_SEARCH, PQ_TRAIN_SAMPLE, REFINE_FACTOR, SMALL_BATCH,
                         TRAIN_SAMPLE)
from ...errors import FAQSearchError
from ...files import load_npy, npy_chunks, read_through
from .flatfile import FlatWriter
from .ivffile import IVFWriter, streams

DEFAULT_FACTORY = "Flat"
_COARSE_CODES = ("PQ", "SQ4", "SQ6", "LSH", "RQ", "LSQ", "RaBitQ")
INDEX_TYPES = ("auto", "flat", "sq8", "hnsw", "ivf", "ivf-sq8", "ivf-pq")


def train_sample_size(factory: str, n: int) -> int:
    return min(n, PQ_TRAIN_SAMPLE if "PQ" in factory else TRAIN_SAMPLE)


def nlist_for(n: int, train: int | None = None) -> int:
    """IVF cells: about 4 sqrt(n), but at most (training sample) / 39 so k-means has enough points per cell."""
    sample = min(n, TRAIN_SAMPLE if train is None else train)
    return max(1, min(int(4 * math.sqrt(max(n, 1))), max(1, sample // 39)))


def factory_for(index_type: str, n: int, dim: int) -> str:
    """The FAISS factory string for a named type (or the string itself if it is already one)."""
    t = index_type.lower()
    if t == "auto":
        t = "flat" if n < AUTO_FLAT_MAX else ("hnsw" if n < AUTO_HNSW_MAX else "ivf-sq8")
    if t == "flat":
        return "Flat"
    if t == "sq8":
        return "SQ8"
    if t == "hnsw":
        return "HNSW32"
    if t == "ivf":
        return f"IVF{nlist_for(n)},Flat"
    if t == "ivf-sq8":
        return f"IVF{nlist_for(n)},SQ8"
    if t == "ivf-pq":
        m = max(1, dim // 4)
        while dim % m:
            m -= 1
        # PQ trains on a smaller sample (PQ_TRAIN_SAMPLE); size the cells so that sample can train them
        return f"IVF{nlist_for(n, PQ_TRAIN_SAMPLE)},PQ{m}"
    return index_type  # a FAISS factory string given as is


def check_factory(index_type: str, n: int, dim: int) -> str:
    """Validate an index type (a name or a FAISS factory string) before any encoding; returns the factory."""
    if index_type.lower() in INDEX_TYPES:
        return factory_for(index_type, n, dim)
    import faiss

    try:
        faiss.index_factory(int(dim), index_type, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        why = str(exc).strip().splitlines()[-1] if str(exc).strip() else "not understood"
        raise FAQSearchError(f"unknown --index-type {index_type!r} ({why}); choose one of {', '.join(INDEX_TYPES)} "
                             "or give a valid FAISS factory string such as 'IVF256,SQ8'") from None
    return index_type



def refine(queries: np.ndarray, scores: np.ndarray, ids: np.ndarray, k: int,
           exact) -> tuple[np.ndarray, np.ndarray]:
    """Re-score approximate candidates with exact vectors (``exact(ids) -> unit vectors``) and keep k."""
    out_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    out_i = np.full((len(queries), k), -1, dtype=np.int64)
    for r, (q, row) in enumerate(zip(queries, ids)):
        valid = row[row >= 0]
        if not len(valid):
            continue
        s = exact(valid) @ q
        order = np.argsort(-s, kind="stable")[:k]
        out_s[r, :len(order)], out_i[r, :len(order)] = s[order], valid[order]
    return out_s, out_i
_OMP_MAX: list[int] = []


@contextmanager
def _omp_threads(n: int | None) -> Iterator[None]:
    """Within the block, the calling thread's OpenMP thread count for FAISS (None: all, as at start-up);
    the thread's own setting again after it (the host's torch on that thread ran on one core for good)."""
    import faiss

    if not _OMP_MAX:
        _OMP_MAX.append(faiss.omp_get_max_threads())
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n or _OMP_MAX[0])
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _ivf(inner):
    """The IVF part of a FAISS index, or None for other types."""
    import faiss

    try:
        return faiss.extract_index_ivf(inner)
    except RuntimeError:
        return None


class VectorIndex:
    """``IndexIDMap2`` over a FAISS index built from a factory string (``Flat`` by default).

    Vectors are expected L2-normalised, so inner product is cosine similarity. Types that cannot
    delete (HNSW) keep removed vectors as tombstones: their ids no longer exist in the store, so
    search results skip them, and ``faqsearch refit`` rebuilds the index without them.
    """

    delta = None  # the base files alone (a DeltaIndex carries the changes since)
    search_distinct = None  # the searcher widens a plain search to k distinct FAQs

    def __init__(self, index, factory: str = DEFAULT_FACTORY, nprobe: int | None = None, ef_search: int | None = None):
        self._index = index
        self.nprobe: int | None = None
        self.ef_search: int | None = None
        self.factory = factory
        self._lock = threading.Lock()
        self.refiner = None  # ids -> exact vectors (PQ: the engine passes its stored float vectors)
        self.refine_factor = REFINE_FACTOR
        self.mapped = False  # codes mapped from the file (``load(mmap=True)``): searched, never changed
        self.set_search_params(nprobe, ef_search)

    @classmethod
    def create(cls, dim: int, factory: str = DEFAULT_FACTORY, nprobe: int | None = None,
               ef_search: int | None = None) -> "VectorIndex":
        import faiss

        inner = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        pq = faiss.downcast_index(_ivf(inner) or inner)
        if getattr(pq, "do_polysemous_training", False):
            # the factory turns on polysemous training (a code order for Hamming filtering, which these
            # indexes never use): 25 s of a 450-question IVF4,PQ16 ingest against 0.05 s, 143 s against
            # 32 s to train IVF64,PQ64 on 20,000 vectors; the codes' distances are the same either way
            pq.do_polysemous_training = False
        return cls(faiss.IndexIDMap2(inner), factory, nprobe, ef_search)

    def set_search_params(self, nprobe: int | None = None, ef_search: int | None = None) -> None:
        """IVF: cells visited per query (default: enough for Recall@10 >= 0.95 on the README benchmark).
        HNSW: efSearch."""
        import faiss

        inner = faiss.downcast_index(self._index.index) if hasattr(self._index, "index") else self._index
        ivf = _ivf(inner)
        if ivf is not None:
            ivf.nprobe = nprobe or max(1, min(ivf.nlist, max(8, ivf.nlist // 16)))
            self.nprobe = ivf.nprobe
        if hasattr(inner, "hnsw"):
            inner.hnsw.efSearch = ef_search or EF_SEARCH
            self.ef_search = inner.hnsw.efSearch

    @property
    def dim(self) -> int:
        return int(self._index.d)

    @property
    def supports_removal(self) -> bool:
        import faiss

        # IndexIDMap2.remove_ids renumbers the inner index's ids as if the rest moved down, which only
        # the flat-code types (Flat, SQ, PQ) do; IVF and HNSW keep removed vectors as tombstones
        inner = faiss.downcast_index(self._index.index)
        return isinstance(inner, faiss.IndexFlatCodes)

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def damaged_sample(self, block: int = 512, unit: bool = True) -> str | None:
        """Read three blocks of stored vectors (start, middle, end): they are unit vectors (``unit``),
        or at most unit length when the transform keeps dropped directions' energy in the norm, so a
        value that is not finite or a norm out of range means the file is damaged. None when they look
        right (or when the type cannot give its vectors back, as IVF without a direct map)."""
        import faiss

        inner = faiss.downcast_index(self._index.index)
        n = int(inner.ntotal)
        # coarse codes (PQ, 4- and 6-bit SQ, ...) give vectors back only roughly (norms 0.66 off for an
        # intact RaBitQ index): for them only values that are not finite or far out of range count
        slack = 1.0 if any(c in self.factory for c in _COARSE_CODES) else 0.1
        for start in sorted({0, max(0, n // 2 - block // 2), max(0, n - block)}):
            count = min(block, n - start)
            if count <= 0:
                continue
            try:
                vecs = inner.reconstruct_n(start, count)
            except RuntimeError:
                return None
            norms = np.linalg.norm(vecs.astype(np.float64), axis=1)
            if not np.all(np.isfinite(norms)) or (np.abs(norms - 1).max() > slack if unit else norms.max() > 1 + slack):
                return f"stored vectors {start}-{start + count} are not {'unit' if unit else 'at most unit'} vectors"
        return None

    def max_id(self) -> int:
        """The largest id any vector carries (tombstones included), -1 when empty."""
        import faiss

        if len(self) == 0:
            return -1
        return int(faiss.vector_to_array(self._index.id_map).max())

    def needs_training(self) -> bool:
        return not self._index.is_trained

    def train(self, sample: np.ndarray) -> None:
        """Train IVF / PQ / SQ quantizers on a sample (call once, before the first add)."""
        self._check_writable()
        with self._lock:
            self._index.train(np.ascontiguousarray(sample, dtype=np.float32))

    def add(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if vectors.shape[0] != ids.shape[0]:
            raise ValueError("one id per vector")
        self._check_writable()
        with self._lock:
            if not self._index.is_trained:
                self._index.train(vectors)
            self._index.add_with_ids(vectors, ids)

    def remove(self, ids: np.ndarray) -> int:
        """Remove ids; returns how many were removed (0 for types that keep tombstones)."""
        import faiss

        if not self.supports_removal:
            return 0
        self._check_writable()
        with self._lock:
            return int(self._index.remove_ids(faiss.IDSelectorBatch(np.ascontiguousarray(ids, dtype=np.int64))))

    def search(self, queries: np.ndarray, k: int, ids: np.ndarray | None = None,
               exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, ids) for each query row; missing slots have id -1.

        ``ids`` restricts the search to those ids, ``exclude`` leaves those out, inside FAISS (an ID
        selector), so k results still come back when a filter keeps few vectors. A few queries run on the calling thread only:
        waking OpenMP threads costs more than a single query's search (0.17 vs 18 ms per query on
        sample_data while another process used the cores), and the setting is per thread."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = max(1, min(k, len(self)))
        if exclude is not None and not len(exclude):
            exclude = None
        with _omp_threads(1 if len(queries) <= SMALL_BATCH else None):
            if self.refiner is not None:  # approximate codes choose candidates, exact vectors rank them
                scores, found = self._search(queries, min(len(self), k * self.refine_factor), ids, exclude)
                return refine(queries, scores, found, k, self.refiner)
            return self._search(queries, k, ids, exclude)

    def _search(self, queries: np.ndarray, k: int, ids: np.ndarray | None,
                exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        if ids is None and exclude is None:
            return self._index.search(queries, k)
        import faiss

        batch = faiss.IDSelectorBatch(np.ascontiguousarray(ids if ids is not None else exclude, dtype=np.int64))
        sel = batch if ids is not None else faiss.IDSelectorNot(batch)  # ``batch`` stays referenced until the search
        inner = faiss.downcast_index(self._index.index)
        if hasattr(inner, "hnsw"):
            params = faiss.SearchParametersHNSW(sel=sel, efSearch=max(self.ef_search or EF_SEARCH, k))
        elif getattr(self, "nprobe", None):
            params = faiss.SearchParametersIVF(sel=sel, nprobe=self.nprobe)
        else:
            params = faiss.SearchParameters(sel=sel)
        return self._index.search(queries, k, params=params)

    def reconstruct(self, ids: np.ndarray) -> np.ndarray:
        if not len(ids):
            return np.empty((0, self.dim), np.float32)
        import faiss

        ivf = _ivf(faiss.downcast_index(self._index.index))
        if ivf is not None and ivf.direct_map.type == faiss.DirectMap.NoMap:
            with self._lock:  # IVF finds a vector by id only through a direct map, built once on first use
                if ivf.direct_map.type == faiss.DirectMap.NoMap:
                    ivf.make_direct_map()
        return self._index.reconstruct_batch(np.ascontiguousarray(ids, dtype=np.int64))

    def save(self, path: str) -> None:
        import faiss

        faiss.write_index(self._index, path)

    @classmethod
    def load(cls, path: str, factory: str = DEFAULT_FACTORY, nprobe: int | None = None,
             ef_search: int | None = None, mmap: bool = False) -> "VectorIndex":
        """``mmap``: map the vectors' codes from the file instead of copying them into memory (FAISS'
        IO_FLAG_MMAP_IFC: flat-code types, HNSW's vectors, IVF lists and quantisers). Read-only: for
        searching, never for an index to edit. The kernel shares those pages between processes and
        can drop them, so a process holds little more than the file's page cache; the file is read
        through once first, so the first search faults no disk reads."""
        import faiss

        try:
            index = faiss.read_index(path, faiss.IO_FLAG_MMAP_IFC if mmap else 0)
        except RuntimeError:
            if not mmap:
                raise
            index, mmap = faiss.read_index(path), False  # a platform without FAISS maps; a damaged file raises here
        vindex = cls(index, factory, nprobe, ef_search)
        vindex.mapped = mmap  # whatever parts FAISS mapped: growing or shrinking any of them aborts
        if mmap:
            read_through(path)
        return vindex

    def _check_writable(self) -> None:
        if self.mapped:  # FAISS aborts the process when a mapped index grows or shrinks
            raise RuntimeError("this FAISS index is mapped read-only from its file; load it without mmap to change it")


def write_vector_index(white, ids: np.ndarray, factory: str, target: str, path: str,
                       chunk: int = 4096) -> VectorIndex:
    """Write the FAISS file of the vectors in the .npy file ``path``, transformed, to ``target``.

    Flat and IVF types (Flat, SQ, PQ codes) are written as the vectors are transformed, one chunk
    in memory, byte for byte what FAISS writes (flatfile, ivffile); other types (HNSW) and a FAISS
    whose layout differs are built in FAISS's memory and saved. Returns the index for its search
    settings: empty when it was written as it streamed."""
    vindex = VectorIndex.create(white.dim_out, factory)
    if factory == DEFAULT_FACTORY and write_flat_index(white, path, ids, target, chunk):
        return vindex
    streamed = False
    if vindex.needs_training():
        rng = np.random.default_rng(0)
        pick = np.sort(rng.choice(len(ids), size=train_sample_size(factory, len(ids)), replace=False))
        raw = load_npy(path, mmap_mode="r")
        sample = np.empty((len(pick), white.dim_out), np.float32)  # filled a chunk at a time: the
        for at in range(0, len(pick), chunk):  # transform's temporaries stay a chunk's size
            sample[at:at + chunk] = white.transform(np.asarray(raw[pick[at:at + chunk]]))
        del raw
        vindex.train(sample)
        vindex.set_search_params()
        streamed = streams(vindex._index, sample, os.path.dirname(os.path.abspath(target)))
        del sample
    if streamed:  # IVF: the file written as the vectors come, the index itself left empty
        with IVFWriter(vindex._index, target, ids) as out:
            for block in npy_chunks(path, chunk):
                out.write(white.transform(block))
        return vindex
    start = 0
    for block in npy_chunks(path, chunk):
        vindex.add(white.transform(block), ids[start:start + len(block)])
        start += len(block)
    vindex.save(target)
    return vindex


def write_flat_index(white, path: str, ids: np.ndarray, target: str, chunk: int = 4096) -> bool:
    """Write the exact (``Flat``) index of the vectors in the .npy file ``path`` to ``target`` as they
    are transformed, one chunk in memory; False (nothing written) where this FAISS lays flat
    indexes out another way."""
    if not FlatWriter.supported(white.dim_out):
        return False
    with FlatWriter(target, white.dim_out, ids) as out:
        for block in npy_chunks(path, chunk):
            out.write(white.transform(block))
    return True


def index_section(index_type: str, vindex: VectorIndex, tombstones: int = 0) -> dict:
    """config["index"] of a vector index just built."""
    return {"type": index_type, "factory": vindex.factory, "tombstones": tombstones,
            "nprobe": vindex.nprobe, "ef_search": vindex.ef_search}
