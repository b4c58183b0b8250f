"""Several writers and readers of one index: a writer opened before another's edit keeps that edit,
readers see edits, and readers left behind keep answering from their own version."""
import numpy as np
import pytest

from faqsearch import FAQ, FAQSearch
from faqsearch.tuning import Setting

from .conftest import API_KEY, FakeEncoder, build_index, consistent, faq_rows, write_corpus

FEW = faq_rows(6, 2)


@pytest.mark.parametrize("mode", ["refit", "tune-apply"])
def test_refit_after_another_writers_add_keeps_the_add(built, tmp_path, mode):
    stale = FAQSearch.open(built.path, encoder=FakeEncoder())  # opened before the other process's add
    built.add([FAQ("new", "new answer", ["a completely novel wording", "another novel wording"])])
    if mode == "refit":
        stale.refit(Setting(True, 0.0, 0.0, 8))
    else:  # what tune --apply does with its chosen setting and threshold
        stale.refit(Setting(True, 1.0, 1.0, None), threshold=0.1)
    assert consistent(built.path) == 47
    with FAQSearch.open(built.path, encoder=FakeEncoder()) as fresh:
        assert fresh.ask("a completely novel wording", mode="hybrid").answers[0].faq_id == "new"
    stale.close()


def test_show_list_info_follow_another_writers_edit(built):
    reader = FAQSearch.open(built.path, encoder=FakeEncoder())
    assert reader.info()["counts"]["faqs"] == 15
    built.add([FAQ("new", "new answer", ["fresh wording"])])
    reader._checked -= 10  # the reload check runs at most once a second; pretend a second passed
    assert reader.info()["counts"]["faqs"] == 16
    reader._checked -= 10
    assert "new" in [f["id"] for f in reader.list()]
    reader._checked -= 10
    assert reader.show("new")["answer"] == "new answer"
    reader.close()


def _words(n: int) -> str:
    return f"token{n}a token{n}b token{n}c"


def _run_model(seed: int, edit, open_reader, steps: int = 24):
    """Random batches of edits (repeated ids and unknown ids included) checked against a model of the
    FAQs; readers opened along the way lag behind and must keep answering from their own version."""
    import random

    from faqsearch.errors import CorpusError, UnknownFAQError

    rng = random.Random(seed)
    model = {f"f{i}": (f"answer {i}", [f"question about subject{i} variant{j}" for j in range(2)]) for i in range(6)}
    counter = [1000]
    readers = []

    def fresh_question():
        counter[0] += 1
        return _words(counter[0])

    for step in range(steps):
        kind = rng.choice(["add", "update", "remove", "feedback", "repeat"])
        if kind == "add":
            fid = f"n{step}"
            faqs = [FAQ(fid, f"answer {fid}", [fresh_question(), fresh_question()])]
            edit("add", faqs)
            model[fid] = (faqs[0].answer, faqs[0].questions)
        elif kind == "update" and model:
            fid = rng.choice(sorted(model))
            qs = [model[fid][1][0], fresh_question()]
            edit("update", [FAQ(fid, f"answer {fid} v{step}", qs)])
            old = model[fid][1]  # questions in id order: all kept (an update drops none: #40.3), then the new ones
            model[fid] = (f"answer {fid} v{step}", old + [q for q in qs if q not in old])
        elif kind == "remove":
            fid = rng.choice(sorted(model) + ["unknown"])
            if fid == "unknown":
                with pytest.raises(UnknownFAQError):
                    edit("remove", ["unknown"])
            else:
                edit("remove", [fid])
                del model[fid]
        elif kind == "feedback" and model:
            fid = rng.choice(sorted(model))
            q = fresh_question()
            edit("feedback", (q, fid))
            model[fid] = (model[fid][0], model[fid][1] + [q])
        else:  # a batch naming one id twice: refused whole
            with pytest.raises(CorpusError):
                edit("update", [FAQ("f0", "x", [fresh_question()]), FAQ("f0", "y", [fresh_question()])])
        if step % 4 == 0:
            readers.append((open_reader(), {k: (a, list(q)) for k, (a, q) in model.items()}))
    for reader, expected in readers + [(open_reader(), model)]:
        got = {f["id"]: reader.show(f["id"]) for f in reader.list()}
        assert {k: (v["answer"], [q["text"] for q in v["questions"]]) for k, v in got.items()} == expected
        for fid, (answer, questions) in expected.items():
            for q in questions:
                top = reader.ask(q, k=1, mode="dense").answers[0]
                assert (top.faq_id, top.answer) == (fid, answer), (q, fid)
        reader.close()


@pytest.mark.parametrize("seed", [1, 2])
def test_random_edits_through_the_library_with_lagging_readers(tmp_path, seed):
    path = str(tmp_path / "ix")
    engine = build_index(write_corpus(tmp_path, FEW), path, threshold=-1, self_fusion=False)

    def edit(kind, arg):
        return engine.feedback(*arg) if kind == "feedback" else getattr(engine, kind)(arg)

    def open_reader():
        r = FAQSearch.open(path, encoder=FakeEncoder())
        r.auto_reload = False
        return r

    _run_model(seed, edit, open_reader)
    engine.close()


def test_random_edits_through_the_api_with_lagging_readers(api):
    from faqsearch.errors import CorpusError, UnknownFAQError

    client, service, path = api
    headers = {"X-API-Key": API_KEY}

    def edit(kind, arg):
        if kind == "add":
            r = client.post("/indexes/shop/faqs", headers=headers, json={"faqs": [
                {"id": f.id, "answer": f.answer, "questions": f.questions} for f in arg]})
        elif kind == "update":
            r = client.post("/indexes/shop/faqs/upsert", headers=headers, json={"faqs": [
                {"id": f.id, "answer": f.answer, "questions": f.questions} for f in arg]})
        elif kind == "remove":
            r = client.delete(f"/indexes/shop/faqs/{arg[0]}", headers=headers)
        else:
            r = client.post("/indexes/shop/feedback", headers=headers, json={"query": arg[0], "faq_id": arg[1]})
        if r.status_code == 404:
            raise UnknownFAQError(r.json()["error"])
        if r.status_code == 422:
            raise CorpusError("<request>", None, r.json()["error"])
        assert r.status_code == 200, r.text

    def open_reader():
        r = FAQSearch.open(path, encoder=FakeEncoder())
        r.auto_reload = False
        return r

    _run_model(3, edit, open_reader)
    # the service answers from the latest version throughout
    assert client.get("/health").status_code == 200


CLOSE_WHILE_ASKING = r"""
import sys, threading, time
sys.path.insert(0, sys.argv[1])
from faqsearch import FAQSearch
from faqsearch.errors import ClosedError
from tests.conftest import FakeEncoder, build_index, faq_rows
build_index(faq_rows(40, 3), sys.argv[2]).close()
for delay in (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1):
    engine = FAQSearch.open(sys.argv[2], encoder=FakeEncoder())
    def asker():
        try:
            for _ in range(3000):
                engine.ask("question about topic3 number1", k=5, mode="lexical")
        except ClosedError:
            pass
    threads = [threading.Thread(target=asker) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(delay)
    engine.close()
    for t in threads:
        t.join(timeout=60)
print("clean")
"""


def test_close_while_other_threads_ask_ends_their_calls_with_closed_error(tmp_path):
    """close() freed the SQLite connection under a lexical read in progress on another thread: the
    process died of a segmentation fault (a subprocess here, so that a crash fails only this test)."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", CLOSE_WHILE_ASKING, root, str(tmp_path / "ix")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "clean", (done.returncode, done.stderr[-2000:])


def test_an_edit_that_committed_as_the_engine_closed_returns_its_report(built, monkeypatch):
    """close() from another thread after an edit's commit made the edit raise ClosedError, though the
    FAQs were written: a bot that retried after reopening got a DuplicateFAQError."""
    from faqsearch.backends.embedded.backend import EmbeddedBackend
    from faqsearch.errors import ClosedError

    applied = EmbeddedBackend.apply

    def apply_then_close(self, *args, **kwargs):
        out = applied(self, *args, **kwargs)  # committed
        built.close()  # what the other thread's close() does meanwhile
        return out

    monkeypatch.setattr(EmbeddedBackend, "apply", apply_then_close)
    report = built.add([FAQ(f"late{i}", "late answer", [f"late wording {i}"]) for i in range(20)])  # a tenth and more
    assert len(report.added_faqs) == 20 and built.closed
    monkeypatch.setattr(EmbeddedBackend, "apply", applied)
    with pytest.raises(ClosedError):
        built.ask("late wording 1")
    with FAQSearch.open(built.path, encoder=FakeEncoder()) as again:
        assert again.show("late3")["answer"] == "late answer"
        assert consistent(built.path) == again.info()["counts"]["questions"]


def test_every_entry_of_a_closed_engine_says_it_is_closed(built):
    """After close(), `with engine:`, searcher(), the encoder and aask_many([]) went on (one loaded the
    model again); they are ClosedErrors as every other call is."""
    import asyncio

    from faqsearch.errors import ClosedError

    built.close()
    assert built.closed
    for call in (built.__enter__, built.searcher, lambda: built.encoder, lambda: asyncio.run(built.aask_many([]))):
        with pytest.raises(ClosedError, match="was closed"):
            call()
    built.close()  # twice is fine


@pytest.mark.parametrize("questions", [3, 2])
def test_an_index_rebuilt_and_swapped_in_under_its_name_is_read_afresh(tmp_path, questions):
    """A reader reused the vectors and transform of its version directory when another build's
    directory of the same name (v00000001) took the index's place (renamed in, rsynced, or dropped and
    ingested again): 8 of 100 answers were the old index's, in silence; with another question count
    the reload failed as "inconsistent" for good while the files on disk were sound."""
    import os

    live = str(tmp_path / "live")
    build_index(faq_rows(15, 3), live).close()
    other = [(f"n{i}", f"completely different wording {i} of gadget {j}", f"new answer {i}") for i in range(15)
             for j in range(questions)]
    build_index(other, tmp_path / "rebuilt").close()
    with FAQSearch.open(live, encoder=FakeEncoder()) as reader:
        assert reader.ask("question about subject3 variant1", threshold=-1).answers[0].faq_id == "f3"
        os.rename(live, str(tmp_path / "old"))
        os.rename(str(tmp_path / "rebuilt"), live)
        reader.reload()
        assert reader.info()["counts"]["questions"] == 15 * questions
        assert reader.ask("completely different wording 7 of gadget 1", threshold=-1).answers[0].faq_id == "n7"
        with FAQSearch.open(live, encoder=FakeEncoder()) as fresh:  # its transform and vectors, not the old build's
            assert np.array_equal(reader.snapshot.whitening.kernel, fresh.snapshot.whitening.kernel)
            vectors = reader.embed(["gadget 4", "completely different wording 2"])
            assert np.array_equal(reader.snapshot.index.search(vectors, 10)[1], fresh.snapshot.index.search(vectors, 10)[1])
