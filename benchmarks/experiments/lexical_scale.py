"""The lexical (BM25) step of a large index: FTS5 alone against the postings arrays, same run.

For each index size: sample_data recombined by synth.py and repeated with a suffix "#n" (as in
speed.py: real text, vectors of copies moved by seeded noise), built with `--mode hybrid` defaults.
Each query's lexical step (the store's top-160 BM25 rows, what a hybrid `ask` asks for) is timed
twice, interleaved: from the version's postings arrays, and with FTS5 alone on a copy of the same
store.db in a directory without arrays. The score lists must be the same floats. Then the
threshold choice at ingest (200 general-domain questions asked of the index) both ways.

    python benchmarks/experiments/lexical_scale.py [--sizes 100000,1000000] [--index PATH] [--out results.md]

``--index PATH`` measures an existing index instead of building one.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder, then benchmarks/ (common.py, speed.py, synth.py)
from common import ROOT, SAMPLE, emit, machine  # noqa: E402
from speed import SynthEncoder, percentile, write_corpus  # noqa: E402


def p(xs, q):  # ms
    return 1000 * percentile(xs, q)


def measure(lines, index, queries, offtopic, n=160):
    from faqsearch import FAQSearch
    from faqsearch.backends.embedded.store import Store
    from faqsearch.tuning.threshold import calibrate

    e = FAQSearch.open(index)
    searcher = e.searcher()
    store = searcher.snap.store
    version = os.path.dirname(store.path)
    if not os.path.isdir(os.path.join(version, "lexical")):
        raise SystemExit(f"{index} has no postings arrays (built before them)")
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(index))) as tmp:
        shutil.copy(store.path, os.path.join(tmp, "store.db"))
        plain = Store(os.path.join(tmp, "store.db"), generation=store.generation)
        for label, texts in (("sample_data queries", queries), ("general-domain questions", offtopic)):
            ours, fts, differ = [], [], 0
            store.lexical(texts[:1], n)
            plain.lexical(texts[:1], n)
            for text in texts:  # interleaved, one query at a time
                t = time.perf_counter(); a = store.lexical([text], n)[0]; ours.append(time.perf_counter() - t)
                t = time.perf_counter(); b = plain.lexical([text], n)[0]; fts.append(time.perf_counter() - t)
                differ += [s for _, s in a] != [s for _, s in b]
            lines.append(f"| {store.question_count():,} | {label} ({len(texts)}) | {p(fts, 50):.1f} / {p(fts, 90):.1f} | "
                         f"{p(ours, 50):.1f} / {p(ours, 90):.1f} | {np.median(fts) / np.median(ours):.0f}x | {differ} |")
        plain.close()
    t = time.perf_counter(); with_arrays = calibrate(searcher); t_arrays = time.perf_counter() - t
    hidden = tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(index)))  # beside the index, not in it
    os.rmdir(hidden)
    os.rename(os.path.join(version, "lexical"), hidden)
    try:
        e.close()
        e = FAQSearch.open(index)
        t = time.perf_counter(); alone = calibrate(e.searcher()); t_fts = time.perf_counter() - t
    finally:
        os.rename(hidden, os.path.join(version, "lexical"))
        e.close()
    return (f"Threshold choice ({with_arrays.negatives} out-of-scope and {with_arrays.positives} in-scope questions): "
            f"{t_fts:.1f} s with FTS5 alone, {t_arrays:.1f} s with the arrays; threshold {alone.threshold} and "
            f"{with_arrays.threshold}.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--index", help="an existing index to measure (no build)")
    ap.add_argument("--out")
    args = ap.parse_args()
    import logging

    from faqsearch import FAQSearch
    from faqsearch.corpus import read_corpus, read_texts
    from faqsearch.encoders import load_encoder
    from faqsearch.evaluation import read_labelled_queries

    logging.basicConfig(level=logging.ERROR)
    queries = [q.text for q in read_labelled_queries(os.path.join(SAMPLE, "queries.csv"))]
    offtopic = read_texts(os.path.join(ROOT, "faqsearch", "data", "offtopic.txt"))[:100]
    lines = [f"Measured {machine()}", "", "| questions | queries | FTS5 alone p50 / p90 ms | postings arrays p50 / p90 ms "
             "| speed-up (p50) | score lists that differ |", "|---|---|---|---|---|---|"]
    notes = []
    if args.index:
        notes.append(measure(lines, args.index, queries, offtopic))
    else:
        tmp = tempfile.mkdtemp()
        try:
            synth = os.path.join(tmp, "faq10k.csv")
            subprocess.run([sys.executable, os.path.join(os.path.dirname(HERE), "synth.py"), "--per-faq", "67",
                            "--out", synth], check=True)
            base = read_corpus(synth)
            enc = load_encoder("minilm")
            texts = [q for f in base for q in f.questions]
            cache = dict(zip(texts, enc.encode(texts)))
            for n in [int(x) for x in args.sizes.split(",")]:
                corpus = os.path.join(tmp, f"c{n}.csv")
                write_corpus(corpus, base, max(1, n // len(texts)))
                FAQSearch.build(corpus, os.path.join(tmp, f"ix{n}"), encoder=SynthEncoder(enc, cache)).close()
                notes.append(measure(lines, os.path.join(tmp, f"ix{n}"), queries, offtopic))
                shutil.rmtree(os.path.join(tmp, f"ix{n}"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    emit(lines + [""] + notes, args.out)


if __name__ == "__main__":
    main()
