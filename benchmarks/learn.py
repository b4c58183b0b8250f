"""`faqsearch learn` on real sets: an index built by default `ingest`, then `FAQSearch.learn()` with
its defaults (10-minute budget), measured on each set's test queries before and after (R@1 and
MRR@10 in the mode the index answers in), with what learn decided on its held-out questions and how
long it took. Sets whose FAQs have one question each are refused by learn (and said so); two of them
are also run with half of their queries assigned first (by `feedback`, or `approve` per FAQ; a fixed
split, seed 0), measured on the other half (with the figure of the index without those labels).
One set is an index in use: faqs_5 with the other Banking77 training questions asked and logged
first (its traffic; learn trains on the logged queries it answers confidently).

    python benchmarks/learn.py [--sets "Banking77 faqs_5,sample_data en"] [--minutes 10] [--out FILE]

The test queries are never trained on: learn sees only the index's own questions and its query log.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DATA, SAMPLE, approve_by_faq, emit, half_split, machine  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.errors import FAQSearchError  # noqa: E402
from faqsearch.evaluation import evaluate, read_labelled_queries  # noqa: E402

# an index in use: the questions of faqs_all that faqs_5 lacks (9,617, other phrasings of the same 77 intents, never
# the test queries) asked of it and logged first, as its traffic; learn trains on those it answers confidently
LOGGED = {"Banking77 faqs_5 with a query log": ("Banking77 faqs_5", os.path.join(DATA, "Banking77", "faqs_all.csv"))}
LABELLED = {  # single-question sets with half of the queries assigned first (a fixed split, seed 0, as decision.py)
    "CovidFAQ half as feedback": ("CovidFAQ", "feedback"),
    "Banking77 faqs_1 half approved": ("Banking77 faqs_1", "approve"),
}
SETS = {
    "sample_data en": (os.path.join(SAMPLE, "faq.csv"), os.path.join(SAMPLE, "queries.csv")),
    "CovidFAQ": (os.path.join(DATA, "CovidFAQ", "faqs.csv"), os.path.join(DATA, "CovidFAQ", "queries.csv")),
    "Banking77 faqs_1": (os.path.join(DATA, "Banking77", "faqs_1.csv"), os.path.join(DATA, "Banking77", "queries.csv")),
    "Banking77 faqs_5": (os.path.join(DATA, "Banking77", "faqs_5.csv"), os.path.join(DATA, "Banking77", "queries.csv")),
    "Banking77 faqs_all": (os.path.join(DATA, "Banking77", "faqs_all.csv"),
                           os.path.join(DATA, "Banking77", "queries.csv")),
}


def scores(engine, queries) -> tuple[float, float]:
    got = evaluate(engine.searcher(), queries)
    return 100 * got["recall@1"], 100 * got["mrr@10"]


def assign_half(engine, queries, how: str) -> tuple[list, list]:
    """Half of the queries (seed 0) assigned to their FAQ, by one feedback each or one approve per FAQ;
    returns (that half, the other half: the queries then asked)."""
    given, asked = half_split(queries)
    if how == "feedback":
        for q in given:
            engine.feedback(q.text, sorted(q.gold)[0])
    else:
        approve_by_faq(engine, given)
    return given, asked


def txtai_scores(corpus: str, queries, extra: list[tuple[str, str]]) -> str:
    """txtai 9's hybrid search (`Embeddings(hybrid=True)`, dense + BM25, the same MiniLM) over the
    corpus's questions and ``extra`` (faq_id, text) rows, scored as faqsearch is (distinct FAQs, top
    10): "R@1 / MRR@10", or why it did not run."""
    try:
        from txtai import Embeddings
    except ImportError:
        return "txtai not installed"
    from faqsearch.corpus import read_corpus
    from faqsearch.encoders import _minilm_path

    docs = [(f.id, q) for f in read_corpus(corpus) for q in f.questions] + list(extra)
    emb = Embeddings(path=_minilm_path(), hybrid=True)
    emb.index([(i, text, None) for i, (_, text) in enumerate(docs)])
    r1 = mrr = 0.0
    for q in queries:
        seen: list[str] = []
        for i, _ in emb.search(q.text, 50):
            fid = docs[int(i)][0]
            if fid not in seen:
                seen.append(fid)
        for rank, fid in enumerate(seen[:10]):
            if fid in q.gold:
                r1 += rank == 0
                mrr += 1 / (rank + 1)
                break
    return f"{100 * r1 / len(queries):.2f} / {100 * mrr / len(queries):.2f}"


def log_traffic(engine, corpus: str, source: str) -> str:
    """Ask the questions of ``source`` that ``corpus`` lacks of the index, logged (their labels unused
    but to say how many of those learn takes it would answer rightly); returns that in words."""
    from faqsearch.corpus import read_corpus
    from faqsearch.defaults import LEARN_LOG_CONFIDENCE

    have = {q for f in read_corpus(corpus) for q in f.questions}
    traffic = [(q, f.id) for f in read_corpus(source) for q in f.questions if q not in have]
    got = engine.ask_many([q for q, _ in traffic], log=True)
    sure = [(r.nearest.faq_id == gold) for r, (_, gold) in zip(got, traffic)
            if r.nearest is not None and r.nearest.confidence >= LEARN_LOG_CONFIDENCE]
    return (f"{len(traffic)} logged queries, {len(sure)} answered at {100 * LEARN_LOG_CONFIDENCE:.0f}% or more "
            f"({100 * sum(sure) / max(1, len(sure)):.1f}% of those right); ")


def run(name: str, minutes: float, work: str, model: str | None = None) -> str:
    base, how = LABELLED.get(name, (name, None))
    base, traffic = LOGGED.get(name, (base, None))
    corpus, qfile = SETS[base]
    queries = read_labelled_queries(qfile)
    engine = FAQSearch.build(corpus, os.path.join(work, name.replace(" ", "_")), force=True, model=model)
    labelled = log_traffic(engine, corpus, traffic) if traffic else ""
    if how:
        given, asked = assign_half(engine, queries, how)
        with FAQSearch.build(corpus, os.path.join(work, "unlabelled"), force=True, model=model) as plain:
            r1, mrr = scores(plain, asked)
        peer = txtai_scores(corpus, asked, [(sorted(q.gold)[0], q.text) for q in given])
        labelled = (f"{r1:.2f} / {mrr:.2f} without them (txtai hybrid: {txtai_scores(corpus, asked, [])}, "
                    f"with them: {peer}); ")
        queries = asked
    r1, mrr = scores(engine, queries)
    n = engine.config.counts.questions
    start = time.perf_counter()
    try:
        report = engine.learn(minutes=minutes)
    except FAQSearchError as exc:
        engine.close()
        return (f"| {name} | {len(queries)} | {n} | refused: {str(exc).split(':')[0]} | | | {labelled}{r1:.2f} / {mrr:.2f} | "
                f"{r1:.2f} / {mrr:.2f} (unchanged) |")
    took = time.perf_counter() - start
    after_r1, after_mrr = scores(engine, queries)
    engine.close()
    held = (f"{report.before['r1']:.2f} -> {report.after['r1']:.2f}" if report.after else "-")
    return (f"| {name} | {len(queries)} | {n} | {'kept' if report.kept else 'not kept'} ({report.held_out} held out, "
            f"{report.pairs} pairs{f', {report.logged} logged' if report.logged else ''}, {len(report.loss)} epochs) | {held} | {report.seconds.get('train', 0):.0f} / "
            f"{took:.0f} | {labelled}{r1:.2f} / {mrr:.2f} | {after_r1:.2f} / {after_mrr:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default=",".join([*SETS, *LABELLED, *LOGGED]),
                    help="Comma-separated names of: " + ", ".join([*SETS, *LABELLED, *LOGGED]))
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--model", help="the encoder every index is built with (default: ingest's choice)")
    ap.add_argument("--out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    lines = [f"Measured {machine()} with `python benchmarks/learn.py` (--minutes {args.minutes:g}"
             f"{f', --model {args.model}' if args.model else ''})", "",
             "| set | test queries | questions | learn decided | held-out R@1 before -> after | train / whole learn s | "
             "test R@1 / MRR@10 before | after |", "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            lines.append(run(name, args.minutes, work, args.model))
            print(lines[-1], flush=True)
    import resource

    lines += ["", f"Peak memory of the whole run (build, learn and measures of the sets above): "
                  f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
