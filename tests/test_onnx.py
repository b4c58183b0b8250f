"""ONNX Runtime encoders: parity with torch, the cache, fallbacks, and no torch on the query path."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from faqsearch.errors import InvalidOptionError

pytest.importorskip("onnxruntime", reason="onnxruntime not installed")

from faqsearch.encoders import _minilm_path, load_encoder  # noqa: E402
from faqsearch.encoders.onnx import PARITY, OnnxEncoder, entry  # noqa: E402
from faqsearch.encoders.transformer import TransformerEncoder  # noqa: E402

TEXTS = ["How do I reset my password?", "wo ist mein Paket", "退货需要多长时间？", "",
         "a much longer question about refunds, store credit, vouchers and what happens when an item is returned late"]


@pytest.mark.slow
def test_default_encoder_runs_on_onnx_with_torch_parity():
    onnx_enc = load_encoder("minilm")
    torch_enc = load_encoder("minilm", runtime="torch")
    assert isinstance(onnx_enc, OnnxEncoder) and isinstance(torch_enc, TransformerEncoder)
    assert onnx_enc.meta["ok"] and onnx_enc.meta["parity_min_cosine"] >= PARITY
    assert onnx_enc.meta["weights_sha256"]  # the export records the weights it came from
    a, b = onnx_enc.encode(TEXTS, batch_size=2), torch_enc.encode(TEXTS)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cos.min() >= PARITY
    # same identity: an index built on one runtime opens with the other
    from faqsearch.encoders import IDENTITY_KEYS

    assert {k: onnx_enc.spec()[k] for k in IDENTITY_KEYS} == {k: torch_enc.spec()[k] for k in IDENTITY_KEYS}


@pytest.mark.slow
@pytest.mark.parametrize("pooling", ["cls", "first-last-avg"])
def test_other_poolings_export_with_parity(pooling, tmp_path, monkeypatch):
    monkeypatch.setenv("FAQSEARCH_CACHE", str(tmp_path))
    enc = load_encoder("minilm", pooling=pooling, runtime="onnx", max_length=64)
    ref = load_encoder("minilm", pooling=pooling, runtime="torch", max_length=64)
    a, b = enc.encode(TEXTS), ref.encode(TEXTS)
    assert ((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))).min() >= PARITY


@pytest.mark.slow
def test_failed_parity_is_remembered_and_torch_serves(tmp_path, monkeypatch):
    monkeypatch.setenv("FAQSEARCH_CACHE", str(tmp_path))
    dest = entry(_minilm_path(), "mean", 256)
    os.makedirs(dest)
    with open(os.path.join(dest, "meta.json"), "w") as f:
        json.dump({"ok": False, "parity_min_cosine": 0.7}, f)
    assert isinstance(load_encoder("minilm"), TransformerEncoder)  # auto: falls back, no new export
    from faqsearch.errors import FAQSearchError

    with pytest.raises(FAQSearchError, match="parity"):
        load_encoder("minilm", runtime="onnx")


@pytest.mark.slow
def test_runtime_choices(monkeypatch):
    with pytest.raises(InvalidOptionError, match="must be auto, onnx or torch"):  # a one-line error, not a traceback
        load_encoder("minilm", runtime="tensorrt")
    assert isinstance(load_encoder("minilm", quantize=True), TransformerEncoder)  # int8 is a torch option


@pytest.mark.slow
def test_ask_from_a_new_process_imports_no_torch(tmp_path):
    """The CLI query path: ONNX Runtime, tokenizers, FAISS, SQLite; neither torch, transformers nor
    pandas (which sqlite-utils pulls in) is imported."""
    from faqsearch import FAQSearch

    corpus = tmp_path / "faq.csv"
    corpus.write_text("id,question,answer\npw,How do I reset my password?,Use the Forgot password link.\n"
                      "ship,How much does delivery cost?,Free above 50 EUR.\n")
    ix = str(tmp_path / "ix")
    FAQSearch.build(str(corpus), ix).close()
    code = ("import sys, json\nfrom faqsearch.cli import cli\n"
            "try:\n    cli(['ask', 'forgot my password', '--index', sys.argv[1], '--json', '-q'])\n"
            "except SystemExit:\n    pass\n"
            "print(json.dumps(sorted(m for m in ('torch', 'transformers', 'pandas', 'sqlite_utils') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code, ix], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    answer, loaded = out.stdout.strip().splitlines()
    assert json.loads(answer)["answers"][0]["faq_id"] == "pw"
    assert json.loads(loaded) == []
