"""Tuning an index from data: tune (transform, hybrid weight), refit."""
from __future__ import annotations

import click

from ...defaults import FOLDS
from ..options import Finite, device_option, handles_errors, index_option, output_options, threads_option
from ..render import dump, fusion as print_fusion, threshold as print_threshold, tune as print_tune


@click.command()
@click.argument("queries", required=False, type=click.Path(dir_okay=False))
@index_option
@click.option("--pairs", type=click.Path(dir_okay=False), help="Tune on sentence pairs with scores (Spearman).")
@click.option("--self", "self_supervised", is_flag=True,
              help="Tune on the index's own question variants: one per FAQ is held out as a query.")
@click.option("--apply", "do_apply", is_flag=True,
              help="Rewrite the transform and vector index (atomically, no re-encoding) if the held-out score "
                   "improves.")
@click.option("--fusion", is_flag=True,
              help="Tune the weights of BM25 and of token matching in hybrid mode instead (with QUERIES, or "
                   "--self: the index's own question variants).")
@click.option("--threshold", "pick_threshold", is_flag=True,
              help="Choose the threshold instead: with QUERIES and --offtopic FILE (labelled in-scope and "
                   "out-of-scope queries), or --self (no labels: the index's own question variants and the "
                   "shipped out-of-scope questions, as at ingest). --apply stores it.")
@click.option("--min-confidence", "min_confidence", default=None, metavar="P|auto",
              help="Store the confidence (0-1) at or above which `ask` answers, in place of the operating point the "
                   "index chose ('auto' goes back to it). Needs no QUERIES.")
@click.option("--folds", type=click.IntRange(2, 20), default=FOLDS, show_default=True, help="Cross-validation folds.")
@click.option("--offtopic", type=click.Path(dir_okay=False),
              help="Questions the index must not answer (.txt lines); a new threshold never answers more of them "
                   "than the current one. Default: a generic English and Chinese list shipped with faqsearch.")
@click.option("--query-column", default=None)
@click.option("--gold-column", default=None)
@output_options()
@threads_option
@handles_errors
@device_option()
def tune(queries, index, pairs, self_supervised, do_apply, fusion, pick_threshold, min_confidence, folds, offtopic,
         query_column, gold_column, out, threads):
    """Choose whitening beta, gamma and k for an index from labelled data (or the BM25 weight).

    Every setting of beta, gamma in {0, 0.5, 1} and k in {64, 128, 256, all} (plus no transform)
    is computed from the index's stored raw vectors: the corpus is not re-encoded. The choice is
    cross-validated, so the reported gain is measured on queries it was not chosen on. With
    --apply the index is rewritten only when that held-out score improves.

    \b
    Example:
        faqsearch tune sample_data/queries.csv
        faqsearch tune --self --apply --index support
        faqsearch tune --pairs sts-dev.tsv --index sts --json
        faqsearch tune user_queries.csv --fusion --apply
        faqsearch tune user_queries.csv --threshold --offtopic not_ours.txt --apply
        faqsearch tune --min-confidence 0.8 --index support
    """
    from ...corpus import read_texts
    from ...engine import FAQSearch
    from ...evaluation import read_labelled_queries, read_pairs
    from ...tuning import tune as run_tune
    from ...tuning import tune_fusion

    if min_confidence is not None:
        if queries or pairs or self_supervised or fusion or pick_threshold:
            raise click.UsageError("--min-confidence is a setting of its own: give it alone")
        set_min_confidence(index, min_confidence, out.json)
        return
    if sum(x is not None and x is not False for x in (queries, pairs, self_supervised)) != 1:
        raise click.UsageError("give exactly one of QUERIES, --pairs FILE or --self")
    if (fusion or pick_threshold) and pairs:
        raise click.UsageError("--fusion and --threshold need labelled QUERIES or --self")
    if pick_threshold and queries and not offtopic:
        raise click.UsageError("--threshold with QUERIES needs --offtopic FILE: queries the index must not answer")
    labelled = read_labelled_queries(queries, query_column, gold_column) if queries else None
    with FAQSearch.open(index, threads=threads) as engine:
        if pick_threshold:
            from ...tuning import calibrate, tune_threshold

            off = read_texts(offtopic) if offtopic else None
            report = (tune_threshold(engine.searcher(), labelled, off) if labelled else
                      calibrate(engine.searcher(), offtopic=off))
            if do_apply:
                engine.set_threshold(report)
            print_threshold(report, out.json, do_apply)
            return
        if fusion:
            report = tune_fusion(engine.searcher(), labelled, folds=folds, progress=out.progress,
                                 self_supervised=self_supervised)
            if do_apply:
                engine.set_fusion(report)
            print_fusion(report, out.json, do_apply)
            return
        pair_data = read_pairs(pairs) if pairs else None
        off = read_texts(offtopic) if offtopic else None
        report = run_tune(engine.searcher(), labelled, pair_data, self_supervised, folds=folds, progress=out.progress,
                          offtopic=off)
        if do_apply and report.worth_applying:
            engine.refit(report.chosen, report.new_threshold)
            report.applied = True
    print_tune(report, out.json, do_apply)


def set_min_confidence(index, value: str, as_json: bool) -> None:
    """`tune --min-confidence P|auto`: store (or clear) the user's operating point."""
    from ...engine import FAQSearch

    given = None
    if value.strip().lower() != "auto":
        given = Finite(0, 1).convert(value, None, None)
    with FAQSearch.open(index) as engine:
        engine.set_min_confidence(given)
        snap = engine.snapshot
        result = {"index": engine.path, "min_confidence": snap.min_confidence, "given": given is not None,
                  "learned": snap.confidence is not None}
    if as_json:
        click.echo(dump(result))
    elif not result["learned"]:
        click.echo("Stored, but this index has no confidence model (built before faqsearch learned one, or lexical): "
                   "it answers by its cosine threshold. Rebuild it with `faqsearch ingest` to use it.")
    else:
        click.echo(f"ask now answers at a confidence of {100 * snap.min_confidence:.0f}% or more "
                   f"({'given' if given is not None else 'the operating point the index chose'}).")


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
        engine.refit(Setting(True, cur.beta if beta is None else beta, cur.gamma if gamma is None else gamma,
                             wanted if k is None else k))
        w, n, dims = engine.config.whitening, engine.whitening.moments.n, engine.config.dim_out
        chosen_by = (engine.config.calibration or {}).get("chosen_by")
        result = {"index": engine.path, "beta": w.beta, "gamma": w.gamma, "dims": dims, "fit_count": n,
                  "threshold": engine.threshold, "threshold_chosen_by": chosen_by}
    click.echo(dump(result) if out.json else
               f"Refitted on {n} vectors: beta={w.beta:g} gamma={w.gamma:g}, {dims} dims; threshold "
               f"{result['threshold']:.3g} ({'chosen again by the index' if chosen_by == 'self-calibrated' else chosen_by})."
               + ("" if chosen_by in ("self-calibrated", "given") else
                  " Scores moved with the transform: choose it again with `faqsearch tune QUERIES --threshold`."))
