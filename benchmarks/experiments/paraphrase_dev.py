"""Prompt choices for the causal LM generator, measured on a development split disjoint from the report.

benchmarks/results/paraphrase_quality.md uses sample queries [0::4][:40] and CovidFAQ questions [0::3][:20];
this script uses [2::4][:40] and [1::3][:20], so a prompt chosen here is not chosen on the report's
inputs. Per prompt variant: paraphrases returned, share new and similar under USE multilingual
(cosine >= 0.7, not the re-ranker), seconds per input; --show prints every returned paraphrase.

    python benchmarks/experiments/paraphrase_dev.py [--variants current,detail] [--show]
"""
from __future__ import annotations

import argparse
import csv
import logging
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder, then benchmarks/ (common.py, speed.py, synth.py)
from common import DATA, SAMPLE, machine  # noqa: E402

from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import read_labelled_queries  # noqa: E402
from faqsearch.generators import encoder_scorer, load_generator, normal, paraphrase  # noqa: E402
from faqsearch.generators.causal import EXAMPLES, INSTRUCTION  # noqa: E402

SIMILAR, N, CANDIDATES = 0.7, 5, 24

DETAIL_INSTRUCTION = (
    "You reword what a customer wrote. Write the same message in different words. Keep every detail "
    "(the product, the action, who, when, any condition or negation) and the same request, from the same "
    "person's point of view (keep I and my), as a question if it was a question. Reply with the reworded "
    "message only, never an answer.")
DETAIL_EXAMPLES = (
    ("Where can I see my order history?", "Where do I find the list of my past orders?"),
    ("Can I pay with a credit card?", "Is paying by credit card possible?"),
    ("How long does delivery take?", "How many days does it take for an order to be delivered?"),
    ("Can I return an item without the receipt?", "Is it possible to send back an item if I don't have the receipt?"),
    ("I lost my bank card", "My bank card has gone missing"),
    ("parcel still not here after a week", "my parcel still hasn't arrived a week later"),
)

WELLFORMED_INSTRUCTION = (
    "You reword what a customer wrote. Write the same message in different words, as one complete, "
    "well-formed sentence. Keep every detail (the product, the action, who, when, any condition or "
    "negation) and the same request, from the same person's point of view (keep I and my), as a question "
    "if it was a question. Reply with the reworded message only, never an answer.")
WELLFORMED_EXAMPLES = DETAIL_EXAMPLES[:4] + (
    ("I lost my bank card", "My bank card has gone missing."),
    ("parcel still not here", "My parcel has still not arrived."),
)

# the current prompt (questions from requests) with the detail-keeping rule and tighter examples
QUESTION_DETAIL_INSTRUCTION = (
    "You reword what a customer wrote. Write the same message in different words, from the same person's "
    "point of view (keep I and my), as a question if it was a question. Keep every detail: the product, the "
    "action, who, when, and any condition or negation. Reply with the reworded message only, never an answer.")
QUESTION_DETAIL_EXAMPLES = (
    ("Where can I see my order history?", "How do I look up my past orders?"),
    ("Can I pay with a credit card?", "Do you accept credit cards as payment?"),
    ("How long does delivery take?", "How many days does delivery usually take?"),
    ("Can I return an item without the receipt?", "Is it possible to send back an item if I don't have the receipt?"),
    ("I lost my bank card", "What should I do now that I have lost my bank card?"),
    ("parcel still not here after a week", "My package has not arrived after a week, where is it?"),
)

VARIANTS = {
    "current": (INSTRUCTION, EXAMPLES),
    "detail": (DETAIL_INSTRUCTION, DETAIL_EXAMPLES),
    "wellformed": (WELLFORMED_INSTRUCTION, WELLFORMED_EXAMPLES),
    "question-detail": (QUESTION_DETAIL_INSTRUCTION, QUESTION_DETAIL_EXAMPLES),
}


def dev_inputs() -> list[tuple[str, str]]:
    queries = read_labelled_queries(os.path.join(SAMPLE, "queries.csv"))
    held = [("sample query", q.text) for q in queries[2::4][:40]]
    with open(os.path.join(DATA, "CovidFAQ", "faqs.csv"), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    qcol = next(c for c in rows[0] if "question" in c.lower())
    return held + [("CovidFAQ question", r[qcol].strip()) for r in rows[1::3][:20]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--show", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rerank = encoder_scorer(load_encoder("minilm"))
    use = encoder_scorer(load_encoder("use-multilingual"))
    held = dev_inputs()
    rows = []
    for name in args.variants.split(","):
        instruction, examples = VARIANTS[name]
        gen = load_generator("smollm2", instruction=instruction, examples=examples)
        total = similar = 0
        dom: dict[str, list[int]] = {}
        t = time.perf_counter()
        for domain, q in held:
            got = paraphrase(gen, q, N, CANDIDATES, rerank, seed=0)
            sims = (use([p.text for p in got]) @ use([q])[0]).tolist() if got else []
            d = dom.setdefault(domain, [0, 0])
            for p, s in zip(got, sims):
                ok = normal(p.text) != normal(q) and s >= SIMILAR
                total += 1
                similar += ok
                d[0] += 1
                d[1] += ok
                if args.show:
                    print(f"{name} | {q} -> {p.text} (re-rank {p.score:.2f}, USE {s:.2f}{'' if ok else ' NOT'})")
        secs = (time.perf_counter() - t) / len(held)
        per = "; ".join(f"{k}: {v[1]}/{v[0]}" for k, v in dom.items())
        rows.append(f"| {name} | {total} / {N * len(held)} | {100 * similar / max(total, 1):.0f}% ({per}) | {secs:.1f} |")
        print(rows[-1], flush=True)
    print(f"\nMeasured {machine()}; development split (sample queries [2::4][:40], CovidFAQ [1::3][:20])\n")
    print("| prompt | returned | new and similar (USE >= 0.7) | s / input |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
