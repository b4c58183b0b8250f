import json

import pytest

from faqsearch.text import clean_text
from faqsearch.corpus import Columns, read_corpus, read_texts
from faqsearch.errors import CorpusError


def write(tmp_path, name, content, mode="w"):
    p = tmp_path / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content, encoding="utf-8")
    return str(p)


def test_groups_by_id_and_by_answer(tmp_path):
    p = write(tmp_path, "c.csv", "question,answer\nq1,A\nq2,B\nq3,A\n")
    faqs = read_corpus(p)
    assert [f.questions for f in faqs] == [["q1", "q3"], ["q2"]]
    assert faqs[0].id == read_corpus(p)[0].id  # generated ids are stable


def test_answers_keep_their_indentation_and_spacing_and_still_group_alike(tmp_path):
    """A nested list, a code block or a Chinese paragraph's full-width indent lost its spaces: each
    line was stripped and runs of spaces made one. Answers now keep them; the ids of id-less rows and
    the grouping of rows by answer still compare answers without them, so neither changes."""
    import json

    answer = "步骤：\n\u3000\u3000打开 App\n1. Step\n   - sub  step\n    code(x)  # aligned\n"
    p = tmp_path / "c.jsonl"
    p.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in (
        {"question": "q1", "answer": answer + "  \n\n"}, {"question": "q2", "answer": "步骤：\n打开 App\n1. Step\n"
                                                                                  "- sub step\ncode(x) # aligned"},
        {"id": "7", "question": "q3", "answer": "  one  line  "}, {"id": "7", "question": "q4", "answer": "one line"})),
        encoding="utf-8")
    faqs = read_corpus(str(p))
    assert faqs[0].answer == answer.rstrip("\n") and faqs[0].questions == ["q1", "q2"]  # grouped: alike but for spaces
    assert faqs[0].id == "a" + __import__("hashlib").sha1("步骤：\n打开 App\n1. Step\n- sub step\ncode(x) # aligned"
                                                          .encode()).hexdigest()[:10]  # the id it always had
    assert faqs[1].answer == "one  line" and faqs[1].questions == ["q3", "q4"]  # no conflict for spacing alone
    assert clean_text(" \t\u3000\u3000段落\n  - item ", multiline=True) == "\u3000\u3000段落\n  - item"  # one rule


def test_ids_categories_metadata_variants(tmp_path):
    p = write(tmp_path, "c.csv", "\ufeffid,question,answer,category,variants,url\n"
                                 "7,q1,A,cat,v1|v2 | ,http://x\n7,q2,A,,,\n8,q3,B,,,\n")
    faqs = read_corpus(p)  # the BOM is tolerated
    assert faqs[0].id == "7" and faqs[0].questions == ["q1", "v1", "v2", "q2"]
    assert faqs[0].category == "cat" and faqs[0].metadata == {"url": "http://x"}
    p = write(tmp_path, "z.csv", "id,question,answer,variants\n1,改密码,A,修改密码｜更改密码\n")
    assert read_corpus(p)[0].questions == ["改密码", "修改密码", "更改密码"]  # "｜": "|" as Chinese keyboards type it


def test_faq_id_alias_tsv_and_column_override(tmp_path):
    p = write(tmp_path, "c.tsv", "faq_id\tQ\tA\n1\thello\tworld\n")
    faqs = read_corpus(p, Columns(question="Q", answer="A"))
    assert faqs[0].id == "1" and faqs[0].questions == ["hello"]


def test_tsv_quotes_are_literal(tmp_path):
    p = write(tmp_path, "c.tsv", 'question\tanswer\n"quoted" start\tsay "hi"\n')
    assert read_corpus(p)[0].questions == ['"quoted" start']


def test_a_spreadsheet_header_ending_in_empty_cells_is_read(tmp_path):
    """Excel writes 'id,question,answer,,' when cells beyond the table were ever touched: the
    unnamed columns are empty and ignored (it was 'duplicate column name(s) ; rename them')."""
    p = write(tmp_path, "c.csv", "id,question,answer,,\r\n1,How do I reset?,Use the link.,,\r\n")
    faqs = read_corpus(p)
    assert [(f.id, f.questions, f.answer, f.metadata) for f in faqs] == [("1", ["How do I reset?"], "Use the link.", {})]


def test_jsonl_with_question_list(tmp_path):
    p = write(tmp_path, "c.jsonl", json.dumps({"id": 1, "question": ["a", "b"], "answer": "x"}) + "\n\n"
              + json.dumps({"question": "c", "answer": "y", "variants": ["d"]}) + "\n")
    faqs = read_corpus(p)
    assert faqs[0].id == "1" and faqs[0].questions == ["a", "b"]
    assert faqs[1].questions == ["c", "d"]


def test_later_rows_of_an_faq_add_their_fields_and_a_conflict_is_warned(tmp_path, caplog):
    """A field given on a later row of an FAQ was dropped without a word (the category, a column like
    it, was kept and its conflicts warned about; a hostile probe)."""
    p = write(tmp_path, "m.csv", "id,question,answer,category,owner,team\nm1,How do I return an item?,Open Orders.,,,red\n"
                                 "m1,Can I send it back?,Open Orders.,returns,alice,blue\n")
    with caplog.at_level("WARNING"):
        faq = read_corpus(p)[0]
    assert faq.category == "returns" and faq.metadata == {"owner": "alice", "team": "red"}
    assert any("m.csv:3: FAQ m1 has team 'blue' here but 'red' on line 2; keeping the first" in r.getMessage()
               for r in caplog.records)


def test_a_jsonl_record_in_the_librarys_shape_means_what_it_means_there(tmp_path):
    """"metadata" (an object) and "questions" (a list) were stored as two metadata fields, one question
    indexed and no filter on the fields matching (a hostile probe): they are the FAQ's fields and phrasings."""
    p = write(tmp_path, "r.jsonl", json.dumps({"id": "x", "question": "Pay with card?", "answer": "Yes.",
                                               "questions": ["Do you accept Visa?"], "metadata": {"sku": 5},
                                               "shelf": "B"}) + "\n")
    faq = read_corpus(p)[0]
    assert faq.questions == ["Pay with card?", "Do you accept Visa?"] and faq.metadata == {"sku": 5, "shelf": "B"}
    p = write(tmp_path, "r.csv", 'question,answer,metadata\nq,a,"{""sku"": 5}"\n')  # a CSV cell stays a field
    assert read_corpus(p)[0].metadata == {"metadata": '{"sku": 5}'}


@pytest.mark.parametrize("name,content,line,needle", [
    ("c.csv", "question,reply\nq,a\n", 1, "missing column(s) answer"),
    ("c.csv", "question,answer\nq1,a1\n  ,a2\n", 3, "empty 'question'"),
    ("c.csv", "question,answer\nq1,a1\nq2,   \n", 3, "empty 'answer'"),
    ("c.csv", "question,answer\nq1,a1\nq2,a2,extra\n", 3, "has 3 fields but the header has 2"),
    ("c.csv", "id,question,answer\n1,q1,a1\n2,q2,a2\n1,q3,other\n", 4, "different answer on line 2"),
    ("c.csv", "question,answer\n", None, "corpus is empty"),
    ("c.csv", "\nquestion,answer\nq,a\n", 1, "the first line is blank: the header"),
    ("c.jsonl", '{"id": true, "question": "q", "answer": "a"}\n', 1, "'id' is true; an id is a string or a number"),
    ("c.tsv", "\t\nquestion\tanswer\nq\ta\n", 1, "the first line is blank: the header"),
    ("c.csv", "", None, "corpus is empty"),
    ("c.jsonl", '{"question": "q", "answer": "a"}\n{"question": oops}\n', 2, "invalid JSON"),
    ("c.jsonl", '["q", "a"]\n', 1, "JSON object"),
    ("c.csv", 'question,answer\n"q1,a1\n', 2, "cannot parse"),
    ("c.csv", "id,question,answer,,\n1,q,a,,oops\n", 2, "column 5 has a value but no name"),
    ("c.csv", "id;question;answer\n1;q;a\n", 1, "separates its fields with ';'"),
    ("c.csv", "id，question，answer\n1，怎么开通，去柜台\n", 1, "separates its fields with '，', not ASCII commas"),
    ("c.csv", "id\tquestion\tanswer\n1\tq\ta\n", 1, "pass --format tsv"),
    ("c.csv", '{"id": "a", "question": "q", "answer": "a"}\n', 1, "pass --format jsonl"),
])
def test_errors_name_file_and_line(tmp_path, name, content, line, needle):
    p = write(tmp_path, name, content)
    with pytest.raises(CorpusError) as err:
        read_corpus(p)
    assert err.value.line == line
    assert needle in str(err.value)
    assert str(err.value).startswith(p + (f":{line}" if line else ""))


def test_undecodable_bytes_give_line_and_fix(tmp_path):
    p = write(tmp_path, "c.csv", "question,answer\nq1,a1\ncaf\xe9,a2\n".encode("latin-1"))
    with pytest.raises(CorpusError) as err:
        read_corpus(p)
    assert err.value.line == 3 and "UTF-8" in str(err.value) and "re-save" in str(err.value).lower()


def test_one_column_for_both_question_and_answer_is_refused(tmp_path):
    p = write(tmp_path, "c.csv", "question,answer\nhow do i pay,by card\n")
    with pytest.raises(CorpusError, match="both column 'question'"):  # answers were questions (a hostile probe)
        read_corpus(p, Columns(answer="question"))


def test_a_binary_file_is_named_whatever_its_name_and_utf16_says_its_byte_order(tmp_path):
    """faq.xlsx was told to be renamed .csv (its workbook nature said only once renamed); UTF-16 without a
    byte-order mark was always told `iconv -f utf-16le`, which garbled a big-endian file; a UTF-16 file
    with a BOM was called 'not a text file' (a hostile probe)."""
    x = write(tmp_path, "faq.xlsx", b"PK\x03\x04" + bytes(200))
    with pytest.raises(CorpusError, match="is a ZIP archive .*export the sheet as CSV"):
        read_corpus(x)
    text = "question,answer\nhow do i pay,by card\n"
    for enc, order in (("utf-16-be", "utf-16be"), ("utf-16-le", "utf-16le")):
        p = write(tmp_path, f"{enc}.csv", text.encode(enc))
        with pytest.raises(CorpusError, match=f"iconv -f {order} -t utf-8"):
            read_corpus(p)
    # Russian, Thai or Japanese UTF-16 has few zero bytes: it was "a binary file" (a hostile run)
    rows = "id,question,answer\n" + "".join(f"r{i},Как вернуть товар номер {i}?,Возврат в течение 14 дней\n" for i in range(40))
    for enc, order in (("utf-16-be", "utf-16be"), ("utf-16-le", "utf-16le")):
        thai = "id,question,answer\n" + "".join(f"ท{i},ลืมรหัสผ่านทำอย่างไร,กดลืมรหัสผ่านที่หน้าเข้าสู่ระบบ\n" for i in range(40))
        for sample in (rows, rows.replace("Как вернуть товар номер", "ลืมรหัสผ่าน").replace("Возврат", "返品"), thai):
            with pytest.raises(CorpusError, match=f"UTF-16 text without a byte-order mark.*iconv -f {order}"):
                read_corpus(write(tmp_path, f"ru-{enc}.csv", sample.encode(enc)))
    with pytest.raises(CorpusError, match="is a binary file"):
        read_corpus(write(tmp_path, "binary.csv", b"\x00\x01\x02\n,\x00\x07\x7f" * 300))
    p = write(tmp_path, "bom.csv", text.encode("utf-16"))
    with pytest.raises(CorpusError, match="is UTF-16 text, not UTF-8; re-save it"):
        read_corpus(p)
    t = write(tmp_path, "faq.txt", text)
    with pytest.raises(CorpusError, match=r"name the file \.csv, \.tsv or \.jsonl \(ingest, add, update and upsert"):
        read_corpus(t)


def test_large_corpus_is_parsed_as_it_is_read_and_a_late_bad_byte_still_names_its_line(tmp_path):
    rows = "".join(f"question {i},answer {i % 7}\n" for i in range(20_000))  # far more than one read buffer
    p = write(tmp_path, "c.csv", ("question,answer\n" + rows + "caf\xe9,a2\n").encode("latin-1"))
    with pytest.raises(CorpusError) as err:
        read_corpus(p)
    assert err.value.line == 20_002 and "UTF-8" in str(err.value)
    # a raw U+2028 inside a JSON string does not end a JSONL line, read from the file or from stdin's bytes
    text = "".join(json.dumps({"question": f"q{i}", "answer": "a\u2028b"}, ensure_ascii=False) + "\n"
                   for i in range(5000))
    faqs = read_corpus(write(tmp_path, "d.jsonl", text))
    assert len(faqs) == 1 and len(faqs[0].questions) == 5000
    assert faqs == read_corpus("<stdin>", fmt="jsonl", data=text.encode("utf-8"))


def test_missing_file_and_unknown_extension(tmp_path):
    with pytest.raises(CorpusError, match="file not found"):
        read_corpus(str(tmp_path / "nope.csv"))
    p = write(tmp_path, "c.xlsx", "x")
    with pytest.raises(CorpusError, match="--format"):
        read_corpus(p)


def test_read_texts(tmp_path):
    assert read_texts(write(tmp_path, "t.txt", "a\n\n b \n")) == ["a", "b"]
    assert read_texts(write(tmp_path, "t.csv", "query,x\nq1,1\nq2,2\n")) == ["q1", "q2"]
    assert read_texts(write(tmp_path, "p.tsv", "sentence1\tsentence2\tscore\ns\tt\t1\n")) == ["s", "t"]
    with pytest.raises(CorpusError, match="no text column"):
        read_texts(write(tmp_path, "bad.csv", "foo\n1\n"))


def test_metadata_nested_too_deep_is_refused_with_its_line(tmp_path):
    """Metadata nested past 32 levels was stored, and every later answer carrying it failed to
    serialise (RecursionError: a 500 in the service, a traceback from `ask --json`)."""
    from faqsearch.corpus import FAQ, check_faq

    deep: list = []
    for _ in range(600):
        deep = [deep]
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"id": "a", "question": "q one", "answer": "x"}) + "\n"
                 + json.dumps({"id": "b", "question": "q two", "answer": "y", "extra": deep}) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"c.jsonl:2: FAQ 'b': metadata is nested more than 32 levels"):
        read_corpus(str(p))
    with pytest.raises(CorpusError, match="nested more than 32 levels"):
        check_faq(FAQ("d", "an answer", ["a question"], None, {"x": deep}))
    with pytest.raises(CorpusError, match="must be a JSON object"):
        check_faq(FAQ("d", "an answer", ["a question"], None, ["not", "a", "dict"]))  # type: ignore[arg-type]
    # an integer past 64 bits was stored, and no filter could match it (a filter of it is refused)
    for meta in ({"big": 10 ** 23}, {"x": {"y": [-(2 ** 63) - 1]}}):
        with pytest.raises(CorpusError, match="beyond the 64-bit integers.*as a string"):
            check_faq(FAQ("d", "an answer", ["a question"], None, meta))
    assert check_faq(FAQ("d", "an answer", ["a question"], None, {"n": 2 ** 63 - 1, "f": 1e30, "b": True})).metadata
    nested: dict = {"leaf": 1}
    for _ in range(30):
        nested = {"x": nested}
    assert check_faq(FAQ("d", "an answer", ["a question"], None, nested)).metadata == nested


@pytest.mark.parametrize("rows,needle", [
    ("a,b,5\nc,d,nan\n", "score 'nan' is not a number"),
    ("a,b,5\nc,d,inf\n", "score 'inf' is not a number"),
    ("a,,5\nc,d,1\n", "second sentence ('sentence2') is empty"),
    ("a,b,1\nc,d,1\n", "every pair has the score 1"),
])
def test_pairs_that_give_no_honest_spearman_are_refused(tmp_path, rows, needle):
    """A NaN score was ranked highest (the same file gave -50 instead of +100), constant scores gave
    0.0 and empty sentences were scored."""
    from faqsearch.evaluation import read_pairs

    p = write(tmp_path, "p.csv", "sentence1,sentence2,score\n" + rows)
    with pytest.raises(CorpusError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        read_pairs(p)


def test_a_corpus_error_crosses_a_process_boundary_whole():
    """It could not be unpickled (its __init__ takes three parts), so a worker's CorpusError broke a
    ProcessPoolExecutor instead of arriving with its .path and .line."""
    import pickle

    err = pickle.loads(pickle.dumps(CorpusError("faq.csv", 7, "empty 'answer'")))
    assert (str(err), err.path, err.line, err.message) == ("faq.csv:7: empty 'answer'", "faq.csv", 7, "empty 'answer'")


def test_records_may_be_dicts_and_anything_else_is_named():
    from faqsearch.corpus import FAQ, check_faq

    faq = check_faq({"id": "ax", "question": " Feed an axolotl? ", "questions": ["What do axolotls eat?"],
                     "answer": "Worms.", "category": "pets"})
    assert faq == FAQ("ax", "Worms.", ["Feed an axolotl?", "What do axolotls eat?"], "pets", {})
    assert check_faq({"id": "ax", "questions": "one text", "answer": "a"}).questions == ["one text"]
    with pytest.raises(CorpusError, match="unknown field.*questoin"):
        check_faq({"id": "ax", "questoin": "typo", "answer": "a"})
    with pytest.raises(CorpusError, match="a faqsearch.FAQ or a dict, got str"):
        check_faq("ax")  # type: ignore[arg-type]
    with pytest.raises(CorpusError, match="at least one question"):
        check_faq({"id": "ax", "answer": "a"})
    assert check_faq({"id": 42, "question": "q", "answer": "a"}).id == "42"  # as a JSONL row's number
    from faqsearch.build import as_faqs

    assert [f.id for f in as_faqs({"id": "one", "question": "q", "answer": "a"})] == ["one"]  # one record
    assert check_faq({"question": "q", "answer": "a"}).id.startswith("a")  # as a file row: from the answer
    with pytest.raises(CorpusError, match="metadata must be a JSON object"):
        check_faq({"id": "ax", "question": "q", "answer": "a", "metadata": []})


def test_a_question_two_faqs_share_is_warned_about_naming_both(tmp_path, caplog):
    """The same question (up to case and spacing) under two ids ties in every search, and which FAQ
    answers it was silent: reading the corpus says so, naming the question, both FAQs and their lines."""
    p = tmp_path / "c.csv"
    p.write_text("id,question,answer\na1,How do I pay?,Card.\nc1,Where is it?,Here.\nb1,HOW  do I pay ?,Cash.\n",
                 encoding="utf-8")
    with caplog.at_level("WARNING", logger="faqsearch.corpus"):
        faqs = read_corpus(str(p))
    assert [f.id for f in faqs] == ["a1", "c1", "b1"]  # read as given: a warning, not a refusal
    said = [r.getMessage() for r in caplog.records if "belong to more than one FAQ" in r.getMessage()]
    assert len(said) == 1 and "'How do I pay?' of FAQ a1 from line 2, and 'HOW do I pay ?' of FAQ b1 from line 4" in said[0]
    caplog.clear()
    p.write_text("id,question,answer\na1,How do I pay?,Card.\na1,how do i pay?,Card.\nb1,Where is it?,Here.\n",
                 encoding="utf-8")
    with caplog.at_level("WARNING", logger="faqsearch.corpus"):
        read_corpus(str(p))
    assert not [r for r in caplog.records if "belong to more than one FAQ" in r.getMessage()]  # one FAQ's own: no tie
    caplog.clear()
    p.write_text("id,question,answer\nd1,忘记登录密码怎么办？,A\nd2,信用卡年费,B\nd3,忘记登录密码怎么办?,C\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="faqsearch.corpus"):
        read_corpus(str(p))  # full- and half-width signs read alike (NFKC): the same tie
    assert [r for r in caplog.records if "belong to more than one FAQ" in r.getMessage() and "FAQ d3 from line 4" in r.getMessage()]


def test_a_column_option_naming_no_column_and_a_missing_file_are_said(tmp_path):
    """--variants-column with a typo dropped every variant in silence (150 questions of 450), and a
    missing file with another extension was said to be a format problem."""
    p = tmp_path / "c.csv"
    p.write_text("id,question,variants,answer,category\na,How do I pay?,Can I pay?|Paying?,Card.,billing\n",
                 encoding="utf-8")
    for cols, option in ((Columns(variants="nope"), "--variants-column 'nope'"),
                         (Columns(category="cat"), "--category-column 'cat'")):
        with pytest.raises(CorpusError, match=f"c.csv:1: {option} not found \\(found: id, question, variants"):
            read_corpus(str(p), cols)
    assert len(read_corpus(str(p))[0].questions) == 3
    for missing in ("nope.txt", "nope"):
        with pytest.raises(CorpusError, match="file not found"):
            read_corpus(str(tmp_path / missing))


@pytest.mark.parametrize("header", ["ID,Question,Answer,Category", " Id , QUESTION ,answer,CATEGORY",
                                    "FAQ-ID,question,Answer,category", "faq id,Question,Answer,Category"])
def test_default_column_names_match_whatever_their_case(tmp_path, header):
    """A CMS export headed "ID" had its ids read as a field of each FAQ and new ids made from the answers:
    an upsert of it replaced the whole index."""
    faqs = read_corpus(write(tmp_path, "c.csv", f"{header}\nF1,How do I pay?,By card.,billing\n"
                                                "F1,Can I pay by card?,By card.,billing\nF2,Where is my order?,In Orders.,\n"))
    assert [(f.id, f.questions, f.category, f.metadata) for f in faqs] == [
        ("F1", ["How do I pay?", "Can I pay by card?"], "billing", {}), ("F2", ["Where is my order?"], None, {})]
    jsonl = write(tmp_path, "c.jsonl", '{"ID": "k1", "Question": "Collide?", "Answer": "C.", "Priority": "top"}\n')
    assert [(f.id, f.metadata) for f in read_corpus(jsonl)] == [("k1", {"Priority": "top"})]
    from faqsearch.evaluation import read_labelled_queries  # labelled queries alike

    labelled = write(tmp_path, "q.csv", f"{header.split(',')[1]},{header.split(',')[0]}\nhow do I pay,F1\n")
    assert [(q.text, q.gold) for q in read_labelled_queries(labelled)] == [("how do I pay", {"F1"})]


def test_an_exact_column_name_wins_and_given_names_match_exactly(tmp_path):
    both = write(tmp_path, "b.csv", "id,ID,question,answer\nreal,other,q?,a\n")
    assert [(f.id, f.metadata) for f in read_corpus(both)] == [("real", {"ID": "other"})]
    two = write(tmp_path, "t.csv", "Id,ID,question,answer\nx,y,q?,a\n")  # two alike: neither is taken as the id
    assert read_corpus(two)[0].metadata == {"Id": "x", "ID": "y"}
    with pytest.raises(CorpusError, match="--category-column 'Topic' not found"):
        read_corpus(write(tmp_path, "g.csv", "id,question,answer,topic\n1,q?,a,t\n"), Columns(category="Topic"))
    with pytest.raises(CorpusError, match="missing column"):
        read_corpus(write(tmp_path, "m.csv", "id,Frage,Antwort\n1,q?,a\n"))


def test_what_an_export_says_twice_is_refused_or_warned_of(tmp_path, caplog):
    """Found by a hostile run of corpus round trips: a JSON key given twice kept the second in silence; a
    field both in a JSONL record's metadata object and beside it, and two spellings of one answer, were
    merged without a word; a semicolon CSV with quoted names and a TSV with a quoted line break got
    advice that could not help."""
    with pytest.raises(CorpusError, match=r":1: invalid JSON \(the key 'answer' is given twice; give each field once\)"):
        read_corpus(write(tmp_path, "d.jsonl", '{"id": "k", "question": "Q?", "answer": "a", "answer": "b"}\n'))
    caplog.set_level("WARNING")
    faq, = read_corpus(write(tmp_path, "m.jsonl", '{"id": "k1", "question": "Q?", "answer": "C.", "priority": "top", '
                                                  '"metadata": {"priority": "nested", "other": 1}}\n'))
    assert faq.metadata == {"priority": "top", "other": 1}
    assert "priority 'nested' in its metadata object but 'top' as a field; keeping the field's" in caplog.text
    faq, = read_corpus(write(tmp_path, "s.csv", 'id,question,answer\n1,Where is it?,"Over there, left."\n'
                                                '1,Where can I find it?,"Over  there,  left."\n'))
    assert faq.answer == "Over there, left." and "its answer spaced otherwise here than on line 2" in caplog.text
    with pytest.raises(CorpusError, match="its quoted names are separated by ';', not commas"):
        read_corpus(write(tmp_path, "q.csv", '"id";"question";"answer"\r\n"1";"How do I pay?";"By card; or cash."\r\n'))
    with pytest.raises(CorpusError, match="TSV reads a line as a row: a tab or line break inside a field splits it"):
        read_corpus(write(tmp_path, "t.tsv", 'id\tquestion\tanswer\n1\tQ?\t"line one\nline two"\n'))


def test_files_as_other_software_writes_them(tmp_path):
    """Found by a hostile run of spreadsheet exports: a row without an id joined its FAQ only below it (above,
    it made an FAQ of its own); two "CSV UTF-8" exports joined with cat made an FAQ of the second header (id
    "\\ufeffid", which no command could address); an id ending in a zero-width space made a second FAQ that
    showed as the first; pandas' and Excel's TSV quoting was stored as text."""
    rows = [",Can I send it back?,Open Orders.", "ret-01,How do I return an item?,Open Orders.",
            ",Return policy?,Open Orders."]
    for order in (rows, rows[::-1]):
        faqs = read_corpus(write(tmp_path, "b.csv", "id,question,answer\n" + "\n".join(order) + "\n"))
        assert [(f.id, sorted(f.questions)) for f in faqs] == [
            ("ret-01", ["Can I send it back?", "How do I return an item?", "Return policy?"])]
    joined = "\ufeffid,question,answer\r\na1,How do I pay?,By card.\r\n\ufeffid,question,answer\r\nb1,Where?,Here.\r\n"
    with pytest.raises(CorpusError, match=r":3: repeats the header \(two exports joined into one file\?\)"):
        read_corpus(write(tmp_path, "j.csv", joined.encode("utf-8")))
    faqs = read_corpus(write(tmp_path, "z.csv", "id,question,answer\nret-01,How?,A\nret-01\u200b,Why?,A\n"))
    assert [(f.id, f.questions) for f in faqs] == [("ret-01", ["How?", "Why?"])]
    assert clean_text("\ufeffa b\u200b") == "a b" and clean_text("a\u200bb") == "a\u200bb"  # inside: kept (Thai)
    # direction marks a right-to-left spreadsheet puts before a cell made "\u200fret-01" an FAQ apart
    faqs = read_corpus(write(tmp_path, "rtl.csv", "id,question,answer\nret-01,كيف أرجع المنتج؟,A\n\u200fret-01,"
                                                  "\u200fهل يمكنني الإرجاع؟\u200e,\u202bA\u202c\n"))
    assert [(f.id, f.answer, len(f.questions)) for f in faqs] == [("ret-01", "A", 2)]
    assert clean_text("\u2067مرحبا \u2066Apple Pay\u2069 شكرا\u2069") == "مرحبا \u2066Apple Pay\u2069 شكرا"
    tsv = 'id\t"question"\tanswer\np2\tCan I pay later?\t"Yes: choose ""Pay later"" at checkout."\np3\t"Quoted" start\tsay "hi"\n'
    faqs = read_corpus(write(tmp_path, "p.tsv", tsv))
    assert [(f.questions, f.answer) for f in faqs] == [(["Can I pay later?"], 'Yes: choose "Pay later" at checkout.'),
                                                        (['"Quoted" start'], 'say "hi"')]


def test_misread_files_get_the_fix_that_applies(tmp_path):
    """A semicolon file whose first row holds a comma was told to quote its fields; a JSON array, or
    pretty-printed JSON, was told to rename the file or that each line must be an object; a Mac Roman
    file was told to convert from Windows-1252, which stored "itÕs" and "MontrŽal"."""
    with pytest.raises(CorpusError, match=r"semi.csv:2: has 2 fields but the header has 1; the header is one column "
                                          r"holding ';': this file separates its fields with ';'"):
        read_corpus(write(tmp_path, "semi.csv", "id;question;answer\na1;How do I pay?;By card, or PayPal.\n"))
    array = json.dumps([{"id": "a", "question": "How?", "answer": "A"}])
    for name in ("faq.json", "faq.jsonl"):
        with pytest.raises(CorpusError, match=r"jq -c '\.\[\]' FILE > NEW\.jsonl for a JSON array"):
            read_corpus(write(tmp_path, name, array))
    with pytest.raises(CorpusError, match=r"jq -c \. FILE > NEW\.jsonl for pretty-printed objects"):
        read_corpus(write(tmp_path, "p.jsonl", json.dumps({"question": "How?", "answer": "A"}, indent=2)))
    text = "id,question,answer\n1,Où est mon colis à Montréal?,“Pay later” it’s fine\n"
    for codec, first in (("mac_roman", "MACINTOSH"), ("cp1252", "Windows-1252")):
        with pytest.raises(CorpusError) as err:
            read_corpus(write(tmp_path, f"{codec}.csv", text.encode(codec)))
        assert f"reads as {first}: '1,Où est mon colis à Montréal?" in str(err.value)
        assert f"iconv -f {first} -t UTF-8 FILE > NEW" in str(err.value)
