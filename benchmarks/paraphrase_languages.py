"""Paraphrases in the FAQ's own language (issue #43): the bundled generators on questions they never
saw, in the setting of an index in that language, same run.

Inputs: the first 16 user queries of sample_data/queries_zh.csv (Chinese) and of
sample_data/queries.csv (English); neither file is in a prompt. Each is paraphrased as `faqsearch
paraphrase --index` does over the sample FAQ of its language (faq_zh.csv with USE multilingual,
faq.csv with MiniLM): re-ranked by that index's query vectors, screened for meaning changes, and
kept only when the index gives it the input's first answer, n=5. "New" = not a copy up to case, punctuation, particles and function words; "similar"
= USE multilingual cosine >= 0.7 with the input; the share is of the 5 asked per input. Warm p50 /
p90 seconds per call after one warm-up call (the index's check that a rewording keeps the input's
first answer included); "load" is the generator's load time in this process
(its GGUF conversion cached or not, as the machine had it: the first CLI call adds the interpreter);
"first call" is the warm-up call's, the first of its language in the process (one-time work shows there).
Every returned paraphrase is listed for a person to read (`--out` writes them too).

    python benchmarks/paraphrase_languages.py [--out FILE] [--runs 'zh:gemma3,en:smollm2,en:gemma3']
"""
from __future__ import annotations

import argparse
import csv
import logging
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SAMPLE, emit, machine  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from faqsearch.evaluation import read_labelled_queries  # noqa: E402
from faqsearch.generators import encoder_scorer, load_generator, paraphrase  # noqa: E402
from faqsearch.generators.meaning import answers_alike  # noqa: E402
from faqsearch.generators.recipe import DEFAULT_MIN_SIMILARITY, content, normal  # noqa: E402

SIMILAR, N, INPUTS = 0.7, 5, 16
SETS = {"zh": ("faq_zh.csv", "queries_zh.csv"), "en": ("faq.csv", "queries.csv")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--runs", default="zh:gemma3,en:smollm2,en:gemma3",
                    help="comma-separated LANGUAGE:GENERATOR pairs (default: %(default)s)")
    ap.add_argument("--quantize", action="store_true", help="int8 decoder layers (CausalLMGenerator quantize=True)")
    ap.add_argument("--seed", type=int, default=0, help="the sampling seed of the first batch of each call (default: 0)")
    ap.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"),
                    help="the generators' precision on a CPU (default: %(default)s, bf16 where this CPU is faster so)")
    ap.add_argument("--dev", choices=("questions", "variants"), help="a development split instead of the reported "
                    "inputs (choices are made there): the first 12 questions of the sample FAQ, or 20 variants of "
                    "the FAQs after the 16th (the reported inputs ask the first 16)")
    ap.add_argument("--temperature", type=float, help="sampling temperature (default: the generator's own)")
    ap.add_argument("--min-similarity", type=float, default=DEFAULT_MIN_SIMILARITY,
                    help="the recipe's floor on the index encoder's cosine (default: %(default)s)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    use = encoder_scorer(load_encoder("use-multilingual"))
    tmp = tempfile.mkdtemp()
    rows = ["| language | generator | new and similar (USE >= 0.7), of 5 asked per input | returned | warm p50 s | "
            "warm p90 s | load s | first call s |", "|---|---|---|---|---|---|---|---|"]
    listing: list[str] = []
    engines: dict[str, FAQSearch] = {}
    gens: dict[str, object] = {}
    for run in args.runs.split(","):
        lang, name = run.split(":")
        faq, queries = SETS[lang]
        if lang not in engines:
            engines[lang] = FAQSearch.build(os.path.join(SAMPLE, faq), os.path.join(tmp, lang), force=True)
        searcher = engines[lang].searcher()
        texts = [q.text for q in read_labelled_queries(os.path.join(SAMPLE, queries))][:INPUTS]
        if args.dev:
            with open(os.path.join(SAMPLE, faq), encoding="utf-8", newline="") as fh:
                faqs = list(csv.DictReader(fh))
            texts = ([r["question"] for r in faqs][:12] if args.dev == "questions" else
                     [v for r in faqs[INPUTS:] for v in (r.get("variants") or "").split("|") if v][:20])
        if name not in gens:
            t = time.perf_counter()
            # gemma3 is declared for Chinese only; declared for English here so that it can be measured there
            gens[name] = load_generator(name, quantize=args.quantize, languages="zh,en" if name == "gemma3" else None,
                                        precision=args.precision,
                                        **({"temperature": args.temperature} if args.temperature else {}))
            load = time.perf_counter() - t
        else:
            load = float("nan")
        gen = gens[name]
        print(f"{lang} {name} ...", file=sys.stderr, flush=True)
        warm = "怎么修改密码" if lang == "zh" else "can I change my delivery address?"
        t = time.perf_counter()  # the first call of the language in this process: its one-time work shows here
        paraphrase(gen, warm, n=N, scorer=searcher.embed_full, same_intent=answers_alike(searcher, warm),
                   min_similarity=args.min_similarity)  # not counted in the shares
        first = time.perf_counter() - t
        times, good, returned = [], 0, 0
        for text in texts:
            t = time.perf_counter()
            got = paraphrase(gen, text, n=N, scorer=searcher.embed_full, same_intent=answers_alike(searcher, text),
                             min_similarity=args.min_similarity, seed=args.seed)
            times.append(time.perf_counter() - t)
            returned += len(got)
            sims = (use([text] + [p.text for p in got])[1:] @ use([text])[0]) if got else []
            marks = []
            for p, s in zip(got, sims):
                new = normal(p.text) != normal(text) and content(p.text) != content(text)
                ok = new and s >= SIMILAR
                good += ok
                marks.append(f"{p.text} ({s:.2f}{'' if ok else ', not new' if not new else ', not similar'})")
            listing.append(f"| {lang} {name} | {text} | {'; '.join(marks) or '-'} |")
        times.sort()
        rows.append(f"| {lang} | {name}{' int8' if args.quantize else ''} | {100 * good / (N * len(texts)):.1f}% "
                    f"({good} of {N * len(texts)}) | {returned} | {statistics.median(times):.2f} | "
                    f"{times[int(0.9 * (len(times) - 1))]:.2f} | {load:.1f} | {first:.1f} |")
    for e in engines.values():
        e.close()
    emit([f"Measured {machine()} with `python benchmarks/paraphrase_languages.py --runs '{args.runs}'"
          f"{' --quantize' if args.quantize else ''}{' --precision ' + args.precision if args.precision != 'auto' else ''}{f' --seed {args.seed}' if args.seed else ''}`"
          f" (generators in {', '.join(sorted({g.precision for g in gens.values() if hasattr(g, 'precision')}))})",
          "", *rows, "",
          "Paraphrases returned (USE cosine with the input):", "", "| run | input | paraphrases |", "|---|---|---|",
          *listing], args.out)


if __name__ == "__main__":
    main()
