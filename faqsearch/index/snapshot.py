"""A frozen view of one committed version of an index: config, transform, vector index, store,
delta and raw vectors, opened together. ``reload`` and the service replace a whole snapshot in one
assignment, and a request holds one snapshot from start to end, so it never mixes two versions.
"""
from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass, replace
from typing import Any

from . import config as cfg
from ..backends import Backend, RawSource, StoreView, TokenSource, VectorSearch, backend_for
from ..confidence import ConfidenceModel
from ..defaults import HYBRID_WEIGHT, MODE, PROTOTYPE_MAX_QUESTIONS, THRESHOLD, UNKNOWN_SHARE
from ..errors import ClosedError, IndexFormatError, IndexNotFoundError
from ..prototypes import Prototypes, aligned
from .directory import resolve, stamp
from .format import WHITENING, Config
from ..whitening import Whitening

_PROTOTYPES_LOCK = threading.Lock()  # a version's prototypes are made once (faqsearch.prototypes)


@dataclass(frozen=True)
class Snapshot:
    path: str  # the index
    version: str  # the version directory its files came from
    config: Config
    whitening: Whitening
    index: VectorSearch
    store: StoreView
    raw: RawSource  # the raw encoder vectors
    backend: Backend
    stamp: tuple | None = None  # indexdir.stamp() when it was opened
    tokens: TokenSource | None = None  # the questions' token states it keeps, None without

    @property
    def generation(self) -> int:
        return int(self.config.generation or 0)

    @property
    def threshold(self) -> float:
        return float(THRESHOLD if self.config.threshold is None else self.config.threshold)

    @functools.cached_property
    def confidence(self) -> ConfidenceModel | None:
        """The confidence model the index learned (None for an index without one: it answers by its
        cosine threshold, and its answers carry no confidence)."""
        return ConfidenceModel.from_dict(self.config.confidence)

    @property
    def min_confidence(self) -> float | None:
        """The confidence at or above which the first answer is given: one set by the user
        (``min_confidence``), else the operating point the index chose; None without a model, and
        where a cosine threshold was given at ingest (that threshold decides)."""
        given = self.config.min_confidence
        if isinstance(given, (int, float)) and not isinstance(given, bool) and 0.0 <= given <= 1.0:
            return float(given)
        if (self.config.calibration or {}).get("chosen_by") == "given":
            return None
        return self.confidence.operating_point if self.confidence is not None else None

    @property
    def mode(self) -> str:
        return str(self.config.mode or MODE)

    @property
    def hybrid_weight(self) -> float:
        return float(HYBRID_WEIGHT if self.config.hybrid_weight is None else self.config.hybrid_weight)

    @property
    def token_weight(self) -> float:
        """Weight of token matching in hybrid mode (:func:`faqsearch.index.config.fusion_weights`)."""
        if self.config.token_weight is not None:
            return float(self.config.token_weight)
        return float(cfg.fusion_weights(replace(self.config, mode="hybrid"))["token_weight"])

    @property
    def unknown_share(self) -> float:
        """The share of in-domain questions without an FAQ among the out-of-scope ones the index's
        operating point is chosen for (:func:`faqsearch.tuning.confidence.fit`; `tune confidence --unknowns`)."""
        share = self.config.unknown_share
        return UNKNOWN_SHARE if share is None else float(share)

    @property
    def prototype_weight(self) -> float:
        """Weight of the FAQ prototype term in hybrid mode (:mod:`faqsearch.prototypes`), 0 in other modes."""
        w = self.config.prototype_weight
        return float(w) if self.mode == "hybrid" and isinstance(w, (int, float)) and w > 0 else 0.0

    @property
    def prototypes(self) -> Prototypes | None:
        """This version's FAQ prototypes, computed on first use (one pass over the raw vectors, one
        thread at a time: concurrent first queries wait for it rather than each making it); None where
        neither the ranking nor the confidence (:mod:`faqsearch.confidence`) uses them, and above
        PROTOTYPE_MAX_QUESTIONS (an index grown past it by edits ranks and answers without them)."""
        model = self.confidence
        if self.prototype_weight <= 0 and (model is None or not model.uses_prototypes):
            return None
        return self.all_prototypes()

    def all_prototypes(self) -> Prototypes | None:
        """:attr:`prototypes` whether or not they are used (the confidence's simulation learns whether
        they help); None above PROTOTYPE_MAX_QUESTIONS."""
        if "_prototypes" in self.__dict__:  # made already: no lock to wait on
            return self.__dict__["_prototypes"]
        with _PROTOTYPES_LOCK:
            if "_prototypes" not in self.__dict__:
                self.__dict__["_prototypes"] = self._make_prototypes()
        return self.__dict__["_prototypes"]

    def _make_prototypes(self) -> Prototypes | None:
        rows = self.prototype_rows()
        return None if rows is None else Prototypes.build(*rows, self.whitening.full)

    def prototype_rows(self) -> tuple[Any, Any, Any] | None:
        """(question ids, FAQ keys, raw vectors) of every visible question, aligned, that prototypes are
        made of; None above PROTOTYPE_MAX_QUESTIONS."""
        qids, keys = self.store.question_faqs()
        if len(qids) > PROTOTYPE_MAX_QUESTIONS:
            return None
        ids, raw, keys = aligned(*self.raw.all(), qids, keys)
        return ids, keys, raw

    @property
    def max_per_faq(self) -> int:
        counts = self.config.counts
        return max(1, int(1 if counts is None or counts.max_questions_per_faq is None else counts.max_questions_per_faq))

    @property
    def tombstones(self) -> int:
        section = self.config.index
        return int(0 if section is None or section.tombstones is None else section.tombstones)

    @property
    def delta(self):
        """The changes since the base files (embedded backend), None without any."""
        return self.index.delta

    def info(self) -> dict[str, Any]:
        """What `info` tells of this version: its config, counts, vectors, how its store tokenises
        for BM25 ('lexical': None for a Milvus index, whose tokens live in the collection) and the
        question token states it keeps ('token_states': texts and bytes, None without)."""
        lexical = {"cjk": self.store.cjk, "stem": self.store.stem} if self.backend.kind == "embedded" else None
        kept = None if self.tokens is None else self.tokens.summary()
        return {"path": self.path, **self.config.to_dict(), "counts": self.store.counts(), "vectors": len(self.index),
                "lexical": lexical, "token_states": kept,
                "faqs_with_3_questions": faqs_with(self.store, 3) if self.backend.kind == "embedded" else None}

    def live(self) -> "Snapshot":
        """This snapshot (a ClosedSnapshot raises ClosedError instead)."""
        return self

    def close(self) -> None:
        self.store.close()


class ClosedSnapshot:
    """What a closed engine holds instead of its snapshot: any use but its path and close() is a
    ClosedError (reads used to fail with sqlite3's own error, and an edit reopened the engine)."""

    def __init__(self, path: str):
        self.path = path

    def __getattr__(self, name: str):
        raise ClosedError(f"this FAQSearch of {self.path} was closed; open the index again with "
                          f"FAQSearch.open({self.path!r})")

    def close(self) -> None:
        pass


def open_snapshot(path: str, base: Snapshot | None = None) -> Snapshot:
    """Open the live version of the index at ``path``. ``base``: an open snapshot whose unchanged
    base files (FAISS index, transform) are reused when the live version is still its version.

    A writer may switch versions, or commit twice in place and remove a delta file, while this
    reads: the open is retried when the index changed meanwhile."""
    for attempt in range(3):
        before = stamp(path)
        try:
            version = resolve(path)
        except IndexNotFoundError:
            if base is None:
                raise
            raise IndexNotFoundError(f"index {path} is gone: dropped, renamed or moved since it was opened; nothing "
                                     "was written. Open it where it is now (faqsearch indexes lists the indexes of a "
                                     "home), or ingest it again") from None
        try:
            return _open_version(path, version, before, base)
        except (IndexFormatError, FileNotFoundError) as exc:
            if attempt == 2 or stamp(path) == before:
                if isinstance(exc, FileNotFoundError):  # a file the version names is gone (and no writer moved on)
                    raise IndexFormatError(f"index {path}: {os.path.basename(str(exc.filename))} is missing. Restore "
                                           "the index directory from a backup, or rebuild it with: faqsearch ingest "
                                           f"CORPUS --index {path} --force") from None
                raise
    raise AssertionError("unreachable")


def open_version(path: str, version: str) -> Snapshot:
    """A snapshot of one version directory of the index at ``path`` (a version being built, staged
    by :meth:`faqsearch.index.directory.Writer.stage`, to measure it before it is committed)."""
    return _open_version(path, version, None, None)


def _open_version(path: str, version: str, st: tuple | None, base: Snapshot | None) -> Snapshot:
    config = cfg.load_config(version, path)
    backend = backend_for(config)
    # the files of a version directory are those of one build (its index_id): another build renamed, copied or
    # ingested again under the same path has a v00000001 of its own (its old vectors were served, 8 of 100 answers
    # wrong, or "inconsistent" for good where the counts differed)
    reuse = base if base is not None and base.version == version and base.config.index_id == config.index_id else None
    if reuse is not None:
        whitening = replace(reuse.whitening)  # a delta may replace its moments: never the reader's object
    else:
        file = os.path.join(version, WHITENING)
        if not os.path.exists(file):
            raise IndexFormatError(cfg.damaged(path, "whitening", "missing"))
        try:
            whitening = Whitening.load(file)
        except Exception as exc:  # noqa: BLE001 - zip, pickle-free npz and EOF errors alike: a damaged file
            raise IndexFormatError(cfg.damaged(path, "whitening", f"{type(exc).__name__}: {exc}")) from None
    if whitening.dim_in != config.dim_in or whitening.dim_out != config.dim_out:
        raise IndexFormatError(f"index {path} is inconsistent (transform {whitening.dim_in}->{whitening.dim_out}, "
                               f"config {config.dim_in}->{config.dim_out}); re-run faqsearch ingest")
    opened = backend.open(path, version, config, whitening, reuse)
    tokens = reuse.tokens if reuse is not None else backend.token_states(version, config)
    return Snapshot(path, version, config, opened.whitening, opened.index, opened.store, opened.raw, backend, st,
                    tokens)


def open_store(path: str) -> StoreView:
    """The store of an index alone, whatever its backend: no encoder, no vectors, never created.
    For listing and showing FAQs, and for reading what a rebuild would drop."""
    version = resolve(path)
    config = cfg.load_config(version, path)
    return backend_for(config).open_store(path, version, config)


def faqs_with(store: StoreView, questions: int) -> int:
    """How many FAQs of a store have at least ``questions`` questions."""
    import numpy as np

    _, keys = store.question_faqs()
    return int(np.sum(np.unique(keys, return_counts=True)[1] >= questions)) if len(keys) else 0
