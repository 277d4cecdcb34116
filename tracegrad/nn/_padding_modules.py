"""Padding modules over `F.pad`: `ZeroPad1d/2d/3d`, `ConstantPad1d/2d/3d`,
`ReflectionPad1d/2d/3d`, `ReplicationPad1d/2d/3d`, `CircularPad1d/2d/3d`; plus the
fixed-mode upsampling modules `UpsamplingNearest2d` / `UpsamplingBilinear2d`
(align_corners=True) and `Softmax2d`.

PyTorch's constructors, `padding` attribute (an int becomes a 2-, 4- or 6-tuple, a sequence is
kept as a tuple), repr and checks; the computation is `F.pad`'s (its gradients included).
"""
from .._errors import TracegradValueError
from . import functional as F
from ._layers_1d import Upsample
from .module import Module


def _ntuple(padding, n):
    if isinstance(padding, (tuple, list)):
        return tuple(padding)
    return (padding,) * n


class _ConstantPadNd(Module):
    _n = 2

    def __init__(self, padding, value):
        super().__init__()
        self.padding = _ntuple(padding, self._n)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with `value`: `ConstantPad1d(padding, value)`, padding an int or
    (left, right)."""


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with `value`: padding an int or (left, right, top, bottom)."""
    _n = 4


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with `value`: an int or a 6-tuple (last dim first)."""
    _n = 6


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros.

    >>> ZeroPad1d(2)
    ZeroPad1d((2, 2))
    """

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last two dims with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pad the last three dims with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class _ModePadNd(Module):
    _n, _mode, _dims = 2, None, None

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, self._n)

    def _check_input_dim(self, input):
        pass

    def forward(self, input):
        self._check_input_dim(input)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_ModePadNd):
    """Pad the last dim with its reflection (the edge not repeated)."""
    _mode = "reflect"


class ReflectionPad2d(_ModePadNd):
    """Pad the last two dims with their reflection."""
    _n, _mode = 4, "reflect"


class ReflectionPad3d(_ModePadNd):
    """Pad the last three dims with their reflection."""
    _n, _mode = 6, "reflect"


class ReplicationPad1d(_ModePadNd):
    """Pad the last dim by repeating its edge values."""
    _mode = "replicate"


class ReplicationPad2d(_ModePadNd):
    """Pad the last two dims by repeating their edge values."""
    _n, _mode = 4, "replicate"


class ReplicationPad3d(_ModePadNd):
    """Pad the last three dims by repeating their edge values."""
    _n, _mode = 6, "replicate"


class _CircularPadNd(_ModePadNd):
    _mode = "circular"

    def _check_input_dim(self, input):
        lo = self._n // 2 + 1
        if input.dim() not in (lo, lo + 1):
            raise TracegradValueError(f"expected {lo}D or {lo + 1}D input (got {input.dim()}D "
                                      "input)")


class CircularPad1d(_CircularPadNd):
    """Pad the last dim by wrapping around (periodic boundary)."""


class CircularPad2d(_CircularPadNd):
    """Pad the last two dims by wrapping around."""
    _n = 4


class CircularPad3d(_CircularPadNd):
    """Pad the last three dims by wrapping around."""
    _n = 6


class UpsamplingNearest2d(Upsample):
    """`Upsample(size, scale_factor, mode='nearest')` of (N, C, H, W) input."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")
        self.name = type(self).__name__


class UpsamplingBilinear2d(Upsample):
    """`Upsample(size, scale_factor, mode='bilinear', align_corners=True)`."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
        self.name = type(self).__name__


class Softmax2d(Module):
    """Softmax over the channels (dim -3) of (N, C, H, W) or (C, H, W) input."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise TracegradValueError(f"Softmax2d: expected input to be 3D or 4D, got "
                                      f"{input.dim()}D instead")
        return F.softmax(input, -3)
