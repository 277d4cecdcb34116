"""Random regularizers of self-normalizing and leaky networks: `F.alpha_dropout`,
`F.feature_alpha_dropout` (`nn.AlphaDropout`, `nn.FeatureAlphaDropout`) and `F.rrelu`
(`nn.RReLU`), with PyTorch's formulas; the randomness is `rand_like` from tracegrad's
generator (reproducible under `manual_seed`, drawn on every compiled call).

Alpha dropout keeps SELU's mean and variance: with keep ~ Bernoulli(1 - p),
alpha = 1.7580993408473766 and a = 1 / sqrt((alpha^2 p + 1)(1 - p)),
`out = input * keep * a + alpha * a * (keep - 1 + p)` (dropped units go to SELU's
saturation value, then the affine correction). RReLU: negative inputs times a slope drawn
from U(lower, upper) per element when training, `(lower + upper) / 2` otherwise.
"""
from .. import ops as O
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from .layers import _DropoutNd
from .module import Module

_ALPHA = 1.7580993408473766


def _alpha_dropout(input, p, training, inplace, feature):
    if p < 0.0 or p > 1.0:
        raise TracegradValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p == 0 or not training or input.numel() == 0:
        return input
    if p == 1:
        return input.mul_(0.0) if inplace else O.mul(input, 0.0)
    shape = tuple(input.shape)
    if feature:
        from ._dropout_nd import check_feature_dims
        check_feature_dims(input)
        shape = shape[:2] + (1,) * (input.ndim - 2)
    u = O.rand(shape, dtype=input.dtype)
    keep = O.lt(u, 1.0 - p).to(input.dtype)
    a = 1.0 / ((_ALPHA * _ALPHA * p + 1) * (1 - p)) ** 0.5
    b = O.add(O.mul(O.sub(keep, 1.0), _ALPHA * a), _ALPHA * a * p)
    noise = O.mul(keep, a)
    if inplace:
        return input.mul_(noise).add_(b)
    return O.add(O.mul(input, noise), b)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks (keeps zero mean and unit variance). Note PyTorch's
    default `training=False`."""
    return _alpha_dropout(input, p, training, inplace, False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels (one draw per (n, c))."""
    return _alpha_dropout(input, p, training, inplace, True)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: slope ~ U(lower, upper) per negative element when training,
    else `(lower + upper) / 2`."""
    if lower > upper:
        raise op_error(TracegradRuntimeError, "rrelu",
                       "Lower bound should be less than or equal to the upper bound")
    if training:
        u = O.rand(tuple(input.shape), dtype=input.dtype)
        slope = O.add(O.mul(u, upper - lower), lower)
    else:
        slope = O.full_like(input, (lower + upper) / 2)
    factor = O.where(O.ge(input, 0), O.ones_like(input), slope)
    return input.mul_(factor) if inplace else O.mul(input, factor)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


class AlphaDropout(_DropoutNd):
    """`AlphaDropout(p=0.5, inplace=False)`: alpha dropout in training mode."""

    def forward(self, input):
        return alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """`FeatureAlphaDropout(p=0.5, inplace=False)`: channel-wise alpha dropout."""

    def forward(self, input):
        return feature_alpha_dropout(input, self.p, self.training, self.inplace)


class RReLU(Module):
    """`RReLU(lower=1/8, upper=1/3, inplace=False)`."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                          else "")
