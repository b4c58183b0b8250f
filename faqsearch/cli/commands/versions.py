"""The versions an index keeps: list them, restore one; and the live one written out as a corpus file."""
from __future__ import annotations

import click

from ..options import handles_errors, index_option, output_options
from ..render import dump
from ...text import count


@click.command()
@index_option
@click.option("--delete-kept", is_flag=True, help="Delete every kept version but the live one (they hold what edits "
              "took out, a user's phrasing among it): after that, restore cannot undo the edits before. Asks first "
              "unless --yes.")
@click.option("--yes", "-y", is_flag=True, help="With --delete-kept: do not ask for confirmation.")
@output_options(quiet=False)
@handles_errors
def versions(index, delete_kept, yes, out):
    """List the versions an index keeps: when each was made, by what, its FAQs and questions, and
    which one is live. Every ingest, refit, tune transform --apply, learn and edit that drops questions
    or rewrites the answers, categories or metadata of several FAQs makes a new version; the previous ones are kept (the newest 5, and the last before each of the 5 latest
    removes, updates, ingests, learns or restores) for `faqsearch restore`. Settings
    that tune threshold, tune fusion and tune confidence store change the live version in place.

    A query that feedback or approve made a phrasing stays in the versions kept from before its unassign or
    remove: --delete-kept deletes them (a person's request to erase what they typed).

    \b
    Example:
        faqsearch versions --index support
        faqsearch versions --index support --json
        faqsearch versions --index support --delete-kept --yes
    """
    from ...index.config import resolve_index_path
    from ...index.versions import list_versions

    if delete_kept:
        return _delete_kept(resolve_index_path(index), yes, out)
    if yes:
        raise click.UsageError("--yes goes with --delete-kept")
    rows = list_versions(resolve_index_path(index))
    if out.json:
        click.echo(dump({"versions": [v.to_dict() for v in rows]}))
        return
    made = [f"{v.made_by or '?'}, then {', '.join(v.edits or [v.edited_by])}" if v.edited_by else (v.made_by or "?")
            for v in rows]  # every kind of edit made inside it (an add before an update went unsaid)
    width = max([20, *map(len, made)])  # "restore v00000007, then set-min-confidence" kept the columns aligned
    if rows:
        click.echo(f"{'version':<9}  {'time':<25} {'made by':<{width}} {'FAQs':>7} {'questions':>9}")
    for v, by in zip(rows, made):
        click.echo(f"{v.version:<9}  {v.time or '?':<25} {by:<{width}} {v.faqs if v.faqs is not None else '?':>7} "
                   f"{v.questions if v.questions is not None else '?':>9}{'  (live)' if v.live else ''}")
    if any(v.edited_by for v in rows):  # edits committed in place: the counts are the version's as it is now
        click.echo("(\"then\": edits made inside that version since; its counts include them)")


def _delete_kept(path, yes, out):
    from ...index.versions import delete_kept, list_versions

    kept = [v.version for v in list_versions(path) if not v.live]
    if kept and not yes:
        click.confirm(f"Delete {count(len(kept), 'kept version')} of {path} ({', '.join(kept)})? restore will not "
                      "undo the edits before the live version", abort=True, err=True)
    deleted = delete_kept(path) if kept else []
    if out.json:
        click.echo(dump({"deleted": deleted}))
    else:
        click.echo(f"Deleted {count(len(deleted), 'kept version')}{': ' + ', '.join(deleted) if deleted else ''}.")


@click.command()
@click.argument("version")
@index_option
@output_options(quiet=False)
@handles_errors
def restore(version, index, out):
    """Make a kept VERSION (see `faqsearch versions`) live again, as a new version: the one live now
    is kept too, so a restore can be undone the same way. Every edit after VERSION (approvals and
    feedback too) is left behind: the command names them and the version that brings them back.

    \b
    Example:
        faqsearch versions --index support
        faqsearch restore v00000007 --index support
    """
    from ...index.config import resolve_index_path
    from ...index.versions import restored

    report = restored(resolve_index_path(index), version)
    live, behind = report["version"], report["left_behind"]
    if out.json:
        click.echo(dump(report))
    elif behind is None:
        click.echo(f"{version} is the live version already; nothing changed.")
    else:
        click.echo(f"Restored {version} as the new live version {live}.")
        if behind["undo"] and behind["undo"] != version:
            click.echo(f"It leaves behind every edit after {version} (the versions kept since, {_span(behind['versions'])}, "
                       f"were made by {', '.join(behind['made_by']) or 'edits not recorded'}); "
                       f"`faqsearch restore {behind['undo']}{_index(index)}` brings them back.")


def _index(index: str | None) -> str:
    import shlex

    return f" --index {shlex.quote(index)}" if index else ""


def _span(versions: list[str]) -> str:
    return versions[0] if len(versions) == 1 else f"{versions[0]} to {versions[-1]}"


@click.command()
@click.argument("file", default="-", type=click.Path(dir_okay=False, allow_dash=True))
@index_option
@click.option("--format", "fmt", type=click.Choice(["csv", "tsv", "jsonl"]), default=None,
              help="Default: from FILE's extension (.csv, .tsv, .jsonl); CSV on stdout.")
@click.option("--all", "everything", is_flag=True,
              help="Every question: the phrasings people assigned (feedback, approvals) and generated ones too, to move "
                   "the index elsewhere. Without it, the questions a corpus file speaks for (ingested or added), so "
                   "that `faqsearch upsert` of the export changes nothing.")
@output_options("JSON on stdout: what was written (FILE must then be a file).", quiet=False)
@handles_errors
def export(file, index, fmt, everything, out):
    """Write the FAQ back out as a corpus file (CSV: a row per question; JSONL: an object per FAQ, metadata
    kept with its types), the way ingest reads it: answers and categories edited since, FAQs added and
    removed, all as they are now. The file is written whole or not at all.

    \b
    Example:
        faqsearch export faq-now.csv --index support
        faqsearch export backup.jsonl --index support --all
        faqsearch export --index support | head
    """
    import os
    import re

    from ...corpus import EXTENSIONS
    from ...engine import FAQSearch
    from ...files import atomic_write
    from ...manage import corpus_bytes, export_faqs

    if fmt is None:  # named as ingest reads it
        fmt = EXTENSIONS.get(os.path.splitext(file)[1].lower(), "csv" if file == "-" else None)
        if fmt is None:
            raise click.UsageError(f"cannot tell the format from {file!r}: name it .csv, .tsv or .jsonl, or give --format")
    if out.json and file == "-":
        raise click.UsageError("with --json the export goes to a FILE (stdout holds the JSON)")
    with FAQSearch.open(index) as engine:
        faqs = export_faqs(engine.snapshot.store, everything)
    data, warnings = corpus_bytes(faqs, fmt)
    for warning in warnings:
        click.echo(f"Warning: {warning}.", err=True)
    target = os.path.realpath(file)  # through a link to the file it names (the link was replaced by a file)
    fd = re.fullmatch(r"/dev/(?:fd/(\d+)|std(out|err))|/proc/self/fd/(\d+)", file)
    if file == "-":
        click.get_binary_stream("stdout").write(data)
    elif fd:  # this process's own output: written to it (>> kept its lines, >(gzip) its pipe)
        number = 1 if fd.group(2) == "out" else 2 if fd.group(2) else int(fd.group(1) or fd.group(3))
        with os.fdopen(os.dup(number), "wb") as fh:
            fh.write(data)
    elif os.path.exists(file) and not os.path.isfile(file):  # a named pipe, a device: written into
        with open(file, "wb") as fh:
            fh.write(data)
    elif not os.path.isdir(os.path.dirname(target) or "."):
        raise click.ClickException(f"no folder {os.path.dirname(target)}: create it first, or export elsewhere")
    else:
        mode = os.stat(target).st_mode & 0o7777 if os.path.exists(target) else None
        atomic_write(target, data)  # whole or not at all; a file that was there keeps its mode (600 stayed private)
        if mode is not None:
            os.chmod(target, mode)
    said = {"file": file, "format": fmt, "faqs": len(faqs), "questions": sum(len(f.questions) for f in faqs)}
    if out.json:
        click.echo(dump(said))
    elif file != "-" and not fd:
        click.echo(f"Exported {said['faqs']} FAQs ({said['questions']} questions) to {file} ({fmt}).", err=True)
