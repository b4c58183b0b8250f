"""``faqsearch learn``: the index's encoder fine-tuned on the index's own question groups (the
questions each FAQ was written with, and those people assigned to it: approvals, feedback,
generated ones kept), committed only where it wins held out.

1. **Hold out** one question of each FAQ that has two or more: the variants the index's self-tuning
   holds out (:func:`faqsearch.tuning.transform.held_out_variants`, seed 0), so they are never
   trained on and the new version's weights, threshold and confidence are chosen on unseen ones.
2. **Train** (:func:`faqsearch.finetune.train_encoder`; one pair per FAQ in each batch, so every
   in-batch negative is another FAQ) from the index's base encoder on the pairs of the other
   questions, and on the index's traffic: logged queries it answers at a high confidence, each
   paired with a question of its answer's FAQ (self-training, :func:`logged_pairs`), stopping early
   where the time budget requires.
3. **Encode every question again**, fit the transform again at the index's setting
   (``Backend.reencode``), and let the new version choose its weights, threshold and confidence as
   ingest does (:func:`faqsearch.tuning.threshold.self_tuned`).
4. **Decide**: both versions rank the held-out questions (each searched against the other
   questions, :func:`faqsearch.tuning.fusion.self_fusion_candidates`), each in the mode it answers
   in; the new version is committed only where its R@1 is higher, or equal with a higher MRR@10.
   Otherwise nothing changes and the trained encoder is deleted.

The encoder is kept in the index directory (``encoders/NAME``, shared by the versions that use it;
encoders no kept version names are deleted by the next learn), loaded like any local model
(ONNX Runtime where it passes the parity check). Learning again starts from the same base encoder
on the questions the index holds then.
"""
from __future__ import annotations

import math
import os
import random
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from ..defaults import (LEARN_BATCH, LEARN_EPOCHS, LEARN_LOG_CONFIDENCE, LEARN_LOG_PER_FAQ, LEARN_LOG_QUERIES,
                        LEARN_LR, LEARN_MIN_FAQS, LEARN_MINUTES, SELF_FUSION_MAX, SELF_TOKEN_MAX)
from ..errors import FAQSearchError, InvalidOptionError, TooFewVariantsError
from ..encoders import PACKAGED
from ..index.format import ENCODERS
from ..evaluation import ranking_metrics
from .confidence import rank
from .fusion import self_fusion_candidates
from .training import base_model
from .transform import held_out_variants, refit_config

ENCODE_RATE = 100.0  # questions a second assumed at most for the second encoding, when the budget is split
RATE_SAMPLE = 64  # questions timed to know the rate where an index has more than RATE_FROM (mpnet: about 20 a second)
RATE_FROM = 500
RESERVE_S = 60.0  # seconds kept for loading the new encoder, choosing its weights and measuring
MIN_TRAIN_S = 10.0  # training seconds a budget must leave (defaults.LEARN_MIN_MINUTES: the reserve and these)
LOG_SHARE = 0.25  # of the training time, what asking the logged queries again may take at most
TRAINING = ".training-"  # encoders/.training-*: an encoder being trained (outside the writer lock)


@dataclass
class LearnReport:
    """What a learn run did: ``kept`` (committed) or not and why, the held-out figures of both
    versions, what it trained on and how long each step took."""

    kept: bool
    reason: str
    before: dict[str, Any]
    after: dict[str, Any] | None = None
    held_out: int = 0
    pairs: int = 0
    logged: int = 0  # of the pairs, logged queries the index answered confidently (self-training)
    loss: list[float] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    encoder: str | None = None
    base: str | None = None
    version: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _NotBetter(Exception):
    """Raised inside the writer to leave the index as it was (the new version is removed)."""


def trainable_base(spec: dict[str, Any]) -> tuple[str, str]:
    """(name, checkpoint) of the encoder learn starts from: the index's own, or the one a learned
    encoder started from. Refused for encoders with no trainable torch model here."""
    if spec.get("backend") == "use":
        raise InvalidOptionError("learn fine-tunes a transformers encoder; USE multilingual runs on numpy here and "
                                 "has no trainable model (an index of it keeps its encoder as it is)")
    if spec.get("gguf_file"):
        raise InvalidOptionError(f"learn cannot train the GGUF model {spec.get('name')!r}; ingest with a transformers "
                                 "encoder (such as --model minilm) to learn")
    if (spec.get("pooling") or "mean") != "mean":
        raise InvalidOptionError(f"learn trains mean-pooled encoders; this index pools with {spec.get('pooling')!r}")
    name = spec.get("base") or spec["name"]
    return name, base_model(name) if name in PACKAGED else (spec.get("base_source") or spec.get("source") or name)


def held_out_score(searcher, limit: int, trained: set[str] = frozenset()) -> dict[str, Any]:
    """R@1 and MRR@10 (percent) of the held-out questions, ranked in the searcher's mode; questions
    in ``trained`` are left out (an edit during training may have drawn them)."""
    snap = searcher.snap
    texts: list[str] = []
    cands, gold = self_fusion_candidates(searcher, limit=limit, texts=texts)
    kept = [(c, g) for c, g, text in zip(cands, gold, texts) if text not in trained]
    got = ranking_metrics([[a.faq_id for a in rank(snap, c, 10)] for c, _ in kept], [g for _, g in kept]) if kept \
        else {"recall@1": 0.0, "mrr@10": 0.0}
    return {"r1": round(100 * got["recall@1"], 2), "mrr10": round(100 * got["mrr@10"], 2), "queries": len(kept),
            "mode": snap.mode, "hybrid_weight": snap.hybrid_weight, "token_weight": snap.token_weight,
            "prototype_weight": snap.prototype_weight}


def gain(before: dict[str, Any], after: dict[str, Any], digits: int = 2) -> str:
    """The held-out change in words (a report's, or the one an index's config records)."""
    return (f"held-out R@1 {before['r1']:.{digits}f} -> {after['r1']:.{digits}f}, MRR@10 {before['mrr10']:.{digits}f} "
            f"-> {after['mrr10']:.{digits}f} on {after['queries']} questions")


def wins(after: dict[str, Any], before: dict[str, Any]) -> bool:
    """R@1 higher, or equal with a higher MRR@10."""
    return (after["r1"], after["mrr10"]) > (before["r1"], before["mrr10"])


@dataclass
class Questions:
    """The index's questions as learn splits them: ``pairs`` of those not held out (each both ways: a
    batch holds one of them), each FAQ's ``groups`` of them and its group number in the pairs
    (``index_of``), and the texts held out (``n_held`` questions) or stored."""

    pairs: list[tuple[str, str, int]]
    groups: dict[str, list[str]]
    index_of: dict[str, int]
    held: set[str]
    stored: set[str]
    n_held: int


def question_pairs(snap, seed: int = 0) -> Questions:
    """:class:`Questions` of ``snap``. Refused where too few FAQs are left to learn from or measure on."""
    from ..finetune import group_pairs

    qids, keys = snap.store.question_faqs()
    held = held_out_variants(keys, 0)
    rows = snap.store.question_rows(qids)  # by id, as qids
    if len(rows) != len(qids):
        raise FAQSearchError(f"index {snap.path}: its questions changed while they were read; run learn again")
    out = np.ones(len(rows), bool)
    out[held] = False
    groups: dict[str, list[str]] = {}
    for keep, (_, faq_id, text) in zip(out, rows):
        if keep:
            groups.setdefault(faq_id, []).append(text)
    trainable = [f for f, g in groups.items() if len(set(g)) >= 2]
    if len(held) < LEARN_MIN_FAQS or len(trainable) < LEARN_MIN_FAQS:
        raise TooFewVariantsError(
            f"only {len(trainable)} FAQs have three or more questions: learn holds one question of each FAQ out to "
            f"measure on and trains on the others, and needs {LEARN_MIN_FAQS} such FAQs. Give FAQs more phrasings "
            "first (faqsearch approve, feedback, augment), or keep the encoder")
    pairs = group_pairs([groups[f] for f in trainable], seed=seed)
    chosen = set(trainable)
    return Questions([p for a, b, g in pairs for p in ((a, b, g), (b, a, g))], groups,
                     {f: i for i, f in enumerate([*trainable, *(f for f in groups if f not in chosen)])},
                     {rows[i][2] for i in held}, {r[2] for r in rows}, len(held))


def training_pairs(snap, seed: int = 0, encoder: Callable[[], Any] | None = None, deadline: float | None = None
                   ) -> tuple[list[tuple[str, str, int]], int, int]:
    """All learn trains on: the pairs of :func:`question_pairs`, and where ``encoder()`` gives the
    index's encoder, those of :func:`logged_pairs`; with how many questions are held out and how many
    logged queries joined."""
    questions = question_pairs(snap, seed)
    logged = logged_pairs(snap, encoder, questions, seed, deadline) if encoder is not None else []
    return questions.pairs + logged, questions.n_held, len(logged)


def logged_pairs(snap, encoder: Callable[[], Any], questions: Questions, seed: int = 0,
                 deadline: float | None = None) -> list[tuple[str, str, int]]:
    """Self-training on the index's traffic: the distinct logged queries no person assigned (the most
    recent LEARN_LOG_QUERIES), asked of the index as it is now; each it answers at a confidence of
    LEARN_LOG_CONFIDENCE or more (at most LEARN_LOG_PER_FAQ per FAQ, the most confident) is paired
    with a question of that FAQ not held out. A query answered through a held-out question is left
    out: it would carry that question into training and flatter the held-out measure. None without a
    log, or where the index has no confidence; asking stops at ``deadline`` (time.monotonic())."""
    from ..querylog import QueryLog, log_path
    from ..search import QueryEncoder, Searcher

    if snap.confidence is None or not os.path.exists(log_path(snap.path)):
        return []
    qlog = QueryLog.open_or_none(snap.path)
    if qlog is None:
        return []
    try:
        texts = [t for t in qlog.distinct_unassigned(LEARN_LOG_QUERIES, snap.store) if t not in questions.stored]
    finally:
        qlog.close()
    found = []
    searcher = Searcher(snap, QueryEncoder(encoder))
    for start in range(0, len(texts), 256):
        if deadline is not None and time.monotonic() >= deadline:
            break
        for text, r in zip(texts[start:start + 256], searcher.answer(texts[start:start + 256], k=1, min_confidence=0.0)):
            top = r.answers[0] if r.answers else None
            if top is not None and top.confidence is not None and top.confidence >= LEARN_LOG_CONFIDENCE \
                    and top.faq_id in questions.groups and top.question not in questions.held:
                found.append((top.confidence, text, top.faq_id))
    rng, per, out = random.Random(seed), Counter(), []
    for _, text, faq_id in sorted(found, key=lambda x: -x[0]):
        if per[faq_id] < LEARN_LOG_PER_FAQ:
            per[faq_id] += 1
            out.append((text, rng.choice(questions.groups[faq_id]), questions.index_of[faq_id]))
    return out


def unused_encoders(path: str, stale_s: float = 24 * 3600) -> list[str]:
    """Folders under ``path``/encoders that no version of the index names, and trainings (``.training-*``)
    left by runs killed over ``stale_s`` ago (none where a version's config cannot be read: then
    nothing is known to be unused). Called under the writer lock."""
    from ..index.versions import version_configs

    folder = os.path.join(path, ENCODERS)
    if not os.path.isdir(folder):
        return []
    named = set()
    for _, config in version_configs(path):
        if config is None:
            return []
        stored = (config.encoder_spec or {}).get("stored")
        if stored:
            named.add(os.path.basename(stored))
    now = time.time()
    return [os.path.join(folder, e) for e in sorted(os.listdir(folder))
            if (not e.startswith(TRAINING) and e not in named)
            or (e.startswith(TRAINING) and now - os.path.getmtime(os.path.join(folder, e)) > stale_s)]


def learn(snap, writing: Callable[[], Any], encoder: Callable[[], Any], **options: Any) -> LearnReport:
    """:func:`_learn`, where a full disk or a folder it may not write to is a StorageError (one line, HTTP
    503) as for every other write: the encoder is trained and saved beside the index before the writer
    lock, outside the writer's own mapping of these failures."""
    from ..files import storage_error

    try:
        return _learn(snap, writing, encoder, **options)
    except Exception as exc:  # noqa: BLE001 - mapped where it is a storage failure, raised as it is otherwise
        mapped = storage_error(exc, snap.path)
        if mapped is None:
            raise
        raise mapped from None


def _learn(snap, writing: Callable[[], Any], encoder: Callable[[], Any], *, minutes: float = LEARN_MINUTES,
           epochs: int = LEARN_EPOCHS, seed: int = 0, threads: int | None = None,
           progress: bool = False, from_log: bool = True) -> LearnReport:
    """The run of the module docstring. Training reads ``snap`` without the writer lock (edits go on
    meanwhile); ``writing()``: the context manager of the writer lock, giving (writer, the latest
    snapshot), under which the new version is made and committed where it wins. ``encoder()``: the
    index's current encoder (that of the latest snapshot)."""
    from ..encoders import load_encoder
    from ..finetune import EncoderTrainConfig, train_encoder
    from ..index.address import remote_of

    start = time.monotonic()
    if not isinstance(minutes, (int, float)) or isinstance(minutes, bool) or not minutes > 0:
        raise InvalidOptionError(f"the time budget (minutes) must be more than 0; got {minutes!r}")
    if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1:
        raise InvalidOptionError(f"epochs must be a whole number of passes, 1 or more; got {epochs!r}")
    if remote_of(snap.path) is not None:
        raise InvalidOptionError("learn keeps the encoder in the index directory, which the other machines of an "
                                 "index in Milvus do not share; learn on an index of its own (ingest --index NAME)")
    questions = question_pairs(snap, seed)  # refused here, before anything is written
    pairs = questions.pairs
    spec = snap.config.encoder_spec or {}
    base_name, base = trainable_base(spec)
    n_questions = int(snap.config.counts.questions) if snap.config.counts is not None else 0
    encode_s = n_questions / encode_rate(encoder, questions, n_questions)
    train_s = minutes * 60 - RESERVE_S - encode_s
    if train_s < MIN_TRAIN_S:
        needed = math.ceil((RESERVE_S + encode_s + MIN_TRAIN_S) / 6) / 10  # minutes, up to a tenth
        raise InvalidOptionError(f"a time budget of {minutes:g} minutes leaves no time to train: encoding {n_questions} "
                                 f"questions again and measuring take about "
                                 f"{(RESERVE_S + encode_s) / 60:.1f} minutes here; give at least "
                                 f"{needed:g} (--minutes {needed:g})")
    folder = os.path.join(snap.path, ENCODERS)
    for attempt in range(3):  # another learn may remove the folder it found empty in between
        os.makedirs(folder, exist_ok=True)
        try:
            training = tempfile.mkdtemp(prefix=TRAINING, dir=folder)  # a killed run's is removed by a later learn
            break
        except FileNotFoundError:
            if attempt == 2:
                raise
    name = time.strftime("learned-%Y%m%d-%H%M%S-", time.gmtime()) + os.path.basename(training)[-6:].lower()
    report = LearnReport(False, "", {}, held_out=questions.n_held, pairs=len(pairs), base=base_name)
    state: dict[str, Any] = {}  # the writer and its generation before the commit, to know whether it committed

    def load(where: str):
        state["encoder"] = load_encoder(where, pooling="mean", max_length=spec.get("max_length", 256),
                                        prefix=spec.get("prefix", ""), threads=threads, name=name)
        return state["encoder"]
    try:
        if from_log:  # the traffic's share of the budget: a quarter of the training time at most
            logged = logged_pairs(snap, encoder, questions, seed, start + LOG_SHARE * train_s)
            pairs = pairs + logged
            report.pairs, report.logged = len(pairs), len(logged)
            report.seconds["log"] = round(time.monotonic() - start, 1)
        trained = {t for a, b, _ in pairs for t in (a, b)}
        report.loss = train_encoder(base, pairs, training, EncoderTrainConfig(
            epochs=epochs, batch_size=LEARN_BATCH, lr=LEARN_LR, seed=seed, distinct=True, prefix=spec.get("prefix", ""),
            deadline=start + train_s), progress=progress)
        report.seconds["train"] = round(time.monotonic() - start, 1)
        if not report.loss:  # loading the encoder (and asking the log) took what was left to train
            took = time.monotonic() - start
            needed = math.ceil((minutes * 60 + took - train_s + MIN_TRAIN_S) / 6) / 10
            raise InvalidOptionError(f"the time budget of {minutes:g} minutes left {train_s:.0f} s to train, and getting "
                                     f"ready to train (loading the encoder{', asking the logged queries' if from_log else ''}) "
                                     f"took {took:.0f} s of them; give at least {needed:g} (--minutes {needed:g})")
        with writing() as (writer, latest):
            state.update(writer=writer, before=writer.generation)
            _commit(writer, latest, encoder, load, training, name, trained, report, progress)
    finally:
        report.seconds["total"] = round(time.monotonic() - start, 1)
        if not ("writer" in state and state["writer"].generation != state["before"]):  # nothing names it
            exported = _onnx_copy(state.get("encoder"))
            for gone in (training, os.path.join(folder, name), *([exported] if exported else [])):
                shutil.rmtree(gone, ignore_errors=True)
            _drop_if_empty(folder)
    return report


def encode_rate(encoder: Callable[[], Any], questions: Questions, n_questions: int) -> float:
    """Questions a second the second encoding will go at: ENCODE_RATE at most, and where the index has
    more than RATE_FROM questions, what encoding RATE_SAMPLE of them with its encoder takes (the trained
    one has the same shape); a slow encoder (mpnet: 6 times MiniLM's time) would overrun the budget."""
    if n_questions <= RATE_FROM:
        return ENCODE_RATE
    enc = encoder()
    sample = sorted(questions.stored)[:RATE_SAMPLE]
    enc.encode(sample[:2])  # loaded and warm: the load is not the rate
    took = time.monotonic()
    enc.encode(sample, batch_size=RATE_SAMPLE)
    return min(ENCODE_RATE, len(sample) / max(time.monotonic() - took, 1e-3))


def _onnx_copy(encoder) -> str | None:
    """The ONNX Runtime export of an encoder in the user's cache (None for another kind)."""
    from ..encoders import onnx

    if not isinstance(encoder, onnx.OnnxEncoder):
        return None
    cache = os.path.abspath(onnx.cache_dir("onnx"))
    where = os.path.abspath(encoder.path)
    return where if os.path.dirname(where) == cache else None


def _drop_if_empty(folder: str) -> None:
    try:
        os.rmdir(folder)
    except OSError:
        pass


def _commit(writer, snap, encoder: Callable[[], Any], load: Callable[[str], Any], training: str, name: str,
            trained: set[str], report: LearnReport, progress: bool) -> None:
    """Under the writer lock: measure the latest version, make the new one with the new encoder,
    measure it, and commit it where it wins (report filled in either way)."""
    from ..build import measured
    from ..search import QueryEncoder, Searcher
    from .threshold import FUSION_GIVEN, confidence_from_labels, self_tuned

    t = time.monotonic()
    for gone in unused_encoders(snap.path):
        shutil.rmtree(gone, ignore_errors=True)
    limit = SELF_TOKEN_MAX if snap.token_weight > 0 else SELF_FUSION_MAX
    before = report.before = held_out_score(Searcher(snap, QueryEncoder(encoder)), limit, trained)
    os.replace(training, os.path.join(snap.path, ENCODERS, name))  # the name the config records
    new = load(os.path.join(snap.path, ENCODERS, name))
    spec = snap.config.encoder_spec or {}
    base_name = report.base
    new_spec = {**new.spec(), "stored": f"{ENCODERS}/{name}", "base": base_name,
                **({"base_source": spec.get("base_source") or spec.get("source")} if base_name not in PACKAGED else {})}
    # what a person chose stays: a threshold given or tuned on labels, fusion weights given or tuned on labels
    threshold = (snap.config.calibration or {}).get("chosen_by") in (None, "default", "self-calibrated")
    fusion = str((snap.config.fusion or {}).get("chosen_by") or "self").startswith("self")
    if not threshold:
        what, them = (("the threshold {:.3g} and the confidence were", "them") if confidence_from_labels(snap.config)
                      else ("the threshold {:.3g} was", "it"))
        report.notes.append(f"{what.format(snap.threshold)} given or tuned on labels and kept, but the new encoder's "
                            f"scores differ: choose {them} again (faqsearch tune threshold QUERIES --offtopic FILE --apply)")
    if not fusion:
        given = (snap.config.fusion or {}).get("chosen_by") == FUSION_GIVEN
        report.notes.append(f"the fusion weights were {'given at ingest (--no-self-fusion)' if given else 'tuned on labels'}"
                            " and are kept (faqsearch tune fusion QUERIES chooses them again for the new encoder)")

    def calibrate(config, version):
        config = measured(writer, config, version, lambda s: self_tuned(s, new, fusion=fusion, threshold=threshold))

        def judge(s):
            after = report.after = held_out_score(Searcher(s, QueryEncoder(lambda: new)), limit, trained)
            if not wins(after, before):
                raise _NotBetter()
            return {"learned": {"encoder": name, "base": base_name, "held_out": after["queries"], "pairs": report.pairs,
                                "epochs": len(report.loss), "before": before, "after": after,
                                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}
        return measured(writer, config, version, judge)

    config = snap.config.merged(encoder=new_spec)
    if config.whitening is not None and config.whitening.has("fitted_on"):  # fitted again on the questions
        config = config.merged(whitening={**config.whitening.to_dict(), "fitted_on": "corpus questions"})
    try:
        report.version = snap.backend.reencode(writer, snap, new, config, refit_config, calibrate, progress=progress)
        report.kept, report.encoder = True, name
        report.reason = gain(before, report.after)
    except _NotBetter:
        report.reason = f"not kept: {gain(before, report.after)}; the index keeps its encoder"
    finally:
        report.seconds["encode_and_measure"] = round(time.monotonic() - t, 1)

