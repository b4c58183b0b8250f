"""The indexes one `faqsearch serve` process answers for, by name.

Each name holds one engine; a request takes that engine's current snapshot once and answers from it
to the end, so it never sees half of an edit. An edit through the API runs on the same engine under
the index's writer lock and swaps the snapshot in one assignment when it commits; an edit by
another process (`faqsearch add`, a cron `faqsearch upsert`) is picked up by a watcher that checks
every 0.25 s.
"""
from __future__ import annotations

import hmac
import logging
import os
import threading
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import FAQSearchError, IndexNotFoundError, InvalidOptionError, WritesDisabledError

log = logging.getLogger(__name__)

WATCH_EVERY = 0.25  # seconds between checks for another process's edit


class Unauthorized(FAQSearchError):
    """A request without a key that the server takes for it."""


class Forbidden(FAQSearchError):
    """A write sent with the read key: it may read, never write."""


ACCESS = ("ask", "read", "write")  # what a request does, for Service.check_access


@dataclass
class Served:
    name: str
    engine: Any  # FAQSearch
    traffic: Any = None  # Traffic: the index's query log (off: with --no-log, or read-only)
    failing: Any = None  # the stamp of a version that failed to open (logged once, not on every tick)
    read_only: bool = False  # this process cannot write the index's folder: served without writes or query log


def _check_key(option: str, key: str | None) -> None:
    """A key a client can send: visible ASCII (an HTTP header value is trimmed, and a key outside ASCII is
    sent as UTF-8 by one client and refused by another); an empty one is no key."""
    bad = next((ch for ch in key or "" if not "!" <= ch <= "~"), None)
    if bad is not None:
        raise InvalidOptionError(f"{option} holds {bad!r}: a key is sent in an HTTP header, where only visible ASCII "
                                 "characters arrive alike from every client (spaces are trimmed); use letters, digits "
                                 "and signs, such as the output of: python -c \"import secrets; print(secrets.token_urlsafe())\"")


class Service:
    """The indexes one process serves, by name; engines of one encoder share one model.

    Who may do what: writes need ``api_key`` (none: writes are off). When the server has a key
    (``api_key`` or ``read_key``), the staff reads (the query log, gaps, suggestions, FAQ listing,
    index list and info) need one of them: ``read_key`` reads, never writes. Asking is open unless
    ``private``: then it needs a key too."""

    def __init__(self, indexes: dict[str, str], api_key: str | None = None, log_queries: bool = True,
                 threads: int | None = None, watch: bool = True, read_key: str | None = None, private: bool = False):
        from ..engine import FAQSearch
        from ..traffic import OFF, Traffic

        if not indexes:
            raise FAQSearchError("no index to serve; pass --index NAME (see faqsearch ingest)")
        for option, key in (("--api-key", api_key), ("--read-key", read_key)):
            _check_key(option, key)
        if private and not (api_key or read_key):
            raise InvalidOptionError("--private needs a key: pass --api-key or --read-key (or set FAQSEARCH_API_KEY "
                                     "or FAQSEARCH_READ_KEY)")
        self.api_key = api_key or None
        self.read_key = read_key or None
        self.private = private
        self.log_queries = log_queries
        self._served: dict[str, Served] = {}
        for name, path in indexes.items():
            engine = FAQSearch.open(path, threads=threads)
            engine.auto_reload = False  # the watcher reloads, off the request path
            for other in self._served.values():
                if other.engine.config.encoder_spec == engine.config.encoder_spec:
                    engine.share_encoder(other.engine)  # one model per distinct encoder
                    break
            engine.embed(["warm up"])
            read_only = not os.access(engine.path, os.W_OK)
            if read_only:
                log.warning("index %s: this process cannot write %s, so it is served read-only: answers, no "
                            "writes and no query log", name, engine.path)
            off = f"index {name} is served read-only (this process cannot write {engine.path}): no query log" \
                if read_only and log_queries else OFF
            self._served[name] = Served(name, engine, Traffic.open(engine.path, log_queries and not read_only, off),
                                        read_only=read_only)
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="faqsearch-watch", daemon=True)
        if watch:
            self._watcher.start()

    def names(self) -> list[str]:
        return list(self._served)

    def served(self, name: str) -> Served:
        nfc = unicodedata.normalize("NFC", name)  # composed or not (a client, a macOS path): the name served
        try:
            return self._served[name] if name in self._served else \
                next(s for k, s in self._served.items() if unicodedata.normalize("NFC", k) == nfc)
        except StopIteration:
            raise IndexNotFoundError(f"no index named {name!r} is served here; served: "
                                     f"{', '.join(self._served)}") from None

    def engine(self, name: str):
        return self.served(name).engine

    def _watch(self) -> None:
        from ..index.directory import stamp

        while not self._stop.wait(WATCH_EVERY):
            for s in list(self._served.values()):
                try:
                    current = stamp(s.engine.path)
                except Exception:  # noqa: BLE001 - an index in Milvus that cannot be read now: look again next tick
                    log.debug("index %s: cannot look for a new version", s.name, exc_info=True)
                    continue
                if current is None or current == s.engine.snapshot.stamp or current == s.failing:
                    continue
                try:
                    s.engine.reload()
                    s.failing = None
                except Exception:  # noqa: BLE001 - keep serving the version we have; say why once
                    s.failing = current
                    log.exception("index %s: the new version cannot be opened; still answering from generation %d",
                                  s.name, s.engine.snapshot.generation)

    def write(self, name: str, edit: Callable[[Any], Any]) -> Any:
        """Run an edit on the index's engine (atomic under the index's writer lock)."""
        from ..index.directory import layout

        self._writes_enabled()
        engine = self.served(name).engine
        if self.served(name).read_only:
            raise WritesDisabledError(f"index {name!r} is read-only here: this server cannot write its folder. Edit "
                                      "it where it can be written (the server picks the edit up), or serve a "
                                      "writable copy")
        if layout(engine.path) == "none":  # an edit would find nothing there (and make a directory at the name)
            raise IndexNotFoundError(f"index {name!r} was renamed or dropped after this server opened it; it still "
                                     "answers from the version it holds. Restart the server with the index's new "
                                     "path to edit it")
        return edit(engine)

    def _writes_enabled(self) -> None:
        if not self.api_key:
            raise WritesDisabledError("writes are disabled: start the server with --api-key KEY or "
                                      "FAQSEARCH_API_KEY set")

    def access(self) -> dict[str, str]:
        """What needs a key here ('key'), what is open, and whether writes are 'off'."""
        keyed = bool(self.api_key or self.read_key)
        return {"ask": "key" if self.private else "open", "read": "key" if keyed else "open",
                "write": "key" if self.api_key else "off"}

    def check_access(self, what: str, given: str | None) -> None:
        """Raise unless a request that does ``what`` (one of ACCESS) may, sending key ``given``."""
        if what not in ACCESS:
            raise InvalidOptionError(f"unknown access {what!r}; one of {', '.join(ACCESS)}")
        if what == "write":
            self._writes_enabled()
            if _same(given, self.api_key):
                return
            if _same(given, self.read_key):
                raise Forbidden("the read key cannot write: send the API key (--api-key) in the X-API-Key header")
            raise Unauthorized("missing or wrong API key: send it in the X-API-Key header")
        if self.access()[what] == "open" or _same(given, self.api_key) or _same(given, self.read_key):
            return
        raise Unauthorized("missing or wrong key: this server needs its read key or API key in the X-API-Key header "
                           f"to {'answer' if what == 'ask' else 'show FAQs, queries and gaps'}")

    def may(self, what: str, given: str | None) -> bool:
        """Whether a request sending key ``given`` may do ``what`` (:meth:`check_access` without raising)."""
        try:
            self.check_access(what, given)
        except (Unauthorized, Forbidden):
            return False
        return True

    def check_key(self, given: str | None) -> None:
        """A write's key (see :meth:`check_access`)."""
        self.check_access("write", given)

    def redact(self, text: str) -> str:
        """``text`` with each served index's directory replaced by its name (responses show no server paths)."""
        for s in sorted(self._served.values(), key=lambda s: -len(s.engine.path)):
            text = text.replace(s.engine.path, s.name)
        return text

    def close(self) -> None:
        self._stop.set()
        if self._watcher.is_alive():
            self._watcher.join(timeout=2)
        for s in self._served.values():
            s.engine.close()
            s.traffic.close()


def _same(given: str | None, key: str | None) -> bool:
    """``given`` is ``key``, compared in constant time (never true without a key)."""
    return bool(given and key) and hmac.compare_digest(given.encode("utf-8"), key.encode("utf-8"))
