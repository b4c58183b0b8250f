"""Editing an index in place: add, update, remove, feedback, unassign; reading it: list, show."""
from __future__ import annotations

import os

import click

from ...defaults import MAX_COUNT
from ..options import (corpus_options, device_option, handles_errors, index_option, output_options, threads_option,
                       unknown_category)
from ..render import dump, edit, pad, wrap
from ...text import clip, columns
from .index import corpus_argument, read_input


@click.command()
@corpus_argument
@index_option
@corpus_options
@output_options()
@threads_option
@handles_errors
@device_option()
def add(corpus, index, columns, fmt, out, threads):
    """Add new FAQs to an index without rebuilding it: only their questions are encoded.

    The edit is atomic: if it fails, the index stays as it was. A running process that has the
    index open sees the new FAQs within a second (or after FAQSearch.reload()). An id given twice,
    or one the index holds already, is refused and nothing is written.

    \b
    Example:
        faqsearch add new_faqs.csv --index support
    """
    from ...engine import FAQSearch

    faqs = read_input(corpus, columns, fmt)  # checked before the index (or the model) is loaded
    with FAQSearch.open(index, threads=threads) as engine:
        edit(engine.add(faqs, progress=out.progress), out.json)


@click.command()
@click.argument("target", metavar="CORPUS|ID")
@index_option
@corpus_options
@click.option("--replace", is_flag=True,
              help="Each listed FAQ holds exactly the questions given (feedback, approved and generated ones go too).")
@click.option("--answer", help="Edit FAQ ID alone: its new answer.")
@click.option("--category", help="Edit FAQ ID alone: its new category (\"\" takes it away).")
@click.option("--question", "questions", multiple=True, metavar="TEXT",
              help="Edit FAQ ID alone: add this question (repeat for several).")
@output_options()
@threads_option
@handles_errors
@device_option()
def update(target, index, columns, fmt, replace, answer, category, questions, out, threads):
    """Update FAQs by id from a file (CORPUS), or one FAQ's fields (ID with --answer, --category or
    --question).

    From a file, each listed FAQ gets the file's answer and the questions it lists that it lacks
    (encoded); its questions the file does not list stay, so one row per FAQ is enough to change
    answers. A category or metadata the file does not give (no such column) stays too. FAQs not
    yet in the index are added; FAQs not in CORPUS are left alone. --replace: each listed FAQ then
    is exactly what the file gives: its questions (feedback, approved and generated ones go too),
    category and metadata (none where the file has no such column). To make an
    index match a whole export, dropping the questions it no longer lists, use `faqsearch upsert`.

    \b
    Example:
        faqsearch update edited_faqs.csv --index support
        faqsearch update acc-01.csv --index support --replace
        faqsearch update ret-04 --answer "Refunds reach your card within 5 days." --index support
        faqsearch update ret-04 --category returns --question "where is my refund?" --index support
    """
    from ...engine import FAQSearch

    one = answer is not None or category is not None or bool(questions)
    if one and replace:
        raise click.UsageError("--replace applies to a CORPUS file; --answer, --category and --question edit one "
                               "FAQ and keep its other questions")
    if not one and target != "-" and not os.path.exists(target) and not os.path.splitext(target)[1]:
        raise click.UsageError(f"{target!r} is no file: to edit the FAQ with that id, give --answer, --category or "
                               f"--question (e.g. faqsearch update {target} --answer \"...\"); to update from a "
                               "file, give its path")  # it said "file not found; check the path"
    faqs = None if one else read_input(target, columns, fmt)  # checked before the index (or the model) is loaded
    with FAQSearch.open(index, threads=threads) as engine:
        if one:
            report = engine.update_faq(target, answer=answer, category=category, questions=list(questions),
                                       progress=out.progress)
        else:
            report = engine.update(faqs, progress=out.progress, replace=replace)
    edit(report, out.json, index)


@click.command()
@click.argument("faq_ids", nargs=-1, required=True)
@index_option
@output_options()
@handles_errors
def remove(faq_ids, index, out):
    """Remove FAQs (and all their questions) by id.

    \b
    Example:
        faqsearch remove shp-11 shp-12 --index support
    """
    from ...engine import FAQSearch

    with FAQSearch.open(index) as engine:
        edit(engine.remove(list(faq_ids)), out.json, index)


def _open_store(index):
    from ...index.config import resolve_index_path
    from ...index.snapshot import open_store

    return open_store(resolve_index_path(index))


@click.command(name="list")
@index_option
@click.option("--category", help="Only FAQs of this category.")
@click.option("--contains", help="Only FAQs whose id, answer or a question contains this text (in any case).")
@click.option("--limit", type=click.IntRange(1, MAX_COUNT), default=None)
@click.option("--offset", type=click.IntRange(0, MAX_COUNT), default=0)
@output_options('JSON: {"faqs": [...], "total": N}, each FAQ with its first question, as GET /indexes/NAME/faqs returns.',
                quiet=False)
@handles_errors
def list_(index, category, contains, limit, offset, out):
    """List the FAQs of an index: id, category, number of questions, answer.

    \b
    Example:
        faqsearch list --index support --category shipping
        faqsearch list --contains refund
    """
    from ...manage import list_faqs

    store = _open_store(index)
    try:
        listing = list_faqs(store, limit, offset, category, contains)
        if category and not listing["faqs"]:
            unknown_category(store, category)
    finally:
        store.close()
    if out.json:
        click.echo(dump(listing))
        return
    rows = listing["faqs"]  # columns as wide as the longest id and category shown (a long id pushed the rest out)
    wid, wcat = (max([w, *(columns(r[k] or "-") for r in rows)]) for k, w in (("id", 12), ("category", 14)))
    if rows:
        click.echo(f"{pad('id', wid)} {pad('category', wcat)} {'questions':>9}  answer")
    elif offset:
        click.echo(f"No FAQs past --offset {offset}{' that contain ' + repr(contains) if contains else ''}.")
    elif contains:
        click.echo(f"No FAQ contains {contains!r} (matched as a run of text, in any case).")
    for row in rows:
        click.echo(f"{pad(row['id'], wid)} {pad(row['category'] or '-', wcat)} {row['questions']:>9}  "
                   f"{clip(' '.join(row['answer'].split()), 70)}")
    if rows and offset + len(rows) < listing["total"]:  # more remain after this page
        click.echo(f"({offset + 1}-{offset + len(rows)} of {listing['total']}; --offset {offset + len(rows)} lists the next)",
                   err=True)


@click.command()
@click.argument("faq_id")
@index_option
@output_options(quiet=False)
@handles_errors
def show(faq_id, index, out):
    """Show one FAQ: its answer, category, metadata and every question with its source.

    \b
    Example:
        faqsearch show ret-04 --index support
    """
    from ...edits.plan import shown

    store = _open_store(index)
    try:
        faq = shown(store, faq_id)  # with its revision, as GET .../faqs/ID gives it (the If-Match of an edit)
    finally:
        store.close()
    if out.json:
        click.echo(dump(faq))
        return
    click.echo(f"id:        {faq['id']}\ncategory:  {faq['category'] or '-'}")
    if faq["metadata"]:
        click.echo(f"metadata:  {dump(faq['metadata'])}")
    click.echo(wrap(faq["answer"], "           ", first="answer:    "))
    for q in faq["questions"]:
        click.echo(f"  [{q['id']}] ({q['source']}) {q['text']}")


@click.command()
@click.argument("query")
@click.argument("faq_id")
@index_option
@output_options()
@handles_errors
@device_option("cpu")
def feedback(query, faq_id, index, out):
    """Teach the index that QUERY should have matched FAQ_ID: the query becomes one of its questions
    (source 'feedback'), through the normal atomic edit. `faqsearch unassign` undoes it. Where QUERY
    is already a question that feedback, an approval or a generator gave another FAQ, it moves to
    FAQ_ID; one of another FAQ's own questions is refused, naming that FAQ.

    \b
    Example:
        faqsearch feedback "parcel never showed up" shp-03 --index support
    """
    from ...engine import FAQSearch
    from ...traffic import Traffic

    with FAQSearch.open(index) as engine, Traffic.existing(engine.path) as traffic:
        report = traffic.feedback(engine, query, faq_id)
    if out.json:
        click.echo(dump(report.to_dict()))
    else:
        click.echo((f"Added the query to {faq_id}." if report.added_questions else f"{faq_id} already has that question.")
                   + _moved(report, faq_id))


@click.command()
@click.argument("faq_id")
@click.argument("texts", nargs=-1, required=True, metavar="TEXT...")
@index_option
@output_options()
@handles_errors
@device_option("cpu")
def approve(faq_id, texts, index, out):
    """Make phrasings a person approved (from `faqsearch suggest`) questions of FAQ_ID, in one atomic
    edit (source 'approved'; `faqsearch unassign TEXT FAQ_ID` takes one out again).

    \b
    Example:
        faqsearch approve ret-04 "refund for my return?" "money back after returning" --index support
    """
    from ...engine import FAQSearch
    from ...traffic import Traffic

    with FAQSearch.open(index) as engine, Traffic.existing(engine.path) as traffic:
        report = traffic.approve(engine, faq_id, texts)  # a logged query approved here shows as assigned
    if out.json:
        click.echo(dump(report.to_dict()))
    else:
        click.echo(f"Added {report.added_questions} of {len(texts)} to {faq_id}"
                   + (" (the others it already has)." if report.added_questions < len(texts) else ".") + _moved(report, faq_id))


def _moved(report, faq_id: str) -> str:
    """What the text of feedback or approve said nothing of: the question it took from another FAQ, and the undo."""
    others = [f for f in report.updated_faqs if f != faq_id]
    if not report.removed_questions or not others:
        return ""
    return (f" Moved from {', '.join(others)} (undo: faqsearch unassign, or faqsearch restore {report.previous_version})."
            if report.previous_version else f" Moved from {', '.join(others)} (undo: faqsearch unassign).")


@click.command()
@click.argument("query")
@click.argument("faq_id")
@index_option
@output_options()
@handles_errors
def unassign(query, faq_id, index, out):
    """Undo feedback: take QUERY out of FAQ_ID where feedback (or an approval) put it.

    \b
    Example:
        faqsearch unassign "parcel never showed up" shp-03 --index support
    """
    from ...engine import FAQSearch
    from ...traffic import Traffic

    with FAQSearch.open(index) as engine, Traffic.existing(engine.path) as traffic:
        report = traffic.unassign(engine, query, faq_id)
    if out.json:
        click.echo(dump(report.to_dict()))
    else:
        click.echo(f"Removed the query from {faq_id}.")
