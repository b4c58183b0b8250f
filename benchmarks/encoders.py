"""The bundled encoders side by side, same run, same machine: ranking by default `ingest` (R@1 and
MRR@10 in the mode each index chooses for itself) and what each costs (ingest time, one ask's
latency, the model's first load into a fresh process).

For each set and encoder: `FAQSearch.build` (timed; the model already extracted and exported, as
after its first use), 100 single asks of the set's first queries (p50 / p90 ms, after 5 warm-up
asks; none asked before, so each is encoded), then every test query through `evaluate`. Encoders alternate set by set.

    python benchmarks/encoders.py [--models minilm,mpnet] [--sets "sample_data en,CovidFAQ"] [--out FILE]
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DATA, SAMPLE, add_sets_option, emit, machine, wanted_sets  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.evaluation import evaluate, read_labelled_queries  # noqa: E402
from faqsearch.hub import cache_dir  # noqa: E402

SETS = [("sample_data en", os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv")),
        ("CovidFAQ", os.path.join(DATA, "CovidFAQ", "faqs.csv"), os.path.join(DATA, "CovidFAQ", "queries.csv")),
        ("Banking77 faqs_1", os.path.join(DATA, "Banking77", "faqs_1.csv"), os.path.join(DATA, "Banking77", "queries.csv")),
        ("Banking77 faqs_5", os.path.join(DATA, "Banking77", "faqs_5.csv"), os.path.join(DATA, "Banking77", "queries.csv"))]


def first_load(model: str, cache: str) -> float:
    """Seconds for a new process to load the encoder and encode one text, with faqsearch's cache ``cache``."""
    code = ("import time; t = time.perf_counter(); from faqsearch.encoders import load_encoder; "
            f"load_encoder({model!r}).encode(['hello']); print(time.perf_counter() - t)")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                env={**os.environ, "FAQSEARCH_CACHE": cache}).stdout)


def row(name: str, corpus: str, qfile: str, model: str, work: str) -> str:
    queries = read_labelled_queries(qfile)
    start = time.perf_counter()
    engine = FAQSearch.build(corpus, os.path.join(work, f"{name}-{model}".replace(" ", "_")), force=True, model=model)
    built = time.perf_counter() - start
    times = []  # asked before `evaluate`, which would leave their vectors in the query cache
    for i, q in enumerate(queries[:105]):
        t = time.perf_counter()
        engine.ask(q.text)
        if i >= 5:
            times.append(1000 * (time.perf_counter() - t))
    got = evaluate(engine.searcher(), queries)
    n = engine.config.counts.questions
    mode = engine.mode or ""
    engine.close()
    p90 = statistics.quantiles(times, n=10)[-1]
    return (f"| {name} | {model} | {n} | {100 * got['recall@1']:.2f} / {100 * got['mrr@10']:.2f} | {mode} | "
            f"{built:.1f} ({n / built:.0f} questions/s) | {statistics.median(times):.1f} / {p90:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="minilm,mpnet")
    ap.add_argument("--out")
    add_sets_option(ap, SETS)
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    lines = [f"Measured {machine()} with `python benchmarks/encoders.py --models {args.models}`", "",
             "| encoder | a new process loads it and encodes one text: first use (empty cache) s | later s |",
             "|---|---|---|"]
    for model in models:
        with tempfile.TemporaryDirectory() as cache:  # the first use extracts (mpnet) and exports to ONNX
            lines.append(f"| {model} | {first_load(model, cache):.1f} | {first_load(model, cache):.2f} |")
        first_load(model, cache_dir(""))  # the cache the builds below use: filled before they are timed
    lines += ["", "| set | encoder | questions | R@1 / MRR@10 | mode | ingest s | one ask p50 / p90 ms |",
              "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as work:
        wanted = wanted_sets(ap, args, SETS)
        for name, corpus, qfile in [s for s in SETS if s[0] in wanted]:
            for model in models:
                lines.append(row(name, corpus, qfile, model, work))
                print(lines[-1], flush=True)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
