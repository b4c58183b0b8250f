import numpy as np
import pytest

from faqsearch import FAQ, FAQSearch
from faqsearch.backends.embedded.faiss import AUTO_FLAT_MAX, AUTO_HNSW_MAX, VectorIndex, factory_for, nlist_for

from .conftest import FakeEncoder, build_index


def _unit(n, d, seed):
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_factory_names_and_auto_choice():
    assert factory_for("auto", 1000, 256) == "Flat"
    assert factory_for("auto", AUTO_FLAT_MAX, 256) == "HNSW32"
    assert factory_for("auto", AUTO_HNSW_MAX, 256) == "IVF2000,SQ8"  # streamed: an ingest's memory stays flat
    assert factory_for("auto", 5_000_000, 256).endswith(",SQ8")
    assert factory_for("ivf", 1_000_000, 256) == "IVF2564,Flat"  # 100k training sample / 39 points per cell
    assert factory_for("ivf", 50_000, 256) == "IVF894,Flat"  # 4 sqrt(n)
    assert factory_for("ivf-pq", 1_000_000, 256) == "IVF820,PQ64"  # cells sized to the 32k PQ training sample
    assert factory_for("IVF64,Flat", 10, 8) == "IVF64,Flat"  # factory strings pass through
    assert nlist_for(100) == 2  # never more cells than can be trained


@pytest.mark.parametrize("factory", ["Flat", "SQ8", "HNSW32", "IVF16,Flat", "IVF16,SQ8", "IVF16,PQ8"])
def test_every_type_finds_near_duplicates(factory):
    x = _unit(2000, 32, 0)
    ids = np.arange(2000, dtype=np.int64) + 10_000
    index = VectorIndex.create(32, factory)
    if index.needs_training():
        index.train(x)
        index.set_search_params()
    index.add(x, ids)
    q = x[:50] + 0.01 * _unit(50, 32, 1)
    _, got = index.search(q, 10)
    recall = np.mean([ids[i] in got[i] for i in range(50)])
    assert recall >= (0.9 if "PQ" in factory else 0.98)


def test_hnsw_removal_uses_tombstones_and_refit_clears_them(tmp_path):
    rows = ["id,question,answer"] + [f"{i},question number {i} about item{i},answer {i}" for i in range(40)]
    p = tmp_path / "c.csv"
    p.write_text("\n".join(rows) + "\n")
    e = build_index(str(p), tmp_path / "ix", index_type="hnsw", threshold=-1)
    assert e.config["index"]["factory"] == "HNSW32" and not e.index.supports_removal
    e.remove([str(i) for i in range(20)])  # in place: the delta excludes their ids inside FAISS
    assert len(e.delta.removed) == 20
    assert len(e.index.base) == 40 and len(e.index) == 20
    import faqsearch.backends.embedded.editor as edits_mod

    limit = edits_mod.delta_limit
    edits_mod.delta_limit = lambda n: 0  # a new base: HNSW cannot delete, so the vectors stay as tombstones
    try:
        e.remove([str(i) for i in range(20, 30)])
    finally:
        edits_mod.delta_limit = limit
    assert e.config["index"]["tombstones"] == 30 and len(e.index) == 40 and e.delta is None  # still in FAISS
    got = e.ask("question number 3 about item3", k=5, mode="dense").answers
    assert got and all(int(a.faq_id) >= 30 for a in got)  # removed FAQs never come back
    from faqsearch.tuning import current_setting

    e.refit(current_setting(e.config))
    e2 = FAQSearch.open(str(tmp_path / "ix"), encoder=FakeEncoder())
    assert len(e2.index) == 10 and e2.config["index"]["tombstones"] == 0
    e2.close()


def test_ivf_index_trained_on_a_sample(tmp_path):
    rows = ["id,question,answer"] + [f"{i % 50},variant {i} of question {i % 50} w{i % 7},a{i % 50}" for i in range(800)]
    p = tmp_path / "c.csv"
    p.write_text("\n".join(rows) + "\n")
    e = build_index(str(p), tmp_path / "ix", index_type="ivf", threshold=-1)
    assert e.config["index"]["factory"].startswith("IVF") and e.config["index"]["nprobe"] >= 1
    assert e.ask("variant 7 of question 7 w0", mode="dense").answers[0].faq_id == "7"
    e.add([FAQ("new", "n", ["brand new question"])])  # adding to a trained IVF works
    assert e.ask("brand new question", mode="dense").answers[0].faq_id == "new"
    e.close()


def test_query_vectors_are_cached(tmp_path, small_corpus):
    class Counting(FakeEncoder):
        n = 0

        def encode(self, texts, batch_size=32, progress=False):
            Counting.n += len(texts)
            return super().encode(texts, batch_size, progress)

    e = FAQSearch.build(small_corpus, str(tmp_path / "ix"), encoder=Counting())
    Counting.n = 0
    first = e.ask("reset my password").answers
    e.ask_many(["reset my password", "reset my password", "shipping time"])
    assert Counting.n == 2  # one encode per distinct new text
    assert e.ask("reset my password").answers == first
    e.close()


@pytest.mark.slow
def test_quantized_encoder_is_part_of_the_index_identity(tmp_path, small_corpus):
    from faqsearch.encoders import check_spec, load_encoder
    from faqsearch.errors import EncoderMismatchError

    q = load_encoder("minilm", quantize=True)
    assert q.spec()["quantize"] == "int8"
    v = q.encode(["how do I reset my password?", "shipping to france"])
    assert v.shape == (2, 384) and np.isfinite(v).all()
    with pytest.raises(EncoderMismatchError, match="quantize"):
        check_spec(load_encoder("minilm").spec(), q.spec(), "ix")


@pytest.mark.parametrize("n,d", [(0, 8), (1, 256), (3000, 384)])
def test_streamed_flat_index_is_byte_for_byte_what_faiss_writes(tmp_path, n, d):
    import faiss

    from faqsearch.backends.embedded.flatfile import FlatWriter

    x, ids = _unit(n, d, 1), np.arange(n, dtype=np.int64) * 7 + 3
    path = str(tmp_path / "f.faiss")
    _writes_what_faiss_writes(path, faiss.IndexIDMap2(faiss.IndexFlatIP(d)), lambda i: FlatWriter(path, d, i),
                              x, ids, 1000)


def _writes_what_faiss_writes(path, empty, writer, x, ids, step):
    """``writer(ids)`` fed ``x`` in chunks of ``step`` writes to ``path`` the bytes FAISS writes for
    ``empty`` holding (x, ids); with one id more than vectors it raises instead of finishing."""
    import faiss

    if len(x):
        empty.add_with_ids(x, ids)
    with writer(ids) as out:
        for start in range(0, len(x), step):
            out.write(x[start:start + step])
    assert open(path, "rb").read() == faiss.serialize_index(empty).tobytes()
    with pytest.raises(ValueError, match="vectors written"):  # a short write never passes for a whole index
        with writer(np.arange(len(x) + 1, dtype=np.int64)) as out:
            out.write(x)
    return empty


def _trained_ivf(factory, d, seed=0):
    import faiss

    index = faiss.IndexIDMap2(faiss.index_factory(d, factory, faiss.METRIC_INNER_PRODUCT))
    index.train(_unit(2000, d, seed))
    return index


# full lists (most cells used), sparse lists (few vectors for many cells), SQ and PQ codes, none
@pytest.mark.parametrize("factory,n,d", [("IVF8,Flat", 3000, 16), ("IVF8,SQ8", 3000, 32), ("IVF16,PQ8x4", 2500, 32),
                                         ("IVF64,SQ8", 20, 16), ("IVF4,SQ8", 0, 16)])
def test_streamed_ivf_index_is_byte_for_byte_what_faiss_writes(tmp_path, factory, n, d):
    """IVF indexes are written as the vectors come (a build holds one chunk, not every list): the
    file is FAISS's own for the same vectors added in the same order, and opens mapped."""
    import os

    import faiss

    from faqsearch.backends.embedded.ivffile import IVFWriter, streams

    trained = _trained_ivf(factory, d)
    x, ids = _unit(n, d, 1), np.random.default_rng(2).permutation(n).astype(np.int64) * 5 + 7
    path = str(tmp_path / "f.index")
    ref = _writes_what_faiss_writes(path, faiss.clone_index(trained), lambda i: IVFWriter(trained, path, i),
                                    x, ids, 700)
    assert sorted(os.listdir(tmp_path)) == ["f.index"]  # the temporary codes and cells are gone
    assert trained.ntotal == 0 and streams(trained, _unit(50, d, 3), str(tmp_path))
    if n:
        mapped = VectorIndex.load(path, factory, mmap=True)
        assert np.array_equal(mapped.search(x[:20], 5)[1], VectorIndex(ref, factory).search(x[:20], 5)[1])
    bad = _unit(4, d, 4)
    bad[2] = np.nan
    with pytest.raises(ValueError, match="could not be assigned"):
        with IVFWriter(trained, path, np.arange(4, dtype=np.int64)) as out:
            out.write(bad)
    assert sorted(os.listdir(tmp_path)) == ["f.index"]


def test_ivf_layout_check_refuses_what_it_cannot_write(tmp_path):
    import faiss

    from faqsearch.backends.embedded.ivffile import streams

    x = _unit(500, 16, 0)
    assert not streams(_trained_ivf("HNSW8", 16), x, str(tmp_path))  # not IVF: built in memory
    assert not streams(faiss.IndexIDMap2(faiss.IndexFlatIP(16)), x, str(tmp_path))
    # IVF types whose lists depend on other vectors (FlatDedup) or that FAISS cannot clone (spectral
    # hashing), and pre-transformed ones: built in memory
    for factory in ("IVF4,FlatDedup", "IVF4,ITQ16,SH1.5", "PCA8,IVF4,Flat"):
        assert not streams(_trained_ivf(factory, 16), x, str(tmp_path)), factory
    filled = _trained_ivf("IVF4,Flat", 16)
    filled.add_with_ids(x[:10], np.arange(10, dtype=np.int64))
    assert not streams(filled, x, str(tmp_path))  # only an empty index is written from scratch


@pytest.mark.slow
@pytest.mark.parametrize("index_type", ["ivf", "ivf-sq8", "IVF8,PQ8x4"])  # 4-bit PQ: trained in seconds
def test_ivf_ingest_streams_its_index_and_answers_as_one_built_in_memory(tmp_path, monkeypatch, index_type):
    """An IVF ingest (and its refit) never adds to an in-memory FAISS index: the file is written as
    the vectors are transformed, and it answers as the index FAISS builds in memory."""
    from faqsearch.backends.embedded import faiss as fx
    from faqsearch.tuning import current_setting

    rows = ["id,question,answer"] + [f"{i % 60},variant {i} of question {i % 60} w{i % 7},a{i % 60}" for i in range(1500)]
    p = tmp_path / "c.csv"
    p.write_text("\n".join(rows) + "\n")
    queries = [f"variant {i} of question {i % 60} w{i % 7}" for i in range(0, 1500, 37)]
    kw = dict(encoder=FakeEncoder(dimension=48), index_type=index_type, threshold=-1, self_fusion=False)
    real_streams, real_add = fx.streams, VectorIndex.add
    monkeypatch.setattr(fx, "streams", lambda *a: False)  # the reference: built in FAISS's memory
    memory = FAQSearch.build(str(p), str(tmp_path / "memory"), **kw)
    monkeypatch.setattr(fx, "streams", real_streams)

    def no_add(self, vectors, ids):
        raise AssertionError("an IVF build added to an in-memory FAISS index")

    monkeypatch.setattr(VectorIndex, "add", no_add)
    streamed = FAQSearch.build(str(p), str(tmp_path / "streamed"), **kw)
    for q in queries:
        a, b = memory.ask(q, mode="dense", k=5), streamed.ask(q, mode="dense", k=5)
        assert [x.faq_id for x in a.answers] == [x.faq_id for x in b.answers]
        assert [round(x.score, 5) for x in a.answers] == [round(x.score, 5) for x in b.answers]
    streamed.refit(current_setting(streamed.config))  # a rebuild streams too
    assert streamed.ask(queries[3], mode="dense").answers[0].faq_id == memory.ask(queries[3], mode="dense").answers[0].faq_id
    monkeypatch.setattr(VectorIndex, "add", real_add)
    streamed.add([FAQ("new", "n", ["brand new question"])])  # edits load their own unmapped copy
    assert streamed.ask("brand new question", mode="dense").answers[0].faq_id == "new"
    memory.close()
    streamed.close()


def test_raw_vectors_are_written_and_read_in_chunks(tmp_path):
    from faqsearch.files import NpyWriter, npy_chunks

    x = _unit(1000, 16, 2)
    path = str(tmp_path / "v.npy")
    with NpyWriter(path, 1000, 16) as out:
        for start in range(0, 1000, 300):
            out.write(x[start:start + 300])
        with pytest.raises(ValueError, match="does not fit"):
            out.write(x[:1])
    assert np.array_equal(np.load(path), x)
    assert np.array_equal(np.concatenate(list(npy_chunks(path, 128))), x)


@pytest.mark.parametrize("factory", ["Flat", "SQ8", "HNSW32", "IVF16,Flat", "IVF16,SQ8", "IVF16,PQ8", "PCA16,Flat"])
def test_a_mapped_index_answers_as_a_loaded_one_and_refuses_changes(tmp_path, factory):
    """Serving maps indexes from their file (the kernel shares and can drop the pages, so an
    ingest's self-tuning and each serving process hold little of the index as their own memory):
    same answers, and a change is refused with an error instead of FAISS aborting the process."""
    x = _unit(2000, 32, 0)
    ids = np.arange(2000, dtype=np.int64) + 5
    index = VectorIndex.create(32, factory)
    if index.needs_training():
        index.train(x)
    index.add(x, ids)
    path = str(tmp_path / "f.index")
    index.save(path)
    loaded, mapped = VectorIndex.load(path, factory), VectorIndex.load(path, factory, mmap=True)
    assert mapped.mapped and not loaded.mapped
    q = x[:40] + 0.05 * _unit(40, 32, 1)
    for kw in ({}, {"exclude": ids[:7]}, {"ids": ids[100:400]}):
        d0, i0 = loaded.search(q, 10, **kw)
        d1, i1 = mapped.search(q, 10, **kw)
        assert np.array_equal(i0, i1) and np.allclose(d0, d1)
    changes = [lambda: mapped.add(x[:2], np.array([1, 2])), lambda: mapped.train(x)]
    if mapped.supports_removal:  # the others keep tombstones: their remove changes nothing
        changes.append(lambda: mapped.remove(ids[:3]))
    for change in changes:
        with pytest.raises(RuntimeError, match="mapped read-only"):
            change()
    assert len(mapped) == 2000 and loaded.remove(ids[:3]) in (0, 3)


def test_a_faiss_that_cannot_map_reads_the_file(tmp_path, monkeypatch):
    import faiss

    index = VectorIndex.create(16)
    index.add(_unit(50, 16, 0), np.arange(50, dtype=np.int64))
    path = str(tmp_path / "f.index")
    index.save(path)
    real = faiss.read_index

    def no_maps(p, flags=0):
        if flags:
            raise RuntimeError("mmap is not supported here")
        return real(p, flags)

    monkeypatch.setattr(faiss, "read_index", no_maps)
    read = VectorIndex.load(path, mmap=True)
    assert not read.mapped and len(read) == 50
    read.add(_unit(1, 16, 2), np.array([99]))  # an ordinary in-memory index
    with open(path, "r+b") as fh:
        fh.truncate(100)
    with pytest.raises(RuntimeError):  # a damaged file still fails, through the plain read
        VectorIndex.load(path, mmap=True)


def test_an_opened_index_maps_its_faiss_file(tmp_path, small_corpus):
    e = build_index(small_corpus, tmp_path / "ix", self_fusion=False)
    assert e.searcher().snap.index.mapped
    assert e.ask("how do I reset my password").nearest is not None
    e.close()
