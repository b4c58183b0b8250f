"""Calibrated scores, a threshold per index, and the default against its parts (issue #25).

Four tables, every figure from `faqsearch eval`'s own functions on indexes built with the defaults:

1. Ranking (MRR@10 and Recall@1 x100, distinct FAQs): the default (as `ask` answers), its own dense
   and lexical modes, and two peers measured in the same run: the raw encoder (brute-force cosine,
   sentence-transformers' semantic_search) and bm25s.
2. Answer or not: in-scope queries answered right, and out-of-scope queries answered, at the fixed
   0.5 and at the threshold each index chose for itself at ingest (no labels).
3. Pairs (Spearman x100): `eval --pairs` through a small index against the raw encoder's cosine.
4. A new topic added after ingest: the score of its paraphrases against their raw cosine.

Sets: sample_data (en, zh), CovidFAQ, Banking77 (1, 5 and all questions per FAQ), STSB-en and
zh-STS-B as retrieval sets. Out of scope: sample_data/offtopic*.txt for the samples; for Banking77
CovidFAQ queries and STSB-en sentences; for CovidFAQ, Banking77 queries and STSB-en sentences.

    pip install bm25s
    python benchmarks/calibration.py [--out FILE] [--sets NAME,...]
"""
from __future__ import annotations

import argparse
import csv
import logging
import os
import random
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (DATA, SAMPLE, CachingEncoder, add_sets_option, emit, machine, sts_retrieval_set,  # noqa: E402
                    wanted_sets)
from quality import bm25_faq, st_faq, st_pairs  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.corpus import read_texts  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import evaluate, evaluate_pairs, read_labelled_queries, read_pairs  # noqa: E402


def sentences(path: str, n: int, seed: int = 0) -> list[str]:
    a, b, _ = read_pairs(path)
    out = list(dict.fromkeys(a + b))
    random.Random(seed).shuffle(out)
    return out[:n]


def queries_of(path: str, n: int) -> list[str]:
    return [q.text for q in read_labelled_queries(path)][:n]


def out_of_scope() -> tuple[list[str], list[str]]:
    """The out-of-scope questions of the Banking77 sets (500 CovidFAQ queries) and of CovidFAQ (500
    Banking77 queries), each with the same 500 STSB-en test sentences."""
    bank, covid = os.path.join(DATA, "Banking77"), os.path.join(DATA, "CovidFAQ")
    stsb = sentences(os.path.join(DATA, "STSB-en", "sts-test.tsv"), 500)
    return (queries_of(os.path.join(covid, "queries.csv"), 500) + stsb,
            queries_of(os.path.join(bank, "queries.csv"), 500) + stsb)


# the ranking sets, then the pairs sets (--sets names either)
SETS = [(name,) for name in ("sample_data en", "sample_data zh (USE)", "CovidFAQ", "Banking77 faqs_1", "Banking77 faqs_5",
                              "Banking77 faqs_all", "STSB-en retrieval", "zh-STS-B retrieval (USE)", "STSB-en test",
                              "zh-STS-B test (USE)")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    add_sets_option(ap, SETS)
    args = ap.parse_args()
    wanted = wanted_sets(ap, args, SETS)
    logging.basicConfig(level=logging.ERROR)
    minilm = CachingEncoder(load_encoder("minilm"))
    use = CachingEncoder(load_encoder("use-multilingual"))
    tmp = tempfile.mkdtemp()
    sts_en = sts_retrieval_set(os.path.join(DATA, "STSB-en"), ["sts-train.tsv", "sts-dev.tsv", "sts-test.tsv"], tmp,
                               "stsb-en")
    sts_zh = sts_retrieval_set(os.path.join(DATA, "zh-STS-B"), ["train.tsv", "dev.tsv", "test.tsv"], tmp, "zh-sts")
    bank, covid = os.path.join(DATA, "Banking77"), os.path.join(DATA, "CovidFAQ")
    bank_oos, covid_oos = out_of_scope()
    sets = [  # name, encoder, corpus, queries, chinese, out-of-scope questions
        ("sample_data en", minilm, os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv"), False,
         read_texts(os.path.join(SAMPLE, "offtopic.txt"))),
        ("sample_data zh (USE)", use, os.path.join(SAMPLE, "faq_zh.csv"), os.path.join(SAMPLE, "queries_zh.csv"), True,
         read_texts(os.path.join(SAMPLE, "offtopic_zh.txt"))),
        ("CovidFAQ", minilm, os.path.join(covid, "faqs.csv"), os.path.join(covid, "queries.csv"), False,
         covid_oos),
        ("Banking77 faqs_1", minilm, os.path.join(bank, "faqs_1.csv"), os.path.join(bank, "queries.csv"), False, bank_oos),
        ("Banking77 faqs_5", minilm, os.path.join(bank, "faqs_5.csv"), os.path.join(bank, "queries.csv"), False, bank_oos),
        ("Banking77 faqs_all", minilm, os.path.join(bank, "faqs_all.csv"), os.path.join(bank, "queries.csv"), False,
         bank_oos),
        ("STSB-en retrieval", minilm, *sts_en, False, None),
        ("zh-STS-B retrieval (USE)", use, *sts_zh, True, None),
    ]
    assert [s[0] for s in sets] == [n for n, in SETS[:len(sets)]]
    sets = [s for s in sets if s[0] in wanted]
    rank = ["| set | metric | default | dense | lexical | raw encoder (peer) | bm25s (peer) | default >= both parts |",
            "|---|---|---|---|---|---|---|---|"]
    answer = ["| set | in-scope queries | out-of-scope | threshold chosen | right @ 0.5 | right @ chosen | "
              "out-of-scope answered @ 0.5 | @ chosen |", "|---|---|---|---|---|---|---|---|"]
    for name, enc, corpus, qfile, chinese, oos in sets:
        print(name, "...", file=sys.stderr, flush=True)
        queries = read_labelled_queries(qfile)
        e = FAQSearch.build(corpus, os.path.join(tmp, "ix"), encoder=enc, force=True)
        new, dense, lex = evaluate(e, queries, offtopic=oos), evaluate(e, queries, mode="dense"), \
            evaluate(e, queries, mode="lexical")
        fixed = evaluate(e, queries, threshold=0.5, offtopic=oos)
        raw = st_faq(enc.encode, corpus, queries)
        bm = bm25_faq(corpus, queries, chinese)
        snap = e.searcher().snap
        t, p = snap.token_weight, snap.prototype_weight
        how = (f"w={e.hybrid_weight:g}, t={t:g}" + (f", p={p:g}" if p else "")
               + (" learned" if e.config.get("fusion") else "") if e.mode == "hybrid" else e.mode)
        for m, label in (("mrr@10", "MRR@10"), ("recall@1", "Recall@1")):
            ok = new[m] >= max(dense[m], lex[m]) - 1e-9
            rank.append(f"| {name} ({len(queries)} queries) | {label} | {100 * new[m]:.2f} ({how}) | {100 * dense[m]:.2f} | "
                        f"{100 * lex[m]:.2f} | {100 * raw[m]:.2f} | {100 * bm[m]:.2f} | {'yes' if ok else 'NO'} |")
        if oos:
            calib = e.config.get("calibration") or {}
            answer.append(
                f"| {name} | {len(queries)} | {len(oos)} | {e.threshold:.3f} ({calib.get('positives', 0)} variants) | "
                f"{100 * fixed['answered_right']:.1f} | {100 * new['answered_right']:.1f} | "
                f"{100 * fixed['offtopic_answered']:.1f} | {100 * new['offtopic_answered']:.1f} |")
        e.close()
    pairs = ["| set | pairs | through an index | raw encoder (peer) |", "|---|---|---|---|"]
    for name, enc, path, corpus in (("STSB-en test", minilm, os.path.join(DATA, "STSB-en", "sts-test.tsv"),
                                     os.path.join(SAMPLE, "faq.csv")),
                                    ("zh-STS-B test (USE)", use, os.path.join(DATA, "zh-STS-B", "test.tsv"),
                                     os.path.join(SAMPLE, "faq_zh.csv"))):
        if name not in wanted:
            continue
        a, b, y = read_pairs(path)
        e = FAQSearch.build(corpus, os.path.join(tmp, "pairs"), encoder=enc, force=True)
        got = evaluate_pairs(e, a, b, y)["spearman"]
        e.close()
        pairs.append(f"| {name} (index: {os.path.basename(corpus)}) | {len(y)} | {got:.2f} | {st_pairs(enc.encode, a, b, y):.2f} |")
    topic = new_topic(minilm, tmp)
    lines = [f"Measured {machine()} with `python benchmarks/calibration.py`", "",
             "Ranking: MRR@10 and Recall@1 x100 over distinct FAQs", "", *rank, "",
             "Answer or not (%): in-scope answered with a gold FAQ first; out-of-scope answered at all", "", *answer, "",
             "Pairs: Spearman x100 of the score `ask` would show", "", *pairs, "",
             "A new topic added after ingest (sample_data + 3 new FAQs): score shown vs raw MiniLM cosine", "", *topic]
    emit(lines, args.out)


NEW_TOPIC = [  # FAQ id, its question, paraphrases a user would type
    ("pet-axolotl", "How do I feed my pet axolotl?", ["what food should I give an axolotl", "axolotl diet advice"]),
    ("bike-chain", "How do I oil a bicycle chain?", ["best way to lubricate my bike chain", "my bike chain squeaks, what oil"]),
    ("tea-brew", "How long should green tea steep?", ["green tea brewing time", "how many minutes to brew green tea"]),
]


def new_topic(enc, tmp: str) -> list[str]:
    e = FAQSearch.build(os.path.join(SAMPLE, "faq.csv"), os.path.join(tmp, "topic"), encoder=enc, force=True)
    path = os.path.join(tmp, "new.csv")
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "question", "answer"])
        for fid, q, _ in NEW_TOPIC:
            w.writerow([fid, q, f"answer of {fid}"])
    e.add(path)
    rows = ["| paraphrase | FAQ | answered with | score shown | raw cosine | difference |", "|---|---|---|---|---|---|"]
    for fid, q, paras in NEW_TOPIC:
        for p in paras:
            r = e.ask(p, k=1)
            v = np.asarray(enc.encode([p, q]))
            raw = float(v[0] @ v[1] / np.linalg.norm(v[0]) / np.linalg.norm(v[1]))
            shown = r.best_score
            rows.append(f"| {p} | {fid} | {r.answers[0].faq_id if r.answers else 'no answer'} | {shown:.4f} | "
                        f"{raw:.4f} | {shown - raw:+.4f} |")
    e.close()
    return rows


if __name__ == "__main__":
    main()
