"""The index format's names: every file and folder of an index directory and of a version, spelled
here once (a test keeps them out of every other module), and the patterns of the names faqsearch
writes, so a writer removes only its own leftovers.

An index directory holds :data:`CURRENT`, :data:`LOCK`, :data:`QUERY_LOG` and its versions
(:func:`version_name`); a version holds the entries of :data:`VERSION_ENTRIES`.
"""
from __future__ import annotations

import re

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
INDEX_ENTRIES = (CURRENT, LOCK, QUERY_LOG, "v<G>/")


def version_name(generation: int) -> str:
    """The directory of the version of generation ``generation`` ("v00000007")."""
    return f"v{int(generation):08d}"


def delta_file(generation: int) -> str:
    return f"{DELTA_PREFIX}{int(generation)}{DELTA_SUFFIX}"


def legacy_query_log(name: str) -> str:
    """The query log's name beside an index of an older layout named ``name`` (``NAME.queries.db``)."""
    return f"{name}.{QUERY_LOG}"


def _any(names) -> str:
    return "|".join(re.escape(n) for n in names)


VERSION_NAME = re.compile(r"^v(\d{8,})$")
BUILDING = re.compile(r"^v\d{8,}" + re.escape(TMP) + r"-[0-9a-f]+$")  # a version being built
DELTA = re.compile("^" + re.escape(DELTA_PREFIX) + r"(\d+)" + re.escape(DELTA_SUFFIX) + "$")
# what faqsearch writes into a version directory (and, in the plain layout, into the index directory)
OWN_FILES = re.compile(rf"^(?:{_any(FILES.values())}|{re.escape(DELTA_PREFIX)}\d+{re.escape(DELTA_SUFFIX)})"
                       rf"(?:{_any((TMP, *SQLITE_SIDE))})?$")
TOP = re.compile(rf"^(?:{re.escape(CURRENT)}(?:{re.escape(TMP)})?|{re.escape(LOCK)}|{re.escape(QUERY_LOG)}"
                 rf"(?:{_any(SQLITE_SIDE)})?)$")
