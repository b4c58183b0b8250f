"""faqsearch/index/format.py owns the index format: the names of an index's files are spelled there
and nowhere else in the package (read from the code's string constants, so comments and docstrings,
which explain, do not count; f-string parts and regular expressions do)."""
from __future__ import annotations

import ast
import os
import re

import faqsearch
from faqsearch.index import format as fmt

PACKAGE = os.path.dirname(faqsearch.__file__)
OWNER = os.path.join(PACKAGE, "index", "format.py")
NAMES = (fmt.CONFIG, fmt.STORE, fmt.FAISS, fmt.WHITENING, fmt.VECTORS, fmt.IDS, fmt.QUERY_LOG, fmt.CURRENT,
         fmt.LOCK, fmt.DELTA_PREFIX, *fmt.TOKENS_FILES)


def strings(path: str) -> list[tuple[int, str]]:
    """The string constants of a module with their lines, docstrings left out."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def spelled(text: str, name: str) -> bool:
    return name in text or re.escape(name) in text


def test_strings_sees_literals_fstrings_and_patterns_but_not_docstrings(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('"""config.json in a docstring"""\n# store.db in a comment\n'
                   'a = f"{x}/index.faiss"\nb = r"^whitening\\.npz$"\n')
    found = [name for _, text in strings(str(src)) for name in NAMES if spelled(text, name)]
    assert sorted(found) == sorted([fmt.FAISS, fmt.WHITENING])


def test_the_index_files_are_spelled_in_format_only():
    found = []
    for root, _, files in os.walk(PACKAGE):
        for f in files:
            path = os.path.join(root, f)
            if not f.endswith(".py") or os.path.samefile(path, OWNER):
                continue
            found += [f"{os.path.relpath(path, PACKAGE)}:{line}: {name!r} in {text[:60]!r}"
                      for line, text in strings(path) for name in NAMES if spelled(text, name)]
    assert not found, "spell these through faqsearch.index.format:\n" + "\n".join(found)


def test_format_spells_each_name():
    own = [text for _, text in strings(OWNER)]
    assert all(any(spelled(t, name) for t in own) for name in NAMES)


def test_patterns_match_the_names_written():
    assert fmt.VERSION_NAME.match(fmt.version_name(7)) and fmt.version_name(7) == "v00000007"
    assert fmt.DELTA.match(fmt.delta_file(3)).group(1) == "3"
    for name in (*fmt.FILES.values(), fmt.delta_file(12), fmt.CONFIG + fmt.TMP, fmt.STORE + "-wal"):
        assert fmt.OWN_FILES.match(name), name
    for name in (fmt.CURRENT, fmt.CURRENT + fmt.TMP, fmt.LOCK, fmt.QUERY_LOG, fmt.QUERY_LOG + "-journal"):
        assert fmt.TOP.match(name), name
    for name in ("notes.txt", "config.jsonx", fmt.version_name(1), "v1" + fmt.TMP):
        assert not fmt.OWN_FILES.match(name) and not fmt.TOP.match(name), name
    assert fmt.BUILDING.match(f"{fmt.version_name(2)}{fmt.TMP}-0a1b")
