"""Issue "Reliability" (#24): never delete what is not ours, never commit a state no one can open,
never answer from rows that are gone. One test per reported item, each failing before its fix."""
import os

import pytest

from faqsearch import FAQ, FAQSearch
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


# 2 ---------------------------------------------------------------------------------------------
KEY = "k3y"


@pytest.fixture
def api(tmp_path, fake_models):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from faqsearch.service import Service, create_app

    path = str(tmp_path / "shop")
    FAQSearch.build(write_corpus(tmp_path), path, encoder=FakeEncoder(), threshold=-1, self_fusion=False).close()
    service = Service({"shop": path}, api_key=KEY, watch=False)
    client = TestClient(create_app(service), raise_server_exceptions=False)
    yield client, service, path
    service.close()


def generation(path):
    import json

    from faqsearch.index.directory import resolve

    return json.load(open(os.path.join(resolve(path), "config.json")))["generation"]


def test_2_a_batch_with_a_repeated_id_is_refused_and_writes_nothing(api, tmp_path):
    from faqsearch.errors import CorpusError

    client, service, path = api
    g = generation(path)
    body = {"faqs": [{"id": "f1", "answer": "answer X", "questions": ["one wording"]},
                     {"id": "f1", "answer": "answer Y", "questions": ["another wording"]}]}
    for url in ("/indexes/shop/faqs/upsert", "/indexes/shop/faqs"):
        r = client.post(url, json=body, headers={"X-API-Key": KEY})
        assert r.status_code == 422 and "'f1' is given twice" in r.json()["error"]
    assert generation(path) == g
    assert client.get("/indexes/shop/ask", params={"q": "question about subject1 variant0"}).json()["answers"][0][
        "faq_id"] == "f1"
    with FAQSearch.open(path, encoder=FakeEncoder()) as e:
        with pytest.raises(CorpusError, match="'d1' is given twice"):
            e.add([FAQ("d1", "answer X", ["x words"]), FAQ("d1", "answer Y", ["y words"])])
        assert "d1" not in {f["id"] for f in e.list()} and e.config["generation"] == g


# 3 ---------------------------------------------------------------------------------------------
def _words(n: int) -> str:
    return f"token{n}a token{n}b token{n}c"


def _run_model(seed: int, edit, open_reader, steps: int = 24):
    """Random batches of edits (repeated ids and unknown ids included) checked against a model of the
    FAQs; readers opened along the way lag behind and must keep answering from their own version."""
    import random

    from faqsearch.errors import CorpusError, UnknownFAQError

    rng = random.Random(seed)
    model = {f"f{i}": (f"answer {i}", [f"question about subject{i} variant{j}" for j in range(2)]) for i in range(6)}
    counter = [1000]
    readers = []

    def fresh_question():
        counter[0] += 1
        return _words(counter[0])

    for step in range(steps):
        kind = rng.choice(["add", "update", "remove", "feedback", "repeat"])
        if kind == "add":
            fid = f"n{step}"
            faqs = [FAQ(fid, f"answer {fid}", [fresh_question(), fresh_question()])]
            edit("add", faqs)
            model[fid] = (faqs[0].answer, faqs[0].questions)
        elif kind == "update" and model:
            fid = rng.choice(sorted(model))
            qs = [model[fid][1][0], fresh_question()]
            edit("update", [FAQ(fid, f"answer {fid} v{step}", qs)])
            old = model[fid][1]  # questions in id order: all kept (an update drops none: #40.3), then the new ones
            model[fid] = (f"answer {fid} v{step}", old + [q for q in qs if q not in old])
        elif kind == "remove":
            fid = rng.choice(sorted(model) + ["unknown"])
            if fid == "unknown":
                with pytest.raises(UnknownFAQError):
                    edit("remove", ["unknown"])
            else:
                edit("remove", [fid])
                del model[fid]
        elif kind == "feedback" and model:
            fid = rng.choice(sorted(model))
            q = fresh_question()
            edit("feedback", (q, fid))
            model[fid] = (model[fid][0], model[fid][1] + [q])
        else:  # a batch naming one id twice: refused whole
            with pytest.raises(CorpusError):
                edit("update", [FAQ("f0", "x", [fresh_question()]), FAQ("f0", "y", [fresh_question()])])
        if step % 4 == 0:
            readers.append((open_reader(), {k: (a, list(q)) for k, (a, q) in model.items()}))
    for reader, expected in readers + [(open_reader(), model)]:
        got = {f["id"]: reader.show(f["id"]) for f in reader.list()}
        assert {k: (v["answer"], [q["text"] for q in v["questions"]]) for k, v in got.items()} == expected
        for fid, (answer, questions) in expected.items():
            for q in questions:
                top = reader.ask(q, k=1, mode="dense").answers[0]
                assert (top.faq_id, top.answer) == (fid, answer), (q, fid)
        reader.close()


@pytest.mark.parametrize("seed", [1, 2])
def test_3_random_edits_through_the_library_with_lagging_readers(tmp_path, seed):
    path = str(tmp_path / "ix")
    engine = FAQSearch.build(write_corpus(tmp_path), path, encoder=FakeEncoder(), threshold=-1, self_fusion=False)

    def edit(kind, arg):
        return engine.feedback(*arg) if kind == "feedback" else getattr(engine, kind)(arg)

    def open_reader():
        r = FAQSearch.open(path, encoder=FakeEncoder())
        r.auto_reload = False
        return r

    _run_model(seed, edit, open_reader)
    engine.close()


def test_3_random_edits_through_the_api_with_lagging_readers(api):
    from faqsearch.errors import CorpusError, UnknownFAQError

    client, service, path = api
    headers = {"X-API-Key": KEY}

    def edit(kind, arg):
        if kind == "add":
            r = client.post("/indexes/shop/faqs", headers=headers, json={"faqs": [
                {"id": f.id, "answer": f.answer, "questions": f.questions} for f in arg]})
        elif kind == "update":
            r = client.post("/indexes/shop/faqs/upsert", headers=headers, json={"faqs": [
                {"id": f.id, "answer": f.answer, "questions": f.questions} for f in arg]})
        elif kind == "remove":
            r = client.delete(f"/indexes/shop/faqs/{arg[0]}", headers=headers)
        else:
            r = client.post("/indexes/shop/feedback", headers=headers, json={"query": arg[0], "faq_id": arg[1]})
        if r.status_code == 404:
            raise UnknownFAQError(r.json()["error"])
        if r.status_code == 422:
            raise CorpusError("<request>", None, r.json()["error"])
        assert r.status_code == 200, r.text

    def open_reader():
        r = FAQSearch.open(path, encoder=FakeEncoder())
        r.auto_reload = False
        return r

    _run_model(3, edit, open_reader)
    # the service answers from the latest version throughout
    assert client.get("/health").status_code == 200


# 4 ---------------------------------------------------------------------------------------------
def test_4_files_swapped_between_two_indexes_are_refused(tmp_path):
    import shutil

    from faqsearch.errors import IndexFormatError
    from faqsearch.index.directory import resolve

    other_rows = [(f"g{i}", f"other words about thing{i} kind{j}", f"other {i}") for i in range(6) for j in range(2)]
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    FAQSearch.build(write_corpus(tmp_path), a, encoder=FakeEncoder(), self_fusion=False).close()
    FAQSearch.build(write_corpus(tmp_path, other_rows, "o.csv"), b, encoder=FakeEncoder(), self_fusion=False).close()
    va, vb = resolve(a), resolve(b)
    for name, why in (("index.faiss", "not the one this version recorded"), ("vectors.npy", "not the one"),
                      ("store.db", "belongs to another index")):
        assert os.path.getsize(os.path.join(va, name)) == os.path.getsize(os.path.join(vb, name)) or name == "store.db"
        shutil.copy(os.path.join(va, name), tmp_path / "keep")
        shutil.copy(os.path.join(vb, name), os.path.join(va, name))
        with pytest.raises(IndexFormatError, match=why):
            FAQSearch.open(a, encoder=FakeEncoder()).ask("question about subject1 variant0")
        shutil.copy(tmp_path / "keep", os.path.join(va, name))
    with FAQSearch.open(a, encoder=FakeEncoder()) as e:
        assert e.ask("question about subject1 variant0", mode="dense").answers[0].faq_id == "f1"


# 5 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["vectors.npy", "ids.npy"])
def test_5_writers_refuse_to_build_on_damaged_vectors(tmp_path, name):
    from faqsearch.errors import IndexFormatError
    from faqsearch.index.directory import resolve

    rows = [(f"f{i}", f"question {i} about subject{i % 50} variant{i}", f"answer {i}") for i in range(1200)]
    path = str(tmp_path / "ix")
    FAQSearch.build(write_corpus(tmp_path, rows), path, encoder=FakeEncoder(dimension=64), self_fusion=False).close()
    file = os.path.join(resolve(path), name)
    data = bytearray(open(file, "rb").read())
    at = len(data) // 4 if name == "vectors.npy" else len(data) - 9  # outside the sampled blocks of a large file
    data[at:at + (64 if name == "vectors.npy" else 8)] = bytes(x ^ 0x5A for x in data[at:at + (64 if name == "vectors.npy" else 8)])
    open(file, "wb").write(bytes(data))
    with pytest.raises(IndexFormatError, match=f"{name} is damaged"):
        e = FAQSearch.open(path, encoder=FakeEncoder(dimension=64))
        e.refit()


# 6 ---------------------------------------------------------------------------------------------
def test_6_nan_and_infinity_are_refused_at_input(tmp_path, run):
    from faqsearch.corpus import read_corpus
    from faqsearch.errors import CorpusError

    p = tmp_path / "c.jsonl"
    p.write_text('{"id": "1", "question": "q", "answer": "a"}\n{"id": "2", "question": "q2", "answer": "b", '
                 '"price": NaN}\n')
    with pytest.raises(CorpusError, match=r"c.jsonl:2: invalid JSON \(NaN is not a JSON value\)"):
        read_corpus(str(p))
    with pytest.raises(CorpusError, match="NaN and Infinity are not JSON"):
        FAQSearch.build([FAQ("1", "a", ["q"], metadata={"price": float("inf")})], str(tmp_path / "ix"),
                        encoder=FakeEncoder())
    result = run("ask", "anything", "-t", "nan", "--index", str(tmp_path / "none"))
    assert result.exit_code == 2 and "not a number" in result.output


# 7 ---------------------------------------------------------------------------------------------
def test_7_out_of_bounds_requests_are_4xx_and_write_nothing(api):
    client, service, path = api
    g = generation(path)
    r = client.post("/indexes/shop/ask", json={"query": "x", "filters": {f"k{i}": "v" for i in range(3000)}})
    assert r.status_code in (413, 422)
    r = client.post("/indexes/shop/ask", json={"query": "x", "filters": {"product": [str(i) for i in range(300)]}})
    assert r.status_code == 422 and "at most" in r.json()["error"]
    assert client.get("/indexes/shop/faqs", params={"offset": 2 ** 63}, headers={"X-API-Key": KEY}).status_code == 422
    r = client.post("/indexes/shop/feedback", headers={"X-API-Key": KEY},
                    json={"query": "new words", "faq_id": "f1", "query_id": 2 ** 63})
    assert r.status_code == 422 and generation(path) == g  # refused before anything was written
    assert client.post("/indexes/shop/ask", json={"query": "   "}).status_code == 422


# 8 ---------------------------------------------------------------------------------------------
def test_8_unreadable_and_deeply_nested_corpora_are_clear_errors(tmp_path, monkeypatch, run):
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


def test_8_damaged_store_deleted_delta_and_hand_edited_config(tmp_path, run):
    import json

    from faqsearch.index.directory import resolve

    path = str(tmp_path / "ix")
    e = FAQSearch.build(write_corpus(tmp_path), path, encoder=FakeEncoder(), self_fusion=False)
    e.add([FAQ("d1", "delta answer", ["delta words"])])
    e.close()
    version_dir = resolve(path)
    config = json.load(open(os.path.join(version_dir, "config.json")))
    # a deleted delta file
    delta = os.path.join(version_dir, config["delta"]["file"])
    os.rename(delta, delta + ".away")
    result = run("ask", "anything", "--index", path)
    assert result.exit_code == 1 and f"{config['delta']['file']} is missing" in result.output
    os.rename(delta + ".away", delta)
    # a hand-edited config value
    bad = dict(config, threshold="high")
    json.dump(bad, open(os.path.join(version_dir, "config.json"), "w"))
    result = run("ask", "anything", "--index", path)
    assert result.exit_code == 1 and "'threshold' must be a number between -1 and 1" in result.output
    json.dump(config, open(os.path.join(version_dir, "config.json"), "w"))
    # a damaged store: edits refuse it, reads say so
    store = os.path.join(version_dir, "store.db")
    data = bytearray(open(store, "rb").read())
    page = (len(data) // 4096) // 2 * 4096  # a page in the middle of the file, overwritten, same size
    data[page:page + 4096] = b"\xa5" * 4096
    open(store, "wb").write(bytes(data))
    result = run("remove", "f1", "--index", path)
    assert result.exit_code == 1 and "store.db" in result.output and "Traceback" not in result.output


def test_8_the_store_is_checked_once_per_state_not_read_whole_on_every_edit(tmp_path, monkeypatch):
    """SQLite's quick check reads the whole store (0.37 s at 1M questions): an edit runs it unless
    this process checked the file in this state or left it so with its own commit. A write made
    elsewhere (another process, a restore, damage) moves the file's change time and is checked."""
    import time

    from faqsearch.errors import IndexFormatError
    from faqsearch.index.directory import resolve
    from faqsearch.backends.embedded.store import Store

    checks = []
    real = Store.check_integrity
    monkeypatch.setattr(Store, "check_integrity", lambda self, where: (checks.append(where), real(self, where)))
    path = str(tmp_path / "ix")
    e = FAQSearch.build(write_corpus(tmp_path), path, encoder=FakeEncoder(), self_fusion=False)
    e.add([FAQ("a1", "first", ["first added words"])])
    assert len(checks) == 1
    e.add([FAQ("a2", "second", ["second added words"])])
    e.remove(["a1"])
    assert len(checks) == 1  # the file as this process's own commits left it
    store = os.path.join(resolve(path), "store.db")
    before = os.stat(store)
    time.sleep(0.01)
    with open(store, "r+b") as fh:  # changed behind the process's back: same size, and its times set
        data = bytearray(fh.read())  # back as cp -p or rsync would; only the change time tells
        page = (len(data) // 4096) // 2 * 4096
        fh.seek(page)
        fh.write(b"\xa5" * 4096)
    os.utime(store, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(store).st_mtime_ns == before.st_mtime_ns and os.stat(store).st_size == before.st_size
    with pytest.raises(IndexFormatError, match="store.db"):
        e.add([FAQ("a3", "third", ["third added words"])])
    assert len(checks) == 2
    e.close()


def test_8_write_failures_say_what_happened_and_commit_nothing(tmp_path, monkeypatch, run):
    import errno

    import faqsearch.files as files_mod

    path = str(tmp_path / "ix")
    assert run("ingest", write_corpus(tmp_path), "--index", path, "-q").exit_code == 0
    before = tree(path)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    add = write_corpus(tmp_path, [("n1", "new words here", "new answer")], "n.csv")
    with monkeypatch.context() as m:
        m.setattr(files_mod.os, "fsync", full)
        result = run("add", add, "--index", path)
    assert result.exit_code == 1 and "no space left on the device" in result.output
    assert {k: v for k, v in tree(path).items() if not k.endswith("store.db")} == \
        {k: v for k, v in before.items() if not k.endswith("store.db")}
    assert not [f for f in tree(path) if f.endswith(".tmp")]  # no half-written file left behind
    assert run("add", add, "--index", path, "-q").exit_code == 0  # and the next edit works


def test_8_milvus_limits_are_checked_before_encoding(tmp_path):
    pytest.importorskip("milvus_lite")
    from faqsearch.errors import CorpusError

    enc = FakeEncoder()
    with pytest.raises(CorpusError, match="over 8192 bytes"):
        FAQSearch.build([FAQ("1", "a", ["word " * 2000])], str(tmp_path / "m"), encoder=enc, backend="milvus",
                        uri=str(tmp_path / "m.db"))
    assert enc.calls == 0


# 9 ---------------------------------------------------------------------------------------------
def test_9_an_id_with_a_slash_works_over_http(api):
    client, service, path = api
    headers = {"X-API-Key": KEY}
    faq = {"id": "billing/refunds", "answer": "slash answer", "questions": ["slash words"]}
    assert client.post("/indexes/shop/faqs", headers=headers, json={"faqs": [faq]}).status_code == 200
    assert client.get("/indexes/shop/faqs/billing/refunds", headers=headers).json()["answer"] == "slash answer"
    r = client.put("/indexes/shop/faqs/billing/refunds", headers=headers, json={**faq, "answer": "changed"})
    assert r.status_code == 200
    assert client.get("/indexes/shop/faqs/billing/refunds", headers=headers).json()["answer"] == "changed"
    assert client.delete("/indexes/shop/faqs/billing/refunds", headers=headers).status_code == 200
    assert client.get("/indexes/shop/faqs/billing/refunds", headers=headers).status_code == 404


def test_9_many_questions_under_one_id_are_read_once_each(tmp_path):
    from faqsearch.corpus import read_corpus

    p = tmp_path / "big.csv"
    p.write_text("id,question,answer\n" + "".join(f"one,question number {i},the answer\n" for i in range(40_000))
                 + "one,question number 7,the answer\n")
    faqs = read_corpus(str(p))
    assert len(faqs) == 1 and len(faqs[0].questions) == 40_000
