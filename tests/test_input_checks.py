"""What comes in (corpus files, queries, options, HTTP requests) is checked before anything is encoded
or written, and refused with a message that says what is wrong and what to do."""
import gzip
import json
import os
import subprocess
import sys
import zipfile

import pytest
from click.testing import CliRunner

from faqsearch import FAQ, FAQSearch
from faqsearch.cli import cli
from faqsearch.corpus import read_corpus
from faqsearch.errors import CorpusError, FAQSearchError

from .conftest import API_KEY, ROOT, FakeEncoder, build_index, faq_rows, generation, write_corpus

ROWS = faq_rows(15, 3)


def test_control_only_questions_are_refused_and_text_is_normalised(tmp_path, run, built):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,question,answer\n1,hello,hi there\n2,\x00\x01\x02,junk\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad.csv:3: empty 'question'"):
        read_corpus(str(bad))
    with pytest.raises(CorpusError, match="visible"):
        built.add([FAQ("z", "answer", ["\x00\u200b\x07"])])
    faqs = read_corpus(write_corpus(tmp_path, [("1", "cafe\u0301\tmenu\x00  prices", "ok")], "nfc.csv"))
    assert faqs[0].questions == ["caf\u00e9 menu prices"]
    result = run("ask", "\x00\x01", "--index", built.path)
    assert result.exit_code == 2 and "blank" in result.output


@pytest.mark.parametrize("mode", ["dense", "hybrid", "lexical"])
def test_invalid_utf8_queries_are_answered_one_line_each(built, tmp_path, mode):
    ix = built.path
    stdin = b"question about subject2 \xff\xfe variant1\n\nquestion about subject4 variant0\n\xc3\n"
    proc = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, %r); from tests.conftest import "
                           "FakeEncoder; import faqsearch.encoders as e; e.load_encoder = lambda *a, **k: "
                           "FakeEncoder(); from faqsearch.cli import cli; cli()" % ROOT,
                           "ask", "--index", ix, "--mode", mode, "--threshold", "-1"],
                          input=stdin, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    lines = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert len(lines) == 4
    assert lines[0]["answers"][0]["faq_id"] == "f2" and "\ufffd" in lines[0]["query"]
    assert lines[1]["answers"] == [] and lines[2]["answers"][0]["faq_id"] == "f4"
    # argv with bytes that are not UTF-8 (Python hands them over as lone surrogates)
    assert built.ask("question about subject2 \udcff variant1", mode=mode).answers[0].faq_id == "f2"


def test_jsonl_line_separators_inside_strings_and_non_string_answers(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"id": "1", "question": "first\u2028line?", "answer": "a\u2029b\u0085c"},
                            ensure_ascii=False) + "\n" + json.dumps({"id": "2", "question": "q2", "answer": "x"}) + "\n",
                 encoding="utf-8")
    faqs = read_corpus(str(p))
    assert [f.id for f in faqs] == ["1", "2"] and faqs[0].questions == ["first line?"]
    for bad, col in ([{"id": "3", "question": "q", "answer": ["a", "b"]}, "answer"],
                     [{"id": "3", "question": "q", "answer": {"x": 1}}, "answer"],
                     [{"id": "3", "question": ["ok", {"no": 1}], "answer": "a"}, "question"]):
        p.write_text(json.dumps({"id": "1", "question": "q1", "answer": "a"}) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(CorpusError, match=rf"c.jsonl:2: '{col}' is a JSON (list|object), expected a string"):
            read_corpus(str(p))


def test_file_kinds_are_named_and_advice_is_right(tmp_path, run, built):
    cases = {
        "u16.csv": ("id,question,answer\n1,q,a\n".encode("utf-16"), "UTF-16"),
        "sheet.csv": (None, "ZIP archive"),
        "c.csv.gz": (gzip.compress(b"id,question,answer\n1,q,a\n"), "gzip"),
    }
    with zipfile.ZipFile(tmp_path / "sheet.csv", "w") as z:
        z.writestr("xl/workbook.xml", "<x/>")
    for name, (data, what) in cases.items():
        if data is not None:
            (tmp_path / name).write_bytes(data)
        with pytest.raises(CorpusError, match=what) as err:
            read_corpus(str(tmp_path / name), fmt="csv")
        assert "latin1" not in str(err.value)
    big = "x" * 200_000
    faqs = read_corpus(write_corpus(tmp_path, [("1", "a long one", big)], "big.csv"))
    assert len(faqs[0].answer) == 200_000
    os.mkdir(tmp_path / "adir")
    result = run("ingest", tmp_path / "adir", "--index", tmp_path / "x")
    assert result.exit_code == 1 and "is a directory" in result.output


def test_a_file_in_another_encoding_is_shown_as_it_reads_in_the_likely_ones(tmp_path, run, built):
    """A GBK export was told to convert from latin1, which turned its Chinese into mojibake."""
    rows = "id,question,answer\ng-1,怎么退款？,在订单页申请。\n"
    for codec, first in (("gbk", "GB18030"), ("big5", "Big5"), ("shift_jis", "Shift_JIS"), ("cp1252", "Windows-1252")):
        text = rows if codec in ("gbk",) else {"big5": "id,question,answer\n1,忘記密碼怎麼辦,點擊重設\n",
                                               "shift_jis": "id,question,answer\n1,パスワードを忘れました,リセット\n",
                                               "cp1252": "id,question,answer\n1,Où est mon colis ?,Vérifiez\n"}[codec]
        (tmp_path / f"{codec}.csv").write_bytes(text.encode(codec))
        with pytest.raises(CorpusError) as err:
            read_corpus(str(tmp_path / f"{codec}.csv"))
        said = str(err.value)
        assert f"{codec}.csv:2:" in said and "latin1" not in said
        assert f"the line reads as {first}: {text.splitlines()[1]!r}" in said  # the right reading first, whole
        assert f"iconv -f {first} -t UTF-8" in said
    for codec, text, first in (("gbk", "我的订单在哪里", "GB18030"), ("cp1252", "Größe ändern", "Windows-1252"),
                               ("cp1252", "crème brûlée", "Windows-1252")):  # a review's cases: EUC-KR, GB18030 first
        (tmp_path / "r.csv").write_bytes(f"id,question,answer\n1,{text},a\n".encode(codec))
        with pytest.raises(CorpusError, match=f"reads as {first}: '1,{text},a'"):
            read_corpus(str(tmp_path / "r.csv"))
    # a UTF-8 file with one stray byte: converting it whole would garble every other line
    (tmp_path / "u.csv").write_bytes("id,question,answer\n1,中文问题,答案\n2,what".encode() + b"\x92s new,ok\n")
    with pytest.raises(CorpusError, match=r"u.csv:3: .* the rest is UTF-8 \(6 characters beyond ASCII read well, 1 byte"):
        read_corpus(str(tmp_path / "u.csv"))
    line = "1,忘记密码怎么办,点击忘记密码重置\n".encode("gbk")  # over the 1 MiB read: the sample ends between lines
    for pad in range(2):  # (cut inside a character, every two-byte codec failed and Windows-1252 came first)
        (tmp_path / "big.csv").write_bytes(b"id,question,answer" + b"x" * pad + b"\n" + line * 60000)
        with pytest.raises(CorpusError, match="reads as GB18030: '1,忘记密码怎么办"):
            read_corpus(str(tmp_path / "big.csv"))
    result = run("ask", "--index", built.path, input="怎么退款\n".encode("gbk"))
    assert "Line 1 reads as GB18030: '怎么退款'" in result.stderr


def test_unreadable_and_deeply_nested_corpora_are_clear_errors(tmp_path, monkeypatch, run):
    import builtins

    import faqsearch.corpus as corpus_mod

    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"id": "1", "question": "q", "answer": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    result = run("ingest", deep, "--index", tmp_path / "ix")
    assert result.exit_code == 1 and "nested too deeply" in result.output
    locked = tmp_path / "locked.csv"
    locked.write_text("question,answer\nq,a\n")
    real_open = builtins.open

    def denied(file, *a, **k):
        if str(file) == str(locked):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *a, **k)

    monkeypatch.setattr(corpus_mod, "open", denied, raising=False)
    result = run("ingest", locked, "--index", tmp_path / "ix")
    assert result.exit_code == 1 and "permission denied; check its permissions" in result.output


def test_many_questions_under_one_id_are_read_once_each(tmp_path):
    from faqsearch.corpus import read_corpus

    p = tmp_path / "big.csv"
    p.write_text("id,question,answer\n" + "".join(f"one,question number {i},the answer\n" for i in range(40_000))
                 + "one,question number 7,the answer\n")
    faqs = read_corpus(str(p))
    assert len(faqs) == 1 and len(faqs[0].questions) == 40_000


def test_nan_and_infinity_are_refused_at_input(tmp_path, run):
    from faqsearch.corpus import read_corpus
    from faqsearch.errors import CorpusError

    p = tmp_path / "c.jsonl"
    p.write_text('{"id": "1", "question": "q", "answer": "a"}\n{"id": "2", "question": "q2", "answer": "b", '
                 '"price": NaN}\n')
    with pytest.raises(CorpusError, match=r"c.jsonl:2: invalid JSON \(NaN is not a JSON value\)"):
        read_corpus(str(p))
    with pytest.raises(CorpusError, match="NaN and Infinity are not JSON"):
        build_index([FAQ("1", "a", ["q"], metadata={"price": float("inf")})], tmp_path / "ix")
    result = run("ask", "anything", "-t", "nan", "--index", str(tmp_path / "none"))
    assert result.exit_code == 2 and "not a number" in result.output


def test_index_type_typo_fails_before_encoding(tmp_path):
    enc = FakeEncoder()
    with pytest.raises(FAQSearchError, match="unknown --index-type 'hnws'"):
        FAQSearch.build(write_corpus(tmp_path, ROWS), str(tmp_path / "ix"), encoder=enc, index_type="hnws")
    assert enc.calls == 0


def test_milvus_limits_are_checked_before_encoding(tmp_path):
    pytest.importorskip("milvus_lite")
    from faqsearch.errors import CorpusError

    enc = FakeEncoder()
    with pytest.raises(CorpusError, match="over 8192 bytes"):
        FAQSearch.build([FAQ("1", "a", ["word " * 2000])], str(tmp_path / "m"), encoder=enc, backend="milvus",
                        uri=str(tmp_path / "m.db"))
    assert enc.calls == 0


def test_edits_read_their_input_before_loading_the_model(built, tmp_path, monkeypatch):
    import faqsearch.encoders as encoders

    def no_model(*a, **k):
        raise AssertionError("the model was loaded before the input was read")

    monkeypatch.setattr(encoders, "load_encoder", no_model)
    bad = tmp_path / "bad.csv"
    bad.write_text("id,question\n1,q\n")
    runner = CliRunner()
    for cmd in ("add", "update"):
        result = runner.invoke(cli, [cmd, str(bad), "--index", built.path])
        assert result.exit_code == 1 and "missing column(s) answer" in result.output
    result = runner.invoke(cli, ["remove", "nope", "--index", built.path])
    assert result.exit_code == 1 and "unknown FAQ id" in result.output
    result = runner.invoke(cli, ["remove", "f1", "--index", built.path])  # removing needs no encoding at all
    assert result.exit_code == 0, result.output


def test_a_batch_with_a_repeated_id_is_refused_and_writes_nothing(api, tmp_path):
    from faqsearch.errors import CorpusError

    client, service, path = api
    g = generation(path)
    body = {"faqs": [{"id": "f1", "answer": "answer X", "questions": ["one wording"]},
                     {"id": "f1", "answer": "answer Y", "questions": ["another wording"]}]}
    for url in ("/indexes/shop/faqs/upsert", "/indexes/shop/faqs"):
        r = client.post(url, json=body, headers={"X-API-Key": API_KEY})
        assert r.status_code == 422 and "'f1' is given twice" in r.json()["error"]
    assert generation(path) == g
    assert client.get("/indexes/shop/ask", params={"q": "question about subject1 variant0"}).json()["answers"][0][
        "faq_id"] == "f1"
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        with pytest.raises(CorpusError, match="'d1' is given twice"):
            e.add([FAQ("d1", "answer X", ["x words"]), FAQ("d1", "answer Y", ["y words"])])
        assert "d1" not in {f["id"] for f in e.list()} and e.config["generation"] == g


def test_out_of_bounds_requests_are_4xx_and_write_nothing(api):
    client, service, path = api
    g = generation(path)
    r = client.post("/indexes/shop/ask", json={"query": "x", "filters": {f"k{i}": "v" for i in range(3000)}})
    assert r.status_code in (413, 422)
    r = client.post("/indexes/shop/ask", json={"query": "x", "filters": {"product": [str(i) for i in range(300)]}})
    assert r.status_code == 422 and "at most" in r.json()["error"]
    assert client.get("/indexes/shop/faqs", params={"offset": 2 ** 63}, headers={"X-API-Key": API_KEY}).status_code == 422
    r = client.post("/indexes/shop/feedback", headers={"X-API-Key": API_KEY},
                    json={"query": "new words", "faq_id": "f1", "query_id": 2 ** 63})
    assert r.status_code == 422 and generation(path) == g  # refused before anything was written
    assert client.post("/indexes/shop/ask", json={"query": "   "}).status_code == 422


def test_an_id_with_a_slash_works_over_http(api):
    client, service, path = api
    headers = {"X-API-Key": API_KEY}
    faq = {"id": "billing/refunds", "answer": "slash answer", "questions": ["slash words"]}
    assert client.post("/indexes/shop/faqs", headers=headers, json={"faqs": [faq]}).status_code == 200
    assert client.get("/indexes/shop/faqs/billing/refunds", headers=headers).json()["answer"] == "slash answer"
    r = client.put("/indexes/shop/faqs/billing/refunds", headers=headers, json={**faq, "answer": "changed"})
    assert r.status_code == 200
    assert client.get("/indexes/shop/faqs/billing/refunds", headers=headers).json()["answer"] == "changed"
    assert client.delete("/indexes/shop/faqs/billing/refunds", headers=headers).status_code == 200
    assert client.get("/indexes/shop/faqs/billing/refunds", headers=headers).status_code == 404


def test_a_wrong_column_name_points_at_the_header_line(tmp_path):
    """A column error names the line to fix: a table's header (it named the first data row, line 2, which
    holds no column names), and a JSONL record's own line."""
    from faqsearch.corpus import read_texts
    from faqsearch.evaluation import read_labelled_queries, read_pairs

    table = tmp_path / "q.csv"
    table.write_text("words,label\nhello,f1\n", encoding="utf-8")
    for read, what in ((read_labelled_queries, "no query column"), (read_corpus, r"missing column\(s\) question"),
                       (read_pairs, "no first sentence column"), (read_texts, "no text column")):
        with pytest.raises(CorpusError, match=rf"q.csv:1: {what}"):
            read(str(table))
    records = tmp_path / "q.jsonl"
    records.write_text('\n{"text": "hello", "label": "f1"}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"q.jsonl:2: no gold FAQ id column.*name yours with --gold-column"):
        read_labelled_queries(str(records))


def test_a_foreign_error_is_said_in_whole_words():
    """`said` cut a long message mid-word ("check that the serve"): it ends at a word, marked as cut."""
    from faqsearch.errors import said

    text = "cannot reach Milvus at http://127.0.0.1:19530 (connection refused); check that the server runs"
    assert said(Exception(text)) == text and said(Exception(""), 10) == "Exception"
    assert said(Exception(text), 60) == "cannot reach Milvus at http://127.0.0.1:19530 (connection ..."
    assert said(Exception("first line\nsecond")) == "first line"


def test_build_refuses_options_it_cannot_use_before_anything_is_written(tmp_path):
    """threshold=5 was stored, then config.json itself was refused ("restore it from a backup"), and
    whiten="no" whitened (a non-empty string is true) and stored "no": both are option errors now,
    with nothing written."""
    from faqsearch import FAQ, FAQSearch
    from faqsearch.errors import InvalidOptionError

    from .conftest import FakeEncoder

    faqs = [FAQ("a", "answer a", ["question a"]), FAQ("b", "answer b", ["question b"])]
    for kwargs, said in (({"threshold": 5}, "threshold must be a cosine between -1 and 1, got 5"),
                         ({"threshold": True}, "threshold must be"), ({"whiten": "no"}, "whiten must be True or False"),
                         ({"k": 0}, "positive number of dimensions")):
        with pytest.raises(InvalidOptionError, match=said):
            FAQSearch.build(faqs, str(tmp_path / "ix"), encoder=FakeEncoder(), **kwargs)
        assert not (tmp_path / "ix").exists() or not os.listdir(tmp_path / "ix")


def test_library_arguments_of_the_wrong_kind_are_faqsearch_errors(built, tmp_path, run):
    """A k past 2**63, list()'s page arguments, add(None), open(5) and an empty folder given as an index
    reached users as sqlite3, Python or misleading errors."""
    from faqsearch.errors import IndexNotFoundError, InvalidOptionError, TextTypeError

    for mode in ("dense", "lexical", "hybrid"):  # OverflowError from SQLite's LIMIT in two of them
        assert built.ask("question about topic3 number1", k=2 ** 62, mode=mode).ranked
    for bad in ({"limit": 1.5}, {"offset": "a"}, {"limit": 2 ** 63}, {"limit": -1}, {"limit": 0}, {"offset": -1},
                {"limit": True}):
        with pytest.raises(InvalidOptionError, match="must be a whole number from"):
            built.list(**bad)
    with pytest.raises(TextTypeError, match="contains: expected a string"):
        built.list(contains=5)
    assert [f["id"] for f in built.list(limit=2, offset=1)] == ["f1", "f2"]
    assert len(built.list(offset=14)) == 1
    for corpus in (None, 5):
        with pytest.raises(TextTypeError, match="a corpus file's path, an FAQ or a list of FAQs"):
            built.add(corpus)
    with pytest.raises(TextTypeError, match="an index is a name or a path"):
        FAQSearch.open(5)
    (tmp_path / "folder").mkdir()
    with pytest.raises(IndexNotFoundError, match=r"yet \(the folder is empty\)"):
        FAQSearch.open(str(tmp_path / "folder"))
    result = run("ask", "question about topic3", "--index", built.path, "-k", 2 ** 62)
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_corpus_read_from_a_pipe_loses_nothing(tmp_path, run, fmt):
    """/dev/stdin, a FIFO or <(...) was opened twice (its start checked, then parsed): the first 4 KB
    were gone, so an upsert of an unchanged export removed 64 of 100 FAQs and exited 0."""
    if fmt == "jsonl":
        text = "".join(json.dumps({"id": f"j{i:03d}", "question": f"Question number {i:03d}?",
                                   "answer": f"Answer {i:03d} " + "x" * 40}) + "\n" for i in range(100))
    else:
        text = "id,question,answer\n" + "".join(f"j{i:03d},Question number {i:03d}?,Answer {i:03d} {'x' * 40}\n"
                                                for i in range(100))
    assert len(text.encode()) > 4096
    (tmp_path / f"c.{fmt}").write_text(text, encoding="utf-8")
    ix = str(tmp_path / "ix")
    assert run("ingest", tmp_path / f"c.{fmt}", "--index", ix, "-q").exit_code == 0

    def piped(*args):  # a pipe holding the whole file (<64 KB), as /dev/stdin or <(cat FILE) give it
        r, w = os.pipe()
        os.write(w, text.encode("utf-8"))
        os.close(w)
        try:
            return run(*args, f"/dev/fd/{r}", "--format", fmt, "--index", ix, "--json")
        finally:
            os.close(r)

    done = piped("upsert")
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["removed_faqs"] == [] and report["unchanged_faqs"] == 100, report
    assert json.loads(run("info", "--index", ix, "--json").output)["counts"]["faqs"] == 100


def test_the_librarys_documented_arguments_are_checked_as_documented(built, tmp_path):
    """Found by a hostile reading of the library's docs: batch_size=-1 encoded nothing and answered NaN,
    and the NaN stayed in the engine's query cache for later asks; augment(n=0) added every paraphrase
    that passed; Columns(variant_sep=None) split the variants at every space (None: the default, said
    its docstring); a path under a file raised NotADirectoryError or FileExistsError; a generator
    object without a name was taken for a model name."""
    import faqsearch
    from faqsearch.corpus import Columns
    from faqsearch.errors import IndexNotFoundError, IndexPathError, InvalidOptionError, TextTypeError
    from faqsearch.generators import load_generator, paraphrase

    for bad in (-1, 0, 2.5, "64", True):
        with pytest.raises(InvalidOptionError, match="batch_size must be a whole number from 1"):
            built.ask_many(["question about subject3 variant1"], batch_size=bad)
    with pytest.raises(InvalidOptionError, match="batch_size"):
        build_index(faq_rows(3, 2), tmp_path / "b", batch_size=-1)
    assert not os.path.exists(tmp_path / "b")
    result = built.ask("question about subject3 variant1")  # the cache holds no NaN
    assert result.answered and result.answers[0].faq_id == "f3" and result.best_score == result.best_score
    for n in (0, -1, 101):
        with pytest.raises(InvalidOptionError, match="n must be a whole number from 1 to 100"):
            built.augment(generator=object(), n=n)
        with pytest.raises(InvalidOptionError, match="n must be a whole number from 1 to 100"):
            paraphrase(object(), "where is my parcel", n=n)
    with pytest.raises(TextTypeError, match="this object lacks name, sample, similarity, spec"):
        load_generator(object())
    corpus = tmp_path / "v.csv"
    corpus.write_text("id,question,answer,variants\n1,How can I sign up?,Here.,Where do I register?|How to join?\n",
                      encoding="utf-8")
    faq, = faqsearch.read_corpus(str(corpus), Columns(variant_sep=None, question=None, category=None))
    assert faq.questions == ["How can I sign up?", "Where do I register?", "How to join?"]
    with pytest.raises(InvalidOptionError, match="Columns.question must be a column name"):
        faqsearch.read_corpus(str(corpus), Columns(question=5))
    under = str(tmp_path / "v.csv" / "ix")
    with pytest.raises(IndexNotFoundError):
        FAQSearch.open(under)
    with pytest.raises(IndexPathError, match="v.csv is a file, so no index can be made"):
        build_index(str(corpus), under)
    assert {"StaleRevisionError", "StorageError", "TextTypeError"} <= set(faqsearch.__all__)
