"""Asking and measuring: ask, eval."""
from __future__ import annotations

import re
import sys

import click

from ...confidence import check_lexical_options
from ...defaults import ASK_K
from ...errors import InvalidOptionError
from ..options import (Finite, Score, batch_size_option, device_option, generator_option, handles_errors, index_option,
                       mode_option, output_options, threads_option, unknown_category)
from ...text import not_utf8_fix
from ..render import dump, result

NO_ANSWER = 3  # `ask --fail-on-no-answer`: a query got no confident answer (1 is an error, 2 a usage error)


def stdin_lines() -> list[str]:
    """stdin as text lines (ended by LF, CRLF or CR), without a leading byte-order mark (Windows-saved query
    files). A line that
    is not UTF-8 is answered with U+FFFD in place of its bad bytes, and said on stderr with its number."""
    stream = click.get_binary_stream("stdin")
    data = stream.read()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines = re.split(rb"\r\n|\r|\n", data)  # a file saved with old Mac line ends (CR alone) too
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    texts, bad = [], []
    for n, ln in enumerate(lines, start=1):
        try:
            texts.append(ln.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append(ln.decode("utf-8", "replace"))
            bad.append(n)
    if bad:
        click.echo(f"Warning: stdin line(s) {', '.join(map(str, bad[:10]))}{' ...' if len(bad) > 10 else ''} "
                   "are not UTF-8; their bad bytes are read as U+FFFD. "
                   + not_utf8_fix(lines[bad[0] - 1], what=f"Line {bad[0]}", whole=data),
                   err=True)
    return texts


@click.command()
@click.argument("text", required=False)
@index_option
@click.option("-k", "top_k", type=click.IntRange(1), default=ASK_K, show_default=True,
              help="Answers (distinct FAQs) to return at most; never changes whether a query is answered.")
@click.option("--threshold", "-t", type=Score(), default=None,
              help="Minimum score of an answer (default: the index's, see `faqsearch info`).")
@click.option("--min-confidence", type=Finite(0, 1), default=None,
              help="Answer when the first answer's confidence (0-1) reaches this (default: the index's operating "
                   "point, see `faqsearch info`).")
@click.option("--model", "-m", help="Check that the index was built with this encoder.")
@mode_option
@click.option("--category", help="Only FAQs of this category (filtered inside the search).")
@click.option("--log", "log_queries", is_flag=True,
              help="Log the queries in the index's query log, as `faqsearch serve` does (for `faqsearch gaps`).")
@click.option("--paraphrases", type=click.IntRange(0, 100), default=0,
              help="Also return N generated rewordings of the question ('did you mean'), re-ranked by the index.")
@generator_option
@click.option("--fail-on-no-answer", is_flag=True,
              help=f"Exit with status {NO_ANSWER} when a query gets no confident answer (after printing), so a script "
                   "can branch on \"don't know\"; errors stay 1 and usage errors 2.")
@output_options("JSON output (JSON lines when reading stdin).")
@threads_option
@handles_errors
@device_option("cpu")
def ask(text, index, top_k, threshold, min_confidence, model, mode, category, log_queries, paraphrases, generator,
        fail_on_no_answer, threads, out):
    """Answer a question from an index. With no TEXT (or '-'), read one query per line from stdin
    and answer them in one batch as JSON lines (a blank line gets an empty result).

    A query is answered when its best-ranked answer's confidence (the chance that it is the right
    FAQ, learned by the index at ingest) reaches the index's operating point, or --min-confidence;
    with --threshold, when its score (cosine) reaches that instead. -k only sets how many answers are
    listed. Queries are not logged unless --log (`faqsearch serve` logs its own).

    \b
    Example:
        faqsearch ask "can I change my delivery address?"
        faqsearch ask "refund for a damaged item" -k 5 --json
        faqsearch ask "can I bring my dog?" --min-confidence 0.8
        cat queries.txt | faqsearch ask --index support
        faqsearch ask "error code E42 on my printer" --mode lexical
        faqsearch ask "do you ship abroad?" --fail-on-no-answer || echo "hand over to a person"
    """
    from ...engine import FAQSearch
    from ...text import clean_text, is_blank

    batch = text is None or text == "-"
    if batch and sys.stdin.isatty():
        raise click.UsageError("give a question, or pipe queries on stdin (one per line)")
    if not batch and any("\udc80" <= ch <= "\udcff" for ch in text):  # argv bytes that were not UTF-8
        click.echo("Warning: the query is not UTF-8; its bad bytes are read as U+FFFD. "
                   + not_utf8_fix(text.encode("utf-8", "surrogateescape"), what="It", terminal=True), err=True)
    queries = [clean_text(line) for line in stdin_lines()] if batch else [clean_text(text)]
    if not batch and is_blank(queries[0]):
        raise click.UsageError("the question is blank (no visible characters)")
    if batch and not queries:
        raise click.UsageError("stdin held no queries")
    if threshold is not None and min_confidence is not None:
        raise click.UsageError("give --threshold (a cosine) or --min-confidence (a probability), not both")
    try:  # the library's rule, as a usage error
        check_lexical_options(mode, threshold, min_confidence)
    except InvalidOptionError:
        raise click.UsageError("--mode lexical answers with any BM25 match: it has no cosine or confidence for "
                               "--threshold or --min-confidence to apply to") from None
    with FAQSearch.open(index, model=model, threads=threads) as engine:
        # logged (--log) as `faqsearch serve` logs, where it can be (a read-only index: unlogged, with a warning)
        results = engine.ask_many(queries, k=top_k, mode=mode, threshold=threshold, min_confidence=min_confidence,
                                  filters={"category": category} if category else None, log=log_queries, channel="cli")
        searcher = engine.searcher()
        # nothing matched at all: say whether the index is empty (a count only in that case)
        empty = results[0].best_score is None and searcher.snap.store.question_count() == 0
        if category and all(r.best_score is None for r in results):
            unknown_category(searcher.snap.store, category)
        similar: list[list] = [[] for _ in results]
        if paraphrases:
            from ...generators import choose_generator, paraphrase_queries

            spec = searcher.snap.config.generator
            choice = choose_generator(spec, generator, threads=threads)
            similar, notes = paraphrase_queries(choice, queries, paraphrases, scorer=searcher.embed_full,
                                                searcher=searcher)
            for note in notes:  # the answer stands, with a note
                click.echo(f"Note: {note}", err=True)
    if batch or out.json:
        for r, sim in zip(results, similar):
            d = r.to_dict()
            if paraphrases:
                d["paraphrases"] = [{"text": p.text, "score": p.score} for p in sim]
            click.echo(dump(d))
    else:
        if paraphrases:
            click.echo("Did you mean: " + "; ".join(p.text for p in similar[0]) if similar[0] else "No paraphrases.")
        result(results[0], empty)
    if fail_on_no_answer and not all(r.answered for r in results):
        sys.exit(NO_ANSWER)


@click.command(name="eval")
@click.argument("queries", required=False, type=click.Path(dir_okay=False))
@index_option
@click.option("--pairs", type=click.Path(dir_okay=False),
              help="Sentence pairs with a score or 0/1 label: report Spearman x100 (STS protocol) instead.")
@click.option("--query-column", default=None, help="Query column (default: query, question or text).")
@click.option("--gold-column", default=None, help="Gold FAQ id column (default: faq_id, gold or id).")
@click.option("--offtopic", type=click.Path(dir_okay=False),
              help="Questions the index must not answer (.txt lines or a text column): report how many it answers.")
@click.option("--threshold", "-t", type=Score(), default=None,
              help="Threshold for the answered shares (default: the index's).")
@mode_option
@click.option("--misses", type=click.IntRange(0), default=0,
              help="Also list up to N queries whose gold FAQ was not the first answer.")
@batch_size_option
@output_options()
@threads_option
@handles_errors
@device_option()
def eval_(queries, index, pairs, query_column, gold_column, offtopic, threshold, mode, misses, batch_size, out,
          threads):
    """Measure an index on labelled queries: Recall@1/5/10, MRR@10, nDCG@10 over distinct FAQs, and
    what `ask` would do with each query at the threshold: answered, answered right (the first
    answer is a gold FAQ), and with --offtopic, the share of off-topic questions answered.

    QUERIES is a CSV/TSV/JSONL of queries with their gold FAQ id (several rows, a JSON list or
    'id1|id2' for several gold FAQs).

    \b
    Example:
        faqsearch eval sample_data/queries.csv
        faqsearch eval sample_data/queries.csv --offtopic sample_data/offtopic.txt --json
        faqsearch eval queries.csv --index support --misses 20
        faqsearch eval --pairs sts-dev.tsv --index sts
    """
    from ...corpus import read_texts
    from ...engine import FAQSearch
    from ...evaluation import evaluate, evaluate_pairs, read_labelled_queries, read_pairs

    if (queries is None) == (pairs is None):
        raise click.UsageError("give either QUERIES or --pairs FILE")
    with FAQSearch.open(index, threads=threads) as engine:
        if pairs:
            a, b, y = read_pairs(pairs)
            report = evaluate_pairs(engine.searcher(), a, b, y, batch_size=batch_size, progress=out.progress)
        else:
            labelled = read_labelled_queries(queries, query_column, gold_column)
            off = read_texts(offtopic) if offtopic else None
            report = evaluate(engine.searcher(), labelled, batch_size=batch_size, progress=out.progress,
                              threshold=threshold, source=queries, mode=mode, offtopic=off, misses=misses)
    report = {"index": engine.path, **report}
    if out.json:
        click.echo(dump(report))
        return
    for key, value in report.items():
        if key == "misses":
            continue
        click.echo(f"{key:>24}: {value:.4f}" if isinstance(value, float) else f"{key:>24}: {value}")
    for m in report.get("misses", []):
        got = f"{m['got']} ({m['score']:.3f})" if m["got"] else "no answer"
        click.echo(f"  miss: {m['query']!r} -> {got}; gold {', '.join(m['gold'])}"
                   + (f" (rank {m['gold_rank']})" if m["gold_rank"] else ""))
