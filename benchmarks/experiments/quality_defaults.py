"""Quality by default: per FAQ set, dense / lexical / BM25 peer / previous default / new default /
tuned with labels. MRR@10 and Recall@1 x100 over distinct FAQs, `faqsearch eval`'s figures.

  dense, lexical      the new default index in `--mode dense` / `--mode lexical`
  BM25 peer           bm25s over the FAQ questions in its stronger configuration (English: no
                      stopwords; CJK: character unigrams)
  previous default    as built before this change: hybrid weight 0.1 always, the k=256 rotation
                      renormalised after the cut, CJK unigrams + bigrams
  new default         `faqsearch ingest` defaults now: hybrid, the weight learned from the corpus's
                      question variants where 10+ FAQs have them (kept only if it wins held out),
                      the cut's energy kept in the norm, CJK unigrams
  tuned with labels   `tune fusion QUERIES` on the same queries, 5-fold cross-validated (held out);
                      MRR@10 only
Sets: sample_data en and zh, CovidFAQ, and two retrieval sets made from STS data (each sentence an
FAQ; for pairs scored >= 4, sentence2 queries sentence1's FAQ). STSB-en retrieval was held out of
every choice of defaults made in this change.

    pip install bm25s
    python benchmarks/experiments/quality_defaults.py [--out FILE]
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder, then benchmarks/ (common.py, speed.py, synth.py)
from common import DATA, SAMPLE, CachingEncoder, emit, machine, sts_retrieval_set  # noqa: E402
from offtopic import renormalised_cut  # noqa: E402
from quality import bm25_faq  # noqa: E402

import faqsearch.lexical as lexical  # noqa: E402
from faqsearch import FAQSearch  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import evaluate, read_labelled_queries  # noqa: E402
from faqsearch.tuning import tune_fusion  # noqa: E402


@contextlib.contextmanager
def previous_defaults():
    old = lexical.DEFAULT_CJK
    lexical.DEFAULT_CJK = "unigram+bigram"
    try:
        with renormalised_cut():
            yield
    finally:
        lexical.DEFAULT_CJK = old


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    minilm = CachingEncoder(load_encoder("minilm"))
    use = CachingEncoder(load_encoder("use-multilingual"))
    tmp = tempfile.mkdtemp()
    sts_en = sts_retrieval_set(os.path.join(DATA, "STSB-en"), ["sts-train.tsv", "sts-dev.tsv", "sts-test.tsv"], tmp,
                               "stsb-en")
    sts_zh = sts_retrieval_set(os.path.join(DATA, "zh-STS-B"), ["train.tsv", "dev.tsv", "test.tsv"], tmp, "zh-sts")
    sets = [
        ("sample_data en", minilm, os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv"), False),
        ("CovidFAQ", minilm, os.path.join(DATA, "CovidFAQ", "faqs.csv"),
         os.path.join(DATA, "CovidFAQ", "queries.csv"), False),
        ("STSB-en retrieval (held out)", minilm, *sts_en, False),
        ("sample_data zh (USE)", use, os.path.join(SAMPLE, "faq_zh.csv"), os.path.join(SAMPLE, "queries_zh.csv"), True),
        ("zh-STS-B retrieval (USE)", use, *sts_zh, True),
    ]
    lines = [f"Measured {machine()}", "",
             "| set | metric | dense | lexical | BM25 peer | previous default | new default | tuned with labels |",
             "|---|---|---|---|---|---|---|---|"]
    for name, enc, corpus, qfile, chinese in sets:
        print(name, "...", file=sys.stderr)
        queries = read_labelled_queries(qfile)
        with previous_defaults():
            e = FAQSearch.build(corpus, os.path.join(tmp, "prev"), encoder=enc, self_fusion=False, force=True)
        prev = evaluate(e, queries)
        e.close()
        e = FAQSearch.build(corpus, os.path.join(tmp, "new"), encoder=enc, force=True)
        new = evaluate(e, queries)
        dense = evaluate(e, queries, mode="dense")
        lex = evaluate(e, queries, mode="lexical")
        tuned = tune_fusion(e.searcher(), queries)
        how = f"w={e.hybrid_weight:g}" + (" learned" if e.config.get("fusion") else "")
        e.close()
        bm = bm25_faq(corpus, queries, chinese)
        n = f"{name} ({len(queries)} queries)"
        lines.append(f"| {n} | MRR@10 | {100 * dense['mrr@10']:.2f} | {100 * lex['mrr@10']:.2f} | "
                     f"{100 * bm['mrr@10']:.2f} | {100 * prev['mrr@10']:.2f} | {100 * new['mrr@10']:.2f} ({how}) | "
                     f"{100 * tuned.cv_tuned:.2f} (w={tuned.chosen:g} on all) |")
        lines.append(f"| {n} | Recall@1 | {100 * dense['recall@1']:.2f} | {100 * lex['recall@1']:.2f} | "
                     f"{100 * bm['recall@1']:.2f} | {100 * prev['recall@1']:.2f} | {100 * new['recall@1']:.2f} | |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
