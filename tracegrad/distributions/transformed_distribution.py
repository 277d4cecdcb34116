"""`TransformedDistribution(base_distribution, transforms)`: samples of a base distribution
pushed through elementwise bijections (distributions/transforms.py), with the change of
variables `log_prob(y) = base.log_prob(x) - sum log|dy/dx|` over the event dimensions, as
PyTorch's; and `LogNormal(loc, scale)`, a Normal through `ExpTransform`."""
from .. import ops as O
from .distribution import Distribution
from .independent import _sum_rightmost
from .normal import Normal
from .transforms import ExpTransform, Transform

__all__ = ["TransformedDistribution", "LogNormal"]


class TransformedDistribution(Distribution):
    """`transforms` (one or a list) applied in order to samples of `base_distribution`.

    >>> TransformedDistribution(Normal(0., 1.), [ExpTransform()]).log_prob(tensor(1.))
    tensor(-0.9189)
    """

    _params = ()

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            transforms = [transforms]
        elif not isinstance(transforms, list):
            raise ValueError(f"transforms must be a Transform or list, but was {transforms}")
        elif not all(isinstance(t, Transform) for t in transforms):
            raise ValueError("transforms must be a Transform or a list of Transforms")
        self.base_dist, self.transforms = base_distribution, transforms
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        for t in transforms:
            shape = t.forward_shape(shape)
        n = len(base_distribution.event_shape)
        cut = len(shape) - n
        if tuple(base_distribution.batch_shape) != shape[:cut]:     # a transform's own
            self.base_dist = base_distribution.expand(shape[:cut])  # parameters broadcast
        super().__init__(shape[:cut], shape[cut:], validate_args=False)
        self._validate_args = (base_distribution._validate_args if validate_args is None
                               else validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        base_shape = tuple(batch_shape) + tuple(self.event_shape)
        n = len(self.base_dist.event_shape)
        new.base_dist = self.base_dist.expand(base_shape[:len(base_shape) - n])
        return new

    def _push(self, x):
        for t in self.transforms:
            x = t(x)
        return x

    def sample(self, sample_shape=()):
        from .. import _mode
        with _mode.no_grad():
            return self._push(self.base_dist.sample(sample_shape))

    def rsample(self, sample_shape=()):
        return self._push(self.base_dist.rsample(sample_shape))

    def log_prob(self, value):
        last = self.transforms[-1] if self.transforms else None
        if last is not None:
            self._validate_sample(value, last.in_codomain, last.codomain)
        event_dim = len(self.event_shape)
        log_prob, y = 0.0, value
        for t in reversed(self.transforms):
            x = t.inv(y)
            log_prob = O.sub(log_prob, _sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim))
            y = x
        base = _sum_rightmost(self.base_dist.log_prob(y),
                              event_dim - len(self.base_dist.event_shape))
        return O.add(log_prob, base)

    def __repr__(self):
        return f"{type(self).__name__}()"


class LogNormal(TransformedDistribution):
    """exp of a Normal(loc, scale) draw.

    >>> LogNormal(0.0, 1.0).log_prob(tensor(1.0))
    tensor(-0.9189)
    """

    def __init__(self, loc, scale, validate_args=None):
        super().__init__(Normal(loc, scale, validate_args=validate_args), ExpTransform(),
                         validate_args=validate_args)

    @property
    def loc(self):
        return self.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return O.exp(O.add(self.loc, O.div(O.pow(self.scale, 2), 2)))

    @property
    def mode(self):
        return O.exp(O.sub(self.loc, O.pow(self.scale, 2)))

    @property
    def variance(self):
        s2 = O.pow(self.scale, 2)
        return O.mul(O.expm1(s2), O.exp(O.add(O.mul(self.loc, 2), s2)))

    def entropy(self):
        return O.add(self.base_dist.entropy(), self.loc)

