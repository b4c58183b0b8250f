"""Which scores the label-free confidence should weigh (issue #44): the three of 2026-11-25 (cosine,
fused margin, token match) against those with the FAQ prototype scores (the cosine to the answer's
FAQ prototype, and its margin over the best other FAQ's among the first 20 answers).

Each index is built once with the defaults; the candidate pools of its simulation
(faqsearch/tuning/confidence.py: held-out variants, the same with their FAQ left out, single-question
FAQs left out, the shipped general questions) and of its test queries are kept with every score,
prototype cosines included, then the confidence is fitted on the simulation with each set of
features (the committed fit and operating-point rule; features left out are zero) and measured on
the test queries: balanced score at the operating point against the best single threshold, ECE, and
on indexes holding only some FAQs, the kept FAQs' queries answered right and the other FAQs' queries
answered; then the five scores with the operating point chosen for several shares of in-domain
unknowns (`tune confidence --unknowns`). "Half approved" sets are built with half of the queries (decision.py's split) added as
questions of their FAQ, as approvals make them (at ingest here, not by edits).

    python benchmarks/experiments/confidence_features.py [--out FILE]
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
from calibration import out_of_scope  # noqa: E402
from common import (DATA, SAMPLE, CachingEncoder, corpus_rows, emit, half_split, machine,  # noqa: E402
                    write_corpus_rows)
from confidence_limits import best_balanced, ece  # noqa: E402 (the same best threshold and calibration error)
from decision import subset  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.confidence import FEATURES, features  # noqa: E402
from faqsearch.corpus import read_texts  # noqa: E402
from faqsearch.defaults import CONFIDENCE_SINGLES, FUSION_POOL, UNKNOWN_SHARE  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import read_labelled_queries  # noqa: E402
from faqsearch.tuning import confidence as conf  # noqa: E402
from faqsearch.tuning.fusion import TooFewVariantsError, variant_rounds  # noqa: E402
from faqsearch.tuning.threshold import offtopic_for  # noqa: E402

CHOICES = {"three scores (before)": FEATURES[:3], "+ prototype cosine": FEATURES[:4],
           "+ prototype margin": FEATURES[:3] + FEATURES[4:], "all five (now)": FEATURES}
SEEDS = (0, 1, 2)
SHARES = (0.0, 0.1, 0.25, 0.4, 0.5, 0.75)  # `tune confidence --unknowns`


def pools(searcher, texts: list[str]) -> list[list]:
    """Each text's candidate pool as `ask` makes it in the index's mode, prototype cosines included."""
    snap, out = searcher.snap, []
    for start in range(0, len(texts), 64):
        block = texts[start:start + 64]
        v = searcher.vectors(block, tokens=snap.mode == "hybrid" and snap.token_weight > 0)
        got = searcher.candidates(block, v, FUSION_POOL) if snap.mode == "hybrid" else \
            searcher.dense(v, FUSION_POOL, widen=False)
        searcher.add_prototype_scores(v.full, got, always=True)
        out += got
    return out


def collect(encoder, corpus, qfile, oos, where, keep=None, seed=0) -> dict:
    drop: set[str] = set()
    if keep is not None:
        corpus, drop, _ = subset(corpus, keep, seed, os.path.dirname(where))
    queries = read_labelled_queries(qfile)
    e = FAQSearch.build(corpus, where, encoder=encoder, force=True)
    s = e.searcher()
    snap = s.snap
    try:
        cands, gold = variant_rounds(s)
    except TooFewVariantsError:
        cands, gold = [], []
    qids, keys = snap.store.question_faqs()
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    singles = sorted(int(first[i]) for i in np.flatnonzero(counts == 1))
    singles = sorted(random.Random(0).sample(singles, min(len(singles), CONFIDENCE_SINGLES)))
    rows = snap.store.question_rows(qids[singles]) if singles else []
    kept = [q for q in queries if not q.gold & drop]
    gone = [q for q in queries if q.gold <= drop] if drop else []
    rank = lambda lists: [conf.rank(snap, c) for c in lists]  # noqa: E731
    d = {"threshold": e.threshold, "pos": rank(cands), "gold": gold,
         "in_domain": rank([[a for a in c if a.faq_id not in g] for c, g in zip(cands, gold)])
         + rank([[a for a in p if a.faq_id != r[1]] for p, r in zip(pools(s, [r[2] for r in rows]), rows)]),
         "general": rank(pools(s, offtopic_for(s))), "kept": rank(pools(s, [q.text for q in kept])),
         "kept_gold": [q.gold for q in kept], "gone": rank(pools(s, [q.text for q in gone])),
         "oos": rank(pools(s, list(oos)))}
    e.close()
    return d


def table(lists, names) -> np.ndarray:
    keep = np.array([n in names for n in FEATURES], dtype=float)
    return np.array([features(c)[0] * keep for c in lists if c]).reshape(-1, len(FEATURES))


def right(lists, gold) -> np.ndarray:
    return np.array([c[0].faq_id in g for c, g in zip(lists, gold) if c], dtype=float)


def measure(d: dict, names, share: float = UNKNOWN_SHARE) -> dict:
    sim = conf.Simulation(table(d["pos"], names), right(d["pos"], d["gold"]), table(d["in_domain"], names),
                          table(d["general"], names))
    m = conf.fit(sim, d["threshold"], unknown_share=share)
    pk, ok, po = m.probability(table(d["kept"], names)), right(d["kept"], d["kept_gold"]), m.probability(table(d["oos"], names))
    op = m.operating_point
    out = {"right": np.mean((pk >= op) * ok), "oos": np.mean(po >= op)}
    out["balanced"] = 50 * (out["right"] + 1 - out["oos"])
    out["best"] = best_balanced(pk, ok, po)
    out["ece"] = ece(np.r_[pk, po], np.r_[ok, np.zeros(len(po))])
    if d["gone"]:
        out["gone"] = np.mean(m.probability(table(d["gone"], names)) >= op)
    return out


def approved(corpus: str, qfile: str, folder: str) -> tuple[str, str]:
    """The corpus with half of the queries added as questions of their FAQ, and the other half."""
    given, asked = half_split(read_labelled_queries(qfile))
    rows, key = corpus_rows(corpus)
    answer = {r[key]: r["answer"] for r in rows}
    qpath = os.path.join(folder, "asked.csv")
    path = write_corpus_rows(os.path.join(folder, "approved.csv"), rows[0], rows + [
        {**{k: "" for k in rows[0]}, key: sorted(q.gold)[0], "question": q.text, "answer": answer[sorted(q.gold)[0]]}
        for q in given])
    with open(qpath, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["query", "faq_id"])
        w.writerows([q.text, sorted(q.gold)[0]] for q in asked)
    return path, qpath


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    enc = CachingEncoder(load_encoder("minilm"))
    tmp = tempfile.mkdtemp()
    ix = os.path.join(tmp, "ix")
    bank, covid = os.path.join(DATA, "Banking77"), os.path.join(DATA, "CovidFAQ")
    bank_oos, covid_oos = out_of_scope()
    bq, f5, sq = os.path.join(bank, "queries.csv"), os.path.join(bank, "faqs_5.csv"), os.path.join(SAMPLE, "queries.csv")
    sample, sample_oos = os.path.join(SAMPLE, "faq.csv"), read_texts(os.path.join(SAMPLE, "offtopic.txt"))
    full = {"sample_data en": collect(enc, sample, sq, sample_oos, ix),
            "Banking77 faqs_5": collect(enc, f5, bq, bank_oos, ix),
            "Banking77 faqs_all": collect(enc, os.path.join(bank, "faqs_all.csv"), bq, bank_oos, ix)}
    for name, corpus, qf, oos in (("CovidFAQ half approved", os.path.join(covid, "faqs.csv"), os.path.join(covid, "queries.csv"), covid_oos),
                                  ("Banking77 faqs_1 half approved", os.path.join(bank, "faqs_1.csv"), bq, bank_oos)):
        full[name] = collect(enc, *approved(corpus, qf, tmp), oos, ix)
    parts = {name: [collect(enc, corpus, qf, oos, ix, keep, s) for s in SEEDS]
             for name, corpus, qf, oos, keep in (("faqs_5 without 10 intents", f5, bq, bank_oos, -10),
                                                  ("20 intents", f5, bq, bank_oos, 20),
                                                  ("sample 20 FAQs", sample, sq, sample_oos, 20))}
    head = ["| features | " + " | ".join(f"{n}: balanced (best) / ECE" for n in full) + " | " +
            " | ".join(f"{n}: right / others answered" for n in parts) + " |",
            "|---|" + "---|" * (len(full) + len(parts))]
    for label, names in CHOICES.items():
        cells = [f"{m['balanced']:.2f} ({m['best']:.2f}) / {m['ece']:.3f}" for m in (measure(d, names) for d in full.values())]
        for runs in parts.values():
            got = [measure(d, names) for d in runs]
            cells.append(f"{100 * np.mean([g['right'] for g in got]):.1f}% / {100 * np.mean([g['gone'] for g in got]):.1f}%")
        head.append(f"| {label} | " + " | ".join(cells) + " |")
    shares = ["| in-domain share (`--unknowns`) | " + " | ".join(f"{n}: right / out of scope answered" for n in full) + " | " +
              " | ".join(f"{n}: right / others answered" for n in parts) + " |", "|---|" + "---|" * (len(full) + len(parts))]
    for share in SHARES:
        cells = [f"{100 * m['right']:.1f}% / {100 * m['oos']:.1f}%" for m in (measure(d, FEATURES, share) for d in full.values())]
        for runs in parts.values():
            got = [measure(d, FEATURES, share) for d in runs]
            cells.append(f"{100 * np.mean([g['right'] for g in got]):.1f}% / {100 * np.mean([g['gone'] for g in got]):.1f}%")
        shares.append(f"| {share}{' (default)' if share == UNKNOWN_SHARE else ''} | " + " | ".join(cells) + " |")
    emit([f"Measured {machine()} with `python benchmarks/experiments/confidence_features.py`", "",
          f"The confidence fitted on each index's simulation with each set of features (in-domain sets: mean of seeds {', '.join(map(str, SEEDS))})",
          "", *head, "", "The five scores with the operating point chosen for each share of in-domain unknowns among the "
          "out-of-scope questions (`faqsearch tune confidence auto --unknowns SHARE`)", "", *shares], args.out)


if __name__ == "__main__":
    main()
