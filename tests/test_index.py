import pytest
import numpy as np

from faqsearch.backends.embedded.faiss import VectorIndex


def _unit(n, d, seed):
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_search_matches_brute_force():
    x, q = _unit(300, 24, 0), _unit(20, 24, 1)
    ids = np.arange(300, dtype=np.int64) * 7 + (1 << 40)  # 64-bit ids
    index = VectorIndex.create(24)
    index.add(x, ids)
    scores, got = index.search(q, 10)
    brute = q @ x.T
    order = np.argsort(-brute, axis=1)[:, :10]
    np.testing.assert_array_equal(got, ids[order])
    np.testing.assert_allclose(scores, np.take_along_axis(brute, order, 1), rtol=1e-5)


def test_remove_save_load(tmp_path):
    x = _unit(50, 8, 2)
    index = VectorIndex.create(8)
    index.add(x, np.arange(50))
    assert index.remove(np.array([0, 1, 2])) == 3
    assert len(index) == 47
    index.save(str(tmp_path / "i.faiss"))
    loaded = VectorIndex.load(str(tmp_path / "i.faiss"))
    assert len(loaded) == 47
    _, got = loaded.search(x[:3], 1)
    assert not set(got.ravel()) & {0, 1, 2}
    np.testing.assert_allclose(loaded.reconstruct(np.array([10])), x[10:11], rtol=1e-6)


def test_k_larger_than_index_is_clipped():
    index = VectorIndex.create(8)
    index.add(_unit(3, 8, 3), np.arange(3))
    scores, ids = index.search(_unit(1, 8, 4), 10)
    assert ids.shape == (1, 3)


def test_pq_refine_recovers_exact_neighbours():
    """PQ codes alone rank neighbours coarsely; re-scoring 10x candidates with the exact vectors
    brings Recall@10 back up (the engine passes its stored float vectors as the refiner)."""
    import numpy as np

    from faqsearch.backends.embedded.faiss import VectorIndex

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(50, 64))
    x = (centres[rng.integers(0, 50, 6000)] + 0.5 * rng.normal(size=(6000, 64))).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ids = np.arange(10, 6010, dtype=np.int64)
    q = x[:50] + 0.05 * rng.normal(size=(50, 64)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    exact = np.argsort(-(q @ x.T), axis=1)[:, :10] + 10
    vi = VectorIndex.create(64, "IVF16,PQ8")
    vi.train(x)
    vi.add(x, ids)
    vi.set_search_params(nprobe=16)

    def recall(found):
        return np.mean([len(set(f) & set(e)) / 10 for f, e in zip(found, exact)])

    coarse = recall(vi.search(q, 10)[1])
    vi.refiner = lambda wanted: x[wanted - 10]
    scores, found = vi.search(q, 10)
    assert recall(found) > max(coarse + 0.2, 0.9)
    np.testing.assert_allclose(scores[:, 0], np.einsum("ij,ij->i", q, x[found[:, 0] - 10]), rtol=1e-5)


@pytest.mark.slow
def test_engine_refines_pq_indexes_from_its_stored_vectors(tmp_path):
    import os

    from faqsearch import FAQSearch

    sample = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_data", "faq.csv")
    flat = FAQSearch.build(sample, str(tmp_path / "flat"), self_fusion=False)
    pq = FAQSearch.build(sample, str(tmp_path / "pq"), index_type="IVF4,PQ16", self_fusion=False)
    assert pq.index.refiner is not None and flat.index.refiner is None
    for q in ("how do i get a refund", "where is my parcel", "can i pay with paypal"):
        a, b = flat.ask(q, mode="dense").answers[0], pq.ask(q, mode="dense").answers[0]
        assert (a.faq_id, round(a.score, 4)) == (b.faq_id, round(b.score, 4))  # exact scores after refine
