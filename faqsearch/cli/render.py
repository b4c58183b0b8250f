"""How commands print results: text for people, one JSON document (or JSON lines) for machines."""
from __future__ import annotations

import json
from shlex import quote
from typing import Any

import click

from ..confidence import NO_MODEL
from ..defaults import CONFIDENCE_MIN_VARIANTS, LEARN_MIN_FAQS
from ..text import columns, count, fill

WIDTH = 100


def dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


def wrap(text: str, indent: str, first: str | None = None) -> str:
    """Wrap at spaces, and between Chinese or Japanese characters: words (and URLs) are never broken; a
    line's own indentation (a nested list, code, a full-width paragraph indent) is kept, its wrapped
    part indented as far."""
    out = []
    for i, para in enumerate(text.split("\n")):
        own = para[:len(para) - len(para.lstrip())]
        out += fill(para, WIDTH, indent + own, (first + own) if i == 0 and first is not None else None)
    return "\n".join(out)


def result(r, empty_index: bool = False) -> None:
    """One answered query, as `faqsearch ask` prints it."""
    if not r.answers:
        if empty_index:
            click.echo("No answer: the index holds no FAQs (add some with `faqsearch add FILE`).")
        elif r.best_score is None:
            click.echo("No confident answer (nothing matched).")
        elif r.min_confidence is not None:
            shown, bar = percents(r.nearest.confidence, r.min_confidence)
            click.echo(f"No confident answer (best guess {r.nearest.faq_id} at {shown} confidence, "
                       f"below the {bar} this index answers at).")
        else:
            click.echo(f"No confident answer (best score {r.best_score:.3f} is below the threshold {r.threshold:.2f}).")
        return
    for n, a in enumerate(r.answers, 1):
        shown = percent(a.confidence) if a.confidence is not None else f"{a.score:.3f}"
        click.echo(f"{n}. [{shown}] {a.faq_id}  (matched: {a.question})")
        click.echo(wrap(a.answer, "   "))
        if n < len(r.answers):
            click.echo()
    if r.below_threshold:
        bar = (f"below the {percent(r.min_confidence, exact=True)} confidence this index answers at"
               if r.min_confidence is not None else f"scored below the threshold {r.threshold:.2f}")
        click.echo(f"({r.below_threshold} more within -k {bar})")


def percent(p: float, digits: int | None = None, exact: bool = False) -> str:
    """A confidence as people read it: 0.8123 -> '81%' (with no ``digits``, below 1% and above 99% say
    so); ``exact``, for a bar a user set or an index chose, without ``digits``: to 0.01% ('46.45%', '0.6%')."""
    v, clamp = 100 * p, not digits and not (exact and p in (0, 1))
    if exact and digits is None:  # a bar shown rounded misstates it: "46%" for 46.45%, which 46.4% misses
        return f"{round(v, 2):g}%"
    return "<1%" if clamp and v < 1 else ">99%" if clamp and v > 99 else f"{v:.{digits or 0}f}%"


def percents(below: float, bar: float) -> tuple[str, str]:
    """A confidence and the bar it missed, with the decimals that tell them apart (48.4%, 48.5%)."""
    d = next((d for d in range(5) if percent(below, d) != percent(bar, d, True)), None)
    return (percent(below, d), percent(bar, d, True)) if d is not None else ("just below", percent(bar, 2, True))


def edit(report, as_json: bool, index: str | None = None) -> None:
    if as_json:
        click.echo(dump(report.to_dict()))
        return
    if not report.changed:
        click.echo("No changes.")
        return
    click.echo(f"{count(len(report.added_faqs), 'FAQ')} added, {len(report.updated_faqs)} updated, "
               f"{len(report.removed_faqs)} removed, {count(report.added_questions, 'question')} encoded, "
               f"{count(report.removed_questions, 'question')} removed.")
    if report.previous_version:
        undo(report.previous_version, index)


def undo(version: str, index: str | None) -> None:
    """How to get back what a command dropped: the version before it is kept."""
    click.echo(f"Undo with: faqsearch restore {version}" + (f" --index {quote(index)}" if index else ""))


def tune(report, as_json: bool, do_apply: bool) -> None:
    if as_json:
        click.echo(dump(report.to_dict()))
        return
    m, scale = report.metric, (100 if report.metric != "spearman" else 1)
    click.echo(f"{'setting':<32} {'dims':>5} {m:>9}")
    for row in report.rows:
        mark = (" <- current" if row["current"] else "") + (" <- chosen" if row["chosen"] else "")
        click.echo(f"{row['setting']:<32} {row['dims']:>5} {row[m] * scale:>9.2f}{mark}")
    click.echo(f"\n{count(report.n, 'item')}; {m} x100 held out (cross-validated): current {report.cv_current * scale:.2f}, "
               f"tuned {report.cv_tuned * scale:.2f} ({report.gain * scale:+.2f})")
    click.echo("".join(f"{note}\n" for note in report.notes) + f"chosen: {report.chosen.label}")
    if report.applied or do_apply:
        click.echo("applied: transform and vector index rewritten." if report.applied else
                   "not applied: the held-out score does not improve on the current setting.")


def fusion(report, as_json: bool, do_apply: bool) -> None:
    if as_json:
        click.echo(dump(report.to_dict()))
        return
    protos = {row.get("prototype_weight", 0.0) for row in report.rows}
    for row in report.rows:
        mark = (" <- current" if row["current"] else "") + (" <- chosen" if row["chosen"] else "")
        click.echo(f"BM25 weight {row['weight']:<5g} token match weight {row['token_weight']:<4g} "
                   + (f"prototype weight {row['prototype_weight']:<4g} " if len(protos) > 1 else "")
                   + f"mrr@10 {100 * row['mrr@10']:6.2f}{mark}")
    click.echo(f"lexical alone  mrr@10 {100 * report.lexical:6.2f}")
    click.echo(f"\n{count(report.n, 'query', 'queries')}; mrr@10 x100 held out (cross-validated): current {100 * report.cv_current:.2f}, "
               f"tuned {100 * report.cv_tuned:.2f} ({100 * report.gain:+.2f})")
    if report.applied:
        hybrid = report.chosen or report.token_weight or report.prototype_weight
        click.echo(f"applied: mode {'hybrid' if hybrid else 'dense'}, BM25 weight "
                   f"{report.chosen:g}, token match weight {report.token_weight:g}"
                   + (f", prototype weight {report.prototype_weight:g}" if report.prototype_weight else "") + ".")
    elif do_apply:
        click.echo("not applied: the held-out score does not improve on the current setting.")


def threshold(report, as_json: bool, do_apply: bool) -> None:
    if as_json:
        click.echo(dump(report.to_dict()))
        return
    click.echo(f"{'threshold':>9} {'in-scope answered right':>24} {'out-of-scope answered':>22}")
    for row in report.rows:  # no in-scope queries (FAQs of one short question): no share to show, not 0%
        right = f"{100 * row['answered_right']:>23.1f}%" if report.positives else f"{'-':>24}"
        click.echo(f"{row['threshold']:>9.2f} {right} {100 * row['offtopic_answered']:>21.1f}%")
    click.echo(f"\n{report.positives} in-scope and {report.negatives} out-of-scope queries; chosen {report.threshold:.3g} "
               f"(current {report.current:.3g}): {report.rule}")
    if report.confidence is not None and report.applied:  # what decides now (the threshold serves --threshold)
        click.echo(f"confidence learned with it: ask answers at {percent(report.confidence.operating_point, exact=True)} or more"
                   + (" (but the confidence you set decides)" if getattr(report, "given", None) is not None else ""))
    if report.applied:
        click.echo("applied.")


def built(summary: dict[str, Any], path: str) -> None:
    """What `ingest` prints of the index it built."""
    from ..index.address import shown

    w = summary["whitening"]
    click.echo(f"Indexed {count(summary['faqs'], 'FAQ')} ({count(summary['questions'], 'question')}) into "
               f"{shown(path)}")
    click.echo(f"Encoder {summary['encoder']}, {summary['dim_in']} -> {summary['dim_out']} dims "
               + (f"(beta={w['beta']:g}, gamma={w['gamma']:g})" if w["enabled"] else "(no transform)"))
    if (summary.get("fusion") or {}).get("queries") is not None:  # weights the index chose (not given: --no-self-fusion)
        f = summary["fusion"]
        tried = (f"the index's own questions, {f['queries']} held out" if f["chosen_by"].startswith("self")
                 else f"{count(f['queries'], 'labelled query', 'labelled queries')}")
        words = summary["hybrid_weight"] or summary["token_weight"]
        click.echo("Matching: by meaning only (adding word matches did not help" if summary["hybrid_weight"] is None else
                   (f"Matching: by meaning and words (BM25 weight {summary['hybrid_weight']:g}, token match weight "
                    f"{summary['token_weight']:g}" if words else "Matching: by meaning (no word matches")
                   + (f", FAQ prototype weight {summary['prototype_weight']:g}" if summary.get("prototype_weight") else "")
                   + ": the weights that found the right FAQs best", nl=False)
        click.echo(f" on {tried})")
    if summary.get("confidence") and not threshold_decides(summary):
        model = summary["confidence"]
        at = summary.get("min_confidence") or model["operating_point"]
        off = (model.get("in_domain") or 0) + (model.get("general") or 0)
        shown = percent(at, exact=True)  # 0.4%, as `ask` says it (it read 0%)
        click.echo(f"Answers below {shown} confidence are withheld (`ask` says it has no confident answer); "
                   f"learned from the index's own questions and {count(off, 'off-topic one')}")
        if summary.get("threshold") is not None:
            click.echo(f"With --threshold, answers scoring below {summary['threshold']:.2f} are withheld instead")
        if single_questions_decide(summary):
            click.echo(f"Fewer than {CONFIDENCE_MIN_VARIANTS} FAQs with several questions: a question on a topic no FAQ "
                       "covers is answered when it scores above the threshold (`faqsearch info` says how to change that)")
    elif summary.get("threshold") is not None:
        click.echo(f"Answers scoring below {summary['threshold']:.2f} are withheld (the threshold, "
                   f"{threshold_origin(summary)})")


def _count(n: Any, one: str) -> str:  # "1 question", "3 pseudo-queries"; "?" where an older config lacks it
    return count(n, one, one[:-1] + "ies" if one.endswith("y") else None) if isinstance(n, int) else f"? {one}s"


def threshold_origin(config: dict[str, Any]) -> str:
    """How an index's threshold was chosen, in words."""
    calib = config.get("calibration") or {}
    by = calib.get("chosen_by", "default")
    if by == "self-calibrated":
        return (f"chosen by the index from {_count(calib.get('positives'), 'held-out question variant')} and "
                f"{_count(calib.get('negatives'), 'out-of-scope question')} at {_count(calib.get('questions'), 'question')}")
    if by == "labelled":
        return f"chosen from {calib.get('positives')} labelled and {calib.get('negatives')} out-of-scope queries"
    return (calib.get("rule") or "given at ingest") if by == "given" else "the default"


def info(path: str, config: dict[str, Any]) -> None:
    """`faqsearch info` as text."""
    from ..backends.base import delta_limit

    w = config["whitening"]
    backend = config.get("backend") or {}
    click.echo(f"index:      {path}")
    click.echo(f"created:    {config['created']}  (faqsearch {(config.get('versions') or {}).get('faqsearch')})")
    click.echo(f"encoder:    {config['encoder']['name']} ({config['encoder'].get('pooling')}), {config['dim_in']} dims"
               + (f", {config['encoder']['quantize']} weights" if config["encoder"].get("quantize") else ""))
    learned = config.get("learned")
    if learned and config["encoder"].get("stored"):
        from ..tuning.learn import gain

        click.echo(f"learned:    from {learned['base']} on the index's own questions ({learned['pairs']} pairs, "
                   f"{learned['epochs']} epochs, {learned['when']}); {gain(learned['before'], learned['after'])}")
    elif (config.get("faqs_with_3_questions") or 0) >= LEARN_MIN_FAQS and config["encoder"].get("backend") == "transformers":
        click.echo(f"learned:    not yet; {config['faqs_with_3_questions']} FAQs have three or more questions: "
                   "`faqsearch learn` may lift the ranking (it keeps the result only if it wins held out)")
    click.echo("transform:  " + (f"beta={w['beta']:g} gamma={w['gamma']:g} k={w['k']} -> {config['dim_out']} dims "
                                  f"(fitted on {w['fit_count']} {w['fitted_on']})" if w["enabled"] else "none"))
    click.echo("storage:    " + (f"Milvus collection {backend.get('collection')} at {backend.get('uri')}"
                                  if backend.get("kind") == "milvus" else
                                  f"embedded (FAISS {(config.get('index') or {}).get('factory', 'Flat')} + SQLite)"
                                  + (f"; {config['index']['tombstones']} removed vectors kept as tombstones until a "
                                     "refit" if (config.get("index") or {}).get("tombstones") else "")))
    click.echo(f"contents:   {count(config['counts']['faqs'], 'FAQ')}, {count(config['counts']['questions'], 'question')}")
    click.echo(f"matching:   {config.get('mode', 'hybrid')}"
               + (f", BM25 weight {config['hybrid_weight']:g}, token match weight {config['token_weight']:g}"
                  + (f", FAQ prototype weight {config['prototype_weight']:g}" if config.get("prototype_weight") else "")
                  if config.get("mode", "hybrid") == "hybrid" else ""))
    kept = config.get("token_states")
    if config.get("mode", "hybrid") == "hybrid" and config.get("token_weight"):
        click.echo(f"tokens:     states of {kept['texts']} question texts kept ({kept['bytes'] / 1e6:.1f} MB); others "
                   "encoded when first matched" if kept else "tokens:     question states encoded when first matched "
                   "(none kept with this version)")
    lexical = config.get("lexical")
    if lexical:
        click.echo("lexical:    BM25 over " + ("words stemmed (Snowball English)" if lexical["stem"] == "english" else
                                               "words as written") + ", CJK text as " +
                   ("single characters" if lexical["cjk"] == "unigram" else "characters and character pairs"))
    delta = config.get("delta")
    if delta:
        base = config["counts"]["questions"] - delta["added"] + delta["removed"]
        click.echo(f"edits:      generation {config.get('generation', 0)}; questions added / removed since the base "
                   f"files: {delta['added']} / {delta['removed']} (a new base after {delta_limit(base):,} changes)")
    click.echo(f"threshold:  {config.get('threshold'):.3g} ({threshold_origin(config)})" + ("; decides whether to answer"
               if threshold_decides(config) else "; applies with --threshold only" if config.get("confidence") else ""))
    click.echo("confidence: " + (confidence_origin(config) if config.get("confidence") else "none (lexical mode: "
                                 "BM25 scores carry none; any match answers)" if config.get("mode") == "lexical" else
                                 f"{NO_MODEL}; `faqsearch tune threshold --self --apply` learns one again where it can"
                                 + (f"; {100 * config['min_confidence']:.4g}% stored (`tune confidence`), applied once "
                                    "it has one" if config.get("min_confidence") is not None else "")))
    if single_questions_decide(config):
        click.echo(f"note:       fewer than {CONFIDENCE_MIN_VARIANTS} FAQs with several questions: a question on a topic no "
                   f"FAQ covers is answered "
                   f"whenever it scores above the threshold. Once {CONFIDENCE_MIN_VARIANTS} FAQs have two or more "
                   f"questions (phrasings people approve: `faqsearch suggest`, `approve`, `feedback`), the index "
                   f"learns to refuse many such questions when it calibrates again (`faqsearch tune threshold --self "
                   f"--apply`, or once edits change its number of questions by a tenth); or answer less: `faqsearch "
                   f"tune confidence P` with P above {100 * config['confidence']['operating_point']:.0f}%")


def single_questions_decide(config: dict[str, Any]) -> bool:
    """Whether the index answers at its own threshold's confidence because its FAQs have too few
    variants (pseudo-queries): nothing but that threshold turns away a question no FAQ covers. Not
    where a threshold or an operating point of the user's own decides."""
    model = config.get("confidence") or {}
    return (bool(model.get("pseudo")) and model.get("chosen_by") == "self-calibrated"
            and config.get("min_confidence") is None
            and (config.get("calibration") or {}).get("chosen_by") == "self-calibrated")


def threshold_decides(config: dict[str, Any]) -> bool:
    """Whether a threshold given at ingest decides (no operating point of the user's own): the index
    learned a confidence that its answers carry, but does not answer by it."""
    return (config.get("calibration") or {}).get("chosen_by") == "given" and config.get("min_confidence") is None


def confidence_origin(config: dict[str, Any]) -> str:
    """At what confidence an index answers, and where that comes from, in words."""
    model = config["confidence"]
    given = config.get("min_confidence")
    learned = (f"learned from {_count(model.get('positives'), 'pseudo-query' if model.get('pseudo') else 'held-out question variant')}"
               f", {model.get('in_domain')} in-domain and {model.get('general')} general out-of-scope questions"
               if model.get("chosen_by") == "self-calibrated" else
               f"learned from {model.get('positives')} labelled and {model.get('general')} out-of-scope queries")
    if config.get("unknown_share") is not None and model.get("chosen_by") == "self-calibrated":  # --unknowns
        learned += f"; chosen for {100 * config['unknown_share']:.0f}% in-domain unknowns (--unknowns)"
    if given is not None:
        return f"{percent(given, exact=True)} or more (given; the index's own operating point is {percent(model['operating_point'], exact=True)}, {learned})"
    if threshold_decides(config):
        return (f"carried by each answer ({learned}); the threshold given at ingest decides: `faqsearch tune "
                f"confidence P` answers by the confidence instead")
    return f"{percent(model['operating_point'], exact=True)} or more ({model.get('rule')}; {learned})"


def pad(text: str, width: int) -> str:
    """``text`` left-aligned in ``width`` terminal columns (CJK and other wide characters take two)."""
    return text + " " * max(width - columns(text), 0)
