"""`Bernoulli(probs=None, logits=None)`: log_prob and entropy as PyTorch computes them,
through `binary_cross_entropy_with_logits` (stable for large logits)."""
import numbers

from .. import _mode
from .. import ops as O
from ..nn import functional as F
from .distribution import (Distribution, broadcast_all, holds, lazy_property,
                           logits_to_probs, probs_to_logits)


class Bernoulli(Distribution):
    """1 with probability `probs` (or `sigmoid(logits)`), else 0.

    >>> Bernoulli(logits=tensor([0.0])).log_prob(tensor([1.0]))
    tensor([-0.6931])
    """

    _params = ("probs", "logits")

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            shape = self.probs.shape
        else:
            (self.logits,) = broadcast_all(logits)
            shape = self.logits.shape
        given = probs if probs is not None else logits   # Note [Lazy parameters under compile]
        self._holds_caller_tensor = holds(self.probs if probs is not None else self.logits,
                                          given)
        super().__init__(shape, (), validate_args)

    def _checks(self):
        if "probs" in self.__dict__:
            return {"probs": (lambda v: O.logical_and(O.ge(v, 0), O.le(v, 1)),
                              "Interval(lower_bound=0.0, upper_bound=1.0)")}
        return {"logits": (lambda v: O.eq(v, v), "Real()")}

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def mean(self):
        return self.probs

    @property
    def variance(self):
        return O.mul(self.probs, O.rsub(self.probs, 1))

    @property
    def mode(self):
        mode = O.ge(self.probs, 0.5).to(self.probs.dtype)
        return O.where(O.eq(self.probs, 0.5), float("nan"), mode)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with _mode.no_grad():
            return O.bernoulli(O.expand(self.probs.detach(), shape))

    def log_prob(self, value):
        if isinstance(value, numbers.Number):
            value = O.tensor(float(value), dtype=self.logits.dtype)
        self._validate_sample(value, lambda v: O.logical_or(O.eq(v, 0), O.eq(v, 1)),
                              "Boolean()")
        logits, value = O.broadcast_tensors(self.logits, value)
        return O.neg(F.binary_cross_entropy_with_logits(logits, value, reduction="none"))

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")
