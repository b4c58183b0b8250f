"""BERT-whitening with hyperparameters: x' = (x - beta*mu) U Lambda^(-gamma/2), first k columns.

beta = gamma = 1 is classic whitening; beta = gamma = 0 is a pure rotation onto the principal
axes, so keeping k columns is PCA-style reduction that leaves inner products of the kept
subspace unchanged. The mean and covariance are accumulated in one streaming pass (float64,
merged batch by batch), so memory does not grow with the number of vectors. The fitted map is
stored folded into one affine transform ``y = x @ kernel + bias`` applied in float32.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .files import NPY_LOCK

log = logging.getLogger(__name__)

# Eigenvalues below this fraction of the largest are treated as zero (numerical rank).
RANK_TOL = 1e-7


class Moments:
    """Streaming mean and scatter matrix (Chan et al. pairwise update), float64."""

    def __init__(self, dim: int):
        self.dim = dim
        self.n = 0
        self.mean = np.zeros(dim, dtype=np.float64)
        self.m2 = np.zeros((dim, dim), dtype=np.float64)  # sum of (x - mean)(x - mean)^T

    def update(self, batch: np.ndarray) -> "Moments":
        x = np.asarray(batch, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"expected vectors of shape (n, {self.dim}), got {x.shape}")
        nb = x.shape[0]
        if nb == 0:
            return self
        mb = x.mean(axis=0)
        xc = x - mb
        m2b = xc.T @ xc
        n = self.n + nb
        delta = mb - self.mean
        self.m2 += m2b + np.outer(delta, delta) * (self.n * nb / n)
        self.mean += delta * (nb / n)
        self.n = n
        return self

    def merge(self, other: "Moments") -> "Moments":
        """Combine two accumulators (e.g. the moments of an index and of newly added vectors)."""
        if other.n == 0:
            return self
        n = self.n + other.n
        delta = other.mean - self.mean
        self.m2 += other.m2 + np.outer(delta, delta) * (self.n * other.n / n)
        self.mean += delta * (other.n / n)
        self.n = n
        return self

    def remove(self, batch: np.ndarray) -> "Moments":
        """Take vectors out of the accumulator (the exact inverse of ``update``), e.g. for deleted FAQs."""
        x = np.asarray(batch, dtype=np.float64)
        nb = x.shape[0]
        if nb == 0:
            return self
        if nb > self.n:
            raise ValueError(f"cannot remove {nb} vectors from moments of {self.n}")
        if nb == self.n:
            self.n, self.mean, self.m2 = 0, np.zeros(self.dim), np.zeros((self.dim, self.dim))
            return self
        mb = x.mean(axis=0)
        xc = x - mb
        n = self.n - nb
        mean = (self.mean * self.n - mb * nb) / n
        delta = mb - mean
        self.m2 = self.m2 - xc.T @ xc - np.outer(delta, delta) * (n * nb / self.n)
        self.mean, self.n = mean, n
        return self

    @property
    def covariance(self) -> np.ndarray:
        if self.n < 2:
            raise ValueError("need at least 2 vectors to estimate a covariance")
        return self.m2 / (self.n - 1)

    def eigen(self) -> tuple[np.ndarray, np.ndarray]:
        """(directions, eigenvalues) of the covariance, largest first; computed once per state of the
        moments (tuning fits dozens of transforms on the same moments)."""
        key = (self.n, float(self.m2.sum()), float(np.abs(self.m2).sum()))
        cached = self.__dict__.get("_eigen")
        if cached is None or cached[0] != key:
            u, s, _ = np.linalg.svd(self.covariance)  # symmetric PSD: singular values are the eigenvalues
            cached = (key, u, s)
            self.__dict__["_eigen"] = cached
        return cached[1], cached[2]

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"moments_n": np.array(self.n, dtype=np.int64), "moments_mean": self.mean, "moments_m2": self.m2}

    @classmethod
    def from_arrays(cls, arrays) -> "Moments":
        m = cls(int(arrays["moments_mean"].shape[0]))
        m.n = int(arrays["moments_n"])
        m.mean = np.array(arrays["moments_mean"], dtype=np.float64)
        m.m2 = np.array(arrays["moments_m2"], dtype=np.float64)
        return m


@dataclass
class Whitening:
    """A fitted transform. ``kernel`` is (d, k_eff) and ``bias`` is (k_eff,), both float32."""

    kernel: np.ndarray
    bias: np.ndarray
    beta: float
    gamma: float
    k: int | None  # as requested (None = all dimensions)
    moments: Moments
    rank: int
    # Set when k was clipped to the rank of the fitted vectors (a small FAQ: fewer texts than
    # dimensions). Every fitted vector then lies in mean + span(kept directions); what a query has
    # outside that affine span is where it differs from every stored question. The norm used to
    # normalise a vector keeps that energy (scaled like the last kept direction), so a query unlike
    # the corpus keeps a low score instead of being projected onto the corpus and scored high.
    # Stored questions have none of it and are unchanged; per query every score shrinks by the same
    # factor, so rankings are unchanged.
    residual: float | None = None
    mean: np.ndarray | None = None  # the fitted mean (d,)
    basis: np.ndarray | None = None  # the kept orthonormal directions (d, k), unscaled

    @property
    def dim_in(self) -> int:
        return int(self.kernel.shape[0])

    @property
    def dim_out(self) -> int:
        return int(self.kernel.shape[1])

    @classmethod
    def identity(cls, dim: int) -> "Whitening":
        """No transform (what ``--no-whitening`` builds)."""
        return cls(np.eye(dim, dtype=np.float32), np.zeros(dim, dtype=np.float32), 0.0, 0.0, None, Moments(dim), dim)

    @classmethod
    def fit(cls, vectors: np.ndarray | Iterable[np.ndarray], beta: float = 0.0, gamma: float = 0.0,
            k: int | None = 256, dim: int | None = None) -> "Whitening":
        """Fit on an array or on an iterable of batches (streaming: constant memory)."""
        if isinstance(vectors, np.ndarray):
            moments = Moments(vectors.shape[1]).update(vectors)
        else:
            moments = None
            for batch in vectors:
                if moments is None:
                    moments = Moments(dim or batch.shape[1])
                moments.update(batch)
            if moments is None:
                raise ValueError("no vectors to fit the whitening on")
        return cls.from_moments(moments, beta=beta, gamma=gamma, k=k)

    @classmethod
    def from_moments(cls, moments: Moments, beta: float = 0.0, gamma: float = 0.0, k: int | None = 256) -> "Whitening":
        """Compute the transform from accumulated moments (no vectors needed: this is what tune/refit use)."""
        if not (0.0 <= beta <= 1.0) or not (0.0 <= gamma <= 1.0):
            raise ValueError(f"beta and gamma must lie in [0, 1], got beta={beta}, gamma={gamma}")
        if k is not None and k < 1:
            raise ValueError(f"k must be a positive number of dimensions, got {k}")
        d = moments.dim
        if moments.n < 2:
            raise ValueError(f"need at least 2 vectors to fit the whitening, got {moments.n}")
        u, s = moments.eigen()
        rank = int(np.sum(s > s[0] * RANK_TOL)) if s[0] > 0 else 0
        if rank == 0:
            raise ValueError(f"the {moments.n} vectors are all identical: there is no direction to fit a transform on")
        want = d if k is None else min(k, d)
        k_eff = want
        if rank < want and not gamma:
            # a rotation needs no variance estimate: keep the directions the corpus spans first, then
            # directions it does not span (eigenvalue 0), so k stays as asked and a query unlike the
            # corpus is not projected onto it (which made every off-topic score rise)
            log.info("whitening fitted on %d vectors of dimension %d: rank %d; keeping k=%d (the last %d "
                     "directions are outside the corpus span)", moments.n, d, rank, want, want - rank)
        elif rank < want:
            log.warning(
                "whitening fitted on %d vectors of dimension %d: the covariance has rank %d, so only %d "
                "directions are estimated; keeping k=%d instead of %d (fit on more texts with --fit-on, "
                "or use --no-whitening, to keep every dimension)", moments.n, d, rank, rank, rank, want)
            k_eff = max(rank, 1)
        directions = u
        origin = moments.mean  # the point the energy outside the kept span is measured from
        if rank < want and not gamma:
            # the fitted vectors lie in beta*mean + span(corpus directions, remaining mean): take those
            # directions first, then others, so stored questions keep every bit of their length
            offset = (1.0 - beta) * moments.mean
            outside = offset - u[:, :rank] @ (u[:, :rank].T @ offset)
            extra = [outside[:, None] / np.linalg.norm(outside)] if np.linalg.norm(outside) > 1e-6 else []
            directions = np.linalg.qr(np.hstack([u[:, :rank], *extra, u[:, rank:]]))[0]
            origin = beta * moments.mean
        scale = s[:k_eff] ** (-gamma / 2.0) if gamma else np.ones(k_eff)
        kernel = directions[:, :k_eff] * scale[None, :]
        bias = -beta * moments.mean @ kernel
        # the directions dropped hold no corpus variance when the fit was rank-deficient (k clipped for
        # gamma > 0; directions beyond k outside the corpus span for a rotation), and a rotation cut to
        # k < d drops the least-variance ones: keep their energy in the norm, so a score is the cosine
        # without the dropped directions' share, never raised by renormalising what is left
        rotation_cut = not gamma and k_eff < d
        if rotation_cut:
            origin = beta * moments.mean
        clipped = k_eff < want or (rank < want and k_eff < d) or rotation_cut
        return cls(kernel.astype(np.float32), bias.astype(np.float32), float(beta), float(gamma), k, moments, rank,
                   residual=float(scale[-1] ** 2) if clipped else None,
                   mean=origin.astype(np.float32) if clipped else None,
                   basis=directions[:, :k_eff].astype(np.float32) if clipped else None)

    def refit(self, beta: float | None = None, gamma: float | None = None, k: int | None | str = "keep") -> "Whitening":
        """Same statistics, other hyperparameters."""
        return Whitening.from_moments(self.moments, self.beta if beta is None else beta,
                                      self.gamma if gamma is None else gamma, self.k if k == "keep" else k)

    def transform(self, x: np.ndarray, normalize: bool = True) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        y = x @ self.kernel + self.bias
        if normalize:
            sq = np.einsum("ij,ij->i", y, y)
            if self.residual is not None:
                xc = x - self.mean
                kept = xc @ self.basis
                outside = np.einsum("ij,ij->i", xc, xc) - np.einsum("ij,ij->i", kept, kept)
                sq = sq + self.residual * np.maximum(outside, 0.0)
            y /= np.maximum(np.sqrt(sq), 1e-12)[:, None]
        return y.astype(np.float32, copy=False)

    def full(self, x: np.ndarray) -> np.ndarray:
        """The transform over all d dimensions, L2-normalised: the space scores are given in.

        (x - beta mu) U S with every direction kept, S the transform's own scaling, eigenvalues below
        the last kept one's raised to it (directions the corpus hardly spans are not amplified). The
        k-dimensional vectors only choose candidates; their score is the cosine here, so dimension
        reduction never moves a score, and an FAQ on a topic the fit did not see (added later) scores
        what it would in a fresh index. A rotation (gamma 0) needs no matrix: the cosine of
        x - beta mu, with beta 0 the encoder's own cosine."""
        x = np.asarray(x, dtype=np.float32)
        if self.beta and self.moments.n:
            x = x - np.float32(self.beta) * self.moments.mean.astype(np.float32)
        if self.gamma and self.moments.n >= 2:
            x = x @ self._full_kernel()
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    def _full_kernel(self) -> np.ndarray:
        kernel = self.__dict__.get("_full")
        if kernel is None:
            u, s = self.moments.eigen()
            floor = max(s[min(self.dim_out, len(s)) - 1], s[0] * RANK_TOL)
            kernel = (u * np.maximum(s, floor) ** (-self.gamma / 2.0)).astype(np.float32)
            self.__dict__["_full"] = kernel
        return kernel

    def save(self, path: str) -> None:
        meta = np.array([self.beta, self.gamma, -1 if self.k is None else self.k, self.rank], dtype=np.float64)
        with open(path, "wb") as fh:
            extra = {} if self.residual is None else {"residual": np.array(self.residual), "mean": self.mean,
                                                      "basis": self.basis}
            np.savez(fh, kernel=self.kernel, bias=self.bias, meta=meta, **extra, **self.moments.to_arrays())

    @classmethod
    def load(cls, path: str) -> "Whitening":
        with NPY_LOCK, np.load(path) as z:
            beta, gamma, k, rank = z["meta"].tolist()
            residual = "residual" in z.files  # transforms saved before residual norms load as they were
            return cls(z["kernel"].astype(np.float32), z["bias"].astype(np.float32), beta, gamma,
                       None if k < 0 else int(k), Moments.from_arrays(z), int(rank),
                       residual=float(z["residual"]) if residual else None,
                       mean=z["mean"].astype(np.float32) if residual else None,
                       basis=z["basis"].astype(np.float32) if residual else None)
