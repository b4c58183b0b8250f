"""``aask``/``aask_many`` for asyncio callers: concurrent calls share one ask_many on one worker thread (#42)."""
import asyncio
import threading

import pytest

from faqsearch import BlankQueryError, FAQSearch, InvalidOptionError

from .conftest import FakeEncoder, build_index

QUERIES = [f"question about subject{i} variant{i % 3}" for i in range(30)] + ["xylophone", "how is subject7 going"]


@pytest.fixture
def ix(tmp_path):
    rows = [(f"f{i}", f"question about subject{i} variant{j}", f"answer {i}") for i in range(30) for j in range(3)]
    build_index(rows, tmp_path / "ix").close()
    return str(tmp_path / "ix")


def _same(a, b):
    assert (a.query, a.answered, [x.faq_id for x in a.answers]) == (b.query, b.answered, [x.faq_id for x in b.answers])
    assert a.best_score == pytest.approx(b.best_score, abs=1e-5)


def test_concurrent_aask_equals_sync_ask_in_fewer_encoder_calls(ix):
    with FAQSearch.open(ix, encoder=FakeEncoder()) as sync_engine:
        expected = [sync_engine.ask(q, k=3) for q in QUERIES]
    encoder = FakeEncoder()
    with FAQSearch.open(ix, encoder=encoder) as engine:
        threads = set()
        engine_ask_many = engine.ask_many

        def spy(*a, **k):
            threads.add(threading.get_ident())
            return engine_ask_many(*a, **k)

        engine.ask_many = spy  # the worker calls the engine's ask_many: see which threads run it

        async def main():
            return await asyncio.gather(*(engine.aask(q, k=3) for q in QUERIES))

        got = asyncio.run(main())
        batches = engine._async.batches
    for a, b in zip(got, expected):
        _same(a, b)
    assert encoder.calls < len(QUERIES) and batches < len(QUERIES)
    assert len(threads) == 1 and threading.get_ident() not in threads  # one worker, never the loop's thread


def test_aask_many_and_calls_with_other_options_are_answered_apart(ix):
    with FAQSearch.open(ix, encoder=FakeEncoder()) as engine:
        expected_k1 = engine.ask_many(QUERIES[:5], k=1)
        expected_k5 = engine.ask_many(QUERIES[5:10], k=5)

        async def main():
            return await asyncio.gather(engine.aask_many(QUERIES[:5], k=1), engine.aask_many(QUERIES[5:10], k=5),
                                        engine.aask_many([]))

        k1, k5, none = asyncio.run(main())
    assert none == [] and [len(r.answers) for r in k1] == [len(r.answers) for r in expected_k1]
    for a, b in zip(k1 + k5, expected_k1 + expected_k5):
        _same(a, b)


def test_errors_reach_their_callers_and_a_cancelled_caller_does_not_stop_the_others(ix):
    with FAQSearch.open(ix, encoder=FakeEncoder()) as engine:
        async def main():
            with pytest.raises(BlankQueryError):
                await engine.aask("   ")
            bad = asyncio.ensure_future(engine.aask("question about subject1", k=0))
            cancelled = asyncio.ensure_future(engine.aask("question about subject2 variant0"))
            good = [asyncio.ensure_future(engine.aask(q)) for q in QUERIES[:4]]
            await asyncio.sleep(0)
            cancelled.cancel()
            results = await asyncio.gather(*good)
            with pytest.raises(InvalidOptionError):
                await bad
            assert cancelled.cancelled()
            return results, await engine.aask("question about subject3 variant1")  # the batcher still works

        results, after = asyncio.run(main())
    assert [r.answers[0].faq_id for r in results] == ["f0", "f1", "f2", "f3"] and after.answers[0].faq_id == "f3"


def test_one_callers_bad_input_or_odd_options_fail_that_caller_only(ix):
    """A text that is no string fails its own call before it is queued; options that cannot be
    compared (numpy arrays in a filter) neither stall the queue nor reach other callers."""
    import numpy as np

    from faqsearch.errors import TextTypeError

    with FAQSearch.open(ix, encoder=FakeEncoder()) as engine:
        async def main():
            mixed = await asyncio.gather(engine.aask("question about subject3 variant0"), engine.aask_many([None]),
                                         return_exceptions=True)
            odd = await asyncio.gather(*(engine.aask("question about subject3", filters={"category": np.array([c])})
                                         for c in "xy"), engine.aask("xylophone"), return_exceptions=True)
            later = await asyncio.wait_for(engine.aask("question about subject4 variant1"), 10)
            return mixed, odd, later

        mixed, odd, later = asyncio.run(main())
    assert mixed[0].answers[0].faq_id == "f3" and isinstance(mixed[1], TextTypeError)
    assert [type(x) for x in odd[:2]] == [InvalidOptionError] * 2 and odd[2].query == "xylophone"
    assert later.answers[0].faq_id == "f4"


def test_close_lets_the_running_batch_finish_and_fails_the_queued_calls(ix):
    """engine.close() while asyncio callers wait: the batch on the worker is answered, calls queued
    behind it and calls made after the close get ClosedError; none hangs."""
    import time

    from faqsearch.errors import ClosedError

    class Slow(FakeEncoder):
        def encode(self, texts, batch_size=32, progress=False):
            time.sleep(0.3)
            return super().encode(texts, batch_size, progress)

    engine = FAQSearch.open(ix, encoder=Slow())

    async def main():
        running = [asyncio.ensure_future(engine.aask(f"question about subject{i} variant0")) for i in range(3)]
        await asyncio.sleep(0.05)  # the first batch is on the worker
        queued = asyncio.ensure_future(engine.aask("question about subject9 variant0"))
        await asyncio.sleep(0)
        engine.close()
        got = await asyncio.wait_for(asyncio.gather(*running, queued, return_exceptions=True), 10)
        with pytest.raises(ClosedError):
            await asyncio.wait_for(engine.aask("xylophone"), 10)
        return got

    got = asyncio.run(main())
    assert [r.answers[0].faq_id for r in got[:3]] == ["f0", "f1", "f2"] and isinstance(got[3], ClosedError)


def test_a_short_question_is_not_held_up_by_a_bulk_call_or_another_group(ix):
    """Found by a hostile asyncio probe: a one-text aask waited 16 s for a 2,000-text aask_many (other
    options, so not even one encoder pass with it): every group's callers heard only when all were done."""
    import time

    from faqsearch.asking import BULK

    class Slow(FakeEncoder):
        def encode(self, texts, batch_size=32, progress=False):
            time.sleep(0.002 * len(texts))  # a long batch takes long
            return super().encode(texts, batch_size, progress)

    done: list[str] = []

    async def told(name, coro):
        got = await coro
        done.append(name)
        return got

    with FAQSearch.open(ix, encoder=Slow()) as engine:
        async def main():
            bulk = [f"question about subject{i % 12} number {i}" for i in range(BULK + 1)]  # alone, on the bulk worker
            group = [f"question about subject{i % 12} variant {i}" for i in range(BULK)]  # other options: a group
            return await asyncio.gather(told("bulk", engine.aask_many(bulk, k=3)),
                                        told("group", engine.aask_many(group, k=2)),
                                        told("one", engine.aask("question about subject3 variant1", k=1)))

        bulk, group, one = asyncio.run(main())
    assert len(bulk) == BULK + 1 and len(group) == BULK and one.answers[0].faq_id == "f3"
    assert done[0] == "one"  # told as soon as its own group was answered, before the long ones


def test_options_that_cannot_be_told_fail_their_caller_only_and_closed_loops_are_let_go(ix):
    class Odd(str):
        def __repr__(self):
            raise ValueError("no repr")

    with FAQSearch.open(ix, encoder=FakeEncoder()) as engine:
        async def main():
            return await asyncio.gather(engine.aask("question about subject1 variant0"),
                                        engine.aask("question about subject2", filters={"category": Odd("cat2")}),
                                        return_exceptions=True)

        good, odd = asyncio.run(main())
        assert good.answers[0].faq_id == "f1" and isinstance(odd, ValueError)

        async def deadline():  # a caller gives up and its loop ends while the batch still runs
            try:
                return await asyncio.wait_for(engine.aask_many(["question about subject4"] * 20), 0.0001)
            except asyncio.TimeoutError:
                return None

        for _ in range(5):
            asyncio.run(deadline())
        asyncio.run(main())  # its loop ends as soon as it has its answers, maybe before the worker is done
        import time

        deadline = time.monotonic() + 5
        while engine._async._queues and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(engine._async._queues) == 0  # the closed loops' queues went (they were kept for good)


def test_a_close_from_another_thread_leaves_no_worker_behind(ix):
    """A close from another thread while a batch ran let a later aask build a new batcher (and thread)
    that the close never shut down."""
    import threading
    import time

    from faqsearch.errors import ClosedError

    class Slow(FakeEncoder):
        def encode(self, texts, batch_size=32, progress=False):
            time.sleep(0.3)
            return super().encode(texts, batch_size, progress)

    engine = FAQSearch.open(ix, encoder=Slow())
    before = {t for t in threading.enumerate() if t.name.startswith("faqsearch-aask")}  # other tests' engines

    async def main():
        running = asyncio.ensure_future(engine.aask("question about subject1 variant0"))
        await asyncio.sleep(0.05)
        closing = threading.Thread(target=engine.close)
        closing.start()
        await asyncio.sleep(0.05)  # the close waits for the running batch
        late = await asyncio.gather(engine.aask("question about subject2 variant0"), return_exceptions=True)
        first = await running
        closing.join()
        return first, late[0]

    first, late = asyncio.run(main())
    assert first.answers[0].faq_id == "f1" and isinstance(late, ClosedError)
    assert "_async_held" not in engine.__dict__
    assert not {t for t in threading.enumerate() if t.name.startswith("faqsearch-aask")} - before


def test_aask_in_a_forked_child_answers(ix):
    """Found by a hostile run of multi-worker deployments: after the parent had used aask, a child of fork
    (gunicorn --preload) waited forever: its batcher's worker thread was the parent's."""
    import multiprocessing

    engine = FAQSearch.open(ix, encoder=FakeEncoder())
    assert asyncio.run(engine.aask("question about subject1 variant0")).answers[0].faq_id == "f1"

    def child(out):
        async def main():
            return await asyncio.wait_for(engine.aask("question about subject2 variant0"), 20)
        try:
            out.put(asyncio.run(main()).answers[0].faq_id)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            out.put(repr(exc))

    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=child, args=(out,))
    proc.start()
    proc.join(60)
    assert out.get(timeout=10) == "f2"
    engine.close()
