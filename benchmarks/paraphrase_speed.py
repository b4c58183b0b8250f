"""How long a paraphrase takes: warm library calls (5 paraphrases of a short question) and the first
`faqsearch paraphrase` of a fresh install (empty model caches), per recipe setting, same run.

Inputs: the first 12 user queries of sample_data/queries.csv (short chat questions). Per setting:
p50 / p90 seconds of `paraphrase(..., n=5)` on a warm generator (one warm-up call first, not
counted), candidate batches drawn and seconds per batch, paraphrases returned (of 5), inputs that got
all 5, and the share of returned ones that are new and similar under USE multilingual (an encoder
other than the re-ranker). The re-ranker is the bundled MiniLM,
as `faqsearch paraphrase` without --index uses it. Run alone on the machine.

    python benchmarks/paraphrase_speed.py [--out results.md] [--settings 'NAME;NAME'] [--no-cli]
"""
from __future__ import annotations

import argparse
import csv
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SAMPLE, emit, machine  # noqa: E402

from faqsearch.defaults import PARAPHRASE_ROUNDS  # noqa: E402

# name -> (generator options, recipe options)
SETTINGS = {
    "default (24 candidates, up to 3 rounds)": ({}, {}),
    "12 candidates, up to 3 rounds": ({}, {"candidates": 12, "rounds": 3}),
    "24 candidates, 1 round": ({}, {"candidates": 24, "rounds": 1}),
    "int8 decoder layers, default recipe": ({"quantize": True}, {}),
}
DEFAULT_SETTINGS = list(SETTINGS)[:3]  # int8 is on the list for completeness: it breaks the wording (docs)


def inputs(n: int = 12) -> list[str]:
    with open(os.path.join(SAMPLE, "queries.csv"), newline="", encoding="utf-8") as fh:
        return [row["query"] for row, _ in zip(csv.DictReader(fh), range(n))]


def warm(settings: list[str], texts: list[str]) -> list[str]:
    from faqsearch.encoders import load_encoder
    from faqsearch.generators import encoder_scorer, load_generator, normal
    from faqsearch.generators.recipe import paraphrase

    scorer, use = encoder_scorer(load_encoder("minilm")), encoder_scorer(load_encoder("use-multilingual"))
    rows = ["| setting | p50 s | p90 s | mean s | batches / input | s / batch | returned (of 5), mean | inputs with 5 | "
            "new and similar (USE >= 0.7) |", "|---|---|---|---|---|---|---|---|---|"]
    gens: dict[bool, object] = {}
    for name in settings:
        gen_opts, opts = SETTINGS[name]
        q = bool(gen_opts.get("quantize"))
        if q not in gens:
            gens[q] = load_generator("smollm2", quantize=q)
        gen = gens[q]
        paraphrase(gen, "can I change my delivery address?", n=5, scorer=scorer, **opts)  # warm-up
        batches, sample = [], gen.sample

        def timed(*a, **k):
            t = time.perf_counter()
            out = sample(*a, **k)
            batches.append(time.perf_counter() - t)
            return out

        gen.sample = timed
        secs, got, good = [], [], 0
        for text in texts:
            t = time.perf_counter()
            out = paraphrase(gen, text, n=5, scorer=scorer, **opts)
            secs.append(time.perf_counter() - t)
            got.append(len(out))
            if out:
                v = use([text] + [p.text for p in out])
                good += sum(normal(p.text) != normal(text) and s >= 0.7 for p, s in zip(out, v[1:] @ v[0]))
        del gen.sample
        secs.sort()
        rows.append(f"| {name} | {statistics.median(secs):.2f} | {secs[int(0.9 * (len(secs) - 1))]:.2f} | "
                    f"{statistics.mean(secs):.2f} | {len(batches) / len(texts):.1f} | {statistics.median(batches):.2f} | "
                    f"{statistics.mean(got):.1f} | {sum(g == 5 for g in got)}/{len(got)} | "
                    f"{100 * good / max(sum(got), 1):.0f}% |")
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def cli() -> list[str]:
    """`faqsearch paraphrase` in a new process: on empty caches (a fresh install), then again."""
    rows = ["| call | wall s | paraphrases printed |", "|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, FAQSEARCH_CACHE=os.path.join(tmp, "faqsearch"), HF_HOME=os.path.join(tmp, "hf"),
                   XDG_CACHE_HOME=os.path.join(tmp, "xdg"))
        exe = os.path.join(os.path.dirname(sys.executable), "faqsearch")
        for label in ("first call, empty caches", "second call, new process"):
            t = time.perf_counter()
            out = subprocess.run([exe, "paraphrase", "how do I reset my password?", "-n", "5"], env=env,
                                 capture_output=True, text=True)
            wall = time.perf_counter() - t
            printed = sum(1 for line in out.stdout.splitlines() if line.startswith("["))
            rows.append(f"| {label} | {wall:.1f} | {printed if not out.returncode else 'failed: ' + out.stderr[-80:]} |")
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--settings", default=";".join(DEFAULT_SETTINGS), help="';'-separated names of SETTINGS")
    ap.add_argument("--inputs", type=int, default=12)
    ap.add_argument("--no-cli", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    lines = [f"Measured {machine()}; default recipe: 24 candidates, up to {PARAPHRASE_ROUNDS} rounds", "",
             "### Warm library calls (5 paraphrases of a short question)", ""]
    lines += warm(args.settings.split(";"), inputs(args.inputs))
    if not args.no_cli:
        lines += ["", "### `faqsearch paraphrase` in a new process", ""] + cli()
    emit(lines, args.out)


if __name__ == "__main__":
    main()
