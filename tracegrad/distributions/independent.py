"""`Independent(base_distribution, reinterpreted_batch_ndims)`: the rightmost batch
dimensions of a distribution read as event dimensions, so `log_prob` and `entropy` sum over
them (a diagonal Normal over vectors: `Independent(Normal(loc, scale), 1)`), as PyTorch's."""
from .. import ops as O
from .distribution import Distribution, _made_by

__all__ = ["Independent"]


def _sum_rightmost(value, n):
    return O.sum(value, tuple(range(-n, 0))) if n > 0 else value


class Independent(Distribution):
    """`base_distribution` with its `reinterpreted_batch_ndims` rightmost batch dimensions
    made event dimensions.

    >>> Independent(Normal(zeros(3), ones(3)), 1).log_prob(zeros(3))
    tensor(-2.7568)
    """

    _params = ()

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        n = reinterpreted_batch_ndims
        if n > len(base_distribution.batch_shape):
            raise ValueError("Expected reinterpreted_batch_ndims <= "
                             "len(base_distribution.batch_shape), actual "
                             f"{n} vs {len(base_distribution.batch_shape)}")
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        cut = len(shape) - n - len(base_distribution.event_shape)
        super().__init__(shape[:cut], shape[cut:], validate_args=False)
        self._validate_args = (base_distribution._validate_args if validate_args is None
                               else validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    def expand(self, batch_shape, _instance=None):
        new = object.__new__(Independent) if _instance is None else _instance
        new.__dict__.update(self.__dict__)
        new._made_by = _made_by()
        n = self.reinterpreted_batch_ndims
        new.base_dist = self.base_dist.expand(
            tuple(batch_shape) + tuple(self.event_shape[:n]))
        new._batch_shape = type(self._batch_shape)(tuple(batch_shape))
        return new

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
