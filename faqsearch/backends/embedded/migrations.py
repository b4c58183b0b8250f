"""Schema of the SQLite store, created and changed only through named migrations.

Uses sqlite-utils' own ``Migrations``: each function runs once per database, in order, and is
recorded in the ``_sqlite_migrations`` table under the set name ``faqsearch``.
"""
from __future__ import annotations

from sqlite_utils import Database, Migrations

migrations = Migrations("faqsearch")


@migrations()
def m001_initial(db: Database) -> None:
    db["faqs"].create(
        {"id": str, "answer": str, "category": str, "metadata": str},
        pk="id", not_null={"answer"},
    )
    db["questions"].create(
        {"id": int, "faq_id": str, "text": str, "source": str},
        pk="id", not_null={"faq_id", "text", "source"}, foreign_keys=[("faq_id", "faqs", "id")],
    )
    db["questions"].create_index(["faq_id"])


@migrations()
def m002_content_hash(db: Database) -> None:
    """A hash of each FAQ's content, so a re-read corpus is diffed without comparing every text."""
    db["faqs"].add_column("content_hash", str)


@migrations()
def m003_lexical(db: Database) -> None:
    """Full-text index of the questions for lexical and hybrid matching.

    ``lex`` holds the question pre-tokenised by faqsearch.lexical.tokenize (Latin words, CJK
    character unigrams and bigrams), so FTS5's plain unicode61 tokenizer handles Chinese too.
    """
    from ...lexical import tokenize

    db["questions"].add_column("lex", str)
    rows = list(db.execute("select id, text from questions"))
    for qid, text in rows:
        db.execute("update questions set lex = ? where id = ?", [" ".join(tokenize(text)), qid])
    db["questions"].enable_fts(["lex"], fts_version="FTS5", create_triggers=True, tokenize="unicode61")


@migrations()
def m004_lexical_vocab(db: Database) -> None:
    """Document frequencies of the lexical tokens (fts5vocab), used to drop very common query terms."""
    db.execute("create virtual table if not exists questions_fts_vocab using fts5vocab(questions_fts, 'row')")


@migrations()
def m005_settings(db: Database) -> None:
    """Per-store settings. ``cjk``: how CJK text is tokenised for BM25. A store that already holds
    questions keeps what it was built with (unigrams + bigrams); a new one gets the current default."""
    from ...defaults import CJK as DEFAULT_CJK

    db.execute("create table if not exists settings (key text primary key, value text)")
    existing = db.execute("select count(*) from questions").fetchone()[0]
    db.execute("insert or ignore into settings (key, value) values ('cjk', ?)",
               ["unigram+bigram" if existing else DEFAULT_CJK])


# rows alive in every generation until an edit marks them (faqsearch.backends.embedded.store.ALIVE)
_ALIVE = 1 << 62


@migrations()
def m006_generations(db: Database) -> None:
    """Generation numbers on rows, so that edits change the store in place without copying it.

    A row is visible at generation G when ``gen <= G < dead``. An edit at G writes its rows with
    ``gen = G+1`` and marks removed rows ``dead = G+1``; readers of G see none of it until the
    config of G+1 is committed. A changed FAQ becomes a new row (the old one dead), so ``faqs``
    gets a row id of its own and ``seq`` keeps each FAQ's place in listings.
    """
    db.execute(f"""create table faqs_gen (
        rid integer primary key, id text not null, answer text not null, category text, metadata text,
        content_hash text, seq integer not null, gen integer not null default 0,
        dead integer not null default {_ALIVE})""")
    db.execute("insert into faqs_gen (rid, id, answer, category, metadata, content_hash, seq) "
               "select rowid, id, answer, category, metadata, content_hash, rowid from faqs")
    db.execute("drop table faqs")
    db.execute("alter table faqs_gen rename to faqs")
    db.execute("create index faqs_id on faqs(id)")
    db.execute("create index faqs_seq on faqs(seq)")
    db.execute("alter table questions add column gen integer not null default 0")
    db.execute(f"alter table questions add column dead integer not null default {_ALIVE}")
    db.execute("create index questions_gen on questions(gen)")
    db.execute("create index questions_dead_gen on questions(dead, gen)")  # counts visible rows from the index alone


@migrations()
def m007_stemming(db: Database) -> None:
    """``stem`` setting: how Latin words are reduced before BM25 (faqsearch.lexical.STEMMERS). A store
    that already holds questions keeps its words as they are ('none'); a new one chooses by its first
    questions ('auto': 'english' for English text)."""
    existing = db.execute("select count(*) from questions").fetchone()[0]
    db.execute("insert or ignore into settings (key, value) values ('stem', ?)", ["none" if existing else "auto"])
