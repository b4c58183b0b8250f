"""FAISS inner-product index with 64-bit ids (the question ids of the store)."""
from __future__ import annotations

import threading

import numpy as np

DEFAULT_FACTORY = "Flat"


class VectorIndex:
    """``IndexIDMap2`` over a FAISS index built from a factory string (``Flat`` by default).

    Vectors are expected L2-normalised, so inner product is cosine similarity.
    """

    def __init__(self, index, factory: str = DEFAULT_FACTORY):
        self._index = index
        self.factory = factory
        self._lock = threading.Lock()

    @classmethod
    def create(cls, dim: int, factory: str = DEFAULT_FACTORY) -> "VectorIndex":
        import faiss

        inner = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        return cls(faiss.IndexIDMap2(inner), factory)

    @property
    def dim(self) -> int:
        return int(self._index.d)

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def add(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if vectors.shape[0] != ids.shape[0]:
            raise ValueError("one id per vector")
        with self._lock:
            if not self._index.is_trained:
                self._index.train(vectors)
            self._index.add_with_ids(vectors, ids)

    def remove(self, ids: np.ndarray) -> int:
        import faiss

        with self._lock:
            return int(self._index.remove_ids(faiss.IDSelectorBatch(np.ascontiguousarray(ids, dtype=np.int64))))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, ids) for each query row; missing slots have id -1."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = max(1, min(k, len(self)))
        return self._index.search(queries, k)

    def reconstruct(self, ids: np.ndarray) -> np.ndarray:
        return np.vstack([self._index.reconstruct(int(i)) for i in ids]) if len(ids) else np.empty((0, self.dim), np.float32)

    def save(self, path: str) -> None:
        import faiss

        faiss.write_index(self._index, path)

    @classmethod
    def load(cls, path: str, factory: str = DEFAULT_FACTORY) -> "VectorIndex":
        import faiss

        return cls(faiss.read_index(path), factory)
