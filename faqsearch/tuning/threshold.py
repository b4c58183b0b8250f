"""The threshold below which `ask` gives no answer, chosen per index.

Without labels (at ingest, and again when edits have changed an index by a tenth): the positives are
the index's own held-out question variants that the index answers right (each searched against the
other questions, in the index's mode and weight); the negatives are general-domain questions that
no FAQ should cover, shipped with faqsearch (faqsearch/data/offtopic.txt, in the index's script). The
threshold is midway between the score 95% of the negatives stay under and the score 95% of the
positives reach; an index with fewer than ten FAQs of several questions has no positives, and takes
the score 99% of the negatives stay under. With labels (``tune threshold QUERIES``): in-scope queries with
gold FAQs and out-of-scope queries; the threshold maximises answered-right minus out-of-scope
answered. Scores are calibrated cosines (see :meth:`faqsearch.whitening.Whitening.full`), so the
same number means the same on every index of one encoder. Nothing here writes: the engine stores it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from ..confidence import ConfidenceModel, check_probability
from ..defaults import SELF_THRESHOLD_MIN, THRESHOLD_RANGE, UNKNOWN_SHARE
from ..errors import ChangedMeanwhileError, FAQSearchError, InvalidOptionError, StorageError, TooFewVariantsError
from ..evaluation import LabelledQuery, check_gold
from ..index.format import Config
from ..search import fuse
from ..text import non_latin_share
from . import confidence as conf
from .fusion import FusionReport, tune_fusion, variant_rounds
from .transform import default_offtopic

log = logging.getLogger(__name__)


@dataclass
class ThresholdReport:
    """A chosen threshold, how it was chosen, and the trade-off it was chosen from."""

    threshold: float
    chosen_by: str  # "self-calibrated" or "labelled"
    rule: str
    positives: int  # in-scope queries (held-out variants answered right, or labelled queries)
    negatives: int  # out-of-scope questions
    questions: int  # questions in the index when it was chosen
    rows: list[dict[str, float]] = field(default_factory=list)  # threshold -> answered-right, out-of-scope answered
    current: float | None = None
    applied: bool = False
    confidence: ConfidenceModel | None = None  # the confidence model learned with it (None where none could be)

    def section(self) -> dict[str, Any]:
        """What the index's config records (``calibration``)."""
        return {"chosen_by": self.chosen_by, "rule": self.rule, "positives": self.positives,
                "negatives": self.negatives, "questions": self.questions}

    def confidence_section(self) -> dict[str, Any] | None:
        """What the index's config records of the confidence learned with it (``confidence``), with the
        questions the index held then (a confidence beside a given threshold is refreshed on its own)."""
        return {**self.confidence.to_dict(), "questions": self.questions} if self.confidence is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "current": self.current, "applied": self.applied, **self.section(),
                "confidence": self.confidence_section(), "rows": self.rows}


def trade_off(right: np.ndarray, inscope: int, off: np.ndarray, grid: Sequence[float] | None = None
              ) -> list[dict[str, float]]:
    """Per threshold: the share of in-scope queries answered right and of out-of-scope ones answered
    (``right``: best scores of the queries answered right; ``inscope``: how many in-scope queries)."""
    grid = np.round(np.arange(0.30, 0.801, 0.05), 2) if grid is None else grid
    return [{"threshold": float(t), "answered_right": float(np.sum(right >= t) / max(inscope, 1)),
             "offtopic_answered": float(np.mean(off >= t)) if len(off) else 0.0} for t in grid]


def offtopic_for(searcher, offtopic: Sequence[str] | None = None) -> list[str]:
    """The shipped general-domain questions in the index's script (Latin or not)."""
    if offtopic is not None:
        return list(offtopic)
    store = searcher.snap.store
    ids, _ = store.question_faqs()
    non_latin = non_latin_share(r[2] for r in store.question_rows(ids[::max(1, len(ids) // 2000)])) > 0.5
    return [t for t in default_offtopic() if (non_latin_share([t]) > 0.5) == non_latin]


def best_scores(searcher, texts: Sequence[str], mode: str | None = None) -> np.ndarray:
    """The score of the best-ranked answer of each text, as `ask` ranks it (any threshold) in ``mode``
    (default: the index's)."""
    texts = list(texts)
    found = [r for start in range(0, len(texts), 32)  # blocks: each re-scores its candidates' raw vectors at once
             for r in searcher.answer(texts[start:start + 32], k=1, threshold=-1.0, mode=mode)]
    return np.array([r.best_score if r.best_score is not None else -1.0 for r in found], dtype=np.float64)


def calibrate(searcher, candidates: tuple[list, list] | None = None, offtopic: Sequence[str] | None = None
              ) -> ThresholdReport:
    """Choose the index's threshold without labels (see the module docstring).
    ``candidates``: :func:`variant_rounds`' result when the caller has it already."""
    snap = searcher.snap
    if snap.config.counts is not None and not int(snap.config.counts.questions or 0):
        raise TooFewVariantsError("the index holds no questions: nothing to choose a threshold on; add FAQs first "
                                  "(faqsearch add)")  # (numpy's IndexError on no scores)
    # with token matching, the negatives' best cosine (dense mode's best score) stands in for the cosine
    # of their fused first answer, which is at most that (bar a lexical-only candidate): it errs towards
    # not answering them
    tokens = snap.mode == "hybrid" and snap.token_weight > 0
    offtopic = offtopic_for(searcher, offtopic)
    if not offtopic:
        raise FAQSearchError("no out-of-scope questions to calibrate the threshold on")
    if candidates is None:
        try:
            candidates = variant_rounds(searcher)
        except TooFewVariantsError:
            candidates = ([], [])
    # the confidence's simulation asks the same out-of-scope questions: their scores come from it
    sim = conf.simulate(searcher, candidates, offtopic) if snap.mode != "lexical" else None
    off = (best_scores(searcher, offtopic) if sim is None else
           sim.general_best if tokens else sim.general[:, 0])
    weight = snap.hybrid_weight if snap.mode == "hybrid" else 0.0
    tops = [fuse(c, weight, 1, snap.token_weight if snap.mode == "hybrid" else 0.0, snap.prototype_weight)[0]
            for c in candidates[0] if c]
    right = np.array([a.dense for a, gold in zip(tops, candidates[1]) if a.faq_id in gold], dtype=np.float64)
    if len(right) >= SELF_THRESHOLD_MIN:
        t = (np.quantile(off, 0.95) + np.quantile(right, 0.05)) / 2
        rule = "midway between the 95th percentile of out-of-scope scores and the 5th of held-out variants answered right"
    else:
        t = np.quantile(off, 0.99)
        rule = "99th percentile of out-of-scope scores (too few FAQs with several questions for positives)"
    t = float(np.clip(t, *THRESHOLD_RANGE))
    return ThresholdReport(round(t, 4), "self-calibrated", rule, len(right), len(off), int(snap.config.counts.questions),
                           trade_off(right, len(tops), off), current=snap.threshold,
                           confidence=_confidence(searcher, lambda: sim, round(t, 4), "self-calibrated"))


def _confidence(searcher, simulation: Callable, threshold: float, chosen_by: str) -> ConfidenceModel | None:
    """The confidence model learned from ``simulation()`` (None in lexical mode, whose BM25 scores
    are no cosines, and where the data hold no right or no wrong first answer)."""
    if searcher.snap.mode == "lexical":
        return None
    try:
        share = searcher.snap.unknown_share if chosen_by == "self-calibrated" else UNKNOWN_SHARE  # labels: none in-domain
        return conf.fit(simulation(), threshold, unknown_share=share, chosen_by=chosen_by)
    except ValueError:
        return None


def tune_threshold(searcher, queries: Sequence[LabelledQuery], offtopic: Sequence[str]) -> ThresholdReport:
    """Choose the threshold from labelled in-scope queries and out-of-scope queries: the one that
    maximises (in-scope answered right) - (out-of-scope answered), midway within the best range."""
    if not queries or not offtopic:
        raise FAQSearchError("tuning the threshold needs labelled queries and out-of-scope queries (--offtopic)")
    check_gold(searcher.snap, queries)
    found = searcher.answer([q.text for q in queries], k=1, threshold=-1.0)
    right = np.array([r.best_score for r, q in zip(found, queries)
                      if r.nearest is not None and r.nearest.faq_id in q.gold], dtype=np.float64)
    off = best_scores(searcher, offtopic)
    cuts = np.unique(np.concatenate([right, off, [THRESHOLD_RANGE[0], THRESHOLD_RANGE[1]]]))
    cuts = cuts[(cuts >= THRESHOLD_RANGE[0]) & (cuts <= THRESHOLD_RANGE[1])]
    gain = np.array([np.sum(right >= t) / len(queries) - np.mean(off >= t) for t in cuts])
    best = np.flatnonzero(gain >= gain.max() - 1e-12)
    # the middle of the first best run of cut points: as far as the data allow from both kinds of error
    run_end, best_set = best[0], set(best.tolist())
    while run_end + 1 in best_set:
        run_end += 1
    lo, hi = cuts[best[0]], cuts[min(run_end + 1, len(cuts) - 1)]
    t = float((lo + hi) / 2) if hi > lo else float(lo)
    return ThresholdReport(round(t, 4), "labelled", "maximises in-scope answered right minus out-of-scope answered",
                           len(queries), len(off), int(searcher.snap.config.counts.questions),
                           trade_off(right, len(queries), off), current=searcher.snap.threshold,
                           confidence=_confidence(searcher, lambda: conf.labelled(searcher, [q.text for q in queries],
                                                                                  [q.gold for q in queries], offtopic),
                                                  round(t, 4), "labelled"))


def fusion_changes(report: FusionReport) -> dict[str, Any] | None:
    """The config changes that store a chosen hybrid weight (and mode), or None where it does not
    win held out (marks the report applied when it does)."""
    if not (report.gain > 0 and (report.chosen, report.token_weight, report.prototype_weight)
            != (report.current, report.current_token, report.current_prototype)):
        return None
    report.applied = True
    hybrid = report.chosen > 0 or report.token_weight > 0 or report.prototype_weight > 0
    return {"mode": "hybrid" if hybrid else "dense", "hybrid_weight": report.chosen,
            "token_weight": report.token_weight, "prototype_weight": report.prototype_weight,
            "fusion": {"chosen_by": report.chosen_by, "queries": report.n, "cv_current": report.cv_current,
                       "cv_tuned": report.cv_tuned,
                       **({"prototype": report.prototype} if report.prototype else {})}}


def threshold_changes(report: ThresholdReport) -> dict[str, Any]:
    """The config changes that store a chosen threshold and how it was chosen (marks the report applied)."""
    report.applied = True
    return {"threshold": report.threshold, "calibration": report.section(), "confidence": report.confidence_section()}


def confidence_from_labels(config: Config) -> bool:
    """Whether the index's confidence was learned from labelled queries (`tune threshold QUERIES`): what
    a person chose, which recalibrations keep."""
    return (config.confidence or {}).get("chosen_by", "self-calibrated") != "self-calibrated"


def self_tuned(snap, encoder, fusion: bool, threshold: bool) -> dict[str, Any]:
    """What a version not yet committed learns about itself without labels (see :func:`self_tune`),
    as config changes to commit with it (``faqsearch.build.build``'s ``calibrate``)."""
    from ..search import QueryEncoder, Searcher

    queries = QueryEncoder(lambda: encoder)
    changes: dict[str, Any] = {}
    # a threshold given at ingest stays (and decides); the confidence is learned all the same, to be shown;
    # one learned from labels stays with the threshold tuned with it (what a person chose stays)
    labelled = confidence_from_labels(snap.config)
    self_tune(lambda: Searcher(replace(snap, config=snap.config.merged(changes)), queries),
              (lambda r: changes.update(fusion_changes(r) or {})) if fusion and snap.mode == "hybrid" else None,
              (lambda r: changes.update(threshold_changes(r) if threshold else  # (a fit that failed keeps the model)
                                        {} if labelled or r.confidence is None else {"confidence": r.confidence_section()})))
    return changes


def chosen_again(snap, changes: dict[str, Any], encoder) -> dict[str, Any]:
    """``changes`` with what the index chose itself chosen again under them (new weights or a new share
    of unknowns move the fused scores or the operating point): the threshold where the index chose
    it, the confidence unless it was learned from labels (what a person chose stays)."""
    snap = replace(snap, config=snap.config.merged(changes))
    threshold = (snap.config.calibration or {}).get("chosen_by") == "self-calibrated"
    return {**changes, **self_tuned(snap, encoder, fusion=False, threshold=threshold)}


# how an index records that its ingest was told not to choose fusion weights (`--no-self-fusion`):
# `learn` then keeps the weights as they are, as it keeps weights tuned on labels
FUSION_GIVEN = "given at ingest (--no-self-fusion)"


def ingest_tuned(snap, encoder, fusion: bool, threshold: bool) -> dict[str, Any]:
    """What ingest commits with a new index: :func:`self_tuned`, and where ``fusion`` is off the
    record that the weights were not the index's to choose."""
    return {**self_tuned(snap, encoder, fusion, threshold), **({} if fusion else {"fusion": {"chosen_by": FUSION_GIVEN}})}


def min_confidence_changes(snap, value: float | None, unknowns: float | None, encoder: Callable[[], Any]
                           ) -> dict[str, Any]:
    """The config changes of `tune confidence`: the confidence ``value`` at which `ask` answers (None:
    the index's own operating point), and where ``unknowns`` is given, :func:`unknowns_changes`."""
    return {"min_confidence": check_probability(value),
            **(unknowns_changes(snap, encoder(), unknowns) if unknowns is not None else {})}


def unknowns_changes(snap, encoder, share: float) -> dict[str, Any]:
    """The config changes that make an index choose its operating point for out-of-scope questions of
    which ``share`` are in its own domain (questions its FAQs do not cover; the rest general): the
    share, stored so that later recalibrations keep it, and the confidence learned again from the
    index's own simulation (with the threshold, where the index chose that too)."""
    share = check_probability(share, "the share of in-domain unknown questions")
    if confidence_from_labels(snap.config):
        raise InvalidOptionError("this index's confidence was learned from labelled queries (tune threshold QUERIES), "
                                 "which hold no in-domain unknowns to weigh: rebuild it, or tune it again with labels")
    changes = chosen_again(snap, {"unknown_share": share}, encoder)
    if changes.get("confidence") is None:
        raise InvalidOptionError("this index has no confidence model to choose again (lexical mode, or too few "
                                 "right and wrong answers in its simulation)")
    if changes["confidence"].get("pseudo"):
        raise InvalidOptionError("fewer than 10 of this index's FAQs have several questions, so it answers at the "
                                 "confidence of its cosine threshold and has no in-domain unknowns to weigh: give FAQs "
                                 "more phrasings (approve, feedback), or set the confidence itself (tune confidence P)")
    return changes


def refit_calibration(writer, config: Config, threshold: float | None, encoder: Callable[[], Any]
                      ) -> Callable[[dict[str, Any], str], dict[str, Any]] | None:
    """What a refit (or tune --apply) commits with its new transform, for ``Backend.rebuild``: what the
    index chose itself chosen again on the version it built, measured before its one commit (scores
    move with the transform): the threshold and confidence, or beside a threshold given now or before,
    the confidence only. None where there is nothing of the index's own to choose (a threshold given
    and a confidence learned from labels, or none)."""
    own_threshold = threshold is None and (config.calibration or {}).get("chosen_by") == "self-calibrated"
    if not own_threshold and (not config.confidence or confidence_from_labels(config)):
        return None
    from ..build import measured

    return lambda new, version: measured(writer, new, version,
                                         lambda snap: self_tuned(snap, encoder(), fusion=False, threshold=own_threshold))


def self_tune(searcher: Callable[[], Any], set_fusion: Callable | None, set_threshold: Callable | None) -> None:
    """What an index learns about itself without labels, each stored by the given setter: the hybrid
    weight (kept where it wins held out), then the threshold. ``searcher()``: one over the latest version."""
    try:
        cands = variant_rounds(searcher())
    except TooFewVariantsError:
        cands = None
    if set_fusion is not None and cands is not None:
        before = ranking_of(searcher().snap)
        set_fusion(tune_fusion(searcher(), candidates=cands))
        if ranking_of(searcher().snap) != before:  # the simulation must rank and score as the index now
            cands = variant_rounds(searcher())  # answers (a token score where it matches none: a wrong feature)
    if set_threshold is not None:
        set_threshold(calibrate(searcher(), cands))


def ranking_of(snap) -> tuple:
    """What decides an index's ranked lists and their features: its mode and weights."""
    return snap.mode, snap.hybrid_weight, snap.token_weight, snap.prototype_weight


def recalibrated(encoder: Callable[[], Any]) -> Callable[[Any], dict[str, Any]]:
    """The config changes an edit that changed the index by a tenth commits next (:func:`needs_recalibration`),
    decided again on the snapshot they are committed on: a threshold given since the edit stays."""
    return lambda snap: self_tuned(snap, encoder(), fusion=False, threshold=needs_recalibration(
        snap.config, int(snap.config.counts.questions)) == "threshold")


def recalibrate_after_edit(set_config: Callable[..., None], config: Config, encoder: Callable[[], Any],
                           made_by: str) -> None:
    """After an edit that grew or shrank the index by a tenth, its threshold or confidence chosen again
    (``set_config(made_by, changes_of)``, a commit of its own). The edit is committed by then: a storage
    failure here (Milvus down, a full disk) or another writer's commit is a warning, not an error that
    reads as if the edit had failed; the next edit tries again."""
    if not needs_recalibration(config, int(config.counts.questions) if config.counts is not None else 0):
        return
    try:
        set_config("recalibrate", recalibrated(encoder))
    except (StorageError, ChangedMeanwhileError) as exc:
        log.warning("the %s is committed, but choosing the index's confidence again failed (%s); the next edit "
                    "tries again", made_by, exc)
    except KeyboardInterrupt:  # Ctrl-C read "Aborted!" as if the edit had not been made (a retry: "already there")
        raise KeyboardInterrupt(f"the {made_by} is committed; interrupted while the index chose its confidence again "
                                "(the next edit does it, or: faqsearch tune threshold --self --apply)") from None


def needs_recalibration(config: Config, questions: int) -> str | None:
    """What the index chose itself and chooses again now that it has grown or shrunk by a tenth since:
    "threshold" (a self-calibrated threshold, with its confidence), "confidence" (a confidence learned
    without labels beside a threshold a person gave), or None."""
    calib, conf = config.calibration or {}, config.confidence or {}
    if questions <= 0:  # an emptied index: nothing to learn from (an add chooses again)
        return None
    if calib.get("chosen_by") == "self-calibrated":
        what, since = "threshold", calib.get("questions")
    elif conf and not confidence_from_labels(config) and conf.get("questions") is not None:
        what, since = "confidence", conf.get("questions")  # (indexes made before it was recorded: not known)
    else:
        return None
    before = max(int(since or 0), 1)
    return what if abs(questions - before) >= 0.1 * before else None
