"""Generate docs/cli.md from the commands' own help (as cog does for llm and sqlite-utils):

    python -m faqsearch.cli.docs > docs/cli.md

tests/test_docs.py fails when docs/cli.md is not what this prints."""
from __future__ import annotations

import click

from . import cli

WIDTH = 100


def help_text(command: click.Command, name: str) -> str:
    # the names `faqsearch` itself gives every command (-h, --help), so the text does not depend on
    # whether click built a command's (cached) help option here or in an earlier invocation
    names = (cli.context_settings or {}).get("help_option_names", ["--help"])
    ctx = click.Context(command, info_name=name, terminal_width=WIDTH, max_content_width=WIDTH,
                        help_option_names=names)
    cached = getattr(command, "_help_option", None)  # click caches the first one it built, perhaps with other names
    if cached is not None and list(cached.opts) != command.get_help_option_names(ctx):
        command._help_option = None
    return command.get_help(ctx)


def render() -> str:
    parts = ["# Command reference", "",
             "Generated from each command's `--help` by `python -m faqsearch.cli.docs > docs/cli.md`; a test keeps "
             "it in step with the code.", "", "```", help_text(cli, "faqsearch"), "```", ""]
    for full, command in _commands(cli, "faqsearch"):
        parts += [f"## {full}", "", "```", help_text(command, full), "```", ""]
    return "\n".join(parts)


def _commands(group: click.Group, prefix: str):
    """(full name, command) of every visible command, a group's sub-commands after it."""
    for name in sorted(group.commands):
        command = group.commands[name]
        if command.hidden:
            continue
        yield f"{prefix} {name}", command
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix} {name}")


if __name__ == "__main__":
    print(render(), end="")
