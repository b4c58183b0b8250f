"""Chinese lexical matching: which CJK tokenisation, and how fast at ~20k questions.

Sets (no labels needed beyond the data's own):
  zh-STS-B retrieval  every sentence of ../shared/data/zh-STS-B (train, dev, test) is an FAQ with one
                      question; for each pair scored >= 4 ("mostly equivalent"), sentence2 is the query
                      (removed from the FAQs) and sentence1's FAQ the answer. ~15k FAQs.
  sample_data zh      sample_data/faq_zh.csv with queries_zh.csv (42 queries).
Columns: faqsearch's store with CJK unigrams, and with unigrams + bigrams (MRR@10, Recall@1; p50/p99 ms
of one lexical search from the postings arrays every version keeps, and with FTS5 alone on the same
store, interleaved; score lists that differ between the two); bm25s over the same tokens as the
peer. A timing row at about 25k questions holds every zh-STS-B FAQ twice (its figures of quality
are not shown). A second table: the
same sets in hybrid mode (USE multilingual dense + FTS5, the default index otherwise), per tokenisation.

    python benchmarks/experiments/zh_lexical.py [--out FILE] [--no-hybrid]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder, then benchmarks/ (common.py, speed.py, synth.py)
from common import DATA, SAMPLE, emit, machine, sts_retrieval_set  # noqa: E402

from faqsearch.corpus import FAQ, read_corpus  # noqa: E402
from faqsearch.evaluation import read_labelled_queries, reciprocal_rank  # noqa: E402
from faqsearch.lexical import CJK_MODES, tokenize  # noqa: E402
from faqsearch.backends.embedded.store import Store  # noqa: E402


def sts_retrieval(tmp: str):
    corpus, queries = sts_retrieval_set(os.path.join(DATA, "zh-STS-B"), ["train.tsv", "dev.tsv", "test.tsv"], tmp,
                                        "zh-sts")
    return read_corpus(corpus), [(q.text, q.gold) for q in read_labelled_queries(queries)]


def run_store(faqs, queries, mode, tmp):
    """MRR@10 and Recall@1 of faqsearch's lexical search (from the postings arrays every version now
    keeps), with the time of one search both ways, interleaved: from the arrays, and FTS5 alone on an
    identical store without them; and how many score lists differ between the two."""
    from faqsearch.backends.embedded.postings import write

    stores = []
    for sub in ("arrays", "fts5"):
        d = os.path.join(tmp, f"{mode}-{sub}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        store = Store(os.path.join(d, "store.db"), cjk=mode)
        store.insert_faqs(faqs)
        if sub == "arrays":
            with store._lock:
                assert write(store._conn, d, min_questions=1)
        stores.append(store)
    ours, fts = stores
    faq_of = {q[0]: q[1] for q in ours.all_questions()}
    rr, r1, t_ours, t_fts, differ = [], [], [], [], 0
    for st in stores:
        st.lexical([queries[0][0]], 100)
    for text, gold in queries:
        t = time.perf_counter()
        hits = ours.lexical([text], 100)[0]
        t_ours.append(1000 * (time.perf_counter() - t))
        t = time.perf_counter()
        plain = fts.lexical([text], 100)[0]
        t_fts.append(1000 * (time.perf_counter() - t))
        differ += [s for _, s in hits] != [s for _, s in plain]
        ranked = list(dict.fromkeys(faq_of[i] for i, _ in hits))[:10]
        rr.append(reciprocal_rank(ranked, gold))
        r1.append(bool(ranked) and ranked[0] in gold)
    for st in stores:
        st.close()
    pct = lambda xs: f"{np.percentile(xs, 50):.2f} / {np.percentile(xs, 99):.2f}"  # noqa: E731
    return 100 * np.mean(rr), 100 * np.mean(r1), pct(t_ours), pct(t_fts), differ


def run_bm25s(faqs, queries, mode):
    import bm25s

    docs = [(f.id, q) for f in faqs for q in f.questions]
    retriever = bm25s.BM25()
    retriever.index([tokenize(d[1], mode) or ["<empty>"] for d in docs], show_progress=False)
    ids, _ = retriever.retrieve([tokenize(q, mode) or ["<empty>"] for q, _ in queries], k=min(100, len(docs)),
                                show_progress=False)
    rr, r1 = [], []
    for row, (_, gold) in zip(ids, queries):
        ranked = list(dict.fromkeys(docs[i][0] for i in row))[:10]
        rr.append(reciprocal_rank(ranked, gold))
        r1.append(bool(ranked) and ranked[0] in gold)
    return 100 * np.mean(rr), 100 * np.mean(r1)


def hybrid_table(tmp: str) -> list[str]:
    import faqsearch.defaults as defaults
    from common import CachingEncoder

    from faqsearch import FAQSearch
    from faqsearch.encoders import load_encoder
    from faqsearch.evaluation import evaluate

    use = CachingEncoder(load_encoder("use-multilingual"))
    sets = [("zh-STS-B retrieval", os.path.join(tmp, "zh-sts_faq.csv"), os.path.join(tmp, "zh-sts_queries.csv")),
            ("sample_data zh", os.path.join(SAMPLE, "faq_zh.csv"), os.path.join(SAMPLE, "queries_zh.csv"))]
    out = ["", "Hybrid mode (USE multilingual + FTS5, default weight 0.1), MRR@10 / Recall@1:", "",
           "| set | " + " | ".join(CJK_MODES) + " |", "|---|" + "---|" * len(CJK_MODES)]
    default = defaults.CJK
    for name, corpus, qfile in sets:
        queries = read_labelled_queries(qfile)
        cells = []
        for mode in CJK_MODES:
            defaults.CJK = mode  # what a new store records
            try:
                e = FAQSearch.build(corpus, os.path.join(tmp, "ix"), encoder=use, self_fusion=False, force=True)
            finally:
                defaults.CJK = default
            assert e.store.cjk == mode
            r = evaluate(e, queries, mode="hybrid")
            cells.append(f"{100 * r['mrr@10']:.2f} / {100 * r['recall@1']:.2f}")
            e.close()
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--no-hybrid", action="store_true", help="skip the hybrid table (it encodes with USE)")
    args = ap.parse_args()
    keep = tempfile.mkdtemp()
    sets = [("zh-STS-B retrieval", *sts_retrieval(keep))]
    sample_q = read_labelled_queries(os.path.join(SAMPLE, "queries_zh.csv"))
    sets.append(("sample_data zh", read_corpus(os.path.join(SAMPLE, "faq_zh.csv")),
                 [(q.text, q.gold) for q in sample_q]))
    lines = [f"Measured {machine()}", "",
             "| set | CJK tokens | faqsearch MRR@10 / R@1 | p50 / p99 ms, postings arrays (default) "
             "| p50 / p99 ms, FTS5 alone | score lists differing | bm25s MRR@10 / R@1 |",
             "|---|---|---|---|---|---|---|"]
    twice = [FAQ(f"{f.id}#2", f.answer, list(f.questions)) for f in sets[0][1]]  # timing at ~25k: every FAQ twice
    sets.insert(1, ("zh-STS-B retrieval, every FAQ twice", sets[0][1] + twice, sets[0][2]))
    with tempfile.TemporaryDirectory() as tmp:
        for name, faqs, queries in sets:
            for mode in CJK_MODES:
                mrr, r1, t_ours, t_fts, differ = run_store(faqs, queries, mode, tmp)
                quality, peer = "timing only", ""
                if "twice" not in name:
                    quality, peer = f"{mrr:.2f} / {r1:.2f}", "{:.2f} / {:.2f}".format(*run_bm25s(faqs, queries, mode))
                lines.append(f"| {name} ({sum(len(f.questions) for f in faqs)} questions, {len(queries)} queries) "
                             f"| {mode} | {quality} | {t_ours} | {t_fts} | {differ} | {peer} |")
    if not args.no_hybrid:
        lines += hybrid_table(keep)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
