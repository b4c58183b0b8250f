"""Answer or abstain (issue #44): the decision `ask` makes by default, before (the cosine threshold the
index chose) and now (the confidence against the index's operating point), on every set we have.

For each set an index is built with the defaults (`faqsearch ingest`), then every in-scope query and
out-of-scope question is asked as `ask --json` would (``Result.to_dict()``, k=3), and scored the way
../shared/tools/decision.py scores it: in-scope answered right, out-of-scope answered, the balanced
score ((in-scope right share + out-of-scope refused share) / 2), the best balanced score of any single
threshold chosen on these queries themselves (on the confidence, and on the cosine), the expected
calibration error of the first answer's confidence (10 bins) and lists whose shown confidence rises.
In-domain questions without an FAQ: Banking77 faqs_5 built without 10 of its intents, and small FAQs
(20 of sample_data's FAQs, 20 of Banking77's intents), and the same for single-question indexes (20 of
sample_data's FAQs with their first question only, CovidFAQ without 10 FAQs, Banking77 faqs_1 without
10 intents), three seeded choices each: the queries of the FAQs left out have no FAQ in the index.
sample_data zh one question: the Chinese sample FAQ with its first question only (its variants
dropped), a Chinese single-question index. Labels arriving: on the two single-question sets, half of
the queries (a fixed split) are approved as questions of their FAQ (`faqsearch approve`, what
`suggest` and feedback lead to), the index refreshes its confidence as it does after such edits, and
the other half is asked. A last table bins the confidence against the share right.

Out of scope: sample_data/offtopic*.txt for the samples; for Banking77, CovidFAQ queries and STSB-en
sentences; for CovidFAQ, Banking77 queries and STSB-en sentences (as benchmarks/calibration.py).

    python benchmarks/decision.py [--out FILE] [--jsonl DIR] [--sets NAME,...]
"""
from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import random
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from calibration import out_of_scope  # noqa: E402
from common import (DATA, SAMPLE, CachingEncoder, add_sets_option, approve_by_faq, corpus_rows, emit,  # noqa: E402
                    half_split, machine, sts_retrieval_set, wanted_sets, write_corpus_rows)

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.corpus import read_texts  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import ranking_metrics, read_labelled_queries  # noqa: E402

SETS = [(n,) for n in ("sample_data en", "sample_data zh (USE)", "sample_data zh one question (USE)", "CovidFAQ",
                       "Banking77 faqs_1", "Banking77 faqs_5",
                       "Banking77 faqs_all", "STSB-en retrieval", "zh-STS-B retrieval (USE)",
                       "Banking77 faqs_5 without 10 intents", "sample_data en 20 FAQs", "Banking77 faqs_5 20 intents",
                       "sample_data en 20 FAQs one question", "CovidFAQ without 10 FAQs",
                       "Banking77 faqs_1 without 10 intents",
                       "CovidFAQ half approved", "Banking77 faqs_1 half approved")]
LEFT_OUT = 10
SEEDS = (0, 1, 2)


def score(outs: list[dict], gold: list[set[str] | None]) -> dict:
    """decision.py's figures for ask --json outputs (gold None: out of scope), plus the oracle thresholds."""
    right = wrong = unans = oos = oos_ans = unsorted = 0
    conf, cos, ok_first = [], [], []
    for g, o in zip(gold, outs):
        a = o.get("answers") or []
        shown = [x.get("confidence", x.get("score")) for x in a]
        unsorted += any(s2 > s1 + 1e-9 for s1, s2 in zip(shown, shown[1:]))
        first = a[0] if a else (o.get("nearest") or {})
        ok = g is not None and first.get("faq_id") in g
        conf.append(first.get("confidence") if first.get("confidence") is not None else -1.0)
        cos.append(first.get("score") if first.get("score") is not None else -1.0)
        ok_first.append(ok)
        if g is None:
            oos += 1
            oos_ans += bool(o["answered"])
        elif not o["answered"]:
            unans += 1
        elif ok:
            right += 1
        else:
            wrong += 1
    ins = right + wrong + unans
    conf, cos, okf = np.array(conf), np.array(cos), np.array(ok_first, dtype=float)
    is_in = np.array([g is not None for g in gold])

    def best(values):
        if is_in.all():  # no out-of-scope questions: no threshold to choose
            return None
        cuts = np.unique(np.r_[values, values.max() + 1])
        return max(50 * (np.mean((values[is_in] >= t) * okf[is_in]) + np.mean(values[~is_in] < t)) for t in cuts)

    bins = [[] for _ in range(10)]
    for c, k in zip(conf, okf):
        if c >= 0:
            bins[min(9, int(c * 10))].append((c, k))
    n = sum(len(b) for b in bins)
    ece = sum(abs(np.mean([c for c, _ in b]) - np.mean([k for _, k in b])) * len(b) for b in bins if b) / n if n else None
    return {"in_scope": ins, "right": right, "oos": oos, "oos_answered": oos_ans,
            "balanced": 100 * ((right / ins if ins else 0) + (1 - oos_ans / oos if oos else 1)) / 2,
            "best_conf": best(conf) if n else None, "best_cos": best(cos), "ece": ece, "unsorted": unsorted,
            "bins": [(len(b), np.mean([k for _, k in b]) if b else None) for b in bins]}


def pct(n: int, of: int) -> str:
    return f"{100 * n / of:.1f}%" if of else "-"


def num(v: float | None, of: int = 1) -> str:
    """A balanced score, '-' where there is none (no out-of-scope questions)."""
    return "-" if v is None or not of else f"{v:.2f}"


def ask_all(e, texts: list[str], **kw) -> list[dict]:
    return [r.to_dict() for r in e.ask_many(texts, k=3, **kw)]


def one_question(corpus: str, out_dir: str) -> str:
    """The corpus with one question per FAQ: its first row's question, the variants column emptied."""
    rows, key = corpus_rows(corpus)
    first = {r[key]: {**r, "variants": ""} if "variants" in r else r for r in reversed(rows)}
    return write_corpus_rows(os.path.join(out_dir, "one_question_" + os.path.basename(corpus)), rows[0],
                             (first[f] for f in dict.fromkeys(r[key] for r in rows)))


def subset(corpus: str, keep: int, seed: int, out_dir: str) -> tuple[str, set[str], int]:
    """The corpus with ``keep`` of its FAQs (a negative number: all but that many), drawn by ``seed``;
    returns its path, the ids left out and the number kept."""
    rows, key = corpus_rows(corpus)
    ids = sorted({r[key] for r in rows})
    drop = set(random.Random(seed).sample(ids, -keep if keep < 0 else len(ids) - keep))
    path = write_corpus_rows(os.path.join(out_dir, f"subset_{seed}.csv"), rows[0],
                             (r for r in rows if r[key] not in drop))
    return path, drop, len(ids) - len(drop)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--jsonl", help="also write each set's ask --json lines and gold file here (for decision.py)")
    ap.add_argument("--learn", type=float, metavar="MINUTES",
                    help="the in-domain sets only: each index runs `faqsearch learn` with this budget before it is asked")
    ap.add_argument("--model", default="minilm", help="the encoder of the English sets (default minilm; e.g. mpnet)")
    add_sets_option(ap, SETS)
    args = ap.parse_args()
    wanted = wanted_sets(ap, args, SETS)
    logging.basicConfig(level=logging.ERROR)
    minilm = CachingEncoder(load_encoder(args.model))  # (named for the default)
    tmp = tempfile.mkdtemp()
    bank, covid = os.path.join(DATA, "Banking77"), os.path.join(DATA, "CovidFAQ")
    bank_oos, covid_oos = out_of_scope()  # as benchmarks/calibration.py
    sets = {
        "sample_data en": (minilm, os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv"),
                           read_texts(os.path.join(SAMPLE, "offtopic.txt"))),
        "CovidFAQ": (minilm, os.path.join(covid, "faqs.csv"), os.path.join(covid, "queries.csv"),
                     covid_oos),
        "Banking77 faqs_1": (minilm, os.path.join(bank, "faqs_1.csv"), os.path.join(bank, "queries.csv"), bank_oos),
        "Banking77 faqs_5": (minilm, os.path.join(bank, "faqs_5.csv"), os.path.join(bank, "queries.csv"), bank_oos),
        "Banking77 faqs_all": (minilm, os.path.join(bank, "faqs_all.csv"), os.path.join(bank, "queries.csv"), bank_oos),
    }
    use = CachingEncoder(load_encoder("use-multilingual")) if {n for n in wanted if "(USE)" in n} else None
    if use is not None:
        zh = (os.path.join(SAMPLE, "queries_zh.csv"), read_texts(os.path.join(SAMPLE, "offtopic_zh.txt")))
        sets["sample_data zh (USE)"] = (use, os.path.join(SAMPLE, "faq_zh.csv"), *zh)
        sets["sample_data zh one question (USE)"] = (use, one_question(os.path.join(SAMPLE, "faq_zh.csv"), tmp), *zh)
    # retrieval sets made from STS pairs (benchmarks/calibration.py): in scope only
    if "STSB-en retrieval" in wanted:
        sets["STSB-en retrieval"] = (minilm, *sts_retrieval_set(
            os.path.join(DATA, "STSB-en"), ["sts-train.tsv", "sts-dev.tsv", "sts-test.tsv"], tmp, "stsb-en"), [])
    if "zh-STS-B retrieval (USE)" in wanted:
        sets["zh-STS-B retrieval (USE)"] = (use, *sts_retrieval_set(
            os.path.join(DATA, "zh-STS-B"), ["train.tsv", "dev.tsv", "test.tsv"], tmp, "zh-sts"), [])
    table = ["| set | in scope / out of scope | operating point | in-scope right | out-of-scope answered | balanced | "
             "best single threshold (confidence / cosine) | ECE | rising lists | before: right / out-of-scope answered / "
             "balanced (cosine threshold) | MRR@10 / R@1 |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    reliability: dict[str, list] = {}
    for name in [n for n, in SETS if n in wanted and n in sets]:
        print(name, "...", file=sys.stderr, flush=True)
        enc, corpus, qfile, oos = sets[name]
        queries = read_labelled_queries(qfile)
        e = FAQSearch.build(corpus, os.path.join(tmp, "ix"), encoder=enc, force=True)
        texts, gold = [q.text for q in queries] + list(oos), [q.gold for q in queries] + [None] * len(oos)
        outs = ask_all(e, texts)
        now = score(outs, gold)
        then = score(ask_all(e, texts, threshold=e.threshold), gold)
        ranked = [[a.faq_id for a in r.answers] for r in e.ask_many([q.text for q in queries], k=10, threshold=-1.0)]
        m = ranking_metrics(ranked, [q.gold for q in queries])
        reliability[name] = now["bins"]
        if args.jsonl:
            write_jsonl(args.jsonl, name, texts, gold, outs)
        op = e.snapshot.min_confidence
        table.append(
            f"| {name} | {now['in_scope']} / {now['oos']} | {op:.2f} | {100 * now['right'] / now['in_scope']:.1f}% | "
            f"{pct(now['oos_answered'], now['oos'])} | {num(now['balanced'], now['oos'])} | "
            f"{num(now['best_conf'])} / {num(now['best_cos'])} | {now['ece']:.3f} | {now['unsorted']} | "
            f"{100 * then['right'] / then['in_scope']:.1f}% / {pct(then['oos_answered'], then['oos'])} / "
            f"{num(then['balanced'], then['oos'])} | {100 * m['mrr@10']:.2f} / {100 * m['recall@1']:.2f} |")
        e.close()
    unknown = ["| set (seed) | FAQs kept | kept FAQs' queries answered right | other FAQs' queries answered | "
               "out-of-scope answered | before: right / other FAQs' answered / out-of-scope answered (cosine threshold) | "
               "operating point |", "|---|---|---|---|---|---|---|"]
    subsets = [  # name, corpus, queries, FAQs kept (negative: left out), out-of-scope questions
        ("Banking77 faqs_5 without 10 intents", os.path.join(bank, "faqs_5.csv"), os.path.join(bank, "queries.csv"),
         -LEFT_OUT, bank_oos),
        ("sample_data en 20 FAQs", os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv"), 20,
         read_texts(os.path.join(SAMPLE, "offtopic.txt"))),
        ("Banking77 faqs_5 20 intents", os.path.join(bank, "faqs_5.csv"), os.path.join(bank, "queries.csv"), 20, bank_oos),
        # single-question FAQs: their confidence comes from pseudo-queries and decides at the cosine threshold
        ("sample_data en 20 FAQs one question", one_question(os.path.join(SAMPLE, "faq.csv"), tmp),
         os.path.join(SAMPLE, "queries.csv"), 20, read_texts(os.path.join(SAMPLE, "offtopic.txt"))),
        ("CovidFAQ without 10 FAQs", os.path.join(covid, "faqs.csv"), os.path.join(covid, "queries.csv"), -LEFT_OUT,
         covid_oos),
        ("Banking77 faqs_1 without 10 intents", os.path.join(bank, "faqs_1.csv"), os.path.join(bank, "queries.csv"),
         -LEFT_OUT, bank_oos),
    ]
    for name, corpus, qfile, keep, oos in subsets:
        if name not in wanted:
            continue
        queries = read_labelled_queries(qfile)
        sums = np.zeros(6)
        for seed in SEEDS:
            print(f"{name}, seed {seed} ...", file=sys.stderr, flush=True)
            path, drop, kept_n = subset(corpus, keep, seed, tmp)
            e = FAQSearch.build(path, os.path.join(tmp, "ix"), encoder=minilm, force=True)
            learned = f", learn: {'kept' if e.learn(minutes=args.learn).kept else 'not kept'}" if args.learn else ""
            kept = [q for q in queries if not q.gold & drop]
            gone = [q.text for q in queries if q.gold <= drop]
            row = []
            for kw in ({}, {"threshold": e.threshold}):
                k_out = ask_all(e, [q.text for q in kept], **kw)
                right = np.mean([o["answered"] and o["answers"][0]["faq_id"] in q.gold for o, q in zip(k_out, kept)])
                row += [100 * right, 100 * np.mean([o["answered"] for o in ask_all(e, gone, **kw)]),
                        100 * np.mean([o["answered"] for o in ask_all(e, list(oos), **kw)])]
            sums += row
            unknown.append(f"| {name} ({seed}{learned}) | {kept_n} | {row[0]:.1f}% | {row[1]:.1f}% | {row[2]:.1f}% | "
                           f"{row[3]:.1f}% / {row[4]:.1f}% / {row[5]:.1f}% | {e.snapshot.min_confidence:.2f} |")
            e.close()
        m = sums / len(SEEDS)
        unknown.append(f"| {name}: mean of {len(SEEDS)} | | {m[0]:.1f}% | {m[1]:.1f}% | {m[2]:.1f}% | "
                       f"{m[3]:.1f}% / {m[4]:.1f}% / {m[5]:.1f}% | |")
    labels = ["| set | operating point | in-scope right | out-of-scope answered | balanced | best single threshold "
              "(confidence / cosine) | ECE | before the approvals: operating point / right / balanced / ECE |",
              "|---|---|---|---|---|---|---|---|"]
    for name, corpus, qfile, oos in (
            ("CovidFAQ half approved", os.path.join(covid, "faqs.csv"), os.path.join(covid, "queries.csv"),
             sets["CovidFAQ"][3]),
            ("Banking77 faqs_1 half approved", os.path.join(bank, "faqs_1.csv"), os.path.join(bank, "queries.csv"),
             bank_oos)):
        if name in wanted:
            print(name, "...", file=sys.stderr, flush=True)
            labels.append(approved_half(minilm, corpus, qfile, oos, os.path.join(tmp, "ix"), name))
    rel = ["| confidence | " + " | ".join(reliability) + " |", "|---|" + "---|" * len(reliability)]
    for i in range(10):
        cells = []
        for bins in reliability.values():
            n, share = bins[i]
            cells.append(f"{100 * share:.0f}% right of {n}" if n else "-")
        rel.append(f"| {i / 10:.1f}-{(i + 1) / 10:.1f} | " + " | ".join(cells) + " |")
    sections = [("Answer or abstain at the default operating point (k=3, as `ask --json`)", table),
                ("In-domain questions without an FAQ: each index holds some of a set's FAQs, and the queries of the "
                 "others are asked of it", unknown),
                ("Labels arriving: half of a single-question set's queries approved as questions, the other half asked",
                 labels),
                ("Reliability: first answers binned by confidence, the share right in each bin (in-scope and "
                 "out-of-scope queries together)", rel if reliability else [])]
    model = f" --model {args.model}" if args.model != "minilm" else ""
    emit([f"Measured {machine()} with `python benchmarks/decision.py{model}`", ""] +
         [line for title, rows in sections if len(rows) > 2 for line in (title, "", *rows, "")], args.out)


def approved_half(encoder, corpus: str, qfile: str, oos: list[str], where: str, name: str) -> str:
    """A table row: the index asked the held-back half of the queries (and the out-of-scope ones) before
    and after the other half is approved as questions of their FAQs (one approve per FAQ)."""
    given, asked = half_split(read_labelled_queries(qfile))
    texts, gold = [q.text for q in asked] + list(oos), [q.gold for q in asked] + [None] * len(oos)
    e = FAQSearch.build(corpus, where, encoder=encoder, force=True)
    before, op_before = score(ask_all(e, texts), gold), e.snapshot.min_confidence
    approve_by_faq(e, given)
    now, op = score(ask_all(e, texts), gold), e.snapshot.min_confidence
    e.close()
    return (f"| {name} ({len(given)} approved, {now['in_scope']} / {now['oos']} asked) | {op:.2f} | "
            f"{100 * now['right'] / now['in_scope']:.1f}% | {pct(now['oos_answered'], now['oos'])} | {now['balanced']:.2f} | "
            f"{num(now['best_conf'])} / {num(now['best_cos'])} | {now['ece']:.3f} | {op_before:.2f} / "
            f"{100 * before['right'] / before['in_scope']:.1f}% / {before['balanced']:.2f} / {before['ece']:.3f} |")


def write_jsonl(folder: str, name: str, texts: list[str], gold: list, outs: list[dict]) -> None:
    os.makedirs(folder, exist_ok=True)
    stem = os.path.join(folder, name.replace(" ", "_").replace("(", "").replace(")", ""))
    with open(stem + ".gold.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["query", "faq_id"])
        for t, g in zip(texts, gold):
            w.writerow([t, sorted(g)[0] if g else "none"])
    with open(stem + ".jsonl", "w", encoding="utf-8") as fh:
        for o in outs:
            fh.write(json.dumps(o) + "\n")


if __name__ == "__main__":
    main()
