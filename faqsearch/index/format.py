"""The index format: the names of every file and folder of an index directory and of a version,
spelled here once (tests/test_format.py keeps them out of every other module), the patterns of the
names faqsearch writes (so a writer removes only its own leftovers), and :class:`Config`, the typed
config.json (sections as dataclasses, checked when read; the only way it is written).

An index directory holds :data:`CURRENT`, :data:`LOCK`, :data:`QUERY_LOG` and its versions
(:func:`version_name`); a version holds the entries of :data:`VERSION_ENTRIES`.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, fields, replace
from collections import abc
from typing import Any, ClassVar, Iterator, Mapping

from ..defaults import MODES
from ..errors import IndexFormatError, IndexNotFoundError

# ---- a version's files ---------------------------------------------------------------------------
CONFIG = "config.json"  # what built the version and the records of its files; replacing it commits
STORE = "store.db"  # the FAQs and questions (SQLite), with the FTS5 table BM25 reads
FAISS = "index.faiss"  # the whitened vectors' FAISS index
WHITENING = "whitening.npz"  # the transform: mean, matrix, and the moments it was fitted on
VECTORS = "vectors.npy"  # raw encoder vectors, so the transform can be re-tuned without re-encoding
IDS = "ids.npy"  # the question id of each row of vectors.npy (indexes from before deltas lack it)
DELTA_PREFIX, DELTA_SUFFIX = "delta-", ".npz"  # delta-<G>.npz: questions added and removed since the base
# not an index file: a Hugging Face model directory names its own config the same way (hub, encoders)
MODEL_CONFIG = "config.json"

# ---- a version's folders, each with a meta file and its arrays -------------------------------------
LEXICAL = "lexical"  # the BM25 postings arrays (backends/embedded/postings.py)
TOKENS = "tokens"  # the questions' token states (backends/embedded/tokenstates.py)
DIR_META = "meta.json"  # each folder's own record: its format and the sizes of its arrays
NPY = ".npy"
LEXICAL_ARRAYS = ("ids", "doclen", "terms", "term_start", "starts", "rows", "tf")  # lexical/<name>.npy
TOKEN_KEYS, TOKEN_SPANS, TOKEN_STATES = "keys.npy", "spans.npy", "states.f16"  # tokens/<name>
TOKENS_FILES = (TOKEN_KEYS, TOKEN_SPANS, TOKEN_STATES)

# ---- the index directory ------------------------------------------------------------------------
CURRENT = "CURRENT"  # the name of the live version, replaced by one atomic rename
LOCK = "LOCK"  # the writers' lock (flock); readers never take it
QUERY_LOG = "queries.db"  # the query log of `faqsearch serve` (outlives versions)
ENCODERS = "encoders"  # the encoders an index learned (faqsearch learn), shared by its versions
REMOTE = "REMOTE"  # in the local cache of an index that lives in Milvus (milvus://HOST:PORT/NAME): its address
TMP = ".tmp"  # a file being written (atomic_write), or a version being built (v<G>.tmp-<hex>)
SQLITE_SIDE = ("-journal", "-wal", "-shm")  # SQLite's files beside a database

# config.json's names of the files (its "files" records use the names themselves)
FILES = {"config": CONFIG, "whitening": WHITENING, "faiss": FAISS, "store": STORE, "vectors": VECTORS, "ids": IDS}
SIZED = ("whitening", "faiss", "vectors", "ids")  # written once per version: size, fingerprint and hash recorded
# folders of a version whose every file is recorded too (size and fingerprint)
RECORDED_DIRS = (LEXICAL, TOKENS)

# every entry of a version, as the docs list them (tests/test_docs.py checks indexes/README.md)
VERSION_ENTRIES = (CONFIG, STORE, FAISS, WHITENING, VECTORS, IDS, f"{DELTA_PREFIX}<G>{DELTA_SUFFIX}",
                   f"{LEXICAL}/", f"{TOKENS}/")
# every entry of an index directory, as the docs list them
INDEX_ENTRIES = (CURRENT, LOCK, QUERY_LOG, REMOTE, f"{ENCODERS}/", "v<G>/")


DEFAULT_HOME = "indexes"  # where `--index NAME` lives without $FAQSEARCH_HOME


def home() -> str:
    """$FAQSEARCH_HOME, or ./indexes where it is unset or empty (a leading ~ is the user's home, as a shell
    would have it: systemd's Environment= and docker -e pass it as written)."""
    return os.path.abspath(os.path.expanduser(os.environ.get("FAQSEARCH_HOME") or DEFAULT_HOME))


def index_argument(path: str) -> str:
    """What ``--index`` takes for the index at ``path``: its name where it lives in the home, else the path
    (a hint giving only the name would make another index, in the home)."""
    import shlex

    path = os.path.abspath(path)
    return shlex.quote(os.path.basename(path) if os.path.dirname(path) == home() else path)  # a name with a space


def version_name(generation: int) -> str:
    """The directory of the version of generation ``generation`` ("v00000007")."""
    return f"v{int(generation):08d}"


def delta_file(generation: int) -> str:
    return f"{DELTA_PREFIX}{int(generation)}{DELTA_SUFFIX}"


def legacy_query_log(index_path: str) -> str:
    """The query log beside the index at ``index_path`` where an older layout kept it (``NAME.queries.db``)."""
    parent, name = os.path.split(os.path.abspath(index_path))
    return os.path.join(parent, f"{name}.{QUERY_LOG}")


def _any(names) -> str:
    return "|".join(re.escape(n) for n in names)


VERSION_NAME = re.compile(r"^v(\d{8,})$")
BUILDING = re.compile(r"^v\d{8,}" + re.escape(TMP) + r"-[0-9a-f]+$")  # a version being built
DELTA = re.compile("^" + re.escape(DELTA_PREFIX) + r"(\d+)" + re.escape(DELTA_SUFFIX) + "$")
# what faqsearch writes into a version directory (and, in the plain layout, into the index directory)
OWN_FILES = re.compile(rf"^(?:{_any(FILES.values())}|{re.escape(DELTA_PREFIX)}\d+{re.escape(DELTA_SUFFIX)})"
                       rf"(?:{_any((TMP, *SQLITE_SIDE))})?$")
TOP = re.compile(rf"^(?:{re.escape(CURRENT)}(?:{re.escape(TMP)})?|{re.escape(LOCK)}|{re.escape(QUERY_LOG)}"
                 rf"(?:{_any(SQLITE_SIDE)})?|{re.escape(REMOTE)}|{re.escape(ENCODERS)})$")


# ---- config.json: a typed view, read and written here -------------------------------------------
# config.json's format_version: 1, or 2 for an index whose store stems its words for BM25 (a faqsearch
# that reads only 1 would search such a store with its query words unstemmed, missing every stemmed row)
FORMAT_VERSION = 2  # the newest this faqsearch reads and writes
READABLE = (1, 2)

_OWN = ("extra", "order")


def read_json(directory: str) -> Any:
    """The JSON in the config.json of ``directory`` as written, unchecked (OSError, ValueError where it
    cannot be read): for the layout checks and version listings that must look at any config."""
    with open(os.path.join(directory, CONFIG), encoding="utf-8") as fh:
        return json.load(fh)


@dataclass(frozen=True)
class Section:
    """A JSON object of config.json with its known keys as typed fields. ``order`` keeps the keys in
    the order they were read and ``extra`` the keys this faqsearch does not know (written by a newer
    one), so :meth:`to_dict` gives back the object read, key for key."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    SECTIONS: ClassVar[dict[str, type[Section]]] = {}  # key -> the Section class its object reads as

    @classmethod
    def keys_known(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name not in _OWN)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):
        known = set(cls.keys_known())
        values = {k: (cls.SECTIONS[k].from_dict(v) if k in cls.SECTIONS and isinstance(v, dict) else v)
                  for k, v in d.items() if k in known}
        return cls(**values, extra={k: v for k, v in d.items() if k not in known}, order=tuple(d))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: the keys read, in their order, then keys set since (those not None)."""
        known = self.keys_known()
        out: dict[str, Any] = {}
        for k in (*self.order, *(k for k in known if k not in self.order and getattr(self, k) is not None),
                  *(k for k in self.extra if k not in self.order)):
            v = getattr(self, k) if k in known else self.extra[k]
            out[k] = v.to_dict() if isinstance(v, Section) else v
        return out

    def has(self, key: str) -> bool:
        """Whether the JSON has ``key`` (read, or set since): a key written as null is there, and reads
        None; an absent one reads None too, and a reader's default applies to it only."""
        return key in self.order or getattr(self, key, None) is not None

    def without(self, *keys: str):
        """A copy with ``keys`` left out of the JSON (a known key reads None)."""
        return replace(self, **{k: None for k in keys if k in self.keys_known()},
                       extra={k: v for k, v in self.extra.items() if k not in keys},
                       order=tuple(k for k in self.order if k not in keys))


@dataclass(frozen=True)
class EncoderSection(Section):
    """Which encoder built the index, as :func:`faqsearch.encoders.encoder_from_spec` reads it."""
    backend: str | None = None
    name: str | None = None
    source: str | None = None
    pooling: str | None = None
    max_length: int | None = None
    prefix: str | None = None
    dimension: int | None = None
    gguf_file: str | None = None
    quantize: str | None = None
    runtime: str | None = None


@dataclass(frozen=True)
class WhiteningSection(Section):
    """The transform (:func:`faqsearch.index.config.whitening_section` gives the keys)."""
    enabled: bool | None = None
    beta: float | None = None
    gamma: float | None = None
    k: int | None = None
    k_effective: int | None = None
    rank: int | None = None
    fitted_on: str | None = None
    fit_count: int | None = None


@dataclass(frozen=True)
class Counts(Section):
    faqs: int | None = None
    questions: int | None = None
    max_questions_per_faq: int | None = None


@dataclass(frozen=True)
class IndexSection(Section):
    """The vector index: its type as asked, the FAISS factory it became, search parameters."""
    type: str | None = None
    factory: str | None = None
    tombstones: int | None = None
    nprobe: int | None = None
    ef_search: int | None = None


@dataclass(frozen=True)
class BackendSection(Section):
    """Where the vectors and rows live beyond the version's files (``kind`` 'milvus'); absent: embedded."""
    kind: str | None = None
    uri: str | None = None
    base: str | None = None
    collection: str | None = None
    index_type: str | None = None


@dataclass(frozen=True)
class DeltaSection(Section):
    """The embedded backend's delta file of the live version (questions added and removed since its base)."""
    file: str | None = None
    added: int | None = None
    removed: int | None = None
    changes: int | None = None
    bytes: int | None = None
    sample: str | None = None


@dataclass(frozen=True)
class Config(Section):
    """A version's config.json. :meth:`from_dict` checks the values everything else relies on (a
    hand-edited file is an error naming the key); :meth:`to_dict` gives back the JSON read, unknown
    keys included, so a config from a newer faqsearch survives a read and a write. Free-form records
    (calibration, fusion, confidence, generator, learned, made, edited, versions, files) stay plain objects."""
    format_version: int | None = None
    created: str | None = None
    versions: dict[str, Any] | None = None
    index_id: str | None = None
    encoder: EncoderSection | None = None
    dim_in: int | None = None
    dim_out: int | None = None
    whitening: WhiteningSection | None = None
    threshold: float | None = None
    counts: Counts | None = None
    corpus: str | None = None
    calibration: dict[str, Any] | None = None
    next_question_id: int | None = None
    index: IndexSection | None = None
    backend: BackendSection | None = None
    mode: str | None = None
    hybrid_weight: float | None = None
    token_weight: float | None = None
    prototype_weight: float | None = None
    fusion: dict[str, Any] | None = None
    confidence: dict[str, Any] | None = None
    min_confidence: float | None = None
    unknown_share: float | None = None  # questions without an FAQ, of the out-of-scope ones the confidence is chosen for
    generator: dict[str, Any] | None = None
    learned: dict[str, Any] | None = None
    delta: DeltaSection | None = None
    generation: int | None = None
    modified: str | None = None
    made: dict[str, Any] | None = None
    edited: dict[str, Any] | None = None
    files: dict[str, Any] | None = None
    SECTIONS: ClassVar[dict[str, type[Section]]] = {
        "encoder": EncoderSection, "whitening": WhiteningSection, "counts": Counts, "index": IndexSection,
        "backend": BackendSection, "delta": DeltaSection}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], file: str = CONFIG, check: bool = True) -> Config:
        """``d`` checked (``file``: where it was read, for messages) and typed; ``check=False`` for a
        listing that shows what a version's config says, damaged or not."""
        if check:
            check_values(d, file)
        return super().from_dict(d)

    @classmethod
    def load(cls, directory: str, path: str | None = None) -> Config:
        """Read and check a version's config.json (``path``: the index, for messages)."""
        where = path or directory
        file = os.path.join(directory, CONFIG)
        if not os.path.isdir(directory):
            raise IndexNotFoundError(f"no index at {where}. Create one with: faqsearch ingest CORPUS.csv "
                                     f"--index {index_argument(where)}")
        if not os.path.exists(file):
            raise IndexFormatError(f"{where} is not a faqsearch index (no {CONFIG}); re-run faqsearch ingest")
        try:
            with open(file, encoding="utf-8") as fh:
                config = json.load(fh)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise IndexFormatError(f"{file} is damaged ({exc}). Restore the index directory from a backup, or "
                                   f"rebuild it with: faqsearch ingest CORPUS --index {where} --force") from None
        except OSError as exc:
            raise IndexFormatError(f"cannot read {file} ({exc.strerror}); check its permissions") from None
        if not isinstance(config, dict):
            raise IndexFormatError(f"{file} is damaged (not a JSON object); rebuild with faqsearch ingest --force")
        fv = config.get("format_version")
        if fv not in READABLE or isinstance(fv, bool):
            versions = config.get("versions")
            built = (versions or {}).get("faqsearch") if isinstance(versions, dict) else None
            newer = isinstance(fv, int) and fv > FORMAT_VERSION
            raise IndexFormatError(
                f"index {where} has format version {fv} (built by faqsearch {built}); this faqsearch reads "
                f"versions {' and '.join(map(str, READABLE))}. "
                + ("Upgrade faqsearch (pip install -U faqsearch)." if newer
                   else "Re-run faqsearch ingest to rebuild it."))
        return cls.from_dict(config, file)

    def to_json(self) -> bytes:
        """config.json's bytes, as every writer writes them."""
        return (json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    def merged(self, changes: Mapping[str, Any] | None = None, **more: Any) -> Config:
        """A new Config whose JSON is this one's with ``changes`` set, as ``{**config, **changes}``
        would give (keys already there keep their place, new ones come last), checked again."""
        return Config.from_dict({**self.to_dict(), **(changes or {}), **more})

    @property
    def backend_kind(self) -> str:
        """'milvus', or 'embedded' where the config names no backend."""
        return (self.backend.kind if isinstance(self.backend, BackendSection) else None) or "embedded"

    @property
    def encoder_spec(self) -> dict[str, Any] | None:
        """The encoder section as the encoder functions take it (a plain object)."""
        return self.encoder.to_dict() if self.encoder is not None else None

    @property
    def recorded(self) -> dict[str, Any]:
        """The records of the version's files (name -> size, sample, SHA-256), empty where there are none."""
        return self.files or {}

    # a read-only mapping of the JSON: FAQSearch.config was a dict, and library users read it so
    # (faqsearch itself reads the attributes)
    def _json(self) -> dict[str, Any]:
        cached = self.__dict__.get("_json_cache")
        if cached is None:
            cached = self.to_dict()
            object.__setattr__(self, "_json_cache", cached)
        return cached

    def __getitem__(self, key: str) -> Any:
        return self._json()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._json()

    def __iter__(self) -> Iterator[str]:
        return iter(self._json())

    def __len__(self) -> int:
        return len(self._json())

    def keys(self):
        return self._json().keys()

    def items(self):
        return self._json().items()

    def get(self, key: str, default: Any = None) -> Any:
        return self._json().get(key, default)

    def values(self):
        return self._json().values()

    def copy(self) -> dict[str, Any]:
        """The JSON as a new dict (json.dumps needs one: ``to_dict()`` is the same)."""
        return self.to_dict()



abc.Mapping.register(Config)  # isinstance(config, Mapping): a read-only mapping of the JSON, as it was a dict

def check_values(config: Mapping[str, Any], file: str) -> None:
    """The values everything else relies on have the right types: a hand-edited config.json is an
    error naming the key, never a traceback later."""
    def bad(key: str, want: str) -> IndexFormatError:
        return IndexFormatError(f"{file}: {key!r} must be {want}, found {json.dumps(config.get(key))[:60]}. Restore "
                                "the file from a backup, or rebuild with faqsearch ingest --force")

    def outside(value: Any, lo: float, hi: float) -> bool:  # not a number (a bool is none) within [lo, hi]
        return not isinstance(value, (int, float)) or isinstance(value, bool) or not lo <= float(value) <= hi

    for key in ("encoder", "whitening"):
        if not isinstance(config.get(key), dict):
            raise bad(key, "an object")
    for key in ("dim_in", "dim_out"):
        if not isinstance(config.get(key), int) or isinstance(config.get(key), bool) or config[key] < 1:
            raise bad(key, "a positive integer")
    for key in ("generation", "next_question_id"):
        if key in config and (not isinstance(config[key], int) or isinstance(config[key], bool) or config[key] < 0):
            raise bad(key, "a non-negative integer")
    if "threshold" in config and outside(config["threshold"], -1.0, 1.0):
        raise bad("threshold", "a number between -1 and 1")
    if "hybrid_weight" in config and (not isinstance(config["hybrid_weight"], (int, float))
                                      or not 0.0 <= float(config["hybrid_weight"]) <= 100.0):
        raise bad("hybrid_weight", "a number between 0 and 100")
    if "token_weight" in config and (not isinstance(config["token_weight"], (int, float))
                                     or not 0.0 <= float(config["token_weight"]) <= 100.0):
        raise bad("token_weight", "a number between 0 and 100")
    if "prototype_weight" in config and outside(config["prototype_weight"], 0.0, 1.0):
        raise bad("prototype_weight", "a number between 0 and 1")
    if config.get("unknown_share") is not None and outside(config["unknown_share"], 0.0, 1.0):
        raise bad("unknown_share", "a number between 0 and 1")
    if "mode" in config and config["mode"] not in MODES:
        raise bad("mode", "one of " + ", ".join(MODES))
    counts = config.get("counts")
    if counts is not None and (not isinstance(counts, dict) or not all(
            isinstance(counts.get(k), int) and counts[k] >= 0 for k in ("faqs", "questions"))):
        raise bad("counts", "an object with non-negative faqs and questions")
    if "files" in config and not isinstance(config["files"], dict):
        raise bad("files", "an object")
