import json

import pytest
from click.testing import CliRunner

from faqsearch.cli import cli
from faqsearch.results import Answer
from faqsearch.search import fuse
from faqsearch.evaluation import LabelledQuery
from faqsearch.tuning import tune_fusion

from .conftest import build_index, version


def test_fuse_formula_and_order():
    a = Answer("a", "A", 0.9, "qa", 1, dense=0.9, lexical=None)
    b = Answer("b", "B", 0.8, "qb", 2, dense=0.8, lexical=10.0)
    c = Answer("c", "C", 0.7, "qc", 3, dense=0.7, lexical=5.0)
    assert [x.faq_id for x in fuse([a, b, c], 0.0, 3)] == ["a", "b", "c"]
    out = fuse([a, b, c], 0.2, 2)
    assert [x.faq_id for x in out] == ["b", "a"]
    assert out[0].fused == pytest.approx(0.8 + 0.2 * 1.0) and out[0].score == 0.8  # score stays the cosine
    assert a.fused is None  # inputs untouched


@pytest.fixture
def engine(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("id,question,answer\n1,printer shows error E42,Replace the drum.\n2,printer is slow,Update drivers.\n"
                 "3,how do I reset my password,Use the link.\n4,reset the router,Hold the button.\n"
                 "5,信用卡丢了怎么办,请挂失。\n")
    e = build_index(str(p), tmp_path / "ix", threshold=-1)
    yield e
    e.close()


def test_lexical_and_hybrid_modes(engine):
    lex = engine.ask("E42", mode="lexical")
    assert lex.answers[0].faq_id == "1" and lex.answers[0].lexical > 0 and lex.answers[0].dense is None
    assert engine.ask("信用卡丢失", mode="lexical").answers[0].faq_id == "5"  # CJK bigrams
    assert engine.ask("zzz qqq", mode="lexical").answers == []  # no shared token: no answer
    hyb = engine.ask("printer error E42", mode="hybrid", k=3)
    assert hyb.answers[0].faq_id == "1"
    assert all(a.dense is not None for a in hyb.answers)  # lexical-only candidates get their cosine too
    assert hyb.answers == sorted(hyb.answers, key=lambda a: -a.fused)
    with pytest.raises(Exception, match="unknown mode"):
        engine.ask("x", mode="fuzzy")


@pytest.mark.parametrize("made_before", [False, True])
def test_full_width_letters_and_digits_match_their_ascii_forms(tmp_path, monkeypatch, made_before):
    """Chinese and Japanese text writes ＡＰＰ and １２ in full width; BM25 reads them as APP and 12 (they
    matched only the same full-width form). An index made before stored them as written: a full-width
    query still finds those questions there."""
    import faqsearch.backends.embedded.store as store_mod
    from faqsearch import lexical

    if made_before:
        monkeypatch.setattr(store_mod, "tokenize", lambda text, *a: lexical.tokenize(text, *a, width=False))
    p = tmp_path / "c.csv"
    p.write_text("id,question,answer\n1,怎么下载ＡＰＰ,去应用商店。\n2,转账手续费是多少,免费。\n3,密码输错１２次,请重置。\n"
                 "4,APP登录不了,请更新。\n", encoding="utf-8")
    with build_index(str(p), tmp_path / "ix", threshold=-1) as e:
        monkeypatch.undo()
        found = lambda q: {a.faq_id for a in e.ask(q, mode="lexical", k=4).answers}  # noqa: E731
        assert found("ＡＰＰ") == {"1", "4"} and found("１２") == {"3"}
        if not made_before:  # the ASCII forms find the full-width questions
            assert found("APP") == {"1", "4"} and found("12") == {"3"}


def test_token_match_weighs_a_full_width_word_by_both_forms_an_index_holds(monkeypatch):
    """The token match weighs a query word by its BM25 document frequency: a full-width 'ＡＰＰ' is counted
    as 'app' and as 'ａｐｐ', the form indexes made before stored (looked up as 'app' alone it counted 0
    there, and weighed most)."""
    import numpy as np

    from faqsearch import tokenmatch

    asked, seen = [], []
    monkeypatch.setattr(tokenmatch, "weights", lambda tokens, df, n: seen.append(df) or np.ones(len(tokens)))

    def doc_freqs(tokens):
        asked.append(tokens)
        return {"ａｐｐ": 5, "app": 2}, 10

    tokenmatch.scores("ＡＰＰ", (np.ones((1, 4)), np.array([[0, 3]])), [np.ones((1, 4))], doc_freqs, "none")
    assert asked == [["app", "ａｐｐ"]] and seen == [{"app": 7}]
    tokenmatch.scores("APP", (np.ones((1, 4)), np.array([[0, 3]])), [np.ones((1, 4))], doc_freqs, "none")
    assert asked[-1] == ["app"] and seen[-1] == {"ａｐｐ": 5, "app": 2}
    # stemmed: 'ＣＡＲＤＳ' is 'card' now, and was stored unstemmed as 'ｃａｒｄｓ' (its widened stem 'ｃａｒｄ'
    # was looked up before, and counted nothing)
    tokenmatch.scores("ＣＡＲＤＳ", (np.ones((1, 4)), np.array([[0, 5]])), [np.ones((1, 4))],
                      lambda tokens: asked.append(tokens) or ({"card": 2, "ｃａｒｄｓ": 4}, 10), "english")
    assert asked[-1] == ["card", "ｃａｒｄｓ"] and seen[-1] == {"card": 6}


def test_a_query_looks_up_each_full_width_word_as_stored_now_and_as_stored_before():
    from faqsearch.lexical import former_forms, query_tokens

    assert former_forms("ＣＡＲＤＳ arrived", stem="english") == {"card": ["ｃａｒｄｓ"]}
    assert query_tokens("ＣＡＲＤＳ arrived", stem="english") == ["arriv", "card", "ｃａｒｄｓ"]
    assert former_forms("密码输错１２次") == {"12": ["１２"]} and former_forms("plain words") == {}


def test_tune_fusion_applies_only_on_held_out_gain(engine):
    queries = [LabelledQuery(t, {g}, 0) for t, g in [("E42", "1"), ("slow printer", "2"), ("password reset", "3"),
                                                      ("router reset", "4"), ("信用卡丢失", "5")] * 3]
    report = tune_fusion(engine.searcher(), queries, folds=3)
    assert {r["weight"] for r in report.rows} >= {0.0, 0.1, 0.5}
    assert 0 <= report.lexical <= 1
    before = dict(engine.config)
    applied = engine.set_fusion(report)
    cfg = json.loads(open(f"{version(engine.path)}/config.json").read())
    if applied:
        assert report.gain > 0 and cfg["hybrid_weight"] == report.chosen
    else:
        assert cfg.get("hybrid_weight") == before.get("hybrid_weight")


def test_cli_modes(tmp_path, fake_models, engine):
    runner = CliRunner()
    out = runner.invoke(cli, ["ask", "E42", "--index", engine.path, "--mode", "lexical", "--json"])
    assert out.exit_code == 0 and json.loads(out.output)["answers"][0]["faq_id"] == "1"
    q = tmp_path / "q.csv"
    q.write_text("query,faq_id\nE42,1\nslow printer,2\n")
    for mode in ("dense", "lexical", "hybrid"):
        data = json.loads(runner.invoke(cli, ["eval", str(q), "--index", engine.path, "--mode", mode, "--json"]).output)
        assert data["mode"] == mode and 0 <= data["mrr@10"] <= 1
    out = runner.invoke(cli, ["tune", "--self", "--fusion", "--index", engine.path])
    assert out.exit_code == 1 and "too few" in out.output  # no question variants to learn from
    assert runner.invoke(cli, ["tune", "--pairs", str(q), "--fusion", "--index", engine.path]).exit_code == 2


@pytest.mark.slow
def test_self_supervised_fusion_on_question_variants(tmp_path):
    """Held-out variants are searched against the other questions only (never find themselves), the
    weight grid is scored, and ingest keeps a learned weight only where it wins held out."""
    import os

    from faqsearch import FAQSearch
    from faqsearch.tuning import tune_fusion

    sample = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_data", "faq.csv")
    e = FAQSearch.build(sample, str(tmp_path / "ix"), self_fusion=False)
    report = tune_fusion(e.searcher(), self_supervised=True)
    assert report.n == 300 and [r["weight"] for r in report.rows][0] == 0.0  # two rounds of 150, none twice
    dense = report.rows[0]["mrr@10"]
    assert 0.5 < dense < 0.99  # a query that found itself would score 1.0 everywhere
    applied = e.set_fusion(report)
    if applied:
        assert report.gain > 0 and e.config["fusion"]["chosen_by"].startswith("self-supervised")
    else:
        assert e.config["fusion"] == {"chosen_by": "given at ingest (--no-self-fusion)"} and e.hybrid_weight == 0.1


@pytest.mark.slow
def test_applied_fusion_weights_choose_the_confidence_again(tmp_path):
    """New weights move the fused scores and the confidence's features: what the index chose itself is
    chosen again with them in the same commit (`tune fusion --apply`); recalibrate=False keeps it."""
    import dataclasses
    import os

    from faqsearch import FAQSearch
    from faqsearch.tuning import tune_fusion

    sample = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_data", "faq.csv")
    e = FAQSearch.build(sample, str(tmp_path / "ix"), self_fusion=False)
    report = tune_fusion(e.searcher(), self_supervised=True)
    chosen = 0.5 if report.current != 0.5 else 0.3  # a win to another weight, as a labelled tune may find
    won = dataclasses.replace(report, chosen=chosen, cv_tuned=report.cv_current + 0.01)
    before = e.config["confidence"]
    assert before is not None and e.config["calibration"]["chosen_by"] == "self-calibrated"
    assert e.set_fusion(dataclasses.replace(won), recalibrate=False)
    assert e.hybrid_weight == chosen and e.config["confidence"] == before
    again = dataclasses.replace(won, current=chosen, chosen=0.2 if chosen != 0.2 else 0.4)
    assert e.set_fusion(again)
    assert e.hybrid_weight == again.chosen and e.config["confidence"] != before
    assert e.config["calibration"]["chosen_by"] == "self-calibrated"
    e.close()
