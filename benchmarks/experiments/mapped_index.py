"""A FAISS index read into memory against the same file memory-mapped (how `FAQSearch.open` reads
indexes since 2026-11-24, the file read through once so the first search faults no disk
reads), and the map alone: open time, search time, and the process's own (anonymous) and
file-backed memory, in one run, each variant in its own fresh process from a cold page cache.

    python benchmarks/experiments/mapped_index.py [--n 100000 --n 1000000] [--queries 200] [--repeats 3]

Run it alone: 2 cores, every other process makes the timings wrong.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time, numpy as np
import faqsearch.backends.embedded.faiss as F
path, how, nq = sys.argv[1], sys.argv[2], int(sys.argv[3])
def st():
    return {l.split(":")[0]: int(l.split()[1]) / 1024 for l in open("/proc/self/status")
            if l.startswith(("RssAnon", "RssFile", "VmHWM"))}
t = time.perf_counter()
if how == "1":  # the map alone, pages faulted in by the first search
    import faiss
    ix = F.VectorIndex(faiss.read_index(path, faiss.IO_FLAG_MMAP_IFC))
else:  # "0": copied into memory; "2": as FAQSearch.open reads it (mapped, the file read through once)
    ix = F.VectorIndex.load(path, mmap=how == "2")
opened = time.perf_counter() - t
rng = np.random.default_rng(1)
q = rng.standard_normal((nq, ix.dim)).astype(np.float32)
q /= np.linalg.norm(q, axis=1, keepdims=True)
t = time.perf_counter(); ix.search(q[:1], 10); first = time.perf_counter() - t
lat = []
for row in q:
    t = time.perf_counter(); ix.search(row[None], 10); lat.append(time.perf_counter() - t)
t = time.perf_counter(); ix.search(q, 10); batch = time.perf_counter() - t
s = st()
print(json.dumps({"open_s": opened, "first_ms": first * 1e3, "p50_ms": float(np.median(lat)) * 1e3,
                  "p99_ms": float(np.quantile(lat, 0.99)) * 1e3, "batch_ms_per_q": batch / nq * 1e3,
                  "anon_mb": s["RssAnon"], "file_mb": s["RssFile"], "hwm_mb": s["VmHWM"]}))
"""


def make(path: str, n: int, d: int = 256) -> None:
    import faiss
    import numpy as np

    from faqsearch.backends.embedded.flatfile import FlatWriter

    rng = np.random.default_rng(0)
    with FlatWriter(path, d, np.arange(n, dtype=np.int64) + 1) as out:  # streamed: the 1M file never sits in memory
        for start in range(0, n, 65536):
            x = rng.standard_normal((min(65536, n - start), d)).astype(np.float32)
            faiss.normalize_L2(x)
            out.write(x)


def drop_cache(path: str) -> None:
    """Ask the kernel to forget the file's cached pages (fadvise), so every variant starts cold."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, action="append", help="vectors (repeatable; default 100000 and 1000000)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n or [100_000, 1_000_000]:
            path = os.path.join(tmp, f"flat{n}.faiss")
            make(path, n)
            runs: dict[str, list[dict]] = {"read": [], "map only": [], "mapped": []}
            for _ in range(args.repeats):
                for name, flag in (("read", "0"), ("map only", "1"), ("mapped", "2")):  # alternated, each from a cold page cache
                    drop_cache(path)
                    out = subprocess.run([sys.executable, "-c", CHILD, path, flag, str(args.queries)],
                                         capture_output=True, text=True, check=True)
                    runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            for name, rs in runs.items():
                med = {k: sorted(r[k] for r in rs)[len(rs) // 2] for k in rs[0]}
                rows.append((n, name, med, os.path.getsize(path) / 2**20))
    print(f"Flat index, 256 dims, {args.queries} single queries then one batch, median of {args.repeats} fresh "
          "processes each (alternated, page cache dropped before each)\n")
    print("| vectors | FAISS file MB | read as | open s | first query ms | p50 ms | p99 ms | batch ms/query | "
          "anon MB | file-backed MB | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, name, m, size in rows:
        how = {"read": "read into memory (before)", "map only": "IO_FLAG_MMAP_IFC alone",
               "mapped": "mapped, file read through once (FAQSearch.open)"}[name]
        print(f"| {n:,} | {size:,.0f} | {how} | {m['open_s']:.2f} | {m['first_ms']:.1f} | {m['p50_ms']:.2f} | "
              f"{m['p99_ms']:.2f} | {m['batch_ms_per_q']:.3f} | {m['anon_mb']:,.0f} | {m['file_mb']:,.0f} | "
              f"{m['hwm_mb']:,.0f} |")


if __name__ == "__main__":
    main()
