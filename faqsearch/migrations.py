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
    from .lexical import tokenize

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
    from .lexical import DEFAULT_CJK

    db.execute("create table if not exists settings (key text primary key, value text)")
    existing = db.execute("select count(*) from questions").fetchone()[0]
    db.execute("insert or ignore into settings (key, value) values ('cjk', ?)",
               ["unigram+bigram" if existing else DEFAULT_CJK])
