"""The questions' token states kept with a version: written by ingest from the same encoder run,
read by token matching instead of encoding candidates, exactly the states it would compute, shared
by refits and compactions, dropped where hybrid mode does not use them, refused when damaged."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from faqsearch import FAQSearch
from faqsearch.build import build
from faqsearch.errors import IndexFormatError
from faqsearch.backends.embedded.tokenstates import DIR, TokenStates, encode_with_tokens

from .conftest import ROOT, version

pytestmark = pytest.mark.slow  # the real bundled encoder throughout

FAQ = os.path.join(ROOT, "sample_data", "faq.csv")
TEXTS = ["How do I reset my passwords?", "a", "", "退货需要多长时间？", "word " * 300, "Can my dog catch COVID-19?"]


@pytest.fixture(scope="module")
def built(tmp_path_factory, minilm) -> str:
    """sample_data ingested once for the module; tests that change it take a copy (:func:`_copy`)."""
    path = str(tmp_path_factory.mktemp("tokenstates") / "ix")
    FAQSearch.build(FAQ, path, encoder=minilm, self_fusion=False).close()  # the default weights: token matching on
    return path


def _copy(built: str, tmp_path) -> str:
    path = str(tmp_path / "ix")
    shutil.copytree(built, path)
    return path


def _answers(e: FAQSearch, queries: list[str]) -> list[list[tuple[str, float, float | None]]]:
    # the whole ranked list (threshold -1): a refit learns its confidence again, which may move the decision
    return [[(a.faq_id, a.fused, a.token) for a in r.answers] for r in e.ask_many(queries, k=5, threshold=-1.0)]


@pytest.mark.parametrize("runtime", ["onnx", "torch"])
def test_one_encoder_run_gives_what_the_two_calls_give(minilm, runtime):
    from faqsearch.encoders import load_encoder

    enc = minilm if runtime == "onnx" else load_encoder("minilm", runtime="torch")
    vecs, states = encode_with_tokens(enc, TEXTS, batch_size=4)
    assert np.allclose(vecs, enc.encode(TEXTS, batch_size=4), atol=1e-5)
    for (a, sa), (b, sb) in zip(states, enc.token_states(TEXTS, batch_size=4)):
        assert np.array_equal(sa, sb) and a.dtype == np.float16 and a.shape == b.shape
        assert np.abs(a.astype(np.float32) - b.astype(np.float32)).max(initial=0.0) < 2e-3


def test_ingest_keeps_them_and_answers_do_not_change(built, minilm):
    e = FAQSearch.open(built, encoder=minilm)
    snap = e.searcher().snap
    assert snap.token_weight > 0 and isinstance(snap.tokens, TokenStates)
    questions = [t for chunk in snap.store.iter_texts() for t in chunk]
    kept = snap.tokens.get(questions[:50])
    assert len(kept) == 50 and len(snap.tokens) == len(set(questions))
    for q, st in zip(kept, minilm.token_states(list(kept))):
        assert kept[q].shape == st[0].shape
        assert np.abs(kept[q].astype(np.float32) - st[0].astype(np.float32)).max(initial=0.0) < 2e-3
    queries = ["how do I get my money back", "my parcel never came", "change the email on my account",
               "can I pay with paypal", "where is my order"]
    stored = _answers(e, queries)
    computed = FAQSearch.open(built)
    object.__setattr__(computed.searcher().snap, "tokens", None)  # as an index without them: encoded at query time
    for a, b in zip(stored, _answers(computed, queries)):
        assert [x[0] for x in a] == [y[0] for y in b]
        assert np.allclose([x[2] for x in a], [y[2] for y in b], atol=1e-3)
    computed.close()
    e.close()


def test_a_query_runs_the_encoder_once_and_candidates_not_at_all(built, minilm):
    e = FAQSearch.open(built, encoder=minilm)
    calls: list[str] = []
    enc = e.searcher().queries.encoder
    for name in ("encode", "token_states", "encode_with_tokens"):
        real = getattr(enc, name)
        setattr(enc, name, (lambda real, name: lambda *a, **k: (calls.append(name), real(*a, **k))[1])(real, name))
    try:
        r = e.ask("how long until my refund arrives?")
        assert r.nearest.token is not None and calls == ["encode_with_tokens"]
    finally:
        for name in ("encode", "token_states", "encode_with_tokens"):
            delattr(enc, name)
    e.close()


def test_edits_encode_new_questions_and_new_versions_share_the_files(built, tmp_path, minilm):
    path = _copy(built, tmp_path)
    e = FAQSearch.open(path, encoder=minilm)
    first = version(path) / DIR / "states.f16"
    inode = os.stat(first).st_ino
    e.add([{"id": "axolotl", "question": "How do I feed my pet axolotl?", "answer": "Worms."}])
    r = e.ask("what food should I give an axolotl")
    assert r.nearest.faq_id == "axolotl" and r.nearest.token is not None  # not kept: encoded at query time
    assert e.searcher().snap.tokens.get(["How do I feed my pet axolotl?"]) == {}
    before = _answers(e, ["what food should I give an axolotl", "refund please"])
    e.refit()  # a new base: the kept states come along as links, keyed by text
    now = version(path) / DIR / "states.f16"
    assert now != first and os.stat(now).st_ino == inode
    assert [[x[0] for x in a] for a in _answers(e, ["what food should I give an axolotl", "refund please"])] == \
        [[x[0] for x in a] for a in before]
    e.close()


def test_no_files_where_hybrid_mode_does_not_use_them(tmp_path, minilm, fake_encoder, small_corpus):
    build(small_corpus, str(tmp_path / "off"), encoder=minilm, calibrate=lambda snap, enc: {"token_weight": 0.0})
    assert not (version(tmp_path / "off") / DIR).exists()
    build(small_corpus, str(tmp_path / "on"), encoder=minilm, calibrate=lambda snap, enc: {"token_weight": 1.0})
    assert (version(tmp_path / "on") / DIR).exists()
    build(small_corpus, str(tmp_path / "fake"), encoder=fake_encoder)  # no token states at all
    assert not (version(tmp_path / "fake") / DIR).exists()


def test_damaged_or_foreign_files_are_not_read(built, tmp_path):
    path = _copy(built, tmp_path)
    directory = str(version(path))
    spec = json.loads((version(path) / "config.json").read_text())["encoder"]
    assert TokenStates.open(directory, spec) is not None
    for other in ({"pooling": "first-last-avg"}, {"quantize": "int8"}, {"max_length": 64}):  # another encoder's
        assert TokenStates.open(directory, {**spec, **other}) is None
    meta_path = os.path.join(directory, DIR, "meta.json")
    meta = json.loads(open(meta_path).read())
    spans_path = os.path.join(directory, DIR, "spans.npy")
    spans = np.load(spans_path)
    for damage in ("[1, 2]", "null", json.dumps({**meta, "dimension": 192, "tokens": 2 * meta["tokens"]}),
                   json.dumps({**meta, "bytes": None})):
        with open(meta_path, "w") as fh:
            fh.write(damage)
        assert TokenStates.open(directory, spec) is None, damage
    with open(meta_path, "w") as fh:
        json.dump(meta, fh)
    bad = spans.copy()
    bad[:, 1] = bad[:, 0] - 1  # spans that end before they start: every state would be empty
    np.save(spans_path, bad)
    assert TokenStates.open(directory, spec) is None
    np.save(spans_path, spans)
    assert TokenStates.open(directory, spec) is not None
    with open(os.path.join(directory, DIR, "states.f16"), "r+b") as fh:
        fh.truncate(1000)
    assert TokenStates.open(directory, spec) is None
    with pytest.raises(IndexFormatError, match="tokens/states.f16 is damaged"):  # the version's records see it first
        FAQSearch.open(path)


def test_token_files_are_recorded_and_a_flipped_byte_is_refused_at_open(built, tmp_path):
    """Every file under tokens/ has its size and fingerprint in config.json, checked at each open (a
    flipped byte in states.f16 used to be read as it was); a version whose config records none of
    them (one written before they were recorded) opens and computes the token states instead."""
    path = _copy(built, tmp_path)
    config_path = version(path) / "config.json"
    config = json.loads(config_path.read_text())
    assert {f"tokens/{n}" for n in os.listdir(version(path) / DIR)} <= set(config["files"])
    states = version(path) / DIR / "states.f16"
    data = bytearray(states.read_bytes())
    data[-3] ^= 0x40
    states.write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match="tokens/states.f16 is damaged .*not the one this version recorded"):
        FAQSearch.open(path)
    config["files"] = {k: v for k, v in config["files"].items() if not k.startswith("tokens/")}
    config_path.write_text(json.dumps(config))
    with FAQSearch.open(path) as e:
        assert e.searcher().snap.tokens is None and e.ask("refund").nearest.token is not None  # encoded instead


def test_a_new_version_leaves_them_behind_where_the_token_weight_is_now_0(built, tmp_path, minilm):
    path = _copy(built, tmp_path)
    e = FAQSearch.open(path, encoder=minilm)
    e._set_config(token_weight=0.0)  # what tune --fusion --apply commits when 0 wins
    e.refit()
    assert not (version(path) / DIR).exists() and e.info()["token_states"] is None
    e.close()


def test_an_encoder_without_token_spans_keeps_none_and_still_answers(tmp_path, small_corpus):
    """A transformers model with a slow tokenizer has no token spans: ingest and ask go on without
    token states (they used to fail inside the tokenizer)."""
    from faqsearch.encoders import load_encoder
    from faqsearch.errors import FAQSearchError

    enc = load_encoder("minilm", runtime="torch")
    enc.has_token_states = False  # as a slow tokenizer sets it
    with pytest.raises(FAQSearchError, match="no fast tokenizer"):
        encode_with_tokens(enc, ["a question"], batch_size=4)
    e = FAQSearch.build(small_corpus, str(tmp_path / "ix"), encoder=enc)
    assert not (version(tmp_path / "ix") / DIR).exists()
    r = e.ask("how do I reset my password")
    assert r.nearest.faq_id == "1" and r.nearest.token is None
    e.close()
