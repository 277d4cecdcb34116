"""`MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None, scale_tril=None)`:
a Gaussian over vectors given by one of its covariance, precision or lower Cholesky factor,
with PyTorch's parameter checks (PositiveDefinite, LowerCholesky), reparameterized samples
`loc + L @ eps`, and log_prob / entropy / KL through the factor L (a triangular solve and
its diagonal), as PyTorch computes them."""
import math

import numpy as np

from .. import linalg as LA
from .. import ops as O
from .distribution import Distribution, lazy_property

__all__ = ["MultivariateNormal"]


def _diag(m):
    """The diagonal of a batch of square matrices (batched, differentiable)."""
    return O.sum(O.mul(m, O.eye(m.shape[-1], dtype=m.dtype)), -1)


def _positive_definite(v):
    symmetric = O.all(O.isclose(v, v.mT, atol=1e-6))
    return O.logical_and(symmetric, O.all(O.eq(LA.cholesky_ex(v).info, 0)))


def _lower_cholesky(v):
    return O.logical_and(O.all(O.eq(O.tril(v), v)), O.all(O.gt(_diag(v), 0)))


def _mahalanobis(L, x):
    """|L^-1 x|^2 over the last dimension, L broadcast against x's batch."""
    L = O.expand(L, tuple(x.shape[:-1]) + tuple(L.shape[-2:]))
    y = LA.solve_triangular(L, O.unsqueeze(x, -1), upper=False)
    return O.sum(O.pow(O.squeeze(y, -1), 2), -1)


class MultivariateNormal(Distribution):
    """A normal distribution over vectors of `loc.shape[-1]` entries.

    >>> MultivariateNormal(zeros(2), eye(2)).log_prob(zeros(2))
    tensor(-1.8379)
    """

    has_rsample = True
    _params = ("loc", "covariance_matrix", "precision_matrix", "scale_tril")

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [(n, m) for n, m in (("covariance_matrix", covariance_matrix),
                                     ("precision_matrix", precision_matrix),
                                     ("scale_tril", scale_tril)) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        name, m = given[0]
        if m.dim() < 2:
            what = "scale_tril matrix" if name == "scale_tril" else name
            raise ValueError(f"{what} must be at least two-dimensional, with optional leading "
                             "batch dimensions")
        batch = np.broadcast_shapes(tuple(m.shape[:-2]), tuple(loc.shape[:-1]))
        setattr(self, name, O.expand(m, tuple(batch) + tuple(m.shape[-2:])))
        self.loc = O.expand(loc, tuple(batch) + tuple(loc.shape[-1:]))
        self._name = name
        super().__init__(batch, loc.shape[-1:], validate_args)
        if name == "scale_tril":
            self._L = m
        elif name == "covariance_matrix":
            self._L = LA.cholesky(m)
        else:
            self._L = LA.cholesky(LA.inv(m))

    def _checks(self):
        checks = {"loc": (lambda v: O.eq(v, v), "IndependentConstraint(Real(), 1)")}
        if self._name == "scale_tril":
            checks["scale_tril"] = (_lower_cholesky, "LowerCholesky()")
        else:
            checks[self._name] = (_positive_definite, "PositiveDefinite()")
        return checks

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        new._L = self._L
        return new

    @lazy_property
    def scale_tril(self):
        return O.expand(self._L, tuple(self.batch_shape) + tuple(self._L.shape[-2:]))

    @lazy_property
    def covariance_matrix(self):
        cov = O.matmul(self._L, self._L.mT)
        return O.expand(cov, tuple(self.batch_shape) + tuple(cov.shape[-2:]))

    @lazy_property
    def precision_matrix(self):
        return O.expand(LA.inv(O.matmul(self._L, self._L.mT)),
                        tuple(self.batch_shape) + tuple(self._L.shape[-2:]))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return O.expand(O.sum(O.pow(self._L, 2), -1), self._extended_shape())

    def rsample(self, sample_shape=()):
        eps = O.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return O.add(self.loc, O.squeeze(O.matmul(self._L, O.unsqueeze(eps, -1)), -1))

    def _half_log_det(self):
        return O.sum(O.log(_diag(self._L)), -1)

    def log_prob(self, value):
        self._validate_sample(value, lambda v: O.eq(v, v), "IndependentConstraint(Real(), 1)")
        n = self.event_shape[0]
        m = _mahalanobis(self._L, O.sub(value, self.loc))
        return O.sub(O.mul(O.add(m, n * math.log(2 * math.pi)), -0.5), self._half_log_det())

    def entropy(self):
        n = self.event_shape[0]
        h = O.add(self._half_log_det(), 0.5 * n * (1.0 + math.log(2 * math.pi)))
        return h if not self.batch_shape else O.expand(h, tuple(self.batch_shape))


def kl_multivariate_normal(p, q):
    """KL(p || q) of two MultivariateNormals of one event size."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with" + " " * 26 +
                         "different event shapes cannot be computed")   # (PyTorch's spaces)
    n = p.event_shape[0]
    batch = np.broadcast_shapes(tuple(p._L.shape[:-2]), tuple(q._L.shape[:-2]))
    qL = O.expand(q._L, tuple(batch) + (n, n))
    pL = O.expand(p._L, tuple(batch) + (n, n))
    term1 = O.sub(q._half_log_det(), p._half_log_det())
    trace = O.sum(O.pow(LA.solve_triangular(qL, pL, upper=False), 2), (-2, -1))
    term2 = _mahalanobis(q._L, O.sub(q.loc, p.loc))
    return O.add(term1, O.mul(O.sub(O.add(trace, term2), n), 0.5))
