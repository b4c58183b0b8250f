"""Load on `faqsearch serve`: 1, 8 and 32 concurrent clients on loopback, with an edit mid-run.

The server is the real command in its own process (sample_data index, bundled encoder, query log
on, API key set), bound to 127.0.0.1. Each client thread keeps one HTTP connection and sends
`GET /indexes/default/ask?q=...` with a distinct query each time (sample_data's user and off-topic
queries plus a counter, so the server's query-vector cache never answers). Halfway through each
level another thread adds an FAQ through the API and, later, removes it: every request must still
succeed. Bounded: at most --requests per level and --seconds per level.

The library row is the same queries answered by `FAQSearch.ask` in this process (model loaded):
the server's added latency is its p50 at one client minus the library's p50.

    python benchmarks/serve_load.py [--requests 400] [--seconds 60] [--out results.md]
"""
from __future__ import annotations

import argparse
import csv
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SAMPLE, emit, machine  # noqa: E402

import httpx  # noqa: E402

KEY = "bench-key"
LEVELS = (1, 8, 32)


def queries() -> list[str]:
    with open(os.path.join(SAMPLE, "queries.csv"), encoding="utf-8") as fh:
        qs = [r["query"] for r in csv.DictReader(fh)]
    with open(os.path.join(SAMPLE, "offtopic.txt"), encoding="utf-8") as fh:
        qs += [line.strip() for line in fh if line.strip()]
    return qs


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1000


def level(base: str, clients: int, qs: list[str], total: int, seconds: float, start: int) -> dict:
    lat: list[float] = []
    errors: list[str] = []
    sent = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    edit: dict = {}

    def client() -> None:
        with httpx.Client(base_url=base, timeout=60) as c:
            while time.monotonic() < deadline:
                with lock:
                    if sent[0] >= total:
                        return
                    i = sent[0] = sent[0] + 1
                q = f"{qs[i % len(qs)]} {start + i}"
                t = time.perf_counter()
                try:
                    r = c.get("/indexes/default/ask", params={"q": q, "k": 3})
                    ok = r.status_code == 200 and "answers" in r.json()
                except httpx.HTTPError as exc:
                    ok, r = False, exc
                dt = time.perf_counter() - t
                with lock:
                    (lat.append(dt) if ok else errors.append(str(r)))

    def editor() -> None:
        while sent[0] < total // 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        fid = f"bench-{start}"
        with httpx.Client(base_url=base, timeout=60, headers={"X-API-Key": KEY}) as c:
            t = time.perf_counter()
            r = c.post("/indexes/default/faqs", json={"faqs": [{"id": fid, "answer": "Benchmark answer.",
                                                                "questions": [f"benchmark question {start}"]}]})
            edit["add"] = (r.status_code, time.perf_counter() - t)
            seen = c.get("/indexes/default/ask", params={"q": f"benchmark question {start}", "k": 1}).json()
            edit["visible"] = bool(seen["answers"]) and seen["answers"][0]["faq_id"] == fid
            while sent[0] < total * 3 // 4 and time.monotonic() < deadline:
                time.sleep(0.01)
            t = time.perf_counter()
            r = c.delete(f"/indexes/default/faqs/{fid}")
            edit["remove"] = (r.status_code, time.perf_counter() - t)

    threads = [threading.Thread(target=client) for _ in range(clients)] + [threading.Thread(target=editor)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"clients": clients, "requests": len(lat) + len(errors), "rps": len(lat) / wall, "p50": pct(lat, 50),
            "p99": pct(lat, 99), "errors": len(errors), "edit": edit, "first_error": errors[0] if errors else ""}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400, help="requests per level (at most)")
    ap.add_argument("--seconds", type=float, default=60.0, help="time per level (at most)")
    ap.add_argument("--out")
    args = ap.parse_args()
    qs = queries()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "FAQSEARCH_HOME": home, "FAQSEARCH_API_KEY": KEY}
        subprocess.run([sys.executable, "-m", "faqsearch.cli", "ingest", os.path.join(SAMPLE, "faq.csv"), "-q"],
                       env=env, check=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen([sys.executable, "-m", "faqsearch.cli", "serve", "--port", str(port), "-q"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(base + "/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
            rows = [level(base, c, qs, args.requests, args.seconds, 100_000 * n) for n, c in enumerate(LEVELS, 1)]
        finally:
            server.terminate()
            server.wait(timeout=30)
        # the library, same queries, same machine, server stopped
        from faqsearch import FAQSearch

        engine = FAQSearch.open(os.path.join(home, "default"))
        engine.ask("warm up")
        lib = []
        for i in range(min(args.requests, 200)):
            t = time.perf_counter()
            engine.ask(f"{qs[i % len(qs)]} {i}", k=3)
            lib.append(time.perf_counter() - t)
        engine.close()
    lines = [f"Measured {machine()}; sample_data index (450 questions), bundled encoder, hybrid mode, query log on; "
             f"client and server on one 2-core machine over loopback", "",
             "| clients | requests | requests/s | p50 ms | p99 ms | errors | mid-run add / remove (status, s) | "
             "added FAQ answered right after |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        e = r["edit"]
        lines.append(f"| {r['clients']} | {r['requests']} | {r['rps']:.1f} | {r['p50']:.1f} | {r['p99']:.1f} | "
                     f"{r['errors']} | {e.get('add', ('-', 0))[0]} {e.get('add', ('-', 0))[1]:.2f} / "
                     f"{e.get('remove', ('-', 0))[0]} {e.get('remove', ('-', 0))[1]:.2f} | {e.get('visible')} |")
    lp50 = pct(lib, 50)
    lines += ["", f"Library `FAQSearch.ask`, same queries, one thread: p50 {lp50:.1f} ms, p99 {pct(lib, 99):.1f} ms; "
                  f"the server adds {rows[0]['p50'] - lp50:.1f} ms at p50 (HTTP, JSON, query log) at one client."]
    if any(r["errors"] for r in rows):
        lines.append("First error: " + next(r["first_error"] for r in rows if r["errors"]))
    emit(lines, args.out)


if __name__ == "__main__":
    main()
