"""Seconds per question for each paraphrase generator (warm, n=5 from 24 candidates), and what int8
costs: the share of returned paraphrases that are new and similar (USE multilingual >= 0.7).

Run alone on the machine. Inputs: 20 sample queries (every 8th of queries.csv).

    python benchmarks/paraphrase_speed.py [--unilm DIR ...] [--out FILE]
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SAMPLE, emit, machine  # noqa: E402

from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import read_labelled_queries  # noqa: E402
from faqsearch.generators.recipe import encoder_scorer  # noqa: E402
from faqsearch.generators import load_generator, normal, paraphrase  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unilm", nargs="*", default=[], help="SimBERT model directories to time as well")
    ap.add_argument("--out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    qs = [q.text for q in read_labelled_queries(os.path.join(SAMPLE, "queries.csv"))][::8][:20]
    rerank, use = encoder_scorer(load_encoder("minilm")), encoder_scorer(load_encoder("use-multilingual"))
    lines = [f"Measured {machine()}; {len(qs)} sample queries, n=5 from 24 candidates, warm model.", "",
             "| generator | load s | s / question (median, min-max) | returned | new and similar (USE >= 0.7) |",
             "|---|---|---|---|---|"]
    runs = [("SmolLM2-135M-Instruct fp32 (default)", lambda: load_generator("smollm2")),
            ("SmolLM2-135M-Instruct int8 decoder layers", lambda: load_generator("smollm2", quantize=True))]
    runs += [(f"UniLM {os.path.basename(d.rstrip('/'))}", lambda d=d: load_generator(d)) for d in args.unilm]
    for label, make in runs:
        t = time.perf_counter()
        gen = make()
        load = time.perf_counter() - t
        paraphrase(gen, "warm up the model please?", scorer=rerank)
        times, total, good = [], 0, 0
        for q in qs:
            t = time.perf_counter()
            got = paraphrase(gen, q, n=5, scorer=rerank, seed=0)
            times.append(time.perf_counter() - t)
            if got:
                v = use([q] + [p.text for p in got])
                sims = v[1:] @ v[0]
                total += len(got)
                good += sum(normal(p.text) != normal(q) and s >= 0.7 for p, s in zip(got, sims))
        lines.append(f"| {label} | {load:.1f} | {np.median(times):.2f} ({min(times):.2f}-{max(times):.2f}) | "
                     f"{total} / {5 * len(qs)} | {100 * good / max(total, 1):.0f}% |")
        del gen
    emit(lines, args.out)


if __name__ == "__main__":
    main()
