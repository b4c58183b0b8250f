"""Tuning an index from data: the `tune` group (transform, fusion, threshold, confidence), refit."""
from __future__ import annotations

import click

from ...confidence import NO_MODEL
from ...defaults import FOLDS, MIN_LABELLED
from ...errors import InvalidOptionError
from ..groups import FormerFlags
from ..options import Finite, encoding_options, handles_errors, index_option, output_options
from ..render import dump, fusion as print_fusion, percent, threshold as print_threshold, tune as print_tune


def _former(args: list[str]) -> list[str]:
    """`tune` before its sub-commands: --min-confidence P, --threshold, --fusion, else the transform."""
    rest = list(args)
    for i, arg in enumerate(rest):
        if arg == "--min-confidence" and i + 1 < len(rest):
            return ["confidence", rest[i + 1], *rest[:i], *rest[i + 2:]]
        if arg.startswith("--min-confidence="):
            return ["confidence", arg.split("=", 1)[1], *rest[:i], *rest[i + 1:]]
    for flag in ("--threshold", "--fusion"):  # both given: the threshold, as before (--fusion is then dropped)
        if flag in rest:
            rest.remove(flag)
            return [flag[2:], *rest]
    return ["transform", *rest]


@click.group(cls=FormerFlags, former=_former, flags=("--min-confidence", "--threshold", "--fusion"))
def tune():
    """Tune an index from data: the transform, the fusion weights, the threshold (each reports what it
    would change; --apply stores it), or the confidence at which it answers.

    \b
    Example:
        faqsearch tune transform --self --apply --index support
        faqsearch tune fusion user_queries.csv --apply
        faqsearch tune threshold user_queries.csv --offtopic not_ours.txt --apply
        faqsearch tune confidence 0.8 --index support
    """


def data_options(self_help: str):
    """QUERIES (a labelled query file) and its columns, --index, and --self (what it tunes on instead)."""
    def decorate(fn):
        fn = click.option("--self", "self_supervised", is_flag=True, help=self_help)(fn)
        fn = index_option(fn)
        fn = click.option("--gold-column", default=None, help="The column of QUERIES with the right FAQ id(s).")(fn)
        fn = click.option("--query-column", default=None, help="The column of QUERIES with the query text.")(fn)
        return click.argument("queries", required=False, type=click.Path(dir_okay=False))(fn)
    return decorate


HELD_OUT = "Tune on the index's own question variants: one per FAQ is held out as a query."


def _labelled(queries, query_column, gold_column):
    from ...evaluation import read_labelled_queries

    return read_labelled_queries(queries, query_column, gold_column) if queries else None


def _measured(index, threads, measure, apply, show, as_json: bool) -> None:
    """Open the index, measure (searcher -> report), store the choice when ``apply`` is given, print."""
    from ...engine import FAQSearch

    with FAQSearch.open(index, threads=threads) as engine:
        report = measure(engine.searcher())
        if apply is not None:
            apply(engine, report)
    show(report, as_json, apply is not None)


folds_option = click.option("--folds", type=click.IntRange(2, 20), default=FOLDS, show_default=True,
                            help="Cross-validation folds.")


@tune.command("transform")
@data_options(HELD_OUT)
@click.option("--pairs", type=click.Path(dir_okay=False), help="Tune on sentence pairs with scores (Spearman).")
@click.option("--apply", "do_apply", is_flag=True,
              help="Rewrite the transform and vector index (atomically, no re-encoding) if the held-out score "
                   "improves.")
@folds_option
@click.option("--offtopic", type=click.Path(dir_okay=False),
              help="Questions the index must not answer (.txt lines); where the threshold was given or tuned on "
                   "labels, the one chosen for a new transform never answers more of them than the current one (an "
                   "index that chose its own threshold chooses it and its confidence again from its own questions). "
                   "Default: a generic English and Chinese list shipped with faqsearch.")
@encoding_options
def transform(queries, query_column, gold_column, index, self_supervised, pairs, do_apply, folds, offtopic, out,
              threads):
    """Choose whitening beta, gamma and k for an index from labelled QUERIES, --pairs or --self.

    Every setting of beta, gamma in {0, 0.5, 1} and k in {64, 128, 256, all} (plus no transform)
    is computed from the index's stored raw vectors: the corpus is not re-encoded. The choice is
    cross-validated, so the reported gain is measured on queries it was not chosen on. With
    --apply the index is rewritten only when that held-out score improves.

    \b
    Example:
        faqsearch tune transform sample_data/queries.csv
        faqsearch tune transform --self --apply --index support
        faqsearch tune transform --pairs sts-dev.tsv --index sts --json
    """
    from ...corpus import read_texts
    from ...evaluation import read_pairs
    from ...tuning import tune as run_tune

    if sum(x is not None and x is not False for x in (queries, pairs, self_supervised)) != 1:
        raise click.UsageError("give exactly one of QUERIES, --pairs FILE or --self")
    labelled = _labelled(queries, query_column, gold_column)
    data = read_pairs(pairs) if pairs else None
    off = read_texts(offtopic) if offtopic else None
    _measured(index, threads, lambda searcher: run_tune(searcher, labelled, data, self_supervised, folds=folds,
                                                        progress=out.progress, offtopic=off),
              (lambda engine, report: report.apply_to(engine)) if do_apply else None, print_tune, out.json)


@tune.command("fusion")
@data_options(HELD_OUT)
@click.option("--apply", "do_apply", is_flag=True,
              help="Store the chosen weights (and hybrid mode) when they beat the current ones held out.")
@folds_option
@encoding_options
def fusion(queries, query_column, gold_column, index, self_supervised, do_apply, folds, out, threads):
    """Choose the weights of BM25 and of token matching in hybrid mode, from labelled QUERIES or --self.

    \b
    Example:
        faqsearch tune fusion user_queries.csv --apply
        faqsearch tune fusion --self --index support --json
    """
    from ...tuning import tune_fusion

    if bool(queries) == self_supervised:
        raise click.UsageError("give exactly one of QUERIES or --self")
    labelled = _labelled(queries, query_column, gold_column)
    _measured(index, threads, lambda searcher: tune_fusion(searcher, labelled, folds=folds, progress=out.progress,
                                                           self_supervised=self_supervised),
              (lambda engine, report: engine.set_fusion(report)) if do_apply else None, print_fusion, out.json)


@tune.command("threshold")
@data_options("No labels: the index's own question variants and the out-of-scope questions, as at ingest.")
@click.option("--offtopic", type=click.Path(dir_okay=False),
              help="Questions the index must not answer (.txt lines): needed with QUERIES; with --self the default "
                   "is a generic English and Chinese list shipped with faqsearch.")
@click.option("--apply", "do_apply", is_flag=True, help="Store the chosen threshold (and confidence model).")
@encoding_options
def threshold(queries, query_column, gold_column, index, self_supervised, offtopic, do_apply, out, threads):
    """Choose the threshold: from labelled in-scope QUERIES and --offtopic FILE, or --self.

    \b
    Example:
        faqsearch tune threshold user_queries.csv --offtopic not_ours.txt --apply
        faqsearch tune threshold --self --index support
    """
    from ...corpus import read_texts
    from ...tuning import calibrate, tune_threshold

    if bool(queries) == self_supervised:
        raise click.UsageError("give exactly one of QUERIES or --self")
    if queries and not offtopic:
        raise click.UsageError("QUERIES needs --offtopic FILE: queries the index must not answer")
    labelled = _labelled(queries, query_column, gold_column)
    off = read_texts(offtopic) if offtopic else None
    _measured(index, threads, lambda searcher: (tune_threshold(searcher, labelled, off) if labelled else
                                                calibrate(searcher, offtopic=off)),
              _set_threshold if do_apply else None, print_threshold, out.json)


def _set_threshold(engine, report) -> None:
    if report.chosen_by == "labelled" and report.positives < MIN_LABELLED:  # checked after the labels themselves
        n = report.positives
        raise InvalidOptionError(f"{n} labelled quer{'y' if n == 1 else 'ies'}: too few to choose the index's threshold "
                                 f"from (--apply needs {MIN_LABELLED}; one chosen on a handful is far off either way). "
                                 "Leave out --apply to see what they would choose; nothing was changed")
    if report.chosen_by == "labelled" and report.negatives < MIN_LABELLED:  # one "tell me a joke" moved it to 0.40
        n = report.negatives
        raise InvalidOptionError(f"{n} off-topic question{'' if n == 1 else 's'} in --offtopic: too few to choose the "
                                 f"threshold from (--apply needs {MIN_LABELLED}; the threshold falls to answer all "
                                 "but a handful). Add more questions the index must not answer, or leave out --apply "
                                 "to see what these would choose; nothing was changed")
    engine.set_threshold(report)
    report.given = engine.snapshot.config.min_confidence  # a confidence the user set still decides: say so


@tune.command("confidence", context_settings={"ignore_unknown_options": True})  # "-0.1" is a value, said out of range
@click.argument("value", metavar="P|auto")
@click.option("--unknowns", type=Finite(0, 1), default=None, metavar="SHARE",
              help="Choose the index's own operating point again for out-of-scope questions of which SHARE are in "
                   "your FAQ's domain (topics it does not cover; the rest general). Default 0.25; higher refuses more "
                   "of them and answers fewer in-scope questions. Kept through edits and learn (not by a new ingest).")
@index_option
@output_options()
@handles_errors
def confidence(value, unknowns, index, out):
    """Store the confidence P (0-1, or a percentage such as 80%) at or above which `ask` answers, in place
    of the operating point the index chose; 'auto' goes back to it. Needs no queries.

    \b
    Example:
        faqsearch tune confidence 0.8 --index support
        faqsearch tune confidence auto --index support
        faqsearch tune confidence auto --unknowns 0.5 --index support
    """
    set_min_confidence(index, value, out.json, unknowns)


def set_min_confidence(index, value: str, as_json: bool, unknowns: float | None = None) -> None:
    """`tune confidence P|auto [--unknowns SHARE]`: store (or clear) the user's operating point, and
    where SHARE is given, let the index choose its own again for that share of in-domain unknowns."""
    from ...engine import FAQSearch

    given = None
    if value.strip().lower() != "auto":
        if unknowns is not None:  # the share chooses the index's own point: a P of one's own replaces it
            raise click.UsageError(f"--unknowns goes with auto (the index chooses its operating point for that "
                                   f"share); {value} is a confidence of your own, which needs no share")
        text = value.strip()
        try:  # 0.8, or 80% as the CLI shows confidences
            given = float(text[:-1]) / 100 if text.endswith("%") else float(text)
            if not 0.0 <= given <= 1.0:  # "150%" was said as "1.5 is not in the range 0<=x<=1"
                raise ValueError
        except ValueError:
            raise click.BadParameter(f"{value!r}: give a confidence between 0 and 1 (0.8), a percentage from 0% to "
                                     "100% (80%), or auto", param_hint="P") from None
        given = Finite(0, 1).convert(given, None, None)
    with FAQSearch.open(index) as engine:
        engine.set_min_confidence(given, unknowns)
        snap = engine.snapshot
        model = snap.confidence
        result = {"index": engine.path, "min_confidence": snap.min_confidence, "given": given is not None,
                  "learned": model is not None, "unknown_share": snap.unknown_share,
                  "operating_point": model.operating_point if model is not None else None,
                  "simulated": model.stats.get("simulated") if model is not None else None}
    if as_json:
        click.echo(dump(result))
    elif not result["learned"]:
        click.echo(f"Stored, but this index has no confidence model ({'lexical mode: BM25 scores carry none' if snap.mode == 'lexical' else NO_MODEL}). "
                   "`faqsearch tune threshold --self --apply` learns one from the index itself.")
    elif snap.min_confidence is None:  # a cosine threshold given at ingest decides again
        click.echo(f"ask now answers at the cosine threshold given at ingest ({snap.threshold:.3f}); the answers "
                   f"carry their confidence (the index's own point: {percent(model.operating_point, exact=True)}). "
                   "`faqsearch tune confidence P` answers at a confidence of P instead.")
    else:
        click.echo(f"ask now answers at a confidence of {percent(snap.min_confidence, exact=True)} or more "
                   f"({'given' if given is not None else 'the operating point the index chose'}).")
        sim = result["simulated"] or {}
        if unknowns is not None and sim.get("right") is not None:
            shares = [f"{sim[k]:.1f}%" if sim.get(k) is not None else "n/a" for k in ("in_domain_answered", "general_answered")]
            click.echo(f"The index's own point ({percent(model.operating_point, exact=True)}, chosen for "
                       f"{100 * snap.unknown_share:.0f}% in-domain unknowns), on its own simulation: {sim['right']:.1f}% of "
                       f"held-out questions answered right, {shares[0]} of in-domain unknowns and {shares[1]} of general "
                       "questions answered.")


@click.command()
@index_option
@click.option("--beta", type=Finite(0, 1), default=None, help="Default: the index's current beta.")
@click.option("--gamma", type=Finite(0, 1), default=None, help="Default: the index's current gamma.")
@click.option("--dims", "k", type=click.IntRange(1), default=None, help="Default: the index's current k.")
@output_options()
@handles_errors
def refit(index, beta, gamma, k, out):
    """Re-fit the transform from the index's current statistics (kept up to date by add, update and
    remove) and rebuild the vector index from the stored vectors, without re-encoding.

    \b
    Example:
        faqsearch refit --index support
        faqsearch refit --index support --beta 0.5 --gamma 0.5 --dims 128
    """
    from ...engine import FAQSearch
    from ...tuning import Setting, current_setting

    with FAQSearch.open(index) as engine:
        cur = current_setting(engine.config)
        wanted = engine.config.whitening.k
        given = (beta, gamma, k) != (None, None, None)  # none: the current setting, no transform staying none
        engine.refit(Setting(True, cur.beta if beta is None else beta, cur.gamma if gamma is None else gamma,
                             wanted if k is None else k) if given or cur.whiten else cur)
        w, n, dims = engine.config.whitening, engine.whitening.moments.n, engine.config.dim_out
        chosen_by = (engine.config.calibration or {}).get("chosen_by")
        result = {"index": engine.path, "beta": w.beta, "gamma": w.gamma, "dims": dims, "fit_count": n,
                  "threshold": engine.threshold, "threshold_chosen_by": chosen_by}
    click.echo(dump(result) if out.json else
               f"Refitted on {n} vectors: beta={w.beta:g} gamma={w.gamma:g}, {dims} dims; threshold "
               f"{result['threshold']:.3g} ({'chosen again by the index' if chosen_by == 'self-calibrated' else chosen_by or 'the default'})."
               + ("" if chosen_by in ("self-calibrated", "given") else
                  " Scores moved with the transform: choose it again with `faqsearch tune threshold "
                  "--self --apply` (or QUERIES --offtopic FILE --apply)."))
