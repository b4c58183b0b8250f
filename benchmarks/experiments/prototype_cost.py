"""What FAQ prototypes cost (faqsearch/prototypes.py): the pass the first query after each change of an
index makes over its stored vectors (Prototypes.build from a memory-mapped file, as vectors.npy is
read), the leave-one-out choice ingest makes (choose_weight), and the scores one query adds (20
candidates), at several index sizes. Random unit vectors, 384 dimensions, 5 questions per FAQ;
the identity stands in for the transform (a rotation, the default, is a normalisation: as cheap).

    python benchmarks/experiments/prototype_cost.py [--sizes 10000,100000,200000] [--out FILE]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
from common import emit, machine  # noqa: E402

from faqsearch.prototypes import Prototypes, choose_weight, sample_rows  # noqa: E402


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,200000")
    ap.add_argument("--out")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = ["| questions | build (first query after a change) s | choose_weight at ingest s | one query's 20 scores ms |",
            "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            path = os.path.join(tmp, f"v{n}.npy")
            np.save(path, unit(rng.normal(size=(n, 384)).astype(np.float32)))
            raw = np.load(path, mmap_mode="r")
            ids, keys = np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64) // 5
            t = time.perf_counter()
            protos = Prototypes.build(ids, keys, raw, unit)
            build = time.perf_counter() - t
            t = time.perf_counter()
            picked = sample_rows(keys)
            choose_weight(unit(np.asarray(raw[picked])), keys[picked])
            choose = time.perf_counter() - t
            q = unit(rng.normal(size=(1, 384)).astype(np.float32))[0]
            cands = rng.integers(0, n, 20)
            t = time.perf_counter()
            for _ in range(200):
                protos.scores(cands, q)
            per = (time.perf_counter() - t) / 200 * 1000
            rows.append(f"| {n:,} | {build:.2f} | {choose:.2f} | {per:.3f} |")
            print(rows[-1], flush=True)
    emit([f"Measured {machine()} with `python benchmarks/experiments/prototype_cost.py"
          f" --sizes {args.sizes}`", "", *rows], args.out)


if __name__ == "__main__":
    main()
