import numpy as np

from faqsearch.index import VectorIndex


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
