"""Transposed 2-D convolution (`F.conv_transpose2d`, `nn.ConvTranspose2d`), the adjoint of
`conv2d`: each input pixel scatters `weight`-scaled copies of the kernel into the output.

A composite: a batched matmul makes the columns `(N, Cout*kh*kw, H*W)` and `col2im` (the
adjoint of `im2col`, overlaps summed) folds them into the image, so gradients (im2col and
matmul), tracing and JAX come with the primitives. The output side is PyTorch's:
    H_out = (H - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1
"""
from .. import ops as O
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from .. import _dtype as D
from ..ops import creation as C
from ._conv_checks import check_conv_ranks
from .layers import _check_groups, _ntuple, _pair, _reset_weight_and_bias
from .module import Module
from .parameter import Parameter


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    """Input (N, Cin, H, W) or (Cin, H, W); weight (Cin, Cout / groups, kh, kw).

    >>> conv_transpose2d(tracegrad.ones(1, 2, 3, 3), tracegrad.ones(2, 4, 4, 4), stride=2,
    ...                  padding=1).shape
    torch.Size([1, 4, 6, 6])
    """
    unbatched = check_conv_ranks("conv_transpose2d", input, weight, 2, transposed=True)
    x = O.unsqueeze(input, 0) if unbatched else input
    s, p, op, d = (_pair(v) for v in (stride, padding, output_padding, dilation))
    n, cin, h, w = x.shape
    if weight.shape[0] != cin or cin % groups:
        raise op_error(TracegradRuntimeError, "conv_transpose2d", "Given transposed=1, weight "
                       f"of size {list(weight.shape)}, expected input{list(x.shape)} to have "
                       f"{weight.shape[0]} channels, but got {cin} channels instead")
    for o, ss, dd in zip(op, s, d):
        if o >= ss and o >= dd:
            raise op_error(TracegradRuntimeError, "conv_transpose2d", "output padding must be "
                           "smaller than either stride or dilation, but got output_padding_height"
                           f": {op[0]} output_padding_width: {op[1]} stride_height: {s[0]} "
                           f"stride_width: {s[1]} dilation_height: {d[0]} dilation_width: {d[1]}")
    k = tuple(weight.shape[2:])
    cout_g = weight.shape[1]
    size = tuple((i - 1) * ss - 2 * pp + dd * (kk - 1) + oo + 1
                 for i, ss, pp, dd, kk, oo in zip((h, w), s, p, d, k, op))
    wt = O.transpose(O.reshape(weight, (groups, cin // groups, cout_g * k[0] * k[1])), 1, 2)
    cols = O.matmul(wt, O.reshape(x, (n, groups, cin // groups, h * w)))
    cols = O.reshape(cols, (n, groups * cout_g * k[0] * k[1], h * w))
    out = O.col2im(cols, size, k, s, p, d)
    if bias is not None:
        out = O.add(out, O.reshape(bias, (-1, 1, 1)))
    return O.squeeze(out, 0) if unbatched else out


class _ConvTransposeNd(Module):
    """What ConvTranspose1d and ConvTranspose2d share (`_dims` spatial dimensions): the
    constructor's checks, attributes, parameters and init, the output padding that
    `forward(input, output_size)` asks for, and the repr."""
    _dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__()
        _check_groups(in_channels, out_channels, groups)
        if padding_mode != "zeros":
            raise TracegradValueError(f'Only "zeros" padding mode is supported for '
                                      f"{type(self).__name__}")
        n = self._dims
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _ntuple(kernel_size, n), _ntuple(stride, n)
        self.padding, self.output_padding = _ntuple(padding, n), _ntuple(output_padding, n)
        self.dilation, self.groups, self.padding_mode = _ntuple(dilation, n), groups, padding_mode
        dt = dtype if dtype is not None else D.get_default_dtype()
        self.weight = Parameter(C.empty(in_channels, out_channels // groups, *self.kernel_size,
                                        dtype=dt))
        if bias:                                  # one per output channel, not weight.shape[0]
            self.bias = Parameter(C.empty(out_channels, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_weight_and_bias(self.weight, self.bias)

    def _output_padding(self, input, output_size):
        n = self._dims
        want = list(output_size)[-n:]
        out = []
        for i, size in enumerate(input.shape[-n:]):
            least = ((size - 1) * self.stride[i] - 2 * self.padding[i] +
                     self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            if not least <= want[i] < least + self.stride[i]:
                raise TracegradValueError(
                    f"requested an output size of {want}, but valid sizes range from "
                    f"{least} to {least + self.stride[i] - 1} (for an input of "
                    f"{list(input.shape[-n:])})")
            out.append(want[i] - least)
        return tuple(out)

    def extra_repr(self):
        zeros, ones = (0,) * self._dims, (1,) * self._dims
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != zeros:
            s += f", padding={self.padding}"
        if self.dilation != ones:
            s += f", dilation={self.dilation}"
        if self.output_padding != zeros:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class ConvTranspose2d(_ConvTransposeNd):
    """`ConvTranspose2d(in_channels, out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros')`; weight
    (in, out / groups, kh, kw). `forward(input, output_size=None)`.

    >>> ConvTranspose2d(8, 4, 4, stride=2, padding=1)
    ConvTranspose2d(8, 4, kernel_size=(4, 4), stride=(2, 2), padding=(1, 1))
    """

    def forward(self, input, output_size=None):
        op = self.output_padding
        if output_size is not None:
            op = self._output_padding(input, output_size)
        return conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding, op,
                                self.groups, self.dilation)
