"""Does the answer text help matching? Measured before deciding a default (issue: answer-aware matching).

For each labelled set: the index's hybrid candidates (dense cosine + weight_q * BM25 over questions /
best) plus answer evidence weighted below the question:
  lexical  + weight_a * BM25 over the answers / best (FTS5's formula, the store's tokens)
  dense    + weight_a * cosine(query, answer) under the same encoder (answers encoded, no transform)
MRR@10 x100 over distinct FAQs; weight_q 0.1 is the default hybrid weight, 0 is dense alone.
A second table compares each answer setting with the default hybrid (q 0.1 / a 0) query by query:
the mean change in reciprocal rank with a paired bootstrap 95% interval (2000 resamples), and how
many queries rank their FAQ higher / lower. A weight is chosen on these same sets, so an interval
that only just excludes zero is still weak evidence.

    python benchmarks/experiments/answer_evidence.py [--out FILE]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder, then benchmarks/ (common.py, speed.py, synth.py)
from common import DATA, SAMPLE, emit, machine  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.corpus import read_corpus  # noqa: E402
from faqsearch.evaluation import read_labelled_queries, reciprocal_rank  # noqa: E402
from faqsearch.lexical import tokenize  # noqa: E402
from faqsearch.lexical import bm25_scorer as _bm25  # noqa: E402

SETS = [("CovidFAQ", os.path.join(DATA, "CovidFAQ", "faqs.csv"), os.path.join(DATA, "CovidFAQ", "queries.csv"), None),
        ("sample_data en", os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv"), None),
        ("sample_data zh (USE)", os.path.join(SAMPLE, "faq_zh.csv"), os.path.join(SAMPLE, "queries_zh.csv"),
         "use-multilingual")]
WQ = (0.0, 0.1)
WA = (0.0, 0.05, 0.1, 0.2, 0.3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    args = ap.parse_args()
    paired = ["", "| set | evidence, weight a (with q 0.1) | queries | mean change in RR x100 [95% CI] | "
              "higher / lower |", "|---|---|---|---|---|"]
    lines = [f"Measured {machine()}", "", "| set | evidence | " + " | ".join(f"q {q} / a {a}" for q in WQ for a in WA)
             + " |", "|---|---|" + "---|" * (len(WQ) * len(WA))]
    with tempfile.TemporaryDirectory() as tmp:
        for name, corpus, qfile, model in SETS:
            e = FAQSearch.build(corpus, os.path.join(tmp, "ix"), model=model, self_fusion=False, force=True)
            faqs = read_corpus(corpus)
            ids = [f.id for f in faqs]
            queries = read_labelled_queries(qfile)
            texts = [q.text for q in queries]
            vec = e.embed(texts)
            cands = e.searcher().candidates(texts, e.searcher().vectors(texts), 20)
            full = e.searcher().dense(vec, len(faqs))  # every FAQ's best question cosine
            bm25 = _bm25([tokenize(f.answer, e.store.cjk) for f in faqs])
            ans = e.encoder.encode([f.answer for f in faqs])
            ans /= np.linalg.norm(ans, axis=1, keepdims=True)
            qraw = e.encoder.encode(texts)
            qraw /= np.linalg.norm(qraw, axis=1, keepdims=True)
            dense_answer = qraw @ ans.T
            for kind in ("lexical", "dense"):
                cells = []
                per_query = {}
                for wq in WQ:
                    for wa in WA:
                        rr = []
                        for i, (q, c, f_all) in enumerate(zip(queries, cands, full)):
                            dense = {a.faq_id: a.dense for a in f_all}
                            lex = {a.faq_id: a.lexical or 0.0 for a in c}
                            top = max(lex.values(), default=0.0) or 1.0
                            if kind == "lexical":
                                s = bm25(tokenize(q.text, e.store.cjk))
                                evidence = s / (s.max() or 1.0)
                            else:
                                evidence = dense_answer[i]
                            score = {f: dense[f] + wq * lex.get(f, 0.0) / top + wa * evidence[j]
                                     for j, f in enumerate(ids)}
                            rr.append(reciprocal_rank(sorted(score, key=lambda f: -score[f]), q.gold))
                        cells.append(f"{100 * np.mean(rr):.2f}")
                        per_query[(wq, wa)] = np.array(rr)
                lines.append(f"| {name} | answer {kind} | " + " | ".join(cells) + " |")
                base = per_query[(0.1, 0.0)]
                for wa in WA[1:]:
                    d = per_query[(0.1, wa)] - base
                    rng = np.random.default_rng(0)
                    boot = [d[rng.integers(0, len(d), len(d))].mean() for _ in range(2000)]
                    lo, hi = np.percentile(boot, [2.5, 97.5])
                    paired.append(f"| {name} | answer {kind}, a {wa} | {len(d)} | {100 * d.mean():+.2f} "
                                  f"[{100 * lo:+.2f}, {100 * hi:+.2f}] | {(d > 0).sum()} / {(d < 0).sum()} |")
            e.close()
    emit(lines + paired, args.out)


if __name__ == "__main__":
    main()
