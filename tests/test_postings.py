"""BM25 from a version's postings arrays: the same scores as FTS5, before and after edits."""
import csv
import json
import os
import shutil

import pytest

import faqsearch.backends.embedded.postings as postings
from faqsearch import FAQ
from faqsearch.backends.embedded.store import Store

from .conftest import build_index

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "sample_data")


def _queries():
    with open(os.path.join(SAMPLE, "queries.csv"), encoding="utf-8") as f:
        texts = [r["query"] for r in csv.DictReader(f)]
    with open(os.path.join(SAMPLE, "offtopic.txt"), encoding="utf-8") as f:
        return texts + [line.strip() for line in f if line.strip()] + ["password password reset", "zzz qqq", ""]


def _fts_only(store, tmp_path, texts, n):
    """The same store file read without arrays (a copy in a directory of its own): FTS5 alone."""
    other = tmp_path / f"fts-{store.generation}"
    other.mkdir()
    shutil.copy(store.path, other / "store.db")
    plain = Store(str(other / "store.db"), generation=store.generation)
    try:
        return plain.lexical(texts, n)
    finally:
        plain.close()


def _same(a, b):
    """The same scores (here the very floats FTS5 computes; a build of SQLite that fuses multiply-adds
    may differ in the last place), in order; score by score the same rows (except at the cut, where
    any of the tied rows may make the list)."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert [s for _, s in x] == pytest.approx([s for _, s in y], rel=1e-12)
        cut = round(x[-1][1], 9) if x else None
        for s in {round(t, 9) for _, t in x} - {cut}:
            assert {i for i, t in x if round(t, 9) == s} == {i for i, t in y if round(t, 9) == s}


@pytest.fixture
def big(monkeypatch, tmp_path):
    """sample_data as a 'large' index: arrays are written from one question up."""
    monkeypatch.setattr(postings, "MIN_QUESTIONS", 1)
    e = build_index(os.path.join(SAMPLE, "faq.csv"), tmp_path / "ix")
    yield e
    e.close()


def _store(e):
    return e.searcher().snap.store


@pytest.mark.slow
def test_arrays_score_as_fts5(big, tmp_path):
    store = _store(big)
    version = os.path.dirname(store.path)
    meta = json.load(open(os.path.join(version, postings.DIR, "meta.json")))
    assert meta["rows"] == store.question_count() and meta["postings"] > meta["rows"]
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(os.path.join(version, postings.DIR)).st_mode & 0o777 == 0o777 & ~umask  # readable as the rest
    texts = _queries()
    got = store.lexical(texts, 40)
    assert store._postings_memo[1] is not None  # served from the arrays
    _same(got, _fts_only(store, tmp_path, texts, 40))
    assert any(len(h) == 40 for h in got) and got[-1] == [] and got[-2] == []


@pytest.mark.slow
def test_edits_in_place_and_rewrites_keep_fts5_scores(big, tmp_path):
    texts = _queries()
    before = _store(big)
    ids = [f["id"] for f in big.list(limit=5)]
    big.add([FAQ("new-1", "Call us.", ["how do I reset my password on the new app", "password reset app"]),
             FAQ("new-2", "Yes.", ["can I return a gift"])])
    big.remove(ids[:2])
    store = _store(big)
    new, old = os.path.dirname(store.path), os.path.dirname(before.path)  # a drop: its delta in a new version
    assert new != old and os.path.samefile(os.path.join(new, postings.DIR, "rows.npy"),
                                           os.path.join(old, postings.DIR, "rows.npy"))  # the arrays linked
    got = store.lexical(texts, 40)
    arrays = store._postings_memo[1]
    assert arrays is not None and arrays[2] and len(arrays[1]) >= 2  # rows above the arrays, rows hidden
    _same(got, _fts_only(store, tmp_path, texts, 40))
    big.refit()  # a new version sharing the store: the arrays are shared too
    store = _store(big)
    assert os.path.isfile(os.path.join(os.path.dirname(store.path), postings.DIR, "meta.json"))
    _same(store.lexical(texts, 40), _fts_only(store, tmp_path, texts, 40))


@pytest.mark.slow
def test_small_versions_and_damaged_arrays_use_fts5(tmp_path, monkeypatch):
    monkeypatch.setattr(postings, "MIN_QUESTIONS", 10_000)
    e = build_index(os.path.join(SAMPLE, "faq.csv"), tmp_path / "ix")
    try:
        store = _store(e)
        assert not os.path.exists(os.path.join(os.path.dirname(store.path), postings.DIR))  # under the minimum
        assert store.lexical(["reset password"], 5)[0]
    finally:
        e.close()
    monkeypatch.setattr(postings, "MIN_QUESTIONS", 1)
    e = build_index(os.path.join(SAMPLE, "faq.csv"), tmp_path / "ix2")
    try:
        store = _store(e)
        rows = os.path.join(os.path.dirname(store.path), postings.DIR, "rows.npy")
        with open(rows, "ab") as f:
            f.write(b"\0" * 4)  # not the size its meta records
        store._postings_memo = None
        got = store.lexical(["reset password"], 5)
        assert store._postings_memo[1] is None and got == _fts_only(store, tmp_path, ["reset password"], 5)
    finally:
        e.close()


@pytest.mark.slow
def test_a_rewrite_writes_arrays_of_its_own(big, tmp_path, monkeypatch):
    import faqsearch.backends.embedded.editor as editor

    monkeypatch.setattr(editor, "delta_limit", lambda n: 0)  # every edit a new base
    before = os.path.dirname(_store(big).path)
    inode = os.stat(os.path.join(before, postings.DIR, "rows.npy")).st_ino
    texts = _queries()
    big.add([FAQ("new-1", "Call us.", ["password reset on the new app"])])
    added = os.path.dirname(_store(big).path)
    assert added != before  # a new base, whose rows up to the arrays' last id are the same: shared
    assert os.stat(os.path.join(added, postings.DIR, "rows.npy")).st_ino == inode
    _same(_store(big).lexical(texts, 40), _fts_only(_store(big), tmp_path, texts, 40))
    assert _store(big)._postings_memo[1][2]  # the added row is ranked by FTS5
    big.remove([f["id"] for f in big.list(limit=2)])
    store = _store(big)
    version = os.path.dirname(store.path)
    assert version != before
    meta = json.load(open(os.path.join(version, postings.DIR, "meta.json")))
    assert meta["rows"] == store.question_count()  # rows removed: arrays of its own, without them
    got = store.lexical(texts, 40)
    assert store._postings_memo[1] is not None and not store._postings_memo[1][2]  # nothing above the arrays
    _same(got, _fts_only(store, tmp_path, texts, 40))


def _small_store(tmp_path):
    store = Store(str(tmp_path / "store.db"))
    store.insert_faqs([FAQ(f"f{i}", "a", [f"menu item {i} at the café", f"reset_password option {i}",
                                          f"reset my password {i}", f"gift card {i} balance"]) for i in range(20)])
    assert postings.write(store._conn, str(tmp_path), 1)
    return store


def test_tokens_fts5_stores_otherwise_and_a_limit_of_zero(tmp_path):
    """FTS5 folds accents and splits at '_': 'café' is no term of its vocabulary, so neither path
    searches it, also when rows added after the arrays hold it (MATCH '"café"' would find 'cafe')."""
    store = _small_store(tmp_path)
    store.add_questions("f1", ["café au lait", "reset_password now"], first_id=1000)
    texts = ["café", "café menu", "reset_password", "menu", "password"]
    _same(store.lexical(texts, 5), _fts_only(store, tmp_path, texts, 5))
    assert store._postings_memo[1] is not None and store._postings_memo[1][2]
    assert store.lexical(["menu"], 0) == [[]]


def test_one_text_reads_one_state_of_the_file(tmp_path):
    """Another process commits rows between two texts of one call: the second text sees the commit
    whole (what is known about the arrays' rows is checked again for every text; each text's reads
    are one read transaction)."""
    _small_store(tmp_path).close()
    reader = Store(str(tmp_path / "store.db"), generation=0)
    writer = Store(str(tmp_path / "store.db"))

    class Texts(list):
        def __iter__(self):
            for k, t in enumerate(list.__iter__(self)):
                yield t
                if k == 0:
                    writer.insert_faqs([FAQ(f"n{i}", "a", [f"password help {i}"]) for i in range(40)], first_id=1000, gen=1)

    got = reader.lexical(Texts(["gift card", "password"]), 3)
    _same(got[1:], _fts_only(reader, tmp_path, ["password"], 3))
    reader.close()
    writer.close()


def test_accented_and_joined_words_match_as_fts5_stores_them(tmp_path, monkeypatch):
    """unicode61 stores 'café' as 'cafe' and 'reset_password' as two terms: the query side looks
    words up in that form, with FTS5 alone and with the arrays."""
    store = Store(str(tmp_path / "store.db"))
    store.insert_faqs([FAQ("fr", "a", ["Où est le café ?"]), FAQ("de", "b", ["Über Straße und Øre"]),
                       FAQ("en", "c", ["reset password help"]), FAQ("x", "d", ["something else entirely"])])
    texts = ["café", "CAFÉ crème", "uber strasse", "straße", "øre", "reset_password"]
    plain = store.lexical(texts, 5)
    assert [h[0][0] if h else None for h in plain] == [1, 1, 2, 2, 2, 3]
    assert postings.write(store._conn, str(tmp_path), 1)
    store._postings_memo = None
    _same(store.lexical(texts, 5), plain)
    assert store._postings_memo[1] is not None
    store.close()


def test_every_version_keeps_arrays_even_one_without_words(tmp_path):
    """Small indexes are served from arrays too (faster than FTS5 at every size measured), and a
    store whose questions hold no word at all still writes them and answers nothing lexically."""
    with build_index(os.path.join(SAMPLE, "faq_zh.csv"), tmp_path / "zh") as e:
        store = _store(e)
        assert os.path.isfile(os.path.join(os.path.dirname(store.path), postings.DIR, "meta.json"))
        texts = ["我的银行卡丢了怎么办", "转账多久到账", "信用卡额度", "password"]
        _same(store.lexical(texts, 20), _fts_only(store, tmp_path, texts, 20))
        assert store._postings_memo[1] is not None  # served from the arrays
    corpus = tmp_path / "symbols.csv"
    corpus.write_text("id,question,answer\na,???,first\nb,!!!,second\n", encoding="utf-8")
    with build_index(str(corpus), tmp_path / "sym") as e:
        store = _store(e)
        meta = json.load(open(os.path.join(os.path.dirname(store.path), postings.DIR, "meta.json")))
        assert meta["rows"] == 2 and meta["postings"] == 0
        assert store.lexical(["???", "anything"], 5) == [[], []] and store._postings_memo[1] is not None
        assert {a.faq_id for a in e.ask("???", mode="dense", threshold=-1, k=2).answers} == {"a", "b"}


@pytest.mark.parametrize("smallest", [1, 10_000], ids=["arrays", "fts5"])
def test_document_frequencies_count_only_the_rows_the_version_sees(tmp_path, monkeypatch, smallest):
    """Found by a hostile run: a feedback undone (and any removed question) stayed in token matching's
    document frequencies, FTS5 counting every row it keeps for older readers, while the row count beside
    them was of visible rows: an index changed its answers' order after a round trip. The counts now
    equal those of a store holding only the visible rows, with and without the postings arrays."""
    monkeypatch.setattr(postings, "MIN_QUESTIONS", smallest)
    e = build_index(os.path.join(SAMPLE, "faq.csv"), tmp_path / "ix")
    try:
        gone = e.list(limit=3)
        words = ["dog", "parcel", "password", "return", "brightwave", "account", "zebra"]
        words += sorted({w.lower() for f in gone for q in e.show(f["id"])["questions"] for w in q["text"].split()
                         if w.isalpha()})
        e.feedback("can I bring my dog and my zebra to the store", gone[-1]["id"])
        e.unassign("can I bring my dog and my zebra to the store", gone[-1]["id"])
        e.add([FAQ("pets", "Only guide dogs.", ["are dogs allowed in the parcel shop"])])
        e.remove([f["id"] for f in gone[:2]])
        store = _store(e)
        got = store.doc_freqs(words)
        assert (getattr(store, "_postings_memo", (0, None))[1] is None) == (smallest > 1)  # the arrays, or FTS5 alone
        other = tmp_path / "visible"
        other.mkdir()
        shutil.copy(store.path, other / "store.db")
        plain = Store(str(other / "store.db"), generation=store.generation)
        try:
            plain.keep_only(store.generation)
            want = plain.doc_freqs(words)
        finally:
            plain.close()
        assert got[1] == want[1] == store.question_count()
        assert {w: got[0].get(w, 0) for w in words} == {w: want[0].get(w, 0) for w in words}
        assert got[0].get("zebra", 0) == 0 and got[0]["dog"] == want[0]["dog"] > 0
    finally:
        e.close()
