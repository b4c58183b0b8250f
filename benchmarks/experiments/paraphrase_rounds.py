"""How many candidate batches a paraphrase call should draw: what each later batch adds against what
it costs, on the development split of benchmarks/experiments/paraphrase_dev.py (disjoint from the report's inputs).

Every input draws all batches once (seeds 0, 1, 2, ...); each policy is then replayed on those same
batches, so the policies differ only in where they stop. Per policy: paraphrases returned, share new
and similar under USE multilingual (cosine >= 0.7, not the re-ranker), inputs with none, and the
seconds the batches it drew took (sampling and screening, warm model). Run alone on the machine.

    python benchmarks/experiments/paraphrase_rounds.py [--batches 3] [--n 5]
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder, then benchmarks/ (common.py, speed.py, synth.py)
from common import machine  # noqa: E402
from paraphrase_dev import CANDIDATES, SIMILAR, dev_inputs  # noqa: E402

from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.generators import DEFAULT_GENERATOR, ROUNDS, diverse_top, encoder_scorer, load_generator, normal  # noqa: E402
from faqsearch.generators.recipe import screen_rounds  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=3, help="batches drawn per input (the most any policy may use)")
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--generator", default=DEFAULT_GENERATOR)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rerank, use = encoder_scorer(load_encoder("minilm")), encoder_scorer(load_encoder("use-multilingual"))
    gen = load_generator(args.generator)
    screen_rounds(gen, "warm up the model please?", 1, CANDIDATES, rerank, rounds=1)
    held = dev_inputs()
    runs = []  # per input: (text, [(screened batch, seconds)])
    for i, (_, q) in enumerate(held):
        batches = []
        for r in range(args.batches):
            t = time.perf_counter()
            got = screen_rounds(gen, q, args.n, CANDIDATES, rerank, seed=r, rounds=1)
            batches.append((got, time.perf_counter() - t))
        runs.append((q, batches))
        print(f"{i + 1}/{len(held)} {q!r}: kept per batch {[sum(s.reason == 'kept' for s in b) for b, _ in batches]}",
              file=sys.stderr, flush=True)

    def replay(stop):
        """``stop(r, kept_so_far, kept_this_batch)`` -> draw no more after batch r (0-based)."""
        total = good = none = 0
        secs = []
        for q, batches in runs:
            pooled, seen, spent = [], set(), 0.0
            for r, (batch, s) in enumerate(batches):
                spent += s
                new = 0
                for c in batch:  # a later batch's repeat of an earlier candidate is a duplicate
                    key = normal(c.text)
                    if c.reason == "kept" and key not in seen:
                        pooled.append(c)
                        new += 1
                    seen.add(key)
                if stop(r, sum(c.reason == "kept" for c in pooled), new):
                    break
            got = diverse_top(pooled, args.n)
            secs.append(spent)
            none += not got
            if got:
                sims = use([p.text for p in got]) @ use([q])[0]
                total += len(got)
                good += sum(normal(p.text) != normal(q) and s >= SIMILAR for p, s in zip(got, sims))
        return total, good, none, secs

    b = args.batches
    policies = [("1 batch (--rounds 1)", lambda r, k, new: True)]
    policies += [(f"up to {m} while fewer than {args.n} pass{' (the default)' if m == ROUNDS else ''}",
                  lambda r, k, new, m=m: k >= args.n or r + 1 >= m) for m in range(2, b + 1)]
    policies.append((f"up to {b}, none after 2 batches that passed nothing",
                     lambda r, k, new: k >= args.n or r + 1 >= b or (k == 0 and r + 1 >= 2)))
    policies.append((f"up to {b}, stop after a batch that adds nothing",
                     lambda r, k, new: k >= args.n or r + 1 >= b or new == 0))
    policies.append((f"up to {b}, stop when the first batch passes nothing",
                     lambda r, k, new: k >= args.n or r + 1 >= b or k == 0))
    print(f"\nMeasured {machine()}; {len(held)} inputs of the development split, {args.generator}, "
          f"n={args.n} from {CANDIDATES} candidates per batch, seeds 0..{b - 1}.\n")
    print("| policy | returned | new and similar (USE >= 0.7) | inputs with none | s / input (median, mean, max) |")
    print("|---|---|---|---|---|")
    for label, stop in policies:
        total, good, none, secs = replay(stop)
        print(f"| {label} | {total} / {args.n * len(runs)} | {100 * good / max(total, 1):.0f}% | {none} | "
              f"{statistics.median(secs):.1f}, {statistics.mean(secs):.1f}, {max(secs):.1f} |")


if __name__ == "__main__":
    main()
