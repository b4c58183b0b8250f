"""The documentation stays true to the code: docs/cli.md is what the commands' own help generates,
every command and option is documented, the README stays short and runs what CI runs, and every
relative link (with its #anchor) points at something that exists."""
from __future__ import annotations

import os
import re

import click
import pytest

from faqsearch.cli import cli
from faqsearch.cli.docs import render

from .conftest import ROOT

DOCS = os.path.join(ROOT, "docs")
README = os.path.join(ROOT, "README.md")


def read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def commands(group: click.Group = cli, prefix: str = "faqsearch"):
    """(full name, command) of every visible command, sub-groups walked recursively."""
    for name in sorted(group.commands):
        command = group.commands[name]
        if command.hidden:
            continue
        full = f"{prefix} {name}"
        yield full, command
        if isinstance(command, click.Group):
            yield from commands(command, full)


def markdown_files() -> list[str]:
    return [README] + sorted(os.path.join(DOCS, f) for f in os.listdir(DOCS) if f.endswith(".md"))


def without_code(text: str) -> str:
    """Markdown with fenced code blocks and inline code removed (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


def anchors(path: str) -> set[str]:
    text = re.sub(r"^```.*?^```", "", read(path), flags=re.S | re.M)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.M)}


def test_cli_md_is_what_the_generator_prints():
    assert read(os.path.join(DOCS, "cli.md")) == render(), \
        "docs/cli.md is stale: regenerate it with  python -m faqsearch.cli.docs > docs/cli.md"


def test_every_command_and_option_is_in_cli_md():
    text = read(os.path.join(DOCS, "cli.md"))
    missing = []
    for full, command in commands():
        heading = f"## {full}\n"
        if heading not in text:
            missing.append(full)
            continue
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                missing += [f"{full} {opt}" for opt in param.opts + param.secondary_opts
                            if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", section)]
    assert not missing, missing


def test_every_command_has_help_with_an_example():
    lacking = [full for full, command in [("faqsearch", cli), *commands()]
               if not command.help or "Example" not in command.help]
    assert not lacking, lacking


def test_readme_is_short_and_names_every_command():
    text = read(README)
    assert len(text.splitlines()) <= 150
    synopsis = [line for line in text.splitlines() if line.startswith("faqsearch ")]
    named = {line.split()[1] for line in synopsis}
    assert {full.split()[1] for full, _ in commands()} <= named


def _commands_of(text: str) -> str:
    """Shell text with line continuations joined and spacing normalised."""
    return re.sub(r"\s+", " ", text.replace("\\\n", " ")).strip()


@pytest.mark.parametrize("section", ["## Install and run", "## Run the tests"])
def test_ci_runs_the_readme_commands(section):
    body = read(README).split(section + "\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", body, flags=re.S)
    assert block, f"README {section!r} has no bash block"
    assert _commands_of(block.group(1)) in _commands_of(read(os.path.join(ROOT, ".ci", "run")))


def test_no_private_data_path_in_readme_or_help():
    for text in (read(README), render()):
        assert "shared/data" not in text


def test_relative_links_point_at_existing_files_and_headings():
    broken = []
    for path in markdown_files():
        for target in re.findall(r"\]\(([^)\s]+)\)", without_code(read(path))):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            where = f"{os.path.relpath(path, ROOT)}: {target}"
            if not os.path.exists(full):
                broken.append(where)
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                broken.append(where + " (no such heading)")
    assert not broken, broken


def test_indexes_readme_lists_the_files_format_names():
    """indexes/README.md lists every entry of an index directory and of a version as
    faqsearch/index/format.py names them, and nothing else; each folder's row names its files."""
    from faqsearch.index import format as fmt

    text = read(os.path.join(ROOT, "indexes", "README.md"))
    top = re.findall(r"^indexes/NAME/(\S+)", text, flags=re.M)
    top = {"v<G>/" if fmt.VERSION_NAME.match(e.rstrip("/")) else e for e in top}
    assert top == set(fmt.INDEX_ENTRIES)
    rows = dict(re.findall(r"^\| `([^`]+)` \| (.*) \|$", text, flags=re.M))
    assert sorted(rows) == sorted(fmt.VERSION_ENTRIES)
    for folder, files in ((fmt.LEXICAL, [a + fmt.NPY for a in fmt.LEXICAL_ARRAYS]), (fmt.TOKENS, fmt.TOKENS_FILES)):
        assert all(f"`{name}`" in rows[f"{folder}/"] for name in (*files, fmt.DIR_META)), folder
