"""Issue "Reliability": one test per reported hole (numbered as in the issue), each failing on the
code before the fix. Fake encoder throughout; subprocesses where a kill is needed."""
import gzip
import json
import os
import subprocess
import sys
import zipfile

import pytest
from click.testing import CliRunner

from faqsearch import FAQSearch
from faqsearch.cli import cli
from faqsearch.index.config import FILES
from faqsearch.corpus import FAQ, read_corpus
from faqsearch.errors import CorpusError, FAQSearchError, IndexFormatError
from faqsearch.index.directory import resolve
from faqsearch.tuning import Setting

from .conftest import ROOT, FakeEncoder, index_entries, version

ROWS = [(f"f{i}", f"question about subject{i} variant{j}", f"answer {i}") for i in range(15) for j in range(3)]


def write_corpus(tmp_path, rows=ROWS, name="c.csv"):
    p = tmp_path / name
    p.write_text("id,question,answer\n" + "".join(f"{i},{q},{a}\n" for i, q, a in rows), encoding="utf-8")
    return str(p)


@pytest.fixture
def built(tmp_path):
    e = FAQSearch.build(write_corpus(tmp_path), str(tmp_path / "ix"), encoder=FakeEncoder(), threshold=-1)
    yield e
    e.close()



def consistent(path):
    """Open afresh: store, config and FAISS agree (open checks it) and every question finds its FAQ."""
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        n = len(e.store.all_questions())
        assert len(e.index) == n + e.config["index"].get("tombstones", 0)
        for qid, fid, text in e.store.all_questions()[:: max(1, n // 10)]:
            assert fid in [a.faq_id for a in e.ask(text, k=3, mode="dense").answers], text
        return n


# 1 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["refit", "tune-apply"])
def test_1_refit_after_another_writers_add_keeps_the_add(built, tmp_path, mode):
    stale = FAQSearch.open(built.path, encoder=FakeEncoder())  # opened before the other process's add
    built.add([FAQ("new", "new answer", ["a completely novel wording", "another novel wording"])])
    if mode == "refit":
        stale.refit(Setting(True, 0.0, 0.0, 8))
    else:  # what tune --apply does with its chosen setting and threshold
        stale.refit(Setting(True, 1.0, 1.0, None), threshold=0.1)
    assert consistent(built.path) == 47
    with FAQSearch.open(built.path, encoder=FakeEncoder()) as fresh:
        assert fresh.ask("a completely novel wording", mode="hybrid").answers[0].faq_id == "new"
    stale.close()


# 2 ---------------------------------------------------------------------------------------------
def test_2_ids_of_tombstoned_vectors_are_never_reused(tmp_path):
    e = FAQSearch.build(write_corpus(tmp_path), str(tmp_path / "ix"), encoder=FakeEncoder(), index_type="hnsw",
                        threshold=-1)
    removed_text = "question about subject14 variant2"  # the last FAQ: it holds the largest ids
    top = max(q[0] for q in e.store.all_questions())
    e.remove(["f14"])
    e.add([FAQ("other", "unrelated answer", ["zebra xylophone quartz"] * 1 + ["zebra xylophone", "quartz zebra"])])
    assert min(q[0] for q in e.store.all_questions() if q[1] == "other") > top
    hits = e.ask(removed_text, k=5, mode="dense").answers
    assert all(a.faq_id != "other" for a in hits), [(a.faq_id, a.score) for a in hits]
    e.close()


# 3 ---------------------------------------------------------------------------------------------
KILLER = r"""
import os, shutil, sys
sys.path.insert(0, {root!r})
import numpy as np
from tests.conftest import FakeEncoder
from faqsearch import FAQSearch
from faqsearch.corpus import FAQ

kill_at = int(sys.argv[1])
calls = [0]

def wrap(fn):
    def inner(*a, **k):
        calls[0] += 1
        if calls[0] == kill_at:
            os._exit(9)  # like SIGKILL: no cleanup, no finally blocks
        return fn(*a, **k)
    return inner

e = FAQSearch.open(sys.argv[2], encoder=FakeEncoder())
for mod, name in [(os, "replace"), (os, "rename"), (os, "symlink"), (os, "link"), (os, "rmdir"), (os, "remove"),
                  (os, "mkdir"), (shutil, "rmtree"), (os, "fsync")]:
    setattr(mod, name, wrap(getattr(mod, name)))
np.save = wrap(np.save)
if sys.argv[3] == "add":
    e.add([FAQ("new", "new answer", ["brand new wording here"])])
else:
    e.remove(["f3"])
print("calls", calls[0])
"""


def _kill_run(path, step, what):
    code = KILLER.format(root=ROOT)
    return subprocess.run([sys.executable, "-c", code, str(step), path, what], capture_output=True, text=True,
                          timeout=120)


def make_legacy(path: str, layout: str) -> None:
    """Turn an index into one of the two older layouts: a symbolic link to a sibling version
    ``.NAME.v-<random>`` (locked through ``.NAME.lock``), or a plain directory of version files
    written before deltas (no ids.npy) and before file fingerprints (sizes only)."""
    import shutil

    real = str(version(path))
    shutil.rmtree(os.path.join(real, "lexical"), ignore_errors=True)  # both layouts predate the postings arrays
    config = json.load(open(os.path.join(real, "config.json")))
    config["files"] = {k: v["bytes"] for k, v in config["files"].items() if "/" not in k}  # no lexical/ records then
    config.pop("index_id", None)
    json.dump(config, open(os.path.join(real, "config.json"), "w"))
    parent, name = os.path.split(path)
    sibling = os.path.join(parent, f".{name}.v-abc123")
    shutil.move(real, sibling)
    shutil.rmtree(path)
    if layout == "link":
        os.symlink(os.path.basename(sibling), path)
        open(os.path.join(parent, f".{name}.lock"), "w").close()
    else:
        os.rename(sibling, path)
        os.remove(os.path.join(path, "ids.npy"))
        del config["files"]["ids.npy"]
        json.dump(config, open(os.path.join(path, "config.json"), "w"))


# the older layouts with one edit: the first write of any edit moves them with the same steps (the
# migration), and both edits' own steps are those of the current layout (each row ran both: 60 s more)
@pytest.mark.parametrize("what,layout", [("add", "current"), ("remove", "current"), ("add", "link"),
                                         ("remove", "plain")])
def test_3_killed_at_every_step_an_index_answers_at_the_path(tmp_path, layout, what):
    """Every layout, the two older ones moved to the directory layout by this first write: killed at
    each file operation, the index at the path opens and answers, in the old state or the new."""
    path = str(tmp_path / "ix")
    FAQSearch.build(write_corpus(tmp_path), path, encoder=FakeEncoder(), threshold=-1, self_fusion=False).close()
    if layout != "current":
        make_legacy(path, layout)
    pristine = tmp_path / "pristine"
    os.mkdir(pristine)
    os.system(f"cp -a {tmp_path}/ix {tmp_path}/.ix.* {pristine}/ 2>/dev/null")
    step, outcomes = 1, set()
    while True:
        done = _kill_run(path, step, what)
        assert done.returncode in (0, 9), done.stderr
        assert os.path.isdir(resolve(path)), f"nothing at the path after a kill at step {step}"
        with FAQSearch.open(path, encoder=FakeEncoder()) as e:
            faqs = {f["id"] for f in e.list()}
            new_state = ("new" in faqs) if what == "add" else ("f3" not in faqs)
            outcomes.add(new_state)
            assert e.ask("question about subject5 variant1", mode="dense").answers[0].faq_id == "f5"
            if new_state and what == "add":
                assert e.ask("brand new wording here", mode="dense").answers[0].faq_id == "new"
        consistent(path)
        if done.returncode == 0:
            break
        # start every step from the same state, in the same layout
        os.system(f"rm -rf {tmp_path}/ix {tmp_path}/.ix.*; cp -a {pristine}/. {tmp_path}/")
        step += 1
        assert step < 80
    assert outcomes == {False, True} or step > 1
    # leftovers of the killed runs are gone after the next write; only the index directory remains
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        e.add([FAQ("last", "last answer", ["one more wording"])])
    os.system(f"rm -rf {pristine}")
    kept = ["ix/v<generation>"] if what == "remove" else []  # a remove makes a new version; the one before stays
    assert index_entries(tmp_path) == ["c.csv", "ix", "ix/CURRENT", "ix/LOCK", "ix/v<generation>"] + kept


# 4 ---------------------------------------------------------------------------------------------
def test_4_missing_or_empty_store_is_an_error_naming_the_file(built, run, tmp_path):
    store = os.path.join(version(built.path), FILES["store"])
    os.remove(store)
    with pytest.raises(IndexFormatError, match="store.db is missing"):
        FAQSearch.open(built.path, encoder=FakeEncoder())
    for cmd in (["ask", "hello"], ["list"], ["show", "f1"], ["add", write_corpus(tmp_path, [("z", "q z", "a z")], "n.csv")]):
        result = run(*cmd, "--index", built.path)
        assert result.exit_code == 1 and "store.db is missing" in result.output and "faqsearch ingest" in result.output
    assert not os.path.exists(store)  # list did not create an empty one
    open(store, "wb").close()
    result = run("ask", "hello", "--index", built.path)
    assert result.exit_code == 1 and "store.db is empty" in result.output


def test_4_damaged_faiss_file_is_an_error_not_an_answer(built, run):
    faiss_file = os.path.join(version(built.path), FILES["faiss"])
    data = bytearray(open(faiss_file, "rb").read())
    mid = len(data) // 2
    data[mid - 64:mid + 64] = b"\x7f" * 128  # floats of about 3e38, same size
    open(faiss_file, "wb").write(bytes(data))
    result = run("ask", "question about subject3 variant1", "--index", built.path, "--mode", "dense")
    assert result.exit_code == 1 and "index.faiss is damaged" in result.output and "1." not in result.output
    open(faiss_file, "wb").write(bytes(data[: len(data) // 3]))  # truncated
    result = run("ask", "anything", "--index", built.path)
    assert result.exit_code == 1 and "index.faiss is damaged" in result.output


def test_4_damaged_transform_file_is_an_error(built, run):
    white = os.path.join(version(built.path), FILES["whitening"])
    size = os.path.getsize(white)
    open(white, "wb").write(b"\0" * size)  # same size, nothing readable
    result = run("ask", "anything", "--index", built.path)
    assert result.exit_code == 1 and "whitening.npz is damaged" in result.output and "Aborted" not in result.output


# 5 ---------------------------------------------------------------------------------------------
def test_5_control_only_questions_are_refused_and_text_is_normalised(tmp_path, run, built):
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


# 6 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["dense", "hybrid", "lexical"])
def test_6_invalid_utf8_queries_are_answered_one_line_each(built, tmp_path, mode):
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


# 7 ---------------------------------------------------------------------------------------------
def test_7_jsonl_line_separators_inside_strings_and_non_string_answers(tmp_path):
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


# 8 ---------------------------------------------------------------------------------------------
def test_8_file_kinds_are_named_and_advice_is_right(tmp_path, run, built):
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


def test_8_index_type_typo_fails_before_encoding(tmp_path):
    enc = FakeEncoder()
    with pytest.raises(FAQSearchError, match="unknown --index-type 'hnws'"):
        FAQSearch.build(write_corpus(tmp_path), str(tmp_path / "ix"), encoder=enc, index_type="hnws")
    assert enc.calls == 0


def test_8_edits_read_their_input_before_loading_the_model(built, tmp_path, monkeypatch):
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


# 9 ---------------------------------------------------------------------------------------------
def test_9_reingest_refuses_to_drop_added_faqs_without_replace(run, tmp_path):
    ix, corpus = tmp_path / "ix", write_corpus(tmp_path)
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


def test_9_reingest_refuses_to_drop_feedback_questions_without_force_or_replace(run, tmp_path):
    """The FAQs are all kept, one holds a feedback question the corpus lacks: refused, naming its
    source; --force (its old meaning) or --replace drops it."""
    ix, corpus = tmp_path / "ix", write_corpus(tmp_path)
    assert run("ingest", corpus, "--index", ix, "-q").exit_code == 0
    for flag in ("--force", "--replace"):
        assert run("feedback", "a wording nobody wrote down", "f1", "--index", ix).exit_code == 0
        result = run("ingest", corpus, "--index", ix, "-q")
        assert result.exit_code == 1 and "(1 from feedback)" in result.output and "--replace" in result.output
        assert run("ingest", corpus, "--index", ix, "-q", flag).exit_code == 0
        assert "a wording nobody wrote down" not in run("show", "f1", "--index", ix).output


# 10 --------------------------------------------------------------------------------------------
def test_10_show_list_info_follow_another_writers_edit(built):
    reader = FAQSearch.open(built.path, encoder=FakeEncoder())
    assert reader.info()["counts"]["faqs"] == 15
    built.add([FAQ("new", "new answer", ["fresh wording"])])
    reader._checked -= 10  # the reload check runs at most once a second; pretend a second passed
    assert reader.info()["counts"]["faqs"] == 16
    reader._checked -= 10
    assert "new" in [f["id"] for f in reader.list()]
    reader._checked -= 10
    assert reader.show("new")["answer"] == "new answer"
    reader.close()


def test_10_index_directories_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        e = FAQSearch.build(write_corpus(tmp_path), str(tmp_path / "ix"), encoder=FakeEncoder())
        assert os.stat(e.path).st_mode & 0o777 == 0o755 and os.stat(version(e.path)).st_mode & 0o777 == 0o755
        e.add([FAQ("new", "n", ["fresh wording"])])
        assert os.stat(version(e.path)).st_mode & 0o777 == 0o755
        e.close()
    finally:
        os.umask(old)


# 11 --------------------------------------------------------------------------------------------
def test_11_cli_cosmetics(run, tmp_path, built):
    corpus = write_corpus(tmp_path)
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


def test_11_ingest_progress_moves_before_4096_texts():
    from faqsearch.build import encode_stream as _encode_stream

    enc = FakeEncoder()
    _encode_stream(enc, [f"text {i}" for i in range(600)], batch_size=64, progress=True)
    assert enc.calls == 3  # 256 + 256 + 88: the bar moves every 256 texts


# the files of a version (#40.4, #40.8, #40.11) ------------------------------------------------------
def _flip(file, at):
    data = bytearray(open(file, "rb").read())
    data[at] ^= 0x5A
    open(file, "wb").write(bytes(data))


def test_lexical_files_swapped_or_flipped_are_refused_at_open(tmp_path, run):
    """lexical/rows.npy of an index of the same corpus in another row order (the same size) gave wrong
    first answers with exit 0: every file under lexical/ is recorded at commit and checked at open."""
    import shutil

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    FAQSearch.build(write_corpus(tmp_path), a, encoder=FakeEncoder(), self_fusion=False).close()
    FAQSearch.build(write_corpus(tmp_path, ROWS[::-1], "r.csv"), b, encoder=FakeEncoder(), self_fusion=False).close()
    va, vb = resolve(a), resolve(b)
    files = json.load(open(os.path.join(va, "config.json")))["files"]
    assert {n for n in os.listdir(os.path.join(va, "lexical"))} == {n[len("lexical/"):] for n in files
                                                                    if n.startswith("lexical/")}
    rows = os.path.join(va, "lexical", "rows.npy")
    keep = open(rows, "rb").read()
    assert os.path.getsize(os.path.join(vb, "lexical", "rows.npy")) == len(keep)
    shutil.copy(os.path.join(vb, "lexical", "rows.npy"), rows)
    with pytest.raises(IndexFormatError, match="lexical/rows.npy is damaged .*not the one this version recorded"):
        FAQSearch.open(a, encoder=FakeEncoder())
    result = run("ask", "question about subject3 variant1", "--index", a, "--mode", "lexical")
    assert result.exit_code == 1 and "lexical/rows.npy is damaged" in result.output and "--force" in result.output
    open(rows, "wb").write(keep)
    _flip(rows, len(keep) - 5)
    with pytest.raises(IndexFormatError, match="lexical/rows.npy is damaged"):
        FAQSearch.open(a, encoder=FakeEncoder())
    open(rows, "wb").write(keep)
    with FAQSearch.open(a, encoder=FakeEncoder()) as e:
        assert e.ask("question about subject3 variant1", mode="lexical").answers[0].faq_id == "f3"


def test_missing_or_incomplete_file_records_are_refused(built, run):
    """Emptied `files` records turned every file check off (a swapped index.faiss then answered wrongly):
    a version whose config.json lacks the record of a file it has is refused, naming the fix. A config
    from before records were written (no `next_question_id` either: before 2026-11-22) still opens,
    and folders whose files its config does not record are not read (BM25 from FTS5)."""
    config_path = os.path.join(version(built.path), "config.json")
    config = json.load(open(config_path))
    records = config["files"]
    assert "lexical/rows.npy" in records and "index.faiss" in records
    for files in ({}, None, {k: v for k, v in records.items() if k != "index.faiss"},
                  {k: v for k, v in records.items() if k != "lexical/rows.npy"}):
        json.dump({**config, "files": files} if files is not None else
                  {k: v for k, v in config.items() if k != "files"}, open(config_path, "w"))
        with pytest.raises(IndexFormatError, match=r"keeps no record of (index\.faiss|whitening\.npz|lexical/rows\.npy) "
                                                   r"\(its 'files' records are missing or incomplete\)"):
            FAQSearch.open(built.path, encoder=FakeEncoder())
    result = run("ask", "question about subject3 variant1", "--index", built.path)
    assert result.exit_code == 1 and "keeps no record of lexical/rows.npy" in result.output
    assert "Restore config.json" in result.output and "--force" in result.output
    old = {k: v for k, v in config.items() if k not in ("files", "next_question_id", "index_id")}
    json.dump(old, open(config_path, "w"))
    with FAQSearch.open(built.path, encoder=FakeEncoder()) as e:
        assert e.searcher().snap.store.read_arrays is False
        assert e.ask("question about subject3 variant1", mode="lexical").answers[0].faq_id == "f3"
    json.dump(config, open(config_path, "w"))


def test_a_damaged_posting_the_open_does_not_sample_is_a_clean_error(tmp_path, run, fake_models):
    """A flipped byte of lexical/rows.npy outside the three blocks the open's fingerprint reads gave an
    IndexError traceback on the command line and HTTP 500: it is a one-line error naming the file."""
    import numpy as np
    from fastapi.testclient import TestClient

    from faqsearch.build import StorageSpec, build
    from faqsearch.files import SAMPLE
    from faqsearch.backends.embedded.postings import Postings
    from faqsearch.service import Service, create_app

    rows = [(f"f{i}", f"alpha{i % 1009} beta{i % 1013} gamma{i % 1019} delta{i % 1021}", f"answer {i}")
            for i in range(16000)]
    path = str(tmp_path / "ix")
    build(write_corpus(tmp_path, rows), path, encoder=FakeEncoder(), threshold=-1, storage=StorageSpec(index_type="flat"))
    arrays = Postings.open(resolve(path))
    file = os.path.join(resolve(path), "lexical", "rows.npy")
    size = os.path.getsize(file)
    header = size - 4 * len(arrays.rows)
    at = header + (SAMPLE + 4096 - header) // 4 * 4  # a row between the first and the middle sampled block
    assert SAMPLE < at and at + 4 < size // 2 - SAMPLE // 2
    j = int(np.searchsorted(arrays.starts, (at - header) // 4, side="right")) - 1
    term = bytes(arrays.terms[arrays.term_start[j]:arrays.term_start[j + 1]]).decode()
    del arrays
    data = bytearray(open(file, "rb").read())
    data[at + 3] = 0x3F  # the high byte of a little-endian int32: a row far beyond the last
    open(file, "wb").write(bytes(data))
    result = run("ask", term, "--index", path, "--mode", "lexical")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "lexical/rows.npy is damaged (a posting names row" in result.output and "--force" in result.output
    client = TestClient(create_app(Service({"ix": path}, watch=False)), raise_server_exceptions=False)
    r = client.get("/indexes/ix/ask", params={"q": term, "mode": "lexical"})
    assert r.status_code == 503 and "lexical/rows.npy is damaged" in r.json()["error"]


@pytest.mark.parametrize("content", [b"\xff\xfe\x00v0000\n", b"v0000000\xe9\n", b"nonsense\n"])
def test_current_with_bytes_that_are_not_utf8_is_a_damaged_current(built, run, tmp_path, content):
    """A CURRENT of non-UTF-8 bytes gave a UnicodeDecodeError traceback (`ask`, `add`): it is the
    one-line error of any other damaged CURRENT."""
    open(os.path.join(built.path, "CURRENT"), "wb").write(content)
    new = write_corpus(tmp_path, [("z", "q z", "a z")], "n.csv")
    for cmd in (["ask", "hello"], ["add", new], ["list"]):
        result = run(*cmd, "--index", built.path)
        assert result.exit_code == 1 and "CURRENT is damaged" in result.output and "backup" in result.output, cmd
    with pytest.raises(IndexFormatError, match="CURRENT is damaged"):
        FAQSearch.open(built.path, encoder=FakeEncoder())


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
            "ingest": ["ingest", write_corpus(tmp_path), "--index", str(folder), "-q", "--force"]}[command]
    result = run(*args)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "that faqsearch did not write" in result.output and "move that away yourself" in result.output
    assert state() == before
