"""CUDA inference for the torch encoder (:class:`~faqsearch.encoders.transformer.TransformerEncoder`).

- Precision: the first of fp16, bf16 (where the GPU has it) and fp32 whose vectors match fp32 on
  the CPU (cosine at least ``GPU_PARITY`` on every parity text, the texts of the ONNX check). fp16
  comes first: it keeps 10 mantissa bits to bf16's 7, so its vectors are the closer ones; bf16 serves
  a model whose activations overflow fp16. The check runs once per model, GPU and library versions;
  its verdict is kept in ``cache_dir('cuda')``.
- Batches: texts sorted by length (characters: known before tokenising) in batches of at least
  ``GPU_BATCH``, so little of a batch is padding and the GPU is never starved by small ones.
- Overlap: a background thread tokenises and pins the next batches (``PREFETCH``) while the GPU runs
  this one (the Rust tokenizer releases the GIL); host-to-device copies are asynchronous.
- Output: pooled in float32 on the GPU and copied back in blocks of up to ``BLOCK`` vectors; always
  float32 numpy, like every encoder.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np

from ..defaults import GPU_BATCH
from ..hub import cache_dir
from ..progress import progress_bar
from .base import PARITY_TEXTS

log = logging.getLogger(__name__)

GPU_PARITY = 0.999  # minimum cosine between GPU (half precision) and CPU (fp32) vectors, per text
BLOCK = 65_536  # vectors kept on the GPU before one copy back to the host (96 MiB at 384 dims)
FORMAT = 1  # bump when the check changes
PREFETCH = 2  # batches tokenised ahead of the GPU
TARGET = "cuda"  # the torch device (tests run the same pipeline with "cpu")


def gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name() if TARGET == "cuda" else TARGET


def precisions() -> list[str]:
    import torch

    out = ["float16"]
    if torch.cuda.is_bf16_supported():
        out.append("bfloat16")
    return out + ["float32"]


def _model_identity(enc) -> list[Any]:
    """The model's files (path, size, mtime) where it is a local directory, else its name."""
    source = enc.source
    if not os.path.isdir(source):
        return [source, enc.gguf_file]
    files = sorted(f for f in os.listdir(source) if os.path.isfile(os.path.join(source, f)))
    return [os.path.abspath(source), enc.gguf_file] + [
        f"{f}:{os.stat(os.path.join(source, f)).st_size}:{os.stat(os.path.join(source, f)).st_mtime_ns}" for f in files]


def check_key(enc) -> str:
    import torch
    import transformers

    h = hashlib.sha256(json.dumps([FORMAT, _model_identity(enc), enc.pooling, enc.max_length, torch.__version__,
                                   transformers.__version__, gpu_name()]).encode())
    return h.hexdigest()[:24]


def _read_verdict(key: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(cache_dir("cuda"), key + ".json"), encoding="utf-8") as f:
            verdict = json.load(f)
        return verdict if verdict.get("dtype") in precisions() else None
    except (OSError, ValueError):
        return None


def _write_verdict(key: str, verdict: dict[str, Any]) -> None:
    try:
        os.makedirs(cache_dir("cuda"), exist_ok=True)
        tmp = os.path.join(cache_dir("cuda"), f".{key}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(verdict, f, indent=1)
        os.replace(tmp, os.path.join(cache_dir("cuda"), key + ".json"))
    except OSError as exc:  # a read-only cache: the check runs again next time, nothing else changes
        log.info("GPU parity verdict not cached (%s)", exc)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)


def to_gpu(enc) -> str:
    """Move ``enc.model`` (fp32, on the CPU) to the GPU in the first precision that passes the
    parity check; returns its name ('float16', 'bfloat16' or 'float32')."""
    import torch

    key = check_key(enc)
    verdict = _read_verdict(key)
    if verdict is not None:
        enc.model = enc.model.to(device=TARGET, dtype=getattr(torch, verdict["dtype"]))
        return verdict["dtype"]
    cpu_model = enc.model
    ref = enc.encode_on_cpu(PARITY_TEXTS, batch_size=4)
    tried: dict[str, float] = {}
    for name in precisions():
        enc.model = copy.deepcopy(cpu_model).to(device=TARGET, dtype=getattr(torch, name))
        got = encode(enc, PARITY_TEXTS, batch_size=4, min_batch=4)  # mixed lengths in each batch
        tried[name] = float(np.nan_to_num(cosines(got, ref), nan=-1.0).min())
        if tried[name] >= GPU_PARITY or name == "float32":
            break
        log.info("GPU %s vectors of %s differ from fp32 on the CPU (min cosine %.6f < %s); trying the next precision",
                 name, enc.name, tried[name], GPU_PARITY)
    del cpu_model
    if tried[name] < GPU_PARITY:
        log.warning("GPU vectors of %s differ from the CPU's even in float32 (min cosine %.6f < %s)", enc.name,
                    tried[name], GPU_PARITY)
    _write_verdict(key, {"format": FORMAT, "model": enc.name, "dtype": name, "min_cosine": tried,
                         "gpu": gpu_name(), "torch": torch.__version__})
    return name


class _FloatOutputs:
    """A model's outputs seen in float32 (pooling sums many tokens: not in half precision)."""

    def __init__(self, outputs):
        self._o = outputs

    @functools.cached_property
    def last_hidden_state(self):
        return self._o.last_hidden_state.float()

    @property
    def hidden_states(self):
        hs = self._o.hidden_states
        return None if hs is None else _FloatSeq(hs)

    @property
    def pooler_output(self):
        p = getattr(self._o, "pooler_output", None)
        return None if p is None else p.float()


class _FloatSeq:
    def __init__(self, seq):
        self._seq = seq

    def __getitem__(self, i):
        return self._seq[i].float()

    def __len__(self) -> int:
        return len(self._seq)


def encode(enc, texts: Sequence[str], batch_size: int, progress: bool = False,
           min_batch: int = GPU_BATCH) -> np.ndarray:
    """Vectors of ``texts`` (prefix already added) with ``enc.model`` on the GPU, as float32 numpy;
    ``enc.pool(outputs, mask)`` pools them. Batches hold at least ``min_batch`` texts; where the GPU
    runs out of memory the batch is halved (and stays so for this encoder) and the call starts over."""
    import torch

    size = min(max(batch_size, min_batch), getattr(enc, "gpu_batch_limit", None) or 1 << 30)
    while True:
        try:
            return _encode(enc, texts, size, progress)
        except torch.cuda.OutOfMemoryError:
            if size == 1:
                raise
            torch.cuda.empty_cache()
            size = enc.gpu_batch_limit = size // 2
            log.warning("GPU out of memory: encoding %s in batches of %d texts", enc.name, size)


def _encode(enc, texts: Sequence[str], size: int, progress: bool) -> np.ndarray:
    import torch

    n = len(texts)
    out = np.empty((n, enc.dimension), dtype=np.float32)
    if not n:
        return out
    order = np.argsort(np.fromiter((len(t) for t in texts), dtype=np.int64, count=n), kind="stable")[::-1]
    batches = [order[s:s + size] for s in range(0, n, size)]
    want_hidden = enc.pooling == "first-last-avg"

    def tokenize(idx):
        with enc._lock:
            b = enc.tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=enc.max_length,
                              return_tensors="pt")
        return {k: v.pin_memory() for k, v in b.items()} if TARGET == "cuda" else dict(b)

    buf = torch.empty((min(n, max(BLOCK, size)), enc.dimension), dtype=torch.float32, device=TARGET)
    held: list[np.ndarray] = []
    filled = 0

    def flush() -> None:
        nonlocal filled
        if filled:
            out[np.concatenate(held)] = buf[:filled].cpu().numpy()  # one copy per block (waits for the GPU)
            held.clear()
            filled = 0

    with progress_bar(n, progress, "encoding") as bar, torch.inference_mode(), \
            ThreadPoolExecutor(1, thread_name_prefix="faqsearch-tokenize") as worker:
        pending = deque(worker.submit(tokenize, b) for b in batches[:PREFETCH])
        for i, idx in enumerate(batches):
            host = pending.popleft().result()
            if i + PREFETCH < len(batches):
                pending.append(worker.submit(tokenize, batches[i + PREFETCH]))  # while the GPU runs this batch
            batch = {k: v.to(TARGET, non_blocking=True) for k, v in host.items()}
            outputs = enc.model(**batch, output_hidden_states=want_hidden)
            vecs = enc.pool(_FloatOutputs(outputs), batch["attention_mask"])
            if filled + len(idx) > len(buf):
                flush()
            buf[filled:filled + len(idx)] = vecs
            held.append(idx)
            filled += len(idx)
            bar.update(len(idx))
        flush()
    return out
