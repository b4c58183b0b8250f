"""The index directory (faqsearch/index/directory.py): one real directory that copies as a whole,
versions named by generation, one writer, and readers that always hold one whole version."""
from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import threading
import time

import pytest

from faqsearch import FAQ, FAQSearch
from faqsearch.index.directory import layout

from .conftest import FakeEncoder, build_index, faq_rows, index_files, version, write_corpus

ROWS = faq_rows(12, 2)


@pytest.fixture
def built(tmp_path):
    path = str(tmp_path / "ix")
    e = build_index(write_corpus(tmp_path, ROWS), path, threshold=-1, self_fusion=False)
    e.add([FAQ("d1", "in the delta", ["a question only the delta holds"])])  # a live delta
    e.close()
    return path


def _check_independent(original: str, copy: str) -> None:
    before = index_files(original)
    with FAQSearch.open(copy, encoder=FakeEncoder()) as c:
        assert c.ask("a question only the delta holds", mode="dense").answers[0].faq_id == "d1"
        c.add([FAQ("copy-only", "only in the copy", ["words that only the copy knows"])])
        c.update([FAQ("f1", "changed in the copy", ["question about subject1 variant0"])])
        c.remove(["f2"])
        assert c.ask("words that only the copy knows", mode="dense").answers[0].faq_id == "copy-only"
    assert index_files(original) == before  # not one byte of the original changed
    with FAQSearch.open(original, encoder=FakeEncoder()) as o:
        assert "copy-only" not in {f["id"] for f in o.list()} and o.show("f1")["answer"] == "answer 1"
        assert o.show("f2")["id"] == "f2"


def test_cp_a_gives_an_independent_working_index(built, tmp_path):
    copy = str(tmp_path / "backup")
    subprocess.run(["cp", "-a", built, copy], check=True)
    assert not os.path.islink(copy) and layout(copy) == "current"
    _check_independent(built, copy)


def test_cp_r_and_tar_give_independent_working_indexes(built, tmp_path):
    subprocess.run(["cp", "-r", built, str(tmp_path / "copied")], check=True)
    _check_independent(built, str(tmp_path / "copied"))
    with tarfile.open(tmp_path / "ix.tar", "w") as tar:
        tar.add(built, arcname="ix")
    os.mkdir(tmp_path / "restored")
    with tarfile.open(tmp_path / "ix.tar") as tar:
        tar.extractall(tmp_path / "restored", filter="tar")
    _check_independent(built, str(tmp_path / "restored" / "ix"))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed")
def test_rsync_a_gives_an_independent_working_index(built, tmp_path):
    subprocess.run(["rsync", "-a", built + "/", str(tmp_path / "synced")], check=True)
    _check_independent(built, str(tmp_path / "synced"))


@pytest.mark.slow
def test_versions_are_named_by_generation_and_nothing_lives_beside_the_index(built, tmp_path):
    with FAQSearch.open(built, encoder=FakeEncoder()) as e:
        g = e.config["generation"]
        assert version(built).name == "v00000001" and g == 2  # the build, then one edit in place
        e.refit()  # a new base: a new version directory named by its generation
        assert version(built).name == f"v{g + 1:08d}" and e.config["generation"] == g + 1
    assert sorted(os.listdir(built)) == ["CURRENT", "LOCK", "v00000001", f"v{g + 1:08d}"]  # the previous one kept
    assert sorted(os.listdir(tmp_path)) == ["c.csv", "ix"]


@pytest.mark.slow
def test_readers_hold_one_whole_version_while_reloads_swap_them(tmp_path):
    """Asks on several threads while another process's edits commit and reloads swap snapshots:
    every answer comes from one version (its answers and its vectors agree)."""
    rows = [(f"f{i}", f"question about subject{i}", "version 0") for i in range(10)]
    path = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, rows), path, threshold=-1, self_fusion=False).close()
    reader = FAQSearch.open(path, encoder=FakeEncoder())
    reader.auto_reload = False
    writer = FAQSearch.open(path, encoder=FakeEncoder())
    stop = threading.Event()
    problems: list[str] = []
    seen: set[str] = set()

    def write():
        for n in range(1, 9):
            # every FAQ gets the answer "version n" and a question of that version, in one commit
            writer.update([FAQ(f"f{i}", f"version {n}", [f"question about subject{i}", f"marker {n} for {i}"])
                           for i in range(10)], replace=True)
        written.set()

    def reload():
        while not stop.is_set():
            reader.reload()

    def ask():
        while not stop.is_set():
            r = reader.ask("question about subject", k=10, mode="dense")
            labels = {a.answer for a in r.answers}
            seen.update(labels)
            if len(r.answers) != 10 or len(labels) != 1:
                problems.append(f"{len(r.answers)} answers from {sorted(labels)}")

    def reporting(f):  # an exception in any thread is a problem of the test, and the writer's end stops all
        def run():
            try:
                f()
            except Exception as exc:
                problems.append(f"{f.__name__}: {exc!r}")
            finally:
                if f is write:
                    stop.set()
        return run

    written = threading.Event()
    threads = [threading.Thread(target=reporting(f)) for f in (write, reload, ask, ask, ask)]
    deadline = time.monotonic() + 120
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(1.0, deadline - time.monotonic()))
    stop.set()
    reader.close()
    writer.close()
    assert not problems, problems[:5]
    assert written.is_set()  # all 8 commits went in
    assert len(seen) > 2  # the readers did see several versions go by


@pytest.mark.slow
def test_an_index_whose_current_file_was_deleted_answers_from_its_newest_version_and_loses_nothing(
        built, tmp_path, run, caplog):
    """#40 N11: with CURRENT deleted, errors advised `faqsearch ingest`, which (without --force) exited 0
    and deleted the committed version holding the FAQs an earlier `add` put there. Every `vG` directory
    is a whole committed version (CURRENT only names the live one), so readers and writers take the
    newest one; the writer writes CURRENT again, and a rebuild that would drop FAQs refuses as usual."""
    path = built
    run("add", write_corpus(tmp_path, [("added", "a question only add put here", "added answer")], "add.csv"),
        "--index", path, "-q")
    counts = FAQSearch.open(path, encoder=FakeEncoder()).info()["counts"]
    assert counts["faqs"] == 14  # 12, the fixture's add and this one
    os.remove(os.path.join(path, "CURRENT"))
    out = run("ask", "a question only add put here", "--index", path, "--json")
    assert out.exit_code == 0 and '"faq_id": "added"' in out.stdout, out.output
    said = [r for r in caplog.records if "has no CURRENT; answering from its newest version" in r.getMessage()]
    assert len(said) == 1  # once, not at each look (open, stamp, reload check)
    out = run("ingest", write_corpus(tmp_path, ROWS), "--index", path)  # the corpus lacks the added FAQ
    assert out.exit_code == 1 and "would drop 2 FAQs" in out.output, out.output
    assert FAQSearch.open(path, encoder=FakeEncoder()).info()["counts"] == counts
    out = run("add", write_corpus(tmp_path, [("more", "one more question", "more answer")], "more.csv"),
              "--index", path, "-q")
    assert out.exit_code == 0 and os.path.exists(os.path.join(path, "CURRENT"))  # written again by the writer
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        assert e.info()["counts"]["faqs"] == 15 and e.show("added")["answer"] == "added answer"
