"""What generated and person-approved phrasings add to retrieval (issue #26, "retrieval-side value").

For each set the labelled queries are split in two by a stable hash of their text (``--seed``): the
"log" half reaches the running chatbot (asked and logged as `faqsearch ask --log` logs it) and the
"test" half is only evaluated, never added to an index. Five indexes, each the base plus one edit:

  a. base: the FAQ file as `faqsearch ingest` builds it (defaults);
  b. + augment: `faqsearch augment -n 5` (default generator SmolLM2, default recipe, seed 0);
  c. + log queries, unlabelled: each logged query the index answered (reached its threshold),
     attached to the FAQ it was answered with (read from the query log), through `approve`;
  d. + approved: FAQ by FAQ, `suggest` lists phrasings from the query log; a simulated person ticks
     exactly those whose label is that FAQ; `approve` adds them and the log marks them assigned
     (as `faqsearch approve` does), so later FAQs are not offered them;
  e. reference: + every log query attached to its right FAQ (what labels would give), through `approve`.

Each is evaluated as `faqsearch eval` does (faqsearch.evaluation.evaluate) on the test half, in the
index's default mode (hybrid as ingest builds it) and in --mode dense: MRR@10 and Recall@1 x100.

    python benchmarks/paraphrase_value.py [--out FILE] [--sets Banking77,CovidFAQ] [--n 5] [--rounds R] [--seed 0]
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DATA, add_sets_option, emit, machine, wanted_sets  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.evaluation import LabelledQuery, evaluate, read_labelled_queries  # noqa: E402
from faqsearch.generators import load_generator  # noqa: E402
from faqsearch.generators.suggest import suggest  # noqa: E402
from faqsearch.querylog import QueryLog  # noqa: E402
from faqsearch.text import clean_text  # noqa: E402

SETS = [("Banking77", os.path.join(DATA, "Banking77", "faqs_1.csv"), os.path.join(DATA, "Banking77", "queries.csv")),
        ("CovidFAQ", os.path.join(DATA, "CovidFAQ", "faqs.csv"), os.path.join(DATA, "CovidFAQ", "queries.csv"))]
LIMIT = 20  # suggestions per FAQ: suggest's default, the page's and `faqsearch suggest`'s


def split(queries: list[LabelledQuery], seed: int) -> tuple[list[LabelledQuery], list[LabelledQuery]]:
    """(log, test): a query's half depends only on its text and the seed."""
    def half(text: str) -> int:
        return int(hashlib.sha256(f"{seed}\0{text}".encode("utf-8")).hexdigest()[:8], 16) % 2

    return [q for q in queries if half(q.text) == 0], [q for q in queries if half(q.text) == 1]


def attach(engine: FAQSearch, by_faq: dict[str, list[str]]) -> int:
    """Texts become questions of FAQs through `approve` (one edit per FAQ); questions added."""
    return sum(engine.approve(fid, texts).added_questions for fid, texts in sorted(by_faq.items()) if texts)


def approve_suggestions(engine: FAQSearch, qlog: QueryLog, gold: dict[str, set[str]]) -> tuple[int, int, int, int]:
    """FAQ by FAQ: `suggest` from the log, tick those labelled with that FAQ, `approve` them and mark
    them in the log. (offered, approved, added questions, FAQs offered the most suggest lists)."""
    offered = approved = added = full = 0
    for f in engine.list():
        got = suggest(engine.searcher(), f["id"], qlog, limit=LIMIT)  # what a person sees
        ticked = [s.text for s in got.suggestions if f["id"] in gold.get(s.text, ())]
        offered += len(got.suggestions)
        full += len(got.suggestions) >= LIMIT
        approved += len(ticked)
        if ticked:
            added += engine.approve(f["id"], ticked).added_questions
            qlog.mark_assigned(ticked, f["id"])
    return offered, approved, added, full


def run_set(name: str, corpus: str, qfile: str, gen, args, tmp: str) -> list[str]:
    queries = read_labelled_queries(qfile)
    log, test = split(queries, args.seed)
    gold = {clean_text(q.text): q.gold for q in log}
    base_path = os.path.join(tmp, name, "a")
    base = FAQSearch.build(corpus, base_path)
    enc = base.encoder
    how = f"{base.mode}, w={base.hybrid_weight:g}" if base.mode == "hybrid" else base.mode
    # the chatbot answers the log half, and logs it as `faqsearch ask --log` does
    searcher = base.searcher()
    qlog = QueryLog.for_index(base_path)
    qlog.record(searcher.answer([q.text for q in log]), searcher.snap.mode, "cli")
    rows = qlog.recent(limit=len(log) + 1)
    qlog.close()
    answered = [r for r in rows if r["answered"]]
    base_questions = base.info()["counts"]["questions"]
    base.close()

    def variant(key: str) -> FAQSearch:
        path = os.path.join(tmp, name, key)
        shutil.copytree(base_path, path)  # an index directory copies whole, query log included
        return FAQSearch.open(path, encoder=enc)

    results = []

    def measure(label: str, engine: FAQSearch, note: str) -> None:
        d, dn = evaluate(engine.searcher(), test), evaluate(engine.searcher(), test, mode="dense")
        results.append((label, engine.info()["counts"]["questions"], d, dn, note))
        print(f"{name} {label}: {d['mrr@10']:.4f} {dn['mrr@10']:.4f} {note}", file=sys.stderr, flush=True)

    with FAQSearch.open(base_path, encoder=enc) as e:
        measure("a. base (the FAQ file)", e, f"{base_questions} questions")

    with variant("b") as e:
        t = time.perf_counter()
        rep = e.augment(gen, n=args.n, seed=0, progress=args.progress, rounds=args.rounds)
        none = sum(1 for f in e.list() if not any(q["source"] == "generated" for q in e.show(f["id"])["questions"]))
        print(f"{name} augment: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        measure(f"b. + augment -n {args.n}", e, f"{rep.added_questions} generated kept "
                f"(of {args.n} x {len(e.list())} asked), {none} FAQs got none")

    with variant("c") as e:
        by_faq = defaultdict(list)
        for r in answered:
            by_faq[r["top_faq"]].append(r["query"])
        right = sum(r["top_faq"] in gold[r["query"]] for r in answered)
        added = attach(e, by_faq)
        measure("c. + log queries, to the FAQ that answered them", e,
                f"{added} attached (the {len(answered)} of {len(log)} logged that were answered), "
                f"{right} to their right FAQ ({100 * right / max(len(answered), 1):.0f}%)")

    with variant("d") as e:
        qlog = QueryLog.for_index(e.path)
        try:
            offered, approved, added, full = approve_suggestions(e, qlog, gold)
        finally:
            qlog.close()
        measure("d. + approved suggestions", e, f"{offered} suggestions offered, {approved} approved "
                f"({added} added) of {len(log)} logged; {full} FAQs got the full {LIMIT}")

    with variant("e") as e:
        by_faq = defaultdict(list)
        for q in log:
            for fid in sorted(q.gold):
                by_faq[fid].append(q.text)
        added = attach(e, by_faq)
        several = sum(len(q.gold) > 1 for q in log)
        measure("e. reference: + log queries with their right FAQ", e, f"{added} attached (all {len(log)} logged"
                + (f"; {several} have several right FAQs)" if several else ")"))

    lines = [f"### {name}: {len(queries)} labelled queries, {len(log)} log / {len(test)} test "
             f"(default mode: {how})", "",
             "| index | questions | default MRR@10 | default R@1 | dense MRR@10 | dense R@1 | counts |",
             "|---|---|---|---|---|---|---|"]
    for label, nq, d, dn, note in results:
        lines.append(f"| {label} | {nq} | {100 * d['mrr@10']:.2f} | {100 * d['recall@1']:.2f} | "
                     f"{100 * dn['mrr@10']:.2f} | {100 * dn['recall@1']:.2f} | {note} |")
    return lines + [""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    add_sets_option(ap, SETS)
    ap.add_argument("--n", type=int, default=5, help="generated questions per FAQ asked of augment (default 5)")
    ap.add_argument("--rounds", type=int, default=None, help="candidate batches at most per FAQ (default: augment's)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the log/test split (default 0)")
    ap.add_argument("--progress", action="store_true", help="augment's progress bar on stderr")
    args = ap.parse_args()
    wanted = wanted_sets(ap, args, SETS)
    logging.basicConfig(level=logging.WARNING)
    gen = load_generator()  # the default generator, as `faqsearch augment` loads it
    command = "python benchmarks/paraphrase_value.py" + "".join(
        f" --{k} {v}" for k, v in (("sets", args.sets), ("n", args.n), ("rounds", args.rounds), ("seed", args.seed))
        if v != ap.get_default(k))
    lines = [f"Measured {machine()}; `{command}`. MRR@10 and Recall@1 x100 on the test half, "
             "as `faqsearch eval` computes them.", ""]
    with tempfile.TemporaryDirectory() as tmp:
        for name, corpus, qfile in SETS:
            if name in wanted:
                lines += run_set(name, corpus, qfile, gen, args, tmp)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
