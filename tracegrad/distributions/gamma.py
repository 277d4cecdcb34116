"""`Gamma(concentration, rate)` and `Poisson(rate)`: PyTorch's log_prob, mean, mode,
variance and entropy formulas over lgamma/digamma/xlogy; samples from tracegrad's generator
(`manual_seed` reproduces them). `Gamma.rsample` is differentiable in both parameters (the
implicit reparameterization gradient of ops/random_dists.py for the concentration)."""
import numbers

from .. import _mode
from .. import ops as O
from .._settings import finfo
from ..ops.random_dists import _standard_gamma
from .distribution import Distribution, broadcast_all

__all__ = ["Gamma", "Poisson"]


def _value(value, like):
    if isinstance(value, numbers.Number):
        return O.tensor(float(value), dtype=like.dtype)
    return value


class Gamma(Distribution):
    """Gamma with shape `concentration` (> 0) and inverse scale `rate` (> 0).

    >>> Gamma(2.0, 3.0).log_prob(tensor(0.5))
    tensor(0.0041)
    """

    has_rsample = True
    _params = ("concentration", "rate")

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, (), validate_args)

    def _checks(self):
        return {"concentration": (lambda v: O.gt(v, 0), "GreaterThan(lower_bound=0.0)"),
                "rate": (lambda v: O.gt(v, 0), "GreaterThan(lower_bound=0.0)")}

    @property
    def mean(self):
        return O.div(self.concentration, self.rate)

    @property
    def mode(self):
        return O.clamp(O.div(O.sub(self.concentration, 1), self.rate), min=0)

    @property
    def variance(self):
        return O.div(self.concentration, O.pow(self.rate, 2))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        value = O.div(_standard_gamma(O.expand(self.concentration, shape)),
                      O.expand(self.rate, shape))
        # as PyTorch: the smallest normal number at least, so log(value) is finite (the
        # clamp is on the detached value: gradients pass as if unclamped)
        value.detach().clamp_(min=finfo(value.dtype).tiny)
        return value

    def log_prob(self, value):
        value = _value(value, self.rate)
        self._validate_sample(value, lambda v: O.ge(v, 0), "GreaterThanEq(lower_bound=0.0)")
        c, r = self.concentration, self.rate
        return O.sub(O.sub(O.add(O.xlogy(c, r), O.xlogy(O.sub(c, 1), value)),
                           O.mul(r, value)), O.lgamma(c))

    def entropy(self):
        c = self.concentration
        return O.add(O.add(O.sub(c, O.log(self.rate)), O.lgamma(c)),
                     O.mul(O.rsub(c, 1.0), O.digamma(c)))


class Poisson(Distribution):
    """Counts with mean `rate` (>= 0).

    >>> Poisson(2.0).log_prob(tensor(1.0))
    tensor(-1.3069)
    """

    _params = ("rate",)

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, (), validate_args)

    def _checks(self):
        return {"rate": (lambda v: O.ge(v, 0), "GreaterThanEq(lower_bound=0.0)")}

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return O.floor(self.rate)

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with _mode.no_grad():
            return O.poisson(O.expand(self.rate, shape))

    def log_prob(self, value):
        value = _value(value, self.rate)
        self._validate_sample(value, lambda v: O.logical_and(O.ge(v, 0), O.eq(v, O.floor(v))),
                              "IntegerGreaterThan(lower_bound=0)")
        rate, value = O.broadcast_tensors(self.rate, value)
        return O.sub(O.sub(O.xlogy(value, rate), rate), O.lgamma(O.add(value, 1)))

    def entropy(self):
        raise NotImplementedError
