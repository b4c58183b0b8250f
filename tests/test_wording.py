"""What the CLI prints for people: plurals that agree with their counts, a header over every table of
columns, and an ingest summary in plain words (#42)."""
import pytest

from faqsearch import FAQSearch
from faqsearch.text import count, plural

from .conftest import write_corpus


def test_count_and_plural():
    assert [count(n, "FAQ") for n in (0, 1, 2)] == ["0 FAQs", "1 FAQ", "2 FAQs"]
    assert count(1, "query", "queries") == "1 query" and count(3, "query", "queries") == "3 queries"
    assert plural(1, "question") == "question" and plural(5, "question") == "questions"


def test_edits_and_ingest_say_one_faq_and_one_question(run, tmp_path, small_corpus):
    ix = tmp_path / "ix"
    out = run("ingest", small_corpus, "--index", ix, "-q").output
    assert "Indexed 4 FAQs (6 questions)" in out
    added = write_corpus(tmp_path, [("n1", "a brand new question", "a new answer")], "n.csv")
    out = run("add", added, "--index", ix, "-q").output
    assert "1 FAQ added" in out and "1 question encoded" in out and "0 questions removed" in out and "FAQs added" not in out
    one = tmp_path / "one"
    out = run("ingest", write_corpus(tmp_path, [("a", "only question", "only answer")], "one.csv"), "--index", one,
              "-q").output
    assert "Indexed 1 FAQ (1 question)" in out
    assert "contents:   1 FAQ, 1 question" in run("info", "--index", one).output


def test_ingest_summary_is_in_plain_words(run, tmp_path):
    out = run("ingest", "sample_data/faq.csv", "--index", tmp_path / "ix", "-q").output
    assert "MRR@10" not in out and "self-supervised" not in out and " vs " not in out, out
    lines = out.splitlines()
    withheld = next(line for line in lines if line.startswith("Answers below "))
    with FAQSearch.open(str(tmp_path / "ix")) as engine:
        at, threshold = engine.snapshot.min_confidence, engine.threshold
    assert withheld.startswith(f"Answers below {100 * at:.0f}% confidence are withheld")
    assert f"answers scoring below {threshold:.2f} are withheld instead" in out
    assert any(line.startswith("Matching: by meaning") for line in lines)


def test_an_index_without_a_confidence_says_what_its_threshold_withholds(capsys):
    from faqsearch.cli.render import built

    built({"faqs": 2, "questions": 3, "encoder": "fake", "dim_in": 8, "dim_out": 8, "whitening": {"enabled": False},
           "threshold": 0.36, "calibration": {"chosen_by": "given"}}, "ix")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Indexed 2 FAQs (3 questions) into ix"
    assert out[-1] == "Answers scoring below 0.36 are withheld (the threshold, given at ingest)"


def test_indexes_suggest_versions_and_list_have_a_header_row(run, tmp_path, small_corpus):
    home = tmp_path / "home"
    assert run("ingest", small_corpus, "--index", home / "shop", "-q").exit_code == 0
    lines = run("indexes", "--home", home).output.splitlines()
    assert lines[0].split() == ["name", "FAQs", "questions", "encoder", "backend", "size", "modified"]
    assert lines[1].split()[:3] == ["shop", "4", "6"]
    assert run("ingest", small_corpus, "--index", home / "客服问答", "-q").exit_code == 0
    from faqsearch.cli.render import columns

    lines = run("indexes", "--home", home).output.splitlines()  # wide names keep the columns in place
    assert len({columns(line.split(" MiB")[0]) for line in lines[1:]}) == 1, lines
    assert run("ask", "How long does shipping take please", "--index", home / "shop", "--log").exit_code == 0
    lines = run("suggest", "2", "--index", home / "shop").output.splitlines()
    assert lines[0].split() == ["source", "match", "asked", "phrasing"], lines
    assert lines[1].endswith("How long does shipping take please")
    lines = run("versions", "--index", home / "shop").output.splitlines()
    assert lines[0].split() == ["version", "time", "made", "by", "FAQs", "questions"]
    assert lines[1].split()[-3:] == ["4", "6", "(live)"]
    lines = run("list", "--index", home / "shop").output.splitlines()
    assert lines[0].split() == ["id", "category", "questions", "answer"] and lines[1].split()[:3] == ["1", "account", "2"]


@pytest.mark.parametrize("n, word", [(1, "1 query"), (2, "2 queries")])
def test_log_counts_agree(run, tmp_path, small_corpus, n, word):
    ix = tmp_path / "ix"
    assert run("ingest", small_corpus, "--index", ix, "-q").exit_code == 0
    for _ in range(n):
        run("ask", "How long does shipping take?", "--index", ix, "--log")
    assert run("log", "--index", ix).output.startswith(f"{word} logged")


def test_list_cuts_wide_answers_by_columns_says_when_nothing_matches_and_honours_an_offset_alone(run, tmp_path):
    """A Chinese answer cut at 70 characters took 140 columns; `list --contains X` matching nothing printed
    nothing at all; `--offset` without `--limit` was ignored."""
    from faqsearch.cli.render import columns

    rows = [(f"z{i}", f"问题{i}", "进入“我的-安全中心-交易密码”，输入原密码后设置新密码；忘记原密码的可通过人脸识别重置。" * 2)
            for i in range(3)]
    ix = tmp_path / "zh"
    assert run("ingest", write_corpus(tmp_path, rows), "--index", ix, "-q").exit_code == 0
    lines = run("list", "--index", ix).output.splitlines()
    assert len(lines) == 4 and all(columns(line) <= 39 + 70 for line in lines) and lines[1].endswith("...")
    assert run("list", "--index", ix, "--contains", "密碼").output.strip() == \
        "No FAQ contains '密碼' (matched as a run of text, in any case)."
    assert [ln.split()[0] for ln in run("list", "--index", ix, "--offset", "2").output.splitlines()[1:]] == ["z2"]
    assert run("list", "--index", ix, "--offset", "5").output.strip() == "No FAQs past --offset 5."


def test_printed_answers_keep_each_lines_indentation():
    """Answers keep their indentation, and `ask` and `show` printed them re-flowed without it."""
    from faqsearch.cli.render import wrap

    assert wrap("Steps:\n  - first item\n      code(x)\n\u3000\u3000段落", "  ").splitlines() == \
        ["  Steps:", "    - first item", "        code(x)", "  \u3000\u3000段落"]
    long = wrap("  - " + "word " * 40, "  ").splitlines()
    assert long[0].startswith("    - word") and long[1].startswith("    word")  # wrapped as far in
