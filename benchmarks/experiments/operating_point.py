"""Issue #44: how the label-free operating point moves, and what it gives on the test queries.

For each set an index is built with the defaults (`faqsearch ingest`), the confidence's simulation is
made as `ingest` makes it (`faqsearch.tuning.confidence.simulate` over the held-out variants of
`variant_rounds`), and the test queries are ranked as `ask` ranks them (`ranked_lists`), their first
answers' features kept. Then:

``shares``: the model and operating point fitted (`confidence.fit`) for each in-domain share of the
out-of-scope questions (`tune confidence auto --unknowns SHARE`), and at each the test's in-scope
answered right, out of scope answered, balanced score and the best balanced of any single threshold
on the test queries themselves.

``draws``: which questions the simulation holds out is a draw (seed 0 for every index today; an edit
that recalibrates draws again). Five draws (seed offsets 0, 100, ... 400 for the rounds of held-out
questions), at the default share: the operating point fitted on each, and beside it the median of
the operating points of 50 bootstrap resamples of that simulation (each kind resampled, the model
fitted again on each), with the test figures at both.

Sets: Banking77 faqs_5 and faqs_all (out of scope: 500 CovidFAQ queries and 500 STSB-en sentences, as
benchmarks/calibration.py), sample_data en (its 30 off-topic questions), and Banking77 faqs_5 without
10 intents (seeds 0, 1, 2: the left-out intents' test queries are the out of scope; "balanced" there
weighs the kept intents' right answers against the left-out ones refused).

The code measured is the faqsearch the interpreter imports: run it with another checkout first on
PYTHONPATH to measure that code (the record names which): the rounds are its own `variant_rounds`
(with the seed of their first round moved), and where its fit bags the point by default (the FAQ-head
branch), "fitted" is one simulation's point with that bootstrap off (`resamples=0`).

    python benchmarks/experiments/operating_point.py [--part shares|draws|both] [--sets faqs_5,...]
"""
from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from calibration import out_of_scope  # noqa: E402
from common import DATA, SAMPLE, CachingEncoder  # noqa: E402
from confidence_limits import best_balanced  # noqa: E402
from decision import subset  # noqa: E402

import faqsearch  # noqa: E402
from faqsearch import FAQSearch  # noqa: E402
from faqsearch.corpus import read_texts  # noqa: E402
from faqsearch.defaults import UNKNOWN_SHARE  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import read_labelled_queries  # noqa: E402
from faqsearch.tuning import confidence as conf  # noqa: E402
from faqsearch.tuning.fusion import variant_rounds  # noqa: E402
from faqsearch.tuning.threshold import offtopic_for  # noqa: E402

# the point one simulation's fit chooses: with resamples=0 where the code bags it by default (the branch)
SINGLE = {"resamples": 0} if "resamples" in inspect.signature(conf.fit).parameters else {}

SETS = ("faqs_5", "sample", "faqs_all", "leftout0", "leftout1", "leftout2")
SHARES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.35)
OFFSETS = (0, 100, 200, 300, 400)
RESAMPLES = 50


def first_answers(searcher, texts: list[str], gold: list) -> tuple[np.ndarray, np.ndarray]:
    """The features of each text's first answer as `ask` ranks it, and 1 where it is a gold FAQ."""
    lists = conf.ranked_lists(searcher, texts)
    rows = np.array([conf.top_features(lst) if lst else np.full(len(conf.FEATURES), -1.0) for lst in lists])
    ok = np.array([bool(lst) and g is not None and lst[0].faq_id in g for lst, g in zip(lists, gold)], float)
    return rows, ok


def bagged_point(sim, share: float) -> float:
    """The median operating point of RESAMPLES bootstrap resamples of ``sim`` (each kind resampled)."""
    rng = np.random.default_rng(0)
    points = []
    for _ in range(RESAMPLES):
        def draw(x):
            return rng.integers(0, len(x), len(x)) if len(x) else np.zeros(0, int)
        p, d, g = draw(sim.positives), draw(sim.in_domain), draw(sim.general)
        again = conf.Simulation(sim.positives[p], sim.right[p], sim.in_domain[d], sim.general[g], sim.pseudo)
        points.append(conf.fit(again, unknown_share=share, **SINGLE).operating_point)
    return float(np.median(points))


def figures_at(pi, ok, po, point: float, best: float) -> str:
    """The test's figures at ``point`` (confidences ``pi`` of in-scope queries, right where ``ok``, and
    ``po`` of out-of-scope ones), and how far below ``best`` its balanced score lies."""
    right, answered = float(np.mean((pi >= point) * ok)), float(np.mean(po >= point))
    balanced = 100 * (right + 1 - answered) / 2
    return (f"{point:.2f} | {100 * right:.1f}% | {100 * answered:.1f}% | {balanced:.2f} | {best - balanced:.2f}")


def load(name: str, enc, tmp: str):
    bank = os.path.join(DATA, "Banking77")
    queries = read_labelled_queries(os.path.join(bank, "queries.csv"))
    if name.startswith("leftout"):
        path, drop, _ = subset(os.path.join(bank, "faqs_5.csv"), -10, int(name[-1]), tmp)
        ins = [q for q in queries if not (q.gold & drop)]
        oos = [q.text for q in queries if q.gold & drop]
    elif name == "sample":
        path = os.path.join(SAMPLE, "faq.csv")
        ins = read_labelled_queries(os.path.join(SAMPLE, "queries.csv"))
        oos = read_texts(os.path.join(SAMPLE, "offtopic.txt"))
    else:
        path, ins, oos = os.path.join(bank, name + ".csv"), queries, out_of_scope()[0]
    e = FAQSearch.build(path, os.path.join(tmp, "ix"), encoder=enc, force=True)
    s = e.searcher()
    xi, ok = first_answers(s, [q.text for q in ins], [q.gold for q in ins])
    xo, _ = first_answers(s, oos, [None] * len(oos))
    return e, s, xi, ok, xo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("shares", "draws", "both"), default="both")
    ap.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {', '.join(SETS)}")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print(f"code: {os.path.dirname(faqsearch.__file__)}", flush=True)
    enc = CachingEncoder(load_encoder(None))
    tmp = tempfile.mkdtemp()
    head = "| set | {} | operating point | in scope right | out of scope answered | balanced | below the best |"
    for name in args.sets.split(","):
        t = time.time()
        e, s, xi, ok, xo = load(name, enc, tmp)
        c = e.config
        print(f"\n{name}: weights BM25 / token / prototype {c.hybrid_weight} / {c.token_weight} / {c.prototype_weight}, "
              f"stored operating point {e.snapshot.confidence.operating_point}", flush=True)
        if args.part in ("shares", "both"):
            sim = conf.simulate(s, variant_rounds(s), offtopic_for(s))
            print(head.format("in-domain share") + " simulated |\n|---|---|---|---|---|---|---|---|", flush=True)
            for share in SHARES:
                m = conf.fit(sim, unknown_share=share, **SINGLE)
                pi, po = m.probability(xi), m.probability(xo)
                print(f"| {name} | {share:.2f} | {figures_at(pi, ok, po, m.operating_point, best_balanced(pi, ok, po))} "
                      f"| {json.dumps(m.stats['simulated'])} |", flush=True)
        if args.part in ("draws", "both"):
            print(head.format("draw, rule") + " best |\n|---|---|---|---|---|---|---|---|", flush=True)
            for offset in OFFSETS:
                sim = conf.simulate(s, variant_rounds(s, seed=offset), offtopic_for(s))
                m = conf.fit(sim, unknown_share=UNKNOWN_SHARE, **SINGLE)
                pi, po = m.probability(xi), m.probability(xo)
                best = best_balanced(pi, ok, po)
                for rule, point in (("fitted", m.operating_point), ("bagged", bagged_point(sim, UNKNOWN_SHARE))):
                    print(f"| {name} | {offset}, {rule} | {figures_at(pi, ok, po, point, best)} | {best:.2f} |",
                          flush=True)
        print(f"({time.time() - t:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
