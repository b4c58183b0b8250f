"""The documentation stays true to the code: docs/cli.md is what the commands' own help generates,
every command and option is documented, the README stays short and runs what CI runs, every
relative link (with its #anchor) points at something that exists, benchmarks/README.md names
every benchmark script and the pages that cite it, docs/architecture.md's newcomer's path names
every module of the package once, and docs/chatbot.md's Python snippets run."""
from __future__ import annotations

import ast
import os
import re

import click
import pytest

from faqsearch.cli import cli
from faqsearch.cli.docs import render

from .conftest import ROOT, build_index

DOCS = os.path.join(ROOT, "docs")
README = os.path.join(ROOT, "README.md")
BENCHMARKS = os.path.join(ROOT, "benchmarks")
BENCHMARKS_README = os.path.join(BENCHMARKS, "README.md")
RESULTS = os.path.join(BENCHMARKS, "results")  # the full measurement records the user pages summarise
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
    return [README, BENCHMARKS_README, os.path.join(ROOT, "CHANGELOG.md")] + sorted(
        os.path.join(folder, f) for folder in (DOCS, RESULTS) for f in os.listdir(folder) if f.endswith(".md"))


def without_code(text: str) -> str:
    """Markdown with fenced code blocks and inline code removed (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


def outside_fences(path: str) -> list[str]:
    """The page's lines outside fenced code blocks (a heading inside one is no heading)."""
    lines, fenced = [], False
    for line in read(path).splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    assert not fenced, f"{path}: a code fence is opened and never closed (the rest of the page renders as code)"
    return lines


def anchors(path: str) -> set[str]:
    return {slug(m.group(1)) for line in outside_fences(path) if (m := re.match(r"#{1,6}\s+(.+?)\s*$", line))}


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


PAGE_LINES = 250  # a user page longer than this holds a record that belongs in benchmarks/results/
GENERATED_PAGES = {"cli.md"}  # generated from --help, as long as the commands make it


def test_every_docs_page_but_the_generated_reference_is_short():
    pages = sorted(f for f in os.listdir(DOCS) if f.endswith(".md") and f not in GENERATED_PAGES)
    assert pages, "no pages in docs/"
    long = {f: n for f in pages if (n := len(read(os.path.join(DOCS, f)).splitlines())) >= PAGE_LINES}
    assert not long, f"docs/ pages of {PAGE_LINES} lines or more (move measurement records to benchmarks/results/): {long}"


FIRST_SCREEN = 40  # lines of README.md a new reader sees before scrolling


def test_readme_first_screen_shows_the_corpus_format_and_where_to_start():
    screen = "\n".join(read(README).splitlines()[:FIRST_SCREEN])
    assert "\nid,question,answer,category\n" in screen, "README's first screen shows no corpus header"
    links = re.findall(r"\]\(([^)\s]+)\)", without_code(screen))
    assert {"docs/chatbot.md", "docs/troubleshooting.md", "docs/how-it-works.md#corpus-files"} <= set(links), links


def test_readme_corpus_example_reads_as_it_says(tmp_path):
    """The CSV in README's first screen is a corpus faqsearch reads: two rows of one id are one FAQ."""
    from faqsearch.corpus import read_corpus

    block = re.search(r"^```csv\n(.*?)^```", read(README), flags=re.S | re.M)
    assert block, "README has no csv block"
    path = tmp_path / "faq.csv"
    path.write_text(block.group(1), encoding="utf-8")
    faqs = read_corpus(str(path))
    assert [f.id for f in faqs] == ["ret-01", "shp-01"]
    assert len(faqs[0].questions) == 2 and faqs[0].category == "returns"


TROUBLESHOOTING = os.path.join(DOCS, "troubleshooting.md")
PLACEHOLDER = re.compile(r"<[A-Z][A-Z ]*>")  # what a run fills in: <PATH>, <NAME>, <WHAT TO DO>
SHORTEST_FRAGMENT = 8  # shorter pieces between placeholders ("index ", ": ") say nothing alone


def message_texts() -> list[str]:
    """Every string the package can print: the literal text of each string and f-string of
    faqsearch/ (implicit concatenations joined, each interpolated value a NUL, so a quoted fragment
    cannot span one), and the page's scripts as they are."""
    package, texts = os.path.join(ROOT, "faqsearch"), []
    for root, _, files in os.walk(package):
        for f in files:
            path = os.path.join(root, f)
            if f.endswith(".js"):
                texts.append(read(path))
            if not f.endswith(".py"):
                continue
            for node in ast.walk(ast.parse(read(path))):
                if isinstance(node, ast.JoinedStr):
                    texts.append("".join(v.value if isinstance(v, ast.Constant) else "\0" for v in node.values))
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    texts.append(node.value)
    return texts


def quoted_messages() -> list[str]:
    blocks = re.findall(r"^```text\n(.*?)^```", read(TROUBLESHOOTING), flags=re.S | re.M)
    return [line.removeprefix("Error: ") for block in blocks for line in block.splitlines() if line.strip()]


def test_troubleshooting_quotes_messages_the_code_prints():
    messages = quoted_messages()
    assert len(messages) >= 20, messages
    texts = message_texts()
    stale = []
    for message in messages:
        # the punctuation around a placeholder is often the code's joining of two texts ("{where}: {message}")
        fragments = [f for f in (f.strip(" :;,.()") for f in PLACEHOLDER.split(message)) if len(f) >= SHORTEST_FRAGMENT]
        assert fragments, f"nothing to check in {message!r}"
        stale += [f"{message!r}: {f!r}" for f in fragments if not any(f in t for t in texts)]
    assert not stale, "docs/troubleshooting.md quotes text faqsearch does not print: " + "; ".join(stale)


def test_troubleshooting_covers_what_users_hit():
    headings = anchors(TROUBLESHOOTING)
    for heading in ("no-confident-answer", "no-index", "a-damaged-or-newer-index", "the-corpus-file",
                    "a-model-that-cannot-be-loaded-offline", "the-page-or-the-api-does-not-load", "milvus",
                    "permissions-and-a-full-disk"):
        assert heading in headings, heading


def test_chatbot_snippets_run_and_the_bots_agree(tmp_path, monkeypatch, fake_models, capsys):
    """docs/chatbot.md's library, HTTP, LangChain and Haystack bots, run as written on the sample FAQ
    indexed with the fake encoder as `shop` (the HTTP one against the service in process): each
    prints its replies, and they reply alike to the same questions."""
    pytest.importorskip("langchain_core")
    pytest.importorskip("haystack")
    pytest.importorskip("fastapi")
    import httpx
    from fastapi.testclient import TestClient

    from faqsearch import FAQSearch
    from faqsearch.service import Service, create_app

    page = os.path.join(DOCS, "chatbot.md")
    snippets = re.findall(r"^```python\n(.*?)^```", read(page), flags=re.S | re.M)
    assert len(snippets) == 4, "docs/chatbot.md: the library, HTTP, LangChain and Haystack bots"
    monkeypatch.setenv("FAQSEARCH_HOME", str(tmp_path))
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")
    with build_index(os.path.join(ROOT, "sample_data", "faq.csv"), tmp_path / "shop") as shop:
        shop.set_min_confidence(0.35)  # the fake encoder's confidences run low: a stored question answers
    printed = []
    with TestClient(create_app(Service({"shop": str(tmp_path / "shop")}, watch=False))) as client:
        monkeypatch.setattr(httpx, "post", client.post)  # the snippet's localhost:8000 is this service
        bots = []
        for code in snippets:
            scope = {"__name__": "chatbot"}
            exec(compile(code, page, "exec"), scope)
            printed.append(capsys.readouterr().out.splitlines())
            bots.append(scope["reply"] if "reply" in scope else scope["bot"].invoke)
        stored = "When will I get my money back?"  # a question of the FAQ: answered, whatever the encoder
        refund = "We refund within 3 business days of receiving the return"
        assert [bot(stored)[:len(refund)] for bot in bots] == [refund] * 4
    library, http, langchain, haystack = printed
    assert len(library) == 4 and library[3] == "I don't know."  # blank input
    assert http == library[:3]
    said = [line if not line.startswith("I don't know") else "I don't know." for line in library]
    assert langchain[:2] == [said[0], said[2]] == haystack
    with FAQSearch.open(tmp_path / "shop") as faq:
        refund = faq.ask("when will my refund arrive?", k=1)
    context = refund.answers[0].answer if refund.answered else "I don't know."
    assert langchain[2].startswith("Human: ") and langchain[3:] == [f"FAQ: {context}",
                                                                    "Question: when will my refund arrive?"]


def test_deploy_md_shows_exactly_the_files_in_deploy():
    """docs/deploy.md shows each file of deploy/ whole, after a link to it, and no other: the recipe a
    reader copies from the page is the one tests/test_deploy.py checks."""
    deploy = os.path.join(ROOT, "deploy")
    shown = dict(re.findall(r"^\[`deploy/([^`]+)`\]\(\.\./deploy/\1\):\n\n```\w*\n(.*?)^```$",
                            read(os.path.join(DOCS, "deploy.md")), flags=re.S | re.M))
    assert sorted(shown) == sorted(os.listdir(deploy))
    for name, text in shown.items():
        assert text == read(os.path.join(deploy, name)), f"docs/deploy.md shows an old deploy/{name}"
