"""`Normal(loc, scale)`: reparameterized samples `loc + scale * eps`, PyTorch's log_prob,
entropy, cdf and icdf formulas."""
import math
import numbers

from .. import ops as O
from .distribution import LOG_SQRT_2PI, Distribution, broadcast_all


class Normal(Distribution):
    """A normal distribution with mean `loc` and standard deviation `scale` (> 0).

    >>> Normal(0.0, 1.0).log_prob(tensor(0.0))
    tensor(-0.9189)
    """

    has_rsample = True
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, (), validate_args)

    def _checks(self):
        return {"loc": (lambda v: O.eq(v, v), "Real()"),
                "scale": (lambda v: O.gt(v, 0), "GreaterThan(lower_bound=0.0)")}

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return O.pow(self.scale, 2)

    def rsample(self, sample_shape=()):
        eps = O.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return O.add(self.loc, O.mul(eps, self.scale))

    def log_prob(self, value):
        if isinstance(value, numbers.Number):
            value = O.tensor(float(value), dtype=self.loc.dtype)
        self._validate_sample(value, lambda v: O.eq(v, v),
                              "Real()")
        var = O.pow(self.scale, 2)
        sq = O.pow(O.sub(value, self.loc), 2)
        return O.sub(O.sub(O.neg(O.div(sq, O.mul(var, 2))), O.log(self.scale)), LOG_SQRT_2PI)

    def entropy(self):
        return O.add(O.log(self.scale), 0.5 + 0.5 * math.log(2 * math.pi))

    def cdf(self, value):
        z = O.div(O.sub(value, self.loc), O.mul(self.scale, math.sqrt(2)))
        return O.mul(O.add(O.erf(z), 1), 0.5)

    def icdf(self, value):
        z = O.mul(O.erfinv(O.sub(O.mul(value, 2), 1)), math.sqrt(2))
        return O.add(self.loc, O.mul(self.scale, z))
