import json

import numpy as np
import pytest

from faqsearch import FAQSearch
from faqsearch.index.config import FILES
from faqsearch.evaluation import LabelledQuery, evaluate
from faqsearch.tuning import Setting, current_setting, grid, tune
from faqsearch.tuning.transform import _reciprocal_ranks
from faqsearch.tuning.transform import cross_validate as _cross_validate

from .conftest import FakeEncoder, build_index, index_entries, version


@pytest.fixture
def corpus(tmp_path):
    """60 FAQs with 3 variants each, sharing topic words so retrieval is not trivial."""
    topics = ["password", "delivery", "refund", "invoice", "warranty", "battery", "screen", "account", "order",
              "voucher"]
    verbs = ["change", "reset", "track", "cancel", "find", "update"]
    lines = ["id,question,answer"]
    for i, (t, v) in enumerate((t, v) for t in topics for v in verbs):
        for j, form in enumerate(["how do i {v} my {t}", "{v} {t} please", "can you help me {v} the {t}"]):
            lines.append(f"{i},{form.format(v=v, t=t)} {j},answer {i}")
    p = tmp_path / "c.csv"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_grid_respects_rank_and_dims():
    g = grid(32, 20)
    assert Setting(False) in g
    assert {s.k for s in g if s.whiten} == {20}  # 64/128/256 exceed the rank
    assert len(g) == 1 + 9
    assert {s.k for s in grid(384, 400) if s.whiten} == {64, 128, 256, None}


def test_reciprocal_ranks_over_distinct_faqs():
    docs = np.eye(4, dtype=np.float32)
    faq = np.array(["a", "a", "b", "c"], dtype=object)
    q = np.array([[0.9, 0.8, 0.7, 0.1], [0.1, 0.2, 0.3, 0.9]], dtype=np.float32)
    rr, best = _reciprocal_ranks(docs, faq, q, [{"b"}, {"a"}])
    # query 1: a (0.9), a again (skipped), b -> rank 2; query 2: c, b, a -> rank 3
    np.testing.assert_allclose(rr, [1 / 2, 1 / 3])
    np.testing.assert_allclose(best, [0.9, 0.9])


def test_cross_validation_picks_on_other_folds():
    # setting 1 is better on every item, so every fold chooses it
    per = [np.zeros(10), np.ones(10)]
    cur, tuned = _cross_validate(lambda s, idx: per[s][idx].mean(), 10, 2, 0, 5)
    assert (cur, tuned) == (0.0, 1.0)


def test_tune_matches_evaluate_and_apply_is_atomic(tmp_path, corpus):
    enc = FakeEncoder(dimension=48)
    e = FAQSearch.build(corpus, str(tmp_path / "ix"), encoder=enc, beta=1, gamma=1, k=None)
    queries = [LabelledQuery(f"please {v} {t} now", {str(i)}, 0) for i, (t, v) in enumerate(
        (t, v) for t in ["password", "delivery", "refund", "invoice", "warranty"] for v in ["change", "reset"])]
    before = evaluate(e.searcher(), queries, mode="dense")["mrr@10"]
    report = tune(e.searcher(), queries)
    row = next(r for r in report.rows if r["current"])
    assert row["mrr@10"] == pytest.approx(before, abs=1e-6)  # tune's numbers are the engine's numbers
    chosen_row = next(r for r in report.rows if r["chosen"])
    assert chosen_row["mrr@10"] >= row["mrr@10"]
    ix = tmp_path / "ix"
    store_before = (version(ix) / FILES["store"]).read_bytes()
    e.refit(report.chosen, threshold=0.42)
    e2 = FAQSearch.open(str(ix), encoder=enc)
    assert current_setting(e2.config) == report.chosen and e2.threshold == 0.42
    assert evaluate(e2.searcher(), queries, mode="dense")["mrr@10"] == pytest.approx(chosen_row["mrr@10"], abs=1e-6)
    assert (version(ix) / FILES["store"]).read_bytes() == store_before
    assert index_entries(tmp_path) == ["c.csv", "ix", "ix/CURRENT", "ix/LOCK"] + ["ix/v<generation>"] * 2  # one kept
    e2.close()


def test_self_tuning_holds_out_one_variant_per_faq(tmp_path):
    # the two questions of each FAQ share no word: a held-out variant can only score well if it
    # (wrongly) stayed among the documents and matched itself
    lines = ["id,question,answer"] + [f"{i},alpha{i} beta{i},a{i}" for i in range(40)] + \
            [f"{i},gamma{i} delta{i},a{i}" for i in range(40)]
    p = tmp_path / "c.csv"
    p.write_text("\n".join(lines) + "\n")
    e = build_index(str(p), tmp_path / "ix", encoder=FakeEncoder(dimension=48))
    report = tune(e.searcher(), self_supervised=True)
    assert report.n == 40 and "held-out" in report.notes[0]
    assert all(0 <= r["mrr@10"] <= 1 for r in report.rows)
    assert max(r["mrr@10"] for r in report.rows) < 0.5
    e.close()


def test_cli_tune_apply_only_when_held_out_improves(tmp_path, corpus, fake_models):
    from click.testing import CliRunner

    from faqsearch.cli import cli

    runner = CliRunner()
    ix = tmp_path / "ix"
    assert runner.invoke(cli, ["ingest", corpus, "--index", str(ix), "-q"]).exit_code == 0
    cfg_before = json.loads((version(ix) / "config.json").read_text())
    result = runner.invoke(cli, ["tune", "--self", "--index", str(ix), "--apply", "--json", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    cfg_after = json.loads((version(ix) / "config.json").read_text())
    if data["applied"]:
        assert data["gain"] > 0 and cfg_after["whitening"].get("tuned")
    else:
        assert cfg_after == cfg_before
    assert runner.invoke(cli, ["tune", "--index", str(ix)]).exit_code == 2


def test_ingest_tune_self_on_one_question_per_faq_keeps_the_index_and_exits_0(run, tmp_path):
    corpus = tmp_path / "one.csv"
    corpus.write_text("id,question,answer\n" + "".join(f"f{i},question number {i} here,answer {i}\n" for i in range(20)))
    result = run("ingest", corpus, "--index", tmp_path / "ix", "--tune-self", "-q")
    assert result.exit_code == 0, result.output
    assert "Not tuned: only 0 FAQs have two or more questions" in result.stderr
    assert "Indexed 20 FAQs" in result.stdout


def test_self_fusion_searches_a_bounded_sample_of_variants():
    """Every held-out variant is searched against every other question: an ingest of 1M questions
    would spend hours there, so beyond SELF_FUSION_MAX a seeded sample is taken."""
    from faqsearch.tuning import held_out_variants

    rows = [(i, f"f{i // 3}", f"q{i}") for i in range(3 * 5000)]
    all_held = held_out_variants(rows)
    assert len(all_held) == 5000
    some = held_out_variants(rows, limit=2000)
    assert len(some) == 2000 and set(some) <= set(all_held) and list(some) == sorted(some)
    assert list(held_out_variants(rows, limit=2000)) == list(some)  # seeded
    assert list(held_out_variants(rows[:30], limit=2000)) == list(held_out_variants(rows[:30]))


def _variants_index(tmp_path, monkeypatch, faqs: int, per_faq: int):
    """An index of ``faqs`` FAQs with ``per_faq`` questions each, the fusion module, and the list that
    records how many questions each self-fusion run searched among (its BM25 scorer spied on)."""
    import faqsearch.tuning.fusion as tuning

    rows = ["id,question,answer"] + [f"f{i},question {j} about thing{i},a{i}" for i in range(faqs) for j in range(per_faq)]
    p = tmp_path / "c.csv"
    p.write_text("\n".join(rows) + "\n")
    e = build_index(str(p), tmp_path / "ix", self_fusion=False)
    sizes = []
    real = tuning.bm25_scorer
    monkeypatch.setattr(tuning, "bm25_scorer", lambda docs, *a, **k: sizes.append(len(docs)) or real(docs, *a, **k))
    return e, tuning, sizes


def test_self_fusion_searches_among_a_bounded_set_of_questions(monkeypatch, tmp_path):
    e, tuning, sizes = _variants_index(tmp_path, monkeypatch, 60, 3)
    full, _ = tuning.self_fusion_candidates(e.searcher())
    monkeypatch.setattr(tuning, "SELF_FUSION_DOCS", 130)  # the held FAQs' 120 other variants, then whole FAQs
    bounded, gold = tuning.self_fusion_candidates(e.searcher())
    assert sizes == [120, 120]  # every FAQ is held out here: its other variants are all kept
    monkeypatch.setattr(tuning, "SELF_FUSION_MAX", 10)
    tuning.self_fusion_candidates(e.searcher())
    # 10 held FAQs' other 20 variants, then whole FAQs of 3 drawn at random until 130 is passed: 20 + 37 * 3
    assert sizes[-1] == 131
    assert len(bounded) == len(full) == 60 and all(len(g) == 1 for g in gold)
    e.close()


def test_self_fusion_holds_out_fewer_faqs_when_their_variants_exceed_the_budget(monkeypatch, tmp_path):
    """FAQs with many questions: the held FAQs' other variants alone could pass SELF_FUSION_DOCS
    (2,000 FAQs of 67 questions each would keep 132k), so fewer FAQs are held out instead."""
    e, tuning, sizes = _variants_index(tmp_path, monkeypatch, 30, 6)
    monkeypatch.setattr(tuning, "SELF_FUSION_DOCS", 100)  # 30 held FAQs would keep 150 other variants
    cands, gold = tuning.self_fusion_candidates(e.searcher())
    assert len(cands) == 20 and sizes == [100]  # 20 FAQs x 5 other variants fill the budget exactly
    assert len({next(iter(g)) for g in gold}) == 20
    monkeypatch.setattr(tuning, "SELF_FUSION_DOCS", 12)  # never fewer than 10 held out while 10 exist
    cands, _ = tuning.self_fusion_candidates(e.searcher())
    assert len(cands) == 10 and sizes[-1] == 50
    e.close()


def test_variant_rounds_draw_other_questions_from_another_first_seed(tmp_path):
    """The rounds' first seed (0 for every index) moves the draw to other held-out questions; seed 0 is
    the default."""
    import os

    from faqsearch.tuning.fusion import variant_rounds

    from .conftest import SAMPLE

    with build_index(os.path.join(SAMPLE, "faq.csv"), tmp_path / "s") as e:
        texts = {}
        for seed in (None, 0, 100):
            cands, gold = variant_rounds(e.searcher(), **({} if seed is None else {"seed": seed}))
            texts[seed] = [(c[0].faq_id, sorted(g)) for c, g in zip(cands, gold)]
            assert len(cands) >= 300 and len(cands) == len(gold)  # rounds until CONFIDENCE_SAMPLE are found
        assert texts[None] == texts[0] and texts[100] != texts[0]
