"""Where an index may be written: never over a folder of the user's files, the current directory, a
link to elsewhere or a file; an empty folder or an index of ours is replaced."""
import os

import pytest

from faqsearch import FAQSearch
from faqsearch.errors import IndexPathError

from .conftest import FakeEncoder, build_index, faq_rows, tree, write_corpus

ROWS = faq_rows(15, 3)
FEW = faq_rows(6, 2)


def test_ingest_refuses_a_directory_of_user_files(tmp_path):
    docs = tmp_path / "mydocs"
    (docs / "sub").mkdir(parents=True)
    (docs / "thesis.txt").write_text("thesis")
    (docs / "sub" / "notes.md").write_text("notes")
    before = tree(docs)
    enc = FakeEncoder()
    with pytest.raises(IndexPathError, match="not a faqsearch index.*thesis.txt"):
        FAQSearch.build(write_corpus(tmp_path, FEW), str(docs), encoder=enc)
    assert enc.calls == 0 and tree(docs) == before and not os.path.islink(docs)


def test_ingest_refuses_the_current_directory(tmp_path, run, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text("print('hi')")
    corpus = write_corpus(project, FEW)
    monkeypatch.chdir(project)
    before = tree(project)
    result = run("ingest", corpus, "--index", ".")
    assert result.exit_code == 1 and "not a faqsearch index" in result.output
    assert tree(project) == before and sorted(os.listdir(tmp_path)) == ["project"]


def test_ingest_refuses_a_link_to_elsewhere_and_a_file(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    indexes = tmp_path / "indexes"
    indexes.mkdir()
    os.symlink(outside, indexes / "ix")
    with pytest.raises(IndexPathError, match="symbolic link"):
        build_index(write_corpus(tmp_path, FEW), str(indexes / "ix"))
    assert tree(outside) == {"keep.txt": b"keep"} and os.path.islink(indexes / "ix")
    (indexes / "plain").write_text("a file")
    with pytest.raises(IndexPathError, match="is a file"):
        build_index(write_corpus(tmp_path, FEW), str(indexes / "plain"))
    assert (indexes / "plain").read_text() == "a file"
    assert sorted(os.listdir(indexes)) == ["ix", "plain"]  # nothing renamed aside, no lock left behind


def test_empty_directories_and_our_own_indexes_are_replaced(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    build_index(write_corpus(tmp_path, FEW), empty).close()
    with build_index(write_corpus(tmp_path, FEW), empty, force=True) as e:
        assert e.ask("question about subject3 variant1", mode="dense").answers[0].faq_id == "f3"


@pytest.mark.parametrize("config", ['{"app": "mine", "debug": true}\n', "port: 8080\n"])
@pytest.mark.parametrize("command", ["drop", "ingest", "rename"])
def test_a_user_folder_with_a_config_json_is_refused_before_anything_is_touched(tmp_path, run, config, command):
    """`drop` or `ingest` on a folder holding a config.json and a store.db that faqsearch did not write
    moved them into v00000000/ and created CURRENT and LOCK before refusing: the folder, and the one
    around it, are now left byte for byte as they were."""
    import sqlite3

    folder = tmp_path / "home" / "app"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(config)
    conn = sqlite3.connect(folder / "store.db")
    conn.execute("create table t(x)")
    conn.commit()
    conn.close()

    def state():
        return {str(p.relative_to(tmp_path / "home")): p.read_bytes() if p.is_file() else None
                for p in (tmp_path / "home").rglob("*")}

    before = state()
    args = {"drop": ["drop", str(folder), "--yes"], "rename": ["rename", "--index", str(folder), str(tmp_path / "home" / "b")],
            "ingest": ["ingest", write_corpus(tmp_path, ROWS), "--index", str(folder), "-q", "--force"]}[command]
    result = run(*args)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "that faqsearch did not write" in result.output and "move that away yourself" in result.output
    assert state() == before


def test_files_of_a_person_beside_an_index_neither_stop_it_nor_are_touched(tmp_path, run):
    """Found by a hostile run of a team's operations: a note, a rotated log, an rsync temporary or the
    lost+found of a volume mounted there made every command call the index "not a faqsearch index" (and
    serve refuse to start); a link a person made to an index was refused the same way; a LevelDB
    folder has a CURRENT too and must stay foreign."""
    from faqsearch.manage import drop_index

    ix = tmp_path / "ix"
    build_index(write_corpus(tmp_path, ROWS), str(ix)).close()
    (ix / "notes.txt").write_text("who owns this")
    (ix / "queries.db.1").write_bytes(b"rotated")
    (ix / "lost+found").mkdir()
    with FAQSearch.open(str(ix), encoder=FakeEncoder()) as e:
        assert e.ask("question about subject3 variant1", mode="dense").answers[0].faq_id == "f3"
        e.add(write_corpus(tmp_path, [("new", "a brand new question", "new answer")], "add.csv"))
        e.remove(["f4"])  # a new version; the old ones cleaned up as usual
    assert (ix / "notes.txt").read_text() == "who owns this" and (ix / "queries.db.1").read_bytes() == b"rotated"
    link = tmp_path / "link"
    os.symlink(ix, link)
    with FAQSearch.open(str(link), encoder=FakeEncoder()) as e:
        assert e.ask("a brand new question", mode="dense").answers[0].faq_id == "new"
    (ix / "lost+found" / "#1234").write_text("a file fsck recovered")
    with pytest.raises(IndexPathError, match=r"also holds files faqsearch did not write \(notes.txt, queries.db.1, lost\+found\)"):
        drop_index(str(ix))
    os.remove(ix / "lost+found" / "#1234")
    from faqsearch.manage import rename_index
    from faqsearch.querylog import log_path

    assert log_path(str(link)) == os.path.join(str(link), "queries.db")  # the index's own log, not one beside the link
    with pytest.raises(IndexPathError, match="is a symbolic link"):
        rename_index(str(link), str(tmp_path / "elsewhere" / "link2"))
    drop_index(str(link))  # the link goes; the index it names stays (its Milvus collections too)
    assert not os.path.lexists(link) and (ix / "CURRENT").exists()
    leveldb = tmp_path / "leveldb"
    leveldb.mkdir()
    (leveldb / "CURRENT").write_text("MANIFEST-000001\n")
    (leveldb / "MANIFEST-000001").write_bytes(b"\x00")
    with pytest.raises(IndexPathError, match="not a faqsearch index"):
        build_index(write_corpus(tmp_path, FEW), str(leveldb))
    assert (leveldb / "CURRENT").read_text() == "MANIFEST-000001\n"
    releases = tmp_path / "releases"  # a deploy's folder: its CURRENT names a "version" that is no index of ours
    for v in ("v20231201", "v20240101", "v20240215"):
        (releases / v).mkdir(parents=True)
        (releases / v / "app.js").write_text(v)
        (releases / v / "config.json").write_text('{"port": 8080}')  # an app's own config: no index of ours
    (releases / "CURRENT").write_text("v20240101\n")
    (releases / "README.md").write_text("releases")
    before = tree(releases)
    for force in (False, True):
        with pytest.raises(IndexPathError, match="not a faqsearch index"):
            FAQSearch.build(write_corpus(tmp_path, FEW), str(releases), encoder=FakeEncoder(), force=force)
    assert tree(releases) == before  # (a second reading found v20240215 deleted, and a LOCK left)
    os.remove(releases / "README.md")  # only names of ours: still not an index, and no LOCK made in it
    before = tree(releases)
    with pytest.raises(IndexPathError, match="has a CURRENT naming a folder without faqsearch's config.json"):
        FAQSearch.build(write_corpus(tmp_path, FEW), str(releases), encoder=FakeEncoder(), force=True)
    assert tree(releases) == before
    live = os.path.join(str(ix), (ix / "CURRENT").read_text().strip())
    with open(os.path.join(live, "config.json"), "r+b") as fh:  # a damaged config: "damaged", not "not an index"
        good = fh.read()
        fh.seek(0)
        fh.truncate(10)
    with pytest.raises(Exception, match="config.json") as err:
        FAQSearch.open(str(ix), encoder=FakeEncoder())
    assert "not a faqsearch index" not in str(err.value)
    with open(os.path.join(live, "config.json"), "wb") as fh:
        fh.write(good)
    (ix / "CURRENT").write_bytes(b"v\xff\n")
    for f in ("notes.txt", "queries.db.1"):
        os.remove(ix / f)
    r = run("ask", "hello", "--index", str(ix))
    assert r.exit_code == 1 and "CURRENT is damaged" in r.output and "Delete it (the index then answers from its newest" \
        in r.output
    os.remove(ix / "CURRENT")
    with FAQSearch.open(str(ix), encoder=FakeEncoder()) as e:  # as the message says
        assert e.ask("a brand new question", mode="dense").answers[0].faq_id == "new"


def test_a_tilde_is_the_users_home_and_hints_quote_names(tmp_path, monkeypatch):
    """`--index '~/y'` and FAQSEARCH_HOME='~/indexes' (systemd's Environment= and docker -e do not expand
    it) made a folder named ~ in the working directory; a hint for "my faq" read as two arguments."""
    from faqsearch.errors import IndexNotFoundError
    from faqsearch.index.config import resolve_index_path

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FAQSEARCH_HOME", "~/indexes")
    monkeypatch.chdir(tmp_path)
    assert resolve_index_path("~/y") == str(tmp_path / "home" / "y")
    assert resolve_index_path("shop") == str(tmp_path / "home" / "indexes" / "shop")
    with pytest.raises(IndexNotFoundError, match="--index 'my faq'$"):
        FAQSearch.open("my faq")
    assert not os.path.exists(tmp_path / "~")
