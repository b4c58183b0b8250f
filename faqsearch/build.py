"""Building an index from a corpus: read and check it, encode every question in one streaming pass
(moments accumulated as it goes), fit the transform, write the searchable side through the backend
and commit the new version. Everything is validated before anything is encoded; an error or an
interrupt leaves the previous index at the path as it was.

    corpus -> encoder -> whitening.fit -> backend.write_base (FAISS | Milvus) -> store -> commit
"""
from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from .index import config as cfg
from .backends import backend_named
from .corpus import FAQ, Columns, check_faq, read_corpus, read_texts
from .defaults import BATCH_SIZE, BETA, GAMMA, INDEX_TYPE, K, MAX_LENGTH, THRESHOLD
from .edits.plan import check_addressable, check_batch, warn_unread
from . import encoders
from .encoders import Encoder, model_for_corpus
from .encoders.stream import encode_stream, encode_to_file
from .errors import FAQSearchError, IndexPathError, InvalidOptionError, TextTypeError, WouldDropError
from .files import load_npy
from .index.directory import Writer, check_target
from .index.format import VECTORS, WHITENING, Config, index_argument
from .text import check_whole, count, read_alike
from .index.snapshot import open_version
from .whitening import Moments, Whitening

log = logging.getLogger(__name__)


@dataclass
class EncoderSpec:
    """Which encoder to load (``model``: an alias, a directory or a Hugging Face id; ``device``:
    'auto', 'cpu' or 'cuda', None for the process's choice; it is not recorded in the index)."""

    model: str | None = None
    pooling: str | None = None
    max_length: int = MAX_LENGTH
    prefix: str = ""
    threads: int | None = None
    gguf_file: str | None = None
    quantize: bool = False
    device: str | None = None

    def load(self) -> Encoder:
        return encoders.load_encoder(self.model, pooling=self.pooling, max_length=self.max_length,
                                     prefix=self.prefix, threads=self.threads, gguf_file=self.gguf_file,
                                     quantize=self.quantize, device=self.device)


@dataclass
class WhiteningSpec:
    """The transform: x' = (x - beta mu) U Lambda^(-gamma/2), first k columns; ``whiten=False`` stores
    the encoder's vectors as they are; ``fit_on``: fit on these texts instead of the corpus questions."""

    beta: float = BETA
    gamma: float = GAMMA
    k: int | None = K
    whiten: bool = True
    fit_on: str | Sequence[str] | None = None


@dataclass
class StorageSpec:
    """Where rows and vectors live: ``embedded`` (FAISS + SQLite files) or ``milvus`` (``uri``: a local
    .db file runs milvus-lite, http://host:19530 a server; ``collection``: its alias); None: where the
    index at the path lives now (:func:`kept_storage`), embedded for a new one."""

    backend: str | None = None
    uri: str | None = None
    collection: str | None = None
    index_type: str = INDEX_TYPE


def shared_storage(path: str, storage: StorageSpec) -> StorageSpec:
    """An index addressed as milvus://HOST:PORT/NAME lives in that server under its name's collections."""
    from .index.address import remote_of

    remote = remote_of(path)
    if remote is None:
        return storage
    if storage.backend not in (None, "embedded", "milvus") or (storage.uri and storage.uri.rstrip("/") != remote.uri):
        raise InvalidOptionError(f"--index {remote.address} lives in Milvus at {remote.uri}; leave out --backend and "
                                 "--uri (the address names both)")
    return dataclasses.replace(storage, backend="milvus", uri=remote.uri, collection=storage.collection or remote.base)


def kept_storage(path: str, storage: StorageSpec) -> StorageSpec:
    """A rebuild that names no backend keeps the one the index lives in: an index in Milvus was rebuilt
    as an embedded one, its Milvus collections left behind under an alias a later `--backend milvus`
    ingest then refused as another index's. A new index (or an unreadable one) is embedded."""
    if storage.backend is not None:
        return storage
    try:
        section = cfg.load_config(cfg.read_current(path) or path, path).backend if os.path.isdir(path) else None
    except FAQSearchError:
        section = None
    if section is None or section.kind != "milvus" or not section.uri or storage.uri not in (None, section.uri):
        return dataclasses.replace(storage, backend="embedded")
    return dataclasses.replace(storage, backend="milvus", uri=section.uri, collection=storage.collection or section.base,
                               index_type=section.index_type if storage.index_type == INDEX_TYPE and section.index_type
                               else storage.index_type)


def as_faqs(corpus: str | os.PathLike | Sequence[FAQ], columns: Columns | None = None,
            fmt: str | None = None) -> list[FAQ]:
    """FAQ records from a corpus file or from records (checked and normalised like a file's rows)."""
    if isinstance(corpus, (str, os.PathLike)):
        return read_corpus(str(corpus), columns, fmt)
    if isinstance(corpus, (FAQ, Mapping)):  # one record
        corpus = [corpus]
    if not isinstance(corpus, Iterable):
        raise TextTypeError(f"expected a corpus file's path, an FAQ or a list of FAQs, got {type(corpus).__name__}")
    faqs = [check_faq(f) for f in corpus]
    check_batch(faqs)
    return faqs


def build(corpus: str | os.PathLike | Sequence[FAQ], path: str, *, encoder: Encoder | None = None,
          encoder_spec: EncoderSpec | None = None, whitening: WhiteningSpec | None = None,
          storage: StorageSpec | None = None, threshold: float | None = None, columns: Columns | None = None,
          fmt: str | None = None, batch_size: int = BATCH_SIZE, progress: bool = False, force: bool = False,
          replace: bool | None = None, source: str | None = None,
          calibrate: Callable[[Any, Encoder], dict[str, Any]] | None = None) -> Encoder:
    """Build the index at ``path`` and commit it as its next version; returns the encoder it used.

    A rebuild never drops what the index holds silently (:func:`refuse_lossy_rebuild`): FAQs the
    corpus lacks go only with ``replace=True`` (the index then holds exactly the corpus); questions
    the corpus never had on the FAQs it keeps (from add, update, augment or feedback) go with
    ``force=True`` or ``replace=True``. ``replace=None`` follows ``force``: before ``replace`` existed,
    ``force=True`` was how a script rebuilt over whatever the index held, and it still does.
    ``calibrate(snapshot, encoder)``: config changes measured on the new version before it is
    committed (the self-tuned weight and threshold), committed with it, so an interrupted ingest
    leaves the old version, never a new one without its calibration."""
    encoder_spec = encoder_spec or EncoderSpec()
    wspec = whitening or WhiteningSpec()
    storage = kept_storage(path, shared_storage(path, storage or StorageSpec()))
    if storage.backend == "embedded" and (storage.uri or storage.collection):  # they were ignored in silence
        raise InvalidOptionError("--uri and --collection name a Milvus collection, and this index is built as FAISS "
                                 "and SQLite files: add --backend milvus, or leave them out")
    check_target(path)  # only an index of ours may be replaced: refused before anything is read or encoded
    above = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(above) and os.path.dirname(above) != above:
        above = os.path.dirname(above)
    if not os.path.isdir(above):  # (a FileExistsError from makedirs)
        raise IndexPathError(f"{above} is a file, so no index can be made at {path}; choose another --index")
    backend = backend_named(storage.backend)
    check_whole(batch_size, "batch_size")  # before anything is read or encoded
    if wspec.k is not None and (not isinstance(wspec.k, int) or wspec.k < 1):
        raise InvalidOptionError(f"k (--dims) must be a positive number of dimensions, got {wspec.k!r}")
    if not (0.0 <= wspec.beta <= 1.0 and 0.0 <= wspec.gamma <= 1.0):
        raise InvalidOptionError(f"beta and gamma must lie in [0, 1], got beta={wspec.beta}, gamma={wspec.gamma}")
    if not isinstance(wspec.whiten, bool):  # "no" is true in Python: it whitened and stored "no"
        raise InvalidOptionError(f"whiten must be True or False, got {wspec.whiten!r}")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                  or not -1.0 <= float(threshold) <= 1.0):  # it was stored, then config.json refused
        raise InvalidOptionError(f"threshold must be a cosine between -1 and 1, got {threshold!r}")
    prepared = backend.prepare(path, storage)
    source = source or (str(corpus) if isinstance(corpus, (str, os.PathLike)) else "<records>")
    faqs = as_faqs(corpus, columns, fmt)
    if not faqs:
        raise FAQSearchError("no FAQs to index")
    backend.check_faqs(faqs)
    check_addressable((), [f.id for f in faqs])
    if encoder is None and encoder_spec.model is None:  # the corpus's script picks the default encoder
        encoder_spec = dataclasses.replace(encoder_spec, model=model_for_corpus(q for f in faqs for q in f.questions))
    fit_texts = None
    if wspec.fit_on is not None:
        fit_texts = read_texts(wspec.fit_on) if isinstance(wspec.fit_on, (str, os.PathLike)) else list(wspec.fit_on)
    replace = force if replace is None else replace
    listed = {f.id: {read_alike(q) for q in f.questions} for f in faqs}  # kept for the check under the lock
    if not replace:
        refuse_lossy_rebuild(path, source, listed, force)
    if encoder is None:
        encoder = encoder_spec.load()
    warn_unread(encoder.spec(), [q for f in faqs for q in f.questions], "ingest with --model use-multilingual, "
                "which reads both scripts")
    n_questions = sum(len(f.questions) for f in faqs)
    # an index-type typo fails now, not after the whole encode
    backend.check_index_type(storage.index_type, n_questions,
                             min(wspec.k or encoder.dimension, encoder.dimension) if wspec.whiten else encoder.dimension)
    with Writer(path, "ingest --replace" if replace else "ingest") as writer:
        if not replace:
            refuse_lossy_rebuild(path, source, listed, force)  # again under the lock: another writer may have added
        tmp = writer.new_version()
        store = backend.new_store(tmp)
        try:
            index_id = uuid.uuid4().hex
            store.set_setting("index_id", index_id)
            ids = store.insert_corpus(faqs)  # empties faqs: from here on the rows live in the store only
            vec_path = os.path.join(tmp, VECTORS)
            tokens = backend.token_sink(tmp, encoder, len(ids))  # None where it keeps none
            moments = encode_to_file(encoder, store.iter_texts, vec_path, len(ids), batch_size, progress, tokens)
            if fit_texts is not None:
                moments = encode_stream(encoder, fit_texts, batch_size, progress)
            white, whiten = fit_transform(moments, wspec, encoder.dimension)
            raw = load_npy(vec_path, mmap_mode="r")
            sections = backend.write_base(tmp, prepared, store, ids, raw, white, writer.generation + 1, progress)
            del raw
            white.save(os.path.join(tmp, WHITENING))
            counts = store.counts()
            stem = store.stem  # chosen by the first insert
        finally:
            store.close()
        fitted_on = (str(wspec.fit_on) if isinstance(wspec.fit_on, (str, os.PathLike)) else
                     ("texts" if wspec.fit_on is not None else "corpus questions"))
        config = cfg.new_config(
            stem, index_id=index_id, encoder=encoder.spec(), dim_in=encoder.dimension, dim_out=white.dim_out,
            whitening=cfg.whitening_section(white, whiten, fitted_on, moments.n),
            threshold=THRESHOLD if threshold is None else float(threshold), counts=counts, corpus=source,
            calibration={"chosen_by": "default" if threshold is None else "given"},
            next_question_id=int(ids.max()) + 1 if len(ids) else 1, **sections)
        if calibrate is not None:  # measured on the version as it will be, and committed with it: one commit
            config = measured(writer, config, tmp, lambda snap: calibrate(snap, encoder))
        if not cfg.fusion_weights(config.merged(mode="hybrid"))["token_weight"]:
            backend.drop_token_states(tmp)  # hybrid mode does not read them: no disk spent on them
        writer.commit(config, tmp)
        backend.after_commit(config)  # under the lock (and an index in Milvus' lease)
    log.info("built index %s: %d FAQs, %d questions, %d -> %d dims", path, counts["faqs"], counts["questions"],
             encoder.dimension, white.dim_out)
    return encoder


def measured(writer: Writer, config: Config, version: str, measure: Callable[[Any], Mapping[str, Any]]) -> Config:
    """``config`` with what ``measure(snapshot)`` learns of the version being built in ``version``,
    staged there and opened as it will be committed (by build, refit and tune --apply: the threshold
    and confidence go into the same commit as the rows and transform they were measured on)."""
    writer.stage(config.without("files"), version)  # its files are recorded at the commit
    snap = open_version(writer.path, version)
    try:
        return config.merged(measure(snap))
    finally:
        snap.close()


def fit_transform(moments: Moments, wspec: WhiteningSpec, dim: int) -> tuple[Whitening, bool]:
    """The transform for these moments; the identity (and whiten False) when it cannot be fitted."""
    white = None
    whiten = wspec.whiten
    if whiten:
        try:
            white = Whitening.from_moments(moments, beta=wspec.beta, gamma=wspec.gamma, k=wspec.k)
        except ValueError as exc:  # too few (or only identical) texts: nothing to estimate
            log.warning("no transform fitted (%s); storing the encoder's vectors as they are", exc)
            whiten = False
    if white is None:
        white = Whitening.identity(dim)
        white.moments = moments
    return white, whiten


def refuse_lossy_rebuild(path: str, source: str, listed: dict[str, set], force: bool = False) -> None:
    """Refuse a rebuild from a corpus (``listed``: each FAQ id's questions, as :func:`read_alike` reads
    them) that would drop what the index at ``path`` holds: its FAQs the corpus lacks (always:
    ``replace`` is the caller's consent), or, unless ``force``, questions the corpus does not list (add,
    update, augment, feedback; one it lists is kept by the rebuild). The message says how many, and the
    edit that keeps them."""
    from .index.snapshot import open_store

    try:
        store = open_store(path)
    except FAQSearchError:
        return  # nothing there, or a damaged index: rebuilding it is the fix
    try:
        held = store.list_faqs()
        gone = [f for f in held if f["id"] not in listed]
        extra: dict[str, int] = {}
        sources = {} if force or gone else store.source_counts(exclude="corpus")
        if sources:  # the FAQs holding such questions, each read once
            for faq_id in sorted(set().union(*(store.faq_ids(src) for src in sources))):
                for q in (store.faq(faq_id) or {"questions": []})["questions"]:
                    if q["source"] != "corpus" and read_alike(q["text"]) not in listed.get(faq_id, ()):
                        extra[q["source"]] = extra.get(q["source"], 0) + 1
    finally:
        store.close()
    where = index_argument(path)
    if gone:
        questions = sum(int(f["questions"]) for f in gone)
        names = ", ".join(f["id"] for f in gone[:5]) + (", ..." if len(gone) > 5 else "")
        keep = "update" if len(held) > len(gone) else "add"  # add refuses ids the index holds; update adds the new and updates those
        raise WouldDropError(
            f"a rebuild of index {path} from {source} would drop {count(len(gone), 'FAQ')} "
            f"({count(questions, 'question')}) that {source} does not list ({names}). Keep them with "
            f"`faqsearch {keep} {source} --index {where}`, make the index match {source} as an edit with "
            f"`faqsearch upsert {source} --index {where}` (FAQs from `add` stay), or pass --replace to rebuild "
            f"from {source} alone")
    if extra:
        what = ", ".join(f"{n} from {src}" for src, n in sorted(extra.items()))
        kept = [src for src in sorted(extra) if src != "added"]
        upsert = (f"`faqsearch upsert {source} --index {where}` applies the corpus as an edit and keeps those from "
                  f"{', '.join(kept)}" + (" (not those from added: an export speaks for them)" if "added" in extra else "")
                  if kept else "")
        raise WouldDropError(
            f"index {path} holds questions that a rebuild from {source} would drop ({what}). "
            f"`faqsearch update {source} --index {where}` applies the corpus as an edit and keeps them all"
            + (f"; {upsert}" if upsert else "") + ", or pass --replace to rebuild and drop them")


def info_summary(config: Config) -> dict[str, Any]:
    """What `ingest` reports of a built index."""
    return {"faqs": config.counts.faqs, "questions": config.counts.questions,
            "encoder": config.encoder.name, "dim_in": config.dim_in, "dim_out": config.dim_out,
            "whitening": config.whitening.to_dict(), "mode": config.mode or "hybrid",
            **cfg.fusion_weights(config), "fusion": config.fusion,
            "threshold": config.threshold, "calibration": config.calibration,
            "confidence": config.confidence, "min_confidence": config.min_confidence}
