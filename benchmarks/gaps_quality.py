"""Does `faqsearch gaps` find the FAQs an index is missing? Hold FAQs out of the index, send the
queries users asked about them (with everyone else's), and check whether each held-out FAQ comes
back as one gap.

Development set (the similarity default was chosen here): sample_data, 15 FAQs held out, their 45
corpus questions sent as user queries among the 159 held-out user queries. Test set, never used
for a choice: ../shared/data/CovidFAQ, the 10 FAQs with the most user queries held out, all 1,073
queries sent.

A held-out FAQ is *found as one gap* when exactly one gap has a majority of its queries and that
gap holds at least half of its queries that reached the gap pool (a query reaches the pool when it
was not answered, or answered within `margin` of the confidence the index answers at, at most halfway
to certain: faqsearch.gaps.low_bar); *split* when several gaps have
a majority of its queries; *missed* otherwise. Precision@10: the share of the 10 largest gaps
whose majority is a held-out FAQ (the rest is noise: in-index topics that were answered badly).

    python benchmarks/gaps_quality.py [--out results.md]
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DATA, SAMPLE, emit, machine  # noqa: E402

from faqsearch import FAQSearch, read_corpus  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.gaps import find_gaps  # noqa: E402
from faqsearch.querylog import QueryLog  # noqa: E402

SIMILARITIES = (0.45, 0.55, 0.65)
MARGINS = (0.05, 0.15, 0.25)


def read_queries(path: str) -> list[tuple[str, str]]:
    """(query, gold) with each query once (its first gold FAQ when it has several)."""
    with open(path, encoding="utf-8") as fh:
        first: dict[str, str] = {}
        for r in csv.DictReader(fh):
            first.setdefault(r["query"], r["faq_id"])
    return list(first.items())


def run(name, faqs, queries, held, encoder, tmp):
    kept = [f for f in faqs if f.id not in held]
    path = os.path.join(tmp, name)
    engine = FAQSearch.build(kept, path, encoder=encoder)
    qlog = QueryLog(os.path.join(tmp, f"{name}.queries.db"))
    results = engine.ask_many([q for q, _ in queries], k=1)
    ids = qlog.record(results, engine.mode)
    gold = dict(zip(ids, [g for _, g in queries]))
    rows = []
    for margin, sim in [(m, s) for m in MARGINS for s in SIMILARITIES]:
        pool = {r["id"] for r in qlog.candidates(margin=margin)}
        gaps = find_gaps(engine, qlog, similarity=sim, margin=margin, limit=1000)
        in_pool = Counter(gold[i] for i in pool if gold[i] in held)
        majority = []
        for g in gaps:
            top, n = Counter(gold[i] for i in g.query_ids).most_common(1)[0]
            majority.append((top if n * 2 > len(g.query_ids) else None, n))
        found = split = 0
        reachable = sum(1 for h in held if in_pool[h] >= 2)
        for h in held:
            mine = [(g, n) for g, (top, n) in zip(gaps, majority) if top == h]
            if len(mine) == 1 and mine[0][1] * 2 >= in_pool[h]:
                found += 1
            elif len(mine) > 1:
                split += 1
        top10 = majority[:10]
        precision = sum(1 for top, _ in top10 if top in held) / max(1, len(top10))
        held_pool = sum(in_pool.values())
        rows.append((margin, sim, len(pool), held_pool, reachable, len(gaps), found, split,
                     len(held) - found - split, precision))
    engine.close()
    qlog.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    enc = load_encoder("minilm")
    lines = [f"Measured {machine()}; minilm, default index settings (each answers at its own confidence), gap "
             "pool = unanswered or answered within `margin` of the confidence it answers at (at most halfway to "
             "certain: gaps.low_bar), gaps of at least 2 queries; defaults: margin 0.25, similarity 0.55", ""]
    with tempfile.TemporaryDirectory() as tmp:
        sample = read_corpus(os.path.join(SAMPLE, "faq.csv"))
        held = {f.id for f in sample[::10]}  # 15 FAQs spread over the categories
        queries = [(q, f.id) for f in sample if f.id in held for q in f.questions]
        queries += read_queries(os.path.join(SAMPLE, "queries.csv"))
        sets = [("sample_data (development)", sample, queries, held)]
        covid = os.path.join(DATA, "CovidFAQ")
        if os.path.isdir(covid):
            cfaqs = read_corpus(os.path.join(covid, "faqs.csv"), fmt="csv")
            cq = read_queries(os.path.join(covid, "queries.csv"))
            counts = Counter(g for _, g in cq)
            cheld = {f for f, _ in counts.most_common(10)}
            sets.append(("CovidFAQ (held out)", cfaqs, cq, cheld))
        for name, faqs, qs, hd in sets:
            rows = run(name.split()[0], faqs, qs, hd, enc, tmp)
            n_held_q = sum(1 for _, g in qs if g in hd)
            lines += [f"### {name}: {len(faqs) - len(hd)} FAQs indexed, {len(hd)} held out; {len(qs)} distinct "
                      f"queries sent, {n_held_q} about held-out FAQs", "",
                      "| margin | similarity | queries in pool | of them held-out | held-out FAQs with 2+ in pool | gaps "
                      "| found as one gap | split | missed | precision@10 |", "|---|---|---|---|---|---|---|---|---|---|"]
            lines += [f"| {mg:g} | {s:g} | {pl} | {hp} | {rc} | {n} | {f} of {len(hd)} | {sp} | {m} | {p:.2f} |"
                      for mg, s, pl, hp, rc, n, f, sp, m, p in rows]
            lines.append("")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
