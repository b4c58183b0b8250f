"""Applying an edit plan to an embedded index: in place as a delta, or as a new base.

Small edits (the usual case: a few FAQs a day) take :func:`apply_delta`: the base files are left
as they are, the store gets rows of the next generation, a new ``delta-<G+1>.npz`` is written and
the version's ``config.json`` is replaced last (the commit); see :mod:`.delta`. Its cost is that of
the change plus the delta so far, whatever the size of the index. An edit that drops questions
writes its delta into a new version instead (:func:`_linked_version`: files linked, store copied),
so the version before it stays as it was, for ``faqsearch restore``.

When the delta would outgrow :func:`faqsearch.backends.base.delta_limit`, or the index predates deltas (no
``ids.npy``), :func:`rewrite` builds the next version in a new directory (store copied with only
the live rows, raw vectors and FAISS index rewritten with the delta folded in): a compaction.

Both keep the guarantees of every write: one writer at a time (the caller holds the Writer), the
new generation checked against what opening it will check before it is committed, and a failure,
an interrupt or a kill at any point leaves readers on the previous generation.
"""
from __future__ import annotations

import os
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ...index import config as cfg
from ...defaults import CHUNK
from ...errors import FAQSearchError
from ...results import USER_SOURCES
from ...text import read_alike
from ...files import load_npy, preallocate, sample_digest, share_file
from ...index.format import CONFIG, FAISS, IDS, STORE, VECTORS, WHITENING, Config, delta_file
from .postings import share as share_postings
from .store import Store
from .tokenstates import share as share_token_states
from ...whitening import Moments
from ..base import delta_limit
from .delta import Delta, remove_stale
from .faiss import VectorIndex, factory_for, index_section, write_vector_index

if TYPE_CHECKING:
    from ...index.directory import Writer
    from ...edits.plan import Edit
    from ...index.snapshot import Snapshot


class InconsistentEdit(FAQSearchError):
    """An edit whose result would not pass the open checks: nothing was committed."""


def apply(writer: Writer, snap: "Snapshot", plan: "Edit", raw_new: np.ndarray, source: str) -> tuple[int, int]:
    """Apply ``plan`` (``raw_new``: its encoded texts); returns (questions added, questions removed)."""
    check_store(snap)  # a damaged store is refused, never edited
    delta = snap.delta or Delta.empty(snap.raw.dim)
    drops = len(plan.removed_questions) + snap.store.count_questions(plan.removed_faqs)
    recorded = snap.config.delta.changes if snap.config.delta is not None else None
    pending = int(len(delta) if recorded is None else recorded)
    change = len(raw_new) + drops + len(plan.changed_faqs)
    erase = _erases_users_text(snap, plan)
    if snap.raw.has_ids and not erase and pending + change <= delta_limit(len(snap.raw.ids)):
        # an edit that drops questions or rewrites what several FAQs say (an upsert of a bad export) writes its
        # delta into a new version, so the one before it is kept whole for `restore`
        return apply_delta(writer, snap, plan, raw_new, source, delta, pending + change,
                           _linked_version(writer, snap) if drops or plan.rewrites_many else None)
    return rewrite(writer, snap, plan, raw_new, source, delta, erase)


def _erases_users_text(snap: "Snapshot", plan: "Edit") -> bool:
    """Whether the edit removes a question that was a user's query (feedback, approve: personal text a
    person may want gone). It is then written as a compaction: a delta only marks rows removed, so the
    new live store would keep the text (and its words in the full-text index) until the next one."""
    kept = {read_alike(t) for t in plan.texts()}  # a phrasing feedback moves to another FAQ is not erased
    rows = snap.store.questions(plan.removed_questions).values() if plan.removed_questions else []
    return any(r["source"] in USER_SOURCES and read_alike(r["question"]) not in kept for r in rows) or any(
        q["source"] in USER_SOURCES and read_alike(q["text"]) not in kept
        for f in plan.removed_faqs for q in (snap.store.faq(f) or {"questions": []})["questions"])


# store files (device, inode, size, modification and change times) this process checked, or left after its own
# commit: SQLite's quick check reads the whole file (0.37 s at 1M questions), so each state is checked once
_CHECKED: dict[tuple[int, ...], None] = {}
_CHECKED_MAX = 64
_CHECKED_LOCK = threading.Lock()


def _store_state(version: str) -> tuple[int, ...]:
    st = os.stat(os.path.join(version, STORE))
    # ctime too: a program can set a file's times back (cp -p, rsync, touch -r), never its ctime
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def check_store(snap: "Snapshot") -> None:
    """SQLite's quick check of the store an edit builds on, unless this process already checked the
    file in this state or left it so with its own commit; any write to the file by anything else
    (another process's edit, a restore, a damaged copy) changes its change time and is checked.
    Damage without a write (the medium failing) is seen by the next process, not by this one."""
    state = _store_state(snap.version)
    if state not in _CHECKED:
        snap.store.check_integrity(snap.path)
        _trust(state)


def _trust(state: tuple[int, ...]) -> None:
    with _CHECKED_LOCK:  # edits of different indexes may run in threads of one process
        _CHECKED[state] = None
        while len(_CHECKED) > _CHECKED_MAX:
            del _CHECKED[next(iter(_CHECKED))]


def _first_id(snap: "Snapshot", delta: Delta) -> int:
    """Ids are never reused: a base vector of a removed question (a tombstone) still carries its id."""
    base_ids = snap.raw.ids
    return max(int(snap.config.next_question_id or 0), snap.index.max_id() + 1,
               int(base_ids.max()) + 1 if len(base_ids) else 1, int(delta.ids.max()) + 1 if len(delta.ids) else 1)


def _write_rows(store: Store, plan: "Edit", source: str, first_id: int, gen: int | None) -> tuple[list[int], list]:
    removed = store.delete_faqs(plan.removed_faqs, gen=gen)
    store.delete_questions(plan.removed_questions, gen=gen)
    removed += [int(i) for i in plan.removed_questions]
    for f in plan.changed_faqs:
        store.update_faq(f, gen=gen)
    rows = store.insert_faqs(plan.new_faqs, source=source, first_id=first_id, gen=gen) if plan.new_faqs else []
    for fid, text in plan.new_questions:
        rows += store.add_questions(fid, [text], source=source, first_id=first_id, gen=gen)
    if [r[1] for r in rows] != plan.texts():
        raise InconsistentEdit("store rows and encoded texts disagree; nothing was committed")
    return removed, rows


def _moments(snap: "Snapshot", removed: np.ndarray, raw_new: np.ndarray) -> Moments:
    """The transform's moments after the edit: exact when it was fitted on the corpus questions."""
    moments = Moments.from_arrays(snap.whitening.moments.to_arrays())
    if snap.config.whitening.fitted_on == "corpus questions":
        moments.remove(snap.raw.get(removed)).update(raw_new)
    return moments


def _counts(snap: "Snapshot", plan: "Edit", store: Store, added: int, removed: int) -> dict[str, int]:
    """The counts after an in-place edit without counting the whole store: FAQs and questions
    exactly, the largest FAQ as an upper bound (it only sizes the dense search's first fetch)."""
    old = snap.config.counts.to_dict() if snap.config.counts is not None else store.counts()
    touched = {f.id for f in plan.new_faqs} | {f.id for f in plan.changed_faqs} | {fid for fid, _ in plan.new_questions}
    most = max([int(old.get("max_questions_per_faq", 1))] + [store.count_questions([fid]) for fid in touched])
    return {"faqs": int(old["faqs"]) + len(plan.new_faqs) - len(plan.removed_faqs),
            "questions": int(old["questions"]) + added - removed, "max_questions_per_faq": most}


def _check_generation(store: Store, snap: "Snapshot", plan: "Edit", counts: dict[str, int], rows: list,
                      removed: list[int], index_len: int) -> None:
    """Before the commit: the new generation holds exactly what its config will say, as opening it
    will check (its rows counted where they changed, not over the whole store)."""
    g1 = snap.generation + 1
    written = store.rows_of_generation(g1)
    if written["added"] != len(rows) or written["removed"] != len(set(removed)) or len(set(removed)) != len(removed):
        raise InconsistentEdit(f"the edit wrote {written} question rows for {len(rows)} added and {len(removed)} "
                               "removed; nothing was committed")
    twice = store.faqs_visible_twice([f.id for f in plan.new_faqs + plan.changed_faqs])
    if twice:
        raise InconsistentEdit(f"FAQ {twice[0]!r} would be stored twice; nothing was committed")
    if index_len != counts["questions"] + snap.tombstones:
        raise InconsistentEdit(f"the edit would leave {counts['questions']} questions and {index_len} vectors; "
                               "nothing was committed")


def _linked_version(writer: Writer, snap: "Snapshot") -> str:
    """A new version holding the live one's files as hard links (written once) and a private copy of
    its store (written in place): what an edit that drops questions applies its delta to."""
    tmp = writer.new_version()
    for root, dirs, files in os.walk(snap.version):
        rel = os.path.relpath(root, snap.version)
        for d in dirs:
            os.makedirs(os.path.join(tmp, rel, d), exist_ok=True)
        for f in files:
            name = os.path.normpath(os.path.join(rel, f))
            if name not in (CONFIG, STORE) and not name.endswith(
                    (".tmp", "-journal", "-wal", "-shm")):
                share_file(snap.version, tmp, name)
    snap.store.backup(os.path.join(tmp, STORE))
    return tmp


def apply_delta(writer: Writer, snap: "Snapshot", plan: "Edit", raw_new: np.ndarray, source: str, delta: Delta,
                changes: int, directory: str | None = None) -> tuple[int, int]:
    """The edit in place (or in ``directory``, a new version from :func:`_linked_version`): store rows
    of generation G+1, ``delta-<G+1>.npz``, then the config commit."""
    g = snap.generation
    directory = directory or snap.version
    remove_stale(directory, keep={g - 1, g})  # files of killed writers (never committed)
    first_id = _first_id(snap, delta)
    store = Store(os.path.join(directory, STORE), generation=g + 1)
    name = delta_file(g + 1)
    committed = False
    try:
        store.discard_uncommitted(g)  # rows of killed writers
        with store.transaction():  # rolled back on any error: the file stays as it was
            removed, rows = _write_rows(store, plan, source, first_id, g + 1)
            new_ids = np.array([r[0] for r in rows], dtype=np.int64)
            gone = np.array(removed, dtype=np.int64)
            new_delta = delta.apply(gone, new_ids, raw_new)
            new_delta.moments = _moments(snap, gone, raw_new).to_arrays()
            counts = _counts(snap, plan, store, len(rows), len(removed))
            index_len = len(getattr(snap.index, "base", snap.index)) - len(new_delta.removed) + len(new_delta.ids)
            _check_generation(store, snap, plan, counts, rows, removed, index_len)
            new_delta.save(os.path.join(directory, name))
        size = os.path.getsize(os.path.join(directory, name))
        record = {"file": name, "added": int(len(new_delta.ids)), "removed": int(len(new_delta.removed)),
                  "changes": int(changes), "bytes": size, "sample": sample_digest(os.path.join(directory, name), size)}
        config = snap.config.merged(plan.config, counts=counts,
                                    next_question_id=max([first_id] + [r[0] + 1 for r in rows]), delta=record)
        new = None if directory == snap.version else directory
        directory = writer.commit(config, new, snap.config.files if new else None)
        committed = True
        try:
            _trust(_store_state(directory))  # what this edit left: the next one need not read it all again
        except OSError:
            pass  # committed all the same; the next edit checks the file
    finally:
        if not committed:
            try:
                store.discard_uncommitted(g)
            except Exception:  # noqa: BLE001 - the next writer discards them too
                pass
        store.close()
        if not committed:
            try:
                os.remove(os.path.join(directory, name))
            except FileNotFoundError:
                pass
    remove_stale(directory, keep={g, g + 1})  # readers that opened G a moment ago still find its delta
    return len(rows), len(removed)


def write_live_vectors(snap: "Snapshot", directory: str, drop: np.ndarray | None = None,
                       extra: np.ndarray | None = None, extra_ids: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Write ``vectors.npy`` and ``ids.npy`` of the live questions into a new version directory:
    the base without removed ids and without ``drop``, then the delta's additions, then ``extra``.
    Unchanged files are hard-linked (their records kept). Returns (ids, raw vectors memory-mapped,
    the file records)."""
    raw = snap.raw
    base_ids, base_raw = raw.ids, raw.base_raw
    delta = snap.delta or Delta.empty(raw.dim)
    drop = np.empty(0, np.int64) if drop is None else np.asarray(drop, dtype=np.int64)
    extra = np.empty((0, raw.dim), np.float32) if extra is None else extra
    extra_ids = np.empty(0, np.int64) if extra_ids is None else np.asarray(extra_ids, dtype=np.int64)
    vec_path, ids_path = os.path.join(directory, VECTORS), os.path.join(directory, IDS)
    files = snap.config.recorded
    if not len(delta) and not len(drop) and not len(extra) and raw.has_ids:
        records = {}
        for name in (VECTORS, IDS):
            share_file(snap.version, directory, name)
            if isinstance(files.get(name), dict) and files[name].get("sha256"):
                records[name] = files[name]
        return base_ids, load_npy(vec_path, mmap_mode="r"), records
    keep = ~np.isin(base_ids, np.union1d(delta.removed, drop))
    dkeep = ~np.isin(delta.ids, drop)
    ids = np.concatenate([base_ids[keep], delta.ids[dkeep], extra_ids])
    out = np.lib.format.open_memmap(vec_path, mode="w+", dtype=np.float32, shape=(len(ids), raw.dim))
    preallocate(vec_path)
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
    return ids, load_npy(vec_path, mmap_mode="r"), {}


def rewrite(writer: Writer, snap: "Snapshot", plan: "Edit", raw_new: np.ndarray, source: str,
            delta: Delta, erase: bool = False) -> tuple[int, int]:
    """The edit as a new base in a new version directory (the delta, if any, folded in). ``erase``: the
    edit removes users' text, so the copy's freed pages are zeroed and the full-text index is rewritten
    without it (FTS5 deletes only mark its entries)."""
    cfg.verify_files(snap.version, snap.config, snap.path, ("vectors", "ids", "faiss"))  # what we build on
    g = snap.generation
    first_id = _first_id(snap, delta)
    tmp = writer.new_version()
    snap.store.backup(os.path.join(tmp, STORE))
    store = Store(os.path.join(tmp, STORE), generation=g)
    try:
        if erase:
            store.db.execute("pragma secure_delete = on")
        store.keep_only(g)  # the copy holds generation G exactly: no rows of killed writers, none removed
        removed, rows = _write_rows(store, plan, source, first_id, None)
        if erase:
            store.db["questions"].optimize()
        # shared where rows were only added and the live version's arrays are recorded (checked at its open)
        store.write_postings(tmp, previous=snap.version if "lexical" in cfg.recorded_dirs(snap.config) else None)
        new_ids = np.array([r[0] for r in rows], dtype=np.int64)
        gone = np.array(removed, dtype=np.int64)
        white = replace(snap.whitening, moments=_moments(snap, gone, raw_new))
        _, _, records = write_live_vectors(snap, tmp, drop=gone, extra=raw_new, extra_ids=new_ids)
        ixc = _index_record(snap)
        vindex = VectorIndex.load(os.path.join(snap.version, FAISS), snap.index.factory,
                                  ixc.get("nprobe"), ixc.get("ef_search"))
        from_base = np.union1d(delta.removed, gone[np.isin(gone, snap.raw.ids)])
        if len(from_base) and vindex.remove(from_base) == 0 and not vindex.supports_removal:
            ixc["tombstones"] = int(ixc.get("tombstones", 0)) + len(from_base)
        dkeep = ~np.isin(delta.ids, gone)
        added_ids = np.concatenate([delta.ids[dkeep], new_ids])
        if len(added_ids):
            vindex.add(white.transform(np.concatenate([delta.raw[dkeep], raw_new])), added_ids)
        vindex.save(os.path.join(tmp, FAISS))
        white.save(os.path.join(tmp, WHITENING))
        counts = store.counts()
        if len(vindex) != counts["questions"] + int(ixc.get("tombstones", 0)):
            raise InconsistentEdit(f"the edit would leave {counts['questions']} questions and {len(vindex)} vectors; "
                                   "nothing was committed")
        config = snap.config.merged(plan.config, counts=counts, index=ixc,
                                    next_question_id=max([first_id] + [r[0] + 1 for r in rows])).without("delta")
    finally:
        store.close()
    _keep_token_states(snap, tmp, config)  # keyed by text: right for any rows (new questions are encoded)
    writer.commit(config, tmp, records)
    return len(rows), len(removed)


def _index_record(snap: "Snapshot") -> dict[str, Any]:
    """The snapshot's index section as a plain object, to build the next one from."""
    return snap.config.index.to_dict() if snap.config.index is not None else {}


def _keep_token_states(snap: "Snapshot", new: str, config: Config) -> None:
    """The question token states of the snapshot's version into the new version, where its hybrid
    mode uses token matching (a weight set to 0 since, by `tune fusion --apply`, leaves them
    behind), and only states the snapshot's config records (checked when it was opened)."""
    if cfg.fusion_weights(replace(config, mode="hybrid"))["token_weight"] and "tokens" in cfg.recorded_dirs(snap.config):
        share_token_states(snap.version, new)


def _base_sharing_rows(writer: Writer, snap: "Snapshot") -> str:
    """A new version directory for a new base over the same rows (refit, tune --apply, learn): the
    snapshot's files checked, its store and postings shared. Returns the directory."""
    cfg.verify_files(snap.version, snap.config, snap.path, ("vectors", "ids"))
    snap.store.check_integrity(snap.path)
    tmp = writer.new_version()
    store = Store(os.path.join(snap.version, STORE), generation=snap.generation)
    try:
        store.discard_uncommitted(snap.generation)  # shared with the new version: no killed edit's rows in it
        if "lexical" not in cfg.recorded_dirs(snap.config):  # arrays never checked (a version from before records)
            store.write_postings(tmp)
    finally:
        store.close()
    share_file(snap.version, tmp, STORE)
    if "lexical" in cfg.recorded_dirs(snap.config):
        share_postings(snap.version, tmp)  # the same rows: the same postings
    return tmp


def rebuild(writer: Writer, snap: "Snapshot", white, config: Config, calibrate=None) -> None:
    """A new base for another transform (refit, tune --apply): the stored raw vectors transformed
    again, nothing re-encoded; the delta folded in, tombstones dropped; the store shared.
    ``calibrate(config, version)``: the config to commit, measured on the new version first."""
    tmp = _base_sharing_rows(writer, snap)
    _keep_token_states(snap, tmp, config)  # the same questions and encoder
    ids, raw, records = write_live_vectors(snap, tmp)
    ixc = _index_record(snap)
    factory = factory_for(ixc.get("type", ixc.get("factory", "Flat")), len(ids), white.dim_out)
    # rebuilt from the live vectors (no tombstones), read back chunk by chunk from the new vectors.npy
    vindex = write_vector_index(white, ids, factory, os.path.join(tmp, FAISS),
                                os.path.join(tmp, VECTORS))
    white.save(os.path.join(tmp, WHITENING))
    config = config.without("delta")
    config = config.merged(index={**ixc, **index_section(ixc.get("type", "auto"), vindex)},
                           next_question_id=max(int(config.next_question_id or 0), snap.index.max_id() + 1))
    if calibrate is not None:
        config = calibrate(config, tmp)
    writer.commit(config, tmp, records)
    del raw


def reencode(writer: Writer, snap: "Snapshot", encoder, config: Config, refit, calibrate=None, token_sink=None,
             batch_size: int = 32, progress: bool = False) -> str:
    """A new base with every live question encoded again by ``encoder`` (``faqsearch learn``): raw
    vectors and token states written anew, the transform fitted again on them by ``refit(config,
    moments)`` (-> (white, config), the index's setting), the store and postings shared. ``config``:
    the config naming the new encoder; ``calibrate(config, version)``: the config to commit, measured
    on the new version first (it may raise: the Writer then removes the version and nothing changes).
    Returns the committed version's name."""
    from ...encoders.stream import encode_to_file
    from . import tokenstates

    tmp = _base_sharing_rows(writer, snap)
    ids, _ = snap.store.question_faqs()  # the live questions, by id
    vec_path = os.path.join(tmp, VECTORS)
    tokens = token_sink(tmp, len(ids)) if token_sink is not None else None

    def texts(step: int):
        for start in range(0, len(ids), step):
            yield [r[2] for r in snap.store.question_rows(ids[start:start + step])]
    moments = encode_to_file(encoder, texts, vec_path, len(ids), batch_size, progress, tokens, "encoding again")
    np.save(os.path.join(tmp, IDS), ids)
    white, config = refit(config, moments)
    ixc = _index_record(snap)
    factory = factory_for(ixc.get("type", ixc.get("factory", "Flat")), len(ids), white.dim_out)
    vindex = write_vector_index(white, ids, factory, os.path.join(tmp, FAISS), vec_path)
    white.save(os.path.join(tmp, WHITENING))
    config = config.without("delta").merged(
        index={**ixc, **index_section(ixc.get("type", "auto"), vindex)},
        next_question_id=max(int(config.next_question_id or 0), int(ids.max()) + 1 if len(ids) else 1))
    if calibrate is not None:
        config = calibrate(config, tmp)
    if not cfg.fusion_weights(replace(config, mode="hybrid"))["token_weight"]:
        tokenstates.remove(tmp)  # hybrid mode does not read them
    return os.path.basename(writer.commit(config, tmp))
