"""3-D layers with PyTorch's constructors, defaults, init, reprs and state_dict keys:
`Conv3d` and `ConvTranspose3d` (the shared `_ConvNd` / `_ConvTransposeNd` with three
spatial dimensions), `MaxPool3d`, `AvgPool3d`, `AdaptiveAvgPool3d`; forwards call
nn.functional.

>>> Conv3d(2, 4, 3)
Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1))
"""
from . import _functional_3d as F3
from . import _functional_pool_3d as P3
from ._conv_transpose import _ConvTransposeNd
from ._pooling import AvgPool2d, AdaptiveAvgPool2d, _MaxPoolNd
from .layers import _ConvNd


class Conv3d(_ConvNd):
    """`Conv3d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
    groups=1, bias=True, padding_mode='zeros')` over (N, C, D, H, W) or (C, D, H, W) input;
    weight (out_channels, in_channels / groups, kd, kh, kw)."""
    _dims = 3


class ConvTranspose3d(_ConvTransposeNd):
    """`ConvTranspose3d(in_channels, out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros')`; weight
    (in, out / groups, kd, kh, kw). `forward(input, output_size=None)`.

    >>> ConvTranspose3d(8, 4, 4, stride=2, padding=1)
    ConvTranspose3d(8, 4, kernel_size=(4, 4, 4), stride=(2, 2, 2), padding=(1, 1, 1))
    """
    _dims = 3

    def forward(self, input, output_size=None):
        op = self.output_padding
        if output_size is not None:
            op = self._output_padding(input, output_size)
        return F3.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                   op, self.groups, self.dilation)


class MaxPool3d(_MaxPoolNd):
    """`MaxPool3d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
    ceil_mode=False)`; stride defaults to kernel_size."""

    def forward(self, input):
        return F3.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                             ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool3d(AvgPool2d):
    """`AvgPool3d(kernel_size, stride=None, padding=0, ceil_mode=False,
    count_include_pad=True, divisor_override=None)`."""

    def forward(self, input):
        return P3.avg_pool3d(input, self.kernel_size, self.stride, self.padding,
                             self.ceil_mode, self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool3d(AdaptiveAvgPool2d):
    """`AdaptiveAvgPool3d(output_size)`: an int or a triple, None entries keeping the
    input size."""

    def forward(self, input):
        return P3.adaptive_avg_pool3d(input, self.output_size)
