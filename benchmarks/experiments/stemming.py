"""English stemming on the lexical side: the same index built with and without it, same run.

Each English set is ingested twice with the defaults, once as a new store chooses (English questions:
Snowball English stems) and once with stemming off (as stores built before 2026-11-24), and each
index is evaluated as `faqsearch eval` does in its default mode and in lexical mode (MRR@10 and
Recall@1 x100 over distinct FAQs). Dense mode does not depend on it.

    python benchmarks/experiments/stemming.py [--out FILE] [--sets NAME,...]
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder, then benchmarks/ (common.py, speed.py, synth.py)
from common import (DATA, SAMPLE, CachingEncoder, add_sets_option, emit, machine, sts_retrieval_set,  # noqa: E402
                    wanted_sets)

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import evaluate, read_labelled_queries  # noqa: E402


SETS = [(name,) for name in ("sample_data en", "CovidFAQ", "Banking77 faqs_1", "Banking77 faqs_5", "Banking77 faqs_all",
                              "STSB-en retrieval")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    add_sets_option(ap, SETS)
    args = ap.parse_args()
    wanted = wanted_sets(ap, args, SETS)
    logging.basicConfig(level=logging.ERROR)
    enc = CachingEncoder(load_encoder("minilm"))
    tmp = tempfile.mkdtemp()
    bank, covid = os.path.join(DATA, "Banking77"), os.path.join(DATA, "CovidFAQ")
    sets = [
        ("sample_data en", os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv")),
        ("CovidFAQ", os.path.join(covid, "faqs.csv"), os.path.join(covid, "queries.csv")),
        ("Banking77 faqs_1", os.path.join(bank, "faqs_1.csv"), os.path.join(bank, "queries.csv")),
        ("Banking77 faqs_5", os.path.join(bank, "faqs_5.csv"), os.path.join(bank, "queries.csv")),
        ("Banking77 faqs_all", os.path.join(bank, "faqs_all.csv"), os.path.join(bank, "queries.csv")),
        ("STSB-en retrieval", *sts_retrieval_set(os.path.join(DATA, "STSB-en"),
                                                  ["sts-train.tsv", "sts-dev.tsv", "sts-test.tsv"], tmp, "stsb-en")),
    ]
    assert [s[0] for s in sets] == [n for n, in SETS]
    sets = [s for s in sets if s[0] in wanted]
    rows = ["| set | mode | no stemming | Snowball English (default) | change |", "|---|---|---|---|---|"]
    for name, corpus, qfile in sets:
        print(name, "...", file=sys.stderr, flush=True)
        queries = read_labelled_queries(qfile)
        got = {}
        for stem in ("none", "auto"):
            patch = mock.patch("faqsearch.backends.embedded.store.choose_stemmer", return_value="none") if stem == "none" else \
                contextlib.nullcontext()
            with patch:
                e = FAQSearch.build(corpus, os.path.join(tmp, "ix"), encoder=enc, force=True)
            assert e.searcher().snap.store.stem == ("none" if stem == "none" else "english"), name
            how = f"w={e.hybrid_weight:g}" + (" learned" if e.config.get("fusion") else "")
            got[stem] = (evaluate(e, queries), evaluate(e, queries, mode="lexical"), how)
            e.close()
        for i, mode in enumerate(("default (hybrid)", "lexical")):
            for m, label in (("mrr@10", "MRR@10"), ("recall@1", "Recall@1")):
                a, b = 100 * got["none"][i][m], 100 * got["auto"][i][m]
                hows = f" ({got['none'][2]} / {got['auto'][2]})" if i == 0 else ""
                rows.append(f"| {name} ({len(queries)} queries) | {mode}{hows} {label} | {a:.2f} | {b:.2f} | {b - a:+.2f} |")
    emit([f"Measured {machine()} with `python benchmarks/experiments/stemming.py`", "", *rows], args.out)


if __name__ == "__main__":
    main()
