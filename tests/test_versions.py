"""Versions an index keeps and `faqsearch restore`. Fake encoder."""
import json
import os

import pytest

from faqsearch import FAQSearch
from faqsearch.defaults import KEEP_VERSIONS
from faqsearch.errors import VersionNotFoundError
from faqsearch.tuning import Setting
from faqsearch.index.versions import list_versions, previous, restore

from .conftest import FakeEncoder, build_index, index_files, version, write_corpus

ROWS = [(f"f{i}", f"question about subject{i} variant{j}", f"answer {i}", f"cat{i % 3}", f'"{{""k"": {i}}}"')
        for i in range(12) for j in range(3)]


def content(path) -> dict:
    """Every FAQ with its answer, category, metadata and every question's text and source."""
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        return {f["id"]: e.show(f["id"]) for f in e.list()}


def edited_in_place(tmp_path, path):
    """add, one FAQ's update and feedback: each committed inside the live version (no new version directory)."""
    live = version(path)
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        e.add(write_corpus(tmp_path, [("new1", "a brand new question", "new answer", "catx", '"{""n"": 1}"')], "add.csv"))
        assert e.update_faq("f3", answer="a changed answer").previous_version is None
        e.feedback("some customer query about subject5", "f5")
    assert version(path) == live and json.loads((live / "config.json").read_text())["delta"]


def test_an_update_that_overwrote_answers_is_undone_by_restore(tmp_path):
    """An upsert of a bad export (every answer cut short) changed answers in place, with nothing to restore:
    an edit that rewrites what two or more FAQs say keeps the version before it."""
    path = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, ROWS), path, threshold=-1).close()
    before = content(path)
    cut = [(i, q, a[:3], c, m) for i, q, a, c, m in ROWS]
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        report = e.upsert(write_corpus(tmp_path, cut, "cut.csv"))
    assert len(report.updated_faqs) == 12 and report.previous_version is not None
    assert content(path)["f3"]["answer"] == "ans"
    assert report.removed_questions == 0  # kept for the rewrite alone
    restore(path, report.previous_version)
    assert content(path) == before
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:  # a question added: no version kept (a remove's undo stays)
        assert e.update_faq("f4", questions=["one more wording"]).previous_version is None


@pytest.mark.parametrize("in_place_first", [False, True])
def test_replace_then_restore_brings_back_every_faq(tmp_path, in_place_first):
    path = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, ROWS), path, threshold=-1).close()
    if in_place_first:
        edited_in_place(tmp_path, path)
    before, before_version = content(path), version(path).name
    assert len(before) == 12 + in_place_first and before["f0"]["metadata"] == {"metadata": "{\"k\": 0}"}
    build_index(write_corpus(tmp_path, ROWS[:3], "one.csv"), path, replace=True).close()
    assert list(content(path)) == ["f0"] and previous(path) == before_version
    live = restore(path, before_version)
    assert content(path) == before and live != before_version and version(path).name == live
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:  # it answers, and takes edits, as before
        assert e.ask("question about subject7 variant1").answers[0].faq_id == "f7"
        e.add(write_corpus(tmp_path, [("later", "a later question", "later answer", "c", "{}")], "later.csv"))
        assert e.ask("a later question").answers[0].faq_id == "later"
    made = {v.version: (v.made_by, v.edited_by) for v in list_versions(path)}
    assert made[live] == (f"restore {before_version}", "add")  # the add committed in place


def test_restore_is_itself_a_version_that_can_be_undone(tmp_path):
    path = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, ROWS), path, threshold=-1).close()
    first = version(path).name
    build_index(write_corpus(tmp_path, ROWS[:3], "one.csv"), path, replace=True).close()
    second = version(path).name
    third = restore(path, first)
    rows = {v.version: v for v in list_versions(path)}
    assert [rows[v].made_by for v in (first, second, third)] == ["ingest", "ingest --replace", f"restore {first}"]
    assert (rows[third].faqs, rows[third].questions, rows[third].live) == (12, 36, True)
    assert (rows[second].faqs, rows[second].questions, rows[second].live) == (1, 3, False)
    restore(path, second)
    assert list(content(path)) == ["f0"]


def test_a_kept_version_never_changes_with_later_edits_in_place(tmp_path):
    """refit shares the store with the version before it; the edits in place after it write into the
    store: never into the kept version's (nor into files the two share)."""
    path = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, ROWS), path, threshold=-1).close()
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        e.refit(Setting(True, 0.5, 0.5, None))
        kept = previous(path)
        snapshot, faqs = index_files(os.path.join(path, kept)), content(path)
        edited_in_place(tmp_path, path)
        e.remove(["f1"])
        e.set_min_confidence(0.3)
    assert index_files(os.path.join(path, kept)) == snapshot
    restore(path, kept)
    assert content(path) == faqs


def test_pruning_keeps_the_bound_and_never_the_live_one(tmp_path):
    path = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, ROWS), path, threshold=-1).close()
    names = [version(path).name]
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        for i in range(KEEP_VERSIONS + 3):
            e.remove([f"f{i}"])  # a drop: a new version each time
            names.append(version(path).name)
    kept = [v.version for v in list_versions(path)]
    assert kept == names[-(KEEP_VERSIONS + 1):] and [v.live for v in list_versions(path)][-1]
    assert sorted(e for e in os.listdir(path) if e.startswith("v")) == kept


def test_the_undo_of_a_remove_outlives_a_run_of_feedback_and_unassigns(tmp_path, run):
    """Each unassign (and feedback that moves a question) commits a new version: five of them pushed
    out the only version that held a removed FAQ, and the undo `remove` printed failed (found by a
    hostile probe). The last version before each of the latest removes, updates, ingests... is kept
    too; a restore names the edits it leaves behind and the version that brings them back."""
    path = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, ROWS), path, threshold=-1).close()
    undo = version(path).name
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        e.remove(["f0"])
        for i in range(KEEP_VERSIONS + 2):
            e.feedback(f"wrong guess number {i}", "f4")
            e.unassign(f"wrong guess number {i}", "f4")  # a new version each time
    kept = [v.version for v in list_versions(path)]
    assert undo in kept and len(kept) == KEEP_VERSIONS + 2  # the newest 5, the live one and the undo point
    live = version(path).name
    out = run("restore", undo, "--index", path)
    assert out.exit_code == 0 and "f0" in content(path), out.output
    assert f"It leaves behind every edit after {undo}" in out.output and "made by unassign, feedback" in out.output
    assert f"`faqsearch restore {live} --index {path}` brings them back" in out.output  # pasted, it undoes here
    now = version(path).name
    js = json.loads(run("restore", live, "--index", path, "--json").output)  # and back again
    assert js["left_behind"] == {"versions": [now], "made_by": [f"restore {undo}"], "undo": now}
    assert "f0" not in content(path)


def test_an_unknown_version_is_refused_with_the_known_ones(tmp_path):
    path = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, ROWS), path, threshold=-1).close()
    with pytest.raises(VersionNotFoundError, match=f"keeps {version(path).name}"):
        restore(path, "v00000099")


def test_cli_versions_restore_and_the_undo_line(tmp_path, run):
    path = str(tmp_path / "ix")
    first = run("ingest", write_corpus(tmp_path, ROWS), "--index", path)
    assert first.exit_code == 0 and "Undo with" not in first.output
    old = version(path).name
    out = run("ingest", write_corpus(tmp_path, ROWS[:3], "one.csv"), "--index", path, "--replace")
    assert out.exit_code == 0 and f"Undo with: faqsearch restore {old} --index {path}" in out.output
    before = version(path).name
    js = json.loads(run("ingest", write_corpus(tmp_path, ROWS[:6], "two.csv"), "--index", path, "--replace",
                        "--json").output)
    assert js["previous_version"] == before and version(path).name != before
    before = version(path).name
    removed = run("remove", "f0", "--index", path, "--json")
    assert removed.exit_code == 0 and json.loads(removed.output)["previous_version"] == before
    update = write_corpus(tmp_path, [("f1", "only this question now", "answer 1", "cat1", "{}")], "upd.csv")
    before = version(path).name
    replaced = run("update", update, "--index", path, "--replace")
    assert f"Undo with: faqsearch restore {before} --index {path}" in replaced.output
    rows = json.loads(run("versions", "--index", path, "--json").output)["versions"]
    assert [r["made_by"] for r in rows] == ["ingest", "ingest --replace", "ingest --replace", "remove", "update"]
    assert [r["live"] for r in rows] == [False] * 4 + [True] and rows[0]["faqs"] == 12
    text = run("versions", "--index", path).output
    assert old in text and "(live)" in text
    out = run("restore", old, "--index", path)
    assert out.exit_code == 0 and f"Restored {old}" in out.output and len(content(path)) == 12
    bad = run("restore", "v12345678", "--index", path)
    assert bad.exit_code != 0 and "keeps v" in bad.output and "Traceback" not in bad.output
    # restoring the live version changes nothing: it added a version and pushed the oldest kept one out
    live, kept = version(path).name, [r["version"] for r in json.loads(run("versions", "--index", path, "--json").output)["versions"]]
    again = run("restore", live, "--index", path)
    assert again.exit_code == 0 and f"{live} is the live version already; nothing changed" in again.output
    assert version(path).name == live
    assert [r["version"] for r in json.loads(run("versions", "--index", path, "--json").output)["versions"]] == kept
    # an edit made inside the live version is said beside what made it (its counts include it)
    assert run("add", write_corpus(tmp_path, [("new-1", "a new question", "a new answer", "", "{}")], "new.csv"),
               "--index", path).exit_code == 0
    run("feedback", "another wording of it", "new-1", "--index", path)
    text = run("versions", "--index", path).output
    assert ", then add, feedback" in text and "its counts include them" in text  # every kind, not the last only


def test_restore_where_there_is_no_index_says_so_and_makes_nothing(tmp_path):
    from faqsearch.errors import IndexNotFoundError

    with pytest.raises(IndexNotFoundError, match="no index at"):
        restore(tmp_path / "nosuch", "v00000001")
    assert not (tmp_path / "nosuch").exists()
    with build_index(write_corpus(tmp_path, [("1", "a question", "an answer")]), tmp_path / "ix"):
        pass
    with pytest.raises(VersionNotFoundError, match=f"keeps v00000001 \\(`faqsearch versions --index {tmp_path / 'ix'}`; over HTTP, GET .../versions\\)"):
        restore(tmp_path / "ix", "v00000099")


def test_a_restore_names_every_kind_of_edit_made_inside_the_versions_it_leaves_behind(tmp_path):
    """Found by a hostile run: remove, then feedback, approve and add inside the new version, and a restore
    of the version before said it left behind edits "made by remove, add": the feedback and the approval it
    dropped were not named (a version recorded the last edit made inside it only)."""
    from faqsearch import FAQ
    from faqsearch.index.versions import left_behind

    path = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, ROWS), path, threshold=-1).close()
    undo = version(path).name
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        e.remove(["f0"])
        e.feedback("customer said this", "f1")
        e.approve("f2", ["approved by staff"])
        e.add([FAQ("new", "a", ["a brand new question"])])
        e.feedback("another thing a customer said", "f3")
    (live,) = [v for v in list_versions(path) if v.live]
    assert live.edits == ["feedback", "approve", "add"] and live.edited_by == "feedback"
    assert left_behind(path, undo)["made_by"] == ["remove", "feedback", "approve", "add"]


def test_the_printed_undo_can_be_pasted_as_it_is(tmp_path, run, monkeypatch):
    """An index named with a space printed `--index my idx` (two arguments when pasted)."""
    monkeypatch.setenv("FAQSEARCH_HOME", str(tmp_path / "home"))
    assert run("ingest", write_corpus(tmp_path, ROWS), "--index", "my idx", "-q").exit_code == 0
    out = run("remove", "f1", "--index", "my idx").output
    assert "Undo with: faqsearch restore v00000001 --index 'my idx'" in out


def test_delete_kept_erases_a_users_phrasing_from_every_file_of_the_index(tmp_path, run):
    """A person asks that what they typed be erased: unassign leaves no trace of it in the live version, but
    the versions kept for restore hold it until newer ones replace them. `versions --delete-kept` deletes
    those (asking first unless --yes); the index answers on, and restore names only the live version."""
    path = str(tmp_path / "ix")
    assert run("ingest", write_corpus(tmp_path, ROWS), "--index", path).exit_code == 0
    secret = "qzxwv jane.doe@example.com lost her card"
    assert run("feedback", secret, "f3", "--index", path).exit_code == 0
    assert run("unassign", secret, "f3", "--index", path).exit_code == 0
    files = index_files(path)
    assert not any(b"jane.doe" in data for name, data in files.items() if name.startswith(version(path).name))
    assert any(b"jane.doe" in data for data in files.values())  # a kept version holds it
    refused = run("versions", "--index", path, "--delete-kept", input="n\n")
    assert refused.exit_code != 0 and "Delete 1 kept version of" in refused.output
    out = json.loads(run("versions", "--index", path, "--delete-kept", "--yes", "--json").output)
    assert len(out["deleted"]) == 1 and not any(b"jane.doe" in data for data in index_files(path).values())
    rows = json.loads(run("versions", "--index", path, "--json").output)["versions"]
    assert [r["live"] for r in rows] == [True] and run("ask", "question about topic3", "--index", path).exit_code == 0
    assert "Deleted 0 kept versions." in run("versions", "--index", path, "--delete-kept", "--yes").output
    assert run("versions", "--index", path, "--yes").exit_code == 2  # --yes goes with --delete-kept
