"""`OneHotCategorical(probs=None, logits=None)`: a `Categorical` whose samples are one-hot
vectors over the last dimension (event shape `(num_events,)`), as PyTorch's; log_prob reads
the index of each one-hot value."""
from .. import ops as O
from ..nn import functional as F
from .categorical import Categorical
from .distribution import Distribution, _made_by

__all__ = ["OneHotCategorical"]


class OneHotCategorical(Distribution):
    """One-hot draws of a categorical distribution.

    >>> OneHotCategorical(probs=tensor([0.25, 0.75])).log_prob(tensor([0.0, 1.0]))
    tensor(-0.2877)
    """

    _params = ()

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args)
        param = self._categorical.param_shape
        super().__init__(param[:-1], param[-1:], validate_args=False)
        self._validate_args = self._categorical._validate_args

    def expand(self, batch_shape, _instance=None):
        new = object.__new__(OneHotCategorical) if _instance is None else _instance
        new.__dict__.update(self.__dict__)
        new._made_by = _made_by()
        new._categorical = self._categorical.expand(batch_shape)
        new._batch_shape = type(self._batch_shape)(tuple(batch_shape))
        return new

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        n = self.event_shape[0]
        return F.one_hot(O.argmax(self.probs, -1), n).to(self.probs.dtype)

    @property
    def variance(self):
        return O.mul(self.probs, O.rsub(self.probs, 1))

    def sample(self, sample_shape=()):
        n = self.event_shape[0]
        return F.one_hot(self._categorical.sample(sample_shape), n).to(self.probs.dtype)

    def log_prob(self, value):
        self._validate_sample(value, lambda v: O.logical_and(
            O.all(O.logical_or(O.eq(v, 0), O.eq(v, 1)), -1), O.eq(O.sum(v, -1), 1)),
            "OneHot()")
        return self._categorical.log_prob(O.argmax(value, -1))

    def entropy(self):
        return self._categorical.entropy()

    def __repr__(self):
        return "OneHotCategorical()"
