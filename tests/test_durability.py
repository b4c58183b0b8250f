"""An edit killed at any file operation, or one that cannot write, leaves an index that opens and
answers (the old state or the new, nothing half-written), in every layout an index has had."""
import json
import os
import subprocess
import sys

import pytest

from faqsearch import FAQ, FAQSearch
from faqsearch.index.directory import resolve

from .conftest import ROOT, FakeEncoder, build_index, consistent, faq_rows, index_entries, tree, version, write_corpus

ROWS = faq_rows(15, 3)
FEW = faq_rows(6, 2)


# One process imports faqsearch once, then forks a child for each run: the child patches the file
# operations, runs the edit and dies at the asked one with os._exit (like SIGKILL: no cleanup, no
# finally blocks). A fresh interpreter for each of the ~40 steps of a remove took 0.4 s a step.
KILLER = r"""
import json, os, shutil, sys, traceback
sys.path.insert(0, {root!r})
import numpy as np
from tests.conftest import FakeEncoder
from faqsearch import FAQSearch
from faqsearch.corpus import FAQ


def edit(kill_at, path, what):
    calls = [0]

    def wrap(fn):
        def inner(*a, **k):
            calls[0] += 1
            if calls[0] == kill_at:
                os._exit(9)
            return fn(*a, **k)
        return inner

    e = FAQSearch.open(path, encoder=FakeEncoder())
    for mod, name in [(os, "replace"), (os, "rename"), (os, "symlink"), (os, "link"), (os, "rmdir"), (os, "remove"),
                      (os, "mkdir"), (shutil, "rmtree"), (os, "fsync")]:
        setattr(mod, name, wrap(getattr(mod, name)))
    np.save = wrap(np.save)
    if what == "add":
        e.add([FAQ("new", "new answer", ["brand new wording here"])])
    else:
        e.remove(["f3"])


for line in sys.stdin:
    kill_at, path, what, errors = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            edit(kill_at, path, what)
        except BaseException:
            with open(errors, "w") as f:
                f.write(traceback.format_exc())
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


class Killer:
    """Runs the edit in a forked child, killed at file operation ``step``; returns its exit code
    (0 when the edit finished first, 9 when killed) and what it printed as an error."""

    def __init__(self, tmp_path):
        self.errors = str(tmp_path / "killer-errors.txt")
        self.proc = subprocess.Popen([sys.executable, "-c", KILLER.format(root=ROOT)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def run(self, path, step, what):
        self.proc.stdin.write(json.dumps([step, path, what, self.errors]) + "\n")
        self.proc.stdin.flush()
        code = int(self.proc.stdout.readline())
        return code, open(self.errors).read() if code not in (0, 9) and os.path.exists(self.errors) else ""

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def make_legacy(path: str, layout: str) -> None:
    """Turn an index into one of the two older layouts: a symbolic link to a sibling version
    ``.NAME.v-<random>`` (locked through ``.NAME.lock``), or a plain directory of version files
    written before deltas (no ids.npy) and before file fingerprints (sizes only)."""
    import shutil

    real = str(version(path))
    shutil.rmtree(os.path.join(real, "lexical"), ignore_errors=True)  # both layouts predate the postings arrays
    config = json.load(open(os.path.join(real, "config.json")))
    config["files"] = {k: v["bytes"] for k, v in config["files"].items() if "/" not in k}  # no lexical/ records then
    config.pop("index_id", None)
    json.dump(config, open(os.path.join(real, "config.json"), "w"))
    parent, name = os.path.split(path)
    sibling = os.path.join(parent, f".{name}.v-abc123")
    shutil.move(real, sibling)
    shutil.rmtree(path)
    if layout == "link":
        os.symlink(os.path.basename(sibling), path)
        open(os.path.join(parent, f".{name}.lock"), "w").close()
    else:
        os.rename(sibling, path)
        os.remove(os.path.join(path, "ids.npy"))
        del config["files"]["ids.npy"]
        json.dump(config, open(os.path.join(path, "config.json"), "w"))


# the older layouts with one edit: the first write of any edit moves them with the same steps (the
# migration), and both edits' own steps are those of the current layout (each row ran both: 60 s more)
@pytest.mark.parametrize("what,layout", [("add", "current"), ("remove", "current"), ("add", "link"),
                                         ("remove", "plain")])
@pytest.mark.slow
def test_killed_at_every_step_an_index_answers_at_the_path(tmp_path, layout, what):
    """Every layout, the two older ones moved to the directory layout by this first write: killed at
    each file operation, the index at the path opens and answers, in the old state or the new."""
    path = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, ROWS), path, threshold=-1, self_fusion=False).close()
    if layout != "current":
        make_legacy(path, layout)
    pristine = tmp_path / "pristine"
    os.mkdir(pristine)
    os.system(f"cp -a {tmp_path}/ix {tmp_path}/.ix.* {pristine}/ 2>/dev/null")
    step, outcomes, killer = 1, set(), Killer(tmp_path)
    while True:
        code, errors = killer.run(path, step, what)
        assert code in (0, 9), errors
        assert os.path.isdir(resolve(path)), f"nothing at the path after a kill at step {step}"
        with FAQSearch.open(path, encoder=FakeEncoder()) as e:
            faqs = {f["id"] for f in e.list()}
            new_state = ("new" in faqs) if what == "add" else ("f3" not in faqs)
            outcomes.add(new_state)
            assert e.ask("question about subject5 variant1", mode="dense").answers[0].faq_id == "f5"
            if new_state and what == "add":
                assert e.ask("brand new wording here", mode="dense").answers[0].faq_id == "new"
        consistent(path)
        if code == 0:
            break
        # start every step from the same state, in the same layout
        os.system(f"rm -rf {tmp_path}/ix {tmp_path}/.ix.*; cp -a {pristine}/. {tmp_path}/")
        step += 1
        assert step < 80
    killer.close()
    assert outcomes == {False, True} or step > 1
    # leftovers of the killed runs are gone after the next write; only the index directory remains
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        e.add([FAQ("last", "last answer", ["one more wording"])])
    os.system(f"rm -rf {pristine}")
    kept = ["ix/v<generation>"] if what == "remove" else []  # a remove makes a new version; the one before stays
    assert index_entries(tmp_path) == ["c.csv", "ix", "ix/CURRENT", "ix/LOCK", "ix/v<generation>"] + kept


def test_write_failures_say_what_happened_and_commit_nothing(tmp_path, monkeypatch, run):
    import errno

    import faqsearch.files as files_mod

    path = str(tmp_path / "ix")
    assert run("ingest", write_corpus(tmp_path, FEW), "--index", path, "-q").exit_code == 0
    before = tree(path)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    add = write_corpus(tmp_path, [("n1", "new words here", "new answer")], "n.csv")
    with monkeypatch.context() as m:
        m.setattr(files_mod.os, "fsync", full)
        result = run("add", add, "--index", path)
    assert result.exit_code == 1 and "no space left on the device" in result.output
    assert {k: v for k, v in tree(path).items() if not k.endswith("store.db")} == \
        {k: v for k, v in before.items() if not k.endswith("store.db")}
    assert not [f for f in tree(path) if f.endswith(".tmp")]  # no half-written file left behind
    assert run("add", add, "--index", path, "-q").exit_code == 0  # and the next edit works


def test_index_directories_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        e = build_index(write_corpus(tmp_path, ROWS), tmp_path / "ix")
        assert os.stat(e.path).st_mode & 0o777 == 0o755 and os.stat(version(e.path)).st_mode & 0o777 == 0o755
        e.add([FAQ("new", "n", ["fresh wording"])])
        assert os.stat(version(e.path)).st_mode & 0o777 == 0o755
        e.close()
    finally:
        os.umask(old)


def test_a_team_umask_gives_the_group_every_file_sqlite_ones_too(tmp_path):
    """Found by a hostile run of a team's setup: with umask 002, store.db and queries.db were 0644 (SQLite
    creates its files so whatever the umask), so another user of the group could not edit or log, and a
    chmod did not survive the next version; the model cache's entries were 0700 (mkdtemp)."""
    import stat
    import tempfile

    from faqsearch.files import as_umask_gives

    old = os.umask(0o002)
    try:
        e = build_index(write_corpus(tmp_path, ROWS), tmp_path / "ix")
        e.ask("question about subject1 variant0", log=True)
        first = version(e.path)
        e.remove(["f2"])  # a new version: its store is a new file
        e.close()
        files = [first / "store.db", version(e.path) / "store.db", tmp_path / "ix" / "queries.db"]
        assert [stat.S_IMODE(os.stat(f).st_mode) for f in files] == [0o664] * 3
        assert stat.S_IMODE(os.stat(as_umask_gives(tempfile.mkdtemp(dir=tmp_path))).st_mode) == 0o775
    finally:
        os.umask(old)


@pytest.mark.parametrize("layout", ["link", "plain"])
def test_the_first_write_moves_an_older_layouts_query_log_inside(tmp_path, layout):
    """An index of an older layout kept its query log beside it (NAME.queries.db); the first write moved
    the index into its directory but left the log out, so `cp -a NAME/` lost it and `log` on the copy
    said there was none. It moves in with the first write where no process has it open."""
    from faqsearch.index.format import QUERY_LOG
    from faqsearch.querylog import QueryLog, log_path

    ix = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, faq_rows(6, 2)), ix).close()
    make_legacy(ix, layout)
    legacy = str(tmp_path / f"ix.{QUERY_LOG}")
    with FAQSearch.open(ix, encoder=FakeEncoder()) as engine:
        engine.ask("question about subject1 variant0", log=True)
    assert os.path.exists(legacy) and log_path(ix) == legacy
    from faqsearch.index.versions import list_versions

    before = list_versions(ix)  # (it listed none: `versions` printed nothing)
    assert [(v.live, v.faqs) for v in before] == [(True, 6)]
    with FAQSearch.open(ix, encoder=FakeEncoder()) as engine:
        engine.add([FAQ("new", "a new answer", ["a brand new question"])])
    assert not os.path.exists(legacy) and log_path(ix) == os.path.join(ix, QUERY_LOG)
    assert before[0].version in [v.version for v in list_versions(ix)]  # the name the move gave it
    log = QueryLog.for_index(ix)
    try:
        assert [q["query"] for q in log.recent(10)] == ["question about subject1 variant0"]
    finally:
        log.close()
