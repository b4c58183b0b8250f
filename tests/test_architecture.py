"""The dependency rule of docs/architecture.md, and the size limits, checked from the source:

    cli, service  ->  engine  ->  build, search, snapshot, edits, tuning, backends, indexdir, ...
                  ->  store, whitening, encoders, corpus, config, lexical, ...  ->  defaults, errors, results

A module never imports one of a higher layer (function-level imports included: hiding an import in
a function does not remove the dependency), and no import cycle exists between modules."""
from __future__ import annotations

import ast
import os

from .conftest import ROOT

PACKAGE = os.path.join(ROOT, "faqsearch")

# layer of each module, by its longest matching dotted prefix (under faqsearch.)
LAYERS = {
    "defaults": 0, "errors": 0, "filters": 0, "results": 0, "text": 0, "progress": 0, "files": 0, "columns": 0,
    "index.format": 0,  # the index format's names and typed config: imported by every layer
    "index.address": 1,  # where an index that lives in Milvus is, and its local cache (index/config.py resolves it)
    "lexical": 1, "whitening": 1, "corpus": 1, "index.config": 1, "evaluation": 1,
    "querylog": 1, "confidence": 1, "tokenmatch": 1, "prototypes": 1, "hub": 1, "encoders": 1, "gaps": 1, "finetune": 1, "generators": 1, "simbert": 1,
    "index": 2, "backends": 2, "edits": 2, "traffic": 2, "search": 2, "build": 2, "tuning": 2, "manage": 2,
    "generators.augment": 2, "asking": 2,
    "engine": 3,
    "cli": 4, "service": 4, "integrations": 4, "": 4,  # faqsearch/__init__.py: the public API
}
LIMITS = {"engine": 300}  # lines; every other module 500, files of cli/ 300
EXCEPTIONS: dict[str, str] = {}  # module -> why it may be longer (none today)


def modules() -> dict[str, str]:
    out = {}
    for root, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(root, f), PACKAGE)[:-3].replace(os.sep, ".")
                name = rel[: -len(".__init__")] if rel.endswith("__init__") else rel
                out["" if name == "__init__" else name] = os.path.join(root, f)
    return out


def layer(name: str) -> int:
    best = max((p for p in LAYERS if p == "" or name == p or name.startswith(p + ".")), key=len)
    return LAYERS[best]


def _type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imports(name: str, path: str, known: set[str]) -> set[str]:
    """The faqsearch modules a module imports (TYPE_CHECKING blocks aside), as dotted names."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    is_package = path.endswith("__init__.py")
    base = name.split(".") if name else []
    if not is_package:
        base = base[:-1]
    found: set[str] = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                for a in child.names:
                    if a.name.startswith("faqsearch"):
                        found.add(a.name[len("faqsearch."):] if a.name != "faqsearch" else "")
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    parts = base[: len(base) - (child.level - 1)] if child.level > 1 else list(base)
                    mod = ".".join(parts + ([child.module] if child.module else []))
                elif child.module and child.module.startswith("faqsearch"):
                    mod = child.module[len("faqsearch."):] if child.module != "faqsearch" else ""
                else:
                    continue
                for a in child.names:
                    sub = f"{mod}.{a.name}" if mod else a.name
                    found.add(sub if sub in known else mod)
            visit(child)

    visit(tree)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def test_no_module_imports_a_higher_layer():
    bad = [f"{src or 'faqsearch'} (layer {layer(src)}) imports {dst} (layer {layer(dst)})"
           for src, dsts in graph().items() for dst in dsts if layer(dst) > layer(src)]
    assert not bad, "\n".join(sorted(bad))


def test_no_import_cycles():
    g = graph()
    state: dict[str, int] = {}
    cycles = []

    def dfs(node, stack):
        state[node] = 1
        for nxt in sorted(g[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                dfs(nxt, stack + [nxt])
        state[node] = 2

    for n in sorted(g):
        if n not in state:
            dfs(n, [n])
    assert not cycles, "\n".join(cycles)


def test_the_checker_sees_hidden_imports():
    """A function-level import counts (the rule would be empty otherwise)."""
    g = graph()
    assert "engine" in g["cli.commands.ask"]  # imported inside the command function
    assert "backends.embedded" in g["backends"]  # the factory's lazy import


def test_module_sizes():
    too_long = []
    for name, path in modules().items():
        n = sum(1 for _ in open(path, encoding="utf-8"))
        limit = LIMITS.get(name, 300 if name.startswith("cli.") else 500)
        if n > limit and name not in EXCEPTIONS:
            too_long.append(f"{name}: {n} lines (limit {limit})")
    assert not too_long, "\n".join(too_long)


def test_npy_files_are_read_under_the_lock():
    """numpy parses .npy headers with ast.literal_eval, which CPython 3.11 does not keep apart between
    threads (gh-106905): every read in the package goes through files.load_npy or holds NPY_LOCK."""
    bare = []
    for name, path in modules().items():
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            if "np.load(" in line and name != "files" and "NPY_LOCK" not in line:
                bare.append(f"{name}:{n}: {line.strip()}")
    assert not bare, "\n".join(bare)


def test_only_backends_reach_into_a_backend():
    """Code outside faqsearch/backends/ uses a backend through the protocol of backends/base.py
    (``backend_for``, ``backend_named``): it never imports the embedded or Milvus modules themselves."""
    inside = [f"faqsearch.backends.{kind}" for kind in ("embedded", "milvus")]
    leaks = [f"{src} imports {dst}" for src, dsts in graph().items() if not src.startswith("backends")
             for dst in dsts if any(f"faqsearch.{dst}" == p or f"faqsearch.{dst}".startswith(p + ".") for p in inside)]
    assert not leaks, "\n".join(sorted(leaks))
