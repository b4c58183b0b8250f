"""`faqsearch train encoder`: the bundled MiniLM fine-tuned on sample_data's own question groups
(no user queries), then measured on the held-out sample queries (never trained on), dense and
default (hybrid) mode, against the base encoder. CovidFAQ shows what the same model does on a
domain it was not tuned for (it should not be used there).

    python benchmarks/encoder_finetune.py [--epochs 1] [--lr 2e-5] [--out FILE]
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DATA, SAMPLE, emit, machine  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.corpus import read_corpus  # noqa: E402
from faqsearch.encoders import _minilm_path  # noqa: E402
from faqsearch.evaluation import evaluate, read_labelled_queries  # noqa: E402
from faqsearch.finetune import EncoderTrainConfig, group_pairs, train_encoder  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    tmp = tempfile.mkdtemp()
    pairs = group_pairs([f.questions for f in read_corpus(os.path.join(SAMPLE, "faq.csv"))])
    t = time.perf_counter()
    losses = train_encoder(_minilm_path(), pairs, os.path.join(tmp, "enc"),
                           EncoderTrainConfig(epochs=args.epochs, lr=args.lr), progress=True)
    secs = time.perf_counter() - t
    lines = [f"Measured {machine()}; {len(pairs)} pairs from sample_data's question groups, {args.epochs} epoch(s), "
             f"lr {args.lr}, batch 32, {secs:.0f} s; loss per epoch {', '.join(f'{x:.3f}' for x in losses)}", "",
             "| set (held-out queries) | encoder | dense MRR@10 / R@1 | default (hybrid) MRR@10 / R@1 |",
             "|---|---|---|---|"]
    sets = [("sample_data en (159)", os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv")),
            ("CovidFAQ (1073; not tuned for)", os.path.join(DATA, "CovidFAQ", "faqs.csv"),
             os.path.join(DATA, "CovidFAQ", "queries.csv"))]
    for name, corpus, qfile in sets:
        queries = read_labelled_queries(qfile)
        for label, model in [("base all-MiniLM-L6-v2", None), ("fine-tuned (train encoder)", os.path.join(tmp, "enc"))]:
            e = FAQSearch.build(corpus, os.path.join(tmp, "ix"), model=model, force=True)
            d, h = evaluate(e, queries, mode="dense"), evaluate(e, queries)
            lines.append(f"| {name} | {label} | {100 * d['mrr@10']:.2f} / {100 * d['recall@1']:.2f} | "
                         f"{100 * h['mrr@10']:.2f} / {100 * h['recall@1']:.2f} |")
            e.close()
    emit(lines, args.out)


if __name__ == "__main__":
    main()
