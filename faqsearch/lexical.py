"""Tokenising for the lexical (FTS5 / BM25) side: words for Latin scripts, character n-grams for CJK."""
from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


CJK_MODES = ("unigram", "unigram+bigram")
# for new stores, by benchmarks/zh_lexical.py: unigrams alone score higher than unigrams + bigrams on
# zh-STS-B retrieval (MRR@10 83.09 vs 81.29) and sample_data zh (95.71 vs 94.44), and are faster
DEFAULT_CJK = "unigram"


def tokenize(text: str, cjk: str = "unigram+bigram") -> list[str]:
    """Lower-cased words; runs of CJK characters become character unigrams (plus bigrams with
    ``cjk='unigram+bigram'``).

    Chinese has no spaces, so a whole sentence would otherwise be one token; characters (and
    character pairs) give BM25 the overlap that word segmentation would, without a dictionary.
    """
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if not _CJK.search(word):
            out.append(word)
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
        rest = _CJK.sub(" ", word).split()
        out.extend(rest)
    return out


COMMON = 0.2  # query tokens found in more than this share of the questions are dropped
KEEP_MIN = 2  # ... unless that would leave fewer than this many tokens (the rarest are kept)


def fts_query(text: str, doc_freq: dict[str, int] | None = None, n_docs: int = 0,
              cjk: str = "unigram+bigram") -> str | None:
    """An FTS5 MATCH expression: tokens quoted (no operator injection) and OR-ed together.

    With document frequencies, tokens in more than COMMON of the questions are left out: BM25
    gives them little weight, yet they are what makes an OR query score most of the index.
    """
    tokens = sorted(set(tokenize(text, cjk)))
    if doc_freq is not None and n_docs > 0:
        tokens = [t for t in tokens if doc_freq.get(t, 0) > 0]  # unknown tokens match nothing anyway
        rare = [t for t in tokens if doc_freq[t] <= COMMON * n_docs]
        if len(rare) < KEEP_MIN:
            rare = sorted(tokens, key=lambda t: doc_freq[t])[:KEEP_MIN]
        tokens = sorted(rare)
    if not tokens:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)
