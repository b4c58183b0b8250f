"""Learn an index's confidence model (:mod:`faqsearch.confidence`) and its operating point without
labels, from a simulation over its own data, or from labelled queries (``tune``).

The simulation, all of it searched in the index's own mode and weights:

- **in scope**: held-out question variants (one question of each FAQ with several, searched against
  the other questions: :func:`faqsearch.tuning.fusion.variant_rounds`; a small FAQ holds out
  another question of each FAQ in further rounds, up to CONFIDENCE_ROUNDS, until CONFIDENCE_SAMPLE
  are found). Right when the first answer is its FAQ, a *confusion* when it is another FAQ.
- **in-domain out of scope**: the same variants searched with their FAQ left out, and the only
  question of FAQs that have one, searched against the index without it: the first answer is wrong
  by construction, as it is for a user's question the FAQ does not cover.
- **general out of scope**: the shipped general-domain questions (faqsearch/data/offtopic.txt).

Where fewer than CONFIDENCE_MIN_VARIANTS FAQs have several questions there are too few variants
to learn from: the positives are then each FAQ's first question with a third of its words dropped
(easier than real queries, so only the cosine is used), and the operating point is the confidence at
the cosine threshold chosen from the general negatives (:func:`faqsearch.tuning.threshold.calibrate`).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from ..confidence import FEATURES, POOL, ConfidenceModel, cosine_of, fit_logistic, sigmoid, top_features
from ..defaults import CONFIDENCE_MIN_VARIANTS, CONFIDENCE_MIX, CONFIDENCE_SINGLES, FUSION_POOL, UNKNOWN_SHARE
from ..search import fuse
from ..text import UNSPACED

Lists = list  # ranked answer lists (best first)
_UNSPACED = UNSPACED  # Chinese and Japanese, written without spaces (faqsearch.text)
_UNSPACED_RUN = re.compile(f"({_UNSPACED.pattern}+)")  # keeps the runs in re.split's result


@dataclass
class Simulation:
    """Feature rows (FEATURES of each list's first answer) of the simulation's kinds of query."""

    positives: np.ndarray  # in-scope queries (held-out variants, or pseudo-queries)
    right: np.ndarray  # 1 where the in-scope query's first answer is its FAQ
    in_domain: np.ndarray  # in-domain out of scope (leave-FAQ-out)
    general: np.ndarray  # general out of scope
    pseudo: bool = False  # the positives are word-dropout pseudo-queries (too few variants)
    general_best: np.ndarray | None = None  # each general question's best cosine (dense mode's best score)


def ranked_lists(searcher, texts: Sequence[str], leave_out: Sequence[str | None] | None = None,
                 best: list[float] | None = None) -> Lists:
    """Each text's ranked list as `ask` ranks it in the index's mode (hybrid: fused candidates; dense:
    cosine), without the FAQ named in ``leave_out`` (the index without that FAQ). ``best``: gets the
    best cosine of each text's candidates (its dense-mode best score: they hold its nearest FAQs)."""
    snap = searcher.snap
    texts = list(texts)
    out: Lists = []
    for start in range(0, len(texts), 64):
        block = texts[start:start + 64]
        vectors = searcher.vectors(block, tokens=snap.mode == "hybrid" and snap.token_weight > 0)
        pools = (searcher.candidates(block, vectors, FUSION_POOL) if snap.mode == "hybrid" else
                 searcher.dense(vectors, FUSION_POOL, widen=False))
        searcher.add_prototype_scores(vectors.full, pools, always=True)  # features, whether or not they rank
        for j, pool in enumerate(pools):
            gone = leave_out[start + j] if leave_out is not None else None
            if gone is not None:
                pool = [a for a in pool if a.faq_id != gone]
            if best is not None:
                best.append(max((a.dense for a in pool), default=-1.0))
            out.append(rank(snap, pool))
    return out


def rank(snap, candidates: Sequence[Any], k: int = POOL) -> list:
    """The first k of candidates in the index's ranking (fused in hybrid mode, else by cosine): by
    default the POOL answers a first answer's features are taken over, as `ask` takes them."""
    if snap.mode == "hybrid":
        return fuse(candidates, snap.hybrid_weight, k, snap.token_weight, snap.prototype_weight)
    return sorted(candidates, key=lambda a: -cosine_of(a))[:k]


def rows(lists: Lists) -> np.ndarray:
    """FEATURES of each non-empty list's first answer."""
    return np.array([top_features(lst) for lst in lists if lst], dtype=np.float64).reshape(-1, len(FEATURES))


def labelled_rows(lists: Lists, gold: Sequence[set[str]]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rows`, and 1 where the list's first answer is a gold FAQ (empty lists left out of both)."""
    right = np.array([lst[0].faq_id in g for lst, g in zip(lists, gold) if lst], dtype=np.float64)
    return rows(lists), right


def simulate(searcher, candidates: tuple[list, list] | None, offtopic: Sequence[str]) -> Simulation:
    """The simulation of the module docstring (``candidates``: the held-out variants' candidates,
    :func:`faqsearch.tuning.fusion.variant_rounds`, or None where there are too few)."""
    snap = searcher.snap
    cands, gold = candidates if candidates is not None else ([], [])
    pairs = [(c, g) for c, g in zip(cands, gold) if c]
    if pairs and snap.all_prototypes() is None:  # past PROTOTYPE_MAX_QUESTIONS `ask` has none: nor do they
        pairs = [([replace(a, prototype=None) for a in c], g) for c, g in pairs]
    positives, right = labelled_rows([rank(snap, c) for c, _ in pairs], [g for _, g in pairs])
    in_domain = [rank(snap, [a for a in c if a.faq_id not in g]) for c, g in pairs]
    qids, keys = snap.store.question_faqs()
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    rng = random.Random(0)
    singles = sorted(int(first[i]) for i in np.flatnonzero(counts == 1))
    singles = sorted(rng.sample(singles, min(len(singles), CONFIDENCE_SINGLES)))
    if singles:
        texts = snap.store.question_rows(qids[singles])
        in_domain += ranked_lists(searcher, [r[2] for r in texts], [r[1] for r in texts])
    general_best: list[float] = []
    general = ranked_lists(searcher, offtopic, best=general_best)
    pseudo = len(pairs) < CONFIDENCE_MIN_VARIANTS
    if pseudo:  # too few variants: each FAQ's first question with a third of its words dropped
        firsts = sorted(rng.sample(sorted(int(i) for i in first), min(len(first), CONFIDENCE_SINGLES)))
        made = [(r[1], dropped(r[2], rng)) for r in snap.store.question_rows(qids[firsts])]
        made = [(f, t) for f, t in made if t]
        positives, right = labelled_rows(ranked_lists(searcher, [t for _, t in made]), [{f} for f, _ in made])
    return Simulation(positives, right, rows(in_domain), rows(general), pseudo,
                      np.array([b for b, lst in zip(general_best, general) if lst], dtype=np.float64))


def dropped(text: str, rng: random.Random) -> str | None:
    """``text`` with about a third of its words dropped (None for texts of fewer than three words).
    Where it is written without spaces (Chinese, Japanese), a word is two characters of a run of
    them (Chinese words are mostly one or two characters), so a short Chinese question makes a
    pseudo-query as a short English one does; the text's own spaces are kept."""
    pieces = _pieces(text)
    if len(pieces) < 3:
        return None
    keep = [p for p in pieces if rng.random() > 1 / 3]
    if len(keep) < 2 or len(keep) == len(pieces):
        keep = pieces[:-1]
    return "".join((" " if spaced and i else "") + piece for i, (piece, spaced) in enumerate(keep))


def _pieces(text: str) -> list[tuple[str, bool]]:
    """The words of ``text``, each with whether a space came before it: split at spaces, and Chinese or
    Japanese runs cut into pieces of two characters, the punctuation next to a run kept with the
    piece before it (a word of spaced text stays whole, punctuation included)."""
    out: list[tuple[str, bool]] = []
    for word in text.split():
        parts = [p for p in _UNSPACED_RUN.split(word) if p]
        if len(parts) == 1 and not _UNSPACED.match(parts[0]):
            out.append((word, True))  # text without Chinese or Japanese: the word as it is
            continue
        first = True
        for part in parts:
            if _UNSPACED.match(part):
                for i in range(0, len(part), 2):
                    out.append((part[i:i + 2], first))
                    first = False
            elif not any(c.isalnum() for c in part) and not first:
                out[-1] = (out[-1][0] + part, out[-1][1])  # "银行？": punctuation is no word
            else:
                out.append((part, first))
                first = False
    return out


def fit(sim: Simulation, cosine_threshold: float | None = None, unknown_share: float = UNKNOWN_SHARE,
        chosen_by: str = "self-calibrated") -> ConfidenceModel:
    """The confidence model of a simulation (or of labelled queries in the same shape) and its operating
    point: the one that maximises the balanced score (in-scope answered right + out-of-scope refused)
    / 2, out of scope being general and in-domain queries in the proportion ``unknown_share``. With
    pseudo-queries (``sim.pseudo``) only the cosine is used, and the operating point is the
    confidence at ``cosine_threshold``."""
    parts = [(sim.positives, sim.right, CONFIDENCE_MIX[0]), (sim.in_domain, None, CONFIDENCE_MIX[1]),
             (sim.general, None, CONFIDENCE_MIX[2])]
    parts = [(x, y if y is not None else np.zeros(len(x)), share) for x, y, share in parts if len(x)]
    if not parts or not any(y.any() for _, y, _ in parts) or all(y.all() for _, y, _ in parts):
        raise ValueError("the confidence needs both right and wrong first answers to learn from")
    total = sum(share for _, _, share in parts)
    x = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    w = np.concatenate([np.full(len(p[0]), p[2] / total / len(p[0])) for p in parts]) * len(x)
    if sim.pseudo:
        x = x * (np.arange(len(FEATURES)) == 0)  # only the cosine: pseudo-queries are easier than real ones
    coef, intercept = fit_logistic(x, y, w)
    model = ConfidenceModel(tuple(float(c) for c in coef), intercept, 0.5, chosen_by)
    conf = {name: model.probability(p) if len(p) else np.zeros(0)
            for name, p in (("pos", sim.positives), ("in", sim.in_domain), ("gen", sim.general))}

    def balanced(t: float) -> float:
        right = float(np.mean((conf["pos"] >= t) * sim.right)) if len(sim.right) else 0.0
        refused = [(share, float(np.mean(conf[k] < t))) for k, share in (("gen", 1 - unknown_share), ("in", unknown_share))
                   if len(conf[k]) and share > 0]  # (labelled data hold no in-domain rows)
        out = sum(s * v for s, v in refused) / sum(s for s, _ in refused) if refused else 1.0
        return (right + out) / 2

    if sim.pseudo and cosine_threshold is not None:
        op = float(sigmoid(np.array([coef[0] * cosine_threshold + intercept]))[0])
        rule = "the confidence at the cosine threshold chosen from general out-of-scope questions (too few variants)"
    else:
        grid = np.round(np.arange(0.02, 0.981, 0.01), 2)
        scores = np.array([balanced(t) for t in grid])
        best = np.flatnonzero(scores >= scores.max() - 1e-12)
        op = float(np.median(grid[best]))  # the middle of the best run: as far as the data allow from both errors
        rule = (f"maximises the simulated balanced score (out of scope: {100 * (1 - unknown_share):.0f}% general, "
                f"{100 * unknown_share:.0f}% in-domain)" if len(sim.in_domain) else  # labels: no in-domain share
                "maximises the balanced score of the queries it was fitted on (out of scope: the questions given)")
    stats = {"rule": rule, "positives": int(len(sim.positives)), "right": int(sim.right.sum()),
             "in_domain": int(len(sim.in_domain)), "general": int(len(sim.general)), "pseudo": sim.pseudo,
             "simulated": {"balanced": round(100 * balanced(op), 2),
                           "right": round(100 * float(np.mean((conf["pos"] >= op) * sim.right)), 2) if len(sim.right) else None,
                           "in_domain_answered": round(100 * float(np.mean(conf["in"] >= op)), 2) if len(conf["in"]) else None,
                           "general_answered": round(100 * float(np.mean(conf["gen"] >= op)), 2) if len(conf["gen"]) else None}}
    return ConfidenceModel(model.coef, model.intercept, round(op, 4), chosen_by, stats)


def labelled(searcher, texts: Sequence[str], gold: Sequence[set[str]], offtopic: Sequence[str]) -> Simulation:
    """Labelled in-scope queries and out-of-scope ones in a simulation's shape (``tune``)."""
    positives, right = labelled_rows(ranked_lists(searcher, texts), gold)
    return Simulation(positives, right, np.zeros((0, len(FEATURES))), rows(ranked_lists(searcher, offtopic)))
