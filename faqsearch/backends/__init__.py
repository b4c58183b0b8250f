"""Storage-and-search backends behind one protocol (:mod:`faqsearch.backends.base`):
``embedded`` (FAISS + SQLite files in the index directory, the default) and ``milvus``."""
from __future__ import annotations

from .base import BACKENDS, Backend, Opened, StoreView, VectorSearch, backend_for, backend_named

__all__ = ["BACKENDS", "Backend", "Opened", "StoreView", "VectorSearch", "backend_for", "backend_named"]
