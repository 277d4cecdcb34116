"""`Categorical(probs=None, logits=None)` over the last dimension: normalized logits, log_prob
by `gather`, entropy with PyTorch's clamp of -inf logits, samples by `multinomial`."""
from .. import _dtype as D
from .. import ops as O
from .._settings import finfo
from .distribution import Distribution, lazy_property, logits_to_probs, probs_to_logits


class Categorical(Distribution):
    """A categorical distribution over `probs.shape[-1]` categories.

    >>> Categorical(logits=tensor([0.0, 0.0])).log_prob(tensor(1))
    tensor(-0.6931)
    """

    _params = ("probs", "logits")

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = O.div(probs, O.sum(probs, -1, keepdim=True))
            param = self.probs
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = O.sub(logits, O.logsumexp(logits, -1, keepdim=True))
            param = self.logits
        self._num_events = param.shape[-1]
        self._holds_caller_tensor = False     # normalized: its own (Note [Lazy parameters ...])
        super().__init__(param.shape[:-1], (), validate_args)

    def _checks(self):
        if "probs" in self.__dict__:
            return {"probs": (lambda v: O.logical_and(O.all(O.ge(v, 0)), O.all(O.isclose(
                O.sum(v, -1), O.ones((), dtype=v.dtype), atol=1e-6))), "Simplex()")}
        return {"logits": (lambda v: O.eq(v, v), "IndependentConstraint(Real(), 1)")}

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return (self.probs if "probs" in self.__dict__ else self.logits).shape

    @property
    def mean(self):
        return O.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype)

    @property
    def variance(self):
        return self.mean

    @property
    def mode(self):
        return O.argmax(self.probs, -1)

    def sample(self, sample_shape=()):
        n = 1
        for s in sample_shape:
            n *= s
        probs_2d = O.reshape(self.probs.detach(), (-1, self._num_events))
        samples = O.t(O.multinomial(probs_2d, n, True))
        return O.reshape(samples, self._extended_shape(sample_shape))

    def log_prob(self, value):
        self._validate_sample(value, lambda v: O.logical_and(
            O.logical_and(O.ge(v, 0), O.lt(v, self._num_events)), O.eq(v, O.floor(v))
            if v.dtype.is_floating_point else O.ge(v, 0)),
            f"IntegerInterval(lower_bound=0, upper_bound={self._num_events - 1})")
        value = O.unsqueeze(value.to(D.int64), -1)
        value, log_pmf = O.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return O.squeeze(O.gather(log_pmf, -1, value), -1)

    def entropy(self):
        logits = O.clamp(self.logits, min=finfo(self.logits.dtype).min)
        return O.neg(O.sum(O.mul(logits, self.probs), -1))
