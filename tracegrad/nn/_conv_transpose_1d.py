"""Transposed 1-D convolution (`F.conv_transpose1d`, `nn.ConvTranspose1d`): the 2-D
transposed convolution on a height of 1, so values, gradients, tracing and JAX are its.
    L_out = (L - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1
"""
from .. import _dtype as D
from .. import ops as O
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from ..ops import creation as C
from ._conv_transpose import conv_transpose2d
from .layers import _check_groups, _reset_weight_and_bias
from .module import Module
from .parameter import Parameter


def _single(v):
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    return t[:1]


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    """Input (N, Cin, L) or (Cin, L); weight (Cin, Cout / groups, k).

    >>> conv_transpose1d(tracegrad.ones(1, 2, 5), tracegrad.ones(2, 3, 4), stride=2).shape
    torch.Size([1, 3, 12])
    """
    if input.ndim not in (2, 3):
        raise op_error(TracegradRuntimeError, "conv_transpose1d", "Expected 2D (unbatched) or "
                       "3D (batched) input to conv_transpose1d, but got input of size: "
                       f"{list(input.shape)}")
    if weight.ndim != 3:
        raise op_error(TracegradRuntimeError, "conv_transpose1d", "expected a 3D weight, but "
                       f"got weight of size {list(weight.shape)}")
    s, p, o, d = (_single(v)[0] for v in (stride, padding, output_padding, dilation))
    out = conv_transpose2d(O.unsqueeze(input, -2), O.unsqueeze(weight, -2), bias, (1, s),
                           (0, p), (0, o), groups, (1, d))
    return O.squeeze(out, -2)


class ConvTranspose1d(Module):
    """`ConvTranspose1d(in_channels, out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros')`; weight
    (in, out / groups, k). `forward(input, output_size=None)`."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__()
        _check_groups(in_channels, out_channels, groups)
        if padding_mode != "zeros":
            raise TracegradValueError(f'Only "zeros" padding mode is supported for '
                                      f"{type(self).__name__}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _single(kernel_size), _single(stride)
        self.padding, self.output_padding = _single(padding), _single(output_padding)
        self.dilation, self.groups = _single(dilation), groups
        self.padding_mode = padding_mode
        dt = dtype if dtype is not None else D.get_default_dtype()
        self.weight = Parameter(C.empty(in_channels, out_channels // groups,
                                        self.kernel_size[0], dtype=dt))
        if bias:
            self.bias = Parameter(C.empty(out_channels, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_weight_and_bias(self.weight, self.bias)

    def forward(self, input, output_size=None):
        op = self.output_padding[0]
        if output_size is not None:
            want = list(output_size)[-1]
            least = ((input.shape[-1] - 1) * self.stride[0] - 2 * self.padding[0] +
                     self.dilation[0] * (self.kernel_size[0] - 1) + 1)
            if not least <= want < least + self.stride[0]:
                raise TracegradValueError(
                    f"requested an output size of {[want]}, but valid sizes range from "
                    f"{least} to {least + self.stride[0] - 1} (for an input of "
                    f"{list(input.shape[-1:])})")
            op = want - least
        return conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding, op,
                                self.groups, self.dilation)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,):
            s += f", padding={self.padding}"
        if self.dilation != (1,):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s
