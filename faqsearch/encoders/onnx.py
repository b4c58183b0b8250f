"""ONNX Runtime for transformers encoders: exported once per model, checked, cached; no torch at query time.

``export()`` loads the model with transformers/torch, wraps it so that the graph returns the pooled
sentence vector (the same ``_pool`` as the torch encoder), exports it with dynamic batch and
sequence axes, and compares ONNX Runtime with torch on a fixed set of texts (padding, truncation,
several scripts). An export whose per-text cosine is below ``PARITY`` anywhere is recorded as failed
and never used. The cache entry (``cache_dir('onnx')/<key>``) holds model.onnx, tokenizer.json and
meta.json; the key covers the model files (path, size, mtime), pooling, max length and versions,
and meta.json records the SHA-256 of the weights it was exported from.

:class:`OnnxEncoder` needs only ``onnxruntime``, ``tokenizers`` and numpy.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from typing import Any, Sequence

import numpy as np

from ..files import as_umask_gives
from ..hub import cache_dir, file_digest
from ..index.format import MODEL_CONFIG
from ..progress import progress_bar
from .base import PARITY_TEXTS, fit_max_length, token_limit
from .device import configure_tokenizers, resolve_threads

log = logging.getLogger(__name__)

PARITY = 0.9999  # minimum cosine between torch and ONNX Runtime vectors, per text
FORMAT = 2  # bump when the export changes (2: token states as a second output)
POOLINGS = ("mean", "cls", "first-last-avg", "last-avg", "pooler")


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("tokenizers") is not None


def _weights(source: str) -> list[str]:
    names = sorted(f for f in os.listdir(source) if f.endswith((".safetensors", ".bin")) and "onnx" not in f)
    return [os.path.join(source, f) for f in names]


def cache_key(source: str, pooling: str, max_length: int) -> str | None:
    """Cheap identity of a local model directory (stat of its files) plus the export settings; None
    for a model that is not a local directory (hub ids are resolved to their cache folder first)."""
    if not os.path.isdir(source):
        return None
    files = sorted(f for f in os.listdir(source) if os.path.isfile(os.path.join(source, f)))
    h = hashlib.sha256()
    h.update(json.dumps([FORMAT, os.path.abspath(source), pooling, max_length]).encode())
    for f in files:
        st = os.stat(os.path.join(source, f))
        h.update(f"{f}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:24]


def entry(source: str, pooling: str, max_length: int) -> str | None:
    key = cache_key(source, pooling, max_length)
    return os.path.join(cache_dir("onnx"), key) if key else None


def read_meta(path: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(path, "meta.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def export(source: str, pooling: str, max_length: int, dest: str) -> dict[str, Any]:
    """Export, check parity and write the cache entry ``dest`` (atomically). Returns its meta; a
    failed parity check is recorded (``ok: false``) so that it is not retried on every load."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from ..progress import transformers_bars_off
    from .transformer import _pool

    with transformers_bars_off():
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
        model = AutoModel.from_pretrained(source, local_files_only=True, attn_implementation="eager").eval()
    if not getattr(tokenizer, "is_fast", False):
        raise RuntimeError("no fast tokenizer (tokenizer.json) to run without transformers")
    wants_types = "token_type_ids" in tokenizer.model_input_names
    hidden = pooling == "first-last-avg"

    class Pooled(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kw = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=hidden, **kw)
            return _pool(pooling, out, attention_mask), out.last_hidden_state

    wrapped = Pooled(model).eval()
    sample = tokenizer(["a short one", "a somewhat longer sentence to pad against"], padding=True,
                       return_tensors="pt")
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if wants_types else [])
    args = tuple(sample[n] for n in names)
    os.makedirs(cache_dir("onnx"), exist_ok=True)
    tmp = as_umask_gives(tempfile.mkdtemp(prefix=".tmp-", dir=cache_dir("onnx")))  # other users read the cache
    try:
        onnx_path = os.path.join(tmp, "model.onnx")
        import warnings

        with torch.inference_mode(), warnings.catch_warnings():  # tracer warnings about shapes: expected
            warnings.simplefilter("ignore")
            torch.onnx.export(wrapped, args, onnx_path, input_names=names, output_names=["sentence", "tokens"],
                              dynamic_axes={n: {0: "batch", 1: "sequence"} for n in names}
                              | {"sentence": {0: "batch"}, "tokens": {0: "batch", 1: "sequence"}},
                              opset_version=17, dynamo=False)
        tokenizer.backend_tokenizer.save(os.path.join(tmp, "tokenizer.json"))
        meta = {"format": FORMAT, "source": os.path.abspath(source), "pooling": pooling, "max_length": max_length,
                "inputs": names, "dimension": int(model.config.hidden_size),
                "weights_sha256": {os.path.basename(p): file_digest(p) for p in _weights(source)},
                "torch": torch.__version__}
        enc = OnnxEncoder(tmp, meta=meta)
        texts = PARITY_TEXTS
        with torch.inference_mode():
            batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            ref = _pool(pooling, model(**batch, output_hidden_states=hidden), batch["attention_mask"]).numpy()
        got = np.concatenate([enc.encode(texts, batch_size=4), enc.encode(texts[:1], batch_size=1)])
        ref = np.concatenate([ref, ref[:1]])
        cos = (got * ref).sum(1) / np.maximum(np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1), 1e-12)
        meta["parity_min_cosine"] = float(cos.min())
        meta["ok"] = bool(cos.min() >= PARITY)
        with open(os.path.join(tmp, "meta.json"), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)
        if os.path.exists(dest):
            shutil.rmtree(dest, ignore_errors=True)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not meta["ok"]:
        log.warning("ONNX export of %s differs from torch (min cosine %.6f < %s); using torch", source,
                    meta["parity_min_cosine"], PARITY)
    return meta


class OnnxEncoder:
    """Sentence vectors from an exported model with ONNX Runtime (tokenizers for the text)."""

    def __init__(self, path: str, *, meta: dict[str, Any] | None = None, name: str | None = None,
                 prefix: str = "", threads: int | None = None, spec_extra: dict[str, Any] | None = None):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.meta = meta or read_meta(path) or {}
        self.path = path
        self.name = name or self.meta.get("source", path)
        self.source = self.meta.get("source", path)
        self.pooling = self.meta["pooling"]
        self.max_length = int(self.meta["max_length"])
        self.prefix = prefix
        self.dimension = int(self.meta["dimension"])
        self._inputs = list(self.meta["inputs"])
        self._spec_extra = dict(spec_extra or {})
        configure_tokenizers(threads)
        self.tokenizer = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_length)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = resolve_threads(threads)  # every core we may use (ORT: physical cores)
        opts.inter_op_num_threads = 1  # one graph at a time: intra-op threads are all the parallelism
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(os.path.join(path, "model.onnx"), opts, providers=["CPUExecutionProvider"])
        self._lock = threading.Lock()
        self._pad = int(self.tokenizer.token_to_id("[PAD]") or 0)

    def spec(self) -> dict[str, Any]:
        return {"backend": "transformers", "name": self.name, "source": self.source, "pooling": self.pooling,
                "max_length": self.max_length, "prefix": self.prefix, "dimension": self.dimension,
                "gguf_file": None, "quantize": None, **self._spec_extra, "runtime": "onnx"}

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        return self._run(texts, batch_size, progress, tokens=False)[0]

    def encode_with_tokens(self, texts: Sequence[str], batch_size: int = 32
                           ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """Sentence vectors and each text's token states and spans (as :meth:`token_states`) from
        one run of the graph: its two outputs."""
        return self._run(texts, batch_size, False, tokens=True)

    def _run(self, texts: Sequence[str], batch_size: int, progress: bool, tokens: bool
             ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        from .transformer import _tokens

        texts = [self.prefix + t for t in texts]
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        states: list[tuple[np.ndarray, np.ndarray]] = [None] * len(texts) if tokens else []  # type: ignore[list-item]
        if not texts:
            return out, states
        with self._lock:
            encs = self.tokenizer.encode_batch(texts)
        lengths = np.array([len(e.ids) for e in encs])
        order = np.argsort(lengths, kind="stable")[::-1]
        outputs = ["sentence", "tokens"] if tokens else ["sentence"]
        with progress_bar(len(texts), progress, "encoding") as bar:
            for start in range(0, len(texts), batch_size):
                idx = order[start:start + batch_size]
                width = int(lengths[idx].max())
                ids = np.full((len(idx), width), self._pad, dtype=np.int64)
                mask = np.zeros((len(idx), width), dtype=np.int64)
                types = np.zeros((len(idx), width), dtype=np.int64)
                for r, i in enumerate(idx):
                    e = encs[i]
                    n = len(e.ids)
                    ids[r, :n], mask[r, :n], types[r, :n] = e.ids, e.attention_mask, e.type_ids
                feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
                got = self.session.run(outputs, {k: feed[k] for k in self._inputs})
                out[idx] = got[0]
                if tokens:
                    for r, i in enumerate(idx.tolist()):
                        states[i] = _tokens(got[1][r], encs[i].offsets, encs[i].special_tokens_mask, len(self.prefix))
                bar.update(len(idx))
        return out, states

    def token_states(self, texts: Sequence[str], batch_size: int = 32) -> list[tuple[np.ndarray, np.ndarray]]:
        """As :meth:`faqsearch.encoders.transformer.TransformerEncoder.token_states` (the graph's
        second output, from the run that also gives the sentence vectors)."""
        return self._run(texts, batch_size, False, tokens=True)[1]


def load(source: str, pooling: str, max_length: int, *, name: str | None = None, prefix: str = "",
         threads: int | None = None, export_if_missing: bool = True) -> OnnxEncoder | None:
    """The ONNX encoder for a local model directory: from the cache, else exported now (needs torch);
    None when ONNX cannot serve it (not a local directory, pooling without ONNX support, failed
    parity, export error)."""
    if pooling not in POOLINGS or not available():
        return None
    config = os.path.join(source, MODEL_CONFIG)
    if os.path.isfile(config):
        with open(config, encoding="utf-8") as fh:
            max_length = fit_max_length(max_length, token_limit(json.load(fh)), name or source)
    dest = entry(source, pooling, max_length)
    if dest is None:
        return None
    meta = read_meta(dest)
    if meta is None and export_if_missing:
        try:
            meta = export(source, pooling, max_length, dest)
        except Exception as exc:  # an exporter limitation is no reason to fail: torch serves the model
            log.warning("ONNX export of %s failed (%s: %s); using torch", source, type(exc).__name__, exc)
            return None
    if not meta or not meta.get("ok"):
        return None
    return OnnxEncoder(dest, meta=meta, name=name, prefix=prefix, threads=threads)
