"""What a storage-and-search backend is: the faces searching reads through, and the writes a
backend owns. ``embedded`` (FAISS + SQLite + a delta, in the index directory) and ``milvus`` (rows
in a Milvus collection) implement it; the engine, the searcher and tuning never ask which one they
have. Every member that code outside ``backends/`` uses on a backend object is declared here, typed:
``tests/test_backends.py`` checks that by an ast scan, checks each implementation's signatures
against these protocols, and runs one contract suite calling each member on both backends.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, Sequence, TypedDict, runtime_checkable

import numpy as np

from ..defaults import DELTA_MAX, DELTA_MIN, DELTA_SHARE

if TYPE_CHECKING:
    from ..edits.plan import Edit
    from ..encoders.base import Encoder
    from ..index.directory import Writer
    from ..index.format import Config
    from ..index.snapshot import Snapshot
    from ..whitening import Whitening

BACKENDS = ("embedded", "milvus")


def delta_limit(base: int) -> int:
    """Changes an index takes in place (questions added + removed, FAQ rows rewritten) before the
    next edit compacts: 5% of the base, at least 1,000 (small indexes compact often and cheaply), at
    most 20,000 (an exact search over 20k vectors of 256 dims costs about a millisecond a query)."""
    return max(DELTA_MIN, min(DELTA_MAX, base // DELTA_SHARE))


class QuestionRow(TypedDict):
    """A question joined with its FAQ (:meth:`StoreView.questions`)."""

    question_id: int
    faq_id: str
    question: str
    source: str
    answer: str
    category: str | None
    metadata: dict[str, Any]


class QuestionEntry(TypedDict):
    id: int
    text: str
    source: str


class FAQRecord(TypedDict):
    """One FAQ with its questions, by id order (:meth:`StoreView.faq`)."""

    id: str
    answer: str
    category: str | None
    metadata: dict[str, Any]
    content_hash: str | None
    questions: list[QuestionEntry]


class FAQSummary(TypedDict):
    """A line of a listing (:meth:`StoreView.list_faqs`): ``questions`` is their number."""

    id: str
    category: str | None
    answer: str
    questions: int


class Counts(TypedDict):
    faqs: int
    questions: int
    max_questions_per_faq: int


Hits = list[list[tuple[int, float]]]  # per query: (question id, score), best first


@runtime_checkable
class VectorSearch(Protocol):
    """The vector side: transformed (unit) vectors by question id."""

    dim: int
    factory: str
    supports_removal: bool
    # the changes since the base files (embedded: a backends.embedded.delta.Delta), None without any
    delta: Any
    # a backend that groups hits by FAQ itself (Milvus): top-k distinct FAQs per query in one call,
    # with the rows of their best questions (and, siblings=True, of the other questions of those FAQs,
    # for the full-dimensional re-scoring); None where the searcher widens a plain search (embedded)
    search_distinct: Callable[..., tuple[Hits, dict[int, QuestionRow]]] | None

    def __len__(self) -> int: ...

    def search(self, queries: np.ndarray, k: int, ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, ids) per query row, missing slots -1; ``ids`` restricts the search to them."""
        ...

    def reconstruct(self, ids: np.ndarray) -> np.ndarray: ...

    def max_id(self) -> int: ...


@runtime_checkable
class StoreView(Protocol):
    """The rows: FAQs and their questions at one generation, and BM25 over the questions."""

    cjk: str  # how CJK text is tokenised for BM25 (lexical.CJK_MODES)
    stem: str  # how Latin words are stemmed for BM25 ('none' or 'english')

    def questions(self, ids: Sequence[int]) -> dict[int, QuestionRow]: ...

    def lexical(self, texts: Sequence[str], n: int, filters: dict[str, Any] | None = None) -> Hits: ...

    def doc_freqs(self, tokens: Sequence[str]) -> tuple[dict[str, int], int]:
        """(visible rows holding each lexical token, visible rows): BM25's statistics, for token matching;
        rows removed by committed edits are counted in neither."""
        ...

    def question_ids(self, filters: dict[str, Any]) -> list[int]: ...

    def first_questions(self, faq_ids: Sequence[str]) -> dict[str, str]:
        """Each FAQ's first question written for it (the lowest id whose source is not in
        results.USER_SOURCES), by FAQ id; FAQs without one are left out."""
        ...

    def faq(self, faq_id: str) -> FAQRecord | None: ...

    def list_faqs(self, limit: int | None = None, offset: int = 0, category: str | None = None,
                  contains: str | None = None) -> list[FAQSummary]: ...

    def categories(self) -> list[str]: ...

    def faq_hashes(self) -> dict[str, str | None]: ...

    def faq_ids(self, source: str | None = None) -> set[str]: ...

    def all_questions(self) -> list[tuple[int, str, str]]:
        """(id, faq_id, text) of every visible question, by id."""
        ...

    def question_faqs(self) -> tuple[np.ndarray, np.ndarray]:
        """(visible question ids by id, a number per FAQ): to choose held-out rows by."""
        ...

    def question_rows(self, ids: Sequence[int]) -> list[tuple[int, str, str]]:
        """(id, faq_id, text) of these questions (the visible ones), by id."""
        ...

    def counts(self) -> Counts: ...

    def question_count(self) -> int: ...

    def source_counts(self, exclude: str | None = None) -> dict[str, int]: ...

    def close(self) -> None: ...


@runtime_checkable
class BuildStore(Protocol):
    """The store a build fills (:meth:`Backend.new_store`): rows in, question ids and texts out."""

    stem: str

    def set_setting(self, key: str, value: str) -> None: ...

    def insert_corpus(self, faqs: list[Any]) -> np.ndarray:
        """Insert the FAQs (emptying the list) and return their question ids, in order."""
        ...

    def iter_texts(self, chunk: int = 4096) -> Iterator[list[str]]: ...

    def counts(self) -> Counts: ...

    def close(self) -> None: ...


@runtime_checkable
class RawSource(Protocol):
    """The raw encoder vectors of one version's questions (refits, tuning, rescoring)."""

    def get(self, ids: np.ndarray, found: bool = False) -> Any:
        """Raw vectors of these question ids (zero rows where absent); with ``found``, also a mask of
        the ids found: ``(vectors, mask)``."""
        ...

    def all(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, raw vectors) of every visible question, in id order."""
        ...


@dataclass
class Opened:
    """What a backend opens for one version: the two faces, the raw vectors, and what it checked."""

    index: VectorSearch
    store: StoreView
    raw: RawSource
    whitening: "Whitening"  # the transform, with the moments of the latest edit


@runtime_checkable
class TokenSink(Protocol):
    """Where a build keeps its questions' token states (hybrid mode's token matching) as it encodes."""

    def encode(self, encoder: "Encoder", texts: Sequence[str], batch_size: int) -> np.ndarray:
        """The sentence vectors of ``texts``, their token states kept from the same encoder run."""
        ...

    def finish(self) -> dict[str, Any]:
        """Write what remains, durably; returns what was kept (texts, tokens, bytes)."""
        ...

    def discard(self) -> None:
        """Remove everything written (a build that failed)."""
        ...


@runtime_checkable
class TokenSource(Protocol):
    """The token states a version keeps, by question text."""

    def __len__(self) -> int:
        ...

    def summary(self) -> dict[str, int]:
        """Texts, tokens and bytes kept (``faqsearch info``)."""
        ...

    def get(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The token states of those ``texts`` it keeps, by text."""
        ...


@runtime_checkable
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

    def new_store(self, directory: str) -> BuildStore:
        """The store a build fills (rows and question ids), in the new version's directory or memory."""
        ...

    def write_base(self, directory: str, prepared: dict[str, Any], store: BuildStore, ids: np.ndarray,
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

    def reencode(self, writer: "Writer", snap: "Snapshot", encoder: "Encoder", config: "Config",
                 refit: "Callable[[Config, Any], tuple[Whitening, Config]]",
                 calibrate: "Callable[[dict[str, Any], str], dict[str, Any]] | None" = None,
                 batch_size: int = 32, progress: bool = False) -> str:
        """Encode every live question again with ``encoder`` (``faqsearch learn``), fit the transform
        again with ``refit(config, moments)`` and commit ``config`` (calibrated first); returns the
        version. A backend that cannot raises :class:`faqsearch.errors.FAQSearchError` saying so."""
        ...

    def token_sink(self, directory: str, encoder: "Encoder", n: int) -> TokenSink | None:
        """Where a build of ``n`` questions into the new version ``directory`` keeps their token
        states; None where this backend keeps none, or this encoder or size gives none."""
        ...

    def drop_token_states(self, directory: str) -> None:
        """Remove the token states of the new version ``directory`` (its hybrid mode does not use them)."""
        ...

    def token_states(self, version: str, config: "Config") -> TokenSource | None:
        """The token states the version keeps and may use, None without (nothing loaded until read)."""
        ...

    def restore(self, writer: "Writer", src: str, config: "Config") -> str:
        """Commit the content of the kept version ``src`` (whose config is ``config``) as a new
        version through ``writer``; returns its name (``faqsearch restore``)."""
        ...
