"""Replicas over one Milvus index: 1 against 3 `faqsearch serve` processes on the same
milvus://HOST:PORT/NAME index, and how long an edit through one takes to be answered by the others.

Everything runs on this machine: `milvus-lite server` (the Milvus gRPC endpoint, a free 127.0.0.1
port, a temporary data directory), the sample_data index ingested by address, and each replica a
real `faqsearch serve` in its own working directory (its own FAQSEARCH_HOME: no shared file), one
encoding thread each. Clients keep one HTTP connection each and spread their requests over the
replicas in turn (the load balancer's round robin); every query is distinct (sample_data's user
and off-topic queries plus a counter), so no query cache answers. Bounded: --requests per row and
--seconds per row. Then, --edits times: an FAQ is added through replica 1 and each other replica is
asked its question every 20 ms until it answers with the new FAQ.

    python benchmarks/milvus_replicas.py [--clients 6] [--requests 600] [--seconds 60] [--out results.md]
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SAMPLE, emit, machine  # noqa: E402
from serve_load import pct, queries  # noqa: E402

import httpx  # noqa: E402

KEY = "bench-key"
NAME = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.2)
    raise SystemExit(f"{what} did not come up within {seconds:.0f} s")


def milvus_up(uri: str) -> bool:
    from pymilvus import MilvusClient

    c = MilvusClient(uri=uri, timeout=2)
    c.list_collections()
    c.close()
    return True


def run_load(urls: list[str], clients: int, qs: list[str], total: int, seconds: float, start: int) -> dict:
    lat: list[float] = []
    errors: list[str] = []
    sent = [0]
    lock = threading.Lock()
    began = time.monotonic()
    deadline = began + seconds

    def client(n: int) -> None:
        conns = [httpx.Client(base_url=u, timeout=60) for u in urls]
        try:
            while time.monotonic() < deadline:
                with lock:
                    if sent[0] >= total:
                        return
                    i = sent[0] = sent[0] + 1
                c = conns[(i + n) % len(conns)]
                t = time.perf_counter()
                try:
                    r = c.get(f"/indexes/{NAME}/ask", params={"q": f"{qs[i % len(qs)]} {start + i}", "k": 3})
                    ok, why = r.status_code == 200 and "answers" in r.json(), r.text[:100]
                except httpx.HTTPError as exc:
                    ok, why = False, repr(exc)
                dt = time.perf_counter() - t
                with lock:
                    (lat.append(dt) if ok else errors.append(why))
        finally:
            for c in conns:
                c.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - began
    return {"n": len(lat), "errors": len(errors), "rps": len(lat) / wall, "p50": pct(lat, 50), "p99": pct(lat, 99),
            "first_error": errors[0] if errors else ""}


def visibility(urls: list[str], i: int) -> list[float]:
    """Seconds from the add's response (through urls[0]) until each other replica answers with it."""
    fid, q = f"bench-edit-{i}", f"is the zorblax {i} widget waterproof"
    r = httpx.post(f"{urls[0]}/indexes/{NAME}/faqs", headers={"X-API-Key": KEY}, timeout=120,
                   json={"faqs": [{"id": fid, "answer": f"Yes, zorblax {i} is waterproof.", "questions": [q]}]})
    r.raise_for_status()
    t0, out = time.monotonic(), []
    for u in urls[1:]:
        while True:
            answers = httpx.get(f"{u}/indexes/{NAME}/ask", params={"q": q}, timeout=60).json()["answers"]
            if answers and answers[0]["faq_id"] == fid:
                out.append(time.monotonic() - t0)
                break
            if time.monotonic() - t0 > 30:
                raise SystemExit(f"replica {u} did not answer with {fid} within 30 s")
            time.sleep(0.02)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--edits", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    qs = queries()
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        uri = f"http://127.0.0.1:{port}"
        procs.append(subprocess.Popen([sys.executable, "-m", "milvus_lite.cmdline", "server", "--data-dir",
                                       os.path.join(tmp, "milvus"), "--host", "127.0.0.1", "--port", str(port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        try:
            wait_for(lambda: milvus_up(uri), 120, "milvus-lite server")
            address = f"milvus://127.0.0.1:{port}/{NAME}"
            homes = [os.path.join(tmp, f"replica{i}") for i in range(3)]
            env = [{**os.environ, "FAQSEARCH_HOME": h, "FAQSEARCH_API_KEY": KEY} for h in homes]
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "faqsearch.cli", "ingest", os.path.join(SAMPLE, "faq.csv"),
                            "--index", address, "-q"], env=env[0], check=True, timeout=600, stdout=subprocess.DEVNULL)
            ingest_s = time.perf_counter() - t
            urls = []
            for e in env:
                p = free_port()
                procs.append(subprocess.Popen([sys.executable, "-m", "faqsearch.cli", "serve", "--index", address,
                                               "--port", str(p), "--threads", "1", "-q", "--no-log"], env=e,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                urls.append(f"http://127.0.0.1:{p}")
            for u in urls:
                wait_for(lambda u=u: httpx.get(u + "/health", timeout=2).status_code == 200, 180, u)
                httpx.get(f"{u}/indexes/{NAME}/ask", params={"q": "warm up"}, timeout=120)  # the model loads
            rows = [("1 replica", run_load(urls[:1], args.clients, qs, args.requests, args.seconds, 0)),
                    ("3 replicas", run_load(urls, args.clients, qs, args.requests, args.seconds, 10 ** 6))]
            seen = [s for i in range(args.edits) for s in visibility(urls, i)]
        finally:
            for p in procs[::-1]:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
    lines = [f"Measured {machine()}; milvus-lite server on 127.0.0.1, sample_data "
             f"(150 FAQs) ingested by address in {ingest_s:.1f} s; each replica `faqsearch serve --threads 1`; "
             f"{args.clients} client threads, round robin over the replicas, every query distinct", "",
             "| replicas | requests | errors | requests/s | p50 ms | p99 ms |", "|---|---|---|---|---|---|"]
    for label, r in rows:
        lines.append(f"| {label} | {r['n']} | {r['errors']} | {r['rps']:.1f} | {r['p50']:.0f} | {r['p99']:.0f} |")
    seen.sort()
    lines += ["", f"An FAQ added through replica 1, answered by replicas 2 and 3 ({len(seen)} waits, {args.edits} edits): "
              f"median {seen[len(seen) // 2]:.2f} s, slowest {seen[-1]:.2f} s after the add's response."]
    for label, r in rows:
        if r["errors"]:
            lines.append(f"First error ({label}): {r['first_error']}")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
