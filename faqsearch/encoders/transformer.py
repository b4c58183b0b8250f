"""Transformers backend: any Hugging Face model id or local directory, with the usual poolings."""
from __future__ import annotations

import logging
import threading
from typing import Any, Sequence

import numpy as np

from ..errors import FAQSearchError
from ..progress import progress_bar
from .base import fit_max_length, token_limit

log = logging.getLogger(__name__)

POOLINGS = ("mean", "cls", "first-last-avg", "last-avg", "pooler", "last-token")


def _pool(pooling: str, outputs: Any, mask) -> "torch.Tensor":  # noqa: F821
    """Pool token states into one vector per text, over the sequence, using the attention mask."""
    import torch

    m = mask.unsqueeze(-1).to(outputs.last_hidden_state.dtype)

    def masked_mean(h):
        return (h * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)

    if pooling in ("mean", "last-avg"):
        return masked_mean(outputs.last_hidden_state)
    if pooling == "first-last-avg":
        hs = outputs.hidden_states  # [embeddings, layer 1, ..., layer L]
        return (masked_mean(hs[1]) + masked_mean(hs[-1])) / 2
    if pooling == "cls":
        return outputs.last_hidden_state[:, 0]
    if pooling == "pooler":
        pooled = getattr(outputs, "pooler_output", None)
        if pooled is None:
            raise FAQSearchError("this model has no pooler output; choose another pooling: " + ", ".join(POOLINGS))
        return pooled
    if pooling == "last-token":
        # position of the last real token, whatever the padding side
        seq = mask.shape[1]
        last = seq - 1 - torch.argmax(mask.flip(dims=[1]).to(torch.int64), dim=1)
        return outputs.last_hidden_state[torch.arange(mask.shape[0]), last]
    raise ValueError(pooling)


def _tokens(hidden: np.ndarray, offsets, special, prefix: int) -> tuple[np.ndarray, np.ndarray]:
    """One text's token states (unit rows, float16) and spans, without special or prefix tokens."""
    keep = [j for j, ((s, e), sp) in enumerate(zip(offsets, special)) if not sp and e > s and s >= prefix]
    states = hidden[keep]
    states = states / np.maximum(np.linalg.norm(states, axis=1, keepdims=True), 1e-12)
    spans = np.array([(offsets[j][0] - prefix, offsets[j][1] - prefix) for j in keep], dtype=np.int32).reshape(-1, 2)
    return states.astype(np.float16), spans


class TransformerEncoder:
    """Sentence vectors from a transformers model (encoder or decoder-only)."""

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        pooling: str = "mean",
        max_length: int = 256,
        prefix: str = "",
        threads: int | None = None,
        gguf_file: str | None = None,
        local_only: bool = False,
        quantize: bool = False,
        device: str | None = None,
    ):
        """``device``: 'auto' (CUDA when torch sees a GPU), 'cpu' or 'cuda'; None: the process's
        choice (see :mod:`faqsearch.encoders.device`). ``quantize`` (int8) runs on the CPU only."""
        if pooling not in POOLINGS:
            raise FAQSearchError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
        import torch
        from transformers import AutoModel

        from .device import configure_torch, cpu_only, resolve_device

        configure_torch(threads)
        self.device = cpu_only("--quantize (int8 weights)", device) if quantize else resolve_device(device)
        self.dtype = "float32"
        self.source = model
        self.name = name or model
        self.pooling = pooling
        self.max_length = max_length
        self.prefix = prefix
        self.gguf_file = gguf_file
        from ..hub import load_pretrained

        self.tokenizer, self.model = load_pretrained(model, AutoModel, gguf_file=gguf_file, local_only=local_only)
        self.model.eval()
        self.max_length = fit_max_length(max_length, token_limit(self.model.config), self.name)
        self.quantize = "int8" if quantize else None
        if quantize:  # opt-in, lossy: dynamic int8 weights for every Linear layer (README, "Speed")
            import warnings

            from torch.ao.quantization import quantize_dynamic

            with warnings.catch_warnings():  # torch marks this API deprecated; it still works in 2.x
                warnings.simplefilter("ignore")
                self.model = quantize_dynamic(self.model, {torch.nn.Linear}, dtype=torch.qint8)
        if self.tokenizer.pad_token is None:  # decoder-only LMs often have none
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        self.dimension = int(self.model.config.hidden_size)
        self._lock = threading.Lock()  # fast tokenizers are not safe to call from several threads at once
        self.has_token_states = bool(getattr(self.tokenizer, "is_fast", False))  # token spans need a fast tokenizer
        if self.device == "cuda":
            from . import gpu

            self.dtype = gpu.to_gpu(self)  # half precision where it matches fp32 on the CPU

    def spec(self) -> dict[str, Any]:
        return {"backend": "transformers", "name": self.name, "source": self.source, "pooling": self.pooling,
                "max_length": self.max_length, "prefix": self.prefix, "dimension": self.dimension,
                "gguf_file": self.gguf_file, "quantize": self.quantize}

    def pool(self, outputs: Any, mask) -> "torch.Tensor":  # noqa: F821
        return _pool(self.pooling, outputs, mask)

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        texts = [self.prefix + t for t in texts]
        if self.device == "cuda":
            from . import gpu

            return gpu.encode(self, texts, batch_size, progress)
        return self.encode_on_cpu(texts, batch_size, progress)

    def token_states(self, texts: Sequence[str], batch_size: int = 32) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each text's last-layer token states (unit rows, float16) and their character spans in the
        text, special tokens and the prefix left out (token matching: :mod:`faqsearch.tokenmatch`)."""
        import torch

        if not self.has_token_states:
            raise FAQSearchError(f"{self.name} has no fast tokenizer: token spans are unknown")
        texts = list(texts)
        p = len(self.prefix)
        with self._lock:
            enc = self.tokenizer([self.prefix + t for t in texts], truncation=True, max_length=self.max_length,
                                 return_offsets_mapping=True, return_special_tokens_mask=True)
        keys = [k for k in enc.keys() if k not in ("offset_mapping", "special_tokens_mask")]
        out: list[tuple[np.ndarray, np.ndarray]] = []
        device = next(self.model.parameters()).device
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                idx = range(start, min(start + batch_size, len(texts)))
                with self._lock:
                    batch = self.tokenizer.pad([{k: enc[k][i] for k in keys} for i in idx], return_tensors="pt")
                hidden = self.model(**batch.to(device)).last_hidden_state.float().cpu().numpy()
                for r, i in enumerate(idx):
                    out.append(_tokens(hidden[r], enc["offset_mapping"][i], enc["special_tokens_mask"][i], p))
        return out

    def encode_with_tokens(self, texts: Sequence[str], batch_size: int = 32
                           ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """Sentence vectors and each text's token states and spans (as :meth:`token_states`): one
        forward pass on the CPU; on a GPU, the two calls (and :meth:`token_states`' error for a slow
        tokenizer, which gives no token spans)."""
        if self.device == "cuda" or not self.has_token_states:
            return self.encode(texts, batch_size=batch_size), self.token_states(texts, batch_size)
        states: list[tuple[np.ndarray, np.ndarray]] = []
        return self.encode_on_cpu([self.prefix + t for t in texts], batch_size, states=states), states

    def encode_on_cpu(self, texts: Sequence[str], batch_size: int = 32, progress: bool = False,
                      states: list[tuple[np.ndarray, np.ndarray]] | None = None) -> np.ndarray:
        """Vectors of ``texts`` (prefix added) with the model on the CPU; ``states``: a list filled
        with each text's token states and spans from the same pass (needs a fast tokenizer)."""
        import torch

        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        extra = {"return_offsets_mapping": True, "return_special_tokens_mask": True} if states is not None else {}
        with self._lock:
            enc = self.tokenizer(texts, truncation=True, max_length=self.max_length, **extra)
        ids = enc["input_ids"]
        order = np.argsort([len(x) for x in ids], kind="stable")[::-1]  # longest first: OOM shows up early
        keys = [k for k in enc.keys() if k not in ("offset_mapping", "special_tokens_mask")]
        want_hidden = self.pooling == "first-last-avg"
        if states is not None:
            states[:] = [None] * len(texts)
        with progress_bar(len(texts), progress, "encoding") as bar, torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                idx = order[start:start + batch_size]
                with self._lock:
                    batch = self.tokenizer.pad([{k: enc[k][i] for k in keys} for i in idx], return_tensors="pt")
                outputs = self.model(**batch, output_hidden_states=want_hidden)
                out[idx] = _pool(self.pooling, outputs, batch["attention_mask"]).float().numpy()
                if states is not None:
                    hidden = outputs.last_hidden_state.float().numpy()
                    for r, i in enumerate(idx.tolist()):
                        states[i] = _tokens(hidden[r], enc["offset_mapping"][i], enc["special_tokens_mask"][i],
                                            len(self.prefix))
                bar.update(len(idx))
        return out
