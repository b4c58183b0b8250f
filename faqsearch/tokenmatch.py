"""Token matching: the third signal of hybrid mode, between the sentence cosine and BM25.

Each query token's best cosine among the tokens of a candidate's question (the encoder's last-layer
token states, as in late-interaction retrieval: MaxSim), averaged over the query's tokens with the
IDF of the word each token belongs to (the store's BM25 document frequencies, so 'how', 'my' and
'the' count little). It sees that 'pets' and 'dog' are near where BM25 sees no overlap, and that a
query's rare word is missing where the sentence cosine averages it away. Measured in
docs/quality.md: it lifts hybrid mode above both dense and lexical on every set there, including
the two where BM25's weight alone could not serve both (one question per FAQ).

Token states come from encoders that pool the tokens' states into the sentence vector (mean,
last-avg, first-last-avg pooling): their token states are what the sentence vector averages.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from .lexical import _CJK, _WORD, former_forms, fts_words

TOKEN_POOLINGS = ("mean", "last-avg", "first-last-avg")


def supported(encoder_spec: dict[str, Any] | None) -> bool:
    """Whether an index's encoder gives token states that token matching may use."""
    spec = encoder_spec or {}
    return spec.get("backend") == "transformers" and spec.get("pooling") in TOKEN_POOLINGS


def gives_states(encoder: Any) -> bool:
    """Whether an encoder object gives token states (a transformers model with a slow tokenizer has
    no token spans: it gives none)."""
    return hasattr(encoder, "token_states") and bool(getattr(encoder, "has_token_states", True))


def word_tokens(text: str, spans: np.ndarray, stem: str) -> list[list[str]]:
    """For each encoder token (its character span in ``text``), the store's lexical tokens of the
    word it belongs to (for CJK, of the characters it covers); [] for punctuation."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    starts = np.array([w[0] for w in words], dtype=np.int64)
    out: list[list[str]] = []
    for s, e in np.asarray(spans).tolist():
        i = int(np.searchsorted(starts, s, side="right")) - 1
        if i < 0 or not words[i][0] <= s < words[i][1]:
            out.append([])
            continue
        piece = text[s:e] if _CJK.search(text[s:e]) else text[words[i][0]:words[i][1]]
        out.append(fts_words(piece, "unigram", stem))  # CJK unigrams are terms of either CJK setting
    return out


def idf(n: int, n_docs: int) -> float:
    """BM25's inverse document frequency, floored at 0 (a word in most questions tells nothing).
    ``n`` may count removed rows FTS5 still holds, so it can exceed the visible ``n_docs``."""
    return max(math.log((max(n_docs - n, 0) + 0.5) / (n + 0.5)), 0.0) if n_docs > 0 else 1.0


def weights(tokens: list[list[str]], doc_freq: dict[str, int], n_docs: int) -> np.ndarray:
    """Each encoder token's weight: the mean IDF of its word's lexical tokens (0 for punctuation).
    Uniform where no token carries weight (every word in most questions)."""
    w = np.array([float(np.mean([idf(doc_freq.get(t, 0), n_docs) for t in ts])) if ts else 0.0 for ts in tokens])
    if len(w) and w.sum() <= 0.0:
        w = np.ones(len(w))
    return w


def score(query: np.ndarray, query_weights: np.ndarray, question: np.ndarray) -> float:
    """Weighted mean over the query's tokens of the best cosine with a question's tokens (rows are
    unit vectors)."""
    if not len(query) or not len(question) or query_weights.sum() <= 0.0:
        return 0.0
    best = (query.astype(np.float32) @ question.astype(np.float32).T).max(axis=1)
    return float((best * query_weights).sum() / query_weights.sum())


def scores(query_text: str, query: tuple[np.ndarray, np.ndarray], questions: Sequence[np.ndarray],
           doc_freqs: Callable[[list[str]], tuple[dict[str, int], int]], stem: str) -> list[float]:
    """The token-match score of one query (its token states and spans) against each question's
    token states; ``doc_freqs(tokens)`` gives the store's document frequencies and row count."""
    states, spans = query
    tokens = word_tokens(query_text, spans, stem)
    keys = {t for ts in tokens for t in ts}
    # a full-width word ('ＣＡＲＤＳ') is looked up as now stored ('card'), and as an index made before
    # stored it ('ｃａｒｄｓ'); its document frequency counts both
    former = {t: olds for t, olds in former_forms(query_text, "unigram", stem).items() if t in keys}
    df, n_docs = doc_freqs(sorted(keys | {o for olds in former.values() for o in olds}))
    if former:
        df = {t: df.get(t, 0) + sum(df.get(o, 0) for o in former.get(t, ())) for t in keys}
    w = weights(tokens, df, n_docs)
    return [score(states, w, q) for q in questions]
