"""An index's traffic as the front ends use it: the query log behind one object, so that each CLI
command and HTTP route makes one call (log the asks, mark a query a person assigned to an FAQ, read
the recent queries, the gaps, the suggestions) and never opens the log itself.

``Traffic.open`` is the log asks are written to (`faqsearch serve`, `ask --log`, ``FAQSearch.ask(log=True)``): made when missing,
off with a warning where it cannot be opened. ``Traffic.existing`` is an index's log where one exists:
an edit or a report outside the service never creates one."""
from __future__ import annotations

import logging
import os
import sqlite3
from typing import Any, Iterable, Sequence

from .errors import FAQSearchError, InvalidOptionError
from .gaps import Gap, find_gaps
from .generators import GeneratorChoice, UnsupportedLanguageError
from .querylog import QueryLog, held_marks, log_answered, log_path, parse_since
from .results import EditReport
from .text import clean_text, is_blank

log = logging.getLogger(__name__)

OFF = "query logging is off for this server (started with --no-log)"


class Traffic:
    """The query log of one index, or none (``log`` None: asks go unlogged, reads say ``why_off``)."""

    def __init__(self, log: QueryLog | None, why_off: str = OFF, missing: bool = False):
        self.log = log
        self.why_off = why_off
        self.missing = missing  # no log written yet: reads give nothing logged (why_off says why), not an error

    @classmethod
    def open(cls, index_path: str, enabled: bool = True, why_off: str = OFF) -> "Traffic":
        """The log asks are written to (made when missing); none when not ``enabled`` (reads then say
        ``why_off``), or with a warning where this process cannot open it (queries are answered all the same)."""
        found = QueryLog.open_or_none(index_path) if enabled else None
        return cls(found, why_off if not enabled else f"the query log of {index_path} cannot be opened by this server "
                                                      "(its log says why): queries are answered, not logged")

    @classmethod
    def existing(cls, index_path: str) -> "Traffic":
        """The index's log where it has one (an edit outside the service never creates a log)."""
        if os.path.exists(log_path(index_path)):
            return cls(QueryLog.for_index(index_path))
        return cls(None, f"no query log for {index_path} yet: queries are logged by `faqsearch serve`, by "
                         "`faqsearch ask --log`, or by the library's ask(..., log=True)", missing=True)

    @property
    def logging(self) -> bool:
        return self.log is not None

    def close(self) -> None:
        if self.log is not None:
            self.log.close()

    def __enter__(self) -> "Traffic":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _required(self) -> QueryLog:
        if self.log is None:
            raise FAQSearchError(self.why_off)
        return self.log

    # writes
    def record(self, results: Sequence[Any], mode: str, channel: str) -> list[int | None]:
        """Log answered queries (``Result``s) but blank ones (answered empty: nothing was asked); each
        result's row id in order, None for a blank one; [] without a log or where logging failed (a
        warning: the answers stand)."""
        if self.log is None:
            return []
        blank = [is_blank(clean_text(r.query)) for r in results]
        ids = iter(log_answered(self.log, [r for r, b in zip(results, blank) if not b], mode, channel))
        out = [None if b else next(ids, None) for b in blank]
        return out if any(i is not None for i in out) else []

    def assigned(self, texts: Iterable[str], faq_id: str, query_id: int | None = None) -> None:
        """Texts (and row ``query_id``) a person assigned to an FAQ show as assigned in the log."""
        if self.log is not None:
            try:
                self.log.mark_assigned(list(texts), faq_id, query_id)
            except sqlite3.Error as exc:  # the edit committed: a log this process cannot write does not undo it
                log.warning("query log %s: the edit stands, but the log could not mark its queries as assigned to %s "
                            "(%s)", self.log.path, faq_id, exc)

    def unassigned(self, texts: Iterable[str], faq_id: str) -> None:
        """Undo :meth:`assigned` for texts taken out of the FAQ again."""
        if self.log is not None:
            try:
                for text in texts:
                    self.log.clear_feedback(text, faq_id)
            except sqlite3.Error as exc:
                log.warning("query log %s: the edit stands, but the log could not unmark its queries (%s)",
                            self.log.path, exc)

    def feedback(self, engine, query: str, faq_id: str, query_id: int | None = None) -> EditReport:
        """``engine.feedback`` (QUERY becomes a question of FAQ_ID), then the log shows it as assigned.
        ``query_id`` (the X-Query-Id of the logged query) must be a logged query of that text: checked
        before the edit, so a wrong id changes nothing."""
        if query_id is not None and self.log is not None:
            logged = self.log.text_of(query_id)
            if logged != clean_text(query) and engine.snapshot.backend.kind == "milvus":  # replicas log apart: the
                query_id = None  # id came from another's log (the text marks this one's)
            elif logged is None:
                raise InvalidOptionError(f"query_id {query_id} is not a query in this index's log; leave it out, or "
                                         "give the X-Query-Id that asking this query returned")
            elif logged != clean_text(query):
                raise InvalidOptionError(f"query_id {query_id} logged {logged!r}, not {clean_text(query)!r}: give the "
                                         "query as it was asked, or leave query_id out")
        report = engine.feedback(query, faq_id)
        self.assigned([query], faq_id, query_id)
        return report

    def approve(self, engine, faq_id: str, texts: Sequence[str]) -> EditReport:
        """``engine.approve``; logged queries among the texts show as assigned, as after feedback."""
        report = engine.approve(faq_id, list(texts))
        self.assigned(texts, faq_id)
        return report

    def unassign(self, engine, query: str, faq_id: str) -> EditReport:
        """``engine.unassign`` (undo feedback), and in the log too."""
        report = engine.unassign(query, faq_id)
        self.unassigned([query], faq_id)
        return report

    # reads
    def queries(self, limit: int = 50, offset: int = 0, unanswered: bool = False,
                since: str | None = None, store: Any = None) -> dict[str, Any]:
        """Logged queries, newest first, with the log's counts (total, answered, unanswered): the JSON of
        `faqsearch log --json` and GET /indexes/NAME/queries. ``since``: logged at or after it. With the
        index's ``store``, a query's ``feedback_faq`` is None where that FAQ no longer holds it (a restore,
        a remove): the page offered only an Unassign that could not succeed."""
        if self.missing:
            parse_since(since)  # a bad --since is refused the same, logged or not
            return {"queries": [], "total": 0, "answered": 0, "unanswered": 0}
        log = self._required()
        rows = log.recent(limit, offset, unanswered, since)
        return {"queries": rows if store is None else held_marks(rows, store), **log.count(since)}  # counts: the period

    def delete_containing(self, text: str) -> int:
        """Delete the queries holding ``text`` (:meth:`QueryLog.delete_containing`); 0 without a log."""
        return 0 if self.missing else self._required().delete_containing(text)

    def delete_before(self, before: str) -> int:
        """Delete the queries logged before ``before`` (:meth:`QueryLog.delete_before`); 0 without a log."""
        if self.missing:
            parse_since(before)
            return 0
        return self._required().delete_before(before)

    def gaps(self, engine, **options: Any) -> list[Gap]:
        """:func:`faqsearch.gaps.find_gaps` over this log (options: similarity, margin, min_count, since, limit);
        none before anything was logged."""
        if self.missing:
            parse_since(options.get("since"))
            return []
        return find_gaps(engine, self._required(), **options)

    def suggest(self, searcher, faq_id: str, generator: GeneratorChoice | None = None, **options: Any):
        """:func:`faqsearch.generators.suggest.suggest` with this log (a note says when there is none) and
        the ``generator`` a front end chose (:func:`faqsearch.generators.choose_generator`; options: limit,
        generate)."""
        from .generators.suggest import suggest

        if generator is None:
            return suggest(searcher, faq_id, self.log, **options)
        faq = searcher.snap.store.faq(faq_id) if generator.per_language is not None else None
        refusal = None
        if faq and faq["questions"]:  # the bundled generator for this FAQ's language
            try:
                generator.check([faq["questions"][0]["text"]])
            except UnsupportedLanguageError as exc:
                refusal = str(exc)  # none installed writes it: the note says which extra would
        return suggest(searcher, faq_id, self.log, load_generator=generator.load, languages=generator.languages,
                       refusal=refusal, **options)
