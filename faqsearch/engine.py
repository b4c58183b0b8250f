"""The FAQSearch facade: build an index, open it, ask it questions, edit it.

    ingest:  corpus -> encoder -> whitening.fit -> backend.write_base -> store -> commit   (build.py)
    ask:     text   -> encoder -> whitening     -> search -> store rows -> answers         (search.py)
    edit:    plan (edits/plan.py) -> encode the new questions -> backend.apply -> commit  (backends/)

The engine holds one :class:`faqsearch.index.snapshot.Snapshot` and replaces it in one assignment, so a
query never mixes two versions; ``ask`` and ``ask_many`` may run on several threads at once.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .index import config as cfg
from .build import EncoderSpec, StorageSpec, WhiteningSpec, as_faqs, build
from .corpus import FAQ, Columns
from .defaults import BATCH_SIZE, BETA, GAMMA, INDEX_TYPE, K, LEARN_EPOCHS, LEARN_MINUTES, MAX_LENGTH
from .edits import plan as plans
from .encoders import Encoder, check_encoder, check_spec, index_encoder
from .errors import IndexFormatError
from .asking import Asking
from .index.directory import Writer, stamp
from .results import EditReport
from .text import check_page
from .search import QueryEncoder, Searcher
from .index.snapshot import ClosedSnapshot, Snapshot, open_snapshot
from .tuning import (FusionReport, Setting, ThresholdReport, fusion_changes, chosen_again, refit_calibration,
                     refit_config, self_tune, recalibrate_after_edit, ingest_tuned, threshold_changes, min_confidence_changes)
from .tuning.learn import LearnReport, learn


class FAQSearch(Asking):
    """A built FAQ index: encoder (loaded on first use), transform, vector index and store."""

    def __init__(self, snap: Snapshot, encoder: Encoder | None = None, threads: int | None = None, log: bool = False):
        self.log = log  # whether ask logs its queries by default (the query log `faqsearch serve` writes)
        self._threads = threads
        self._pair = (snap, QueryEncoder(functools.partial(index_encoder, snap.config, snap.path, threads)))
        if encoder is not None:
            check_encoder(snap.config, encoder, snap.path)
            self._queries._encoder = encoder
        self._checked = time.monotonic()
        self._edit_lock = threading.RLock()
        self._swap_lock = threading.Lock()  # one open-and-assign at a time: the last one is the newest
        self.auto_reload = True  # pick up another process's commit at most a second after it

    # ------------------------------------------------------------------ what it holds
    _snap = property(lambda self: self._pair[0])  # _pair: the version and its query encoder, set in one assignment
    _queries = property(lambda self: self._pair[1])
    snapshot = property(lambda self: self._snap, doc="The version this engine answers from.")
    path = property(lambda self: self._snap.path)
    closed = property(lambda self: isinstance(self._snap, ClosedSnapshot), doc="Whether close() was called.")
    config = property(lambda self: self._snap.config)
    store = property(lambda self: self._snap.store)
    index = property(lambda self: self._snap.index)
    whitening = property(lambda self: self._snap.whitening)
    delta = property(lambda self: self._snap.delta)
    threshold = property(lambda self: self._snap.threshold)
    mode = property(lambda self: self._snap.mode)
    hybrid_weight = property(lambda self: self._snap.hybrid_weight)

    @property
    def encoder(self) -> Encoder:
        """The index's encoder, loaded on first use (listing, showing and removing need none)."""
        return self._current() and self._queries.encoder

    def share_encoder(self, other: "FAQSearch") -> None:
        """Use ``other``'s encoder and query cache (one model for several indexes of one encoder)."""
        check_spec(self._snap.config.encoder_spec, other._snap.config.encoder_spec, self._snap.path)
        self._pair = (self._snap, other._queries)

    def searcher(self) -> Searcher:
        """A searcher over the current version (hold it for a whole request)."""
        self._current()
        return Searcher(*self._pair)

    # ------------------------------------------------------------------ build and open
    @classmethod
    def build(cls, corpus: str | os.PathLike | Sequence[FAQ], index: str | os.PathLike | None = None, *,
              model: str | None = None, encoder: Encoder | None = None, pooling: str | None = None,
              max_length: int = MAX_LENGTH, prefix: str = "", threads: int | None = None, gguf_file: str | None = None,
              beta: float = BETA, gamma: float = GAMMA, k: int | None = K, whiten: bool = True,
              fit_on: str | Sequence[str] | None = None, threshold: float | None = None,
              columns: Columns | None = None, fmt: str | None = None, index_type: str = INDEX_TYPE,
              quantize: bool = False, batch_size: int = BATCH_SIZE, progress: bool = False, force: bool = False,
              replace: bool | None = None, backend: str | None = None, uri: str | None = None,
              collection: str | None = None, self_fusion: bool = True, source: str | None = None) -> "FAQSearch":
        """Build an index from a corpus as its next version (:func:`faqsearch.build.build`; FAQs it lacks go only
        with ``replace``); it learns its confidence, threshold (unless given) and, with ``self_fusion``, weights."""
        path = cfg.resolve_index_path(index)
        encoder = build(corpus, path, encoder=encoder, columns=columns, fmt=fmt, batch_size=batch_size, progress=progress,
              force=force, replace=replace, threshold=threshold, source=source,
              encoder_spec=EncoderSpec(model, pooling, max_length, prefix, threads, gguf_file, quantize),
              whitening=WhiteningSpec(beta, gamma, k, whiten, fit_on),
              storage=StorageSpec(backend, uri, collection, index_type),
              calibrate=lambda snap, enc: ingest_tuned(snap, enc, fusion=self_fusion, threshold=threshold is None))
        return cls.open(path, encoder=encoder, threads=threads)

    @classmethod
    def open(cls, index: str | os.PathLike | None = None, *, model: str | None = None,
             encoder: Encoder | None = None, threads: int | None = None, log: bool = False) -> "FAQSearch":
        """Open a built index; its encoder loads on first use unless given (``model``: checked to be the index's)."""
        snap = open_snapshot(cfg.resolve_index_path(index))
        if encoder is None and model is not None:
            spec = snap.config.encoder_spec
            encoder = EncoderSpec(model, pooling=spec.get("pooling") if spec.get("backend") == "transformers" else None,
                                  max_length=spec.get("max_length", MAX_LENGTH), prefix=spec.get("prefix", ""),
                                  threads=threads).load()
        return cls(snap, encoder, threads, log)

    def close(self) -> None:
        self.close_asking()
        with self._swap_lock:  # no reload swaps a version in after it; the store waits for the read it serves
            self._snap.close()
            self._pair = (ClosedSnapshot(self._snap.path), self._queries)  # every later call but close() is a ClosedError

    def __enter__(self) -> "FAQSearch":
        return self._current() and self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ ask
    def embed(self, texts: Sequence[str], batch_size: int = BATCH_SIZE, progress: bool = False) -> np.ndarray:
        """Query vectors (encoder, then transform: norm at most 1, library.md says why); repeated texts are cached."""
        return self.searcher().embed(texts, batch_size, progress)

    def raw_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(question ids, raw encoder vectors) of every question, in id order (for refit and tune)."""
        return self._current().raw.all()

    def info(self) -> dict[str, Any]:
        return self._current().info()

    def list(self, limit: int | None = None, offset: int = 0, category: str | None = None, contains: str | None = None) -> list[dict]:
        """FAQs (id, category, answer, number of questions); ``contains`` searches ids, answers and questions."""
        return self._current().store.list_faqs(*check_page(limit, offset, contains), category, contains)

    def show(self, faq_id: str) -> dict[str, Any]:
        return plans.shown(self._current().store, faq_id)  # with its revision, for update(revisions=...)

    # ------------------------------------------------------------------ reload
    def _current(self) -> Snapshot:
        if self.auto_reload:
            self.reload_if_changed()
        return self._snap.live()  # a closed engine's ClosedError, before anything is handed out

    def reload(self) -> None:
        """Open the live version (any process's last commit) and swap it in at once, reusing unchanged files."""
        with self._swap_lock:
            self._swap(open_snapshot(self._snap.path, base=self._snap))

    def _swap(self, snap: Snapshot) -> None:
        """Answer from ``snap``; a version with another encoder (learn, restore) gets its own."""
        self._pair = (snap, self._queries if snap.config.encoder_spec == self._snap.config.encoder_spec else
                      QueryEncoder(functools.partial(index_encoder, snap.config, snap.path, self._threads)))

    def reload_if_changed(self, every: float = 1.0) -> bool:
        """Reload when the index committed since; checks at most once per ``every`` seconds."""
        now = time.monotonic()
        if now - self._checked < every:
            return False
        self._checked = now
        if stamp(self._snap.path) in (None, self._snap.stamp):
            return False
        self.reload()
        return True

    # ------------------------------------------------------------------ edits
    @contextmanager
    def _writing(self, made_by: str) -> Iterator[tuple[Writer, Snapshot]]:
        """The writer lock, and a snapshot of the latest version under it (another process may
        have committed since this engine last looked)."""
        with self._edit_lock, Writer(self._snap.path, made_by) as writer:
            snap = open_snapshot(self._snap.path, base=self._snap)
            if snap.generation != writer.generation:
                raise IndexFormatError(f"index {snap.path} changed while it was locked; try again")
            with self._swap_lock:
                self._swap(snap)  # with its encoder: another process may have learned one since
            yield writer, snap
            with self._swap_lock:  # closed while it committed: the commit stands, and the engine stays closed
                if not self.closed:
                    self._swap(open_snapshot(self._snap.path, base=snap))

    def _edit(self, made_by: str, planner: Callable[[Snapshot], "plans.Edit"], progress: bool = False,
              faqs: Sequence[FAQ] = ()) -> EditReport:
        """Plan an edit on the latest version, encode its new questions first (an error there has
        touched nothing), then let the backend apply and commit it."""
        with self._writing(made_by) as (writer, snap):
            plan = planner(snap)
            report = plans.report_for(plan, int(snap.config.counts.faqs or 0) if snap.config.counts is not None else 0)
            if plan.empty:
                return report
            snap.backend.check_faqs(plan.new_faqs + plan.changed_faqs, plan.new_questions)
            texts = plan.texts()
            plans.warn_unread(snap.config.encoder_spec, texts, "build it with --model use-multilingual to read both scripts")
            raw = self._queries.encoder.encode(texts, progress=progress) if texts else \
                np.empty((0, int(snap.config.dim_in)), np.float32)
            report.added_questions, report.removed_questions = snap.backend.apply(writer, snap, plan, raw, plan.source)
            kept = (report.removed_questions or plan.rewrites_many) and snap.backend.kind == "embedded"  # not Milvus
            report.previous_version = os.path.basename(snap.version) if kept else None
        if not self.closed:  # by a tenth: chosen again (the next edit's engine does it where this one closed)
            recalibrate_after_edit(self._set_config, self._snap.config, lambda: self._queries.encoder, made_by)
        return report

    def add(self, corpus, columns: Columns | None = None, fmt: str | None = None, progress: bool = False) -> EditReport:
        """Add new FAQs (ids not yet in the index); only their questions are encoded."""
        faqs = as_faqs(corpus, columns, fmt)
        return self._edit("add", lambda s: plans.plan_add(s.store, faqs), progress)

    def update(self, corpus, columns: Columns | None = None, fmt: str | None = None, progress: bool = False,
               replace: bool = False, revisions: dict[str, str] | None = None) -> EditReport:
        """Update FAQs by id: answers rewritten, listed questions they lack added, the others kept (FAQs not in the
        index added, others left alone). ``replace``: each FAQ holds exactly the given questions; ``revisions``:
        {id: revision read (``show``)}, an FAQ changed since is a StaleRevisionError and nothing is written."""
        faqs = as_faqs(corpus, columns, fmt)
        return self._edit("update", lambda s: plans.plan_update(s.store, faqs, replace=replace, revisions=revisions), progress)

    def update_faq(self, faq_id: str, answer: str | None = None, category: str | None = None,
                   questions: Sequence[str] | str = (), progress: bool = False) -> EditReport:
        """One FAQ's new ``answer`` or ``category``, or ``questions`` added, by id; the rest stays."""
        return self._edit("update", lambda s: plans.plan_update_faq(s.store, faq_id, answer, category, questions), progress)

    def upsert(self, corpus, columns: Columns | None = None, fmt: str | None = None, progress: bool = False) -> EditReport:
        """Make the index match a whole corpus export, touching only what differs; FAQs it lacks go, but not `add`'s."""
        faqs = as_faqs(corpus, columns, fmt)
        return self._edit("upsert", lambda s: plans.plan_update(s.store, faqs, remove_missing=True, source="corpus"), progress)

    def remove(self, faq_ids: Sequence[str]) -> EditReport:
        """Remove FAQs and all their questions."""
        return self._edit("remove", lambda s: plans.plan_remove(s.store, faq_ids))

    def feedback(self, query: str, faq_id: str) -> EditReport:
        """"This query should have matched FAQ X": it becomes a question of X (source 'feedback'); see :meth:`unassign`."""
        return self._edit("feedback", lambda s: plans.plan_feedback(s.store, query, faq_id))

    def approve(self, faq_id: str, texts: Sequence[str]) -> EditReport:
        """Phrasings a person approved become questions of an FAQ (source 'approved'), in one edit."""
        return self._edit("approve", lambda s: plans.plan_approve(s.store, faq_id, texts))

    def unassign(self, query: str, faq_id: str) -> EditReport:
        """Take a query that feedback (or an approval) made a question of FAQ X out of it again."""
        return self._edit("unassign", lambda s: plans.plan_unassign(s.store, query, faq_id))

    def augment(self, generator=None, n: int = 3, candidates: int = 24, seed: int | None = 0,
                min_similarity: float | None = None, progress: bool = False, rounds: int | None = None) -> EditReport:
        """Add up to ``n`` paraphrases of each FAQ's first question (source 'generated') in one edit;
        see :func:`faqsearch.generators.augment.plan_augment`. ``remove_generated()`` undoes it."""
        from .generators.augment import plan_augment

        return self._edit("augment", lambda s: plan_augment(Searcher(s, self._queries), generator, n, candidates, seed,
                                                 min_similarity, progress, rounds))

    def remove_generated(self) -> EditReport:
        """Remove every question with source 'generated' (from augment), in one edit."""
        return self._edit("remove-generated", lambda s: plans.plan_remove_source(s.store, "generated"))

    # ------------------------------------------------------------------ tuning applied
    def refit(self, setting: Setting | None = None, threshold: float | None = None, made_by: str = "refit") -> None:
        """Transform and vector index rebuilt for ``setting`` (default: current), nothing re-encoded; ``threshold`` stored."""
        with self._writing(made_by) as (writer, snap):  # one commit: a threshold the index chose is chosen again with it
            white, config = refit_config(snap.config, snap.whitening.moments, setting, threshold)
            snap.backend.rebuild(writer, snap, white, config,
                                 refit_calibration(writer, snap.config, threshold, lambda: self._queries.encoder))

    def learn(self, minutes=LEARN_MINUTES, epochs=LEARN_EPOCHS, progress=False, from_log=True) -> LearnReport:
        """Fine-tune the encoder on its questions (and confidently answered logged queries, ``from_log``): :mod:`.tuning.learn`."""
        return learn(self._current(), lambda: self._writing("learn"), lambda: self._queries.encoder, minutes=minutes,
                     epochs=epochs, threads=self._threads, progress=progress, from_log=from_log)

    def set_fusion(self, report: FusionReport, recalibrate: bool = True) -> bool:
        """Store weights that win held out, and what the index chose itself chosen again under them (``recalibrate``)."""
        if (changes := fusion_changes(report)) is None:
            return False
        self._set_config("tune", (lambda s: chosen_again(s, changes, self._queries.encoder)) if recalibrate else None, **changes)
        return True

    def set_threshold(self, report: ThresholdReport) -> None:
        """Store a chosen threshold, how it was chosen and the confidence learned with it (``info`` shows them)."""
        self._set_config("tune", **threshold_changes(report))

    def set_min_confidence(self, value: float | None, unknowns: float | None = None) -> None:
        """The confidence `ask` answers at (None: the index's own); ``unknowns``: :func:`.tuning.threshold.unknowns_changes`."""
        self._set_config("set-min-confidence", lambda snap: min_confidence_changes(snap, value, unknowns, lambda: self._queries.encoder))

    def _set_config(self, made_by: str = "tune", changes_of: Callable[[Snapshot], dict] | None = None, **changes: Any) -> None:
        with self._writing(made_by) as (writer, snap):  # changes_of(the latest snapshot), else ``changes``
            writer.commit(snap.config.merged(changes_of(snap) if changes_of is not None else changes))

    def _self_tune(self, fusion: bool, threshold: bool) -> None:
        """What an index learns about itself without labels: the hybrid weight, then the threshold."""
        self_tune(self.searcher, (lambda r: self.set_fusion(r, not threshold)) if fusion else None, self.set_threshold if threshold else None)

