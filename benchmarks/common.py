"""Helpers shared by the benchmark scripts (not part of the package)."""
from __future__ import annotations

import os
import platform
import time
from typing import Any, Sequence

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "sample_data")
DATA = os.environ.get("FAQSEARCH_DATA", os.path.join(os.path.dirname(ROOT), "shared", "data"))


class CachingEncoder:
    """Wraps an encoder so that each distinct text is encoded once across many index builds."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self._cache: dict[str, np.ndarray] = {}
        self._tokens: dict[str, Any] = {}
        if hasattr(inner, "token_states"):  # token matching (faqsearch.tokenmatch) where the encoder has it
            self.token_states = self._token_states

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            for t, v in zip(todo, self.inner.encode(todo, batch_size=batch_size, progress=progress)):
                self._cache[t] = v
        return np.stack([self._cache[t] for t in texts]) if texts else np.empty((0, self.dimension), np.float32)

    def _token_states(self, texts: Sequence[str], batch_size: int = 32) -> list:
        todo = list(dict.fromkeys(t for t in texts if t not in self._tokens))
        if todo:
            for t, v in zip(todo, self.inner.token_states(todo, batch_size=batch_size)):
                self._tokens[t] = v
        return [self._tokens[t] for t in texts]

    def spec(self) -> dict[str, Any]:
        return self.inner.spec()


def machine() -> str:
    import torch

    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__} "
            f"threads {torch.get_num_threads()}, {time.strftime('%Y-%m-%d')}")


def emit(lines: list[str], out: str | None) -> None:
    """Print a result table and, with --out, write it to a file."""
    text = "\n".join(lines)
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text + "\n")


def corpus_rows(path: str) -> tuple[list[dict[str, str]], str]:
    """A CSV corpus's rows and the name of its FAQ id column ("id", else "faq_id")."""
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return rows, "id" if "id" in rows[0] else "faq_id"


def write_corpus_rows(path: str, fields: Sequence[str], rows) -> str:
    """``rows`` (dicts) written as a CSV corpus with the columns ``fields``; returns ``path``."""
    import csv

    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(fields))
        w.writeheader()
        w.writerows(rows)
    return path


def sts_retrieval_set(folder: str, files: Sequence[str], out_dir: str, name: str, min_score: float = 4.0):
    """An FAQ retrieval set made from an STS corpus, written as CSV files (corpus, queries).

    Every sentence is an FAQ with one question; for each pair scored >= ``min_score`` (0-5 scale:
    "mostly equivalent"), sentence2 is a query (and is removed from the FAQs) and sentence1's FAQ
    its answer. No labels beyond the data's own."""
    import csv

    from faqsearch.evaluation import read_pairs

    pairs, sentences = [], []
    for f in files:
        a, b, y = read_pairs(os.path.join(folder, f))
        sentences += a + b
        pairs += [(s1, s2) for s1, s2, score in zip(a, b, y) if score >= min_score and s1 != s2]
    query_texts = {b for _, b in pairs}
    docs = [s for s in dict.fromkeys(sentences) if s and s not in query_texts]
    doc_id = {s: f"s{i}" for i, s in enumerate(docs)}
    corpus = os.path.join(out_dir, f"{name}_faq.csv")
    queries = os.path.join(out_dir, f"{name}_queries.csv")
    with open(corpus, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "question", "answer"])
        w.writerows([doc_id[s], s, f"answer {doc_id[s]}"] for s in docs)
    seen = set()
    with open(queries, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["query", "faq_id"])
        for a, b in pairs:
            if a in doc_id and b not in seen:
                seen.add(b)
                w.writerow([b, doc_id[a]])
    return corpus, queries


def add_sets_option(ap, sets) -> None:
    """``--sets``: comma-separated names of ``sets`` ((name, ...) tuples) to run, all by default."""
    ap.add_argument("--sets", default=",".join(name for name, *_ in sets),
                    help="comma-separated names of the sets to run (default: all)")


def wanted_sets(ap, args, sets) -> set[str]:
    """The set names ``--sets`` asked for; an unknown one is a usage error naming the choices."""
    wanted = set(args.sets.split(","))
    unknown = wanted - {name for name, *_ in sets}
    if unknown:
        ap.error(f"unknown set(s) {', '.join(sorted(unknown))}; choose from: {', '.join(n for n, *_ in sets)}")
    return wanted


def half_split(queries: list) -> tuple[list, list]:
    """The fixed split of the "labels arriving" runs: half of ``queries`` drawn by seed 0 (to assign to
    their FAQs), and the other half (then asked), each in the queries' order."""
    import random

    order = list(range(len(queries)))
    random.Random(0).shuffle(order)
    given = set(order[:len(queries) // 2])
    return [queries[i] for i in sorted(given)], [q for i, q in enumerate(queries) if i not in given]


def approve_by_faq(engine, queries) -> None:
    """Approve ``queries`` as questions of their (first) gold FAQ: one `approve` per FAQ."""
    groups: dict[str, list[str]] = {}
    for q in queries:
        groups.setdefault(sorted(q.gold)[0], []).append(q.text)
    for faq_id, texts in groups.items():
        engine.approve(faq_id, texts)
