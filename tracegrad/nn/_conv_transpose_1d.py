"""Transposed 1-D convolution (`F.conv_transpose1d`, `nn.ConvTranspose1d`): the 2-D
transposed convolution on a height of 1, so values, gradients, tracing and JAX are its.
    L_out = (L - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1
"""
from .. import ops as O
from ._conv_checks import check_conv_ranks
from ._conv_transpose import _ConvTransposeNd, conv_transpose2d


def _single(v):
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    return t[:1]


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    """Input (N, Cin, L) or (Cin, L); weight (Cin, Cout / groups, k).

    >>> conv_transpose1d(tracegrad.ones(1, 2, 5), tracegrad.ones(2, 3, 4), stride=2).shape
    torch.Size([1, 3, 12])
    """
    check_conv_ranks("conv_transpose1d", input, weight, 1, transposed=True)
    s, p, o, d = (_single(v)[0] for v in (stride, padding, output_padding, dilation))
    out = conv_transpose2d(O.unsqueeze(input, -2), O.unsqueeze(weight, -2), bias, (1, s),
                           (0, p), (0, o), groups, (1, d))
    return O.squeeze(out, -2)


class ConvTranspose1d(_ConvTransposeNd):
    """`ConvTranspose1d(in_channels, out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros')`; weight
    (in, out / groups, k). `forward(input, output_size=None)`."""
    _dims = 1

    def forward(self, input, output_size=None):
        op = self.output_padding[0]
        if output_size is not None:
            op = self._output_padding(input, output_size)[0]
        return conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding, op,
                                self.groups, self.dilation)
