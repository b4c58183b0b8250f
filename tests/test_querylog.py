"""The query log shared by several processes (servers of one index, `faqsearch ask`)."""
import logging
import os
import multiprocessing
import sqlite3

import pytest

from faqsearch.querylog import QueryLog, log_answered
from faqsearch.results import Result


def _write(path: str, n: int, tag: str) -> int:
    qlog = QueryLog(path)
    failed = 0
    for i in range(n):
        try:
            qlog.record([Result(f"{tag} {i}", [], None, 0.5), Result(f"{tag} {i} again", [], None, 0.5)], "hybrid")
        except sqlite3.Error:
            failed += 1
    qlog.mark_assigned([f"{tag} 0"], "faq-1")
    qlog.close()
    return failed


@pytest.mark.slow
def test_processes_writing_one_log_lose_nothing(tmp_path):
    """Each record takes the write lock first (BEGIN IMMEDIATE), so a second process waits for it;
    a deferred transaction that read max(id) first failed at once with 'database is locked' (two
    servers of one index lost 31-196 of 200 records each, and their asks were 503s)."""
    path = str(tmp_path / "queries.db")
    QueryLog(path).close()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as pool:
        failed = pool.starmap(_write, [(path, 100, t) for t in "abc"])
    assert failed == [0, 0, 0]
    qlog = QueryLog(path)
    assert qlog.count()["total"] == 600
    assert qlog.db.execute("select count(distinct id) from queries").fetchone()[0] == 600
    assert qlog.db.execute("select count(*) from queries where feedback_faq = 'faq-1'").fetchone()[0] == 3
    qlog.close()


def test_a_log_that_cannot_be_written_is_a_warning_not_a_failed_answer(tmp_path, monkeypatch, caplog):
    path = str(tmp_path / "queries.db")
    monkeypatch.setattr(QueryLog, "TIMEOUT", 0.2)
    qlog = QueryLog(path)
    other = sqlite3.connect(path)
    other.execute("begin exclusive")  # another process holds the log past the timeout
    try:
        with caplog.at_level(logging.WARNING, logger="faqsearch.querylog"):
            assert log_answered(qlog, [Result("where is my parcel", [], None, 0.5)], "hybrid", "api") == []
        assert "1 queries not logged" in caplog.text and "locked" in caplog.text
    finally:
        other.rollback()
        other.close()
    assert log_answered(qlog, [Result("where is my parcel", [], None, 0.5)], "hybrid", "api") == [1]
    qlog.close()


def test_since_is_a_date_or_time_and_anything_else_is_an_error(tmp_path):
    """'yesterday' or '2026-13-45' was compared as a string and silently matched nothing (gaps: 'No
    gaps', exit 0); a bound with an offset is compared in UTC, as the log's times are written."""
    import pytest

    from faqsearch.errors import InvalidOptionError
    from faqsearch.querylog import parse_since

    assert parse_since("2026-11-01") == "2026-11-01T00:00:00.000+00:00"
    assert parse_since("2026-11-01T08:00+02:00") == "2026-11-01T06:00:00.000+00:00"
    qlog = QueryLog(str(tmp_path / "queries.db"))
    qlog.record([Result("an unanswered question", [], None, 0.5)], "hybrid")
    assert len(qlog.candidates(0.05, since="2000-01-01")) == 1 and qlog.candidates(0.05, since="2999-01-01") == []
    for bad in ("yesterday", "2026-13-45", "", "9999-12-31T23:59-01:00", "0001-01-01T00:00+01:00"):  # past Python's years: 500
        with pytest.raises(InvalidOptionError, match="since must be a date or time"):
            qlog.candidates(0.05, since=bad)
    qlog.close()


@pytest.mark.slow
def test_ask_log_on_a_read_only_index_answers_unlogged_with_a_warning(tmp_path, run, small_corpus, caplog):
    """#40 N6: `ask --log` where the index's folder cannot be written ended with "store.db cannot be
    read ... ingest --force"; it answers, and says the query was not logged."""
    import os

    from .conftest import read_only

    ix = str(tmp_path / "ix")
    assert run("ingest", small_corpus, "--index", ix, "-q").exit_code == 0
    with read_only(ix):
        r = run("ask", "How long does shipping take?", "--index", ix, "--log", "--json")
    assert r.exit_code == 0 and '"faq_id": "2"' in r.output, r.output
    assert "queries are not logged" in caplog.text and "store.db" not in r.output
    assert not os.path.exists(os.path.join(ix, "queries.db"))


def test_a_log_from_before_confidences_opens_read_only_and_its_rows_count_by_cosine(tmp_path, monkeypatch):
    """A log written before the confidence columns, in a folder this process may only read: it opens
    as it is (its migration would need a write), and gaps read its rows by their cosine."""
    import sqlite3

    from faqsearch import querylog

    path = str(tmp_path / "queries.db")
    QueryLog(path).close()
    db = sqlite3.connect(path)
    db.execute("delete from _sqlite_migrations where name = 'm002_confidence'")
    db.execute("alter table queries drop column confidence")
    db.execute("alter table queries drop column min_confidence")
    db.execute("insert into queries (time, query, answered, score, threshold) values ('2026-11-01', 'old', 1, 0.6, 0.5)")
    db.commit()
    db.close()
    real = sqlite3.connect
    monkeypatch.setattr(querylog.sqlite3, "connect", lambda p, **kw: real(f"file:{p}?mode=ro", uri=True, **kw))
    old = QueryLog(path)
    assert [r["query"] for r in old.candidates(0.25)] == ["old"] and old.candidates(0.05) == []
    old.close()
    monkeypatch.undo()
    again = QueryLog(path)  # writable: migrated, the old row kept
    assert [r["query"] for r in again.candidates(0.25)] == ["old"] and again.candidates(0.25)[0]["confidence"] is None
    again.close()


def test_a_log_moved_away_while_open_keeps_every_row_and_nothing_is_made_in_its_place(tmp_path, caplog):
    """Found by a hostile run of a team's operations: a log renamed to rotate it (logrotate's default) was
    empty (its rows in queries.db-wal), and the next process's open of a new log truncated that file. Each
    writer now hands every row to the moved file and stops logging (a second reading found that starting a
    new log at the path shares the -wal name with writers of the moved one, and brings back the folder of a
    renamed index)."""
    path = str(tmp_path / "queries.db")
    a, b = QueryLog(path), QueryLog(path)  # two servers of one index
    a.FOLLOW = b.FOLLOW = 0.0
    a.record([Result(f"a {i}", [], None, 0.5) for i in range(20)], "hybrid")
    b.record([Result(f"b {i}", [], None, 0.5) for i in range(5)], "hybrid")
    os.rename(path, tmp_path / "rotated.db")
    caplog.set_level(logging.WARNING)
    assert log_answered(a, [Result("after", [], None, 0.5)], "hybrid", "api") == []  # a warning; answers stand
    assert log_answered(b, [Result("after b", [], None, 0.5)], "hybrid", "api") == []
    assert a.record([Result("later", [], None, 0.5)], "hybrid") == []  # said once, then quiet
    assert caplog.text.count("was moved away or deleted: every row") == 2 and not os.path.exists(path)
    a.close()
    b.close()
    rotated = sqlite3.connect(str(tmp_path / "rotated.db"))
    assert rotated.execute("select count(*) from queries").fetchone()[0] == 25
    rotated.close()
    fresh = QueryLog(path)  # the next start: a new log, nothing of the old one lost or mixed in
    assert fresh.count()["total"] == 0
    fresh.close()


def test_delete_before_forgets_old_queries_on_disk_too(tmp_path):
    """A retention policy (`faqsearch log --delete-before`): the log grew without end, with the users' words."""
    path = str(tmp_path / "queries.db")
    qlog = QueryLog(path)
    qlog.record([Result("my card number is 4111 1111", [], None, 0.5)], "hybrid")
    qlog.db.execute("update queries set time = '2020-01-01T00:00:00.000+00:00'")
    qlog.db.conn.commit()
    qlog.record([Result("where is my parcel", [], None, 0.5)], "hybrid")
    assert qlog.delete_before("2021-01-01") == 1 and qlog.count()["total"] == 1
    qlog.close()
    data = b"".join(open(str(tmp_path / name), "rb").read() for name in os.listdir(tmp_path))
    assert b"4111 1111" not in data and b"where is my parcel" in data


def test_delete_containing_erases_a_persons_queries_on_disk_too(tmp_path):
    """A person asks that what they typed be erased: `log --delete-before` could only delete by date. Their
    queries go, found in any case, text overwritten on disk; a copy of the text as another query's matched
    question (logged before 2026-11-28) is cleared, that query kept."""
    from faqsearch.errors import InvalidOptionError

    path = str(tmp_path / "queries.db")
    qlog = QueryLog(path)
    try:
        qlog.record([Result("Jane.Doe@Example.com where is my parcel", [], None, 0.5)], "hybrid")
        qlog.record([Result("where is my parcel", [], None, 0.5)], "hybrid")
        qlog.db.execute("update queries set top_question = 'jane.doe@example.com lost her card' where id = 2")
        qlog.db.conn.commit()
        assert qlog.delete_containing("JANE.DOE@example.com") == 1 and qlog.count()["total"] == 1
        assert [(r["query"], r["top_question"]) for r in qlog.recent(5)] == [("where is my parcel", None)]
        with pytest.raises(InvalidOptionError, match="at least 3 characters"):
            qlog.delete_containing(" a ")
    finally:
        qlog.close()
    data = b"".join(open(str(tmp_path / name), "rb").read() for name in os.listdir(tmp_path))
    assert b"jane" not in data.lower() and b"where is my parcel" in data


def _open_and_log(path, barrier, out):
    barrier.wait()
    try:
        qlog = QueryLog(path)
        qlog.record([Result("asked at once", [], None, 0.5)], "hybrid")
        qlog.close()
        out.put("ok")
    except Exception as exc:  # noqa: BLE001 - reported to the test
        out.put(repr(exc))


def test_processes_making_a_new_log_at_once_all_log(tmp_path):
    """Found by a hostile run of multi-worker deployments: two workers started together on an index without
    a log; one found it locked (or its tables made meanwhile) and logged nothing for its whole life."""
    ctx = multiprocessing.get_context("fork")
    for run in range(5):
        path = str(tmp_path / f"run{run}" / "queries.db")
        barrier, out = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_open_and_log, args=(path, barrier, out)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [out.get(timeout=10) for _ in procs] == ["ok"] * 3
        qlog = QueryLog(path)
        assert qlog.count()["total"] == 3
        qlog.close()


def test_the_log_keeps_no_copy_of_another_users_query_made_a_phrasing(tmp_path):
    """Found by a privacy probe: each logged row kept the matched question, so a query that feedback made
    a phrasing was copied into the rows of every later query it matched, beyond `log --delete-before` of
    its own row. The row keeps the FAQ's own first question instead."""
    from faqsearch.corpus import FAQ

    from .conftest import build_index

    e = build_index([FAQ("1", "a", ["How do I reset my password?"]), FAQ("2", "b", ["Where is my parcel?"])],
                    tmp_path / "ix")
    e.feedback("alice@example.com forgot her password", "1")
    e.ask("alice@example.com forgot her password", log=True)
    log = QueryLog.for_index(e.path)
    try:
        assert [r["top_question"] for r in log.recent(5)] == ["How do I reset my password?"]
    finally:
        log.close()
        e.close()


def test_suggest_reads_each_logged_query_once_with_the_faq_that_answered_it_last(tmp_path):
    """suggest's read of the log ran a subquery over the whole log for each distinct query (41 s at 200k
    rows, holding the log's lock: every logged ask waited). Grouped first now; the rows are the same:
    counts, the best score, the FAQ of the query's last row, newest first."""
    from faqsearch.generators.suggest import _logged

    log = QueryLog(str(tmp_path / "queries.db"))
    try:
        def logged(query, faq, score):
            top = type("A", (), {"faq_id": faq, "question": "q", "confidence": 0.5})()
            log.record([Result(query, [top], score, 0.3)], "dense")

        logged("where is my parcel", "shp-1", 0.5)
        logged("refund please", "ret-1", 0.7)
        logged("where is my parcel", "shp-2", 0.9)
        logged("where is my parcel", "shp-3", 0.6)
        rows = _logged(log)
    finally:
        log.close()
    assert [(r["query"], r["count"], r["score"], r["top_faq"]) for r in rows] == [
        ("where is my parcel", 3, 0.9, "shp-3"), ("refund please", 1, 0.7, "ret-1")]


def test_gaps_clustering_matches_the_plain_algorithm():
    """gaps' clustering renormalised every centroid for each query and built one queries x clusters
    matrix (116 s and 1.1 GB at 20k queries); it keeps them up to date one at a time now. The labels
    are the plain algorithm's, written out here, on clustered and on scattered vectors."""
    import numpy as np

    from faqsearch.gaps import cluster

    def plain(vectors, weights, similarity):
        sums, labels = [], []
        for v, w in zip(vectors, weights):
            sims = [s @ v / np.linalg.norm(s) for s in sums]
            j = int(np.argmax(sims)) if sims else -1
            if sims and sims[j] >= similarity:
                labels.append(j)
                sums[j] = sums[j] + w * v
            else:
                labels.append(len(sums))
                sums.append(w * v)
        cent = np.array([s / np.linalg.norm(s) for s in sums])
        sims = vectors @ cent.T
        best = sims.argmax(axis=1)
        labels = np.where(sims[np.arange(len(vectors)), best] >= similarity, best, labels)
        return np.unique(labels, return_inverse=True)[1]

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(12, 16))
    for spread in (0.3, 3.0):  # tight groups, then nearly none
        x = centres[rng.integers(0, 12, 300)] + spread * rng.normal(size=(300, 16))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        weights = sorted(rng.integers(1, 9, 300), reverse=True)
        got = cluster(x.astype(np.float32), weights, 0.6)
        assert np.array_equal(got, plain(x.astype(np.float32), weights, 0.6)) and got.max() > 5
