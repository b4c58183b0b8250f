"""The faqsearch command line: each command parses, calls one library method and prints.

Commands live in :mod:`.commands` by area; shared option groups in :mod:`.options`, output in
:mod:`.render`. ``docs/cli.md`` is generated from the help (``python -m faqsearch.cli.docs``)."""
from __future__ import annotations

import click

from .commands import ask, edit, generate, index, serve, train, tune, versions


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="faqsearch")
def cli():
    """Semantic FAQ retrieval: ingest a question/answer corpus, then ask it questions.

    \b
    Example:
        faqsearch ingest sample_data/faq.csv
        faqsearch ask "how do I reset my password?"
    """


for command in (index.ingest, index.upsert, ask.ask, ask.eval_, edit.add, edit.update, edit.remove, edit.list_,
                edit.show, edit.feedback, edit.unassign, edit.approve, tune.tune, tune.refit, generate.paraphrase,
                generate.augment, generate.suggest,
                train.train, train.learn, serve.serve, serve.gaps, serve.log, index.info, index.indexes, index.rename, index.drop,
                versions.versions, versions.restore, versions.export):
    cli.add_command(command)


def main() -> None:
    cli()


__all__ = ["cli", "main"]
