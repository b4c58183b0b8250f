"""The deployment recipe in deploy/ (shown whole in docs/deploy.md): the systemd unit, the Dockerfile
and the Prometheus scrape job, checked against the real CLI and routes as far as this machine allows
(no Docker daemon: the image itself is not built here)."""
import json
import os
import re
import shlex
import shutil
import subprocess

import pytest

from faqsearch.cli.commands.serve import serve

from .conftest import ROOT

DEPLOY = os.path.join(ROOT, "deploy")


@pytest.fixture(autouse=True)
def no_serve_env(monkeypatch):
    """The options as the files give them, not as this shell's environment would."""
    for name in ("FAQSEARCH_API_KEY", "FAQSEARCH_READ_KEY", "FAQSEARCH_LOG_FORMAT"):
        monkeypatch.delenv(name, raising=False)


def read(name: str) -> str:
    with open(os.path.join(DEPLOY, name), encoding="utf-8") as f:
        return f.read()


def unit() -> dict[str, list[str]]:
    """The unit's settings, key -> values (a key such as Environment may repeat)."""
    out: dict[str, list[str]] = {}
    for line in read("faqsearch.service").splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


def serve_options(argv: list[str]) -> dict:
    """What `faqsearch serve` makes of ``argv`` (its real option parser; a wrong option fails here)."""
    assert argv[0].endswith("faqsearch") and argv[1] == "serve", argv
    return serve.make_context("serve", list(argv[2:])).params


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments left out."""
    text = re.sub(r"\\\n\s*", " ", read("Dockerfile"))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_unit_serves_with_its_keys_from_a_file_and_restarts():
    u = unit()
    params = serve_options(shlex.split(u["ExecStart"][0]))
    assert params["host"] == "127.0.0.1" and params["api_key"] is None  # the key comes from the EnvironmentFile
    env = dict(e.split("=", 1) for e in u["Environment"])
    assert env["FAQSEARCH_HOME"].startswith("/var/lib/faqsearch") and env["FAQSEARCH_LOG_FORMAT"] == "json"
    assert u["Restart"] == ["on-failure"] and u["User"] == ["faqsearch"] and u["StateDirectory"] == ["faqsearch"]
    assert u["EnvironmentFile"] == ["/etc/faqsearch/faqsearch.env"]
    envvars = {p.envvar for p in serve.params if p.envvar}
    keys = {line.split("=", 1)[0] for line in read("faqsearch.env").splitlines() if line and not line.startswith("#")}
    assert keys == {"FAQSEARCH_API_KEY", "FAQSEARCH_READ_KEY"} and keys <= envvars


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_finds_nothing_to_say(tmp_path):
    """In a scratch root holding the unit, the system's targets and a stand-in for the executable."""
    exe = tmp_path / "opt/faqsearch/venv/bin/faqsearch"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    system = tmp_path / "usr/lib/systemd/system"
    system.mkdir(parents=True)
    for name in os.listdir("/usr/lib/systemd/system"):
        if name.endswith((".target", ".slice")):
            shutil.copy(os.path.join("/usr/lib/systemd/system", name), system / name, follow_symlinks=False)
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(os.path.join(DEPLOY, "faqsearch.service"), tmp_path / "etc/systemd/system/faqsearch.service")
    r = subprocess.run(["systemd-analyze", "verify", f"--root={tmp_path}", "faqsearch.service"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr


def test_the_dockerfile_runs_the_real_serve_and_checks_the_health_route():
    steps = dockerfile()
    known = {"FROM", "ARG", "ENV", "WORKDIR", "COPY", "RUN", "USER", "VOLUME", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT",
             "CMD"}
    assert {kind for kind, _ in steps} <= known and steps[0][0] == "FROM" and "slim" in steps[0][1]
    for kind, args in steps:
        if kind == "COPY":
            for source in args.split()[:-1]:
                assert os.path.exists(os.path.join(ROOT, source)), f"COPY {source}: not in the repository"
    one = {kind: args for kind, args in steps}
    params = serve_options(json.loads(one["ENTRYPOINT"]) + json.loads(one["CMD"]))
    assert params["host"] == "0.0.0.0" and one["EXPOSE"] == str(params["port"])
    health = re.search(r"http://127\.0\.0\.1:(\d+)(/\w+)", one["HEALTHCHECK"])
    assert int(health.group(1)) == params["port"] and health.group(2) == "/health"
    from faqsearch.service.routes import router

    assert {"/health", "/metrics"} <= {r.path for r in router.routes}
    readme_torch = re.search(r"torch==[\d.]+", open(os.path.join(ROOT, "README.md"), encoding="utf-8").read())
    runs = " ".join(args for kind, args in steps if kind == "RUN")
    assert readme_torch.group(0) in runs and '".[server]"' in runs
    env = dict(kv.split("=", 1) for kind, args in steps if kind == "ENV" for kv in args.split())
    assert env["FAQSEARCH_LOG_FORMAT"] in ("text", "json") and env["FAQSEARCH_HOME"].startswith(one["VOLUME"])


def test_the_prometheus_job_scrapes_metrics_with_a_bearer_key():
    yaml = pytest.importorskip("yaml")
    from faqsearch.service.routes import _key

    job = yaml.safe_load(read("prometheus.yml"))["scrape_configs"][0]
    assert job["metrics_path"] == "/metrics"
    assert job["authorization"]["type"] == "Bearer" and _key(None, "Bearer k") == "k"  # the routes take a bearer key
