"""The Milvus backend (milvus-lite, a local file) next to the embedded backend (FAISS flat + SQLite)
at about 100k questions, same run, same machine.

The corpus is sample_data recombined (benchmarks/synth.py's prefixes and suffixes, plus a case
number), 150 FAQs. Encoding is the same for both backends, so it is done once and timed once; the
ingest rows time what each backend adds on top (transform, index build, storage). Queries: 200
sample_data user queries, one at a time, dense and hybrid, text in and answers out (query
encoding included, cache off), and search only (precomputed query vectors).

    python benchmarks/milvus_scale.py [--questions 100000] [--out results.md]
"""
from __future__ import annotations

import argparse
import csv
import itertools
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SAMPLE, CachingEncoder, emit, machine  # noqa: E402

from faqsearch import FAQ, FAQSearch, read_corpus  # noqa: E402
from faqsearch.encoders import load_encoder  # noqa: E402
from synth import PREFIXES, SUFFIXES  # noqa: E402


def corpus(n: int) -> list[FAQ]:
    rng = random.Random(0)
    base = read_corpus(os.path.join(SAMPLE, "faq.csv"))
    per = -(-n // len(base))
    out = []
    for f in base:
        forms = [p + q + s for q in f.questions for p, s in itertools.product(PREFIXES, SUFFIXES)]
        rng.shuffle(forms)
        qs = [forms[i % len(forms)] + ("" if i < len(forms) else f" (case {i // len(forms)})") for i in range(per)]
        out.append(FAQ(f.id, f.answer, qs, f.category))
    return out


def pct(xs, p):
    xs = sorted(xs)
    return 1000 * xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=100_000)
    ap.add_argument("--out")
    args = ap.parse_args()
    faqs = corpus(args.questions)
    texts = [q for f in faqs for q in f.questions]
    with open(os.path.join(SAMPLE, "queries.csv"), encoding="utf-8") as fh:
        queries = [r["query"] for r in csv.DictReader(fh)][:200]
    enc = CachingEncoder(load_encoder("minilm"))
    t = time.perf_counter()
    enc.encode(texts + queries, batch_size=64)
    encode_s = time.perf_counter() - t
    rows, tops, grouped = [], {}, float("nan")
    with tempfile.TemporaryDirectory() as tmp:
        for name, kw in [("embedded (FAISS flat + SQLite)", {"index_type": "flat"}),
                         ("milvus-lite (FLAT)", {"backend": "milvus", "uri": os.path.join(tmp, "m.db")})]:
            t = time.perf_counter()
            e = FAQSearch.build(faqs, os.path.join(tmp, name.split()[0]), encoder=enc, **kw)
            build_s = time.perf_counter() - t
            qv = e.embed(queries)
            lat = {"search": [], "dense": [], "hybrid": []}
            for i, q in enumerate(queries):
                t = time.perf_counter()
                e.searcher().dense(qv[i:i + 1], 10)
                lat["search"].append(time.perf_counter() - t)
                for mode in ("dense", "hybrid"):
                    e._queries.clear()
                    t = time.perf_counter()
                    e.ask(q, k=3, mode=mode)
                    lat[mode].append(time.perf_counter() - t)
            n = e.info()["counts"]["questions"]
            tops[name] = [[a.faq_id for a in found] for found in e.searcher().dense(qv, 10)]
            index = e.searcher().snap.index
            if getattr(index, "search_distinct", None) is not None:  # Milvus' own grouping search, for comparison
                got = index.b.client.search(index.b.collection, data=qv.tolist(), anns_field="vector", limit=10,
                                            filter=index.b.visible(), output_fields=["faq_id"],
                                            search_params={"metric_type": "IP"}, group_by_field="faq_id")
                grouped = sum(len(r) for r in got) / len(got)
            e.close()
            rows.append((name, n, build_s, {m: (pct(v, 50), pct(v, 99)) for m, v in lat.items()}))
    lines = [f"Measured {machine()}; {len(texts)} questions, 150 FAQs, minilm 384 -> 256 dims; encoding "
             f"{len(texts)} questions once: {encode_s:.1f} s ({len(texts) / encode_s:.0f} q/s), the same for both", "",
             "| backend | questions | ingest beyond encoding (s) | questions/s | search only p50 / p99 ms | "
             "dense ask p50 / p99 ms | hybrid ask p50 / p99 ms | FAQs per top-10 list | top-10 lists as the embedded "
             "backend's |", "|---|---|---|---|---|---|---|---|---|"]
    first = next(iter(tops.values()))
    for name, n, b, lat in rows:
        same = sum(mine == theirs for mine, theirs in zip(tops[name], first))
        lines.append(f"| {name} | {n} | {b:.1f} | {n / b:.0f} | {lat['search'][0]:.1f} / {lat['search'][1]:.1f} | "
                     f"{lat['dense'][0]:.1f} / {lat['dense'][1]:.1f} | {lat['hybrid'][0]:.1f} / {lat['hybrid'][1]:.1f} | "
                     f"{sum(map(len, tops[name])) / len(queries):.1f} | {same} of {len(queries)} |")
    lines += ["", f"Milvus' own grouping search (group_by_field, limit 10) on the same queries: {grouped:.1f} FAQs per list."]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
