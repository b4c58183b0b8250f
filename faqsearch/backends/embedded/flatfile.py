"""The FAISS file of an exact index written as the vectors come, so a build holds one chunk of
vectors at a time instead of the whole index: an ``IndexIDMap2(IndexFlatIP(d))``, byte for byte
what ``faiss.write_index`` writes for the same vectors and ids (checked against FAISS itself before
first use; where the layout differs, the caller builds in memory instead).
"""
from __future__ import annotations

import functools
import os
import struct

import numpy as np

# offsets in an empty IndexIDMap2(IndexFlatIP) file: two index headers (fourcc, d int32, ntotal
# int64, two int64 dummies, is_trained uint8, metric int32), the flat codes (uint64 count of
# floats, the floats), the ids (uint64 count, int64 each)
_HEADER = 37
_NTOTAL = (8, _HEADER + 8)
_CODES = 2 * _HEADER
_EMPTY = _CODES + 16


@functools.lru_cache(maxsize=8)
def _empty(dim: int) -> bytes | None:
    """FAISS's own bytes for an empty index of ``dim`` dimensions, or None if the layout is not the
    one this module writes (checked with two vectors against ``faiss.write_index``)."""
    import faiss

    empty = faiss.serialize_index(faiss.IndexIDMap2(faiss.IndexFlatIP(dim))).tobytes()
    if len(empty) != _EMPTY or empty[:4] != b"IxM2" or empty[_HEADER:_HEADER + 4] != b"IxFI":
        return None
    vecs = np.arange(2 * dim, dtype=np.float32).reshape(2, dim) / dim
    ids = np.array([3, 11], dtype=np.int64)
    ref = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
    ref.add_with_ids(vecs, ids)
    return empty if _bytes(empty, vecs, ids) == faiss.serialize_index(ref).tobytes() else None


def _head(empty: bytes, n: int, dim: int) -> bytes:
    head = bytearray(empty[:_CODES + 8])
    for at in _NTOTAL:
        head[at:at + 8] = struct.pack("<q", n)
    head[_CODES:_CODES + 8] = struct.pack("<Q", n * dim)
    return bytes(head)


def _bytes(empty: bytes, vecs: np.ndarray, ids: np.ndarray) -> bytes:
    n, dim = vecs.shape
    return (_head(empty, n, dim) + np.ascontiguousarray(vecs, "<f4").tobytes() + struct.pack("<Q", n)
            + np.ascontiguousarray(ids, "<i8").tobytes())


class FlatWriter:
    """Write an exact inner-product index (``Flat``) to ``path`` as the vectors come; ``ids`` are known
    in advance (question ids, in the order the vectors will be written)."""

    def __init__(self, path: str, dim: int, ids: np.ndarray):
        empty = _empty(dim)
        if empty is None:
            raise NotImplementedError("this FAISS version writes flat indexes in another layout")
        self.ids, self.dim, self.written = np.asarray(ids, dtype=np.int64), dim, 0
        self._fh = open(path, "wb")
        self._fh.write(_head(empty, len(self.ids), dim))

    @staticmethod
    def supported(dim: int) -> bool:
        return _empty(dim) is not None

    def write(self, vecs: np.ndarray) -> None:
        self._fh.write(np.ascontiguousarray(vecs, "<f4").tobytes())
        self.written += len(vecs)

    def __enter__(self) -> "FlatWriter":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        """Finish the file (the ids after the vectors); after an error, only close it."""
        if exc_type is not None:
            self._fh.close()
            return
        try:
            if self.written != len(self.ids):
                raise ValueError(f"{self.written} vectors written for {len(self.ids)} ids")
            self._fh.write(struct.pack("<Q", len(self.ids)) + self.ids.tobytes())
            self._fh.flush()
            os.fsync(self._fh.fileno())
        finally:
            self._fh.close()
