"""A damaged, missing or swapped file of an index is a one-line error that names it and the fix,
never a wrong answer or a traceback."""
import json
import os

import pytest

from faqsearch import FAQ, FAQSearch
from faqsearch.errors import IndexFormatError
from faqsearch.index.config import FILES
from faqsearch.index.directory import resolve

from .conftest import FakeEncoder, build_index, faq_rows, version, write_corpus

ROWS = faq_rows(15, 3)
FEW = faq_rows(6, 2)


def test_missing_or_empty_store_is_an_error_naming_the_file(built, run, tmp_path):
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


@pytest.mark.parametrize("seed", range(1, 6))
def test_random_bytes_over_the_stores_schema_are_a_damaged_store(tmp_path, run, seed):
    """Garbage over the schema pages gives SQLite's "malformed schema" or names Python cannot decode
    (a UnicodeDecodeError, not a DatabaseError): both are the one-line damaged-store error."""
    import random

    path = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, FEW), path).close()
    rng = random.Random(seed)
    with open(os.path.join(version(path), FILES["store"]), "r+b") as fh:
        fh.seek(4000)
        fh.write(bytes(rng.randrange(256) for _ in range(200)))
    result = run("ask", "hello", "--index", path)
    assert result.exit_code == 1 and "store.db is damaged" in result.output and "Traceback" not in result.output


def test_damaged_faiss_file_is_an_error_not_an_answer(built, run):
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


def test_damaged_transform_file_is_an_error(built, run):
    white = os.path.join(version(built.path), FILES["whitening"])
    size = os.path.getsize(white)
    open(white, "wb").write(b"\0" * size)  # same size, nothing readable
    result = run("ask", "anything", "--index", built.path)
    assert result.exit_code == 1 and "whitening.npz is damaged" in result.output and "Aborted" not in result.output


def test_files_swapped_between_two_indexes_are_refused(tmp_path):
    import shutil

    from faqsearch.errors import IndexFormatError
    from faqsearch.index.directory import resolve

    other_rows = [(f"g{i}", f"other words about thing{i} kind{j}", f"other {i}") for i in range(6) for j in range(2)]
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    build_index(write_corpus(tmp_path, FEW), a, self_fusion=False).close()
    build_index(write_corpus(tmp_path, other_rows, "o.csv"), b, self_fusion=False).close()
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


# every file of a version is recorded at commit and checked at open
def _flip(file, at):
    data = bytearray(open(file, "rb").read())
    data[at] ^= 0x5A
    open(file, "wb").write(bytes(data))


def test_lexical_files_swapped_or_flipped_are_refused_at_open(tmp_path, run):
    """lexical/rows.npy of an index of the same corpus in another row order (the same size) gave wrong
    first answers with exit 0: every file under lexical/ is recorded at commit and checked at open."""
    import shutil

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    build_index(write_corpus(tmp_path, ROWS), a, self_fusion=False).close()
    build_index(write_corpus(tmp_path, ROWS[::-1], "r.csv"), b, self_fusion=False).close()
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


@pytest.mark.slow
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


@pytest.mark.parametrize("name", ["vectors.npy", "ids.npy"])
def test_writers_refuse_to_build_on_damaged_vectors(tmp_path, name):
    from faqsearch.errors import IndexFormatError
    from faqsearch.index.directory import resolve

    rows = [(f"f{i}", f"question {i} about subject{i % 50} variant{i}", f"answer {i}") for i in range(1200)]
    path = str(tmp_path / "ix")
    build_index(write_corpus(tmp_path, rows), path, encoder=FakeEncoder(dimension=64), self_fusion=False).close()
    file = os.path.join(resolve(path), name)
    data = bytearray(open(file, "rb").read())
    at = len(data) // 4 if name == "vectors.npy" else len(data) - 9  # outside the sampled blocks of a large file
    data[at:at + (64 if name == "vectors.npy" else 8)] = bytes(x ^ 0x5A for x in data[at:at + (64 if name == "vectors.npy" else 8)])
    open(file, "wb").write(bytes(data))
    with pytest.raises(IndexFormatError, match=f"{name} is damaged"):
        e = FAQSearch.open(path, encoder=FakeEncoder(dimension=64))
        e.refit()


def test_damaged_store_deleted_delta_and_hand_edited_config_are_refused(tmp_path, run):
    import json

    from faqsearch.index.directory import resolve

    path = str(tmp_path / "ix")
    e = build_index(write_corpus(tmp_path, FEW), path, self_fusion=False)
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


def test_the_store_is_checked_once_per_state_not_read_whole_on_every_edit(tmp_path, monkeypatch):
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
    e = build_index(write_corpus(tmp_path, FEW), path, self_fusion=False)
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
    with pytest.raises(IndexFormatError, match="store.db"):  # (an add's plan may read the damage first: a
        e.remove(["a2"])  # question another FAQ keeps is looked for in the store's lexical index)
    assert len(checks) == 2
    e.close()
