"""Applying an edit plan to an embedded index: in place as a delta, or as a new base.

Small edits (the usual case: a few FAQs a day) take :func:`apply_delta`: the base files are left
as they are, the store gets rows of the next generation, a new ``delta-<G+1>.npz`` is written and
``config.json`` is replaced last (the commit); see :mod:`faqsearch.delta`. Its cost is that of the
change plus the delta so far, whatever the size of the index.

When the delta would outgrow :func:`faqsearch.delta.delta_limit`, or the index predates deltas
(no ``ids.npy``), :func:`rewrite` builds the next version in a new directory (store copied, raw
vectors and FAISS index rewritten with the delta folded in) and switches the index link to it.

Both keep the guarantees of every write: one writer at a time (the caller holds the lock), and a
failure, an interrupt or a kill at any point leaves readers on the previous generation.
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from . import config as cfg
from .delta import IDS_FILE, Delta, delta_file, delta_limit, remove_stale
from .index import VectorIndex
from .indexdir import next_version, share_file
from .store import Store
from .whitening import Moments

if TYPE_CHECKING:
    from .engine import FAQSearch, _Edit

CHUNK = 4096


def apply(engine: "FAQSearch", plan: "_Edit", source: str, progress: bool) -> tuple[int, int]:
    """Apply ``plan``; returns (questions added, questions removed). The caller holds the writer lock."""
    base_ids, base_raw = engine.base_vectors()
    delta = engine.delta or Delta.empty(base_raw.shape[1])
    adds = sum(len(f.questions) for f in plan.new_faqs) + len(plan.new_questions)
    drops = len(plan.removed_questions) + engine.store.count_questions(plan.removed_faqs)
    if os.path.exists(os.path.join(engine.dir, IDS_FILE)) and len(delta) + adds + drops <= delta_limit(len(base_ids)):
        return apply_delta(engine, plan, source, progress, base_ids, base_raw, delta)
    return rewrite(engine, plan, source, progress, base_ids, base_raw, delta)


def _texts(plan: "_Edit") -> list[str]:
    """New question texts in the order the store inserts them (new FAQs first, then added questions)."""
    return [q for f in plan.new_faqs for q in f.questions] + [t for _, t in plan.new_questions]


def _first_id(engine: "FAQSearch", base_ids: np.ndarray, delta: Delta) -> int:
    """Ids are never reused: a base vector of a removed question (a tombstone) still carries its id."""
    return max(int(engine.config.get("next_question_id", 0)), engine.index.max_id() + 1,
               int(base_ids.max()) + 1 if len(base_ids) else 1, int(delta.ids.max()) + 1 if len(delta.ids) else 1)


def _write_rows(store: Store, plan: "_Edit", source: str, first_id: int, gen: int | None) -> tuple[list[int], list]:
    removed = store.delete_faqs(plan.removed_faqs, gen=gen) + [int(i) for i in plan.removed_questions]
    store.delete_questions(plan.removed_questions, gen=gen)
    for f in plan.changed_faqs:
        store.update_faq(f, gen=gen)
    rows = store.insert_faqs(plan.new_faqs, source=source, first_id=first_id, gen=gen) if plan.new_faqs else []
    for fid, text in plan.new_questions:
        rows += store.add_questions(fid, [text], source=source, first_id=first_id, gen=gen)
    return removed, rows


def _raw_of(ids: np.ndarray, base_ids: np.ndarray, base_raw: np.ndarray, delta: Delta) -> np.ndarray:
    """Raw vectors of live questions by id, from the delta or the base."""
    out = np.empty((len(ids), base_raw.shape[1]), np.float32)
    in_delta = np.isin(ids, delta.ids)
    if in_delta.any():
        out[in_delta] = delta.raw[np.searchsorted(delta.ids, ids[in_delta])]
    rest = ids[~in_delta]
    if len(rest):
        out[~in_delta] = np.asarray(base_raw[np.searchsorted(base_ids, rest)])
    return out


def _moments(engine: "FAQSearch", removed: np.ndarray, raw_new: np.ndarray, base_ids, base_raw, delta) -> Moments:
    """The transform's moments after the edit: exact when it was fitted on the corpus questions."""
    moments = Moments.from_arrays(engine.whitening.moments.to_arrays())
    if engine.config["whitening"].get("fitted_on") == "corpus questions":
        moments.remove(_raw_of(removed, base_ids, base_raw, delta)).update(raw_new)
    return moments


def _counts(engine: "FAQSearch", plan: "_Edit", store: Store, added: int, removed: int) -> dict[str, int]:
    """The counts after an in-place edit without counting the whole store: FAQs and questions
    exactly, the largest FAQ as an upper bound (it only sizes the dense search's first fetch)."""
    old = engine.config.get("counts") or store.counts()
    touched = {f.id for f in plan.new_faqs} | {f.id for f in plan.changed_faqs} | {fid for fid, _ in plan.new_questions}
    most = max([int(old.get("max_questions_per_faq", 1))] + [store.count_questions([fid]) for fid in touched])
    return {"faqs": int(old["faqs"]) + len(plan.new_faqs) - len(plan.removed_faqs),
            "questions": int(old["questions"]) + added - removed, "max_questions_per_faq": most}


def _new_config(engine: "FAQSearch", plan: "_Edit", counts: dict[str, int], next_id: int) -> dict:
    config = {**engine.config, **plan.config}
    config["counts"] = counts
    config["next_question_id"] = next_id
    config["generation"] = int(config.get("generation", 0)) + 1
    config["modified"] = cfg.new_config()["created"]
    return config


def apply_delta(engine: "FAQSearch", plan: "_Edit", source: str, progress: bool, base_ids: np.ndarray,
                base_raw: np.ndarray, delta: Delta) -> tuple[int, int]:
    """The edit in place: store rows of generation G+1, ``delta-<G+1>.npz``, then config.json."""
    g = int(engine.config.get("generation", 0))
    directory = engine.dir
    remove_stale(directory, keep={g - 1, g})  # files of killed writers (never committed)
    texts = _texts(plan)
    # encoding comes first: an error or an interrupt here has touched nothing
    raw_new = engine.encoder.encode(texts, progress=progress) if texts else \
        np.empty((0, base_raw.shape[1]), np.float32)
    first_id = _first_id(engine, base_ids, delta)
    store = Store(os.path.join(directory, cfg.FILES["store"]), generation=g + 1)
    name = delta_file(g + 1)
    committed = False
    try:
        store.purge(g)  # rows of killed writers, and rows no reader of G or G-1 can see
        with store.transaction():  # rolled back on any error: the file stays as it was
            removed, rows = _write_rows(store, plan, source, first_id, g + 1)
            if [r[1] for r in rows] != texts:
                raise AssertionError("store rows and encoded texts disagree")
            new_ids = np.array([r[0] for r in rows], dtype=np.int64)
            gone = np.array(removed, dtype=np.int64)
            moments = _moments(engine, gone, raw_new, base_ids, base_raw, delta)
            new_delta = delta.apply(gone, new_ids, raw_new)
            new_delta.moments = moments.to_arrays()
            new_delta.save(os.path.join(directory, name))
            config = _new_config(engine, plan, _counts(engine, plan, store, len(rows), len(removed)),
                                 max([first_id] + [r[0] + 1 for r in rows]))
        # the store now holds generation G+1, invisible until this config names it
        config["delta"] = {"file": name, "added": int(len(new_delta.ids)), "removed": int(len(new_delta.removed)),
                           "bytes": os.path.getsize(os.path.join(directory, name))}
        cfg.save_config(directory, config)
        committed = True
    finally:
        store.close()
        if not committed:
            try:
                os.remove(os.path.join(directory, name))
            except FileNotFoundError:
                pass
    remove_stale(directory, keep={g, g + 1})  # readers that opened G a moment ago still find its delta
    return len(rows), len(removed)


def purge_leftovers(engine: "FAQSearch") -> None:
    """For a writer that commits generation G+1 without :func:`apply_delta` while sharing the store
    (refit, tune --apply): rows a killed edit left for G+1 must not become visible with it."""
    g = int(engine.config.get("generation", 0))
    store = Store(os.path.join(engine.dir, cfg.FILES["store"]), generation=g)
    try:
        store.purge(g)
    finally:
        store.close()


def write_live_vectors(engine: "FAQSearch", directory: str, drop: np.ndarray | None = None,
                       extra: np.ndarray | None = None, extra_ids: np.ndarray | None = None,
                       base: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Write ``vectors.npy`` and ``ids.npy`` of the live questions into a new version directory:
    the base without removed ids and without ``drop``, then the delta's additions, then ``extra``.
    Unchanged files are hard-linked. ``base``: ``engine.base_vectors()`` when the caller has them.
    Returns (ids, raw vectors memory-mapped)."""
    base_ids, base_raw = base if base is not None else engine.base_vectors()
    delta = engine.delta or Delta.empty(base_raw.shape[1])
    drop = np.empty(0, np.int64) if drop is None else np.asarray(drop, dtype=np.int64)
    extra = np.empty((0, base_raw.shape[1]), np.float32) if extra is None else extra
    extra_ids = np.empty(0, np.int64) if extra_ids is None else np.asarray(extra_ids, dtype=np.int64)
    vec_path, ids_path = os.path.join(directory, cfg.FILES["vectors"]), os.path.join(directory, IDS_FILE)
    unchanged = not len(delta) and not len(drop) and not len(extra)
    if unchanged and os.path.exists(os.path.join(engine.dir, IDS_FILE)):
        share_file(engine.dir, directory, cfg.FILES["vectors"])
        share_file(engine.dir, directory, IDS_FILE)
        return base_ids, np.load(vec_path, mmap_mode="r")
    keep = ~np.isin(base_ids, np.union1d(delta.removed, drop))
    dkeep = ~np.isin(delta.ids, drop)
    ids = np.concatenate([base_ids[keep], delta.ids[dkeep], extra_ids])
    out = np.lib.format.open_memmap(vec_path, mode="w+", dtype=np.float32, shape=(len(ids), base_raw.shape[1]))
    pos = 0
    for start in range(0, len(base_ids), CHUNK):
        block = np.asarray(base_raw[start:start + CHUNK])[keep[start:start + CHUNK]]
        out[pos:pos + len(block)] = block
        pos += len(block)
    for block in (delta.raw[dkeep], extra):
        out[pos:pos + len(block)] = block
        pos += len(block)
    out.flush()
    del out
    np.save(ids_path, ids)
    return ids, np.load(vec_path, mmap_mode="r")


def rewrite(engine: "FAQSearch", plan: "_Edit", source: str, progress: bool, base_ids: np.ndarray,
            base_raw: np.ndarray, delta: Delta) -> tuple[int, int]:
    """The edit as a new base in a new version directory (the delta, if any, folded in)."""
    g = int(engine.config.get("generation", 0))
    first_id = _first_id(engine, base_ids, delta)
    with next_version(engine.path, "edit") as tmp:
        engine.store.backup(os.path.join(tmp, cfg.FILES["store"]))
        store = Store(os.path.join(tmp, cfg.FILES["store"]), generation=g)
        try:
            store.purge(g)
            store.purge(g + 1)  # and every row generation G no longer sees: the copy holds G exactly
            removed, rows = _write_rows(store, plan, source, first_id, None)
            new_ids = np.array([r[0] for r in rows], dtype=np.int64)
            raw_new = engine.encoder.encode([r[1] for r in rows], progress=progress) if rows else \
                np.empty((0, base_raw.shape[1]), np.float32)
            gone = np.array(removed, dtype=np.int64)
            moments = _moments(engine, gone, raw_new, base_ids, base_raw, delta)
            white = replace(engine.whitening, moments=moments)
            write_live_vectors(engine, tmp, drop=gone, extra=raw_new, extra_ids=new_ids, base=(base_ids, base_raw))
            ixc = dict(engine.config.get("index", {}))
            vindex = VectorIndex.load(os.path.join(engine.dir, cfg.FILES["faiss"]), engine.index.factory,
                                      ixc.get("nprobe"), ixc.get("ef_search"))
            from_base = np.union1d(delta.removed, gone[np.isin(gone, base_ids)])
            if len(from_base) and vindex.remove(from_base) == 0 and not vindex.supports_removal:
                ixc["tombstones"] = int(ixc.get("tombstones", 0)) + len(from_base)
            dkeep = ~np.isin(delta.ids, gone)
            added_ids = np.concatenate([delta.ids[dkeep], new_ids])
            if len(added_ids):
                vindex.add(white.transform(np.concatenate([delta.raw[dkeep], raw_new])), added_ids)
            vindex.save(os.path.join(tmp, cfg.FILES["faiss"]))
            white.save(os.path.join(tmp, cfg.FILES["whitening"]))
            config = _new_config(engine, plan, store.counts(), max([first_id] + [r[0] + 1 for r in rows]))
            config["index"] = ixc
            config.pop("delta", None)
            cfg.save_config(tmp, config)
        finally:
            store.close()
    return len(rows), len(removed)
