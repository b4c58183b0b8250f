"""The embedded backend: FAISS + SQLite files (+ a delta of in-place edits) in the version directory."""
from __future__ import annotations

from .backend import EmbeddedBackend

__all__ = ["EmbeddedBackend"]
