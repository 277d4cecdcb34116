"""Sequence layers: `Conv1d` (all four padding modes), `MaxPool1d`, `AvgPool1d`, and
`Upsample` (any dims), with PyTorch's constructors, init, attributes and reprs; forwards
call `nn.functional`.

Note [Conv padding modes]
As in PyTorch, a non-'zeros' `padding_mode` pads the input with `F.pad` first (by
`_reversed_padding_repeated_twice`: for 'same', (total // 2, total - total // 2) with
total = dilation * (kernel - 1)) and then convolves without padding.
"""
from .._errors import TracegradValueError
from . import functional as F
from .layers import _add_weight_and_bias, _check_groups, _reset_weight_and_bias
from ._pooling import _MaxPoolNd
from .module import Module

_PAD_MODES = ("zeros", "reflect", "replicate", "circular")


def _single(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


class Conv1d(Module):
    """1-D convolution over (N, C, L) or (C, L): weight (out, in / groups, k).

    >>> Conv1d(2, 4, 3)
    Conv1d(2, 4, kernel_size=(3,), stride=(1,))
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__()
        _check_groups(in_channels, out_channels, groups)
        if padding_mode not in _PAD_MODES:
            raise TracegradValueError(f"padding_mode must be one of {list(_PAD_MODES)}, but "
                                      f"got padding_mode='{padding_mode}'")
        self.kernel_size, self.stride = _single(kernel_size), _single(stride)
        self.dilation = _single(dilation)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise TracegradValueError(f"Invalid padding string {padding!r}, should be one "
                                          "of {'valid', 'same'}")
            if padding == "same" and self.stride != (1,):
                raise TracegradValueError("padding='same' is not supported for strided "
                                          "convolutions")
            total = self.dilation[0] * (self.kernel_size[0] - 1) if padding == "same" else 0
            self._reversed_padding_repeated_twice = [total // 2, total - total // 2]
        else:
            padding = _single(padding)
            self._reversed_padding_repeated_twice = [padding[0], padding[0]]
        self.in_channels, self.out_channels, self.padding = in_channels, out_channels, padding
        self.groups, self.padding_mode = groups, padding_mode
        _add_weight_and_bias(self, (out_channels, in_channels // groups, *self.kernel_size),
                             bias, dtype)

    def reset_parameters(self):
        _reset_weight_and_bias(self.weight, self.bias)

    def forward(self, input):
        if self.padding_mode != "zeros":              # Note [Conv padding modes]
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return F.conv1d(input, self.weight, self.bias, self.stride, 0, self.dilation,
                            self.groups)
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,):
            s += f", padding={self.padding}"
        if self.dilation != (1,):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


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
