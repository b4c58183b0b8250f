"""Tokenising for the lexical (FTS5 / BM25) side: words for Latin scripts, character n-grams for CJK."""
from __future__ import annotations

import functools
import re
import threading
import unicodedata
from typing import Callable, Iterable, Sequence

import numpy as np

from .defaults import COMMON, KEEP_MIN

_WORD = re.compile(r"\w+", re.UNICODE)
# the scripts read a character at a time (kana, CJK ideographs with the compatibility block, Hangul), as
# a regular-expression class body: BM25, token matching and the paraphrase screen share it
CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK = re.compile(f"[{CJK_RANGES}]")
# full-width letters, digits and signs (ＡＰＰ, １２, as Chinese and Japanese text writes them) and the
# ideographic space, as their ASCII forms: 'ＡＰＰ' and 'APP' are one word
_ASCII_WIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
_FULL_WIDTH = re.compile("[\uff01-\uff5e]")


CJK_MODES = ("unigram", "unigram+bigram")  # defaults.CJK is what new stores use
STEMMERS = ("none", "english")  # a new store chooses by its first questions (choose_stemmer)
# frequent English function words: their share of a corpus's Latin words tells English text apart
_ENGLISH = frozenset("the a an is are was were be been do does did i me my you your we our us they their it its "
                     "how what when where why which who can could should would will to of in on for with from at by "
                     "this that and or not if".split())
# frequent function and question words of the Latin-script languages USE multilingual reads besides English
# (Spanish, French, German, Italian, Portuguese, Dutch, Polish, Turkish), none a common English word or
# abbreviation (os, el, la, mon, est, et, il, com... left out: "Mac OS", "El Paso", "Mon-Fri (EST)", ".com")
_OTHER_LATIN = frozenset("""
de las del que y en un una por con para es lo como mis su sus qué cómo dónde cuándo cuál quién puedo está
hay pero le les des du une dans pas je mes qui comment où quand puis votre vous nous sur avec der das und ist
ich mein meine nicht ein eine wie kann auf für dem des von zu wo wann warum bei sich sie ihr lo gli che è mio
mia dove quando posso sono della dos das não um uma meu minha onde em é het een en ik mijn niet hoe waar
wanneer kan voor zijn jak gdzie kiedy czy się jest bir ve bu nasıl nerede neden için ile ben benim nedir
yok mı mu mü
""".split())
_MARKED = re.compile("[\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f]")  # Latin letters with marks: é, ñ, ü, ß, ł, ş...
_STEM_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _snowball():
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=1 << 17)
def _english_stem(word: str) -> str:
    with _STEM_LOCK:  # a Snowball stemmer object keeps its word in itself: one thread at a time
        return _snowball().stemWord(word)


def _words(word: str, stem: str) -> list[str]:
    """A Latin-script word as the stored column holds it. Stemmed, it is first put in the form FTS5
    would store (accents of Latin letters removed, split at '_': :func:`fts_words`), so 'résumés',
    'resumes' and 'card_holders' stem as the words FTS5 would index; unstemmed, FTS5 does that."""
    if stem != "english":
        return [word]
    return [_english_stem(p) if p.isascii() and p.isalpha() else p for p in _fold(word).split("_") if p]


def stem_in_use(setting: str) -> str:
    """The stemming a store's 'stem' setting means for its rows and queries: 'auto' (a new store
    whose first questions have not come in yet) means none so far."""
    return "none" if setting == "auto" else setting


def _latin_words(texts: Iterable[str]) -> list[str]:
    """The lower-cased words of ``texts`` that are neither CJK nor digits (full-width letters read as ASCII)."""
    return [w for t in texts for w in _WORD.findall(t.translate(_ASCII_WIDTH).lower()) if not _CJK.search(w)
            and not w.isdigit()]


def choose_stemmer(texts: Iterable[str]) -> str:
    """'english' where at least 15% of the Latin words of ``texts`` are frequent English function
    words (English questions: 30-60%; French, Spanish or German ones: about none), else 'none'."""
    words = _latin_words(texts)
    return "english" if words and sum(w in _ENGLISH for w in words) >= 0.15 * len(words) else "none"


def latin_language(texts: Iterable[str]) -> str | None:
    """'other' where the Latin words of ``texts`` read as another language USE multilingual reads
    (Spanish, French, German, ...): at least two different function words of those languages, over twice
    as many as English ones and a tenth of the words, and besides them letters such as é, ñ or ü, or a
    quarter of the words (names and keywords alone are not enough: "Hotel de la Paz", "Mac OS X El
    Capitan", "Mon-Fri (EST)"); 'english' where at least 15% are English function words; else None."""
    words = _latin_words(texts)
    english = sum(w in _ENGLISH for w in words)
    found = [w for w in words if w in _OTHER_LATIN]
    marked = sum(bool(_MARKED.search(w)) for w in words)
    if len(set(found)) >= 2 and len(found) > 2 * english and len(found) >= 0.1 * len(words) and (
            marked >= max(1.0, 0.02 * len(words)) or len(found) >= max(3.0, 0.25 * len(words))):
        return "other"
    return "english" if words and english >= 0.15 * len(words) else None


def tokenize(text: str, cjk: str = "unigram+bigram", stem: str = "none", width: bool = True) -> list[str]:
    """Lower-cased words (with ``stem='english'``, ASCII words reduced to their Snowball English
    stem: 'cards' and 'card', 'arrival' and 'arrive' match); runs of CJK characters become character
    unigrams (plus bigrams with ``cjk='unigram+bigram'``); full-width letters and digits are read as
    their ASCII forms (``width``; indexes made before 2026-11-27 stored them as they were:
    :func:`former_width_tokens`).

    Chinese has no spaces, so a whole sentence would otherwise be one token; characters (and
    character pairs) give BM25 the overlap that word segmentation would, without a dictionary.
    """
    out: list[str] = []
    for word in _WORD.findall((text.translate(_ASCII_WIDTH) if width else text).lower()):
        if not _CJK.search(word):
            out.extend(_words(word, stem))
            continue
        run = ""
        for ch in word + " ":  # split mixed words into CJK runs and other runs
            if _CJK.match(ch):
                run += ch
                continue
            if run:
                out.extend(run)
                if cjk != "unigram":
                    out.extend(run[i:i + 2] for i in range(len(run) - 1))
                run = ""
        out.extend(p for w in _CJK.sub(" ", word).split() for p in _words(w, stem))
    return out


_LATIN = re.compile(r"[\u00c0-\u024f\u1e00-\u1eff]")


def _unaccented(ch: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", ch) if not unicodedata.combining(c))


def _fold(token: str) -> str:
    return "".join(_unaccented(c) if _LATIN.match(c) else c for c in token) if _LATIN.search(token) else token


def fts_words(text: str, cjk: str = "unigram+bigram", stem: str = "none", width: bool = True) -> list[str]:
    """The tokens of ``text`` in the form FTS5 stores them, in order: its unicode61 tokenizer (over
    the stored column, made by :func:`tokenize`) also splits at '_' and removes the accents of Latin
    letters ('café' is stored as 'cafe'; 'ø', 'ł', 'ß' stay)."""
    return [p for token in tokenize(text, cjk, stem, width) for p in _fold(token).split("_") if p]


def former_forms(text: str, cjk: str = "unigram+bigram", stem: str = "none") -> dict[str, list[str]]:
    """Each token of a full-width word of ``text`` in the form :func:`fts_words` gives it, with the
    tokens an index made before 2026-11-27 stored for that word instead: full-width words were kept
    as written, so never stemmed ('ＣＡＲＤＳ' is 'card' stemmed now, 'ｃａｒｄｓ' then). A query looks
    both up (:func:`former_width_tokens`), and token matching counts both in a word's document
    frequency. Empty where ``text`` has no full-width letter, digit or sign."""
    forms: dict[str, list[str]] = {}
    if not _FULL_WIDTH.search(text):
        return forms
    for word in _WORD.findall(text):
        if not _FULL_WIDTH.search(word):
            continue
        new, old = fts_words(word, cjk, stem), fts_words(word, cjk, stem, width=False)
        # one token for one where the word splits the same either way, else each with each
        pairs = zip(new, old) if len(new) == len(old) else ((n, o) for n in new for o in old)
        for n, o in pairs:
            if o != n and _FULL_WIDTH.search(o) and o not in forms.setdefault(n, []):
                forms[n].append(o)
    return forms


def former_width_tokens(text: str, cjk: str = "unigram+bigram", stem: str = "none") -> list[str]:
    """The tokens of the full-width words of ``text`` as an index made before 2026-11-27 stored them
    ('ＡＰＰ' as 'ａｐｐ', :func:`former_forms`): a query searches them too, so such an index still
    finds its full-width questions (a new one stores 'app', which the query's own tokens match)."""
    return sorted({o for olds in former_forms(text, cjk, stem).values() for o in olds})


def fts_tokens(text: str, cjk: str = "unigram+bigram", stem: str = "none") -> list[str]:
    """The distinct tokens of ``text`` as FTS5 stores them (:func:`fts_words`), sorted: the form in
    which a query token is looked up and matched."""
    return sorted(set(fts_words(text, cjk, stem)))


def query_tokens(text: str, cjk: str = "unigram+bigram", stem: str = "none") -> list[str]:
    """The distinct tokens a query looks up (:func:`fts_tokens`, and :func:`former_width_tokens`), sorted."""
    return sorted(set(fts_tokens(text, cjk, stem)) | set(former_width_tokens(text, cjk, stem)))


def query_terms(text: str, doc_freq: dict[str, int] | None = None, n_docs: int = 0,
                cjk: str = "unigram+bigram", stem: str = "none") -> list[str]:
    """The distinct tokens of ``text`` a lexical query searches for (:func:`query_tokens`), sorted.

    With document frequencies, tokens in more than COMMON of the questions are left out: BM25
    gives them little weight, yet they are what makes an OR query score most of the index.
    """
    tokens = query_tokens(text, cjk, stem)
    if doc_freq is not None and n_docs > 0:
        tokens = [t for t in tokens if doc_freq.get(t, 0) > 0]  # unknown tokens match nothing anyway
        rare = [t for t in tokens if doc_freq[t] <= COMMON * n_docs]
        if len(rare) < KEEP_MIN:
            rare = sorted(tokens, key=lambda t: doc_freq[t])[:KEEP_MIN]
        tokens = sorted(rare)
    return tokens


def fts_query(terms: Sequence[str]) -> str | None:
    """An FTS5 MATCH expression of ``terms`` (:func:`query_terms`): quoted (no operator injection),
    OR-ed together in the given order (the order in which bm25() adds them up)."""
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def topk(scores: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` highest scores, best first (a partial sort: the rest stay unsorted)."""
    n = min(n, len(scores))
    if n <= 0:
        return np.empty(0, np.int64)
    top = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
    return top[np.argsort(-scores[top], kind="stable")]


def bm25_scorer(doc_tokens: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75
                ) -> Callable[[Sequence[str]], np.ndarray]:
    """A BM25 scorer with FTS5's formula and defaults over the given documents: f(tokens) -> scores
    (for measuring fusion on held-out questions without building an FTS index)."""
    postings: dict[str, dict[int, int]] = {}
    lengths = np.array([len(t) for t in doc_tokens], dtype=np.float64)
    for d, toks in enumerate(doc_tokens):
        for t in toks:
            postings.setdefault(t, {}).setdefault(d, 0)
            postings[t][d] += 1
    n, avg = len(doc_tokens), max(lengths.mean() if len(lengths) else 1.0, 1e-9)
    norm = k1 * (1 - b + b * lengths / avg)
    weights: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # a token's documents and their BM25 terms, made once

    def term(t: str) -> tuple[np.ndarray, np.ndarray] | None:
        if t not in weights:
            p = postings.get(t)
            if not p:
                return None
            idf = max(np.log((n - len(p) + 0.5) / (len(p) + 0.5)), 1e-6)
            docs = np.fromiter(p.keys(), dtype=np.int64, count=len(p))
            tf = np.fromiter(p.values(), dtype=np.float64, count=len(p))
            weights[t] = docs, idf * tf * (k1 + 1) / (tf + norm[docs])
        return weights[t]

    def score(tokens: Sequence[str]) -> np.ndarray:
        out = np.zeros(n)
        for t in set(tokens):
            w = term(t)
            if w is not None:
                out[w[0]] += w[1]
        return out

    return score
