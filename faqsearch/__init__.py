"""faqsearch: semantic FAQ retrieval with a transformer encoder, BERT-whitening, FAISS and SQLite."""
from __future__ import annotations

from .corpus import FAQ, Columns, read_corpus
from .encoders import Encoder, load_encoder
from .engine import FAQSearch
from .errors import (BlankQueryError, ClosedError, CorpusError, DuplicateFAQError, EncoderMismatchError, FAQSearchError, IndexFormatError,
                     IndexNotFoundError, IndexPathError, InvalidOptionError, MissingExtraError, ModelNotFoundError,
                     StaleRevisionError, StorageError, TextTypeError, UnknownFAQError, WouldDropError)
from .results import Answer, EditReport, Result
from .whitening import Moments, Whitening

try:
    from importlib.metadata import version as _version

    __version__ = _version("faqsearch")
except Exception:  # running from a source tree
    __version__ = "0.0.0"

__all__ = ["FAQSearch", "Answer", "Result", "EditReport", "FAQ", "Columns", "read_corpus", "Encoder", "load_encoder",
           "Whitening", "Moments", "FAQSearchError", "CorpusError", "ModelNotFoundError", "MissingExtraError",
           "IndexNotFoundError", "IndexFormatError", "IndexPathError", "InvalidOptionError", "EncoderMismatchError",
           "DuplicateFAQError", "UnknownFAQError", "ClosedError", "WouldDropError",
           "BlankQueryError", "StaleRevisionError", "StorageError", "TextTypeError"]
