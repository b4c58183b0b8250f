"""Can an index of single-question FAQs calibrate its confidence without labels? (issue #44's ECE line:
CovidFAQ and Banking77 faqs_1, whose real queries are much harder than the word-dropout pseudo-queries
the index learns from.)

Each index is built once with the defaults (sample_data en with each FAQ's first question only,
CovidFAQ, Banking77 faqs_1, STSB-en retrieval, sample_data zh with one question under USE). Kept: the
simulation's negatives as faqsearch/tuning/confidence.py makes them (each single question asked of the
index without it; the shipped general questions), pseudo-queries made with several shares of words
dropped (the committed rule drops a third), and the first answers' features of the set's real queries
and out-of-scope questions. Then, offline:

1. `pseudo`: the confidence fitted on the simulation (the committed weights) with the cosine alone (as
   committed) or with the fused margin and token match too, for each share of words dropped; the
   calibration error (10 bins) on the real queries and out-of-scope questions together, and the
   decision it gives where its operating point answers as many general questions as the index's
   cosine threshold does (in-scope right, out of scope answered, balanced, against the threshold's
   own balanced).
2. `transfer`: a model fitted on one set's real, labelled queries (a prior faqsearch could ship)
   applied to the others.

    python benchmarks/experiments/single_calibration.py [--out FILE]
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
from calibration import out_of_scope, sts_retrieval_set  # noqa: E402
from common import DATA, SAMPLE, CachingEncoder, emit, machine  # noqa: E402
from confidence_limits import ece  # noqa: E402 (the same calibration error)
from decision import one_question  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.confidence import FEATURES, fit_logistic, sigmoid  # noqa: E402
from faqsearch.corpus import read_texts  # noqa: E402
from faqsearch.defaults import CONFIDENCE_MIX, CONFIDENCE_SINGLES  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import read_labelled_queries  # noqa: E402
from faqsearch.tuning import confidence as conf  # noqa: E402
from faqsearch.tuning.threshold import offtopic_for  # noqa: E402

RATES = (1 / 3, 0.5, 0.6, 0.7)  # shares of words dropped (1/3: the committed rule)
CHOICES = {"cosine (committed)": ("cosine",), "cosine, margin": ("cosine", "margin"),
           "cosine, margin, token": ("cosine", "margin", "token")}


def dropped(text: str, rng: random.Random, rate: float) -> str | None:
    """``text`` with about ``rate`` of its words dropped (conf.dropped's pieces; at least one kept)."""
    pieces = conf._pieces(text)
    if len(pieces) < 3:
        return None
    keep = [p for p in pieces if rng.random() > rate]
    if len(keep) == len(pieces):
        keep = pieces[:-1]
    elif not keep:
        keep = [max(pieces, key=lambda p: len(p[0]))]
    return "".join((" " if spaced and i else "") + piece for i, (piece, spaced) in enumerate(keep))


def collect(encoder, corpus: str, qfile: str, oos: list[str], where: str) -> dict:
    e = FAQSearch.build(corpus, where, encoder=encoder, force=True)
    s = e.searcher()
    snap = s.snap
    qids, keys = snap.store.question_faqs()
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    rng = random.Random(0)  # the draws of conf.simulate
    singles = sorted(int(first[i]) for i in np.flatnonzero(counts == 1))
    singles = sorted(rng.sample(singles, min(len(singles), CONFIDENCE_SINGLES)))
    texts = snap.store.question_rows(qids[singles])
    firsts = snap.store.question_rows(qids[sorted(rng.sample(sorted(int(i) for i in first),
                                                             min(len(first), CONFIDENCE_SINGLES)))])
    pseudo = {}
    for rate in RATES:
        r = random.Random(0)
        made = [(row[1], dropped(row[2], r, rate)) for row in firsts]
        made = [(f, t) for f, t in made if t]
        pseudo[rate] = conf.labelled_rows(conf.ranked_lists(s, [t for _, t in made]), [{f} for f, _ in made])
    queries = read_labelled_queries(qfile)
    xk, yk = conf.labelled_rows(conf.ranked_lists(s, [q.text for q in queries]), [q.gold for q in queries])
    d = {"threshold": e.threshold, "pseudo": pseudo, "xk": xk, "yk": yk,
         "in_domain": conf.rows(conf.ranked_lists(s, [t[2] for t in texts], [t[1] for t in texts])),
         "general": conf.rows(conf.ranked_lists(s, offtopic_for(s))),
         "oos": conf.rows(conf.ranked_lists(s, oos)) if oos else np.zeros((0, len(FEATURES)))}
    e.close()
    return d


def fitted(x: np.ndarray, y: np.ndarray, w: np.ndarray, names) -> callable:
    mask = np.isin(FEATURES, names).astype(float)
    coef, b = fit_logistic(x * mask, y, w)
    return lambda z: sigmoid((z * mask) @ coef + b)


def decision(p: np.ndarray, yk: np.ndarray, op: float) -> tuple[float, float, float]:
    pk, po = p[:len(yk)], p[len(yk):]
    right = float(np.mean((pk >= op) * yk))
    oos = float(np.mean(po >= op)) if len(po) else float("nan")
    return right, oos, 50 * (right + 1 - oos)


def pseudo_table(sets: dict) -> list[str]:
    out = ["| features | words dropped | set | pseudo-queries right | ECE | in-scope right | out of scope answered | "
           "balanced | at the cosine threshold: right / answered / balanced |", "|---|---|---|---|---|---|---|---|---|"]
    for label, names in CHOICES.items():
        for rate in RATES:
            for name, d in sets.items():
                xp, yp = d["pseudo"][rate]
                parts = [(xp, yp, CONFIDENCE_MIX[0]), (d["in_domain"], None, CONFIDENCE_MIX[1]),
                         (d["general"], None, CONFIDENCE_MIX[2])]
                x = np.concatenate([p[0] for p in parts])
                y = np.concatenate([p[1] if p[1] is not None else np.zeros(len(p[0])) for p in parts])
                w = np.concatenate([np.full(len(p[0]), p[2] / len(p[0])) for p in parts]) * len(x)
                f = fitted(x, y, w, names)
                p = f(np.r_[d["xk"], d["oos"]])
                share = float(np.mean(d["general"][:, 0] >= d["threshold"]))  # the threshold's general answered
                g = np.sort(f(d["general"]))[::-1]
                op = float(g[int(share * len(g))]) + 1e-9 if share < 1 else 0.0
                got = decision(p, d["yk"], op)
                then = decision(np.r_[d["xk"][:, 0], d["oos"][:, 0]], d["yk"], d["threshold"])
                c = ece(p, np.r_[d["yk"], np.zeros(len(d["oos"]))])
                out.append(f"| {label} | {rate:.2f} | {name} | {100 * yp.mean():.1f}% | {c:.3f} | {100 * got[0]:.1f}% | "
                           f"{100 * got[1]:.1f}% | {got[2]:.2f} | {100 * then[0]:.1f}% / {100 * then[1]:.1f}% / "
                           f"{then[2]:.2f} |")
    return out


def transfer_table(sets: dict) -> list[str]:
    names = [n for n in sets]
    out = ["| features | fitted on the real queries of | " + " | ".join(f"ECE {n}" for n in names) + " |",
           "|---|---|" + "---|" * len(names)]
    for label, feats in CHOICES.items():
        for src in names:
            d = sets[src]
            x, y = np.r_[d["xk"], d["oos"]], np.r_[d["yk"], np.zeros(len(d["oos"]))]
            f = fitted(x, y, np.ones(len(y)), feats)
            cells = [f"{ece(f(np.r_[t['xk'], t['oos']]), np.r_[t['yk'], np.zeros(len(t['oos']))]):.3f}"
                     for t in sets.values()]
            out.append(f"| {label} | {src} | " + " | ".join(cells) + " |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    tmp = tempfile.mkdtemp()
    minilm, use = CachingEncoder(load_encoder("minilm")), CachingEncoder(load_encoder("use-multilingual"))
    bank_oos, covid_oos = out_of_scope()
    specs = {
        "sample_data en one question": (minilm, one_question(os.path.join(SAMPLE, "faq.csv"), tmp),
                                        os.path.join(SAMPLE, "queries.csv"), read_texts(os.path.join(SAMPLE, "offtopic.txt"))),
        "CovidFAQ": (minilm, os.path.join(DATA, "CovidFAQ", "faqs.csv"), os.path.join(DATA, "CovidFAQ", "queries.csv"), covid_oos),
        "Banking77 faqs_1": (minilm, os.path.join(DATA, "Banking77", "faqs_1.csv"),
                             os.path.join(DATA, "Banking77", "queries.csv"), bank_oos),
        "STSB-en retrieval": (minilm, *sts_retrieval_set(os.path.join(DATA, "STSB-en"),
                                                         ["sts-train.tsv", "sts-dev.tsv", "sts-test.tsv"], tmp, "stsb-en"), []),
        "sample_data zh one question (USE)": (use, one_question(os.path.join(SAMPLE, "faq_zh.csv"), tmp),
                                              os.path.join(SAMPLE, "queries_zh.csv"),
                                              read_texts(os.path.join(SAMPLE, "offtopic_zh.txt"))),
    }
    sets = {}
    for i, (name, (enc, corpus, qfile, oos)) in enumerate(specs.items()):
        print(name, "...", file=sys.stderr, flush=True)
        sets[name] = collect(enc, corpus, qfile, list(oos), os.path.join(tmp, f"ix{i}"))
    lines = [f"Measured {machine()} with `python benchmarks/experiments/single_calibration.py`", "",
             "The confidence fitted on the simulation, for each share of words dropped from the pseudo-queries "
             "(operating point: as many general questions answered as at the index's cosine threshold)", "",
             *pseudo_table(sets), "", "A model fitted on one set's real queries, applied to the others", "",
             *transfer_table(sets)]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
