"""Cost of live edits against a full ingest, on a ~10k-question index, same run, same machine.

The 10k corpus is sample_data recombined by benchmarks/synth.py (conversational prefixes and
suffixes around the real questions). Library: the engine is open (model loaded), as in a running
chatbot. CLI: each command is a fresh process that loads the model, as a cron job would.

    python benchmarks/edit_cost.py [--repeats 5] [--out results.md]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit, machine  # noqa: E402

from faqsearch import FAQ, FAQSearch  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def fmt(xs):
    return f"{statistics.median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    corpus = os.path.join(tmp, "faq10k.csv")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "synth.py"), "--per-faq", "67",
                    "--out", corpus], check=True)
    enc = load_encoder("minilm")
    ix = os.path.join(tmp, "ix")
    ingest = [timed(lambda: FAQSearch.build(corpus, ix, encoder=enc).close()) for _ in range(2)]
    e = FAQSearch.open(ix, encoder=enc)
    n = e.info()["counts"]["questions"]
    new = FAQ("bench-new", "A new answer.", ["is there a new policy for lost parcels?",
                                             "what happens now to lost parcels", "lost parcel policy change"])
    add, remove, update = [], [], []
    for _ in range(args.repeats):
        add.append(timed(lambda: e.add([new])))
        update.append(timed(lambda: e.update([FAQ(new.id, "A changed answer.", new.questions)])))
        remove.append(timed(lambda: e.remove([new.id])))
    e.close()
    add_file = os.path.join(tmp, "add.csv")
    with open(add_file, "w") as fh:
        fh.write("id,question,answer\nbench-new,is there a new policy for lost parcels?,A new answer.\n")
    cli = shutil.which("faqsearch") or "faqsearch"
    cli_ingest = [timed(lambda: subprocess.run([cli, "ingest", corpus, "--index", ix, "-q"], check=True,
                                               capture_output=True)) for _ in range(2)]
    cli_add = []
    for _ in range(3):
        cli_add.append(timed(lambda: subprocess.run([cli, "add", add_file, "--index", ix, "-q"], check=True,
                                                    capture_output=True)))
        subprocess.run([cli, "remove", "bench-new", "--index", ix, "-q"], check=True, capture_output=True)
    shutil.rmtree(tmp)
    lines = [f"Measured {machine()}; index of {n} questions (150 FAQs), minilm, median (min, max)", "",
             "| operation | time | share of a full ingest |", "|---|---|---|",
             f"| full ingest (library, model loaded) | {fmt(ingest)} | 1 |",
             f"| add 1 FAQ, 3 questions (library) | {fmt(add)} | 1/{statistics.median(ingest) / statistics.median(add):.0f} |",
             f"| update its answer (library, nothing encoded) | {fmt(update)} | 1/{statistics.median(ingest) / statistics.median(update):.0f} |",
             f"| remove it (library) | {fmt(remove)} | 1/{statistics.median(ingest) / statistics.median(remove):.0f} |",
             f"| `faqsearch ingest` (CLI, new process) | {fmt(cli_ingest)} | 1 |",
             f"| `faqsearch add` 1 FAQ (CLI, new process) | {fmt(cli_add)} | 1/{statistics.median(cli_ingest) / statistics.median(cli_add):.0f} |"]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
