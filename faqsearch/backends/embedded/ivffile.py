"""The FAISS file of an IVF index written as the vectors come, so a build holds one chunk of vectors
at a time instead of every inverted list: an ``IndexIDMap2`` over a trained ``IndexIVF*`` (Flat, SQ,
PQ codes), byte for byte what ``faiss.write_index`` writes after adding the same vectors in the same
order (checked against FAISS itself on the trained index before use; where the layout differs, the
caller builds in memory instead).

Each chunk is assigned to its cells and encoded by FAISS; its codes and cell numbers are appended to
two temporary files beside the target. At the end the lists are laid out cell by cell (FAISS's
``ilar`` section: cell sizes, then each cell's codes and positions), reading the codes back from the
temporary file, which the kernel caches or pages as it likes. Memory: the chunk, plus 16 bytes per
vector for the cell numbers and their order at the end (the ids array the caller already holds is 8).
Only IVF Flat, SQ and PQ indexes are written this way; other IVF types build in memory.
"""
from __future__ import annotations

import os
import struct

import numpy as np

_LIST_BLOCK = 65_536  # codes gathered per read while one cell is written


def _ivf_of(index):
    """The IVF inside ``index`` when ``index`` is an IndexIDMap2 directly over an IVF Flat, SQ or PQ
    index whose lists are FAISS's in-memory arrays; else None."""
    import faiss

    if not isinstance(index, faiss.IndexIDMap2):
        return None
    inner = faiss.downcast_index(index.index)
    # the exact types whose codes depend on each vector alone (not FlatDedup, whose lists depend on
    # the others; not spectral hashing, which FAISS cannot clone): the other IVF types build in memory
    if type(inner) not in (faiss.IndexIVFFlat, faiss.IndexIVFScalarQuantizer, faiss.IndexIVFPQ):
        return None
    if not isinstance(faiss.downcast_InvertedLists(inner.invlists), faiss.ArrayInvertedLists):
        return None
    return inner


def _empty_suffix(nlist: int, code_size: int) -> bytes:
    # empty lists are written sparse (no cell has entries), then the IDMap2's empty id vector
    return b"ilar" + struct.pack("<QQ", nlist, code_size) + b"sprs" + struct.pack("<QQ", 0, 0)


class IVFWriter:
    """Write ``trained`` (an empty, trained ``IndexIDMap2(IndexIVF*)``, not changed) filled with the
    vectors passed to :meth:`write`, in that order, with ``ids`` (known in advance) to ``path``."""

    def __init__(self, trained, path: str, ids: np.ndarray):
        self._ivf = _ivf_of(trained)
        if self._ivf is None or trained.ntotal:
            raise NotImplementedError("not an empty IndexIDMap2 over an IVF index with in-memory lists")
        self.ids = np.ascontiguousarray(ids, dtype="<i8")
        self._trained, self.path, self.written = trained, path, 0
        self.nlist, self.code_size = int(self._ivf.nlist), int(self._ivf.code_size)
        self._codes_path, self._lists_path = path + ".codes.tmp", path + ".lists.tmp"
        self._codes = open(self._codes_path, "wb")
        self._lists = open(self._lists_path, "wb")

    def write(self, vecs: np.ndarray) -> None:
        """Assign a chunk of vectors to cells and append their codes."""
        import faiss

        x = np.ascontiguousarray(vecs, dtype=np.float32)
        n = len(x)
        if not n:
            return
        _, lists = self._ivf.quantizer.search(x, 1)
        lists = np.ascontiguousarray(lists.reshape(n), dtype=np.int64)
        if (lists < 0).any():  # a vector no cell takes (not finite): FAISS would drop it silently
            raise ValueError(f"vectors {self.written}-{self.written + n} could not be assigned to a cell")
        codes = np.empty((n, self.code_size), dtype=np.uint8)
        self._ivf.encode_vectors(n, faiss.swig_ptr(x), faiss.swig_ptr(lists), faiss.swig_ptr(codes))
        self._codes.write(codes.tobytes())
        self._lists.write(lists.astype("<i8").tobytes())
        self.written += n

    def _head(self, n: int) -> bytes:
        """FAISS's bytes for the trained index holding ``n`` vectors, up to its inverted lists."""
        import faiss

        empty = faiss.clone_index(self._trained)
        empty.ntotal = n
        faiss.downcast_index(empty.index).ntotal = n
        data = faiss.serialize_index(empty).tobytes()
        suffix = _empty_suffix(self.nlist, self.code_size)
        if not data.endswith(suffix):
            raise NotImplementedError("this FAISS writes IVF indexes in another layout")
        return data[:-len(suffix)]

    def _finish(self) -> None:
        self._codes.close()
        self._lists.close()
        n = len(self.ids)
        if self.written != n:
            raise ValueError(f"{self.written} vectors written for {n} ids")
        cells = np.fromfile(self._lists_path, dtype="<i8")
        sizes = np.bincount(cells, minlength=self.nlist).astype("<u8")
        order = np.argsort(cells, kind="stable")  # positions, cell by cell, in the order they were added
        del cells  # peak: the cell numbers and their order, 16 bytes a vector
        codes = (np.memmap(self._codes_path, dtype=np.uint8, mode="r", shape=(n, self.code_size)) if n
                 else np.empty((0, self.code_size), np.uint8))
        with open(self.path, "wb") as out:
            out.write(self._head(n) + b"ilar" + struct.pack("<QQ", self.nlist, self.code_size))
            nonzero = np.flatnonzero(sizes)
            if len(nonzero) > self.nlist // 2:
                out.write(b"full" + struct.pack("<Q", self.nlist) + sizes.tobytes())
            else:
                pairs = np.stack([nonzero.astype("<u8"), sizes[nonzero]], axis=1).ravel()
                out.write(b"sprs" + struct.pack("<Q", len(pairs)) + pairs.tobytes())
            start = 0
            for size in sizes[nonzero]:
                rows = order[start:start + int(size)]
                for b in range(0, len(rows), _LIST_BLOCK):
                    out.write(np.ascontiguousarray(codes[rows[b:b + _LIST_BLOCK]]).tobytes())
                out.write(rows.astype("<i8").tobytes())
                start += int(size)
            del order
            out.write(struct.pack("<Q", n))
            out.write(memoryview(self.ids))  # no copy of the ids
            out.flush()
            os.fsync(out.fileno())
        del codes

    def _cleanup(self) -> None:
        for f in (self._codes, self._lists):
            f.close()
        for p in (self._codes_path, self._lists_path):
            try:
                os.remove(p)
            except FileNotFoundError:
                pass

    def __enter__(self) -> "IVFWriter":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        """Finish the file; after an error, only remove the temporary files."""
        try:
            if exc_type is None:
                self._finish()
        finally:
            self._cleanup()


def streams(trained, sample: np.ndarray, directory: str) -> bool:
    """Does :class:`IVFWriter` write what FAISS writes for this trained index? Checked on up to 300
    vectors of ``sample`` (with shuffled ids) against ``faiss.write_index`` of the same index."""
    import faiss

    if _ivf_of(trained) is None or trained.ntotal or not len(sample):
        return False
    x = np.ascontiguousarray(sample[:300], dtype=np.float32)
    ids = np.random.default_rng(1).permutation(len(x)).astype(np.int64) * 7 + 3
    path = os.path.join(directory, ".ivf-layout-check")
    try:
        ref = faiss.clone_index(trained)
        ref.add_with_ids(x, ids)
        want = faiss.serialize_index(ref).tobytes()
        with IVFWriter(trained, path, ids) as w:
            w.write(x[:len(x) // 2])
            w.write(x[len(x) // 2:])
        with open(path, "rb") as fh:
            return fh.read() == want
    except (NotImplementedError, RuntimeError, ValueError):  # FAISS refuses: built in memory instead
        return False
    finally:
        if os.path.exists(path):
            os.remove(path)
