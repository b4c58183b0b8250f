"""The FAQSearch facade: build an index from a corpus, open it, ask it questions.

ingest:  corpus -> encoder -> whitening.fit/transform -> index.add -> store.insert -> config.save
ask:     text   -> encoder -> whitening.transform     -> index.search -> store.questions
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from . import config as cfg
from .corpus import FAQ, Columns, read_corpus, read_texts
from .encoders import Encoder, check_spec, encoder_from_spec, load_encoder
from .errors import FAQSearchError, IndexFormatError
from .index import DEFAULT_FACTORY, VectorIndex
from .store import Store
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


@dataclass
class Answer:
    """One FAQ matched by a query: its answer and the best-matching stored question."""

    faq_id: str
    answer: str
    score: float
    question: str
    question_id: int
    source: str = "corpus"
    category: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Result:
    """The answers to one query (empty when nothing scored above the threshold)."""

    query: str
    answers: list[Answer]
    best_score: float | None
    threshold: float

    @property
    def confident(self) -> bool:
        return bool(self.answers)

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "answers": [asdict(a) for a in self.answers],
                "best_score": self.best_score, "threshold": self.threshold}


def _chunks(seq: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(seq), size):
        yield seq[start:start + size]


def _encode_stream(encoder: Encoder, texts: Sequence[str], batch_size: int, progress: bool,
                   out: np.ndarray | None = None) -> Moments:
    """Encode texts chunk by chunk, accumulating moments (and writing raw vectors to ``out``)."""
    from .encoders.base import progress_bar

    moments = Moments(encoder.dimension)
    with progress_bar(len(texts), progress, "encoding") as bar:
        for start in range(0, len(texts), CHUNK):
            chunk = texts[start:start + CHUNK]
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

    def __init__(self, path: str, config: dict[str, Any], encoder: Encoder, whitening: Whitening,
                 index: VectorIndex, store: Store):
        self.path = path
        self.config = config
        self.encoder = encoder
        self.whitening = whitening
        self.index = index
        self.store = store
        self._max_per_faq = max(1, int(config.get("counts", {}).get("max_questions_per_faq", 1)))

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
        factory: str = DEFAULT_FACTORY,
        batch_size: int = 32,
        progress: bool = False,
    ) -> "FAQSearch":
        """Build an index from a corpus file (or FAQ records) and move it into place atomically.

        Everything is validated before anything is written; an error or interrupt leaves the
        previous index at that path untouched.
        """
        path = cfg.resolve_index_path(index)
        source = str(corpus) if isinstance(corpus, (str, os.PathLike)) else "<records>"
        faqs = read_corpus(str(corpus), columns, fmt) if isinstance(corpus, (str, os.PathLike)) else list(corpus)
        if not faqs:
            raise FAQSearchError("no FAQs to index")
        fit_texts = None
        if fit_on is not None:
            fit_texts = read_texts(fit_on) if isinstance(fit_on, (str, os.PathLike)) else list(fit_on)
        if encoder is None:
            encoder = load_encoder(model, pooling=pooling, max_length=max_length, prefix=prefix, threads=threads,
                                   gguf_file=gguf_file)
        parent = os.path.dirname(path)
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.building-", dir=parent)
        store = None
        try:
            store = Store(os.path.join(tmp, cfg.FILES["store"]))
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
            vindex = VectorIndex.create(white.dim_out, factory)
            for start in range(0, len(texts), CHUNK):
                vindex.add(white.transform(raw[start:start + CHUNK]), ids[start:start + CHUNK])
            raw.flush()
            del raw
            white.save(os.path.join(tmp, cfg.FILES["whitening"]))
            vindex.save(os.path.join(tmp, cfg.FILES["faiss"]))
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
                index={"factory": factory},
                threshold=threshold,
                counts=counts,
                corpus=source,
            )
            cfg.save_config(tmp, config)
            store.close()
            store = None
            _swap_into_place(tmp, path)
        except BaseException:
            if store is not None:
                store.close()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        log.info("built index %s: %d FAQs, %d questions, %d -> %d dims", path, counts["faqs"],
                 counts["questions"], encoder.dimension, white.dim_out)
        return cls.open(path, encoder=encoder)

    # ------------------------------------------------------------------ open
    @classmethod
    def open(cls, index: str | os.PathLike | None = None, *, model: str | None = None,
             encoder: Encoder | None = None, threads: int | None = None) -> "FAQSearch":
        """Open a built index; the encoder is recreated from its config unless given."""
        path = cfg.resolve_index_path(index)
        config = cfg.load_config(path)
        for key in ("whitening", "faiss", "store"):
            if not os.path.exists(os.path.join(path, cfg.FILES[key])):
                raise IndexFormatError(f"index {path} is missing {cfg.FILES[key]}; re-run faqsearch ingest")
        if encoder is None and model is not None:
            spec = config["encoder"]
            encoder = load_encoder(model, pooling=spec.get("pooling") if spec.get("backend") == "transformers" else None,
                                   max_length=spec.get("max_length", 256), prefix=spec.get("prefix", ""),
                                   threads=threads)
        if encoder is None:
            encoder = encoder_from_spec(config["encoder"], threads=threads)
        check_spec(config["encoder"], encoder.spec(), path)
        whitening = Whitening.load(os.path.join(path, cfg.FILES["whitening"]))
        vindex = VectorIndex.load(os.path.join(path, cfg.FILES["faiss"]), config.get("index", {}).get("factory", DEFAULT_FACTORY))
        if vindex.dim != whitening.dim_out or whitening.dim_in != encoder.dimension:
            raise IndexFormatError(f"index {path} is inconsistent (dimensions {whitening.dim_in}->{whitening.dim_out}, "
                                   f"FAISS {vindex.dim}, encoder {encoder.dimension}); re-run faqsearch ingest")
        return cls(path, config, encoder, whitening, vindex, Store(os.path.join(path, cfg.FILES["store"])))

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

    def embed(self, texts: Sequence[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        """Query vectors: encoder, then the index's transform, L2-normalised."""
        raw = self.encoder.encode(list(texts), batch_size=batch_size, progress=progress)
        return self.whitening.transform(raw)

    def search_vectors(self, vectors: np.ndarray, k: int = 5) -> list[list[Answer]]:
        """Top-k distinct FAQs for each (already transformed) query vector, best first."""
        n = min(len(self.index), k * self._max_per_faq)
        if n == 0:
            return [[] for _ in range(len(vectors))]
        scores, ids = self.index.search(vectors, n)
        rows = self.store.questions(np.unique(ids[ids >= 0]))
        results = []
        for srow, irow in zip(scores, ids):
            seen: dict[str, Answer] = {}
            for score, qid in zip(srow, irow):
                row = rows.get(int(qid))
                if row is None or row["faq_id"] in seen:
                    continue
                seen[row["faq_id"]] = Answer(row["faq_id"], row["answer"], float(score), row["question"],
                                             int(qid), row["source"], row["category"], row["metadata"])
                if len(seen) == k:
                    break
            results.append(list(seen.values()))
        return results

    def ask_many(self, texts: Sequence[str], k: int = 5, threshold: float | None = None,
                 batch_size: int = 32, progress: bool = False) -> list[Result]:
        """Answer many queries with one encoder pass and one search call."""
        if k < 1:
            raise ValueError("k must be at least 1")
        texts = list(texts)
        thr = self.threshold if threshold is None else float(threshold)
        vectors = self.embed(texts, batch_size=batch_size, progress=progress)
        out = []
        for text, answers in zip(texts, self.search_vectors(vectors, k)):
            best = answers[0].score if answers else None
            out.append(Result(text, [a for a in answers if a.score >= thr], best, thr))
        return out

    def ask(self, text: str, k: int = 5, threshold: float | None = None) -> Result:
        """Answer one query: up to k FAQs scoring at least the threshold, best first."""
        return self.ask_many([text], k=k, threshold=threshold)[0]

    def info(self) -> dict[str, Any]:
        return {"path": self.path, **self.config, "vectors": len(self.index)}


def _swap_into_place(tmp: str, path: str) -> None:
    """Replace the directory at ``path`` with ``tmp``; the old one is removed only once the new is in place."""
    old = None
    if os.path.exists(path):
        old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-", dir=os.path.dirname(path))
        os.rmdir(old)
        os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        if old is not None:
            os.replace(old, path)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
