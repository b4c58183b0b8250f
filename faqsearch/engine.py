"""The FAQSearch facade: build an index from a corpus, open it, ask it questions.

ingest:  corpus -> encoder -> whitening.fit/transform -> index.add -> store.insert -> config.save
ask:     text   -> encoder -> whitening.transform     -> index.search -> store.questions
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from . import config as cfg
from .corpus import FAQ, Columns, check_faq, faq_hash, read_corpus, read_texts
from .delta import IDS_FILE
from .encoders import Encoder, check_spec, encoder_from_spec, load_encoder
from .errors import DuplicateFAQError, FAQSearchError, IndexFormatError, UnknownFAQError
from .index import DEFAULT_FACTORY, VectorIndex, check_factory, factory_for, train_sample_size
from .indexdir import check_target, next_version, resolve, writer_lock
from .store import Store
from .text import clean_text, is_blank
from .whitening import Moments, Whitening

log = logging.getLogger(__name__)

# Chosen by measurement (README, "Choosing the defaults"): with the bundled encoders, a rotation
# that keeps 256 dimensions never lost quality, while full whitening did.
DEFAULT_BETA = 0.0
DEFAULT_GAMMA = 0.0
DEFAULT_K = 256
# Scores below this are "no confident answer" (README, "The threshold"); an index may store its own.
DEFAULT_THRESHOLD = 0.5
CHUNK = 4096  # texts encoded per streaming step while building
PROGRESS_STEP = 256  # texts per step when a progress bar is shown
MODES = ("dense", "lexical", "hybrid")
DEFAULT_MODE = "hybrid"  # measured above both dense and lexical on every set: README "Dense, lexical and hybrid"
DEFAULT_HYBRID_WEIGHT = 0.1  # weight of the normalised BM25 score; `tune --fusion` learns it per index
FUSION_POOL = 20  # FAQs taken from the dense side before fusing (enough for a top 10)
LEXICAL_POOL = 50  # FAQs taken from the lexical side (cheap, and its tail still re-ranks dense hits)
QUERY_CACHE = 4096  # transformed query vectors kept for repeated questions (chatbots see many)


@dataclass
class Answer:
    """One FAQ matched by a query: its answer and the best-matching stored question.

    ``score`` is the cosine similarity in dense and hybrid modes (the threshold applies to it) and
    the BM25 score in lexical mode."""

    faq_id: str
    answer: str
    score: float
    question: str
    question_id: int
    source: str = "corpus"
    category: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    dense: float | None = None  # cosine of the best question (dense and hybrid modes)
    lexical: float | None = None  # BM25 of the best lexical question match (lexical and hybrid modes)
    fused: float | None = None  # hybrid ranking score: cosine + weight * normalised BM25


@dataclass
class Result:
    """The answers to one query (empty when nothing scored above the threshold)."""

    query: str
    answers: list[Answer]
    best_score: float | None
    threshold: float
    nearest: Answer | None = field(default=None, repr=False, compare=False)  # top match, even below the threshold

    @property
    def confident(self) -> bool:
        return bool(self.answers)

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "answers": [asdict(a) for a in self.answers],
                "best_score": self.best_score, "threshold": self.threshold}


@dataclass
class EditReport:
    """What an edit (add / update / remove / upsert) changed."""

    added_faqs: list[str] = field(default_factory=list)
    updated_faqs: list[str] = field(default_factory=list)
    removed_faqs: list[str] = field(default_factory=list)
    added_questions: int = 0
    removed_questions: int = 0
    unchanged_faqs: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.added_faqs or self.updated_faqs or self.removed_faqs or self.added_questions
                    or self.removed_questions)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Edit:
    """Planned changes, applied to a copy of the index in one go."""

    new_faqs: list[FAQ] = field(default_factory=list)
    changed_faqs: list[FAQ] = field(default_factory=list)  # answer/category/metadata/hash rewritten
    new_questions: list[tuple[str, str]] = field(default_factory=list)  # (faq_id, text)
    removed_questions: list[int] = field(default_factory=list)
    removed_faqs: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # merged into the new version's config.json


def _encode_stream(encoder: Encoder, texts: Sequence[str], batch_size: int, progress: bool,
                   out: np.ndarray | None = None) -> Moments:
    """Encode texts chunk by chunk, accumulating moments (and writing raw vectors to ``out``)."""
    from .encoders.base import progress_bar

    moments = Moments(encoder.dimension)
    step = CHUNK if not progress else max(batch_size, PROGRESS_STEP)  # a bar that moves from the first texts
    with progress_bar(len(texts), progress, "encoding") as bar:
        for start in range(0, len(texts), step):
            chunk = texts[start:start + step]
            vecs = encoder.encode(chunk, batch_size=batch_size)
            moments.update(vecs)
            if out is not None:
                out[start:start + len(chunk)] = vecs
            bar.update(len(chunk))
    return moments


class FAQSearch:
    """A built FAQ index: encoder, transform, FAISS index and SQLite store, loaded once.

    ``ask`` and ``ask_many`` may be called from several threads at once.
    """

    def __init__(self, path: str, config: dict[str, Any], encoder: Encoder | None, whitening: Whitening,
                 index: VectorIndex, store: Store, *, version: str | None = None, threads: int | None = None):
        self.path = path
        self.dir = version or path  # the version directory the loaded files came from
        self.config = config
        self._encoder = encoder  # loaded on first use when None: listing, showing and removing need none
        self._threads = threads
        self._encoder_lock = threading.Lock()
        self.whitening = whitening
        self.index = index
        self.store = store
        self._max_per_faq = max(1, int(config.get("counts", {}).get("max_questions_per_faq", 1)))
        self._tombstones = int(config.get("index", {}).get("tombstones", 0))
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._stamp = _config_stamp(path)
        self._checked = time.monotonic()
        self._edit_lock = threading.RLock()
        self.auto_reload = True

    @property
    def delta(self):
        """The changes since the base files (:class:`faqsearch.delta.Delta`), None without any."""
        return getattr(self.index, "delta", None)

    @property
    def encoder(self) -> Encoder:
        """The index's encoder, loaded on first use."""
        if self._encoder is None:
            with self._encoder_lock:
                if self._encoder is None:
                    enc = encoder_from_spec(self.config["encoder"], threads=self._threads)
                    _check_encoder(self.config, enc, self.path)
                    self._encoder = enc
        return self._encoder

    # ------------------------------------------------------------------ build
    @classmethod
    def build(
        cls,
        corpus: str | Sequence[FAQ],
        index: str | os.PathLike | None = None,
        *,
        model: str | None = None,
        encoder: Encoder | None = None,
        pooling: str | None = None,
        max_length: int = 256,
        prefix: str = "",
        threads: int | None = None,
        gguf_file: str | None = None,
        beta: float = DEFAULT_BETA,
        gamma: float = DEFAULT_GAMMA,
        k: int | None = DEFAULT_K,
        whiten: bool = True,
        fit_on: str | Sequence[str] | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        columns: Columns | None = None,
        fmt: str | None = None,
        index_type: str = "auto",
        quantize: bool = False,
        batch_size: int = 64,
        progress: bool = False,
        force: bool = False,
        backend: str = "embedded",
        uri: str | None = None,
        collection: str | None = None,
        self_fusion: bool = True,
    ) -> "FAQSearch":
        """Build an index from a corpus file (or FAQ records) and move it into place atomically.

        Everything is validated before anything is written; an error or interrupt leaves the
        previous index at that path untouched. Rebuilding an index that holds questions the
        corpus does not (from add, update, augment or feedback) needs ``force=True``.

        ``backend="milvus"`` with ``uri`` (a local ``.db`` file runs milvus-lite; ``http://host:19530``
        a server) keeps the rows and vectors in a Milvus collection (``collection``, default
        ``faqsearch_<index name>``) and the config and transform in the index directory.

        ``self_fusion``: when at least 10 FAQs have several questions, the hybrid weight is learned
        from them (``tuning.auto_fusion``) and kept only where it beats the default held out.
        """
        path = cfg.resolve_index_path(index)
        check_target(path)  # only an index of ours may be replaced: refused before anything is read or encoded
        milvus = None
        if backend == "milvus":
            from .backends.milvus import build_spec

            milvus = build_spec(path, uri, collection, index_type)
        elif backend != "embedded":
            raise FAQSearchError(f"unknown backend {backend!r}; choose embedded or milvus")
        source = str(corpus) if isinstance(corpus, (str, os.PathLike)) else "<records>"
        faqs = _as_faqs(corpus, columns, fmt)
        if not faqs:
            raise FAQSearchError("no FAQs to index")
        fit_texts = None
        if fit_on is not None:
            fit_texts = read_texts(fit_on) if isinstance(fit_on, (str, os.PathLike)) else list(fit_on)
        n_questions = sum(len(f.questions) for f in faqs)
        if not force:
            _refuse_lossy_rebuild(path, source)
        if encoder is None:
            encoder = load_encoder(model, pooling=pooling, max_length=max_length, prefix=prefix, threads=threads,
                                   gguf_file=gguf_file, quantize=quantize)
        # an index-type typo fails now, not after the whole encode
        if milvus is None:
            check_factory(index_type, n_questions, min(k or encoder.dimension, encoder.dimension) if whiten
                          else encoder.dimension)
        with writer_lock(path):
            check_target(path)
            if not force:
                _refuse_lossy_rebuild(path, source)  # again under the lock: another writer may have added
            with next_version(path, "building") as tmp:
                store = Store(os.path.join(tmp, cfg.FILES["store"]) if milvus is None else ":memory:")
                try:
                    rows = store.insert_faqs(faqs, source="corpus")
                    ids = np.array([r[0] for r in rows], dtype=np.int64)
                    texts = [r[1] for r in rows]
                    raw = np.lib.format.open_memmap(os.path.join(tmp, cfg.FILES["vectors"]), mode="w+",
                                                    dtype=np.float32, shape=(len(texts), encoder.dimension))
                    moments = _encode_stream(encoder, texts, batch_size, progress, out=raw)
                    if fit_texts is not None:
                        moments = _encode_stream(encoder, fit_texts, batch_size, progress)
                    white = None
                    if whiten:
                        try:
                            white = Whitening.from_moments(moments, beta=beta, gamma=gamma, k=k)
                        except ValueError as exc:  # too few (or only identical) texts: nothing to estimate
                            log.warning("no transform fitted (%s); storing the encoder's vectors as they are", exc)
                            whiten = False
                    if white is None:
                        white = Whitening.identity(encoder.dimension)
                        white.moments = moments
                    if milvus is None:
                        factory = factory_for(index_type, len(texts), white.dim_out)
                        vindex = build_vector_index(white, raw, ids, factory)
                        vindex.save(os.path.join(tmp, cfg.FILES["faiss"]))
                        ixc = {"type": index_type, "factory": factory, "tombstones": 0,
                               "nprobe": getattr(vindex, "nprobe", None), "ef_search": getattr(vindex, "ef_search", None)}
                    else:
                        from .backends.milvus import write_collection

                        generation = _previous_generation(path) + 1
                        milvus = write_collection(milvus, generation, white, raw, store, progress)
                        ixc = {"type": index_type, "factory": f"milvus:{index_type}", "tombstones": 0}
                    raw.flush()
                    del raw
                    if milvus is not None:
                        os.remove(os.path.join(tmp, cfg.FILES["vectors"]))  # Milvus keeps the raw vectors
                    else:
                        np.save(os.path.join(tmp, IDS_FILE), ids)
                    white.save(os.path.join(tmp, cfg.FILES["whitening"]))
                    counts = store.counts()
                    config = cfg.new_config(
                        encoder=encoder.spec(),
                        dim_in=encoder.dimension,
                        dim_out=white.dim_out,
                        whitening={"enabled": whiten, "beta": white.beta, "gamma": white.gamma, "k": white.k,
                                   "k_effective": white.dim_out, "rank": white.rank,
                                   "fitted_on": str(fit_on) if isinstance(fit_on, (str, os.PathLike)) else
                                   ("texts" if fit_on is not None else "corpus questions"),
                                   "fit_count": moments.n},
                        index=ixc,
                        threshold=threshold,
                        counts=counts,
                        corpus=source,
                        next_question_id=int(ids.max()) + 1 if len(ids) else 1,
                    )
                    if milvus is not None:
                        config["backend"] = milvus
                        config["generation"] = milvus["generation"]
                    cfg.save_config(tmp, config)
                finally:
                    store.close()
            if milvus is not None:
                from .backends.milvus import drop_stale

                drop_stale(milvus)
        log.info("built index %s: %d FAQs, %d questions, %d -> %d dims", path, counts["faqs"],
                 counts["questions"], encoder.dimension, white.dim_out)
        engine = cls.open(path, encoder=encoder)
        if self_fusion and milvus is None:
            from .tuning import auto_fusion

            if auto_fusion(engine):
                engine.reload()
        return engine

    # ------------------------------------------------------------------ open
    @classmethod
    def open(cls, index: str | os.PathLike | None = None, *, model: str | None = None,
             encoder: Encoder | None = None, threads: int | None = None,
             _base: tuple[str, VectorIndex, Whitening] | None = None) -> "FAQSearch":
        """Open a built index. The encoder is recreated from its config on first use unless given.

        What is cheap to check is checked: every file present with its recorded size, the store
        readable with the recorded counts, the FAISS index holding one vector per question."""
        path = cfg.resolve_index_path(index)
        if encoder is None and model is not None:
            spec = cfg.load_config(resolve(path))["encoder"]
            encoder = load_encoder(model, pooling=spec.get("pooling") if spec.get("backend") == "transformers" else None,
                                   max_length=spec.get("max_length", 256), prefix=spec.get("prefix", ""),
                                   threads=threads)
        for attempt in range(3):
            version = resolve(path)
            stamp = _config_stamp(path)
            try:
                return cls._open_version(path, version, encoder, threads, _base)
            except (IndexFormatError, FileNotFoundError):
                # a writer may have switched versions and removed this one, or committed two edits in
                # place and removed the delta we read, while we read it
                if attempt == 2 or (resolve(path) == version and _config_stamp(path) == stamp):
                    raise
        raise AssertionError("unreachable")

    @classmethod
    def _open_version(cls, path: str, version: str, encoder: Encoder | None, threads: int | None,
                      base: tuple[str, VectorIndex, Whitening] | None = None) -> "FAQSearch":
        """``base``: (version directory, FAISS index, transform) already loaded from that directory;
        base files never change within a version, so an edit made in place reuses them."""
        config = cfg.load_config(version)
        milvus = config.get("backend", {}).get("kind") == "milvus"
        if not milvus:
            cfg.check_files(version, config, path)
        if encoder is not None:
            _check_encoder(config, encoder, path)
        reuse = base is not None and base[0] == version and not milvus
        try:
            # the previous transform's moments may be a delta's: taken only where a delta replaces them
            whitening = replace(base[2]) if reuse and config.get("delta") else \
                Whitening.load(os.path.join(version, cfg.FILES["whitening"]))
        except Exception as exc:  # noqa: BLE001 - zip, pickle-free npz and EOF errors alike: a damaged file
            raise IndexFormatError(cfg.damaged(path, "whitening", f"{type(exc).__name__}: {exc}")) from None
        ix = config.get("index", {})
        if milvus:
            from .backends.milvus import open_backend

            mb = open_backend(config)
            n, expected = mb.store.question_count(), int(config.get("counts", {}).get("questions", 0))
            if n != expected:
                mb.close()
                raise IndexFormatError(f"index {path} is inconsistent: Milvus collection {mb.collection} shows "
                                       f"{n} questions at generation {mb.generation}, config.json {expected}; "
                                       "re-run faqsearch ingest")
            return cls(path, config, encoder, whitening, mb.index, mb.store, version=version, threads=threads)
        if reuse:
            vindex = base[1]
        else:
            try:
                vindex = VectorIndex.load(os.path.join(version, cfg.FILES["faiss"]), ix.get("factory", DEFAULT_FACTORY),
                                          ix.get("nprobe"), ix.get("ef_search"))
            except RuntimeError as exc:
                raise IndexFormatError(cfg.damaged(path, "faiss", str(exc).strip().splitlines()[-1])) from None
        why = None if reuse else vindex.damaged_sample(unit=whitening.residual is None)
        if why:
            raise IndexFormatError(cfg.damaged(path, "faiss", why))
        if vindex.dim != whitening.dim_out or whitening.dim_in != config["dim_in"]:
            raise IndexFormatError(f"index {path} is inconsistent (dimensions {whitening.dim_in}->{whitening.dim_out}, "
                                   f"FAISS {vindex.dim}, config {config['dim_in']}); re-run faqsearch ingest")
        store = Store.open_existing(os.path.join(version, cfg.FILES["store"]), path,
                                    generation=int(config.get("generation", 0)))
        if config.get("delta"):
            vindex = _with_delta(path, version, config, vindex, whitening)
        try:
            expected = config.get("counts", {}).get("questions")
            # counted once per version directory; an in-place edit's reload trusts its writer's count
            n = int(expected) if reuse and expected is not None else store.question_count()
            expected = n if expected is None else int(expected)
            store.known_count = n
            tomb = int(ix.get("tombstones", 0))
            if n != expected or len(vindex) != n + tomb:
                raise IndexFormatError(
                    f"index {path} is inconsistent: {cfg.FILES['store']} holds {n} questions, config.json "
                    f"{expected}, {cfg.FILES['faiss']} {len(vindex)} vectors ({tomb} removed). Restore the index "
                    "from a backup or re-run faqsearch ingest")
        except BaseException:
            store.close()
            raise
        engine = cls(path, config, encoder, whitening, vindex, store, version=version, threads=threads)
        if "PQ" in vindex.factory:  # PQ codes choose candidates; the stored float vectors rank them
            engine._attach_refiner()
        return engine

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "FAQSearch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ ask
    @property
    def threshold(self) -> float:
        return float(self.config.get("threshold", DEFAULT_THRESHOLD))

    def embed(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """Query vectors: encoder, then the index's transform, L2-normalised. Repeated texts come
        from an LRU cache of the last QUERY_CACHE queries."""
        texts = list(texts)
        out = np.empty((len(texts), self.whitening.dim_out), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._cache_lock:
            for i, t in enumerate(texts):
                v = self._cache.get(t)
                if v is None:
                    missing.setdefault(t, []).append(i)
                else:
                    self._cache.move_to_end(t)
                    out[i] = v
        if missing:
            todo = list(missing)
            vecs = self.whitening.transform(self.encoder.encode(todo, batch_size=batch_size, progress=progress))
            with self._cache_lock:
                for t, v in zip(todo, vecs):
                    out[missing[t]] = v
                    self._cache[t] = v
                while len(self._cache) > QUERY_CACHE:
                    self._cache.popitem(last=False)
        return out

    def search_vectors(self, vectors: np.ndarray, k: int = 5,
                       filters: dict[str, Any] | None = None) -> list[list[Answer]]:
        """Top-k distinct FAQs for each (already transformed) query vector, best first.

        Starts with a few neighbours per wanted FAQ and widens the search only for queries whose
        hits crowd into too few FAQs, so the cost does not grow with the largest FAQ.
        """
        distinct = getattr(self.index, "search_distinct", None)
        if distinct is not None:  # the backend groups by FAQ itself (Milvus)
            hits, rows = distinct(vectors, k, filters)
            for h in hits:
                _check_scores(np.array([s for _, s in h], dtype=np.float32), np.array([i for i, _ in h]), self.path)
            return [_distinct_faqs(h, rows, k, "dense") for h in hits]
        total = len(self.index)
        allowed = None
        if filters:  # applied inside FAISS, so k FAQs still come back when the filter keeps few
            allowed = self.store.question_ids(filters)
            total = len(allowed)
        if total == 0:
            return [[] for _ in range(len(vectors))]
        results: list[list[Answer] | None] = [None] * len(vectors)
        todo = np.arange(len(vectors))
        # enough for k distinct FAQs in one search in the usual case, bounded when one FAQ is huge;
        # tombstones (removed ids an index type cannot delete) are skipped below
        n = min(total, min(k * self._max_per_faq, max(4 * k, 256)) + self._tombstones)
        while len(todo):
            scores, ids = self.index.search(vectors[todo], n, allowed)
            _check_scores(scores, ids, self.path)
            rows = self.store.questions(np.unique(ids[ids >= 0]))
            again = []
            for qi, srow, irow in zip(todo, scores, ids):
                found = _distinct_faqs(zip(irow.tolist(), srow.tolist()), rows, k, "dense")
                if len(found) < k and n < total:
                    again.append(qi)
                else:
                    results[qi] = found
            todo = np.array(again, dtype=np.int64)
            n = min(total, n * 4)
        return results  # type: ignore[return-value]

    def search_lexical(self, texts: Sequence[str], k: int = 5,
                       filters: dict[str, Any] | None = None) -> list[list[Answer]]:
        """Top-k distinct FAQs by BM25 over the questions (SQLite FTS5); score = BM25."""
        hits = self.store.lexical(texts, k * min(self._max_per_faq, 8), filters)
        rows = self.store.questions(sorted({qid for h in hits for qid, _ in h}))
        return [_distinct_faqs(h, rows, k, "lexical") for h in hits]

    def search_hybrid(self, texts: Sequence[str], vectors: np.ndarray, k: int = 5,
                      weight: float | None = None, filters: dict[str, Any] | None = None) -> list[list[Answer]]:
        """Fuse dense and lexical: score = cosine + weight * BM25 / (best BM25 of the query).

        Every candidate from either side gets its exact cosine (lexical-only candidates from their
        stored vectors), so the dense score stays a calibrated confidence and BM25 only re-ranks.
        """
        w = self.hybrid_weight if weight is None else float(weight)
        return [fuse(c, w, k) for c in self.hybrid_candidates(texts, vectors, max(k, FUSION_POOL), filters)]

    def hybrid_candidates(self, texts: Sequence[str], vectors: np.ndarray, pool: int,
                          filters: dict[str, Any] | None = None) -> list[list[Answer]]:
        """The union of dense and lexical candidates per query, each with .dense and .lexical set."""
        dense = self.search_vectors(vectors, pool, filters)
        lexical = self.search_lexical(texts, max(pool, LEXICAL_POOL), filters)
        out = []
        for qv, dlist, llist in zip(vectors, dense, lexical):
            cands = {a.faq_id: a for a in dlist}
            missing = [a for a in llist if a.faq_id not in cands]
            if missing:
                vecs = self.index.reconstruct(np.array([a.question_id for a in missing]))
                for a, v in zip(missing, vecs @ qv):
                    a.dense = float(v)
                    cands[a.faq_id] = a
            lex = {a.faq_id: a.lexical for a in llist}
            for fid, a in cands.items():
                a.lexical = lex.get(fid)
            out.append(list(cands.values()))
        return out

    @property
    def mode(self) -> str:
        return str(self.config.get("mode", DEFAULT_MODE))

    @property
    def hybrid_weight(self) -> float:
        return float(self.config.get("hybrid_weight", DEFAULT_HYBRID_WEIGHT))

    def ask_many(self, texts: Sequence[str], k: int = 5, threshold: float | None = None,
                 batch_size: int = 64, progress: bool = False, mode: str | None = None,
                 filters: dict[str, Any] | None = None) -> list[Result]:
        """Answer many queries with one encoder pass and one search call.

        mode: 'dense' (vectors), 'lexical' (BM25; no threshold: any token match answers) or
        'hybrid' (both fused); default: the index's mode. filters: {"category": "x"} and metadata
        fields ({"product": ["a", "b"]}), applied inside the search.
        """
        if k < 1:
            raise ValueError("k must be at least 1")
        mode = mode or self.mode
        if mode not in MODES:
            raise FAQSearchError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        self._refresh()
        texts = [clean_text(t) for t in texts]
        thr = self.threshold if threshold is None else float(threshold)
        if mode == "lexical":
            found = self.search_lexical(texts, k, filters)
            return [Result(t, a, a[0].score if a else None, thr, a[0] if a else None) for t, a in zip(texts, found)]
        vectors = self.embed(texts, batch_size=batch_size, progress=progress)
        found = (self.search_hybrid(texts, vectors, k, filters=filters) if mode == "hybrid"
                 else self.search_vectors(vectors, k, filters))
        out = []
        for text, answers in zip(texts, found):
            best = max((a.dense for a in answers), default=None)
            out.append(Result(text, [a for a in answers if a.dense >= thr], best, thr, answers[0] if answers else None))
        return out

    def ask(self, text: str, k: int = 5, threshold: float | None = None, mode: str | None = None,
            filters: dict[str, Any] | None = None) -> Result:
        """Answer one query: up to k FAQs whose cosine reaches the threshold, best first."""
        return self.ask_many([text], k=k, threshold=threshold, mode=mode, filters=filters)[0]

    def info(self) -> dict[str, Any]:
        self._refresh()
        return {"path": self.path, **self.config, "counts": self.store.counts(), "vectors": len(self.index)}

    def _refresh(self) -> None:
        if self.auto_reload:
            self.reload_if_changed()

    # ------------------------------------------------------------------ reload
    def reload(self) -> None:
        """Load the index files again (after an edit by this or another process). The encoder is kept."""
        base = getattr(self.index, "base", self.index)
        fresh = FAQSearch.open(self.path, encoder=self._encoder, threads=self._threads,
                               _base=(self.dir, base, self.whitening) if isinstance(base, VectorIndex) else None)
        self.config, self.whitening, self.index, self.store = fresh.config, fresh.whitening, fresh.index, fresh.store
        self.dir = fresh.dir
        self._max_per_faq, self._stamp, self._tombstones = fresh._max_per_faq, fresh._stamp, fresh._tombstones
        with self._cache_lock:
            self._cache.clear()  # cached query vectors belong to the old transform
        # the old store connection is left to the garbage collector: another thread may still be reading it

    def reload_if_changed(self, every: float = 1.0) -> bool:
        """Reload when config.json changed on disk; checks at most once per ``every`` seconds."""
        now = time.monotonic()
        if now - self._checked < every:
            return False
        self._checked = now
        stamp = _config_stamp(self.path)
        if stamp is None or stamp == self._stamp:
            return False
        self.reload()
        return True

    # ------------------------------------------------------------------ edits
    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold the index's writer lock, on the latest version (another process may have edited it)."""
        with self._edit_lock, writer_lock(self.path):
            self.reload_if_changed(every=0.0)
            yield

    def add(self, corpus: str | Sequence[FAQ], columns: Columns | None = None, fmt: str | None = None,
            progress: bool = False) -> EditReport:
        """Add new FAQs (ids not yet in the index); only their questions are encoded."""
        faqs = _as_faqs(corpus, columns, fmt)
        with self._exclusive():
            existing = self.store.faq_hashes()
            clash = [f.id for f in faqs if f.id in existing]
            if clash:
                raise DuplicateFAQError(f"FAQ id(s) already in the index: {', '.join(clash[:10])}"
                                     f"{' ...' if len(clash) > 10 else ''}; use `faqsearch update` to change them")
            return self._edit(_Edit(new_faqs=faqs), "added", progress)

    def update(self, corpus: str | Sequence[FAQ], columns: Columns | None = None, fmt: str | None = None,
               progress: bool = False) -> EditReport:
        """Update the given FAQs by id: new questions are encoded, dropped ones removed, answers rewritten.
        FAQs not in the index are added; FAQs not listed are left alone."""
        faqs = _as_faqs(corpus, columns, fmt)
        with self._exclusive():
            return self._edit(self._plan(faqs, remove_missing=False), "added", progress)

    def upsert(self, corpus: str | Sequence[FAQ], columns: Columns | None = None, fmt: str | None = None,
               progress: bool = False) -> EditReport:
        """Make the index match a whole corpus, touching only what differs (by content hash).

        FAQs missing from the corpus are removed, except those created by `add` alone."""
        faqs = _as_faqs(corpus, columns, fmt)
        with self._exclusive():
            return self._edit(self._plan(faqs, remove_missing=True), "corpus", progress)

    def remove(self, faq_ids: Sequence[str]) -> EditReport:
        """Remove FAQs and all their questions."""
        with self._exclusive():
            existing = self.store.faq_hashes()
            unknown = [i for i in faq_ids if i not in existing]
            if unknown:
                raise UnknownFAQError(f"unknown FAQ id(s): {', '.join(unknown[:10])}; see `faqsearch list`")
            return self._edit(_Edit(removed_faqs=list(dict.fromkeys(faq_ids))), "added", False)

    def feedback(self, query: str, faq_id: str) -> EditReport:
        """"This query should have matched FAQ X": add the query as a question of X (source 'feedback'),
        through the normal atomic edit. A query the FAQ already has is left alone."""
        text = clean_text(query)
        if is_blank(text):
            raise FAQSearchError("the query is blank; nothing to add")
        with self._exclusive():
            faq = self.store.faq(faq_id)
            if faq is None:
                raise UnknownFAQError(f"unknown FAQ id {faq_id!r}; see `faqsearch list`")
            if text in {q["text"] for q in faq["questions"]}:
                return EditReport(unchanged_faqs=1)
            report = self._edit(_Edit(new_questions=[(faq_id, text)]), "feedback", False)
            report.updated_faqs = [faq_id]
            return report

    def augment(self, generator=None, n: int = 3, candidates: int = 24, seed: int | None = 0,
                min_similarity: float | None = None, progress: bool = False,
                rounds: int | None = None) -> EditReport:
        """Add up to ``n`` paraphrases of each FAQ's first question as extra questions (source
        'generated'), in one atomic edit. ``generator`` is a :class:`faqsearch.generators.Generator`
        or a name for :func:`faqsearch.generators.load_generator` (default SmolLM2). Candidates are
        re-ranked by this index's own query vectors and kept only when this index answers them with
        their own FAQ (round-trip consistency); while fewer than ``n`` pass, more batches are drawn,
        ``rounds`` at most (default ``faqsearch.generators.ROUNDS``). ``remove_generated()`` undoes it."""
        from .generators import ROUNDS, Generator, load_generator
        from .generators.recipe import DEFAULT_MIN_SIMILARITY

        min_similarity = DEFAULT_MIN_SIMILARITY if min_similarity is None else min_similarity
        if not isinstance(generator, Generator):
            generator = load_generator(generator)
        with self._exclusive():
            return self._augment(generator, n, candidates, seed, min_similarity, progress,
                                 ROUNDS if rounds is None else rounds)

    def _augment(self, generator, n: int, candidates: int, seed: int | None, min_similarity: float,
                 progress: bool, rounds: int) -> EditReport:
        from .encoders.base import progress_bar
        from .generators import diverse_top, normal, screen_rounds

        plan = _Edit(config={"generator": generator.spec()})
        faqs = self.store.list_faqs()
        with progress_bar(len(faqs), progress, "paraphrasing") as bar:
            for f in faqs:
                questions = [q["text"] for q in self.store.faq(f["id"])["questions"]]
                # a rewording that repeats another stored question is no new wording
                # round-trip consistency: a rewording that this index answers with another FAQ would
                # pull that FAQ's queries to this one, so it is dropped
                def comes_back(texts: list[str], fid: str = f["id"]) -> list[bool]:
                    return [r.nearest is not None and r.nearest.faq_id == fid for r in self.ask_many(texts, k=1)]

                screened = screen_rounds(generator, questions[0], n, candidates, self.embed, min_similarity, seed,
                                         rounds, exclude={normal(q) for q in questions}, same_intent=comes_back)
                plan.new_questions += [(f["id"], p.text) for p in diverse_top(screened, n)]
                bar.update(1)
        return self._edit(plan, "generated", False)

    def remove_generated(self) -> EditReport:
        """Remove every question with source 'generated' (from augment), in one atomic edit."""
        with self._exclusive():
            ids = [q["id"] for f in self.store.list_faqs() for q in self.store.faq(f["id"])["questions"]
                   if q["source"] == "generated"]
            return self._edit(_Edit(removed_questions=ids), "generated", False)

    def list(self, limit: int | None = None, offset: int = 0, category: str | None = None,
             contains: str | None = None) -> list[dict[str, Any]]:
        """FAQs (id, category, answer, number of questions); ``contains`` searches ids, answers and questions."""
        self._refresh()
        return self.store.list_faqs(limit, offset, category, contains)

    def show(self, faq_id: str) -> dict[str, Any]:
        self._refresh()
        faq = self.store.faq(faq_id)
        if faq is None:
            raise UnknownFAQError(f"unknown FAQ id {faq_id!r}; see `faqsearch list`")
        return faq

    def _plan(self, faqs: list[FAQ], remove_missing: bool) -> _Edit:
        hashes = self.store.faq_hashes()
        plan = _Edit()
        listed = set()
        for f in faqs:
            listed.add(f.id)
            if f.id not in hashes:
                plan.new_faqs.append(f)
                continue
            if hashes[f.id] == faq_hash(f):
                continue
            stored = self.store.faq(f.id)
            editable = {q["text"]: q["id"] for q in stored["questions"] if q["source"] in ("corpus", "added")}
            present = {q["text"] for q in stored["questions"]}
            plan.removed_questions += [qid for text, qid in editable.items() if text not in f.questions]
            plan.new_questions += [(f.id, q) for q in f.questions if q not in present]
            plan.changed_faqs.append(f)
        if remove_missing:
            ingested = self.store.faq_ids(source="corpus")
            plan.removed_faqs = sorted(i for i in hashes if i not in listed and i in ingested)
        return plan

    @property
    def backend(self) -> str:
        return str(self.config.get("backend", {}).get("kind", "embedded"))

    def _attach_refiner(self) -> None:
        """Exact re-scoring for PQ indexes from ``vectors.npy`` (memory-mapped: the float vectors stay
        on disk, only the candidates' rows are read)."""
        ids, raw = self.base_vectors()

        def exact(wanted: np.ndarray) -> np.ndarray:
            rows = np.searchsorted(ids, wanted)
            rows = np.minimum(rows, len(ids) - 1)
            vecs = self.whitening.transform(np.asarray(raw[rows]))
            vecs[ids[rows] != wanted] = 0.0  # tombstones (no stored vector any more) never win
            return vecs

        self.index.refiner = exact

    def raw_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(question ids, raw encoder vectors) of every question, in id order (for refit and tune).
        Memory-mapped from the base file; held in memory when a delta adds or removes questions."""
        if self.backend == "milvus":
            return self.store.raw_vectors()
        ids, raw = self.base_vectors()
        if not self.delta:
            return ids, raw
        keep = ~np.isin(ids, self.delta.removed)
        return (np.concatenate([ids[keep], self.delta.ids]),
                np.concatenate([np.asarray(raw)[keep], self.delta.raw]))

    def base_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, raw vectors) of the base files, in id order: ``ids.npy`` and ``vectors.npy``
        memory-mapped (an index from before deltas has no ids.npy: its store gives them)."""
        vec_path = os.path.join(self.dir, cfg.FILES["vectors"])
        if not os.path.exists(vec_path):
            raise IndexFormatError(cfg.damaged(self.path, "vectors", "missing"))
        raw = np.load(vec_path, mmap_mode="r")
        ids_path = os.path.join(self.dir, IDS_FILE)
        if os.path.exists(ids_path):
            ids = np.load(ids_path)
        else:
            ids = np.array([q[0] for q in self.store.all_questions()], dtype=np.int64)
        if len(ids) != raw.shape[0]:
            raise IndexFormatError(f"index {self.path} is inconsistent: {len(ids)} questions but {raw.shape[0]} "
                                   "stored vectors; re-run faqsearch ingest")
        return ids, raw

    def _edit(self, plan: _Edit, source: str, progress: bool) -> EditReport:
        """Apply a plan atomically (faqsearch.edits: in place as a delta, or as a new base)."""
        report = EditReport(added_faqs=[f.id for f in plan.new_faqs], updated_faqs=[f.id for f in plan.changed_faqs],
                            removed_faqs=list(plan.removed_faqs))
        if not (plan.new_faqs or plan.changed_faqs or plan.new_questions or plan.removed_questions
                or plan.removed_faqs or plan.config):
            report.unchanged_faqs = self.store.counts()["faqs"]
            return report
        if self.backend == "milvus":
            from .backends.milvus import edit as milvus_edit

            added, removed = milvus_edit(self, plan, source, progress)
        else:
            from .edits import apply as apply_edit

            added, removed = apply_edit(self, plan, source, progress)
        self.reload()
        report.added_questions, report.removed_questions = added, removed
        return report


def build_vector_index(white: Whitening, raw: np.ndarray, ids: np.ndarray, factory: str) -> VectorIndex:
    """Transform raw vectors chunk by chunk into a new FAISS index (trained first on a sample if needed)."""
    vindex = VectorIndex.create(white.dim_out, factory)
    if vindex.needs_training():
        rng = np.random.default_rng(0)
        pick = np.sort(rng.choice(len(ids), size=train_sample_size(factory, len(ids)), replace=False))
        vindex.train(white.transform(np.asarray(raw[pick])))
        vindex.set_search_params()
    for start in range(0, len(ids), CHUNK):
        vindex.add(white.transform(np.asarray(raw[start:start + CHUNK])), ids[start:start + CHUNK])
    return vindex


def fuse(candidates: Sequence[Answer], weight: float, k: int) -> list[Answer]:
    """Rank candidates by cosine + weight * BM25 / max BM25 (new Answer objects; inputs untouched).

    ``score`` stays the cosine, the calibrated confidence the threshold applies to; ``fused`` orders."""
    top = max((a.lexical or 0.0 for a in candidates), default=0.0) or 1.0
    scored = sorted(((float(a.dense + weight * (a.lexical or 0.0) / top), i) for i, a in enumerate(candidates)),
                    key=lambda x: -x[0])[:k]  # stable: ties keep the candidates' order
    return [replace(candidates[i], score=candidates[i].dense, fused=f) for f, i in scored]


def _distinct_faqs(hits: Iterable[tuple[int, float]], rows: dict[int, dict[str, Any]], k: int,
                   kind: str) -> list[Answer]:
    """Question hits (id, score), best first, to at most k FAQs, each with its best question.

    Ids missing from ``rows`` (padding, tombstones) are skipped; ``kind`` names the score's side."""
    seen: dict[str, Answer] = {}
    for qid, score in hits:
        row = rows.get(int(qid))
        if row is None or row["faq_id"] in seen:
            continue
        seen[row["faq_id"]] = Answer(row["faq_id"], row["answer"], float(score), row["question"],
                                     int(row["question_id"]), row["source"], row["category"], row["metadata"],
                                     **{kind: float(score)})
        if len(seen) == k:
            break
    return list(seen.values())


def _check_scores(scores: np.ndarray, ids: np.ndarray, path: str) -> None:
    """Cosines of unit vectors lie in [-1, 1] (a little beyond for quantised types): anything else
    means the FAISS file is damaged, and answering from it would be wrong."""
    valid = scores[ids >= 0]
    if valid.size and (not np.all(np.isfinite(valid)) or np.abs(valid).max() > 1.5):
        raise IndexFormatError(cfg.damaged(path, "faiss", f"a search returned the score {float(np.abs(valid).max()):.3g}"))


def _with_delta(path: str, version: str, config: dict[str, Any], vindex: VectorIndex, whitening: Whitening):
    """The base FAISS index with the version's delta beside it; the transform's moments are the delta's."""
    from .delta import Delta, DeltaIndex

    info = config["delta"]
    file = os.path.join(version, str(info["file"]))
    if not os.path.exists(file):
        raise FileNotFoundError(file)  # open() retries: a writer may have committed twice meanwhile
    if os.path.getsize(file) != int(info.get("bytes", os.path.getsize(file))):
        raise IndexFormatError(f"index {path}: {info['file']} is damaged ({os.path.getsize(file)} bytes, "
                               f"{info['bytes']} expected). Restore the index directory from a backup, or rebuild it")
    try:
        delta = Delta.load(file)
    except Exception as exc:  # noqa: BLE001 - zip and EOF errors alike: a damaged file
        raise IndexFormatError(f"index {path}: {info['file']} is damaged ({type(exc).__name__}: {exc}). "
                               "Restore the index directory from a backup, or rebuild it") from None
    if delta.moments:
        whitening.moments = Moments.from_arrays(delta.moments)
    return DeltaIndex(vindex, delta, whitening)


def _config_stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(os.path.join(path, cfg.FILES["config"]))
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns)


def _as_faqs(corpus: str | Sequence[FAQ], columns: Columns | None, fmt: str | None) -> list[FAQ]:
    if isinstance(corpus, (str, os.PathLike)):
        return read_corpus(str(corpus), columns, fmt)
    return [check_faq(f) for f in corpus]


def _check_encoder(config: dict[str, Any], encoder: Encoder, path: str) -> None:
    check_spec(config["encoder"], encoder.spec(), path)
    if encoder.dimension != config["dim_in"]:
        raise IndexFormatError(f"index {path} expects {config['dim_in']}-dimensional vectors, its encoder gives "
                               f"{encoder.dimension}; re-run faqsearch ingest")


def _previous_generation(path: str) -> int:
    try:
        return int(cfg.load_config(resolve(path)).get("generation", 0))
    except FAQSearchError:
        return 0


def _refuse_lossy_rebuild(path: str, source: str) -> None:
    """Rebuilding from a corpus would drop questions the corpus never had (add, update, augment,
    feedback): refuse unless forced, and say how to keep them."""
    if not os.path.exists(os.path.join(resolve(path), cfg.FILES["config"])):
        return
    try:
        store = open_store(path)
    except FAQSearchError:
        return  # a damaged index: rebuilding it is the fix
    try:
        extra = store.source_counts(exclude="corpus")
    finally:
        store.close()
    if extra:
        what = ", ".join(f"{n} from {src}" for src, n in sorted(extra.items()))
        raise FAQSearchError(
            f"index {path} holds questions that a rebuild from {source} would drop ({what}). "
            "Pass --upsert to apply the corpus as an edit and keep them, or --force to rebuild and drop them")


def open_store(index: str | os.PathLike | None):
    """The store of an index alone, whatever its backend: no encoder, no vectors, never created.
    For listing and showing FAQs, and for reading what a rebuild would drop."""
    path = cfg.resolve_index_path(index)
    version = resolve(path)
    config = cfg.load_config(version)
    if config.get("backend", {}).get("kind") == "milvus":
        from .backends.milvus import open_backend

        return open_backend(config).store
    return Store.open_existing(os.path.join(version, cfg.FILES["store"]), path)
