"""The Milvus backend: one row per question in a Milvus collection (milvus-lite for a local file, or
a Milvus server); see :mod:`.collection` for the row layout and how generations keep it consistent."""
from __future__ import annotations

from .backend import MilvusBackend

__all__ = ["MilvusBackend"]
