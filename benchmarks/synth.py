"""Synthesise a larger FAQ corpus from sample_data by recombining real questions.

Each FAQ question of sample_data/faq.csv is wrapped in conversational prefixes and suffixes
("hi, ... thanks"), giving up to 10 x 8 = 80 variants per question; --per-faq variants are kept per
FAQ (answers and ids unchanged). Used to time tune/ingest on ~10k questions.

    python benchmarks/synth.py --per-faq 67 --out /tmp/faq10k.csv
"""
from __future__ import annotations

import argparse
import csv
import itertools
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SAMPLE  # noqa: E402

from faqsearch.corpus import read_corpus  # noqa: E402

PREFIXES = ["", "hi, ", "hello, ", "quick question: ", "please help - ", "sorry to bother you, ", "hey there, ",
            "i need to know: ", "good morning, ", "urgent: "]
SUFFIXES = ["", " thanks", " thank you!", " asap", " please", " cheers", " (asking for my mum)", " help"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-faq", type=int, default=67)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = random.Random(0)
    with open(args.out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "question", "answer"])
        for faq in read_corpus(os.path.join(SAMPLE, "faq.csv")):
            forms = [p + q + s for q in faq.questions for p, s in itertools.product(PREFIXES, SUFFIXES)]
            rng.shuffle(forms)
            for q in forms[:args.per_faq]:
                w.writerow([faq.id, q, faq.answer])


if __name__ == "__main__":
    main()
