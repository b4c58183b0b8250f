"""The device (--device auto|cpu|cuda, $FAQSEARCH_DEVICE) and the CPU threads (affinity, --threads,
$FAQSEARCH_THREADS): resolved in faqsearch.encoders.device, passed through by every command that
encodes or generates; a GPU build that answers like the CPU one (run where CUDA is present)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from faqsearch.encoders import device as dev
from faqsearch.encoders.device import (DeviceError, available_cores, configure_torch, device_scope, requested_device,
                                       resolve_device, resolve_threads, use_device)

from .conftest import SAMPLE, FakeEncoder

ENCODING_COMMANDS = ("ingest", "upsert", "add", "update", "eval", "tune transform", "tune fusion", "tune threshold",
                     "serve", "train encoder", "train simbert", "paraphrase", "augment")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("FAQSEARCH_DEVICE", "FAQSEARCH_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(dev, "_process", None)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(dev, "cuda_available", lambda **_: False)


# ------------------------------------------------------------------------------------ device choice
def test_auto_is_the_cpu_without_a_gpu(no_gpu):
    assert requested_device() == "auto"
    assert resolve_device() == "cpu" and resolve_device("auto") == "cpu" and resolve_device("cpu") == "cpu"


def test_auto_is_cuda_where_torch_sees_a_gpu(monkeypatch):
    monkeypatch.setattr(dev, "cuda_available", lambda **_: True)
    assert resolve_device() == "cuda" and resolve_device("cpu") == "cpu"


def test_this_machine_without_cuda_resolves_auto_to_the_cpu():
    if dev.cuda_available(look_first=False):
        pytest.skip("this machine has a CUDA GPU")
    assert resolve_device("auto") == "cpu"


def test_cuda_without_a_gpu_is_refused_naming_the_cpu_option(no_gpu):
    with pytest.raises(DeviceError, match="--device cpu"):
        resolve_device("cuda")


def test_environment_variable_is_honoured(monkeypatch, no_gpu):
    monkeypatch.setenv("FAQSEARCH_DEVICE", "CPU")
    assert requested_device() == "cpu" and resolve_device() == "cpu"
    monkeypatch.setenv("FAQSEARCH_DEVICE", "cuda")
    with pytest.raises(DeviceError, match="--device cpu"):
        resolve_device()
    assert resolve_device("cpu") == "cpu"  # an explicit device wins over the environment


def test_a_bad_value_lists_the_valid_ones(monkeypatch):
    with pytest.raises(DeviceError, match="auto, cpu, cuda.*'gpu'"):
        resolve_device("gpu")
    monkeypatch.setenv("FAQSEARCH_DEVICE", "tpu")
    with pytest.raises(DeviceError, match="FAQSEARCH_DEVICE must be one of auto, cpu, cuda"):
        requested_device()


def test_scope_precedence_option_then_environment_then_command_default(monkeypatch, no_gpu):
    with device_scope(None, default="cpu") as want:
        assert want == "cpu" == requested_device()
    monkeypatch.setenv("FAQSEARCH_DEVICE", "auto")
    with device_scope(None, default="cpu") as want:
        assert want == "auto"  # the environment wins over a command's own default
    with device_scope("cpu") as want:
        assert want == "cpu"
    assert dev._process is None  # the scope ends with the command
    with pytest.raises(DeviceError, match="--device cpu"):
        with device_scope("cuda"):  # checked at once, before the command does anything
            pass
    assert dev._process is None
    assert use_device("cpu") is None and requested_device() == "cpu" and use_device(None) == "cpu"


def test_cpu_only_encoders_stay_on_the_cpu(monkeypatch, caplog):
    monkeypatch.setattr(dev, "cuda_available", lambda **_: True)
    assert dev.cpu_only("int8", "auto") == "cpu" and not caplog.records
    assert dev.cpu_only("int8", "cuda") == "cpu" and "CPU only" in caplog.text


def test_device_is_not_part_of_the_encoder_spec():
    from faqsearch.encoders import IDENTITY_KEYS

    assert "device" not in IDENTITY_KEYS and "dtype" not in IDENTITY_KEYS
    from faqsearch.build import EncoderSpec

    assert EncoderSpec(device="cpu").device == "cpu"


# ------------------------------------------------------------------------------------ the CLI
def test_every_encoding_command_has_the_device_and_threads_options():
    from faqsearch.cli import cli

    for name in ENCODING_COMMANDS:
        command = cli
        for part in name.split():
            command = command.commands[part]
        opts = {o for p in command.params for o in p.opts}
        assert "--device" in opts and "--threads" in opts, name
    assert {o for p in cli.commands["ask"].params for o in p.opts} >= {"--device", "--threads"}


@pytest.fixture
def recorded(monkeypatch, fake_models):
    """Every encoder load (build, open, lazily on first use) records the device asked for then."""
    import faqsearch.encoders as encoders

    seen: list[tuple[str, int | None]] = []

    def load(*a, threads=None, device=None, **k):
        seen.append((requested_device(device), threads))
        return FakeEncoder()

    monkeypatch.setattr(encoders, "load_encoder", load)
    return seen


@pytest.fixture
def built(run, small_corpus, tmp_path, recorded):
    ix = str(tmp_path / "ix")
    assert run("ingest", small_corpus, "--index", ix, "-q").exit_code == 0
    recorded.clear()
    return ix


def test_ingest_passes_the_device_through_and_records_none(run, small_corpus, tmp_path, recorded, no_gpu):
    import json

    ix = str(tmp_path / "ix")
    r = run("ingest", small_corpus, "--index", ix, "--device", "cpu", "--threads", "3", "-q", "--json")
    assert r.exit_code == 0, r.output
    assert recorded[0] == ("cpu", 3)
    info = json.loads(run("info", "--index", ix, "--json").output)
    assert "device" not in json.dumps(info["encoder"])
    assert dev._process is None  # nothing stays set after the command
    recorded.clear()
    assert run("ingest", small_corpus, "--index", ix, "--force", "-q").exit_code == 0
    assert recorded[0] == ("auto", None)


def test_cuda_without_a_gpu_fails_before_anything_is_written(run, small_corpus, tmp_path, recorded, no_gpu):
    ix = tmp_path / "ix"
    r = run("ingest", small_corpus, "--index", ix, "--device", "cuda")
    assert r.exit_code == 1 and "--device cpu" in r.output
    assert not ix.exists() and not recorded


def test_bad_device_option_lists_the_choices(run, small_corpus, tmp_path):
    r = run("ingest", small_corpus, "--index", tmp_path / "ix", "--device", "gpu")
    assert r.exit_code == 2 and "auto" in r.output and "cuda" in r.output


def test_bad_environment_value_is_an_error_of_the_command(run, small_corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("FAQSEARCH_DEVICE", "gpu")
    r = run("ingest", small_corpus, "--index", tmp_path / "ix")
    assert r.exit_code == 1 and "FAQSEARCH_DEVICE must be one of auto, cpu, cuda" in r.output


@pytest.mark.parametrize("command", ["upsert", "add", "update"])
def test_edits_pass_the_device_and_threads_through(command, run, built, recorded, tmp_path):
    more = tmp_path / "more.csv"
    kept = "4,Do you ship abroad?,We ship to the EU.\n" if command == "upsert" else ""  # (sharing no id: refused)
    more.write_text(f"id,question,answer\n9,Do you sell gift cards?,Yes.\n{kept}", encoding="utf-8")
    r = run(command, more, "--index", built, "--device", "cpu", "--threads", "2", "-q")
    assert r.exit_code == 0, r.output
    assert recorded == [("cpu", 2)]


def test_eval_and_tune_pass_the_device_through(run, built, recorded, tmp_path, monkeypatch):
    queries = tmp_path / "q.csv"
    queries.write_text("query,faq_id\nforgot my password,1\nreturn policy,3\nshipping time,2\n", encoding="utf-8")
    assert run("eval", queries, "--index", built, "--device", "cpu", "--threads", "2", "-q").exit_code == 0
    assert recorded == [("cpu", 2)]
    recorded.clear()
    monkeypatch.setenv("FAQSEARCH_DEVICE", "cpu")
    run("tune", queries, "--index", built, "-q")  # too few queries to tune well: it encodes them first
    assert recorded and recorded[0] == ("cpu", None)


def test_serve_passes_the_device_through(run, built, monkeypatch):
    pytest.importorskip("fastapi")
    import faqsearch.service as service

    seen = {}
    monkeypatch.setattr(service, "serve", lambda *a, **k: seen.update(device=requested_device(), **k))
    assert run("serve", "--index", built, "--device", "cpu", "--threads", "2").exit_code == 0
    assert seen["device"] == "cpu" and seen["threads"] == 2


class _Stop(Exception):
    pass


def test_generating_commands_pass_the_device_through(run, built, recorded, monkeypatch, tmp_path):
    import faqsearch.generators as generators
    from faqsearch.errors import FAQSearchError

    seen = []

    def load_generator(*a, threads=None, **k):
        seen.append((requested_device(), threads))
        raise FAQSearchError("stop here")

    monkeypatch.setattr(generators, "load_generator", load_generator)
    # the bundled generator counts as installed: where its weights package is not (a GPU machine), the
    # per-language choice refused the text before the device reached load_generator
    monkeypatch.setattr("faqsearch.generators.languages.installed", lambda name: True)
    for args in (["paraphrase", "where is my parcel"], ["augment", "--index", built]):
        r = run(*args, "--device", "cpu", "--threads", "2", "-q")
        assert r.exit_code == 1 and "stop here" in r.output, args
    assert seen == [("cpu", 2), ("cpu", 2)]

    import importlib

    model = importlib.import_module("faqsearch.simbert.model")
    train = importlib.import_module("faqsearch.simbert.train")  # the package exports a function of that name

    monkeypatch.setattr(model.SimBert, "from_pretrained", classmethod(lambda cls, *a, **k: object()))

    def fake_train(*a, device=None, **k):
        seen.append((resolve_device(device), None))
        raise FAQSearchError("trained")

    monkeypatch.setattr(train, "train", fake_train)
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("sentence1,sentence2\na b,c d\ne f,g h\n", encoding="utf-8")
    r = run("train", "--pairs", pairs, "--out", tmp_path / "m", "--device", "cpu", "-q")
    assert r.exit_code == 1 and "trained" in r.output
    assert seen[-1] == ("cpu", None)


def test_ask_runs_on_the_cpu_unless_told(run, built, recorded, monkeypatch):
    monkeypatch.setattr(dev, "cuda_available", lambda **_: True)
    assert run("ask", "forgot my password", "--index", built, "-q").exit_code == 0
    assert recorded[-1][0] == "cpu"  # one query: sooner on the CPU than CUDA starts
    monkeypatch.setenv("FAQSEARCH_DEVICE", "auto")
    assert run("ask", "forgot my password", "--index", built, "-q").exit_code == 0
    assert recorded[-1][0] == "auto"


# ------------------------------------------------------------------------------------ threads
def test_threads_follow_the_affinity_mask_not_the_core_count(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert available_cores() == 3 and resolve_threads() == 3


def test_threads_option_and_environment(monkeypatch):
    from faqsearch.errors import InvalidOptionError

    assert resolve_threads(5) == 5
    monkeypatch.setenv("FAQSEARCH_THREADS", "2")
    assert resolve_threads() == 2 and resolve_threads(4) == 4
    monkeypatch.setenv("FAQSEARCH_THREADS", "many")
    with pytest.raises(InvalidOptionError, match="FAQSEARCH_THREADS"):
        resolve_threads()
    with pytest.raises(InvalidOptionError):
        resolve_threads(0)


def test_torch_threads_are_set_without_oversubscription(monkeypatch):
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    monkeypatch.setenv("RAYON_NUM_THREADS", "1")  # kept: a user's own value is never overridden
    try:
        assert configure_torch(1) == 1 and torch.get_num_threads() == 1
        assert os.environ["RAYON_NUM_THREADS"] == "1"
        assert configure_torch() == available_cores() == torch.get_num_threads()
        interop = torch.get_num_interop_threads()
        assert interop <= available_cores() or interop == before  # a pool already started keeps its size
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_onnx_session_uses_every_core_and_one_inter_op_thread(tmp_path):
    from faqsearch.encoders import load_encoder
    from faqsearch.encoders.onnx import OnnxEncoder

    enc = load_encoder("minilm", device="cpu")
    if not isinstance(enc, OnnxEncoder):
        pytest.skip("ONNX Runtime does not serve the default encoder here")
    opts = enc.session.get_session_options()
    assert opts.intra_op_num_threads == available_cores() and opts.inter_op_num_threads == 1
    two = OnnxEncoder(enc.path, meta=enc.meta, name="minilm", threads=2)
    assert two.session.get_session_options().intra_op_num_threads == 2


# ------------------------------------------------------------------------------------ the GPU pipeline
@pytest.mark.slow
def test_gpu_pipeline_run_on_the_cpu_matches_the_cpu_path(monkeypatch, tmp_path):
    """The CUDA code path (parity check and its cached verdict, length-sorted batches, tokenising on
    a background thread, block copies) run with torch's CPU device: the vectors of the plain path."""
    from faqsearch.encoders import gpu, load_encoder
    from faqsearch.encoders.base import PARITY_TEXTS

    monkeypatch.setenv("FAQSEARCH_CACHE", str(tmp_path))
    monkeypatch.setattr(gpu, "TARGET", "cpu")
    monkeypatch.setattr(gpu, "precisions", lambda: ["float32"])
    monkeypatch.setattr(gpu, "BLOCK", 5)  # several copies back, one batch larger than a block
    enc = load_encoder("minilm", runtime="torch", device="cpu")
    texts = PARITY_TEXTS + [f"question {i} about refunds " * (i % 5 + 1) for i in range(30)]
    ref = enc.encode_on_cpu(texts, 16)
    assert gpu.to_gpu(enc) == "float32"
    verdicts = list((tmp_path / "cuda").iterdir())
    assert len(verdicts) == 1 and '"dtype": "float32"' in verdicts[0].read_text()
    got = gpu.encode(enc, texts, 8, min_batch=4)
    assert got.dtype == np.float32 and got.shape == ref.shape
    assert gpu.cosines(got, ref).min() > 0.99999
    monkeypatch.setattr(gpu, "encode", None)  # the verdict is read back: no second check
    assert gpu.to_gpu(enc) == "float32"


def test_gpu_batches_halve_when_the_gpu_runs_out_of_memory(monkeypatch):
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from faqsearch.encoders import gpu

    sizes = []

    def fake(enc, texts, size, progress):
        sizes.append(size)
        if size > 64:
            raise torch.cuda.OutOfMemoryError("out of memory")
        return np.zeros((len(texts), 4), np.float32)

    monkeypatch.setattr(gpu, "_encode", fake)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    enc = SimpleNamespace(name="m")
    assert gpu.encode(enc, ["a"] * 3, 64).shape == (3, 4)
    assert sizes == [256, 128, 64] and enc.gpu_batch_limit == 64
    gpu.encode(enc, ["a"], 64)
    assert sizes[-1] == 64  # the encoder remembers the size that fitted


# ------------------------------------------------------------------------------------ a real GPU
def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU (torch.cuda.is_available())")
def test_gpu_build_answers_like_the_cpu_build(tmp_path):
    from faqsearch import FAQSearch
    from faqsearch.encoders import load_encoder
    from faqsearch.encoders.gpu import GPU_PARITY
    from faqsearch.evaluation import read_labelled_queries

    gpu_enc, cpu_enc = load_encoder("minilm", device="cuda"), load_encoder("minilm", device="cpu")
    assert gpu_enc.device == "cuda" and gpu_enc.dtype in ("float16", "bfloat16", "float32")
    assert gpu_enc.spec() == {k: v for k, v in cpu_enc.spec().items() if k != "runtime"}  # same identity
    corpus = os.path.join(SAMPLE, "faq.csv")
    on_gpu = FAQSearch.build(corpus, str(tmp_path / "gpu"), encoder=gpu_enc, batch_size=256)
    on_cpu = FAQSearch.build(corpus, str(tmp_path / "cpu"), encoder=cpu_enc)
    ids_g, raw_g = on_gpu.raw_vectors()
    ids_c, raw_c = on_cpu.raw_vectors()
    assert raw_g.dtype == np.float32 and np.array_equal(ids_g, ids_c)
    cos = (raw_g * raw_c).sum(1) / (np.linalg.norm(raw_g, axis=1) * np.linalg.norm(raw_c, axis=1))
    assert cos.min() > GPU_PARITY
    queries = [q.text for q in read_labelled_queries(os.path.join(SAMPLE, "queries.csv"))]
    # the GPU-built index answers on the CPU (and the CPU-built one on the GPU): the device is not stored
    with FAQSearch.open(str(tmp_path / "gpu"), encoder=cpu_enc) as gpu_built, \
            FAQSearch.open(str(tmp_path / "cpu"), encoder=gpu_enc) as cpu_built:
        for a, b, c in zip(on_cpu.ask_many(queries, k=10, threshold=-1, mode="dense"),
                           on_gpu.ask_many(queries, k=10, threshold=-1, mode="dense"),
                           gpu_built.ask_many(queries, k=1, threshold=-1, mode="dense")):
            top = a.answers[0]
            for other in (b.answers[0], c.answers[0]):
                if other.faq_id != top.faq_id:  # only a near tie may flip: within fp16 noise on the CPU scores
                    cpu_score = next(x.score for x in a.answers if x.faq_id == other.faq_id)
                    assert top.score - cpu_score < 2e-3, (a.query, top.faq_id, other.faq_id)
        assert len(cpu_built.ask_many(queries[:5], k=1)) == 5
    on_gpu.close()
    on_cpu.close()


def test_a_gpu_encoder_gets_whole_chunks_even_with_a_progress_bar():
    """With a bar, a CPU encoder is called per 256 texts (the bar moves early); a CUDA encoder gets
    4,096 per call, so its background tokenising overlaps the GPU."""
    from faqsearch.build import encode_stream
    from faqsearch.defaults import CHUNK

    from .conftest import FakeEncoder

    class Recorder(FakeEncoder):
        def __init__(self, device):
            super().__init__()
            self.device, self.sizes = device, []

        def encode(self, texts, batch_size=32, progress=False):
            self.sizes.append(len(texts))
            return super().encode(texts, batch_size, progress)

    texts = [f"question {i}" for i in range(CHUNK + 10)]
    cpu, gpu = Recorder("cpu"), Recorder("cuda")
    encode_stream(cpu, texts, 64, progress=True)
    encode_stream(gpu, texts, 64, progress=True)
    assert max(cpu.sizes) <= 256 and gpu.sizes == [CHUNK, 10]
