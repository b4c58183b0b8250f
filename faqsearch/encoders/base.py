"""The Encoder protocol every backend implements."""
from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into float32 vectors of a fixed dimension.

    ``spec()`` is what an index records so that it can be reopened with the same encoder and
    refuse a different one.
    """

    name: str
    dimension: int

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        """Return an array of shape (len(texts), dimension), dtype float32."""
        ...

    def spec(self) -> dict[str, Any]:
        """A JSON-able description: name, pooling, prefix, max_length, dimension, ..."""
        ...


def progress_bar(total: int, enabled: bool, desc: str):
    """A tqdm bar on a terminal, or a no-op when disabled or when stderr is not a terminal (a log file
    or a pipe would fill with carriage-return redraws)."""
    import sys

    from tqdm.auto import tqdm

    on_terminal = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    return tqdm(total=total, disable=not (enabled and on_terminal), desc=desc, unit="text", leave=False)
