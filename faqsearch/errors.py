"""Domain exceptions. The library raises these; only the CLI turns them into exit codes."""
from __future__ import annotations

import sqlite3
import unicodedata
from typing import Callable


def said(exc: BaseException, limit: int = 200) -> str:
    """The first line of what a failing call said (its class name where it said nothing), for an
    error message that wraps a foreign library's exception."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    line = text.splitlines()[0]
    return line if len(line) <= limit else line[:limit].rsplit(" ", 1)[0] + " ..."  # whole words


class FAQSearchError(Exception):
    """Base class of every error faqsearch raises on purpose."""


UNFILED = ("<records>", "<request>")  # CorpusError's path for FAQs given as records, not read from a file


class CorpusError(FAQSearchError):
    """Bad input file: the message names the file, the line and what to do."""

    def __init__(self, path: str, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line else self.path
        # records given in code or in a request body have no file to name: the message says which FAQ
        super().__init__(message if self.path in UNFILED and not line else f"{where}: {message}")

    def __reduce__(self):  # rebuilt from its three parts in another process (a worker's error)
        return type(self), (self.path, self.line, self.message)


class ModelNotFoundError(FAQSearchError):
    """An encoder could not be loaded from any place we tried."""


class MissingExtraError(FAQSearchError):
    """An optional dependency is not installed; the message names the extra."""


class IndexNotFoundError(FAQSearchError):
    """No index at the given name or path."""


class IndexFormatError(FAQSearchError):
    """The index was built by an incompatible faqsearch or is damaged."""


class StoreDamagedError(IndexFormatError, sqlite3.DatabaseError):
    """A store.db damaged in a way its open checks did not see, found while reading or writing it: an
    IndexFormatError naming the file and the fix (and an sqlite3.DatabaseError, as SQLite's own was)."""


class EncoderMismatchError(FAQSearchError):
    """The index was built with a different encoder than the one requested."""


class TooFewVariantsError(FAQSearchError):
    """Self-tuning needs FAQs with several questions; the corpus has too few."""


class BusyError(FAQSearchError):
    """The server is already doing as much of this work as it takes at once (generating paraphrases on
    a CPU): try again shortly (HTTP 429, with Retry-After)."""


class UnknownFAQError(FAQSearchError):
    """An FAQ id that the index does not hold."""


FAQS_LISTED = "the FAQs are listed by `faqsearch list` (over HTTP, GET .../faqs)"  # where an unknown id's message points


def unknown_faq(faq_id: str, held: Callable[[str], bool]) -> UnknownFAQError:
    """The error for an id the index does not hold; ``held(id)``: whether it holds that id. An id given
    with spaces around it (ids are stored without them) is named as the one to give."""
    said = f"unknown FAQ id {faq_id!r}"
    if isinstance(faq_id, str) and faq_id.strip() != faq_id and faq_id.strip() and held(faq_id.strip()):
        return UnknownFAQError(f"{said}; did you mean {faq_id.strip()!r}? (ids are stored without the spaces around "
                               "them)")
    stored = unicodedata.normalize("NFC", " ".join(faq_id.split())) if isinstance(faq_id, str) else faq_id
    if isinstance(stored, str) and stored and stored != faq_id and held(stored):  # "cafe\u0301" typed, "café" stored
        return UnknownFAQError(f"{said} is written {ascii(faq_id)}, and the index holds {ascii(stored)}: ids are stored "
                               "in Unicode NFC with single spaces, as the corpus reader and POST .../faqs store them; "
                               "give the id in that form")
    return UnknownFAQError(f"{said}; {FAQS_LISTED}")


class DuplicateFAQError(FAQSearchError):
    """Adding an FAQ whose id the index already holds."""


class WritesDisabledError(FAQSearchError):
    """A write was asked of a service started without an API key."""


class WouldDropError(FAQSearchError):
    """A rebuild that would drop FAQs or questions the index holds and the corpus lacks: the message
    says how many and how to keep them (an edit) or drop them (``replace``)."""


class IndexPathError(FAQSearchError):
    """The path given for an index names something that is not a faqsearch index (never replaced)."""


class InvalidOptionError(FAQSearchError):
    """An option outside its valid values (k below 1, an unknown mode or backend): the message lists them."""


class BlankQueryError(InvalidOptionError):
    """A query with no visible characters: `ask` refuses it (the CLI's usage error, the API's 422)."""

    def __init__(self, message: str = "the query is blank (no visible characters)"):
        super().__init__(message)


class ClosedError(FAQSearchError):
    """The engine was closed: open the index again."""


class TextTypeError(InvalidOptionError, TypeError):
    """A text (a query, an id) that is not a string: a FAQSearchError, and a TypeError as Python's own."""


class StorageError(FAQSearchError):
    """A write failed for lack of space or permission, or the storage service (Milvus) failed or could
    not be reached: nothing was committed, the index is as it was (HTTP 503: the server's state, not
    the request, is at fault)."""


class VersionNotFoundError(FAQSearchError):
    """A version an index does not keep (``faqsearch restore``); the message lists those it keeps."""


class StaleRevisionError(FAQSearchError):
    """An edit made from an FAQ as it was read (its revision) found it changed since: nothing was
    written; read it again and redo the edit (HTTP 412, for If-Match)."""


class ChangedMeanwhileError(FAQSearchError):
    """Another writer of an index shared by replicas committed, or took its lock over, while this one
    worked (or held it past the wait): nothing was committed; retry."""
