"""Edits whose cost does not grow with the index: a fixed base plus a small per-version delta.

An embedded index version holds base files written by a build, a refit or a compaction
(``vectors.npy`` and ``ids.npy``: the raw encoder vectors and their question ids in id order;
``index.faiss``; ``whitening.npz``), never modified afterwards, and ``store.db``, whose rows carry
generations (see :mod:`faqsearch.backends.embedded.store`). An edit at generation G leaves all of them as they are
and writes

* the store rows of generation G+1 (readers of G do not see them),
* ``delta-<G+1>.npz``: the raw vectors of every question added since the base, the ids of base
  questions removed since, and the transform's updated moments,
* then ``config.json`` of generation G+1 in one atomic rename: the commit.

So an edit costs what it changes plus what was changed since the base, not the index. Readers
search the base FAISS index with the removed ids excluded inside FAISS, and the delta's vectors
exactly beside it. When the delta outgrows :func:`delta_limit`, the next edit writes a new base
(a compaction, in a new version directory like every rebuild); refit and tune do too.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ...index.format import DELTA as _DELTA, TMP
from ...files import NPY_LOCK



@dataclass
class Delta:
    """What changed since the base: added questions (ids ascending, raw vectors) and removed base ids."""

    ids: np.ndarray  # int64
    raw: np.ndarray  # float32, one row per id
    removed: np.ndarray  # int64, sorted: base questions removed since the base was written
    moments: dict[str, np.ndarray] | None = None  # the transform's moments after the edit (Moments.to_arrays())

    @classmethod
    def empty(cls, dim: int) -> "Delta":
        return cls(np.empty(0, np.int64), np.empty((0, dim), np.float32), np.empty(0, np.int64))

    def __len__(self) -> int:
        return len(self.ids) + len(self.removed)

    def apply(self, removed_ids: np.ndarray, new_ids: np.ndarray, raw_new: np.ndarray) -> "Delta":
        """The delta after one more edit (a new object; this one is what readers of G still use)."""
        gone = np.asarray(removed_ids, dtype=np.int64)
        drop = np.isin(self.ids, gone)  # added since the base and removed again: simply forgotten
        ids = np.concatenate([self.ids[~drop], np.asarray(new_ids, dtype=np.int64)])
        raw = np.concatenate([self.raw[~drop], np.asarray(raw_new, dtype=np.float32).reshape(-1, self.raw.shape[1])])
        removed = np.union1d(self.removed, gone[~np.isin(gone, self.ids)])
        return Delta(ids, raw, removed.astype(np.int64))

    def save(self, path: str) -> None:
        """Write atomically (a temporary name, fsync, rename): a killed or failed writer leaves no half file."""
        import io

        from ...files import atomic_write

        buf = io.BytesIO()
        np.savez(buf, ids=self.ids, raw=self.raw, removed=self.removed, **(self.moments or {}))
        atomic_write(path, buf.getvalue())

    @classmethod
    def load(cls, path: str) -> "Delta":
        with NPY_LOCK, np.load(path, allow_pickle=False) as z:
            moments = {k: z[k] for k in z.files if k.startswith("moments_")}  # Moments.to_arrays keys
            return cls(z["ids"].astype(np.int64), z["raw"].astype(np.float32), z["removed"].astype(np.int64),
                       moments or None)


def remove_stale(directory: str, keep: set[int]) -> None:
    """Delete delta files of generations not in ``keep`` (the writer's: under the lock)."""
    for name in os.listdir(directory):
        m = _DELTA.match(name) or (_DELTA.match(name[:-len(TMP)]) if name.endswith(TMP) else None)
        if m and (int(m.group(1)) not in keep or name.endswith(TMP)):
            try:
                os.remove(os.path.join(directory, name))
            except FileNotFoundError:
                pass


class DeltaIndex:
    """The base FAISS index (read-only) with a delta: removed ids excluded inside FAISS, added
    vectors searched exactly beside it, results merged by score. It has the face of
    :class:`faqsearch.backends.embedded.faiss.VectorIndex` that searching uses."""

    search_distinct = None  # the searcher widens a plain search to k distinct FAQs

    def __init__(self, base, delta: Delta, whitening):
        self.base = base
        self.delta = delta
        self.vectors = whitening.transform(delta.raw) if len(delta.ids) else np.empty((0, base.dim), np.float32)
        self.dim = base.dim
        self.factory = base.factory
        self.nprobe = base.nprobe
        self.ef_search = base.ef_search
        self.supports_removal = base.supports_removal

    def __len__(self) -> int:
        return len(self.base) - len(self.delta.removed) + len(self.delta.ids)

    def max_id(self) -> int:
        return max(self.base.max_id(), int(self.delta.ids.max()) if len(self.delta.ids) else -1)

    def search(self, queries: np.ndarray, k: int, ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        removed = self.delta.removed
        if ids is not None:
            allowed = np.asarray(ids, dtype=np.int64)
            base_ids = np.setdiff1d(allowed, removed) if len(removed) else allowed
            scores, found = (self.base.search(queries, k, base_ids) if len(base_ids) else
                             (np.full((len(queries), 0), -np.inf, np.float32), np.empty((len(queries), 0), np.int64)))
            keep = np.isin(self.delta.ids, allowed)
        else:
            scores, found = self.base.search(queries, k, exclude=removed)
            keep = None
        if not len(self.delta.ids):
            return scores, found
        dids, dvecs = (self.delta.ids, self.vectors) if keep is None else (self.delta.ids[keep], self.vectors[keep])
        if not len(dids):
            return scores, found
        dscores = queries @ dvecs.T
        all_s = np.concatenate([scores, dscores], axis=1)
        all_i = np.concatenate([found, np.broadcast_to(dids, dscores.shape)], axis=1)
        all_s = np.where(all_i >= 0, all_s, -np.inf)
        order = np.argsort(-all_s, axis=1, kind="stable")[:, :k]
        out_s = np.take_along_axis(all_s, order, axis=1).astype(np.float32)
        out_i = np.take_along_axis(all_i, order, axis=1)
        out_i[~np.isfinite(out_s)] = -1
        return out_s, out_i

    def reconstruct(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty((len(ids), self.base.dim), np.float32)
        mine = np.isin(ids, self.delta.ids)  # delta ids ascend: new ids are always larger
        if mine.any():
            out[mine] = self.vectors[np.searchsorted(self.delta.ids, ids[mine])]
        if (~mine).any():
            out[~mine] = self.base.reconstruct(ids[~mine])
        return out
