"""Does the default transform keep "no confident answer" working? Off-topic questions answered at
the default threshold, with no transform, with the transform clipped to the corpus rank (the
previous default on FAQs with fewer questions than dimensions) and with the default.

Sets: sample_data (English, 450 questions: full rank), CovidFAQ (68 questions: rank 67) with
sample_data/offtopic.txt, and the Chinese sample (USE, 126 questions: rank 125) with
sample_data/offtopic_zh.txt. Dense mode; the threshold applies to the cosine in hybrid mode too.

    python benchmarks/experiments/offtopic.py [--out results.md]
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder, then benchmarks/ (common.py, speed.py, synth.py)
from common import DATA, SAMPLE, CachingEncoder, emit, machine  # noqa: E402

import numpy as np  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.whitening import Whitening  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import evaluate, read_labelled_queries  # noqa: E402


@contextlib.contextmanager
def renormalised_cut():
    """Build as earlier releases did: no residual norm, the kept dimensions renormalised to length 1
    (indexes built this way keep that behaviour: the residual is stored with the transform)."""
    orig = Whitening.from_moments.__func__

    def legacy(cls, *a, **kw):
        return dataclasses.replace(orig(cls, *a, **kw), residual=None, mean=None, basis=None)

    Whitening.from_moments = classmethod(legacy)
    try:
        yield
    finally:
        Whitening.from_moments = classmethod(orig)


def lines_of(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [line.strip() for line in fh if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    en, zh = CachingEncoder(load_encoder("minilm")), None
    sets = [("sample_data en", os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv"),
             os.path.join(SAMPLE, "offtopic.txt"), en)]
    covid = os.path.join(DATA, "CovidFAQ")
    if os.path.isdir(covid):
        sets.append(("CovidFAQ", os.path.join(covid, "faqs.csv"), os.path.join(covid, "queries.csv"),
                     os.path.join(SAMPLE, "offtopic.txt"), en))
    try:
        zh = CachingEncoder(load_encoder("use-multilingual"))
        sets.append(("sample_data zh (USE)", os.path.join(SAMPLE, "faq_zh.csv"), os.path.join(SAMPLE, "queries_zh.csv"),
                     os.path.join(SAMPLE, "offtopic_zh.txt"), zh))
    except Exception as exc:  # noqa: BLE001 - the multilingual extra is optional
        print(f"skipping Chinese: {exc}", file=sys.stderr)
    out = [f"Measured {machine()}; threshold 0.5, dense mode", "",
           "| set | transform | dims | MRR@10 | in-domain answered | off-topic answered | off-topic median score |",
           "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, corpus, queries, off, enc in sets:
            labelled = read_labelled_queries(queries)
            offtopic = lines_of(off)
            default = FAQSearch.build(corpus, os.path.join(tmp, "d"), encoder=enc)
            rank = default.config["whitening"]["rank"]
            variants = [("none", FAQSearch.build(corpus, os.path.join(tmp, "n"), encoder=enc, whiten=False))]
            with renormalised_cut():  # what earlier releases did: renormalise what the cut left
                if rank < 256:
                    variants.append((f"clipped to the rank, renormalised (k={rank}, default before 2026-11-22)",
                                     FAQSearch.build(corpus, os.path.join(tmp, "c"), encoder=enc, k=rank)))
                else:
                    variants.append(("cut to k=256, renormalised (default until this change)",
                                     FAQSearch.build(corpus, os.path.join(tmp, "c"), encoder=enc)))
            variants.append(("default (beta=gamma=0, k=256)", default))
            for label, e in variants:
                ev = evaluate(e, labelled, mode="dense")
                res = e.ask_many(offtopic, mode="dense")
                med = float(np.median([r.best_score for r in res]))
                out.append(f"| {name} | {label} | {e.whitening.dim_out} | {100 * ev['mrr@10']:.2f} | "
                           f"{100 * ev['answered']:.1f}% | {sum(r.confident for r in res)} of {len(res)} | {med:.3f} |")
                e.close()
    emit(out, args.out)


if __name__ == "__main__":
    main()
