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
