"""`faqsearch serve --log-format json`: one JSON object per log line, a request's line with method,
path (no query string), status, ms, index and answered."""
import io
import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from faqsearch.errors import InvalidOptionError  # noqa: E402
from faqsearch.service import Service, create_app  # noqa: E402
from faqsearch.service.logs import JSONFormatter, requests_log, uvicorn_logging  # noqa: E402

from .conftest import ROOT, build_index, free_port, wait_healthy  # noqa: E402


@pytest.fixture
def ix(tmp_path, small_corpus):
    build_index(small_corpus, tmp_path / "shop", threshold=0.3).close()
    return str(tmp_path / "shop")


@pytest.fixture
def request_lines():
    """What the request logger writes, through the JSON formatter."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JSONFormatter())
    level = requests_log.level
    requests_log.setLevel(logging.INFO)  # setLevel, not .level: it clears the loggers' cached levels
    requests_log.addHandler(handler)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    requests_log.removeHandler(handler)
    requests_log.setLevel(level)


def test_each_request_logs_one_json_line_without_the_query(fake_models, ix, request_lines):
    service = Service({"shop": ix}, watch=False)
    try:
        client = TestClient(create_app(service), raise_server_exceptions=False)
        client.get("/indexes/shop/ask", params={"q": "How do I reset my password?"})
        client.post("/indexes/shop/ask", json={"query": "secret zzz qqq", "threshold": 0.95})
        client.post("/indexes/shop/ask/batch", json={"queries": ["Can I return an item?", "zzz"], "threshold": 0.95})
        client.get("/health")
        client.get("/indexes/nope/ask", params={"q": "hi"})
    finally:
        service.close()
    lines = request_lines()
    assert [(x["method"], x["path"], x["status"]) for x in lines] == [
        ("GET", "/indexes/shop/ask", 200), ("POST", "/indexes/shop/ask", 200), ("POST", "/indexes/shop/ask/batch", 200),
        ("GET", "/health", 200), ("GET", "/indexes/nope/ask", 404)]
    assert [x.get("answered") for x in lines] == [True, False, [True, False], None, None]
    assert [x.get("index") for x in lines] == ["shop", "shop", "shop", None, "nope"]
    assert all(x["level"] == "INFO" and x["logger"] == "faqsearch.requests" and x["ms"] >= 0 for x in lines)
    assert all(x["time"].endswith("+00:00") for x in lines)
    assert not any("secret" in json.dumps(x) or "reset" in json.dumps(x) for x in lines)


def test_the_formatter_keeps_errors_on_one_line():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("faqsearch.x").makeRecord("faqsearch.x", logging.ERROR, __file__, 1,
                                                             "failed %s", ("here",), sys.exc_info())
    line = JSONFormatter().format(record)
    assert "\n" not in line
    got = json.loads(line)
    assert got["message"] == "failed here" and got["level"] == "ERROR" and "ValueError: boom" in got["error"]


def test_text_keeps_uvicorns_own_logging_and_an_unknown_format_is_refused():
    assert uvicorn_logging("text") == {}
    assert uvicorn_logging("json")["access_log"] is False
    with pytest.raises(InvalidOptionError, match="text, json"):
        uvicorn_logging("xml")


SERVE = ("import sys; sys.path.insert(0, {root!r}); import faqsearch.encoders as e; "
         "from tests.conftest import FakeEncoder; e.load_encoder = lambda *a, **k: FakeEncoder(); "
         "from faqsearch.cli import main; sys.argv = ['faqsearch'] + sys.argv[1:]; main()")


@pytest.mark.slow
def test_serve_with_json_logs_writes_only_json_lines(fake_models, ix, tmp_path):
    """The real command (fake encoder) in a subprocess, the format from FAQSEARCH_LOG_FORMAT: every
    line it logs, uvicorn's start and stop included, parses as JSON."""
    import httpx

    port = free_port()
    env = {**os.environ, "FAQSEARCH_HOME": str(tmp_path), "FAQSEARCH_LOG_FORMAT": "json"}
    proc = subprocess.Popen([sys.executable, "-c", SERVE.format(root=ROOT), "serve", "--index", ix,
                             "--port", str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=ROOT)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, proc)
        assert httpx.get(base + "/indexes/shop/ask", params={"q": "How long does shipping take?"}).status_code == 200
        assert httpx.get(base + "/indexes/shop/ask", params={"q": "zzz", "threshold": 0.95}).status_code == 200
        proc.send_signal(signal.SIGHUP)  # it killed the server at once, a request in flight cut off
        time.sleep(0.5)
        assert proc.poll() is None and httpx.get(base + "/health").status_code == 200
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    from faqsearch.querylog import log_path

    # SIGTERM: uvicorn shut down, then raised it again, which killed the process before the service closed;
    # it still ends by the signal (systemd counts that a clean stop; an exit status of 143 it does not)
    assert proc.returncode == -15 and not os.path.exists(log_path(ix) + "-wal"), (proc.returncode, out[-2000:])
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]  # a line that is not JSON fails here
    assert all({"time", "level", "logger", "message"} <= set(x) for x in lines)
    asks = [x for x in lines if x.get("path") == "/indexes/shop/ask"]
    assert [(x["status"], x["index"], x["answered"]) for x in asks] == [(200, "shop", True), (200, "shop", False)]
    assert any(x["logger"].startswith("uvicorn") for x in lines)  # uvicorn's own lines, as JSON
    assert any(x["message"].startswith("SIGHUP: nothing to reload") for x in lines)
    assert not any(x["logger"] == "uvicorn.access" for x in lines)  # the request lines replace the access log


@pytest.mark.slow
def test_serve_with_json_logs_says_why_it_could_not_start_in_json(tmp_path):
    """An index that is not there (or a bad key) stopped the server with a plain "Error:" line, the
    one line of a crash loop a JSON log shipper could not read."""
    env = {**os.environ, "FAQSEARCH_HOME": str(tmp_path), "FAQSEARCH_LOG_FORMAT": "json"}
    for args, said in ((["--index", "nosuch"], "no index at"), (["--index", "nosuch", "--api-key", "a key"], "--api-key")):
        done = subprocess.run([sys.executable, "-m", "faqsearch.cli", "serve", *args, "--port", str(free_port())],
                              env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
        lines = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]  # not JSON: fails here
        assert done.returncode == 1 and lines and lines[-1]["level"] == "ERROR", done.stderr
        assert said in lines[-1]["message"], lines
