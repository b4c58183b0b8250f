"""Thin front ends: the CLI and the HTTP routes reach the query log only through the library
(faqsearch.traffic.Traffic), and what they do with it is the library's."""
from __future__ import annotations

import ast
import os

import pytest

from faqsearch.errors import FAQSearchError, InvalidOptionError
from faqsearch.querylog import QueryLog, log_path
from faqsearch.traffic import Traffic

from .conftest import ROOT

PACKAGE = os.path.join(ROOT, "faqsearch")
QUERYLOG_NAMES = {"QueryLog", "log_answered", "log_path", "mark_in_log", "querylog"}


def _front_ends() -> list[str]:
    cli = os.path.join(PACKAGE, "cli")
    found = [os.path.join(root, f) for root, _, files in os.walk(cli) for f in files if f.endswith(".py")]
    return sorted(found) + [os.path.join(PACKAGE, "service", "routes.py")]


def _touches_the_log(path: str) -> list[str]:
    """What in the module imports faqsearch.querylog or names the log's file or class."""
    bad = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.ImportFrom):
            names = {a.name for a in node.names}
            if (node.module or "").split(".")[-1] == "querylog" or "querylog" in names:
                bad.append(f"line {node.lineno}: from {node.module} import {', '.join(sorted(names))}")
        elif isinstance(node, ast.Import):
            bad += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name.endswith("querylog")]
        elif isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in QUERYLOG_NAMES:
                bad.append(f"line {node.lineno}: {name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "queries.db" in node.value:
            bad.append(f"line {node.lineno}: {node.value!r}")
    return bad


def test_no_front_end_touches_the_query_log():
    found = {os.path.relpath(p, ROOT): bad for p in _front_ends() if (bad := _touches_the_log(p))}
    assert found == {}


def test_the_check_sees_a_front_end_that_opens_the_log(tmp_path):
    for source in ("from ...querylog import QueryLog\n", "import faqsearch.querylog as q\n",
                   "x = s.querylog.recent()\n", "path = 'indexes/x/queries.db'\n"):
        (tmp_path / "m.py").write_text(source)
        assert _touches_the_log(str(tmp_path / "m.py")), source


def _engine(tmp_path, small_corpus):
    from faqsearch.engine import FAQSearch

    return FAQSearch.build(small_corpus, str(tmp_path / "ix"))


def test_edits_outside_the_service_never_create_a_log(tmp_path, small_corpus, fake_models):
    with _engine(tmp_path, small_corpus) as engine, Traffic.existing(engine.path) as traffic:
        assert not traffic.logging
        assert traffic.feedback(engine, "parcel lost", "2").added_questions == 1
        assert traffic.unassign(engine, "parcel lost", "2") is not None
        assert traffic.missing and "no query log for" in traffic.why_off
        assert traffic.gaps(engine) == []  # nothing logged yet: nothing to report, not an error (a daily cron job)
        assert traffic.queries(10) == {"queries": [], "total": 0, "answered": 0, "unanswered": 0}
        with pytest.raises(InvalidOptionError):
            traffic.queries(10, since="not a date")  # checked all the same
        assert traffic.record(engine.ask_many(["parcel lost"]), "dense", "cli") == []
    assert not os.path.exists(log_path(engine.path))


def test_traffic_logs_asks_and_marks_assignments(tmp_path, small_corpus, fake_models):
    with _engine(tmp_path, small_corpus) as engine:
        with Traffic.open(engine.path) as traffic:
            ids = traffic.record(engine.ask_many(["parcel lost", "parcel lost", "gift cards?"]), "hybrid", "api")
            assert ids == [1, 2, 3]
            with pytest.raises(InvalidOptionError, match="query_id 3 logged 'gift cards\\?', not 'parcel lost'"):
                traffic.feedback(engine, "parcel lost", "2", query_id=3)  # another text's row: refused, nothing changes
            traffic.feedback(engine, "parcel lost", "2", query_id=2)
            traffic.approve(engine, "4", ["gift cards?"])
            got = traffic.queries(10)
            assert (got["total"], len(got["queries"])) == (3, 3)
            assert [q["feedback_faq"] for q in got["queries"]] == ["4", "2", "2"]
            traffic.unassign(engine, "parcel lost", "2")
            assert [q["feedback_faq"] for q in traffic.queries(10)["queries"]] == ["4", None, None]
        with Traffic.existing(engine.path) as again:
            assert again.logging and again.queries(1)["total"] == 3
    log = QueryLog.for_index(engine.path)
    assert log.count()["total"] == 3
    log.close()


def test_traffic_off_answers_unlogged_and_says_why(tmp_path, small_corpus, fake_models):
    with _engine(tmp_path, small_corpus) as engine, Traffic.open(engine.path, enabled=False) as traffic:
        assert traffic.record(engine.ask_many(["parcel lost"]), "hybrid", "api") == []
        with pytest.raises(FAQSearchError, match="--no-log"):
            traffic.queries()
        assert "no query log" in traffic.suggest(engine.searcher(), "2").notes[0]
    assert not os.path.exists(log_path(engine.path))


# the generator policy: one choice for the CLI and the routes


def test_the_generator_named_wins_else_the_one_the_index_recorded(monkeypatch):
    import faqsearch.generators as generators

    loaded = []
    monkeypatch.setattr(generators, "load_generator", lambda name, **kw: loaded.append((name, kw)) or "named")
    monkeypatch.setattr(generators, "generator_from_spec", lambda spec, threads=None: loaded.append(spec) or "spec")
    spec = {"name": "smollm2"}
    named = generators.choose_generator(spec, "org/model", languages="en,zh", threads=2)
    assert (named.name, named.languages, loaded) == ("org/model", ("en", "zh"), [])  # nothing loads yet
    assert named.load() == "named" and loaded == [("org/model", {"threads": 2, "languages": "en,zh"})]
    recorded = generators.choose_generator(spec, None, threads=2)
    assert (recorded.name, recorded.languages) == ("smollm2", ("en",))
    assert recorded.load() == "spec" and loaded[-1] == spec
    cache = {}
    served = generators.choose_generator(spec, cached=lambda s: cache.setdefault("g", ("cached", s)))
    assert served.load() is served.load() == ("cached", spec)
    assert generators.choose_generator(None).languages == ("en",)  # the default, SmolLM2: English


def test_paraphrases_skip_what_the_generator_cannot_write_and_load_it_once(monkeypatch):
    import faqsearch.generators as generators
    from faqsearch.generators import GeneratorChoice, UnsupportedLanguageError, paraphrase_queries

    loads, asked = [], []
    monkeypatch.setattr(generators, "paraphrase", lambda gen, text, n, scorer, **kw: asked.append((gen, text, n)) or [text])
    choice = GeneratorChoice("smollm2", ("en",), lambda: loads.append(1) or "gen")
    texts = ["where is my parcel", "   ", "我的密码怎么重置？", "track my order"]
    got, notes = paraphrase_queries(choice, texts, 3)
    assert got == [["where is my parcel"], [], [], ["track my order"]]
    assert loads == [1] and [t for _, t, _ in asked] == ["where is my parcel", "track my order"]
    assert len(notes) == 1 and notes[0].startswith("no paraphrases: the generator smollm2 writes en only")
    with pytest.raises(UnsupportedLanguageError):
        paraphrase_queries(choice, ["我的密码怎么重置？"], 3, strict=True)
    assert paraphrase_queries(choice, ["   "], 3) == ([[]], []) and loads == [1]  # nothing to reword: no load


# info: one library call each, the same report where both show a field


def test_info_of_the_cli_and_the_service_agree(tmp_path, small_corpus, fake_models):
    import json

    pytest.importorskip("fastapi")
    from click.testing import CliRunner
    from fastapi.testclient import TestClient

    from faqsearch.cli import cli
    from faqsearch.manage import info, without_paths
    from faqsearch.service import Service, create_app

    with _engine(tmp_path, small_corpus) as engine:
        path = engine.path
    shown = json.loads(CliRunner().invoke(cli, ["info", "--index", path, "--json"], catch_exceptions=False).output)
    assert shown == json.loads(json.dumps(info(path)))
    service = Service({"shop": path}, watch=False)
    try:
        served = TestClient(create_app(service)).get("/indexes/shop").json()
    finally:
        service.close()
    assert served["name"] == "shop" and "path" not in served and served["vectors"] == served["counts"]["questions"]
    assert served["corpus"] == os.path.basename(small_corpus)  # no server paths
    common = set(shown) & set(served)
    assert common >= {"encoder", "counts", "whitening", "lexical", "token_states", "threshold"}
    assert {k: without_paths(shown[k]) for k in common} == {k: served[k] for k in common}
    # an index ingested from a relative path showed its directory ("sample_data/faq.csv")
    assert without_paths({"corpus": "sample_data/faq.csv", "note": "a/b"}) == {"corpus": "faq.csv", "note": "a/b"}


def test_a_log_this_process_cannot_write_neither_fails_a_committed_edit_nor_stops_reads(tmp_path, small_corpus,
                                                                                       fake_models, monkeypatch, caplog):
    """Found by a hostile run of a team's setup: where another user owned queries.db, `feedback` committed and
    then failed ("restore the index directory from a backup"); on a read-only mount `faqsearch log` and `gaps`
    could not read an intact log."""
    import sqlite3

    import faqsearch.querylog as querylog

    with _engine(tmp_path, small_corpus) as engine:
        with Traffic.open(engine.path) as traffic:
            traffic.record(engine.ask_many(["parcel lost"]), "hybrid", "api")

            def refuse(*args, **kwargs):
                raise sqlite3.OperationalError("attempt to write a readonly database")

            monkeypatch.setattr(traffic.log, "mark_assigned", refuse)
            caplog.set_level("WARNING")
            report = traffic.feedback(engine, "parcel lost", "2")
            assert report.added_questions == 1 and "the edit stands" in caplog.text
        monkeypatch.setattr(querylog, "sqlite_file", lambda path: refuse())  # as a read-only mount answers
        with Traffic.existing(engine.path) as again:
            assert again.queries(10)["total"] == 1
            assert again.record(engine.ask_many(["gift cards?"]), "hybrid", "api") == []  # a warning, answers stand


def test_a_gap_in_a_script_the_encoder_does_not_read_leaves_once_an_faq_answers_it(tmp_path):
    """Found by a hostile run of the page: Chinese queries went on being listed as a gap "written in Han script,
    which this index's encoder does not read" after an FAQ holding them was added and answered them at 100%."""
    from faqsearch import FAQ, FAQSearch

    from .conftest import FakeEncoder, faq_rows

    class Latin(FakeEncoder):
        name = "minilm"  # reads Latin script only, as the bundled one

    encoder = Latin()
    rows = faq_rows(12, 3)
    faqs = [FAQ(f"f{i}", f"answer {i}", [q for fid, q, _ in rows if fid == f"f{i}"]) for i in range(12)]
    with FAQSearch.build(faqs, str(tmp_path / "ix"), encoder=encoder) as engine, Traffic.open(engine.path) as traffic:
        asked = ["怎么退货", "怎么退货", "退款多久到账", "退款多久到账"]
        traffic.record(engine.ask_many(asked), "hybrid", "api")
        assert [g.script for g in traffic.gaps(engine, min_count=2)] == ["Han"]
        engine.add([FAQ("zh-01", "七天内可退", ["怎么退货", "退款多久到账"])])
        assert all(r.answered for r in engine.ask_many(asked))
        assert [g.script for g in traffic.gaps(engine, min_count=2)] == []
