"""faqsearch: semantic FAQ retrieval with a transformer encoder, BERT-whitening, FAISS and SQLite."""
from __future__ import annotations

from .corpus import FAQ, Columns, read_corpus
from .encoders import Encoder, load_encoder
from .engine import Answer, FAQSearch, Result
from .errors import (CorpusError, EncoderMismatchError, FAQSearchError, IndexFormatError, IndexNotFoundError,
                     MissingExtraError, ModelNotFoundError)
from .whitening import Moments, Whitening

try:
    from importlib.metadata import version as _version

    __version__ = _version("faqsearch")
except Exception:  # running from a source tree
    __version__ = "0.0.0"

__all__ = ["FAQSearch", "Answer", "Result", "FAQ", "Columns", "read_corpus", "Encoder", "load_encoder",
           "Whitening", "Moments", "FAQSearchError", "CorpusError", "ModelNotFoundError", "MissingExtraError",
           "IndexNotFoundError", "IndexFormatError", "EncoderMismatchError"]
