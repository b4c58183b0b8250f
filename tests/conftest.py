"""Shared fixtures: a deterministic fake encoder for fast tests, the real bundled encoder once per session."""
from __future__ import annotations

import hashlib
import os
import pathlib
import re
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Any, Sequence

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "sample_data")
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")


def pytest_collection_modifyitems(config, items):
    """A plain run (the README's and CI's `python -m pytest -q`) runs the fast lane first, then the tests
    marked slow, in one session: one collection, and a failure of the fast lane shows within minutes.
    The order within each lane is the files' own (the sort is stable)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is not None)


class FakeEncoder:
    """Bag of hashed words: texts sharing words get similar vectors. Deterministic, instant."""

    name = "fake"

    def __init__(self, dimension: int = 32, fail_after: int | None = None):
        self.dimension = dimension
        self.fail_after = fail_after
        self.calls = 0

    def _word(self, w: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha1(w.encode()).digest()[:4], "little")
        return np.random.default_rng(seed).standard_normal(self.dimension)

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: bool = False) -> np.ndarray:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise RuntimeError("encoder crashed")
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, t in enumerate(texts):
            words = re.findall(r"\w+", t.lower()) or ["<empty>"]
            v = sum(self._word(w) for w in words)
            out[i] = v / (np.linalg.norm(v) + 1e-9)
        return out

    def spec(self) -> dict[str, Any]:
        return {"backend": "fake", "name": self.name, "pooling": "bag", "prefix": "", "dimension": self.dimension}


def faq_rows(faqs: int, variants: int) -> list[tuple[str, str, str]]:
    """Rows (id, question, answer): FAQ ``f<i>`` asked as "question about subject<i> variant<j>"."""
    return [(f"f{i}", f"question about subject{i} variant{j}", f"answer {i}") for i in range(faqs) for j in range(variants)]


CORPUS_COLUMNS = ("id", "question", "answer", "category", "metadata")


def write_corpus(tmp_path, rows, name="c.csv") -> str:
    """A CSV corpus of ``rows`` (id, question, answer, then optionally category and metadata, each
    already CSV-quoted) written to ``tmp_path/name``; returns its path."""
    p = pathlib.Path(tmp_path) / name
    p.write_text(",".join(CORPUS_COLUMNS[:len(rows[0])]) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows),
                 encoding="utf-8")
    return str(p)


def build_index(corpus, path, **options):
    """``FAQSearch.build(corpus, path, ...)`` with a fresh FakeEncoder unless ``encoder`` is given;
    ``corpus``: a file, FAQs, or rows for :func:`write_corpus` (written beside the index as
    ``<name>.csv``). Returns the open engine (close it, or use it as a context manager)."""
    from faqsearch import FAQSearch

    path = pathlib.Path(path)
    if isinstance(corpus, list) and corpus and isinstance(corpus[0], tuple):
        corpus = write_corpus(path.parent, corpus, f"{path.name}.csv")
    options.setdefault("encoder", FakeEncoder())
    return FAQSearch.build(corpus if isinstance(corpus, list) else str(corpus), str(path), **options)


@pytest.fixture
def fake_encoder():
    return FakeEncoder()


@pytest.fixture
def fake_models(monkeypatch):
    """Make every encoder the CLI or engine loads a FakeEncoder: the package loads each one through
    ``faqsearch.encoders.load_encoder`` (building, opening, an index's own encoder from its spec)."""
    import faqsearch.encoders as encoders

    monkeypatch.setattr(encoders, "load_encoder", lambda *a, **k: FakeEncoder())


@pytest.fixture
def small_corpus(tmp_path):
    p = tmp_path / "faq.csv"
    p.write_text(
        "id,question,answer,category\n"
        "1,How do I reset my password?,Use the forgot password link.,account\n"
        "1,I forgot my password,Use the forgot password link.,account\n"
        "2,How long does shipping take?,Two to four days.,shipping\n"
        "3,Can I return an item?,Yes within 30 days.,returns\n"
        "3,What is the return policy?,Yes within 30 days.,returns\n"
        "4,Do you ship abroad?,We ship to the EU.,shipping\n",
        encoding="utf-8",
    )
    return str(p)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """A 2-layer BERT without a masked-LM head (like the bundled all-MiniLM-L6-v2), minilm's vocabulary."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from faqsearch.encoders import _minilm_path

    torch.manual_seed(0)
    path = str(tmp_path_factory.mktemp("tiny"))
    cfg = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=128)
    BertModel(cfg).save_pretrained(path)
    AutoTokenizer.from_pretrained(_minilm_path()).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def minilm():
    from faqsearch.encoders import load_encoder

    return load_encoder("minilm")


def index_entries(directory) -> list[str]:
    """Names in a directory (hidden ones too), and inside each index directory its entries:
    'ix/CURRENT', 'ix/LOCK', 'ix/v<generation>' (what must remain after writers cleaned up)."""
    names = []
    for d in sorted(os.listdir(directory)):
        names.append(d)
        full = os.path.join(directory, d)
        if os.path.isdir(full) and os.path.exists(os.path.join(full, "CURRENT")):
            names += [f"{d}/{'v<generation>' if e.startswith('v') else e}" for e in sorted(os.listdir(full))]
    return sorted(names)


@pytest.fixture
def run(fake_models):
    """Invoke the CLI in-process (CliRunner) with fake encoders; returns the click Result."""
    from click.testing import CliRunner

    from faqsearch.cli import cli

    runner = CliRunner()

    def invoke(*args, input=None):
        return runner.invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)

    return invoke


def version(path):
    """The live version directory of the index at ``path`` (as a Path)."""
    from faqsearch.index.directory import resolve

    return pathlib.Path(resolve(str(path)))


def index_files(path) -> dict[str, bytes]:
    """Every file of an index directory (its versions included) with its bytes, the lock left out."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            if f != "LOCK":
                full = os.path.join(root, f)
                with open(full, "rb") as fh:
                    out[os.path.relpath(full, path)] = fh.read()
    return out


@contextmanager
def read_only(path):
    """``path`` made read-only for this process, for real: its permissions for a user, a read-only bind
    mount for root (whom permissions do not stop); skipped where root cannot mount."""
    if os.geteuid() != 0:
        modes = {}
        for root, dirs, files in os.walk(path):
            for p in [root] + [os.path.join(root, f) for f in files]:
                modes[p] = os.stat(p).st_mode
                os.chmod(p, modes[p] & ~0o222)
        try:
            yield
        finally:
            for p, mode in modes.items():
                os.chmod(p, mode)
        return
    if subprocess.run(["mount", "--bind", path, path], capture_output=True).returncode != 0:
        pytest.skip("root, and no bind mount here: cannot make a folder read-only")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", path], capture_output=True).returncode != 0:
            pytest.skip("root, and no read-only remount here")
        yield
    finally:
        subprocess.run(["umount", "-l", path], capture_output=True)  # lazily: files the test left open


@pytest.fixture
def built(tmp_path):
    """An open engine over a built index at ``tmp_path/ix``: 15 FAQs f0..f14 of 3 questions each
    (:func:`faq_rows`), fake encoder, threshold -1 (every query answered)."""
    e = build_index(write_corpus(tmp_path, faq_rows(15, 3)), tmp_path / "ix", threshold=-1)
    yield e
    e.close()


def consistent(path) -> int:
    """Open afresh: store, config and FAISS agree (open checks it) and every question finds its FAQ;
    returns the number of questions."""
    from faqsearch import FAQSearch

    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        n = len(e.store.all_questions())
        assert len(e.index) == n + e.config["index"].get("tombstones", 0)
        for qid, fid, text in e.store.all_questions()[:: max(1, n // 10)]:
            assert fid in [a.faq_id for a in e.ask(text, k=3, mode="dense").answers], text
        return n


def tree(path) -> dict[str, bytes]:
    """Every file below ``path`` with its bytes, the lock included (what must survive a refused write)."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                out[os.path.relpath(os.path.join(root, f), path)] = fh.read()
    return out


API_KEY = "k3y"


@pytest.fixture
def api(tmp_path, fake_models):
    """(client, service, path): the HTTP service in-process over an index "shop" of 6 FAQs f0..f5 of 2
    questions each, writes allowed with ``API_KEY``."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from faqsearch.service import Service, create_app

    path = str(tmp_path / "shop")
    build_index(write_corpus(tmp_path, faq_rows(6, 2)), path, threshold=-1, self_fusion=False).close()
    service = Service({"shop": path}, api_key=API_KEY, watch=False)
    client = TestClient(create_app(service), raise_server_exceptions=False)
    yield client, service, path
    service.close()


def generation(path) -> int:
    """The generation of the live version of the index at ``path`` (it grows with every commit)."""
    import json

    return json.loads((version(path) / "config.json").read_text())["generation"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


MILVUS_SERVER_START_S = 60


def wait_healthy(base: str, proc: subprocess.Popen, seconds: float = 120) -> None:
    """Wait until a `faqsearch serve` subprocess answers GET /health at ``base``, it exits, or
    ``seconds`` pass (the caller's next request or assertion says which)."""
    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)


def _start_milvus_server(data, log) -> tuple[subprocess.Popen, str | None, str]:
    """``milvus-lite server`` over ``data`` on a free 127.0.0.1 port, its output to ``log``: (the process,
    its URI once a pymilvus client connects or None, why not). Bounded by MILVUS_SERVER_START_S."""
    from pymilvus import MilvusClient

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "milvus_lite.cmdline", "server", "--data-dir", str(data),
                             "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    uri, start = f"http://127.0.0.1:{port}", time.monotonic()
    error = f"no connection to {uri} within {MILVUS_SERVER_START_S} s"
    while time.monotonic() - start < MILVUS_SERVER_START_S:
        if proc.poll() is not None:
            return proc, None, f"{uri} exited with status {proc.returncode}"
        try:
            client = MilvusClient(uri=uri, timeout=2)
            client.list_collections()
            client.close()
            return proc, uri, ""
        except Exception as e:  # noqa: BLE001 - not listening yet
            error = f"no connection to {uri} within {MILVUS_SERVER_START_S} s: {str(e)[:300]}"
        time.sleep(0.2)
    return proc, None, error


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory):
    """The URI (``http://127.0.0.1:<port>``) of a real Milvus gRPC endpoint: ``milvus-lite server`` run
    once per session as a subprocess on a free 127.0.0.1 port over a temporary data directory, stopped
    at the end. Skipped only where milvus-lite is not installed (the dev extra installs it)."""
    import importlib.util

    if importlib.util.find_spec("milvus_lite") is None or importlib.util.find_spec("pymilvus") is None:
        pytest.skip("milvus-lite not installed: pip install 'faqsearch[milvus]'")
    data = tmp_path_factory.mktemp("milvus-server")
    with open(data.parent / f"{data.name}.log", "w+b") as log:
        for _ in range(3):  # another process may take the free port before the server binds it
            proc, uri, error = _start_milvus_server(data, log)
            if uri or proc.returncode is None:
                break
        try:
            if uri is None:
                log.seek(0)
                pytest.fail(f"milvus-lite server did not start ({error}); its output:\n"
                            f"{log.read().decode(errors='replace')[-4000:]}", pytrace=False)
            yield uri
        finally:
            _stop(proc)
