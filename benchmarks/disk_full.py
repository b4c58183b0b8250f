"""Disk full: ingest and edits on a small tmpfs until the disk runs out, many times, each with a
different size. Every failure must be a clean one-line message (exit 1, no traceback, no signal),
and the index must still open and answer afterwards (or, where the first ingest did not fit, not
exist at all).

Needs root (it mounts tmpfs). Prints a table:

    sudo python benchmarks/disk_full.py [--runs 20] [--out FILE]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SAMPLE, emit, machine  # noqa: E402


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faqsearch.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def one_run(size_kb: int, work: str, env: dict) -> dict:
    mnt = tempfile.mkdtemp(prefix="tfs-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", mnt], check=True)
    try:
        ix = os.path.join(mnt, "ix")
        out = {"size": size_kb, "failed_at": None, "message": "", "clean": True, "usable": None, "edits": 0}
        steps = [("ingest", os.path.join(SAMPLE, "faq.csv"), "--index", ix, "-q")]
        for i in range(40):
            corpus = os.path.join(work, f"add{i}.csv")
            steps.append(("add", corpus, "--index", ix, "-q"))
        for step in steps:
            r = cli(*step, env=env)
            if r.returncode != 0:
                out["failed_at"] = step[0]
                out["message"] = (r.stderr.strip().splitlines() or [""])[-1][:120]
                out["clean"] = r.returncode == 1 and "Traceback" not in r.stderr and len(r.stderr.splitlines()) <= 2
                break
            out["edits"] += step[0] == "add"
        if os.path.exists(os.path.join(ix, "CURRENT")):
            r = cli("ask", "how do I get my money back for a return?", "--index", ix, "--json", env=env)
            out["usable"] = r.returncode == 0 and '"faq_id"' in r.stdout
        else:
            out["usable"] = "no index (first ingest did not fit)" if not os.listdir(mnt) or os.listdir(mnt) == [] else \
                f"left: {sorted(os.listdir(mnt))}"
        return out
    finally:
        subprocess.run(["umount", mnt], check=False)
        os.rmdir(mnt)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out")
    args = ap.parse_args()
    work = tempfile.mkdtemp()
    for i in range(40):
        with open(os.path.join(work, f"add{i}.csv"), "w", encoding="utf-8") as fh:
            fh.write("id,question,answer\n")
            for j in range(25):
                fh.write(f"n{i}-{j},how do I ask question {j} of batch {i} about item {i * 25 + j},"
                         f"Answer {i}-{j}: {'long text ' * 40}\n")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    sizes = [600 + i * (12000 - 600) // max(1, args.runs - 1) for i in range(args.runs)]
    rows = [one_run(s, work, env) for s in sizes]
    lines = [f"Measured {machine()}; sample_data ingest then `faqsearch add` of 25 FAQs at a time on a tmpfs of the "
             "given size, until a command fails", "",
             "| tmpfs KB | edits committed | failed at | exit clean | index usable after | message |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['size']} | {r['edits']} | {r['failed_at'] or 'nothing failed'} | {r['clean']} | "
                     f"{r['usable']} | {r['message']} |")
    clean = sum(r["clean"] for r in rows)
    usable = sum(r["usable"] is True or str(r["usable"]).startswith("no index") for r in rows)
    lines += ["", f"{clean} of {len(rows)} runs failed cleanly; {usable} of {len(rows)} left a usable index (or none)."]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
