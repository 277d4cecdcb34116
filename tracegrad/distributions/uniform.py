"""`Uniform(low, high)` on [low, high): reparameterized samples, log_prob, entropy, cdf."""
from .. import ops as O
from .distribution import Distribution, broadcast_all


class Uniform(Distribution):
    """Uniform on [low, high).

    >>> Uniform(0.0, 2.0).log_prob(tensor(1.0))
    tensor(-0.6931)
    """

    has_rsample = True
    _params = ("low", "high")

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, (), validate_args)

    def _checks(self):
        return {"low": (lambda v: O.lt(v, self.high), "LessThan(upper_bound=high)")}

    @property
    def mean(self):
        return O.div(O.add(self.high, self.low), 2)

    @property
    def variance(self):
        return O.div(O.pow(O.sub(self.high, self.low), 2), 12)

    def rsample(self, sample_shape=()):
        u = O.rand(self._extended_shape(sample_shape), dtype=self.low.dtype)
        return O.add(self.low, O.mul(u, O.sub(self.high, self.low)))

    def log_prob(self, value):
        self._validate_sample(value, lambda v: O.logical_and(O.ge(v, self.low),
                                                             O.lt(v, self.high)),
                              "Interval(lower_bound=low, upper_bound=high)")
        lb = O.le(self.low, value).to(self.low.dtype)
        ub = O.gt(self.high, value).to(self.low.dtype)
        return O.sub(O.log(O.mul(lb, ub)), O.log(O.sub(self.high, self.low)))

    def entropy(self):
        return O.log(O.sub(self.high, self.low))

    def cdf(self, value):
        return O.clamp(O.div(O.sub(value, self.low), O.sub(self.high, self.low)), 0, 1)

    def icdf(self, value):
        return O.add(O.mul(value, O.sub(self.high, self.low)), self.low)

    @property
    def mode(self):
        return O.mul(self.high, float("nan"))
