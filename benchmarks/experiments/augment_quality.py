"""Does augmentation help retrieval? MRR@10 and Recall@1 before and after `augment -n N`.

For each set: build with defaults, evaluate dense and hybrid on the held-out labelled queries, add
N paraphrases per FAQ with the default generator (SmolLM2, re-ranked by the index), evaluate again.
Same figures as `faqsearch eval`. Sets: CovidFAQ (one question per FAQ) and sample_data (en).

    python benchmarks/experiments/augment_quality.py [--n 3] [--out benchmarks/results/augment_quality.md]
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder, then benchmarks/ (common.py, speed.py, synth.py)
from common import DATA, SAMPLE, add_sets_option, emit, machine, wanted_sets  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.evaluation import evaluate, read_labelled_queries  # noqa: E402
from faqsearch.generators import ROUNDS, load_generator  # noqa: E402

SETS = [("CovidFAQ", os.path.join(DATA, "CovidFAQ", "faqs.csv"), os.path.join(DATA, "CovidFAQ", "queries.csv")),
        ("sample_data (en)", os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv"))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="candidate batches at most per FAQ (default as augment)")
    ap.add_argument("--out")
    add_sets_option(ap, SETS)
    args = ap.parse_args()
    wanted = wanted_sets(ap, args, SETS)
    logging.basicConfig(level=logging.WARNING)
    gen = load_generator("smollm2")
    lines = [f"Measured {machine()}; `python benchmarks/experiments/augment_quality.py --n {args.n} --rounds {args.rounds}`. "
             "MRR@10 / Recall@1 on the "
             "held-out labelled queries; default index settings; paraphrases of each FAQ's first question.", "",
             "| set | mode | without | with augment | change (MRR@10) |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, corpus, qfile in SETS:
            if name not in wanted:
                continue
            queries = read_labelled_queries(qfile)
            e = FAQSearch.build(corpus, os.path.join(tmp, "ix"), force=True)
            before = {m: evaluate(e, queries, mode=m) for m in ("dense", "hybrid")}
            t = time.perf_counter()
            rep = e.augment(gen, n=args.n, progress=True, rounds=args.rounds)
            secs = time.perf_counter() - t
            after = {m: evaluate(e, queries, mode=m) for m in ("dense", "hybrid")}
            for m in ("dense", "hybrid"):
                b, a = before[m], after[m]
                lines.append(f"| {name} ({len(queries)} queries; +{rep.added_questions} questions in {secs:.0f} s) "
                             f"| {m} | {100 * b['mrr@10']:.2f} / {100 * b['recall@1']:.2f} | "
                             f"{100 * a['mrr@10']:.2f} / {100 * a['recall@1']:.2f} | "
                             f"{100 * (a['mrr@10'] - b['mrr@10']):+.2f} |")
                print(lines[-1], flush=True)
            e.close()
    emit(lines, args.out)


if __name__ == "__main__":
    main()
