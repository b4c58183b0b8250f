"""The documentation stays true to the code: docs/cli.md is what the commands' own help generates,
every command and option is documented, the README stays short and runs what CI runs, every
relative link (with its #anchor) points at something that exists, benchmarks/README.md names
every benchmark script and the pages that cite it, and docs/architecture.md's newcomer's path names
every module of the package once."""
from __future__ import annotations

import ast
import os
import re

import click
import pytest

from faqsearch.cli import cli
from faqsearch.cli.docs import render

from .conftest import ROOT

DOCS = os.path.join(ROOT, "docs")
README = os.path.join(ROOT, "README.md")
BENCHMARKS = os.path.join(ROOT, "benchmarks")
BENCHMARKS_README = os.path.join(BENCHMARKS, "README.md")
BENCHMARK_HELPERS = {"common.py", "synth.py"}  # imported or run by the benchmarks; they feed no table


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
    return [README, BENCHMARKS_README] + sorted(os.path.join(DOCS, f) for f in os.listdir(DOCS) if f.endswith(".md"))


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


def benchmark_scripts() -> list[str]:
    """Every script of benchmarks/ and benchmarks/experiments/, relative to benchmarks/."""
    experiments = os.path.join(BENCHMARKS, "experiments")
    return sorted(f for f in os.listdir(BENCHMARKS) if f.endswith(".py")) + \
        sorted(f"experiments/{f}" for f in os.listdir(experiments) if f.endswith(".py"))


def sections(path: str, anchor: str) -> list[str]:
    """The text under each heading of ``path`` whose anchor is ``anchor``, to the next heading of its
    level or above (a page's H1 holds the whole page)."""
    lines, found = read(path).splitlines(), []
    for i, line in enumerate(lines):
        m = re.match(r"^(#{1,6})\s+(.+?)\s*$", line)
        if m and slug(m.group(2)) == anchor:
            level, body = len(m.group(1)), []
            for rest in lines[i + 1:]:
                h = re.match(r"^(#{1,6})\s", rest)
                if h and len(h.group(1)) <= level:
                    break
                body.append(rest)
            found.append("\n".join(body))
    return found


def test_benchmarks_readme_names_every_script():
    text = read(BENCHMARKS_README)
    missing = [s for s in benchmark_scripts() if not re.search(rf"(?<![\w/]){re.escape(s)}", text)]
    assert not missing, f"benchmarks/README.md does not name {missing}"
    living = {m.group(1) for m in re.finditer(r"^### (\S+\.py)$", text, flags=re.M)}
    assert living == {s for s in benchmark_scripts() if "/" not in s} - BENCHMARK_HELPERS, \
        "every living benchmark (benchmarks/*.py but the helpers) has its own ### section"


def test_benchmarks_feed_the_pages_they_name():
    """Each page (and heading) benchmarks/README.md says a script feeds cites that script there."""
    text = read(BENCHMARKS_README)
    claims = []  # (script relative to benchmarks/, the README text that names its pages)
    for m in re.finditer(r"^### (\S+\.py)\n(.*?)(?=^#)", text + "\n#", flags=re.S | re.M):
        feeds = re.search(r"^\| feeds \|(.*)$", m.group(2), flags=re.M)
        assert feeds, f"{m.group(1)}: no 'feeds' row"
        claims.append((m.group(1), feeds.group(1)))
    claims += re.findall(r"^\| `(experiments/\S+\.py)` \|(.*)$", text, flags=re.M)
    assert len(claims) == len(benchmark_scripts()) - len(BENCHMARK_HELPERS)
    wrong = []
    for script, named in claims:
        links = re.findall(r"\]\(([^)\s]+)\)", named)
        assert links, f"{script}: names no page"
        for target in links:
            file, _, anchor = target.partition("#")
            page = os.path.normpath(os.path.join(BENCHMARKS, file))
            where = sections(page, anchor) if anchor else [read(page)]
            if not any(f"benchmarks/{script}" in body for body in where):
                wrong.append(f"{script} -> {target}")
    assert not wrong, f"pages that do not cite the script benchmarks/README.md says they record: {wrong}"


def holds_code(path: str) -> bool:
    """Whether a module holds more than a docstring, imports and ``__all__`` (a package's init
    module that only re-exports its modules holds none)."""
    for node in ast.parse(read(path)).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            continue
        return True
    return False


def package_modules() -> set[str]:
    """Every module of faqsearch/ as a path under it (``backends/embedded/store.py``), a package's
    init module only where it holds code."""
    package = os.path.join(ROOT, "faqsearch")
    out = set()
    for root, _, files in os.walk(package):
        for f in files:
            path = os.path.join(root, f)
            if f.endswith(".py") and (f != "__init__.py" or holds_code(path)):
                out.add(os.path.relpath(path, package).replace(os.sep, "/"))
    return out


def test_newcomers_path_names_every_module_once():
    text = read(os.path.join(DOCS, "architecture.md"))
    section = text.split("## A newcomer's path\n", 1)[1].split("\n## ", 1)[0]
    section = re.sub(r"^```.*?^```", "", section, flags=re.S | re.M)
    named = re.findall(r"`([\w/]+\.py)`", section)
    package = os.path.join(ROOT, "faqsearch")
    missing = sorted(package_modules() - set(named))
    twice = sorted({m for m in named if named.count(m) > 1})
    absent = sorted({m for m in named if not os.path.isfile(os.path.join(package, m))})
    assert not (missing or twice or absent), \
        f"docs/architecture.md, A newcomer's path: not named {missing}, named twice {twice}, no such module {absent}"


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


def test_deploy_md_shows_exactly_the_files_in_deploy():
    """docs/deploy.md shows each file of deploy/ whole, after a link to it, and no other: the recipe a
    reader copies from the page is the one tests/test_deploy.py checks."""
    deploy = os.path.join(ROOT, "deploy")
    shown = dict(re.findall(r"^\[`deploy/([^`]+)`\]\(\.\./deploy/\1\):\n\n```\w*\n(.*?)^```$",
                            read(os.path.join(DOCS, "deploy.md")), flags=re.S | re.M))
    assert sorted(shown) == sorted(os.listdir(deploy))
    for name, text in shown.items():
        assert text == read(os.path.join(deploy, name)), f"docs/deploy.md shows an old deploy/{name}"
