"""Issue "Reliability" (#24): never delete what is not ours, never commit a state no one can open,
never answer from rows that are gone. One test per reported item, each failing before its fix."""
import os

import pytest

from faqsearch import FAQSearch
from faqsearch.errors import IndexPathError

from .conftest import FakeEncoder

ROWS = [(f"f{i}", f"question about subject{i} variant{j}", f"answer {i}") for i in range(6) for j in range(2)]


def write_corpus(tmp_path, rows=ROWS, name="c.csv"):
    p = tmp_path / name
    p.write_text("id,question,answer\n" + "".join(f"{i},{q},{a}\n" for i, q, a in rows), encoding="utf-8")
    return str(p)


def tree(path):
    """Every file below ``path`` with its bytes (what must survive a refused ingest)."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                out[os.path.relpath(os.path.join(root, f), path)] = fh.read()
    return out


# 1 ---------------------------------------------------------------------------------------------
def test_1_ingest_refuses_a_directory_of_user_files(tmp_path):
    docs = tmp_path / "mydocs"
    (docs / "sub").mkdir(parents=True)
    (docs / "thesis.txt").write_text("thesis")
    (docs / "sub" / "notes.md").write_text("notes")
    before = tree(docs)
    enc = FakeEncoder()
    with pytest.raises(IndexPathError, match="not a faqsearch index.*thesis.txt"):
        FAQSearch.build(write_corpus(tmp_path), str(docs), encoder=enc)
    assert enc.calls == 0 and tree(docs) == before and not os.path.islink(docs)


def test_1_ingest_refuses_the_current_directory(tmp_path, run, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text("print('hi')")
    corpus = write_corpus(project)
    monkeypatch.chdir(project)
    before = tree(project)
    result = run("ingest", corpus, "--index", ".")
    assert result.exit_code == 1 and "not a faqsearch index" in result.output
    assert tree(project) == before and sorted(os.listdir(tmp_path)) == ["project"]


def test_1_ingest_refuses_a_link_to_elsewhere_and_a_file(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    indexes = tmp_path / "indexes"
    indexes.mkdir()
    os.symlink(outside, indexes / "ix")
    with pytest.raises(IndexPathError, match="symbolic link"):
        FAQSearch.build(write_corpus(tmp_path), str(indexes / "ix"), encoder=FakeEncoder())
    assert tree(outside) == {"keep.txt": b"keep"} and os.path.islink(indexes / "ix")
    (indexes / "plain").write_text("a file")
    with pytest.raises(IndexPathError, match="is a file"):
        FAQSearch.build(write_corpus(tmp_path), str(indexes / "plain"), encoder=FakeEncoder())
    assert (indexes / "plain").read_text() == "a file"
    assert sorted(os.listdir(indexes)) == ["ix", "plain"]  # nothing renamed aside, no lock left behind


def test_1_empty_directories_and_our_own_indexes_are_replaced(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    FAQSearch.build(write_corpus(tmp_path), str(empty), encoder=FakeEncoder()).close()
    with FAQSearch.build(write_corpus(tmp_path), str(empty), encoder=FakeEncoder(), force=True) as e:
        assert e.ask("question about subject3 variant1", mode="dense").answers[0].faq_id == "f3"
