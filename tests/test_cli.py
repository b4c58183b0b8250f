import json
import os
import sqlite3

import pytest
from click.testing import CliRunner

from faqsearch import FAQSearch
from faqsearch.cli import cli

from .conftest import index_files, version



def test_every_command_has_help_with_example():
    runner = CliRunner()
    for name, command in cli.commands.items():
        result = runner.invoke(cli, [name, "--help"])
        assert result.exit_code == 0, name
        assert "Example:" in result.output, f"{name} --help has no Example block"


def test_ingest_stores_rows_and_config(run, tmp_path, small_corpus):
    ix = tmp_path / "ix"
    result = run("ingest", small_corpus, "--index", ix, "--quiet")
    assert result.exit_code == 0, result.output
    assert "Indexed 4 FAQs (6 questions)" in result.output
    con = sqlite3.connect(version(ix) / "store.db")
    assert con.execute("select count(*) from faqs").fetchone() == (4,)
    assert con.execute("select faq_id, text, source from questions order by id").fetchall()[:2] == [
        ("1", "How do I reset my password?", "corpus"), ("1", "I forgot my password", "corpus")]
    assert con.execute("select category from faqs where id='2'").fetchone() == ("shipping",)
    cfg = json.loads((version(ix) / "config.json").read_text())
    assert cfg["encoder"]["name"] == "fake" and cfg["counts"]["questions"] == 6
    assert set(os.listdir(version(ix))) == {"config.json", "store.db", "index.faiss", "whitening.npz", "vectors.npy",
                                            "ids.npy", "lexical"}
    assert sorted(os.listdir(ix)) == ["CURRENT", "LOCK", version(ix).name]  # one real directory, nothing beside it
    assert sorted(os.listdir(tmp_path)) == sorted(["ix", os.path.basename(small_corpus)])


def test_ingest_json_summary(run, tmp_path, small_corpus):
    result = run("ingest", small_corpus, "--index", tmp_path / "ix", "--json", "--no-whitening")
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["faqs"] == 4 and data["dim_out"] == data["dim_in"] and data["whitening"]["enabled"] is False


@pytest.mark.parametrize("content,needle", [
    ("question,answer\nq1,a1\n,a2\n", ":3: empty 'question'"),
    ("question,text\nq1,a1\n", "missing column(s) answer"),
    ("id,question,answer\n1,q,a\n1,q2,b\n", ":3: id '1' was given a different answer on line 2"),
])
def test_bad_corpus_exits_1_and_keeps_previous_index(run, tmp_path, small_corpus, content, needle):
    ix = tmp_path / "ix"
    assert run("ingest", small_corpus, "--index", ix, "-q").exit_code == 0
    before = (version(ix) / "store.db").read_bytes()
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    result = run("ingest", bad, "--index", ix, "-q")
    assert result.exit_code == 1
    assert needle in result.output and str(bad) in result.output
    assert (version(ix) / "store.db").read_bytes() == before


def test_missing_file_is_an_error(run, tmp_path):
    result = run("ingest", tmp_path / "nope.csv", "--index", tmp_path / "ix")
    assert result.exit_code == 1 and "file not found" in result.output


def test_usage_errors_exit_2(run, tmp_path, small_corpus):
    assert run("ingest", small_corpus, "--beta", "3").exit_code == 2
    assert run("ingest", small_corpus, "--no-whitening", "--beta", "1").exit_code == 2
    fit = run("ingest", small_corpus, "--no-whitening", "--fit-on", small_corpus)  # info claimed a fit never made
    assert fit.exit_code == 2 and "--fit-on" in fit.output
    assert run("ask", "x", "-k", "0").exit_code == 2
    assert run("eval", "--index", tmp_path / "ix").exit_code == 2  # neither QUERIES nor --pairs


def test_ask_text_json_and_no_answer(run, tmp_path, small_corpus):
    ix = tmp_path / "ix"
    built = run("ingest", small_corpus, "--index", ix, "-q", "--threshold", "0.3").output
    # a threshold given at ingest decides (the answers still carry the confidence): both outputs say so
    assert "Answers scoring below 0.30 are withheld (the threshold, given at ingest)" in built, built
    text = run("info", "--index", ix).output
    assert "(given at ingest); decides whether to answer" in text and "the threshold given at ingest decides" in text
    result = run("ask", "I forgot my password", "--index", ix)
    # #44: people read the confidence (the chance that the answer is right), not the cosine
    assert result.exit_code == 0 and result.output.startswith("1. [>99%] 1"), result.output
    data = json.loads(run("ask", "I forgot my password", "--index", ix, "--json", "-k", "2").output)
    assert data["answers"][0]["faq_id"] == "1" and len(data["answers"]) <= 2
    assert data["answers"][0]["source"] == "corpus" and data["answered"] is True and data["nearest"] is None
    assert data["answers"][0]["score"] == pytest.approx(1.0) and 0.99 < data["answers"][0]["confidence"] <= 1
    none = run("ask", "volcano eruption", "--index", ix, "--threshold", "0.999")
    assert "No confident answer" in none.output
    data = json.loads(run("ask", "volcano eruption", "--index", ix, "--threshold", "0.999", "--json").output)
    assert data["answers"] == [] and isinstance(data["best_score"], float)
    # not answered: the best guess comes as `nearest`, with its confidence, so a bot can ask "did you mean"
    assert data["answered"] is False and data["nearest"]["faq_id"] and 0 <= data["nearest"]["confidence"] <= 1
    data = json.loads(run("ask", "volcano eruption", "--index", ix, "--min-confidence", "1", "--json").output)
    assert data["answered"] is False and data["min_confidence"] == 1.0
    both = run("ask", "volcano eruption", "--index", ix, "--min-confidence", "0.5", "--threshold", "0.5")
    assert both.exit_code == 2 and "not both" in both.output


def test_ask_from_stdin_gives_json_lines(run, tmp_path, small_corpus):
    ix = tmp_path / "ix"
    run("ingest", small_corpus, "--index", ix, "-q")
    result = run("ask", "--index", ix, "--threshold", "-1", input="reset my password\n\nreturn policy\n")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    # one output line per input line: the blank line gets an empty result, not a shifted one
    assert [line["query"] for line in lines] == ["reset my password", "", "return policy"]
    assert lines[1]["answers"] == [] and lines[1]["best_score"] is None
    assert lines[2]["answers"][0]["faq_id"] == "3"
    # a Windows-saved file's byte-order mark is no part of the first query; a line that is not UTF-8
    # is answered (its bad bytes as U+FFFD) and named on stderr
    result = run("ask", "--index", ix, "--threshold", "-1", input=b"\xef\xbb\xbfreset my password\r\ncaf\xe9 return\n")
    assert [json.loads(line)["query"] for line in result.stdout.splitlines()] == ["reset my password", "caf\ufffd return"]
    assert "stdin line(s) 2 are not UTF-8" in result.stderr
    # CR alone ends a line too (old Mac files), as ingest reads them: two queries, not one
    result = run("ask", "--index", ix, "--threshold", "-1", input=b"reset my password\rreturn policy\r\r")
    assert [json.loads(line)["query"] for line in result.stdout.splitlines()] == ["reset my password", "return policy", ""]


def test_ask_missing_index(run, tmp_path):
    result = run("ask", "hello", "--index", tmp_path / "nothing")
    assert result.exit_code == 1 and "faqsearch ingest" in result.output


def test_eval_and_info(run, tmp_path, small_corpus):
    ix = tmp_path / "ix"
    assert "Fewer than 10 FAQs with several questions: a question on a topic no FAQ covers" in run(
        "ingest", small_corpus, "--index", ix, "-q").output
    q = tmp_path / "q.csv"
    q.write_text("query,faq_id\nforgot password,1\nreturn policy,3\nship abroad,4|2\n")
    data = json.loads(run("eval", q, "--index", ix, "--json", "-q").output)
    assert data["queries"] == 3 and 0 <= data["mrr@10"] <= 1
    lexical = json.loads(run("eval", q, "--index", ix, "--json", "-q", "--mode", "lexical").output)
    assert lexical["threshold"] is None and lexical["min_confidence"] is None  # lexical mode has neither
    refused = run("eval", q, "--index", ix, "-q", "--mode", "lexical", "--threshold", "0.9")  # it was ignored in silence
    assert refused.exit_code != 0 and "lexical mode answers with any BM25 match" in refused.output, refused.output
    unknown = tmp_path / "u.csv"
    unknown.write_text("query,faq_id\nforgot password,999\n")
    result = run("eval", unknown, "--index", ix, "-q")
    assert result.exit_code == 1 and "999" in result.output
    info = json.loads(run("info", "--index", ix, "--json").output)
    assert info["counts"]["faqs"] == 4 and info["lexical"] == {"cjk": "unigram", "stem": "english"}
    text = run("info", "--index", ix).output
    assert "transform:" in text and "lexical:    BM25 over words stemmed (Snowball English)" in text
    # too few FAQs with several questions: info says what that leaves undefended and how to change it
    assert "note:       fewer than 10 FAQs with several questions" in text and "tune threshold --self --apply" in text
    many = tmp_path / "many.csv"
    many.write_text("id,question,answer\n" + "".join(f"f{i},question about subject{i} variant{j},answer {i}\n"
                                                       for i in range(12) for j in range(3)))
    built = run("ingest", many, "--index", tmp_path / "many", "-q")
    assert built.exit_code == 0 and "FAQs with several questions" not in built.output
    text = run("info", "--index", tmp_path / "many").output
    assert "held-out question variants" in text and "note:" not in text
    assert run("tune", "confidence", "0.9", "--index", ix).exit_code == 0  # a bar of the user's own: no advice
    assert "note:" not in run("info", "--index", ix).output
    extra = tmp_path / "extra.csv"
    extra.write_text("id,question,answer\nx1,how do I close my account?,Write to us.\n")
    assert run("add", extra, "--index", ix, "-q").exit_code == 0
    text = run("info", "--index", ix).output
    assert "questions added / removed since the base files: 1 / 0 (a new base after 1,000 changes)" in text, text
    assert json.loads(run("info", "--index", ix, "--json").output)["delta"]["added"] == 1


def test_a_reader_that_leaves_the_pipe_ends_the_command_quietly(tmp_path, run, small_corpus):
    """`faqsearch list | head -1`: the write after the reader left is EPIPE. It printed 'Error:
    Broken pipe; nothing was committed' and exited 1; now it stops quietly with 141 (128 + SIGPIPE),
    as Unix tools do."""
    import subprocess
    import sys

    assert run("ingest", small_corpus, "--index", tmp_path / "ix", "-q").exit_code == 0
    proc = subprocess.Popen([sys.executable, "-m", "faqsearch.cli", "list", "--index", str(tmp_path / "ix")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line is written
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141 and err.decode() == ""


def test_a_category_no_faq_has_is_named_with_those_that_exist(run, tmp_path, small_corpus):
    ix = tmp_path / "ix"
    run("ingest", small_corpus, "--index", ix, "-q")
    for args in (("ask", "return policy", "--category", "Returns"), ("list", "--category", "Returns")):
        res = run(*args, "--index", ix)
        assert res.exit_code == 0 and "no FAQ has category 'Returns'" in res.stderr
        assert "account, returns, shipping" in res.stderr
    res = run("ask", "return policy", "--category", "returns", "--index", ix)
    assert "Note:" not in res.stderr
    # as stored: spaces trimmed, NFC (" returns " and a decomposed form matched nothing; a hostile probe)
    cafe = tmp_path / "cafe.csv"
    cafe.write_text("id,question,answer,category\nc1,Is the café open on sunday?,Yes.,Café\n", encoding="utf-8")
    run("add", cafe, "--index", ix, "-q")
    for given, stored in ((" returns ", "returns"), ("Cafe\u0301", "Café")):
        res = run("ask", "return policy", "--category", given, "--index", ix, "--json", "-k", "3", "--threshold", "-1")
        assert "Note:" not in res.stderr and json.loads(res.stdout)["answers"][0]["category"] == stored, res.output
        res = run("list", "--category", given, "--index", ix, "--json")
        assert {f["category"] for f in json.loads(res.stdout)["faqs"]} == {stored}
    with FAQSearch.open(str(ix)) as e:  # the library's list, as the store lists it
        assert [f["category"] for f in e.list(category=" Cafe\u0301 ")] == ["Café"]


def test_info_says_the_weight_it_answers_with_and_what_its_storage_keeps(run, tmp_path, small_corpus):
    """ingest --json and info --json gave hybrid_weight null where the text said 0.1; the text left out
    int8 weights and the tombstones an HNSW or IVF index keeps."""
    ix = tmp_path / "ix"
    built = json.loads(run("ingest", small_corpus, "--index", ix, "--index-type", "hnsw", "-q", "--json",
                           "--no-self-fusion").stdout)
    assert built["hybrid_weight"] == 0.1
    import click

    from faqsearch.cli.render import info as print_info

    info = json.loads(run("info", "--index", ix, "--json").stdout)
    assert info["hybrid_weight"] == 0.1
    info["index"]["tombstones"] = 7  # as a new base of an HNSW index after removals records it
    out = CliRunner().invoke(click.command()(lambda: print_info(str(ix), info)))
    assert "7 removed vectors kept as tombstones until a refit" in out.output


def test_ingest_of_a_file_that_drops_faqs_is_refused_without_replace(run, tmp_path, small_corpus):
    """#40.1: `ingest other.csv` over an index holding FAQs the file lacks replaced it silently (exit 0,
    the FAQs gone). It is refused, nothing written, naming what would go and the edits that keep it;
    --force (for damaged indexes) does not drop them either, --replace does."""
    ix = tmp_path / "ix"
    assert run("ingest", small_corpus, "--index", ix, "-q").exit_code == 0
    before = index_files(ix)
    other = tmp_path / "other.csv"
    other.write_text("id,question,answer\n2,How long does shipping take?,Two to four days.\n"
                     "9,Do you sell gift cards?,Yes.\n", encoding="utf-8")
    for flags in ((), ("--force",)):
        result = run("ingest", other, "--index", ix, "-q", *flags)
        assert result.exit_code == 1, result.output
        message = result.output.strip()
        assert "would drop 3 FAQs (5 questions)" in message and "1, 3, 4" in message
        assert f"faqsearch update {other}" in message and f"faqsearch upsert {other}" in message
        assert "--replace" in message and len(message.splitlines()) == 1
        assert index_files(ix) == before  # nothing written
    assert [f["id"] for f in json.loads(run("list", "--index", ix, "--json").output)["faqs"]] == \
        ["1", "2", "3", "4"]
    result = run("ingest", other, "--index", ix, "-q", "--replace")
    assert result.exit_code == 0, result.output
    assert [f["id"] for f in json.loads(run("list", "--index", ix, "--json").output)["faqs"]] == ["2", "9"]


def test_reingesting_a_file_that_keeps_every_faq_needs_no_flag(run, tmp_path, small_corpus):
    """The same file again, or a superset (new FAQs, other questions for the same ids), rebuilds as before."""
    ix = tmp_path / "ix"
    assert run("ingest", small_corpus, "--index", ix, "-q").exit_code == 0
    assert run("ingest", small_corpus, "--index", ix, "-q").exit_code == 0
    bigger = tmp_path / "bigger.csv"
    bigger.write_text(open(small_corpus, encoding="utf-8").read().replace("1,I forgot my password,", "1,Lost password,")
                      + "5,Do you sell gift cards?,Yes.,shop\n", encoding="utf-8")
    result = run("ingest", bigger, "--index", ix, "-q", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["faqs"] == 5


def test_tune_confidence_auto_on_an_index_whose_threshold_was_given_says_the_threshold_decides(run, tmp_path,
                                                                                               small_corpus):
    """It used to save the change and then end in a traceback (the confidence that decides is None there)."""
    ix = tmp_path / "ix"
    run("ingest", small_corpus, "--index", ix, "-q", "--threshold", "0.3")
    assert run("tune", "confidence", "0.7", "--index", ix).output.startswith("ask now answers at a confidence of 70%")
    back = run("tune", "confidence", "auto", "--index", ix)
    assert back.exit_code == 0 and "cosine threshold given at ingest (0.300)" in back.output, back.output
    assert "the threshold given at ingest decides" in run("info", "--index", ix).output


def test_a_confidence_just_below_the_bar_is_shown_with_the_decimals_that_tell_them_apart():
    from faqsearch.cli.render import percent, percents

    assert percents(0.4845, 0.4849) == ("48.4%", "48.5%") and percents(0.48, 0.4801) == ("48.00%", "48.01%") and percents(0.30, 0.41) == ("30%", "41%")
    assert percent(1.0, exact=True) == "100%" and percent(1.0) == percent(0.999) == ">99%" and percent(0.004) == "<1%"
    assert percents(0.5, 1.0) == ("50%", "100%")
    assert percents(0.993, 0.995) == ("99.3%", "99.5%") and percents(0.004, 0.008) == ("0.4%", "0.8%")
    assert percents(0.48499999, 0.485) == ("just below", "48.50%")
    # a bar shown whole misstated itself (found by a hostile run: info said 46% for 46.45%, 1% for 0.6%)
    assert percent(0.4645, exact=True) == "46.45%" and percent(0.006, exact=True) == "0.6%" and percent(0.41, exact=True) == "41%"


def test_info_and_tune_confidence_show_the_bar_as_set(run, tmp_path, small_corpus):
    ix = tmp_path / "ix"
    run("ingest", small_corpus, "--index", ix, "-q")
    assert run("tune", "confidence", "0.4645", "--index", ix).output.startswith("ask now answers at a confidence of 46.45%")
    assert "confidence: 46.45% or more (given" in run("info", "--index", ix).output


def test_answers_wrap_at_spaces_and_between_chinese_characters():
    """Answers are wrapped to 100 columns after their indent: English at spaces, as before (a URL is never
    broken); Chinese, which has no spaces (it printed as one long line), between its characters, each two
    columns wide, never with a closing mark at the start of a line or an opening one at the end."""
    import textwrap

    from faqsearch.cli.render import WIDTH, wrap
    from faqsearch.text import columns

    english = ("Our support team answers within two working days. If you need help sooner, call the number on "
               "the back of your card: https://example.com/" + "a-long-path-" * 10 + "\n\nThank you.")
    assert wrap(english, "   ") == "\n".join(
        textwrap.fill(p, WIDTH, initial_indent="   ", subsequent_indent="   ", break_long_words=False,
                      break_on_hyphens=False) or "   " for p in english.split("\n"))
    chinese = ("您好！我们的客服团队会在两个工作日内回复。如需更快的帮助，请拨打卡背面的电话号码，或者前往任何一家分行办理。"
               "您也可以在手机银行中点“在线客服”与我们联系，我们全天二十四小时为您服务。使用PayPal付款的订单也一样。")
    lines = wrap(chinese, "   ").split("\n")
    assert len(lines) == 3 and all(columns(ln) <= WIDTH and ln.startswith("   ") for ln in lines)
    assert "".join(ln[3:] for ln in lines) == chinese and "PayPal" in "".join(lines)
    assert all(ln[3] not in "，。！”" and ln[-1] != "“" for ln in lines)
    assert columns("中文ab") == 6


def test_update_with_an_id_and_no_field_says_which_options_edit_one_faq(run, tmp_path, small_corpus):
    """`faqsearch update 3` said "3: file not found; check the path" (a hostile probe)."""
    ix = tmp_path / "ix"
    run("ingest", small_corpus, "--index", ix, "-q")
    res = run("update", "3", "--index", ix)
    assert res.exit_code == 2 and "'3' is no file: to edit the FAQ with that id, give --answer" in res.output, res.output
    res = run("update", str(tmp_path / "gone.csv"), "--index", ix)  # a path stays a missing file
    assert res.exit_code == 1 and "file not found" in res.output


def test_what_a_script_gives_the_cli_is_checked_before_anything_runs(run, tmp_path, small_corpus, monkeypatch):
    """Found by a hostile run of the CLI as a machine's tool: --limit past 2**63 and --threads 2**31 were
    tracebacks; refit and tune threshold on an index emptied by remove were tracebacks; a bad --since
    exited 1 where a bad option exits 2; --uri without --backend milvus was ignored in silence; show
    --json lacked the revision GET .../faqs/ID gives; drop asked to delete an index that is not there."""
    ix = str(tmp_path / "ix")
    assert run("ingest", small_corpus, "--index", ix, "-q").exit_code == 0
    for args in (("list", "--limit", 2 ** 63), ("list", "--offset", 2 ** 63), ("log", "--limit", 2 ** 63),
                 ("ask", "where is my parcel", "--threads", 2 ** 31), ("log", "--since", "garbage"),
                 ("gaps", "--since", "2026-11-01T25:00")):
        done = CliRunner().invoke(cli, [str(a) for a in args] + ["--index", ix])
        assert done.exit_code == 2 and "Traceback" not in done.output, (args, done.output)
    from faqsearch.encoders.device import resolve_threads
    from faqsearch.errors import InvalidOptionError

    monkeypatch.setenv("FAQSEARCH_THREADS", str(2 ** 31))  # what every encoder and generator reads
    with pytest.raises(InvalidOptionError, match="FAQSEARCH_THREADS must be a whole number of threads from 1 to 1024"):
        resolve_threads()
    monkeypatch.delenv("FAQSEARCH_THREADS")
    with pytest.raises(InvalidOptionError, match="threads must be a whole number of threads from 1 to 1024, not 0"):
        resolve_threads(0)
    shown = json.loads(run("show", "1", "--index", ix, "--json").output)
    with FAQSearch.open(ix) as engine:
        assert shown["revision"] == engine.show("1")["revision"]
        ids = [f["id"] for f in engine.list()]
    assert run("remove", *ids, "--index", ix, "-q").exit_code == 0
    for args, said in ((("refit",), "holds 0 question(s): a transform is fitted on 2 or more"),
                       (("tune", "threshold", "--self"), "holds no questions: nothing to choose a threshold on")):
        done = CliRunner().invoke(cli, [*args, "--index", ix, "--json"])
        assert done.exit_code == 1 and said in done.output and "Traceback" not in done.output, done.output
    done = CliRunner().invoke(cli, ["ingest", small_corpus, "--index", str(tmp_path / "mv"), "--uri", "http://h:19530"])
    assert done.exit_code == 1 and "add --backend milvus, or leave them out" in done.output
    assert not os.path.exists(tmp_path / "mv")
    done = CliRunner().invoke(cli, ["drop", str(tmp_path / "nothing")], input="y\n")
    assert done.exit_code == 1 and "Delete" not in done.output and "no index at" in done.output
