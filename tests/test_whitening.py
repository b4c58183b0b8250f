import logging

import numpy as np
import pytest

from faqsearch.whitening import Moments, Whitening


def _data(n=500, d=16, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((d, d))
    return (rng.standard_normal((n, d)) @ a + 3.0).astype(np.float32)


@pytest.mark.parametrize("beta,gamma,k", [(1, 1, None), (1, 1, 8), (0, 0, 8), (0.5, 0.5, 12), (0, 1, None)])
def test_matches_explicit_formula(beta, gamma, k):
    x = _data()
    mu = x.astype(np.float64).mean(0)
    cov = np.cov(x.astype(np.float64).T)
    u, s, _ = np.linalg.svd(cov)
    kk = k or x.shape[1]
    expected = (x - beta * mu) @ (u[:, :kk] * s[:kk] ** (-gamma / 2))
    w = Whitening.fit(x, beta=beta, gamma=gamma, k=k)
    got = w.transform(x, normalize=False)
    # eigenvector signs are arbitrary: compare column by column up to sign
    signs = np.sign((got * expected).sum(0))
    np.testing.assert_allclose(got * signs, expected, rtol=1e-3, atol=1e-3)
    assert w.kernel.dtype == np.float32 and w.bias.dtype == np.float32


def test_classic_whitening_gives_identity_covariance():
    x = _data()
    y = Whitening.fit(x, beta=1, gamma=1, k=None).transform(x, normalize=False)
    np.testing.assert_allclose(np.cov(y.T), np.eye(x.shape[1]), atol=1e-3)
    np.testing.assert_allclose(y.mean(0), 0, atol=1e-3)


def test_streaming_equals_batch():
    x = _data(n=1003)
    batch = Moments(16).update(x)
    stream = Moments(16)
    for start in range(0, len(x), 97):
        stream.update(x[start:start + 97])
    assert stream.n == batch.n == 1003
    np.testing.assert_allclose(stream.mean, batch.mean, rtol=1e-10)
    np.testing.assert_allclose(stream.covariance, batch.covariance, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(stream.covariance, np.cov(x.astype(np.float64).T), rtol=1e-9, atol=1e-9)
    w1 = Whitening.fit(x, beta=1, gamma=1, k=8)
    w2 = Whitening.fit((x[i:i + 100] for i in range(0, len(x), 100)), beta=1, gamma=1, k=8)
    np.testing.assert_allclose(np.abs(w1.transform(x)), np.abs(w2.transform(x)), atol=1e-4)


def test_merge_equals_single_pass():
    x = _data(n=300)
    a = Moments(16).update(x[:120])
    b = Moments(16).update(x[120:])
    whole = Moments(16).update(x)
    a.merge(b)
    np.testing.assert_allclose(a.mean, whole.mean)
    np.testing.assert_allclose(a.m2, whole.m2, rtol=1e-9, atol=1e-8)


def test_rotation_keeps_inner_products():
    x = _data()
    w = Whitening.fit(x, beta=0, gamma=0, k=None)
    y = w.transform(x, normalize=False)
    np.testing.assert_allclose(y @ y.T, x @ x.T, rtol=1e-3, atol=1e-2)


def test_fewer_vectors_than_dimensions_is_finite_and_clipped(caplog):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((10, 64)).astype(np.float32)  # N < d: covariance rank 9
    with caplog.at_level(logging.WARNING, logger="faqsearch.whitening"):
        w = Whitening.fit(x, beta=1, gamma=1, k=32)
    assert w.rank == 9
    assert w.dim_out == 9
    assert "rank 9" in caplog.text
    y = w.transform(rng.standard_normal((5, 64)).astype(np.float32))
    assert np.isfinite(y).all()
    # new vectors mostly lie outside the 9 fitted directions: their norm keeps that energy (< 1)
    assert (np.linalg.norm(y, axis=1) < 0.9).all()
    np.testing.assert_allclose(np.linalg.norm(w.transform(x), axis=1), 1.0, rtol=1e-4)  # fitted ones: unit
    # the transformed fit vectors are whitened within the estimated subspace: no exploding values
    z = w.transform(x, normalize=False)
    assert np.abs(z).max() < 10


def test_identical_vectors_are_refused_not_nan():
    x = np.ones((5, 8), dtype=np.float32)
    with pytest.raises(ValueError, match="identical"):
        Whitening.fit(x, beta=1, gamma=1, k=4)
    with pytest.raises(ValueError, match="at least 2"):
        Whitening.fit(x[:1], beta=1, gamma=1, k=4)


def test_save_load_roundtrip(tmp_path):
    x = _data()
    w = Whitening.fit(x, beta=0.5, gamma=0.5, k=8)
    p = tmp_path / "w.npz"
    w.save(str(p))
    w2 = Whitening.load(str(p))
    np.testing.assert_array_equal(w.kernel, w2.kernel)
    np.testing.assert_array_equal(w.bias, w2.bias)
    assert (w2.beta, w2.gamma, w2.k, w2.rank) == (0.5, 0.5, 8, w.rank)
    assert w2.moments.n == w.moments.n
    # refit from the stored moments gives the same transform as fitting on the vectors
    np.testing.assert_allclose(np.abs(w2.refit(beta=1, gamma=1, k=4).kernel),
                               np.abs(Whitening.fit(x, beta=1, gamma=1, k=4).kernel), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("bad", [dict(beta=2), dict(gamma=-1), dict(k=0)])
def test_rejects_bad_parameters(bad):
    with pytest.raises(ValueError):
        Whitening.fit(_data(), **bad)


def test_rank_deficient_rotation_keeps_k_and_raw_cosines():
    """A small FAQ (fewer texts than dimensions) with the default rotation: k stays as asked (the
    corpus span first, then directions it does not span), so cosines are the raw ones."""
    rng = np.random.default_rng(3)
    docs = rng.standard_normal((20, 48)).astype(np.float32)
    w = Whitening.fit(docs, beta=0, gamma=0, k=None)
    assert w.rank == 19 and w.dim_out == 48 and w.residual is None
    q = rng.standard_normal((6, 48)).astype(np.float32)
    norm = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)  # noqa: E731
    np.testing.assert_allclose(w.transform(q) @ w.transform(docs).T, norm(q) @ norm(docs).T, atol=1e-5)
    w32 = Whitening.fit(docs, beta=0, gamma=0, k=32)  # 16 null directions dropped: their energy is kept
    assert w32.dim_out == 32 and w32.residual == 1.0
    np.testing.assert_allclose(np.linalg.norm(w32.transform(docs), axis=1), 1.0, atol=1e-4)
    np.testing.assert_allclose(w32.transform(q) @ w32.transform(docs).T, norm(q) @ norm(docs).T, atol=1e-5)


def test_clipped_whitening_keeps_the_energy_outside_the_corpus_span():
    """gamma > 0 cannot scale directions without variance, so k is clipped to the rank; the norm then
    keeps what lies outside the corpus span: fitted vectors stay unit, a query unlike the corpus
    scores low, and rankings match plain renormalisation."""
    rng = np.random.default_rng(4)
    docs = rng.standard_normal((20, 48)).astype(np.float32)
    w = Whitening.fit(docs, beta=1, gamma=1, k=32)
    assert w.dim_out == 19 and w.residual is not None
    np.testing.assert_allclose(np.linalg.norm(w.transform(docs), axis=1), 1.0, atol=1e-4)
    q = rng.standard_normal((6, 48)).astype(np.float32)
    got = w.transform(q) @ w.transform(docs).T
    y = q @ w.kernel + w.bias
    plain = (y / np.linalg.norm(y, axis=1, keepdims=True)) @ w.transform(docs).T
    assert (np.argsort(-got, axis=1) == np.argsort(-plain, axis=1)).all()
    assert np.abs(got).max() < np.abs(plain).max()


def test_rotation_cut_keeps_dropped_energy_in_the_norm():
    """beta=gamma=0 with k < d: a score is the cosine over the kept directions divided by the full
    lengths, so cutting dimensions never raises a score by renormalising what is left."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(500, 32)) * np.linspace(3, 0.1, 32)
    w = Whitening.fit(x.astype(np.float32), beta=0.0, gamma=0.0, k=8)
    q, d = rng.normal(size=(5, 32)).astype(np.float32), x[:7].astype(np.float32)
    got = w.transform(q) @ w.transform(d).T
    basis = w.kernel  # orthonormal columns: a pure rotation onto the top 8 directions
    want = (q @ basis) @ (d @ basis).T / np.outer(np.linalg.norm(q, axis=1), np.linalg.norm(d, axis=1))
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.all(np.linalg.norm(w.transform(d), axis=1) <= 1 + 1e-5)
    full = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (d / np.linalg.norm(d, axis=1, keepdims=True)).T
    renormalised = (q @ basis) @ (d @ basis).T / np.outer(np.linalg.norm(q @ basis, axis=1),
                                                           np.linalg.norm(d @ basis, axis=1))
    assert np.abs(got - full).mean() < np.abs(renormalised - full).mean()
