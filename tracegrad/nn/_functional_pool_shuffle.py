"""Small composites CNN code calls: power-average pooling (`F.lp_pool1d/2d`,
`nn.LPPool1d/2d`), `F.channel_shuffle` / `nn.ChannelShuffle` (ShuffleNet) and the deprecated
interpolation aliases `F.upsample`, `F.upsample_nearest`, `F.upsample_bilinear` (which warn
and call `F.interpolate`, as PyTorch's do).

lp_pool is PyTorch's formula: `(sign(a) * relu(|a|) * kernel_numel) ** (1 / p)` with `a` the
average of `input ** p` over each window (`max_pool` of |input| for p = inf).
"""
import warnings

from .. import ops as O
from .._errors import TracegradRuntimeError, op_error
from . import functional as F
from .module import Module


def _lp_finish(out, numel, norm_type):
    return O.pow(O.mul(O.mul(O.sign(out), F.relu(O.abs(out))), float(numel)), 1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """`(sum over each window of x ** p) ** (1 / p)` over the last dim."""
    if norm_type == float("inf"):
        return F.max_pool1d(O.abs(input), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return O.neg(F.max_pool1d(O.neg(O.abs(input)), kernel_size, stride, 0, 1, ceil_mode))
    out = F.avg_pool1d(O.pow(input, norm_type), kernel_size, stride, 0, ceil_mode)
    k = kernel_size[0] if isinstance(kernel_size, (tuple, list)) else kernel_size
    return _lp_finish(out, k, norm_type)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """`(sum over each window of x ** p) ** (1 / p)` over the last two dims."""
    kh, kw = tuple(kernel_size) if isinstance(kernel_size, (tuple, list)) else (kernel_size,) * 2
    if norm_type == float("inf"):
        return F.max_pool2d(O.abs(input), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return O.neg(F.max_pool2d(O.neg(O.abs(input)), kernel_size, stride, 0, 1, ceil_mode))
    out = F.avg_pool2d(O.pow(input, norm_type), kernel_size, stride, 0, ceil_mode)
    return _lp_finish(out, kh * kw, norm_type)


def channel_shuffle(input, groups):
    """Split the channels (dim 1) into `groups` and interleave them:
    (N, g * k, *) -> view (N, g, k, *) -> transpose -> (N, k * g, *)."""
    if input.ndim <= 2:
        raise op_error(TracegradRuntimeError, "channel_shuffle",
                       "channel_shuffle expects input with > 2 dims, but got input with sizes "
                       f"{list(input.shape)}")
    c = input.shape[1]
    if groups <= 0:
        raise op_error(TracegradRuntimeError, "channel_shuffle",
                       f"Number of groups to divide channels in must be positive. Value of "
                       f"groups:{groups}")
    if c % groups:
        raise op_error(TracegradRuntimeError, "channel_shuffle",
                       f"Number of channels must be divisible by groups. Got {c} channels and "
                       f"{groups} groups.")
    n, rest = input.shape[0], tuple(input.shape[2:])
    x = O.reshape(input, (n, groups, c // groups) + rest)
    return O.reshape(O.transpose(x, 1, 2), (n, c) + rest)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return F.interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return F.interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return F.interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


class _LPPoolNd(Module):
    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """Power-average pooling over the last dim: `LPPool1d(norm_type, kernel_size)`."""

    def forward(self, input):
        return lp_pool1d(input, float(self.norm_type), self.kernel_size, self.stride,
                         self.ceil_mode)


class LPPool2d(_LPPoolNd):
    """Power-average pooling over the last two dims."""

    def forward(self, input):
        return lp_pool2d(input, float(self.norm_type), self.kernel_size, self.stride,
                         self.ceil_mode)


class ChannelShuffle(Module):
    """`ChannelShuffle(groups)`: interleave the channel groups (ShuffleNet)."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
