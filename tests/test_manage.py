"""Managing indexes: listing, renaming and dropping them; unassigning feedback; replace means
replace."""
from __future__ import annotations

import json
import os

import pytest


@pytest.mark.slow
def test_indexes_rename_and_drop(tmp_path, run, small_corpus):
    home = tmp_path / "home"
    for name in ("support", "sales"):
        assert run("ingest", small_corpus, "--index", home / name, "-q").exit_code == 0
    (home / "notes").mkdir()  # not an index: never listed, never dropped
    (home / "notes" / "thesis.txt").write_text("mine", encoding="utf-8")
    listed = json.loads(run("indexes", "--home", home, "--json").stdout)["indexes"]
    assert sorted(i["name"] for i in listed) == ["sales", "support"]
    assert all(i["faqs"] == 4 and i["questions"] == 6 for i in listed)
    text = run("indexes", "--home", home).stdout
    assert "support" in text and "notes" not in text
    # a file hard-linked into several versions is counted once, as du counts it (it was once per version)
    from faqsearch.manage import describe

    assert run("remove", "2", "--index", home / "support", "-q").exit_code == 0
    assert run("restore", "v00000001", "--index", home / "support").exit_code == 0  # links v1's files into v3
    stats = [os.lstat(os.path.join(r, f)) for r, _, fs in os.walk(home / "support") for f in fs]
    unique = {(st.st_dev, st.st_ino): st.st_size for st in stats}
    assert sum(st.st_size for st in stats) > sum(unique.values()) == describe(str(home / "support"))["bytes"]
    for blank in ("", "  ", ".."):  # "  " was taken: an index no command reached by its name
        bad = run("rename", blank, "--index", home / "support")
        assert bad.exit_code != 0 and "is no index name" in bad.output, (blank, bad.output)
    assert run("rename", "help", "--index", home / "support").exit_code == 0
    assert sorted(os.listdir(home)) == ["help", "notes", "sales"]
    assert json.loads(run("ask", "reset my password", "--index", home / "help", "--json").stdout)["answers"]
    res = run("drop", home / "sales", input="n\n")  # asks first; no means nothing happens
    assert res.exit_code != 0 and (home / "sales").is_dir()
    assert run("drop", home / "sales", "--yes").exit_code == 0
    assert not (home / "sales").exists()
    res = run("drop", home / "notes", "--yes")  # not ours: refused, kept
    assert res.exit_code != 0 and (home / "notes" / "thesis.txt").read_text(encoding="utf-8") == "mine"


def test_a_blank_query_is_a_usage_error_for_every_command_that_takes_one(tmp_path, run, small_corpus):
    """Found by a hostile run: a blank `ask` exits 2 (usage), a blank `feedback` or `approve` exited 1, and
    a blank `unassign` said "'' was not assigned"; all refuse it as usage now, and nothing is committed."""
    ix = tmp_path / "ix"
    run("ingest", small_corpus, "--index", ix, "-q")
    before = json.loads(run("versions", "--index", ix, "--json").stdout)
    for args in (["ask", "   "], ["feedback", " \u3000 ", "2"], ["approve", "2", "  "], ["unassign", "\t", "2"]):
        res = run(*args, "--index", ix)
        assert res.exit_code == 2 and "blank" in res.output, (args, res.output)
    assert json.loads(run("versions", "--index", ix, "--json").stdout) == before


def test_a_page_of_the_listing_says_how_many_there_are(tmp_path, run, small_corpus):
    """`list --limit` showed a page with no way to know more existed; JSON (and GET .../faqs) has the total,
    the text a line on stderr naming the next --offset."""
    ix = tmp_path / "ix"
    run("ingest", small_corpus, "--index", ix, "-q")
    page = json.loads(run("list", "--index", ix, "--limit", "2", "--json").stdout)
    assert [f["id"] for f in page["faqs"]] == ["1", "2"] and page["total"] == 4
    assert json.loads(run("list", "--index", ix, "--contains", "ship", "--offset", "1", "--json").stdout)["total"] == 2
    res = run("list", "--index", ix, "--limit", "2", "--offset", "1")
    assert "(2-3 of 4; --offset 3 lists the next)" in res.stderr and "of 4" not in res.stdout
    assert "of 4" not in run("list", "--index", ix).output  # everything shown: no pager line
    assert "of 4" not in run("list", "--index", ix, "--offset", "2", "--limit", "2").output  # the last page


@pytest.mark.slow
def test_unassign_undoes_feedback_and_replace_means_replace(tmp_path, run, small_corpus):
    ix = tmp_path / "ix"
    run("ingest", small_corpus, "--index", ix, "-q")
    assert run("feedback", "where are my shoes", "2", "--index", ix).exit_code == 0
    shown = json.loads(run("show", "2", "--index", ix, "--json").stdout)
    assert "where are my shoes" in [q["text"] for q in shown["questions"]]
    assert run("unassign", "where are my shoes", "2", "--index", ix).exit_code == 0
    shown = json.loads(run("show", "2", "--index", ix, "--json").stdout)
    assert "where are my shoes" not in [q["text"] for q in shown["questions"]]
    res = run("unassign", "where are my shoes", "2", "--index", ix)  # nothing to undo: says so
    assert res.exit_code != 0 or "No changes" in res.output
    # a feedback question, then `update --replace` with the corpus's own questions: it goes
    run("feedback", "parcel abroad", "4", "--index", ix)
    corpus = tmp_path / "four.csv"
    corpus.write_text("id,question,answer,category\n4,Do you ship abroad?,We ship to the EU.,shipping\n",
                      encoding="utf-8")
    assert "No changes" in run("update", corpus, "--index", ix).output  # plain update keeps it
    assert run("update", corpus, "--replace", "--index", ix).exit_code == 0
    shown = json.loads(run("show", "4", "--index", ix, "--json").stdout)
    assert [q["text"] for q in shown["questions"]] == ["Do you ship abroad?"]


@pytest.mark.slow
def test_names_paths_and_homes_mean_what_they_say(tmp_path, run, small_corpus, monkeypatch):
    """Found by a hostile run: `drop ""` dropped the default index; a user folder in the current
    directory named like an index hid it (and `ingest --index NAME` built into that folder);
    FAQSEARCH_HOME set but empty meant the current directory; an empty folder was listed as a
    failed ingest; `indexes --home` of a missing folder said 'No indexes here'; `rename a/b` blamed
    the index that exists; a NaN --beta and an empty --variant-sep were tracebacks."""
    home = tmp_path / "home"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAQSEARCH_HOME", str(home))
    assert run("ingest", small_corpus, "-q").exit_code == 0
    assert run("ingest", small_corpus, "--index", "support", "-q").exit_code == 0
    res = run("drop", "", "--yes")
    assert res.exit_code == 1 and "index name is empty" in res.output and (home / "default").is_dir()
    (tmp_path / "support").mkdir()
    (tmp_path / "support" / "notes.txt").write_text("mine", encoding="utf-8")
    (tmp_path / "staging").mkdir()
    assert json.loads(run("ask", "reset my password", "--index", "support", "--json").stdout)["answers"]
    assert run("ingest", small_corpus, "--index", "staging", "-q").exit_code == 0
    assert os.listdir(tmp_path / "staging") == [] and (home / "staging" / "CURRENT").is_file()
    (home / "empty").mkdir()
    listed = json.loads(run("indexes", "--json").stdout)["indexes"]
    assert sorted(i["name"] for i in listed) == ["default", "staging", "support"]
    res = run("indexes", "--home", tmp_path / "missing")
    assert res.exit_code == 1 and "is not a folder" in res.output
    res = run("rename", "archive/old", "--index", "support")
    assert res.exit_code == 1 and "archive does not exist" in res.output and (home / "support").is_dir()
    monkeypatch.setenv("FAQSEARCH_HOME", "")
    (tmp_path / "indexes").mkdir()
    assert run("ingest", small_corpus, "--index", "here", "-q").exit_code == 0
    assert (tmp_path / "indexes" / "here" / "CURRENT").is_file()  # empty = unset: ./indexes
    for args, words in ((("refit", "--beta", "nan", "--index", home / "support"), "not a number between 0 and 1"),
                        (("ingest", small_corpus, "--index", "v", "--variant-sep", ""), "must not be empty")):
        res = run(*args)
        assert res.exit_code == 2 and words in res.output


def test_export_writes_the_faq_back_out_as_a_corpus_that_reads_back_alike(tmp_path, run, caplog):
    """Found by a hostile run of spreadsheet round trips: nothing wrote the FAQ back out (answers edited in
    the page, feedback), and `show --json` lines fed to upsert stored content_hash and revision as metadata."""
    corpus = tmp_path / "faq.jsonl"
    rows = [{"id": "p1", "question": "How do I pay?", "questions": ["Payment methods?"], "answer": "Card,\nor cash.",
             "category": "pay", "metadata": {"priority": 2, "tags": ["a", "b"], "owner": "ann"}},
            {"id": "p2", "question": "=1+1 is my question", "answer": '"Quoted whole"'},
            {"id": "p3", "question": "Where is my parcel?", "answer": "Track it.", "metadata": {"owner": "bob"}}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ix = str(tmp_path / "ix")
    assert run("ingest", str(corpus), "--index", ix, "-q").exit_code == 0
    assert run("update", "p3", "--answer", "Track it under Orders.", "--index", ix).exit_code == 0
    assert run("feedback", "parcel gone missing", "p3", "--index", ix).exit_code == 0
    for fmt in ("jsonl", "csv", "tsv"):
        out = tmp_path / f"export.{fmt}"
        r = run("export", str(out), "--index", ix, "--json")
        if fmt == "tsv":  # an answer with a line break: TSV cannot hold it, and nothing is written
            assert r.exit_code == 1 and "which TSV cannot hold" in r.output and not out.exists()
            continue
        assert r.exit_code == 0 and json.loads(r.stdout) == {"file": str(out), "format": fmt, "faqs": 3, "questions": 4}
        typed = "metadata that is not text" in r.stderr
        assert typed == (fmt != "jsonl") == ("start with = + - or @" in r.stderr)  # a spreadsheet's concerns
        again = run("upsert", str(out), "--index", ix, "--json")
        changed = json.loads(again.stdout)["updated_faqs"]
        assert changed == ([] if fmt == "jsonl" else ["p1"])  # CSV wrote the numbers and lists as text, as it warned
        other = str(tmp_path / f"from-{fmt}")
        assert run("ingest", str(out), "--index", other, "-q").exit_code == 0
        show = json.loads(run("show", "p3", "--index", other, "--json").stdout)
        assert show["answer"] == "Track it under Orders." and show["metadata"] == {"owner": "bob"}
        assert [q["text"] for q in show["questions"]] == ["Where is my parcel?"]  # without --all: the corpus's own
        assert json.loads(run("show", "p2", "--index", other, "--json").stdout)["answer"] == '"Quoted whole"'
    with caplog.at_level("WARNING"):
        everything = run("export", "--index", ix, "--all", "--format", "jsonl").stdout
    assert "parcel gone missing" in everything and len(everything.splitlines()) == 3
    # ingested elsewhere, a user's query becomes a written question, shown to anyone: said (a second reading)
    assert "holds 1 users' queries" in caplog.text and "shown to anyone" in caplog.text
    assert run("export", str(tmp_path / "x.txt"), "--index", ix).exit_code == 2  # which format: said, not guessed
    shared = tmp_path / "shared.csv"  # through a link, into the file it names, keeping that file's mode
    shared.write_text("old")
    os.chmod(shared, 0o600)
    os.symlink(shared, tmp_path / "link.csv")
    assert run("export", str(tmp_path / "link.csv"), "--index", ix).exit_code == 0
    assert os.path.islink(tmp_path / "link.csv") and shared.read_text().startswith("id,question,answer")
    assert os.stat(shared).st_mode & 0o777 == 0o600
    missing = run("export", str(tmp_path / "nope" / "x.csv"), "--index", ix)
    assert missing.exit_code == 1 and "no folder" in missing.output
    import subprocess
    import sys

    appended = tmp_path / "all.jsonl"  # this process's own output: `>>` keeps what was there, a pipe is written into
    appended.write_text("earlier\n")
    done = subprocess.run(["bash", "-c", f"{sys.executable} -m faqsearch.cli export /dev/stdout --index {ix} --format "
                           f"jsonl >> {appended} && {sys.executable} -m faqsearch.cli export >(cat > {tmp_path}/piped.csv) "
                           f"--index {ix} --format csv; sleep 1"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert appended.read_text().startswith("earlier\n{") and len(appended.read_text().splitlines()) == 4
    assert (tmp_path / "piped.csv").read_text().startswith("id,question,answer")


def test_a_tsv_export_reads_back_alike_quotes_and_all(tmp_path):
    from faqsearch.corpus import FAQ, read_corpus
    from faqsearch.manage import corpus_bytes

    faqs = [FAQ("q1", '"Quoted whole"', ['"Pay later" - what is it?', 'say "hi"'], "c", {"owner": "ann"}),
            FAQ("q2", "Plain.", ["Plain question?"], None, {})]
    data, warnings = corpus_bytes(faqs, "tsv")
    (tmp_path / "x.tsv").write_bytes(data)
    back = read_corpus(str(tmp_path / "x.tsv"))
    assert [(f.id, f.answer, f.questions, f.category, f.metadata) for f in back] == \
        [(f.id, f.answer, f.questions, f.category, f.metadata) for f in faqs] and warnings == []
    from faqsearch.errors import InvalidOptionError

    for key in ("Variants", " Question ", ""):  # they came back as questions, as "Question", not at all
        with pytest.raises(InvalidOptionError, match=f"metadata field {key!r} would not be read back as itself"):
            corpus_bytes([FAQ("q3", "A.", ["Q?"], None, {key: "blue|red"})], "csv")
    data, warnings = corpus_bytes([FAQ("q4", "A.", ["Q?"], None, {"note": ""})], "csv")
    assert warnings == ["1 FAQ has a metadata field holding empty text, which CSV reads back as no field; export as "
                        ".jsonl to keep it"]
