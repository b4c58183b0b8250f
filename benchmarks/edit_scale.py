"""Edits on large indexes: in place (a delta) against rewriting the index, same run, same machine.

For each size the index is built once (the engine's default index type unless --index-type), then
opened as a running chatbot would (model loaded) and edited:

* in place, the default: add one FAQ (3 questions), change its answer, remove it, --repeats times;
* rewritten, as every edit was before deltas (and as a compaction still is): the same add and
  remove with the delta limit forced to 0, so the edit writes a new base in a new version.

Then the crash check at that scale: a child process opens the index and adds one FAQ, and is
killed (os._exit, like SIGKILL: no cleanup) at its k-th file operation (rename, replace, remove,
fsync, np.save) for k = 1, 2, ... until an add runs to the end. After each kill the parent opens the
index, checks it holds the old or the new state, answers a known question right, and that the
next edit removes what the killed writer left.

Corpora as in speed.py: sample_data recombined by synth.py (10,050 real questions, really encoded),
repeated with a suffix "#n" and the vector moved by small seeded noise for 100k and 1M (encoding
1M texts takes an hour here). The edited FAQ's questions are really encoded.

    python benchmarks/edit_scale.py [--sizes 10000,100000,1000000] [--repeats 5] [--out results.md]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit, machine  # noqa: E402
from speed import SynthEncoder, write_corpus  # noqa: E402

NEW = ("bench-new", "A new answer.", ["is there a new policy for lost parcels?", "what happens now to lost parcels",
                                      "lost parcel policy change"])
PROBE = "How do I reset my password?"  # a sample_data question: its FAQ must stay the top answer

KILLER = r"""
import json, os, shutil, sys
import numpy as np
sys.path.insert(0, sys.argv[4])
from speed import SynthEncoder
from faqsearch import FAQ, FAQSearch
from faqsearch.encoders import load_encoder

kill_at = int(sys.argv[1])
calls = [0]
names = []

def wrap(fn, name):
    def inner(*a, **k):
        calls[0] += 1
        names.append(name)
        if calls[0] == kill_at:
            print(json.dumps({"killed_at": name}), flush=True)
            os._exit(9)
        return fn(*a, **k)
    return inner

e = FAQSearch.open(sys.argv[2], encoder=load_encoder("minilm"))
for mod, name in [(os, "replace"), (os, "rename"), (os, "symlink"), (os, "link"), (os, "rmdir"), (os, "remove"),
                  (shutil, "rmtree"), (os, "fsync")]:
    setattr(mod, name, wrap(getattr(mod, name), f"{mod.__name__}.{name}"))
np.save = wrap(np.save, "np.save")
new = json.loads(sys.argv[3])
e.add([FAQ(new[0], new[1], new[2])])
print(json.dumps({"completed": names}), flush=True)
"""


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def fmt_ms(xs) -> str:
    return f"{statistics.median(xs) * 1000:.0f} ({min(xs) * 1000:.0f}-{max(xs) * 1000:.0f})"


def fmt_s(xs) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def edit_times(e, repeats: int):
    from faqsearch import FAQ

    add, update, remove = [], [], []
    for _ in range(repeats):
        add.append(timed(lambda: e.add([FAQ(*NEW)])))
        update.append(timed(lambda: e.update([FAQ(NEW[0], "A changed answer.", NEW[2])])))
        remove.append(timed(lambda: e.remove([NEW[0]])))
    return add, update, remove


def crash_check(ix: str, probe_faq: str, bench_dir: str) -> list[str]:
    """Kill an add at every file operation; after each, the index must open in the old or new state."""
    from faqsearch import FAQ, FAQSearch
    from faqsearch.encoders import load_encoder

    enc = load_encoder("minilm")
    rows, step = [], 1
    new = json.dumps(["killed-new", "killed answer", ["a brand new wording for the crash check"]])
    while step < 40:
        out = subprocess.run([sys.executable, "-c", KILLER, str(step), ix, new, bench_dir], capture_output=True,
                             text=True, timeout=600)
        if out.returncode not in (0, 9):
            rows.append(f"| {step} | child failed: {out.stderr.strip().splitlines()[-1][:80]} | | | |")
            break
        info = json.loads(out.stdout.strip().splitlines()[-1])
        with FAQSearch.open(ix, encoder=enc) as e:
            has_new = any(f["id"] == "killed-new" for f in e.list(contains="killed-new"))
            top = e.ask(PROBE, mode="dense").answers[0].faq_id
            left_before = e.store.uncommitted()
            if has_new:
                assert e.ask("a brand new wording for the crash check", mode="dense").answers[0].faq_id == "killed-new"
                e.remove(["killed-new"])  # back to the old state for the next step
            else:  # the next writer purges what the killed one left
                e.add([FAQ(f"probe-{step}", "x", [f"purge probe {step}"])])
            left_after = e.store.uncommitted()
        what = info.get("killed_at", "not killed (completed)")
        rows.append(f"| {step} | {what} | {'new' if has_new else 'old'} | {'yes' if top == probe_faq else 'NO: ' + top} | "
                    f"{left_before} -> {left_after} |")
        if out.returncode == 0:
            break
        step += 1
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rewrite-repeats", type=int, default=2)
    ap.add_argument("--index-type", default="auto")
    ap.add_argument("--crash-size", type=int, default=1_000_000, help="run the crash check at this size")
    ap.add_argument("--out")
    args = ap.parse_args()
    import logging

    import faqsearch.backends.embedded.editor as edits_mod
    from faqsearch import FAQ, FAQSearch
    from faqsearch.corpus import read_corpus
    from faqsearch.backends import delta_limit
    from faqsearch.encoders import load_encoder

    logging.basicConfig(level=logging.ERROR)
    enc = load_encoder("minilm")
    tmp = tempfile.mkdtemp()
    synth10k = os.path.join(tmp, "faq10k.csv")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "synth.py"), "--per-faq", "67",
                    "--out", synth10k], check=True)
    base_faqs = read_corpus(synth10k)
    texts = [q for f in base_faqs for q in f.questions]
    cache = dict(zip(texts, enc.encode(texts)))
    synth = SynthEncoder(enc, cache)
    probe_faq = None
    lines = [f"Measured {machine()}; minilm; index type {args.index_type}; library (engine open, model loaded); "
             f"median (min-max) of {args.repeats} in place and {args.rewrite_repeats} rewritten", "",
             "| questions | FAISS | build s | in place: add 1 FAQ (3 q) ms | update answer ms | remove ms | "
             "rewritten: add s | remove s | delta limit |", "|---|---|---|---|---|---|---|---|---|"]
    crash_rows: list[str] = []
    per_copy = sum(len(f.questions) for f in base_faqs)
    for n in [int(s) for s in args.sizes.split(",")]:
        corpus = os.path.join(tmp, f"c{n}.csv")
        write_corpus(corpus, base_faqs, max(1, n // per_copy))
        ix = os.path.join(tmp, f"ix{n}")
        build = timed(lambda: FAQSearch.build(corpus, ix, encoder=synth, index_type=args.index_type,
                                              self_fusion=False).close())
        e = FAQSearch.open(ix, encoder=synth)
        q = e.info()["counts"]["questions"]
        probe_faq = e.ask(PROBE, mode="dense").answers[0].faq_id
        add, update, remove = edit_times(e, args.repeats)
        edits_mod.delta_limit = lambda base: 0  # every edit writes a new base, as before deltas
        try:
            r_add, r_remove = [], []
            for _ in range(args.rewrite_repeats):
                r_add.append(timed(lambda: e.add([FAQ(*NEW)])))
                r_remove.append(timed(lambda: e.remove([NEW[0]])))
        finally:
            edits_mod.delta_limit = delta_limit
        lines.append(f"| {q:,} | {e.index.factory} | {build:.0f} | {fmt_ms(add)} | {fmt_ms(update)} | {fmt_ms(remove)} | "
                     f"{fmt_s(r_add)} | {fmt_s(r_remove)} | {delta_limit(q):,} |")
        e.close()
        if n == args.crash_size:
            crash_rows = crash_check(ix, probe_faq, os.path.dirname(os.path.abspath(__file__)))
            crash_n = q
        shutil.rmtree(ix, ignore_errors=True)
        for d in os.listdir(tmp):
            if d.startswith(f".ix{n}."):
                shutil.rmtree(os.path.join(tmp, d), ignore_errors=True)
        os.remove(corpus)
        print("\n".join(lines[-1:]), flush=True)
    if crash_rows:
        lines += ["", f"Killed add on the {crash_n:,}-question index (one child process per step; after each kill "
                  "the parent opens the index, then makes the next edit):", "",
                  "| step | killed at | state after | top answer right | uncommitted store rows -> after the next edit |",
                  "|---|---|---|---|---|"] + crash_rows
    shutil.rmtree(tmp, ignore_errors=True)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
