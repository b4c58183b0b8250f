"""The Encoder protocol every backend implements."""
from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

# texts every parity check runs (ONNX Runtime and GPU against torch on the CPU): padding, truncation,
# several scripts
PARITY_TEXTS = [
    "How do I reset my password?", "a", "", "Where is my parcel? It was due three days ago and the tracking page "
    "has not changed since Monday.", "如何修改绑定的手机号？", "Ça coûte combien, la livraison en Suisse ?",
    "word " * 300, "🙂 emoji and   spaces\tand tabs", "COVID-19 vaccine side effects in children under 12",
    "can i pay with paypal", "What is the difference between a refund and a store credit for returned items?",
]


def token_limit(config: Any) -> int | None:
    """How many tokens a model takes (its position embeddings; RoBERTa-style models keep two for
    padding offsets), from a transformers config or a config.json dict; None where it says nothing."""
    get = config.get if isinstance(config, dict) else lambda k, d=None: getattr(config, k, d)
    limit = get("max_position_embeddings") or get("n_positions")
    if not isinstance(limit, int) or limit <= 0:
        return None
    return limit - 2 if "roberta" in str(get("model_type") or "") or "camembert" in str(get("model_type") or "") else limit


def fit_max_length(max_length: int, limit: int | None, name: str) -> int:
    """``max_length`` cut to what the model takes: above it every longer text failed inside the model
    (a warning says so, unless it is the default asked of a model with fewer positions)."""
    from ..defaults import MAX_LENGTH

    if limit is None or max_length <= limit:
        return max_length
    if max_length != MAX_LENGTH:
        import logging

        logging.getLogger(__name__).warning("--max-length %d is more than %s takes; using %d tokens", max_length,
                                            name, limit)
    return limit


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
