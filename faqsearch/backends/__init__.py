"""Storage-and-search backends behind one protocol (:mod:`faqsearch.backends.base`):
``embedded`` (FAISS + SQLite files in the index directory, the default) and ``milvus``. This module
is their factory."""
from __future__ import annotations

from ..index.format import Config

from ..errors import InvalidOptionError
from .base import (BACKENDS, Backend, BuildStore, Counts, FAQRecord, FAQSummary, Opened, QuestionRow, RawSource,
                   StoreView, TokenSink, TokenSource, VectorSearch, delta_limit)

__all__ = ["BACKENDS", "Backend", "BuildStore", "Counts", "FAQRecord", "FAQSummary", "Opened", "QuestionRow",
           "RawSource", "StoreView", "TokenSink", "TokenSource", "VectorSearch", "backend_for", "backend_named",
           "delta_limit", "shared_meta", "writer_lease"]


def backend_named(kind: str) -> Backend:
    if kind == "embedded":
        from .embedded import EmbeddedBackend

        return EmbeddedBackend()
    if kind == "milvus":
        from .milvus import MilvusBackend

        return MilvusBackend()
    raise InvalidOptionError(f"unknown backend {kind!r}; choose one of {', '.join(BACKENDS)}")


def backend_for(config: Config) -> Backend:
    """The backend an index was built with (its config's ``backend.kind``, embedded by default)."""
    return backend_named(config.backend_kind)


def shared_meta(uri: str, base: str):
    """The metadata of an index that lives in Milvus alone (its commits and small files):
    :class:`faqsearch.backends.milvus.shared.Meta`."""
    from .milvus.shared import Meta

    return Meta(uri, base)


def writer_lease(uri: str, base: str, label: str | None = None):
    """The writers' lock of an index that lives in Milvus alone, not yet taken (``label``: how errors
    name the index): :class:`faqsearch.backends.milvus.shared.Lease`."""
    from .milvus.shared import Lease

    return Lease(uri, base, label)
