"""Serving and traffic: serve, gaps, log."""
from __future__ import annotations

import os

import click

from ...defaults import GAP_MARGIN, GAP_MIN_COUNT, GAP_SIMILARITY, MAX_COUNT
from ..options import Finite, device_option, handles_errors, index_option, output_options, since_option, threads_option
from ...text import count
from ..render import dump, pad, percent


@click.command()
@click.option("--index", "-i", "indexes", multiple=True, default=["default"], show_default=True,
              help="Index to serve (name, path or milvus://HOST:PORT/NAME); repeat for several. Served "
                   "under its name.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (0.0.0.0 exposes it).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--api-key", envvar="FAQSEARCH_API_KEY", show_envvar=True,
              help="Key that write calls must send (X-API-Key header); without one, writes are refused. It also "
                   "reads what --read-key reads.")
@click.option("--read-key", envvar="FAQSEARCH_READ_KEY", show_envvar=True,
              help="Key for staff who read but never write: FAQ listings, the query log, gaps, suggestions.")
@click.option("--private", is_flag=True, help="Asking needs a key too (the read key or the API key).")
@click.option("--no-log", is_flag=True, help="Do not log queries (then no gaps and no traffic views).")
@click.option("--max-body", type=click.IntRange(1024), default=1 << 20, show_default=True,
              help="Largest request body, bytes.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              envvar="FAQSEARCH_LOG_FORMAT", show_envvar=True,
              help="json: one JSON object per log line (time, level, logger, message; a request's line adds "
                   "method, path, status, ms, index, answered), for a log shipper.")
@threads_option
@click.option("--quiet", "-q", "quiet", is_flag=True, help="No warnings.")
@handles_errors
@device_option()
def serve(indexes, host, port, api_key, read_key, private, no_log, max_body, log_format, threads, quiet):
    """Serve indexes over HTTP, with a web page at / and the API documented at /docs (offline).

    Writes (add, upsert, update, replace, remove, feedback, unassign, approve) need the API key.
    When the server has a key (--api-key or --read-key), the staff reads need one too: FAQ listing
    and showing, the query log, gaps, suggestions and the index list (the page asks for it). Asking
    stays open unless --private. Without any key, reads are open and writes refused. Queries are
    logged in each index's query log unless --no-log; the access log shows paths without the query
    text. GET /metrics has Prometheus metrics (a read: it needs a key when the server has one).

    \b
    Example:
        faqsearch serve
        FAQSEARCH_API_KEY=secret faqsearch serve --index support --index support-de --port 8080
        faqsearch serve --index milvus://milvus.internal:19530/support --host 0.0.0.0   # one of N replicas
        FAQSEARCH_API_KEY=secret FAQSEARCH_READ_KEY=staff faqsearch serve --index support --private
        faqsearch serve --host 0.0.0.0 --log-format json
        curl -s 'localhost:8000/indexes/default/ask?q=where+is+my+parcel'
        curl -s -H 'X-API-Key: staff' 'localhost:8000/indexes/default/queries?unanswered=true'
    """
    from ...index.config import resolve_index_path
    from ...service import serve as run_serve
    from ..options import setup_logging

    setup_logging(quiet)
    named: dict[str, str] = {}
    for ix in indexes:
        path = resolve_index_path(ix)
        name = os.path.basename(path)
        if name in named:
            raise click.UsageError(f"two indexes would be served as {name!r}; rename one")
        named[name] = path
    run_serve(named, host=host, port=port, api_key=api_key, log_queries=not no_log, threads=threads, max_body=max_body,
              read_key=read_key, private=private, log_format=log_format)


@click.command()
@index_option
@click.option("--similarity", type=Finite(0, 1), default=GAP_SIMILARITY, show_default=True,
              help="Cosine at which queries join a group.")
@click.option("--margin", type=Finite(0, 1), default=GAP_MARGIN, show_default=True,
              help="Answered queries within this of what decides (the confidence the index answers at, or "
              "a cosine threshold that decides), and at most halfway from it to certain, count as low-confidence.")
@click.option("--min-count", type=click.IntRange(1), default=GAP_MIN_COUNT, show_default=True,
              help="Smallest group shown.")
@since_option("Only queries logged at or after this ISO time, e.g. 2026-11-01.")
@click.option("--limit", type=click.IntRange(1, MAX_COUNT), default=20, show_default=True)
@output_options()
@threads_option
@handles_errors
@device_option()
def gaps(index, similarity, margin, min_count, since, limit, out, threads):
    """The FAQs you are missing: unanswered and low-confidence logged queries (from `serve`, or
    `ask --log`), grouped by meaning and ranked by how often they were asked.

    \b
    Example:
        faqsearch gaps --index support
        faqsearch gaps --since 2026-11-01 --json
    """
    from ...engine import FAQSearch
    from ...traffic import Traffic

    with FAQSearch.open(index, threads=threads) as engine, Traffic.existing(engine.path) as traffic:
        found = traffic.gaps(engine, similarity=similarity, margin=margin, min_count=min_count, since=since,
                             limit=limit)
        if traffic.missing:
            click.echo(f"Note: {traffic.why_off}.", err=True)
    if out.json:
        click.echo(dump({"gaps": [g.to_dict() for g in found]}))
        return
    if not found:
        click.echo("No gaps: no group of unanswered or low-confidence queries is large enough.")
    for n, g in enumerate(found, 1):
        near = (f"; nearest FAQ {g.nearest_faq} at {percent(g.nearest_confidence)} confidence"
                if g.nearest_faq and g.nearest_confidence is not None else
                f"; nearest FAQ {g.nearest_faq} at {g.nearest_score:.2f}" if g.nearest_faq else "")
        if g.script is not None:
            near = (f", written in {g.script} script, which this index's encoder does not read: a multilingual index "
                    "answers them (faqsearch ingest --model use-multilingual)")
        click.echo(f"{n}. {count(g.count, 'query', 'queries')} ({g.distinct} distinct){near}")
        for ex in g.examples:
            click.echo(f"     - {ex}")


@click.command(name="log")
@index_option
@since_option("Only queries logged at or after this ISO time, e.g. 2026-11-01 (UTC).")
@click.option("--limit", type=click.IntRange(1, MAX_COUNT), default=50, show_default=True, help="Newest queries shown at most.")
@click.option("--unanswered", is_flag=True, help="Only queries that got no confident answer.")
@since_option("Delete the queries logged before this ISO time (UTC) instead of listing them, their text "
              "overwritten on disk: a retention policy, e.g. run daily with the date 90 days ago.", "--delete-before")
@click.option("--delete-containing", metavar="TEXT", help="Delete the queries holding TEXT in any case instead of "
              "listing them, their text overwritten on disk: a person's request to erase what they typed (their "
              "email, name or number; see also versions --delete-kept).")
@output_options("JSON on stdout: the same document as GET /indexes/NAME/queries.", quiet=False)
@handles_errors
def log(index, since, limit, unanswered, delete_before, delete_containing, out):
    """The query log, newest first: what was asked (by `serve`, `ask --log` or the library's
    ask(..., log=True)), when, and whether it was answered.

    \b
    Example:
        faqsearch log --index support --limit 20
        faqsearch log --since 2026-11-01 --unanswered --json
        faqsearch log --index support --delete-before "$(date -u -d '90 days ago' +%F)"
        faqsearch log --index support --delete-containing "jane.doe@example.com"
    """
    from ...engine import FAQSearch
    from ...traffic import Traffic

    if delete_before is not None and (since or unanswered or limit != 50):  # (it deleted all of them, for good)
        raise click.UsageError("--delete-before deletes every query logged before its date: it takes no --since, "
                               "--unanswered or --limit")
    if delete_containing is not None and (since or unanswered or limit != 50 or delete_before is not None):
        raise click.UsageError("--delete-containing deletes every query holding its text: it takes no --since, "
                               "--unanswered, --limit or --delete-before")
    with FAQSearch.open(index) as engine, Traffic.existing(engine.path) as traffic:
        if traffic.missing:
            click.echo(f"Note: {traffic.why_off}.", err=True)
        if delete_containing is not None:
            gone = traffic.delete_containing(delete_containing)
            click.echo(dump({"deleted": gone, "containing": delete_containing}) if out.json else
                       f"Deleted {count(gone, 'query', 'queries')} holding {delete_containing!r} from the query log.")
            return
        if delete_before is not None:
            gone = traffic.delete_before(delete_before)
            click.echo(dump({"deleted": gone, "before": delete_before}) if out.json else
                       f"Deleted {count(gone, 'query', 'queries')} logged before {delete_before} from the query log.")
            return
        found = traffic.queries(limit, 0, unanswered, since, store=engine.store)
    if out.json:
        click.echo(dump(found))
        return
    click.echo(f"{count(found['total'], 'query', 'queries')} logged{f' since {since}' if since else ''}: "
               f"{found['answered']} answered, {found['unanswered']} not.")
    if not found["queries"]:
        return
    click.echo(f"{'time (UTC)':<19}  {'answered':<8}  {'score':>5}  {pad('top FAQ', 12)}  query")
    for q in found["queries"]:
        score = f"{q['score']:.2f}" if q["score"] is not None else "-"
        click.echo(f"{q['time'][:19].replace('T', ' '):<19}  {'yes' if q['answered'] else 'no':<8}  {score:>5}  "
                   f"{pad(q['top_faq'] or '-', 12)}  {q['query']}")
