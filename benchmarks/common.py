"""Helpers shared by the benchmark scripts (not part of the package)."""
from __future__ import annotations

import os
import platform
import time
from typing import Any, Sequence

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "sample_data")
DATA = os.environ.get("FAQSEARCH_DATA", os.path.join(os.path.dirname(ROOT), "shared", "data"))


class CachingEncoder:
    """Wraps an encoder so that each distinct text is encoded once across many index builds."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self._cache: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            for t, v in zip(todo, self.inner.encode(todo, batch_size=batch_size, progress=progress)):
                self._cache[t] = v
        return np.stack([self._cache[t] for t in texts]) if texts else np.empty((0, self.dimension), np.float32)

    def spec(self) -> dict[str, Any]:
        return self.inner.spec()


def machine() -> str:
    import torch

    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__} "
            f"threads {torch.get_num_threads()}, {time.strftime('%Y-%m-%d')}")


def emit(lines: list[str], out: str | None) -> None:
    """Print a result table and, with --out, write it to a file."""
    text = "\n".join(lines)
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text + "\n")
