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
