"""Asking from the library: ``ask`` with the query log the service writes, and ``aask`` for asyncio.

:class:`Asking` is the ask half of :class:`faqsearch.engine.FAQSearch`: ``ask(..., log=True)`` (or
``FAQSearch.open(..., log=True)``) writes the queries to the index's query log through
:class:`faqsearch.traffic.Traffic`, as `faqsearch serve` does, so `gaps`, suggestions, `faqsearch log`
and the page's Queries tab see a bot's traffic. A blank query is a BlankQueryError.

``await engine.aask(text)`` runs without a thread per call (:class:`AsyncAsker`): calls that arrive
while the loop runs are queued; the queue goes to one worker thread as one ``ask_many`` (one encoder
pass for all of them), and each caller's future gets its own results. While a batch runs, new calls
wait in the queue and make the next batch, so under load each batch grows instead of each call
waiting for a thread. Each call hears its answer as soon as its group (the calls with its options) is
answered, the smallest groups first; a call of more than :data:`BULK` texts runs by itself on a second
worker, so a bulk job never holds up a user's question. A cancelled caller's results are dropped; the
others' stand."""
from __future__ import annotations

import asyncio
import threading
import functools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .defaults import ASK_K, BATCH_SIZE
from .results import Result
from .errors import ClosedError
from .text import as_items, check_query, clean_text

if TYPE_CHECKING:  # the query log (sqlite-utils, pandas) loads only when an ask logs
    from .traffic import Traffic


BULK = 256  # texts in one call above which it runs apart, on the bulk worker


@dataclass
class _Call:
    texts: list[str]
    options: dict[str, Any]
    future: asyncio.Future


@dataclass
class _Queue:
    calls: list[_Call] = field(default_factory=list)
    busy: bool = False  # a batch of this loop is on the worker


class AsyncAsker:
    """Batches concurrent asks of one engine: ``ask_many(texts, **options)`` is the engine's (sync) call,
    run on one worker thread; calls with the same options share a batch."""

    def __init__(self, ask_many: Callable[..., list[Result]]):
        self._ask_many = ask_many
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="faqsearch-aask")
        self._bulk = ThreadPoolExecutor(1, thread_name_prefix="faqsearch-aask-bulk")  # threads start on first use
        self._queues: dict[asyncio.AbstractEventLoop, _Queue] = {}
        self._lock = threading.Lock()  # the queues of several loops (threads) at once
        self.batches = 0  # batches sent to the worker (for tests and metrics)
        self.closed = False

    async def ask_many(self, texts: Sequence[str], **options: Any) -> list[Result]:
        loop = asyncio.get_running_loop()
        call = _Call(list(texts), options, loop.create_future())
        for text in call.texts:  # a caller's bad input fails that caller, never the batch it would join
            clean_text(text)
        if not call.texts:
            return []
        with self._lock:
            if self.closed:
                raise ClosedError("this FAQSearch is closed; open the index again to ask it")
            for gone in [q for q in self._queues if q.is_closed()]:  # a loop closed while its batch ran
                del self._queues[gone]
            bulk = loop.run_in_executor(self._bulk, functools.partial(self._ask_many, call.texts, **options)) \
                if len(call.texts) > BULK else None  # (started under the lock: a close waits for it)
        if bulk is not None:
            return await bulk
        with self._lock:
            queue = self._queues.setdefault(loop, _Queue())
            queue.calls.append(call)
            start = not queue.busy and len(queue.calls) == 1
        if start:
            loop.call_soon(self._flush, loop)  # after the calls already scheduled in this turn of the loop
        return await call.future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            queue = self._queues[loop]
            calls = [c for c in queue.calls if not c.future.done()]  # cancelled before their batch: not asked
            queue.calls = []
            queue.busy = bool(calls)
            if not calls:
                del self._queues[loop]
                return
        groups: dict[str, list[_Call]] = {}
        for call in calls:  # by the options' text: comparing them (numpy arrays, odd filters) may raise
            try:
                key = repr(sorted(call.options.items(), key=lambda kv: kv[0]))
            except Exception as exc:  # noqa: BLE001 - options that cannot be told: that caller's error alone
                call.future.set_exception(exc)
                continue
            groups.setdefault(key, []).append(call)
        batches = sorted(groups.values(), key=lambda g: sum(len(c.texts) for c in g))  # the smallest answered first
        try:
            self.batches += len(batches)
            done = loop.run_in_executor(self._worker, self._run, loop, batches)
        except BaseException as exc:  # noqa: BLE001 - a closed worker, or anything else: the callers hear of it
            if isinstance(exc, RuntimeError) and self.closed:
                exc = ClosedError("this FAQSearch was closed while the query waited; open the index again")
            for call in calls:
                if not call.future.done():
                    call.future.set_exception(exc)
            with self._lock:
                queue.busy = False
                if not queue.calls:
                    self._queues.pop(loop, None)
            return
        done.add_done_callback(lambda f: self._failed(batches, f))

    def _run(self, loop: asyncio.AbstractEventLoop, groups: list[list[_Call]]) -> None:
        """On the worker: each group's ask_many, its callers told as soon as it is answered; then the next
        batch, from here (a caller's loop may end as soon as it has its answers: ``asyncio.run(aask(...))``)."""
        try:
            self._answer(loop, groups)
        finally:
            self._next(loop)

    def _answer(self, loop: asyncio.AbstractEventLoop, groups: list[list[_Call]]) -> None:
        for group in groups:
            try:
                outcome: Any = self._ask_many([t for c in group for t in c.texts], **group[0].options)
            except Exception as exc:  # noqa: BLE001 - handed to the caller it belongs to
                outcome = exc
                if len(group) > 1:
                    outcome = []  # each call again by itself: the error reaches only the call that caused it
                    for call in group:
                        try:
                            outcome += self._ask_many(call.texts, **call.options)
                        except Exception as own:  # noqa: BLE001
                            outcome += [own] * len(call.texts)
            try:
                loop.call_soon_threadsafe(self._deliver, group, outcome)
            except RuntimeError:  # its loop closed: no caller waits
                pass

    @staticmethod
    def _deliver(group: list[_Call], outcome: Any) -> None:
        at = 0
        for call in group:
            n = len(call.texts)
            if not call.future.done():  # a cancelled caller gets nothing
                own = outcome if isinstance(outcome, BaseException) else outcome[at:at + n]
                failed = own if isinstance(own, BaseException) else next(
                    (r for r in own if isinstance(r, BaseException)), None)
                if failed is not None:
                    call.future.set_exception(failed)
                else:
                    call.future.set_result(own)
            at += n

    def _failed(self, groups: list[list[_Call]], done: asyncio.Future) -> None:
        """A worker that failed as a whole (not one group's error) fails the calls not yet told."""
        if not done.cancelled() and done.exception() is not None:
            for group in groups:
                self._deliver(group, done.exception())

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the worker, after a batch: the calls that came in meanwhile go next (on their loop), or the
        loop's queue goes (a loop that closed meanwhile is let go, its queue with it)."""
        with self._lock:
            queue = self._queues.get(loop)
            if queue is None:
                return
            queue.busy = False
            if queue.calls and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(self._flush, loop)
                    return
                except RuntimeError:  # closed since
                    pass
            del self._queues[loop]

    def close(self) -> None:
        """No new calls (ClosedError); the batch on the worker finishes first (the worker needs no loop),
        then the calls still queued hear that the engine closed."""
        with self._lock:
            self.closed = True
            queued = [(loop, c) for loop, q in self._queues.items() for c in q.calls]
            for q in self._queues.values():
                q.calls = []
        self._worker.shutdown(wait=True)
        self._bulk.shutdown(wait=True)
        for loop, call in queued:
            error = ClosedError("this FAQSearch was closed while the query waited; open the index again")
            if not loop.is_closed():
                loop.call_soon_threadsafe(lambda c=call, e=error: c.future.done() or c.future.set_exception(e))


class Asking:
    """Ask, log and await: mixed into FAQSearch, which gives ``searcher()``, ``path`` and ``log``."""

    log: bool = False  # whether ask logs its queries by default (the query log `faqsearch serve` writes)
    _making = threading.Lock()  # one query log and one batcher per engine, though several threads ask at once

    def _held(self, name: str, make: Callable[[], Any]) -> Any:
        with self._making:
            if self.__dict__.get("_asks_closed"):  # closing (from another thread): nothing made again to outlive it
                raise ClosedError(f"this FAQSearch of {self.path} was closed; open the index again to ask it")
            held = self.__dict__.get(name)
            if held is None or self.__dict__.get(f"{name}_pid") != os.getpid():  # made in the parent of a fork: its
                self.__dict__[name] = held = make()  # worker thread is not in this process (aask waited forever),
                self.__dict__[f"{name}_pid"] = os.getpid()  # and an SQLite connection must not cross a fork
        return held

    @property
    def _traffic(self) -> Traffic:
        """The query log, opened on the first logged ask (none where it cannot be: a warning, answers stand)."""
        from .traffic import Traffic

        return self._held("_traffic_held", lambda: Traffic.open(self.path))

    @property
    def _async(self) -> AsyncAsker:
        return self._held("_async_held", lambda: AsyncAsker(self.ask_many))

    def ask_many(self, texts: Sequence[str], k: int = ASK_K, threshold: float | None = None,
                 batch_size: int = BATCH_SIZE, progress: bool = False, mode: str | None = None,
                 filters: dict[str, Any] | None = None, min_confidence: float | None = None, log: bool | None = None,
                 channel: str = "library") -> list[Result]:
        """Answer many queries with one encoder pass (see :meth:`faqsearch.search.Searcher.answer`); a blank
        one gets an empty result. ``log`` (default: the engine's ``log``): write them to the query log."""
        searcher = self.searcher()
        results = searcher.answer(texts, k, mode, threshold, filters, batch_size, progress, min_confidence)
        if self.log if log is None else log:
            self._traffic.record(results, mode or searcher.snap.mode, channel)  # blank ones are not logged
        return results

    def ask(self, text: str, k: int = ASK_K, threshold: float | None = None, mode: str | None = None,
            filters: dict[str, Any] | None = None, min_confidence: float | None = None, log: bool | None = None) -> Result:
        """Answer one query: up to k FAQs, best first; a blank one is a BlankQueryError, as in the CLI and API."""
        return self.ask_many([check_query(text)], k, threshold, mode=mode, filters=filters, min_confidence=min_confidence,
                             log=log)[0]

    async def aask_many(self, texts: Sequence[str], **options: Any) -> list[Result]:
        """:meth:`ask_many` for asyncio: concurrent calls share one batch on one worker (:class:`AsyncAsker`)."""
        self._snap.live()  # closed: a ClosedError, as ask_many gives, whatever the texts
        return await self._async.ask_many(list(as_items(texts)), **options)

    async def aask(self, text: str, **options: Any) -> Result:
        """:meth:`ask` for asyncio (see :meth:`aask_many`); a blank query is a BlankQueryError."""
        return (await self.aask_many([check_query(text)], **options))[0]

    def close_asking(self) -> None:
        with self._making:
            self.__dict__["_asks_closed"] = True
            held = [self.__dict__.pop(name, None) for name in ("_traffic_held", "_async_held")]
        for one in filter(None, held):
            one.close()
