"""What a storage-and-search backend is: the faces searching reads through, and the writes a
backend owns. ``embedded`` (FAISS + SQLite + a delta, in the index directory) and ``milvus`` (rows
in a Milvus collection) implement it; the engine, the searcher and tuning never ask which one they
have. ``tests/test_backends.py`` runs one contract suite against both.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from ..defaults import DELTA_MAX, DELTA_MIN, DELTA_SHARE

if TYPE_CHECKING:
    from ..edits.plan import Edit
    from ..index.directory import Writer
    from ..index.format import Config
    from ..index.snapshot import Snapshot
    from .embedded.store import Store
    from ..whitening import Whitening

BACKENDS = ("embedded", "milvus")


def delta_limit(base: int) -> int:
    """Changes an index takes in place (questions added + removed, FAQ rows rewritten) before the
    next edit compacts: 5% of the base, at least 1,000 (small indexes compact often and cheaply), at
    most 20,000 (an exact search over 20k vectors of 256 dims costs about a millisecond a query)."""
    return max(DELTA_MIN, min(DELTA_MAX, base // DELTA_SHARE))


@runtime_checkable
class VectorSearch(Protocol):
    """The vector side: transformed (unit) vectors by question id."""

    dim: int
    factory: str

    def __len__(self) -> int: ...

    def search(self, queries: np.ndarray, k: int, ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, ids) per query row, missing slots -1; ``ids`` restricts the search to them."""
        ...

    def reconstruct(self, ids: np.ndarray) -> np.ndarray: ...

    def max_id(self) -> int: ...


@runtime_checkable
class StoreView(Protocol):
    """The rows: FAQs and their questions at one generation, and BM25 over the questions."""

    def questions(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]: ...

    def lexical(self, texts: Sequence[str], n: int, filters: dict[str, Any] | None = None
                ) -> list[list[tuple[int, float]]]: ...

    def question_ids(self, filters: dict[str, Any]) -> list[int]: ...

    def faq(self, faq_id: str) -> dict[str, Any] | None: ...

    def list_faqs(self, limit: int | None = None, offset: int = 0, category: str | None = None,
                  contains: str | None = None) -> list[dict[str, Any]]: ...

    def categories(self) -> list[str]: ...

    def faq_hashes(self) -> dict[str, str | None]: ...

    def faq_ids(self, source: str | None = None) -> set[str]: ...

    def all_questions(self) -> list[tuple[int, str, str]]: ...

    def counts(self) -> dict[str, int]: ...

    def question_count(self) -> int: ...

    def source_counts(self, exclude: str | None = None) -> dict[str, int]: ...

    def close(self) -> None: ...


@dataclass
class Opened:
    """What a backend opens for one version: the two faces, the raw vectors, and what it checked."""

    index: Any  # VectorSearch
    store: Any  # StoreView
    raw: Any  # RawSource: .get(ids) -> raw vectors, .all() -> (ids, raw)
    whitening: "Whitening"  # the transform, with the moments of the latest edit


class Backend(Protocol):
    """The writes and the opening that differ per backend. Every write commits through the
    :class:`faqsearch.index.directory.Writer` it is given, never by itself."""

    kind: str

    def prepare(self, path: str, storage: Any) -> dict[str, Any]:
        """Check what can be checked before anything is encoded (URI, index type); returns what the
        build passes on to :meth:`write_base`."""
        ...

    def check_index_type(self, index_type: str, n: int, dim: int) -> None:
        """Refuse an index type this backend cannot build, before anything is encoded."""
        ...

    def check_faqs(self, faqs: Sequence[Any], questions: Sequence[tuple[str, str]] = ()) -> None:
        """Refuse texts this backend cannot store (field limits), before anything is encoded."""
        ...

    def new_store(self, directory: str) -> "Store":
        """The store a build fills (rows and question ids), in the new version's directory or memory."""
        ...

    def write_base(self, directory: str, prepared: dict[str, Any], store: "Store", ids: np.ndarray,
                   raw: np.ndarray, white: "Whitening", generation: int, progress: bool) -> dict[str, Any]:
        """Write the searchable side of a new version; returns its config sections."""
        ...

    def after_commit(self, config: "Config") -> None:
        """Drop what the committed version replaced and no reader can reach any more."""
        ...

    def drop(self, config: "Config") -> None:
        """Delete what the backend keeps outside the index directory (``faqsearch drop``)."""
        ...

    def open(self, path: str, version: str, config: "Config", whitening: "Whitening",
             base: "Snapshot | None") -> Opened:
        """Open a version (``base``: a snapshot of the same version whose base files can be reused)."""
        ...

    def open_store(self, path: str, version: str, config: "Config") -> StoreView:
        """The rows alone (listing, showing): no vectors loaded."""
        ...

    def apply(self, writer: "Writer", snap: "Snapshot", plan: "Edit", raw_new: np.ndarray,
              source: str) -> tuple[int, int]:
        """Apply an edit plan (``raw_new``: the encoded ``plan.texts()``); returns (added, removed)
        questions. Commits generation G+1 through ``writer``."""
        ...

    def rebuild(self, writer: "Writer", snap: "Snapshot", white: "Whitening", config: "Config",
                calibrate: "Callable[[dict[str, Any], str], dict[str, Any]] | None" = None) -> None:
        """Re-transform every stored vector with ``white`` (refit, tune) and commit ``config``;
        ``calibrate(config, version)``: the config to commit, measured on the new version first."""
        ...
