"""Sequence layers: `Conv1d` (all four padding modes; the constructor, forward and repr
are `_ConvNd`'s, in nn/layers.py), `MaxPool1d`, `AvgPool1d`, and `Upsample` (any dims),
with PyTorch's constructors, init, attributes and reprs; forwards call `nn.functional`.
"""
from . import functional as F
from .layers import _ConvNd
from ._pooling import _MaxPoolNd
from .module import Module

def _single(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L) or (C, L): weight (out, in / groups, k).

    >>> Conv1d(2, 4, 3)
    Conv1d(2, 4, kernel_size=(3,), stride=(1,))
    """
    _dims = 1


class MaxPool1d(_MaxPoolNd):
    """`MaxPool1d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
    ceil_mode=False)`."""

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool1d(Module):
    """`AvgPool1d(kernel_size, stride=None, padding=0, ceil_mode=False,
    count_include_pad=True)`."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding, self.ceil_mode = _single(padding), ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class Upsample(Module):
    """`Upsample(size=None, scale_factor=None, mode='nearest', align_corners=None)`."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.mode, self.align_corners = size, mode, align_corners
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) \
            else (tuple(float(f) for f in scale_factor) if scale_factor else None)
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode,
                             self.align_corners, self.recompute_scale_factor)

    def extra_repr(self):
        info = (f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None
                else f"size={self.size!r}")
        return info + f", mode={self.mode!r}"
