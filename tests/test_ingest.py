"""Ingesting into an index that exists (what a re-ingest may drop, and the flag that allows it), its
options and its progress."""
from faqsearch import FAQSearch

from .conftest import FakeEncoder, faq_rows, write_corpus

ROWS = faq_rows(15, 3)


def test_reingest_refuses_to_drop_added_faqs_without_replace(run, tmp_path):
    ix, corpus = tmp_path / "ix", write_corpus(tmp_path, ROWS)
    assert run("ingest", corpus, "--index", ix, "-q").exit_code == 0
    assert run("add", write_corpus(tmp_path, [("extra", "an added question", "added answer")], "n.csv"),
               "--index", ix, "-q").exit_code == 0
    result = run("ingest", corpus, "--index", ix, "-q")
    assert result.exit_code == 1 and "would drop 1 FAQ (1 question)" in result.output
    assert "faqsearch upsert" in result.output
    assert "extra" in run("list", "--index", ix).output  # nothing dropped
    assert run("ingest", corpus, "--index", ix, "-q", "--upsert").exit_code == 0
    assert "extra" in run("list", "--index", ix).output
    assert run("ingest", corpus, "--index", ix, "-q", "--force").exit_code == 1  # #40.1: --force drops no FAQ
    assert "extra" in run("list", "--index", ix).output
    assert run("ingest", corpus, "--index", ix, "-q", "--replace").exit_code == 0
    assert "extra" not in run("list", "--index", ix).output


def test_reingest_refuses_to_drop_feedback_questions_without_force_or_replace(run, tmp_path):
    """The FAQs are all kept, one holds a feedback question the corpus lacks: refused, naming its
    source; --force (its old meaning) or --replace drops it."""
    ix, corpus = tmp_path / "ix", write_corpus(tmp_path, ROWS)
    assert run("ingest", corpus, "--index", ix, "-q").exit_code == 0
    for flag in ("--force", "--replace"):
        assert run("feedback", "a wording nobody wrote down", "f1", "--index", ix).exit_code == 0
        result = run("ingest", corpus, "--index", ix, "-q")
        assert result.exit_code == 1 and "(1 from feedback)" in result.output and "--replace" in result.output
        assert run("ingest", corpus, "--index", ix, "-q", flag).exit_code == 0
        assert "a wording nobody wrote down" not in run("show", "f1", "--index", ix).output


def test_a_rebuild_from_a_file_that_lists_the_edited_questions_is_not_refused(run, tmp_path):
    """The index's own content written back (an FAQ added, then its row put in the corpus) was refused as
    dropping the added question, which the file lists (a hostile probe): only questions the corpus does
    not list count."""
    ix, corpus = tmp_path / "ix", write_corpus(tmp_path, ROWS)
    assert run("ingest", corpus, "--index", ix, "-q").exit_code == 0
    assert run("update", "f1", "--question", "a question added by hand", "--index", ix, "-q").exit_code == 0
    row = next(r for r in ROWS if r[0] == "f1")
    both = write_corpus(tmp_path, ROWS + [("f1", "A Question Added By Hand?", *row[2:])], "both.csv")
    result = run("ingest", both, "--index", ix, "-q")
    assert result.exit_code == 0, result.output
    assert run("feedback", "a wording nobody wrote down", "f1", "--index", ix).exit_code == 0
    result = run("ingest", both, "--index", ix, "-q")  # one the file lacks is still refused, and only that one
    assert result.exit_code == 1 and "(1 from feedback)" in result.output, result.output


def test_the_refusal_names_the_edit_that_keeps_each_kind_of_question(run, tmp_path):
    """It said upsert keeps every question a rebuild would drop; upsert drops the `added` questions an
    export no longer lists (an export speaks for them), so a person following it lost one."""
    ix, corpus = tmp_path / "ix", write_corpus(tmp_path, ROWS)
    assert run("ingest", corpus, "--index", ix, "-q").exit_code == 0
    assert run("update", "f1", "--question", "a question added by hand", "--index", ix, "-q").exit_code == 0
    assert run("feedback", "a wording nobody wrote down", "f1", "--index", ix).exit_code == 0
    said = run("ingest", corpus, "--index", ix, "-q").output
    assert "(1 from added, 1 from feedback)" in said and "update" in said
    assert "keeps those from feedback (not those from added" in said
    assert run("update", corpus, "--index", ix, "-q").exit_code == 0  # what it says keeps them all
    shown = run("show", "f1", "--index", ix).output
    assert "a question added by hand" in shown and "a wording nobody wrote down" in shown


def test_ingest_options_progress_and_the_empty_index_message(run, tmp_path, built):
    corpus = write_corpus(tmp_path, ROWS)
    result = run("ingest", corpus, "--index", tmp_path / "a", "-k", "8")
    assert result.exit_code == 2 and "No such option '-k'" in result.output  # -k means answers, not dims
    result = run("ingest", corpus, "--index", tmp_path / "a", "--dims", "8")
    assert result.exit_code == 0 and "\r" not in result.output  # no progress redraws outside a terminal
    built.remove([f["id"] for f in built.list()])
    result = run("ask", "anything", "--index", built.path)
    assert result.exit_code == 0 and "holds no FAQs" in result.output and "none" not in result.output
    v = tmp_path / "v.csv"
    v.write_text("id,question,answer,alts\nz,main wording,ans,other wording;third wording\n")
    result = run("add", v, "--index", built.path, "--variants-column", "alts", "--variant-sep", ";")
    assert result.exit_code == 0, result.output
    with FAQSearch.open(built.path, encoder=FakeEncoder()) as e:
        assert [q["text"] for q in e.show("z")["questions"]] == ["main wording", "other wording", "third wording"]


def test_ingest_progress_moves_before_4096_texts():
    from faqsearch.build import encode_stream as _encode_stream

    enc = FakeEncoder()
    _encode_stream(enc, [f"text {i}" for i in range(600)], batch_size=64, progress=True)
    assert enc.calls == 3  # 256 + 256 + 88: the bar moves every 256 texts
