"""`Dirichlet(concentration)` and `Beta(concentration1, concentration0)` (a Dirichlet over
(x, 1 - x), as PyTorch builds it): PyTorch's log_prob, mean, mode, variance and entropy
formulas over lgamma/digamma/xlogy; samples are normalised Gamma draws from tracegrad's
generator, and `rsample` differentiates through them (implicit reparameterization of each
Gamma draw: an unbiased pathwise gradient, though not PyTorch's per-sample formula)."""
import numbers

from .. import ops as O
from .._settings import finfo
from ..ops.random_dists import _standard_gamma
from .distribution import Distribution, broadcast_all

__all__ = ["Dirichlet", "Beta"]


class Dirichlet(Distribution):
    """Dirichlet on the simplex of the last dim of `concentration` (every entry > 0).

    >>> Dirichlet(tensor([1., 2., 3.])).log_prob(tensor([0.2, 0.3, 0.5]))
    tensor(1.5041)
    """

    has_rsample = True
    _params = ("concentration",)

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = tuple(concentration.shape)
        super().__init__(shape[:-1], shape[-1:], validate_args)

    def _checks(self):
        return {"concentration": (lambda v: O.gt(v, 0),
                                  "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)")}

    @property
    def mean(self):
        return O.div(self.concentration, O.sum(self.concentration, -1, keepdim=True))

    @property
    def mode(self):
        cm1 = O.clamp(O.sub(self.concentration, 1.0), min=0.0)
        mode = O.div(cm1, O.sum(cm1, -1, keepdim=True))
        # every concentration below 1: the mass piles at a vertex (PyTorch picks argmax)
        below = O.all(O.lt(self.concentration, 1), dim=-1, keepdim=True)
        k = cm1.shape[-1]
        vertex = O.eq(O.arange(k), O.argmax(mode, -1, keepdim=True)).to(mode.dtype)
        return O.where(below, vertex, mode)

    @property
    def variance(self):
        c = self.concentration
        c0 = O.sum(c, -1, keepdim=True)
        return O.div(O.mul(c, O.sub(c0, c)), O.mul(O.pow(c0, 2), O.add(c0, 1)))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        g = _standard_gamma(O.expand(self.concentration, shape))
        x = O.div(g, O.sum(g, -1, keepdim=True))
        # clamped away from 0 and 1 as PyTorch's sampler, on the detached value
        x.detach().clamp_(min=finfo(x.dtype).tiny, max=1 - finfo(x.dtype).eps)
        return x

    def _simplex(self, v):
        ok = O.logical_and(O.all(O.ge(v, 0), dim=-1),
                           O.lt(O.abs(O.sub(O.sum(v, -1), 1)), 1e-6))
        return ok

    def log_prob(self, value):
        self._validate_sample(value, self._simplex, "Simplex()")
        c = self.concentration
        return O.sub(O.add(O.sum(O.xlogy(O.sub(c, 1.0), value), -1), O.lgamma(O.sum(c, -1))),
                     O.sum(O.lgamma(c), -1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        a0 = O.sum(c, -1)
        return O.sub(O.sub(O.sub(O.sum(O.lgamma(c), -1), O.lgamma(a0)),
                           O.mul(O.rsub(a0, float(k)), O.digamma(a0))),
                     O.sum(O.mul(O.sub(c, 1.0), O.digamma(c)), -1))


class Beta(Distribution):
    """Beta on [0, 1] with `concentration1` (alpha) and `concentration0` (beta), both > 0.

    >>> Beta(2.0, 3.0).log_prob(tensor(0.5))
    tensor(0.4055)
    """

    has_rsample = True
    _params = ()

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1,
                                                                 concentration0)
        both = O.stack([self.concentration1, self.concentration0], -1)
        self._dirichlet = Dirichlet(both, validate_args=validate_args)
        super().__init__(self._dirichlet.batch_shape, (), validate_args=False)
        self._validate_args = self._dirichlet._validate_args

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        shape = tuple(new.batch_shape)
        new.concentration1 = O.expand(self.concentration1, shape)
        new.concentration0 = O.expand(self.concentration0, shape)
        new._dirichlet = self._dirichlet.expand(shape)
        return new

    @property
    def mean(self):
        return O.div(self.concentration1, O.add(self.concentration1, self.concentration0))

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = O.add(self.concentration1, self.concentration0)
        return O.div(O.mul(self.concentration1, self.concentration0),
                     O.mul(O.pow(total, 2), O.add(total, 1)))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape)[..., 0]

    def log_prob(self, value):
        if isinstance(value, numbers.Number):
            value = O.tensor(float(value), dtype=self.concentration1.dtype)
        self._validate_sample(value, lambda v: O.logical_and(O.ge(v, 0), O.le(v, 1)),
                              "Interval(lower_bound=0.0, upper_bound=1.0)")
        heads_tails = O.stack([value, O.rsub(value, 1.0)], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self):
        return self._dirichlet.entropy()
