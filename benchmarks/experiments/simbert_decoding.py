"""Speed of SimBERT sampling with and without the KV cache, same run, same machine, interleaved.

Both paths draw the same tokens for a seed (tests/test_simbert.py checks the logits are equal),
so they run the same number of steps; the cache encodes [CLS] A [SEP] once and each step runs only
the new token, instead of the whole sequence again.

    python benchmarks/experiments/simbert_decoding.py [--model DIR] [--out results.md]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder, then benchmarks/ (common.py, speed.py, synth.py)
from common import emit, machine  # noqa: E402

from faqsearch.encoders import _minilm_path  # noqa: E402
from faqsearch.simbert import SimBert, sample  # noqa: E402

TEXTS = ["how do I reset my password?", "my parcel arrived damaged, what should I do",
         "can I pay for a laptop in monthly instalments?"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a trained SimBERT directory (default: the bundled MiniLM with a fresh head)")
    ap.add_argument("--candidates", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    model = SimBert.from_pretrained(args.model or _minilm_path())
    timings = {True: [], False: []}
    for _ in range(args.repeats):
        for cached in (True, False):  # interleaved
            t = time.perf_counter()
            for text in TEXTS:
                sample(model, text, n=args.candidates, max_new_tokens=args.max_new_tokens, seed=0, use_cache=cached)
            timings[cached].append((time.perf_counter() - t) / len(TEXTS))
    c, u = statistics.median(timings[True]), statistics.median(timings[False])
    lines = [f"Measured {machine()}; {args.candidates} candidates x up to {args.max_new_tokens} tokens per input, "
             f"seconds per input, median (min-max) of {args.repeats} x {len(TEXTS)} inputs", "",
             "| decoding | s per input | speed-up |", "|---|---|---|",
             f"| KV cache (each step runs the new token only) | {c:.2f} ({min(timings[True]):.2f}-{max(timings[True]):.2f}) "
             f"| {u / c:.1f}x |",
             f"| no cache (each step re-runs the whole sequence) | {u:.2f} ({min(timings[False]):.2f}-"
             f"{max(timings[False]):.2f}) | 1.0x |"]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
