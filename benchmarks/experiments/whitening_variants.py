"""Quality of the whitening variants (beta, gamma, k) on real data, through the engine itself.

Prints a markdown table: rows = transform settings, columns = data sets. FAQ sets report MRR@10
(x100) of an index built from the FAQ questions; STS sets report Spearman x100 of cosine, with the
transform fitted on the evaluated sentences (--fit-on), as in ../shared/data/README.md.

    python benchmarks/experiments/whitening_variants.py [--out results.md]
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder, then benchmarks/ (common.py, speed.py, synth.py)
from common import emit, DATA, SAMPLE, CachingEncoder, machine  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.corpus import read_texts  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import evaluate, evaluate_pairs, read_labelled_queries, read_pairs  # noqa: E402

VARIANTS = [  # (label, whiten, beta, gamma, k)
    ("no transform", False, 0, 0, None),
    ("beta=0 gamma=0 k=256 (default)", True, 0, 0, 256),
    ("beta=0 gamma=0 k=128", True, 0, 0, 128),
    ("beta=0.5 gamma=0.5 k=256", True, 0.5, 0.5, 256),
    ("beta=1 gamma=1 all dims", True, 1, 1, None),
    ("beta=1 gamma=1 k=256", True, 1, 1, 256),
    ("beta=1 gamma=0 k=256", True, 1, 0, 256),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    minilm = CachingEncoder(load_encoder("minilm"))
    sets = [  # (column, encoder, kind, corpus/pairs, queries)
        ("sample_data en MRR@10", minilm, "faq", os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv")),
        ("CovidFAQ MRR@10", minilm, "faq", os.path.join(DATA, "CovidFAQ", "faqs.csv"),
         os.path.join(DATA, "CovidFAQ", "queries.csv")),
        ("STSB-en dev Spearman", minilm, "sts", os.path.join(DATA, "STSB-en", "sts-dev.tsv"), None),
        ("STSB-en test Spearman", minilm, "sts", os.path.join(DATA, "STSB-en", "sts-test.tsv"), None),
    ]
    try:
        use = CachingEncoder(load_encoder("use-multilingual"))
        sets += [
            ("sample_data zh MRR@10 (USE)", use, "faq", os.path.join(SAMPLE, "faq_zh.csv"),
             os.path.join(SAMPLE, "queries_zh.csv")),
            ("zh-STS-B dev Spearman (USE)", use, "sts", os.path.join(DATA, "zh-STS-B", "dev.tsv"), None),
        ]
    except Exception as exc:  # the multilingual extra is optional
        print(f"skipping USE sets: {exc}", file=sys.stderr)
    sets = [s for s in sets if os.path.exists(s[3])]
    table = {label: {} for label, *_ in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for column, enc, kind, data, queries in sets:
            print(f"{column} ...", file=sys.stderr)
            labelled = read_labelled_queries(queries) if kind == "faq" else None
            pairs = read_pairs(data) if kind == "sts" else None
            for label, whiten, beta, gamma, k in VARIANTS:
                corpus = data if kind == "faq" else os.path.join(SAMPLE, "faq.csv")  # STS: any corpus, fit on pairs
                fit_on = read_texts(data) if kind == "sts" else None
                e = FAQSearch.build(corpus, os.path.join(tmp, "ix"), encoder=enc, whiten=whiten, beta=beta,
                                    gamma=gamma, k=k, fit_on=fit_on)
                if kind == "faq":
                    value = 100 * evaluate(e, labelled, mode="dense")["mrr@10"]  # the transform, not fusion
                else:
                    value = evaluate_pairs(e, *pairs)["spearman"]
                note = "" if not whiten or e.config["dim_out"] == min(k or enc.dimension, enc.dimension) \
                    else f" (k={e.config['dim_out']})"
                table[label][column] = f"{value:.2f}{note}"
                e.close()
    columns = [s[0] for s in sets]
    lines = [f"Measured {machine()}", "",
             "| transform | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for label, *_ in VARIANTS:
        lines.append(f"| {label} | " + " | ".join(table[label].get(c, "") for c in columns) + " |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
