"""The confidence of an answer: the probability that it is the right FAQ for the query, from a small
logistic model each index learns about itself (:mod:`faqsearch.tuning.confidence` fits it; the
config's ``confidence`` section stores it), and the operating point at or above which `ask` answers.

Features of an answer in a ranked list (each a score the ranking already computed, nothing new to
encode): its cosine, its margin over the next answer in the ranking (fused score), its token match
(the cosine where the index has none), the cosine to its FAQ's prototype (:mod:`faqsearch.prototypes`:
how close the query is to what the FAQ's questions share; the cosine where there is none) and that
prototype cosine's margin over the best other FAQ's among the first POOL answers (a query the FAQ
does not cover often lies near one question of the nearest FAQ but no nearer its prototype than to
its neighbours'). Coefficients are kept non-negative, so the confidence rises with each piece of
evidence. Down a list the confidence never rises: each answer's is at most the one above it, and,
answers being mutually exclusive, at most 1 - the first one's. A model stores the features it was
fitted on (indexes made before the prototype features keep the first three).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .defaults import FUSION_POOL
from .errors import InvalidOptionError

FEATURES = ("cosine", "margin", "token", "prototype", "prototype_margin")
PROTOTYPE_FEATURES = ("prototype", "prototype_margin")  # need the index's prototypes at answer time
NO_NEXT_MARGIN = 0.0  # the last answer of a list has no next one: no evidence of a margin
POOL = FUSION_POOL  # the answers of a list whose prototypes an answer's prototype margin is taken over


def cosine_of(a) -> float:
    """An answer's cosine (of its best question): ``dense`` where set, else ``score``."""
    return float(a.dense if a.dense is not None else a.score)


def ranking_score(a) -> float:
    """The score a list is ranked by: the fused score in hybrid mode, else the cosine."""
    return float(a.fused) if a.fused is not None else cosine_of(a)


def prototype_of(a) -> float:
    """The cosine to the answer's FAQ prototype; its cosine where it has none (an index past
    PROTOTYPE_MAX_QUESTIONS, a lexical-only source)."""
    p = getattr(a, "prototype", None)
    return float(p) if p is not None and p == p else cosine_of(a)


def features(ranked: Sequence[Any]) -> np.ndarray:
    """One row of FEATURES per answer of a ranked list (answers with ``dense``, ``fused``, ``token``,
    ``prototype``); the prototype margin is taken over the first POOL answers, so the first answer's
    row is the same whatever the length of the list beyond them."""
    out = np.zeros((len(ranked), len(FEATURES)), np.float64)
    protos = np.array([prototype_of(a) for a in ranked[:POOL]], np.float64)
    for i, a in enumerate(ranked):
        cos, proto = cosine_of(a), prototype_of(a)
        nxt = ranking_score(ranked[i + 1]) if i + 1 < len(ranked) else None
        others = np.delete(protos, i) if i < len(protos) else protos
        out[i] = (cos, ranking_score(a) - nxt if nxt is not None else NO_NEXT_MARGIN,
                  float(a.token) if a.token is not None else cos, proto,
                  proto - float(others.max()) if len(others) else NO_NEXT_MARGIN)
    return out


def top_features(ranked: Sequence[Any]) -> np.ndarray:
    """FEATURES of the first answer of a ranked list (its margins over the rest of the list's first POOL)."""
    return features(ranked[:POOL])[0]


def check_probability(value: Any, what: str = "min_confidence") -> float | None:
    """``value`` as a confidence in [0, 1] (None stays None); anything else is an InvalidOptionError."""
    if value is None:
        return None
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)) or not 0.0 <= float(value) <= 1.0:
        raise InvalidOptionError(f"{what} is a probability between 0 and 1, got {value!r}")  # NaN fails the range too
    return float(value)


def check_lexical_options(mode: str | None, threshold: Any, min_confidence: Any) -> None:
    """A user's threshold or minimum confidence that would refuse something is refused in lexical mode
    rather than ignored: BM25 scores are no cosines and carry no confidence, and any match answers
    there (a threshold of -1 or a minimum confidence of 0, "answer anything", is no contradiction)."""
    def bars(value: Any, floor: float) -> bool:
        return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and float(value) > floor

    if mode == "lexical" and (bars(threshold, -1.0) or bars(min_confidence, 0.0)):
        raise InvalidOptionError("lexical mode answers with any BM25 match: it has no cosine or confidence for a "
                                 "threshold or a minimum confidence to apply to; use mode dense or hybrid")


NO_MODEL = ("none learned (too few right and wrong answers to learn from: an FAQ of one question needs one of three "
            "or more words, or other phrasings people approve; or an index built before faqsearch learned one): it "
            "answers by its cosine threshold")


def threshold_without_model(min_confidence: float) -> float:
    """The cosine threshold a minimum confidence means on an index without a confidence model: 0 ("answer
    anything") is -1; any other is refused rather than ignored, as in lexical mode."""
    if min_confidence > 0.0:
        raise InvalidOptionError(f"this index has no confidence for a minimum confidence to apply to ({NO_MODEL}); "
                                 "give a cosine threshold instead, or learn a confidence with `faqsearch tune "
                                 "threshold --self --apply`")
    return -1.0


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


@dataclass(frozen=True)
class ConfidenceModel:
    """P(right) = sigmoid(intercept + coef . the model's ``names`` among FEATURES); ``operating_point``:
    the confidence at or above which the first answer is given (``chosen_by`` says how it was set)."""

    coef: tuple[float, ...]
    intercept: float
    operating_point: float
    chosen_by: str = "self-calibrated"
    stats: dict[str, Any] = field(default_factory=dict, compare=False)  # how it was learned, for info
    names: tuple[str, ...] = FEATURES  # the features coef weighs, in order (a subset of FEATURES)

    def __post_init__(self):
        if len(self.coef) != len(self.names) or not set(self.names) <= set(FEATURES):
            raise ValueError(f"a confidence model weighs some of {FEATURES}: got {self.names} for {len(self.coef)} coefficients")

    @property
    def uses_prototypes(self) -> bool:
        """Whether answers need their prototype cosines for this model (a positive prototype coefficient)."""
        return any(c > 0 for n, c in zip(self.names, self.coef) if n in PROTOTYPE_FEATURES)

    def probability(self, rows: np.ndarray) -> np.ndarray:
        """P(right) of rows of all FEATURES (as :func:`features` makes them)."""
        cols = [FEATURES.index(n) for n in self.names]
        return sigmoid(np.asarray(rows, np.float64)[:, cols] @ np.asarray(self.coef) + self.intercept)

    def confidences(self, ranked: Sequence[Any], first: Sequence[Any] | None = None) -> list[float]:
        """The confidence of each answer of a ranked list, never rising down the list; the first
        answer's evidence is taken from ``first`` where given (the list before a search widened it)."""
        if not ranked:
            return []
        p = self.probability(features(ranked))
        if first:
            p[0] = self.probability(features(first[:POOL])[:1])[0]
        out = [float(p[0])]
        for v in p[1:]:
            out.append(min(out[-1], 1.0 - out[0], float(v)))
        return [round(v, 4) for v in out]

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(self.names), "coef": [float(c) for c in self.coef], "intercept": float(self.intercept),
                "operating_point": float(self.operating_point), "chosen_by": self.chosen_by, **self.stats}

    @classmethod
    def from_dict(cls, d: Any) -> "ConfidenceModel | None":
        """The model a config section describes; None where there is none or it is not usable (an index
        older than the confidence, a damaged section): the index then answers by its cosine threshold.
        Models of older versions name fewer features (the first three) and keep them."""
        names = d.get("features") if isinstance(d, dict) else None
        if not isinstance(names, list) or not names or len(set(map(str, names))) != len(names) \
                or not set(map(str, names)) <= set(FEATURES):
            return None
        try:
            coef = tuple(float(c) for c in d["coef"])
            intercept, op = float(d["intercept"]), float(d["operating_point"])
        except (KeyError, TypeError, ValueError):
            return None
        if len(coef) != len(names) or not all(math.isfinite(v) for v in (*coef, intercept, op)) \
                or not 0.0 <= op <= 1.0 or min(coef) < 0:
            return None
        stats = {k: v for k, v in d.items() if k not in ("features", "coef", "intercept", "operating_point", "chosen_by")}
        return cls(coef, intercept, op, str(d.get("chosen_by") or "self-calibrated"), stats, tuple(map(str, names)))


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float = 1e-2, iters: int = 50
                 ) -> tuple[np.ndarray, float]:
    """Weighted logistic regression (Newton steps, a small L2 penalty on the coefficients) whose
    coefficients are kept non-negative: a feature that comes out negative is dropped (its
    coefficient 0) and the rest refitted."""
    x, y, w = np.asarray(x, np.float64), np.asarray(y, np.float64), np.asarray(w, np.float64)
    active = list(range(x.shape[1]))
    while True:
        z = np.c_[x[:, active], np.ones(len(x))]
        b = np.zeros(z.shape[1])
        pen = l2 * np.r_[np.ones(len(active)), 0.0]
        for _ in range(iters):
            p = sigmoid(z @ b)
            grad = z.T @ (w * (p - y)) + pen * b
            hess = (z * (w * p * (1 - p))[:, None]).T @ z + np.diag(pen) + 1e-9 * np.eye(len(b))
            step = np.linalg.solve(hess, grad)
            b -= step
            if np.abs(step).max() < 1e-8:
                break
        negative = [active[i] for i in range(len(active)) if b[i] < 0]
        if not negative:
            coef = np.zeros(x.shape[1])
            coef[active] = b[:-1]
            return coef, float(b[-1])
        active = [i for i in active if i not in negative]
