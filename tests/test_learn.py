"""`faqsearch learn` on a tiny random BERT (seconds a test, so marked slow): held-out questions never trained on, a new version
committed only where it wins, the encoder kept in the index and loaded back, refusals that change
nothing, and every engine answering with the encoder of the version it reads."""
import json
import os
import random

import numpy as np
import pytest

from faqsearch import FAQSearch
from faqsearch.errors import FAQSearchError, InvalidOptionError, TooFewVariantsError
from faqsearch.finetune import batches
from faqsearch.tuning import learn as learning

from .conftest import tree, write_corpus

TOPICS = ["password", "invoice", "delivery", "refund", "account", "card", "address", "coupon", "warranty",
          "subscription", "gift", "store"]
PHRASES = ["how do i change my {}", "i have a problem with my {}", "question about the {}"]


def corpus(tmp_path, variants=3):
    rows = [(f"f{i}", p.format(t), f"answer about {t}") for i, t in enumerate(TOPICS) for p in PHRASES[:variants]]
    return write_corpus(tmp_path, rows)


@pytest.fixture
def index(tmp_path, tiny_dir):
    e = FAQSearch.build(corpus(tmp_path), str(tmp_path / "ix"), model=tiny_dir)
    yield e
    e.close()


def test_wins_needs_a_higher_r1_or_an_equal_one_and_a_higher_mrr():
    assert learning.wins({"r1": 51, "mrr10": 10}, {"r1": 50, "mrr10": 90})
    assert learning.wins({"r1": 50, "mrr10": 61}, {"r1": 50, "mrr10": 60})
    assert not learning.wins({"r1": 50, "mrr10": 60}, {"r1": 50, "mrr10": 60})
    assert not learning.wins({"r1": 49, "mrr10": 99}, {"r1": 50, "mrr10": 60})


def test_distinct_batches_hold_one_pair_per_faq():
    pairs = [(f"a{g}{i}", f"b{g}{i}", g) for g in range(20) for i in range(5)]
    got = batches(pairs, 8, True, random.Random(0))
    assert got and all(len({p[2] for p in b}) == len(b) == 8 for b in got)
    assert len(batches(pairs, 8, False, random.Random(0))) == len(pairs) // 8


@pytest.mark.slow  # trains a tiny BERT
def test_held_out_questions_are_never_trained_on(index):
    from faqsearch.tuning import held_out_variants

    snap = index.snapshot
    qids, keys = snap.store.question_faqs()
    held = {r[2] for r in snap.store.question_rows(qids[held_out_variants(keys, 0)])}
    pairs, n, logged = learning.training_pairs(snap)
    assert n == len(held) == len(TOPICS)
    assert pairs and not held & {t for a, b, _ in pairs for t in (a, b)}


@pytest.mark.slow  # trains a tiny BERT
def test_a_winning_encoder_is_committed_kept_in_the_index_and_loaded_back(index, tmp_path, monkeypatch):
    monkeypatch.setattr(learning, "wins", lambda after, before: True)
    other = FAQSearch.open(index.path)  # another engine, opened before: it must follow the new encoder
    before_gen = index.snapshot.generation
    report = index.learn(minutes=2, epochs=2)
    assert report.kept and report.after is not None and report.held_out == len(TOPICS) and len(report.loss) == 2
    spec = index.config.encoder_spec
    assert spec["name"] == report.encoder and spec["stored"] == f"encoders/{report.encoder}"
    assert os.listdir(os.path.join(index.path, "encoders")) == [report.encoder]
    assert index.snapshot.generation == before_gen + 1 and index.config.learned["after"] == report.after
    first = index.ask("how do i change my refund").answers[0]
    other.reload()
    assert other.encoder.name == report.encoder
    assert other.ask("how do i change my refund").answers[0].faq_id == first.faq_id
    other.close()
    with FAQSearch.open(index.path) as again:  # a fresh process-like open: the stored encoder, by its spec
        assert again.encoder.name == report.encoder
        np.testing.assert_allclose(again.embed(["refund"]), index.embed(["refund"]), atol=1e-5)
    from faqsearch.index.versions import previous, restore

    restore(index.path, previous(index.path))  # back to the base encoder: that version is kept
    index.reload()
    assert index.encoder.name != report.encoder and index.ask("refund").answers


@pytest.mark.slow  # trains a tiny BERT
def test_weights_an_ingest_was_told_not_to_choose_are_kept(tmp_path, tiny_dir, monkeypatch):
    """`ingest --no-self-fusion` left the weights as given, but nothing recorded it: learn chose them."""
    import faqsearch.tuning.threshold as threshold

    monkeypatch.setattr(learning, "wins", lambda after, before: True)
    asked = []
    tuned = threshold.self_tuned
    monkeypatch.setattr(threshold, "self_tuned", lambda snap, enc, fusion, threshold: asked.append(fusion) or
                        tuned(snap, enc, fusion, threshold))
    with FAQSearch.build(corpus(tmp_path), str(tmp_path / "given"), model=tiny_dir, self_fusion=False) as e:
        assert e.config.fusion == {"chosen_by": threshold.FUSION_GIVEN}
        weights = (e.config.hybrid_weight, e.config.token_weight)
        asked.clear()
        report = e.learn(minutes=2, epochs=1)
        assert report.kept and asked == [False] and (e.config.hybrid_weight, e.config.token_weight) == weights
        assert any("given at ingest (--no-self-fusion)" in n for n in report.notes)
    with FAQSearch.build(corpus(tmp_path), str(tmp_path / "chosen"), model=tiny_dir) as e:
        assert (e.config.fusion or {}).get("chosen_by") != threshold.FUSION_GIVEN
        asked.clear()
        e.learn(minutes=2, epochs=1)
        assert asked == [True]  # weights the index chose are chosen again for the new encoder


@pytest.mark.slow  # trains a tiny BERT
def test_a_losing_encoder_changes_nothing(index, monkeypatch):
    from faqsearch.hub import cache_dir

    monkeypatch.setattr(learning, "wins", lambda after, before: False)
    files = tree(index.path)
    index.encoder.encode(["warm"])  # the base model's own export made first
    exports = sorted(os.listdir(cache_dir("onnx")))
    report = index.learn(minutes=2, epochs=1)
    assert not report.kept and report.after is not None and "not kept" in report.reason
    assert sorted(os.listdir(cache_dir("onnx"))) == exports  # the discarded encoder's ONNX copy went with it
    assert tree(index.path) == files and not os.path.exists(os.path.join(index.path, "encoders"))  # nothing left


@pytest.mark.slow  # trains a tiny BERT
def test_a_failure_after_training_leaves_the_index_as_it_was(index, monkeypatch):
    import faqsearch.tuning.threshold as threshold

    def boom(*a, **k):
        raise RuntimeError("killed while choosing the weights")

    monkeypatch.setattr(threshold, "self_tuned", boom)
    files = tree(index.path)
    with pytest.raises(RuntimeError):
        index.learn(minutes=2, epochs=1)
    assert tree(index.path) == files and not os.path.exists(os.path.join(index.path, "encoders"))


@pytest.mark.slow  # trains a tiny BERT
def test_a_full_disk_or_a_folder_it_may_not_write_is_one_line(index, monkeypatch, run):
    """Found by a hostile run: learn on a full disk ended in a 46-line traceback (safetensors' own error),
    and on a read-only folder its route answered 500; every other write says it in one line (a 503)."""
    import errno

    from faqsearch.errors import StorageError
    from faqsearch.files import storage_error

    files = tree(index.path)
    real = learning.tempfile.mkdtemp
    monkeypatch.setattr(learning.tempfile, "mkdtemp", lambda **k: (_ for _ in ()).throw(
        OSError(errno.EROFS, "Read-only file system", k.get("dir"))))
    with pytest.raises(StorageError, match="cannot write to .*encoders .*nothing was committed"):
        index.learn(minutes=2, epochs=1)
    monkeypatch.setattr(learning.tempfile, "mkdtemp", real)
    import faqsearch.finetune as finetune

    def full(*a, **k):
        raise type("SafetensorError", (Exception,), {})("Error while serializing: IoError(Os { code: 28, kind: "
                                                        "StorageFull, message: \"No space left on device\" }) (os error 28)")

    monkeypatch.setattr(finetune, "train_encoder", full)
    with pytest.raises(StorageError, match="no space left on the device holding"):
        index.learn(minutes=2, epochs=1)
    assert tree(index.path) == files
    assert storage_error(ValueError("a bad value"), "x") is None  # not a storage failure: raised as it is


@pytest.mark.slow  # trains a tiny BERT
def test_learn_refuses_what_it_cannot_do_and_says_why(tmp_path, tiny_dir, index):
    (tmp_path / "one").mkdir()
    with FAQSearch.build(corpus(tmp_path / "one", variants=1), str(tmp_path / "single"), model=tiny_dir) as single:
        files = tree(single.path)
        with pytest.raises(TooFewVariantsError, match="only 0 FAQs have three or more questions"):
            single.learn()
        assert tree(single.path) == files
    (tmp_path / "two").mkdir()  # two questions each: one held out leaves nothing to pair
    with FAQSearch.build(corpus(tmp_path / "two", variants=2), str(tmp_path / "pairs"), model=tiny_dir) as two:
        with pytest.raises(TooFewVariantsError, match="only 0 FAQs have three or more questions"):
            two.learn()
        assert not os.path.exists(os.path.join(two.path, "encoders"))
    with pytest.raises(InvalidOptionError, match=r"leaves no time to train.*give at least 1\.2 \(--minutes 1\.2\)"):
        index.learn(minutes=0.5)  # the least that works, not "give more" (1.2 minutes was refused after 1.1)
    import faqsearch.finetune as finetune

    real = finetune.train_encoder
    try:  # the deadline passed while the encoder loaded: what it left, what getting ready took, and a budget
        finetune.train_encoder = lambda *a, **k: []
        with pytest.raises(InvalidOptionError, match=r"1\.5 minutes left \d+ s to train, and getting ready to train "
                                                     r"\(loading the encoder.*\) took \d+ s of them; give at least"):
            index.learn(minutes=1.5)
    finally:
        finetune.train_encoder = real
    assert not os.path.exists(os.path.join(index.path, "encoders"))  # nothing left behind
    with pytest.raises(InvalidOptionError, match="USE multilingual"):
        learning.trainable_base({"backend": "use", "name": "use-multilingual"})
    with pytest.raises(InvalidOptionError, match="mean-pooled"):
        learning.trainable_base({"backend": "transformers", "name": "x", "pooling": "cls"})
    assert issubclass(TooFewVariantsError, FAQSearchError)


@pytest.mark.slow  # trains a tiny BERT
def test_a_missing_learned_encoder_is_said_with_the_fix(index, monkeypatch):
    import shutil

    monkeypatch.setattr(learning, "wins", lambda after, before: True)
    report = index.learn(minutes=2, epochs=1)
    shutil.rmtree(os.path.join(index.path, "encoders", report.encoder))
    from faqsearch.errors import ModelNotFoundError

    with FAQSearch.open(index.path) as again, pytest.raises(ModelNotFoundError, match="faqsearch restore"):
        again.ask("refund")


@pytest.mark.slow  # trains a tiny BERT
def test_cli_learn_json(index, monkeypatch):
    from click.testing import CliRunner

    from faqsearch.cli import cli

    monkeypatch.setattr(learning, "wins", lambda after, before: False)
    r = CliRunner().invoke(cli, ["learn", "--index", index.path, "--minutes", "2", "--epochs", "1", "--json", "-q"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["kept"] is False and got["before"]["queries"] == len(TOPICS) and got["index"] == index.path
    r = CliRunner().invoke(cli, ["learn", "--index", index.path, "--minutes", "2", "--epochs", "1", "-q"])
    assert r.exit_code == 0 and r.output.startswith("Not kept: held-out R@1") and "nothing changed" in r.output


def test_the_learn_route_needs_the_key_and_says_a_refusal(api):
    from .conftest import API_KEY

    client, _, path = api
    assert client.post("/indexes/shop/learn", json={}).status_code == 401
    files = tree(path)
    r = client.post("/indexes/shop/learn", json={"minutes": 2}, headers={"X-API-Key": API_KEY})
    assert r.status_code == 400 and "FAQs have three or more questions" in r.json()["error"]  # 6 FAQs: too few
    assert client.post("/indexes/shop/learn", json={"minutes": 0}, headers={"X-API-Key": API_KEY}).status_code == 422
    assert tree(path) == files


@pytest.mark.slow  # trains a tiny BERT
def test_edits_go_on_while_it_trains_and_the_new_version_holds_them(index, monkeypatch):
    """Training runs without the writer lock: an FAQ added meanwhile by another engine is encoded
    again with the rest and answered; a failure after the commit keeps the encoder the index names."""
    import faqsearch.finetune as finetune
    from faqsearch import FAQ

    monkeypatch.setattr(learning, "wins", lambda after, before: True)
    train = finetune.train_encoder

    def train_then_edit(*a, **k):
        out = train(*a, **k)
        with FAQSearch.open(index.path) as other:
            other.add([FAQ("late", "answer about parking", ["where can i park my car", "is there parking"])])
        return out

    monkeypatch.setattr(finetune, "train_encoder", train_then_edit)
    report = index.learn(minutes=2, epochs=1)
    assert report.kept and index.config.counts.faqs == len(TOPICS) + 1
    assert "late" in [a.faq_id for a in index.ask("where can i park my car", k=5, min_confidence=0).answers]

    monkeypatch.setattr(finetune, "train_encoder", train)
    import faqsearch.backends.embedded.backend as embedded

    real = embedded.EmbeddedBackend.reencode

    def commit_then_fail(self, *a, **k):
        real(self, *a, **k)
        raise KeyboardInterrupt  # after the commit: the live version names the new encoder

    monkeypatch.setattr(embedded.EmbeddedBackend, "reencode", commit_then_fail)
    with pytest.raises(KeyboardInterrupt):
        index.learn(minutes=2, epochs=1)
    index.reload()
    assert os.path.isdir(os.path.join(index.path, index.config.encoder_spec["stored"]))
    assert index.ask("how do i change my refund").answers


@pytest.mark.slow  # trains a tiny BERT
def test_a_later_learn_removes_encoders_no_version_names(index, monkeypatch):
    monkeypatch.setattr(learning, "wins", lambda after, before: True)
    first = index.learn(minutes=2, epochs=1)
    folder = os.path.join(index.path, "encoders")
    os.makedirs(os.path.join(folder, "learned-orphan"))
    stale, fresh = os.path.join(folder, ".training-old"), os.path.join(folder, ".training-new")
    os.makedirs(stale)
    os.makedirs(fresh)  # another learn's training, still running
    os.utime(stale, (0, 0))
    monkeypatch.setattr(learning, "wins", lambda after, before: False)
    index.learn(minutes=2, epochs=1)
    assert sorted(os.listdir(folder)) == [".training-new", first.encoder]


@pytest.mark.slow  # trains a tiny BERT
def test_ingest_learn_and_info(tmp_path, tiny_dir, monkeypatch):
    from click.testing import CliRunner

    from faqsearch.cli import cli

    monkeypatch.setattr(learning, "wins", lambda after, before: True)
    path = str(tmp_path / "cli")
    r = CliRunner().invoke(cli, ["ingest", corpus(tmp_path), "--index", path, "--model", tiny_dir, "--no-self-fusion",
                                 "-q"])
    assert r.exit_code == 0, r.output
    info = CliRunner().invoke(cli, ["info", "--index", path])
    assert "learned:    not yet; 12 FAQs have three or more questions" in info.output
    r = CliRunner().invoke(cli, ["ingest", corpus(tmp_path), "--index", path, "--model", tiny_dir, "--learn", "2",
                                 "--json", "-q"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["learned"]["kept"] and got["encoder"] == got["learned"]["encoder"]
    info = CliRunner().invoke(cli, ["info", "--index", path])
    assert f"learned:    from {tiny_dir} on the index's own questions" in info.output and "held-out R@1" in info.output
    (tmp_path / "few").mkdir()
    r = CliRunner().invoke(cli, ["ingest", corpus(tmp_path / "few", variants=1), "--index", str(tmp_path / "few" / "ix"),
                                 "--model", tiny_dir, "--learn", "2", "-q"])
    assert r.exit_code == 0 and "Not learned: only 0 FAQs have three or more questions" in r.output


def test_budgets_below_the_least_that_works_are_refused_by_the_cli_and_the_api():
    from faqsearch.defaults import LEARN_MIN_MINUTES
    from faqsearch.service.models import LearnIn
    from faqsearch.tuning.learn import MIN_TRAIN_S, RESERVE_S

    assert LEARN_MIN_MINUTES * 60 >= RESERVE_S + MIN_TRAIN_S
    from click.testing import CliRunner

    from faqsearch.cli import cli

    r = CliRunner().invoke(cli, ["learn", "--index", "nowhere", "--minutes", "1"])
    assert r.exit_code == 2 and "1.2" in r.output
    for bad in ({"minutes": 1.0}, {"minutes": True}, {"epochs": True}):
        with pytest.raises(ValueError):
            LearnIn(**bad)


def test_logged_queries_the_index_answers_confidently_join_their_faq_for_training(tmp_path, monkeypatch):
    """Self-training: a logged query the index answers at LEARN_LOG_CONFIDENCE or more is paired with a
    question (not held out) of that FAQ, at most LEARN_LOG_PER_FAQ per FAQ; queries a person assigned,
    stored questions and queries answered below it are not; without a log, none."""
    from faqsearch.querylog import QueryLog
    from faqsearch.tuning import held_out_variants

    from .conftest import FakeEncoder

    encoder = FakeEncoder()
    with FAQSearch.build(corpus(tmp_path), str(tmp_path / "ix"), encoder=encoder) as e:
        snap = e.snapshot
        assert learning.training_pairs(snap, 0, lambda: encoder)[2] == 0  # no log yet
        asked = [f"{p} {t} please" for t in TOPICS for p in ("help with my", "what about my", "trouble with the")]
        asked += ["how do i change my password", "completely unrelated words"]
        results = e.ask_many(asked, log=True, min_confidence=0.0)
        qlog = QueryLog.for_index(e.path)
        qlog.mark_assigned(["help with my invoice please"], "f1")
        qlog.close()
        conf = {q: r.answers[0].confidence for q, r in zip(asked, results)}
        floor = sorted(conf.values())[len(conf) // 3]
        monkeypatch.setattr(learning, "LEARN_LOG_CONFIDENCE", floor)
        monkeypatch.setattr(learning, "LEARN_LOG_PER_FAQ", 2)
        snap = e.snapshot
        pairs, n_held, n_logged = learning.training_pairs(snap, 0, lambda: encoder)
        logged = pairs[len(pairs) - n_logged:]
        qids, keys = snap.store.question_faqs()
        rows = snap.store.question_rows(qids)
        held = {rows[i][2] for i in held_out_variants(keys, 0)}
        faq_of = {r[2]: r[1] for r in rows}
        answer_of = {q: r.answers[0].faq_id for q, r in zip(asked, results)}
        assert n_logged and all(conf[q] >= floor and faq_of[b] == answer_of[q] and b not in held for q, b, _ in logged)
        assert not {"help with my invoice please", "how do i change my password"} & {q for q, _, _ in logged}
        through = {q: r.answers[0].question for q, r in zip(asked, results)}
        assert not any(through[q] in held for q, _, _ in logged)  # none came through a held-out question
        per = {}
        for q, b, g in logged:
            per.setdefault(answer_of[q], set()).add(g)
            assert sum(answer_of[x] == answer_of[q] for x, _, _ in logged) <= 2
        group = {faq_of[a]: g for a, _, g in pairs[:len(pairs) - n_logged]}
        assert all(gs == {group[f]} for f, gs in per.items())  # one batch group per FAQ: its questions' pairs'


def test_the_budget_counts_a_slow_encoder_at_its_own_pace():
    """A large index's second encoding is timed from a sample of its questions: an encoder 5 times slower
    than MiniLM (mpnet) would otherwise overrun the budget by minutes; small indexes skip the timing."""
    import time as clock

    from .conftest import FakeEncoder

    class Slow(FakeEncoder):
        def encode(self, texts, batch_size=32, progress=False):
            clock.sleep(0.02 * len(texts))
            return super().encode(texts, batch_size, progress)

    qs = learning.Questions(pairs=[], groups={}, index_of={}, held=set(), stored={f"question {i}" for i in range(600)},
                            n_held=0)
    assert learning.encode_rate(lambda: Slow(), qs, 600) < 55  # 64 texts at 50 a second
    assert learning.encode_rate(lambda: FakeEncoder(), qs, 600) == learning.ENCODE_RATE  # never assumed faster
    assert learning.encode_rate(lambda: 1 / 0, qs, learning.RATE_FROM) == learning.ENCODE_RATE  # not timed
