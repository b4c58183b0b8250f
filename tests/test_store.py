import sqlite3

import pytest

from faqsearch.corpus import FAQ
from faqsearch.backends.embedded.migrations import migrations
from faqsearch.backends.embedded.store import Store


def test_migrations_create_schema_once(tmp_path):
    path = str(tmp_path / "s.db")
    s = Store(path)
    names = [m.name for m in migrations.applied(s.db)]
    assert names == ["m001_initial", "m002_content_hash", "m003_lexical", "m004_lexical_vocab", "m005_settings",
                     "m006_generations", "m007_stemming"]
    assert set(s.db.table_names()) >= {"faqs", "questions"}
    assert {c.name for c in s.db["questions"].columns} == {"id", "faq_id", "text", "source", "lex", "gen", "dead"}
    s.close()
    s2 = Store(path)  # reopening applies nothing again
    assert [m.name for m in migrations.applied(s2.db)] == names
    assert migrations.pending(s2.db) == []
    s2.close()


def test_pending_migration_runs_on_an_older_database(tmp_path):
    """A database created before a migration existed gets it on open, and only once."""
    from sqlite_utils import Database

    path = str(tmp_path / "old.db")
    db = Database(path)
    migrations.apply(db, stop_before="m001_initial")  # simulates a file made before m001
    assert "faqs" not in db.table_names()
    db.close()
    s = Store(path)
    assert "faqs" in s.db.table_names()
    s.close()


def test_insert_and_fetch(tmp_path):
    s = Store(str(tmp_path / "s.db"))
    rows = s.insert_faqs([FAQ("a", "Answer A", ["q1", "q2"], "cat", {"url": "x"}), FAQ("b", "Answer B", ["q3"])])
    assert [r[1] for r in rows] == ["q1", "q2", "q3"]
    got = s.questions([rows[1][0], rows[2][0]])
    assert got[rows[1][0]]["faq_id"] == "a" and got[rows[1][0]]["metadata"] == {"url": "x"}
    assert got[rows[2][0]]["answer"] == "Answer B" and got[rows[2][0]]["source"] == "corpus"
    assert s.counts() == {"faqs": 2, "questions": 3, "max_questions_per_faq": 2}
    more = s.insert_faqs([FAQ("c", "Answer C", ["q4"])], source="added")
    assert more[0][0] == rows[-1][0] + 1  # ids keep growing
    s.close()
    con = sqlite3.connect(str(tmp_path / "s.db"))
    assert con.execute("select source from questions where text='q4'").fetchone() == ("added",)


def test_older_store_gets_lexical_index_for_existing_rows(tmp_path):
    """A store written before m002/m003 is upgraded on open, and its old questions become searchable."""
    from sqlite_utils import Database

    path = str(tmp_path / "v1.db")
    db = Database(path)
    migrations.apply(db, stop_before="m002_content_hash")
    db["faqs"].insert({"id": "a", "answer": "A"})
    db["questions"].insert({"id": 1, "faq_id": "a", "text": "信用卡丢了怎么办", "source": "corpus"})
    db.close()
    s = Store(path)
    assert [m.name for m in migrations.applied(s.db)][-1] == "m007_stemming"
    assert s.faq("a")["answer"] == "A" and [f["id"] for f in s.list_faqs()] == ["a"]  # faqs rebuilt by m006
    assert s.cjk == "unigram+bigram" and s.stem == "none"  # its rows were tokenised that way by m003
    assert s.lexical(["信用卡丢了"], 5)[0][0][0] == 1
    s.insert_faqs([FAQ("b", "B", ["reset my password"])])  # new rows are indexed by the triggers
    assert s.lexical(["password reset"], 5)[0][0][0] == 2
    s.delete_faqs(["b"])
    assert s.lexical(["password"], 5) == [[]]
    s.close()


def test_migration_names_known_to_the_store_match_the_migrations():
    """Store skips sqlite-utils (and its pandas import) when every migration is recorded: the list
    it checks must be the real one."""
    from faqsearch.backends.embedded.migrations import migrations
    from faqsearch.backends.embedded.store import MIGRATIONS

    assert tuple(m.name for m in migrations._migrations) == MIGRATIONS


def test_cjk_tokenisation_is_a_store_setting(tmp_path):
    """New stores tokenise CJK as unigrams (measured better); a store that already had questions
    before the setting existed keeps unigrams + bigrams, which its rows were written with."""
    s = Store(str(tmp_path / "new.db"))
    s.insert_faqs([FAQ("z1", "a", ["忘记登录密码怎么办"])])
    assert s.cjk == "unigram"
    assert s.db.execute("select lex from questions").fetchone()[0].split() == list("忘记登录密码怎么办")
    assert s.lexical(["登录密码"], 5)[0][0][0] == 1
    s.close()
    old = str(tmp_path / "old.db")
    s = Store(old, cjk="unigram+bigram")
    s.insert_faqs([FAQ("z1", "a", ["忘记密码"])])
    s.close()
    conn = sqlite3.connect(old)  # as written before m005: no settings table, no record of it
    conn.execute("drop table settings")
    conn.execute("delete from _sqlite_migrations where name in ('m005_settings', 'm007_stemming')")
    conn.commit()
    conn.close()
    s = Store(old)
    assert s.cjk == "unigram+bigram" and s.lexical(["密码"], 5)[0]
    s.close()


def test_generations_a_reader_sees_its_own_generation_only(tmp_path):
    """Rows written for generation G+1 stay invisible at G; purge(G) undoes a writer that never
    committed; a changed FAQ is a new row, so readers of G keep the old answer."""
    path = str(tmp_path / "g.db")
    s = Store(path)
    s.insert_faqs([FAQ("a", "A", ["how to pay"]), FAQ("b", "B", ["where is my parcel"])])
    s.close()
    w = Store(path, generation=1)
    w.update_faq(FAQ("a", "A2", ["how to pay"]), gen=1)
    w.delete_faqs(["b"], gen=1)
    w.insert_faqs([FAQ("c", "C", ["refund please"])], gen=1)
    r0 = Store(path, generation=0)
    assert r0.faq("a")["answer"] == "A" and r0.faq("b") is not None and r0.faq("c") is None
    assert [f["id"] for f in r0.list_faqs()] == ["a", "b"] and r0.counts()["questions"] == 2
    assert r0.lexical(["refund"], 5) == [[]] and r0.lexical(["parcel"], 5)[0]
    assert [f["id"] for f in w.list_faqs()] == ["a", "c"] and w.faq("a")["answer"] == "A2"
    assert w.lexical(["parcel"], 5) == [[]] and w.lexical(["refund"], 5)[0]
    assert r0.hidden() == 1 and w.hidden() == 1  # c's question for the reader, b's for the writer
    # a writer of generation 1 was killed: the next writer at 0 discards it, the reader's view is the file
    assert w.discard_uncommitted(0) > 0
    assert Store(path, generation=1).faq("a")["answer"] == "A" and r0.hidden() == 0
    # committed generations: removed rows stay for readers of any older generation (until a compaction)
    w2 = Store(path, generation=1)
    w2.delete_faqs(["b"], gen=1)
    w2.insert_faqs([FAQ("b", "B again", ["where is my parcel now"])], gen=1)  # removed and re-added at once
    assert [f["id"] for f in Store(path, generation=1).list_faqs()] == ["a", "b"]
    assert Store(path, generation=1).faq("b")["answer"] == "B again"
    w3 = Store(path, generation=2)
    w3.discard_uncommitted(1)
    w3.delete_faqs(["a"], gen=2)
    w3.discard_uncommitted(2)  # the next writers after commits 2, 3, ...: nothing committed is deleted
    assert Store(path, generation=0).faq("b")["answer"] == "B" and Store(path, generation=0).faq("a")["answer"] == "A"
    assert Store(path, generation=1).faq("a") is not None and Store(path, generation=2).faq("a") is None
    assert Store(path, generation=2).dead_rows() > 0
    # a compaction's private copy keeps exactly one generation
    copy = str(tmp_path / "copy.db")
    Store(path, generation=2).backup(copy)
    c = Store(copy, generation=2)
    c.keep_only(2)
    assert c.hidden() == 0 and c.dead_rows() == 0 and [f["id"] for f in c.list_faqs()] == ["b"]

def test_english_stemming_is_a_store_setting_chosen_by_the_first_questions(tmp_path):
    """A new store of English questions stems them (Snowball English: 'cards' finds 'card', 'arrival'
    finds 'arrive'); one of French questions does not; a store that had questions before the setting
    existed keeps its words as written, and queries are read the same way as its rows."""
    s = Store(str(tmp_path / "en.db"))
    assert s.stem == "none"  # empty: nothing chosen yet
    s.insert_faqs([FAQ("a", "x", ["When will my new card arrive?"]), FAQ("b", "y", ["How do I top up by transfer?"])])
    assert s.stem == "english"
    assert s.db.execute("select lex from questions where faq_id = 'a'").fetchone()[0] == "when will my new card arriv"
    assert [h[0] for h in s.lexical(["cards arrival"], 5)[0]] == [1]
    s.add_questions("b", ["Transferring money in"], first_id=3)  # later rows follow the store's choice
    assert s.db.execute("select lex from questions where id = 3").fetchone()[0] == "transfer money in"
    s.close()
    assert Store(str(tmp_path / "en.db")).stem == "english"
    s = Store(str(tmp_path / "fr.db"))
    s.insert_faqs([FAQ("a", "x", ["Comment réinitialiser mon mot de passe ?"]),
                   FAQ("b", "y", ["Où est ma commande ?"])])
    assert s.stem == "none" and "commande" in s.db.execute("select lex from questions where faq_id = 'b'").fetchone()[0]
    s.close()
    old = str(tmp_path / "old.db")
    s = Store(old)
    s.insert_faqs([FAQ("a", "x", ["When will my cards arrive?"])])
    s.close()
    conn = sqlite3.connect(old)  # as written before m007, its rows unstemmed
    conn.execute("delete from settings where key = 'stem'")
    conn.execute("delete from _sqlite_migrations where name = 'm007_stemming'")
    conn.execute("update questions set lex = 'when will my cards arrive'")
    conn.execute("insert into questions_fts(questions_fts) values('rebuild')")
    conn.commit()
    conn.close()
    s = Store(old)
    assert s.stem == "none" and s.lexical(["cards"], 5)[0] and not s.lexical(["card"], 5)[0]
    s.close()


def test_stemmed_words_match_whatever_accents_or_underscores_they_carry(tmp_path):
    """Stemming applies to words in the form FTS5 stores them (accents removed, split at '_'): a
    query typed without the accents, or a part of a '_'-joined word, still finds the row."""
    s = Store(str(tmp_path / "s.db"))
    s.insert_faqs([FAQ("cv", "x", ["Where do I upload my résumés?"]), FAQ("ch", "y", ["How do I add card_holders?"]),
                   FAQ("nv", "z", ["Is this safe for a naïve user?"])])
    assert s.stem == "english"
    for query, faq in (("resumes", "cv"), ("résumé", "cv"), ("holders", "ch"), ("card holder", "ch"),
                       ("naive users", "nv")):
        found = s.lexical([query], 5)[0]
        assert found and s.question_rows([found[0][0]])[0][1] == faq, query
    s.close()


def test_a_failed_first_insert_leaves_the_stemmer_unchosen(tmp_path, monkeypatch):
    """The choice is written with the rows: a first insert that fails records nothing, and a store
    opened by a second connection follows the choice the first one committed."""
    import faqsearch.backends.embedded.store as store_module

    path = str(tmp_path / "s.db")
    s, other = Store(path), Store(path)
    real = store_module.tokenize
    monkeypatch.setattr(store_module, "tokenize", lambda *a: (_ for _ in ()).throw(RuntimeError("disk gone")))
    with pytest.raises(RuntimeError):
        s.insert_faqs([FAQ("a", "x", ["How do I order cards?"])])
    monkeypatch.setattr(store_module, "tokenize", real)
    assert s.db.execute("select value from settings where key = 'stem'").fetchone()[0] == "auto"
    s.insert_faqs([FAQ("a", "x", ["How do I order cards?"])])
    assert s.stem == "english" and other.stem == "english"
    assert other.lexical(["card"], 5)[0] and other.lexical(["cards"], 5)[0]
    other.insert_faqs([FAQ("b", "y", ["Où est ma commande ?"])])  # the store has chosen: no second choice
    assert other.db.execute("select value from settings where key = 'stem'").fetchone()[0] == "english"
    s.close()
    other.close()


def test_a_store_damaged_past_its_open_checks_is_an_index_format_error(tmp_path):
    """Pages damaged after the first: the library raises a FAQSearchError naming the file and the fix
    (still an sqlite3.DatabaseError for callers that catch that), on reads and on writes."""
    from faqsearch import FAQSearch
    from faqsearch.errors import IndexFormatError

    from .conftest import FakeEncoder, build_index, version

    faqs = [FAQ(f"f{i}", f"answer {i} " * 40, [f"question about topic{i} variant{j}" for j in range(3)])
            for i in range(40)]
    build_index(faqs, tmp_path / "ix", threshold=-1).close()
    db = version(tmp_path / "ix") / "store.db"
    data = bytearray(db.read_bytes())
    for i in range(4096, len(data), 997):  # every page but the first (the schema) damaged
        data[i] ^= 0xFF
    db.write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match="store.db is damaged") as caught:
        with FAQSearch.open(str(tmp_path / "ix"), encoder=FakeEncoder()) as e:
            e.ask("question about topic3 variant1")
            e.list()
    assert isinstance(caught.value, sqlite3.DatabaseError) and "faqsearch ingest" in str(caught.value)
    s = Store(str(db))
    with pytest.raises(IndexFormatError, match="store.db is damaged"):
        s.questions(list(range(1, 121)))
        s.list_faqs()
    s.close()


def test_a_reader_upgrades_an_older_store_in_memory_and_never_writes_the_file(tmp_path):
    """A read (ask, info, serve) migrated an older store in place, without the writers' lock: an older
    faqsearch still in use then failed its next add (NOT NULL constraint failed: faqs.seq), and a
    read-only index was refused as "damaged" with advice to rebuild it. The reader upgrades a copy in
    memory; a writer (any edit) upgrades the file."""
    import hashlib
    import os
    import stat

    from sqlite_utils import Database

    path = str(tmp_path / "v1.db")
    db = Database(path)
    migrations.apply(db, stop_before="m003_lexical")
    db["faqs"].insert({"id": "a", "answer": "A"})
    db["questions"].insert({"id": 1, "faq_id": "a", "text": "where is my parcel", "source": "corpus"})
    migrations.apply(db, stop_before="m006_generations")  # a store of 2026-11-23
    db.close()
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    os.chmod(path, stat.S_IRUSR)  # (root may write it all the same: the digest is what proves nothing wrote)
    reader = Store.open_existing(path, "ix")
    assert reader.faq("a")["answer"] == "A" and reader.lexical(["parcel"], 5)[0][0][0] == 1
    assert reader.counts()["questions"] == 1
    reader.close()
    assert hashlib.sha256(open(path, "rb").read()).hexdigest() == digest
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    writer = Store(path)
    assert [m.name for m in migrations.applied(writer.db)][-1] == "m007_stemming"
    writer.close()
    assert hashlib.sha256(open(path, "rb").read()).hexdigest() != digest
