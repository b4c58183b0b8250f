"""Which 'near' suggestions a confidence floor keeps (`faqsearch suggest`: a logged query no FAQ answered
is offered to each FAQ among its top 3). Each set's in-scope queries and out-of-scope questions are
asked of an index built with the defaults; of the unanswered ones, each of the first 3 answers is a near
offer, counted as to the query's right FAQ, to another FAQ (an in-scope query), or of an off-topic
question, at each floor on the answer's confidence.

    python benchmarks/experiments/near_floor.py [--out FILE]
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
from calibration import out_of_scope  # noqa: E402
from common import DATA, SAMPLE, CachingEncoder, emit, machine  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.corpus import read_texts  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import read_labelled_queries  # noqa: E402

FLOORS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    enc, tmp = CachingEncoder(load_encoder("minilm")), tempfile.mkdtemp()
    bank_oos, covid_oos = out_of_scope()
    sets = {  # name: corpus, queries (the first N), out-of-scope questions
        "sample_data en": (os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv"), None,
                           read_texts(os.path.join(SAMPLE, "offtopic.txt"))),
        "CovidFAQ": (os.path.join(DATA, "CovidFAQ", "faqs.csv"), os.path.join(DATA, "CovidFAQ", "queries.csv"), None,
                     covid_oos[:300]),
        "Banking77 faqs_5": (os.path.join(DATA, "Banking77", "faqs_5.csv"), os.path.join(DATA, "Banking77", "queries.csv"),
                             1000, bank_oos[:300]),
    }
    lines = [f"Measured {machine()} with `python benchmarks/experiments/near_floor.py`", "",
             "| set | queries / off-topic asked | near offers at a confidence of at least: "
             + " / ".join(f"{f:g}" for f in FLOORS) + " (to the right FAQ; to another FAQ; of off-topic questions) |",
             "|---|---|---|"]
    for name, (corpus, qfile, first, oos) in sets.items():
        print(name, "...", file=sys.stderr, flush=True)
        e = FAQSearch.build(corpus, os.path.join(tmp, name.replace(" ", "_")), encoder=enc, force=True)
        queries = read_labelled_queries(qfile)[:first]
        texts, gold = [q.text for q in queries] + list(oos), [q.gold for q in queries] + [set()] * len(oos)
        counts = {f: [0, 0, 0] for f in FLOORS}
        for r, g in zip(e.ask_many(texts, k=3), gold):
            if r.answered:
                continue
            for a in r.ranked[:3]:
                for f in FLOORS:
                    if a.confidence >= f:
                        counts[f][0 if a.faq_id in g else 1 if g else 2] += 1
        e.close()
        cells = " / ".join(f"{c[0]}; {c[1]}; {c[2]}" for c in counts.values())
        lines.append(f"| {name} | {len(queries)} / {len(oos)} | {cells} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
