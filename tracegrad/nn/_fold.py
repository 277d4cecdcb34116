"""`nn.functional.unfold` / `fold` and the modules `nn.Unfold` / `nn.Fold`: PyTorch's
argument order and checks over the `im2col` / `col2im` primitives (ops/conv.py), which are
each other's adjoint, so gradients of every order come from those two declarations
(Im2ColBackward0 / Col2ImBackward0, as PyTorch names them).

unfold: (N, C, H, W) -> (N, C*kh*kw, L) and fold: (N, C*kh*kw, L) -> (N, C, H, W), where
L is the number of kernel positions; unbatched (C, H, W) / (C*kh*kw, L) work too.
"""
from .. import ops as O
from .._dtype import scalar_type_name
from .._errors import TracegradNotImplementedError, TracegradRuntimeError, op_error
from .module import Module

__all__ = ["unfold", "fold", "Unfold", "Fold"]


def _pair(v, name, op):
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise op_error(TracegradRuntimeError, op,
                           f"It is expected {name} equals to 2, but got size {len(v)}")
        return (int(v[0]), int(v[1]))
    return (int(v), int(v))


def _check_params(op, kernel_size, dilation, padding, stride):
    k, d = _pair(kernel_size, "kernel_size", op), _pair(dilation, "dilation", op)
    p, s = _pair(padding, "padding", op), _pair(stride, "stride", op)
    if min(k) <= 0:
        raise op_error(TracegradRuntimeError, op, "kernel size should be greater than zero, "
                       f"but got kernel_height: {k[0]} kernel_width: {k[1]}")
    if min(s) <= 0:
        raise op_error(TracegradRuntimeError, op, "stride should be greater than zero, but got "
                       f"stride_height: {s[0]} stride_width: {s[1]}")
    if min(d) <= 0:
        raise op_error(TracegradRuntimeError, op, "dilation should be greater than zero, but "
                       f"got dilation_height: {d[0]} dilation_width: {d[1]}")
    if min(p) < 0:
        raise op_error(TracegradRuntimeError, op, "padding should be non-negative, but got "
                       f"pad_height: {p[0]} pad_width: {p[1]}")
    return k, d, p, s


def _blocks(size, k, d, p, s):
    return tuple((n + 2 * pp - dd * (kk - 1) - 1) // ss + 1
                 for n, kk, dd, pp, ss in zip(size, k, d, p, s))


def _check_float(input, op, kernel):
    if not input.is_floating_point():
        raise op_error(TracegradNotImplementedError, op, f'"{kernel}" not implemented for '
                       f"'{scalar_type_name(input.dtype)}'")


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding local blocks of a batched image as columns: (N, C, H, W) ->
    (N, C*kh*kw, L), channel-major then kernel offset; zero padding.

    >>> unfold(tracegrad.ones(1, 2, 4, 4), 3).shape
    torch.Size([1, 18, 4])
    """
    k, d, p, s = _check_params("unfold", kernel_size, dilation, padding, stride)
    shape = tuple(input.shape)
    if len(shape) not in (3, 4) or 0 in shape[-3:]:
        raise op_error(TracegradRuntimeError, "unfold", "Expected 3D or 4D (batch mode) tensor "
                       "with possibly 0 batch size and other non-zero dimensions for input, "
                       f"but got: {list(shape)}")
    _check_float(input, "unfold", "im2col_out_cpu")
    blocks = _blocks(shape[-2:], k, d, p, s)
    if min(blocks) < 1:
        raise op_error(TracegradRuntimeError, "unfold",
                       f"Given input with spatial size {shape[-2:]}, kernel_size={k}, "
                       f"dilation={d}, padding={p}, calculated shape of the array of sliding "
                       f"blocks as {blocks}, but its components must be at least one.")
    batched = input if len(shape) == 4 else O.unsqueeze(input, 0)
    out = O.im2col(batched, k, s, p, d)
    return out if len(shape) == 4 else O.squeeze(out, 0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The adjoint of `unfold`: sums the columns (N, C*kh*kw, L) back into (N, C, H, W),
    overlapping values added.

    >>> fold(tracegrad.ones(1, 4, 9), (4, 4), 2)[0, 0]
    tensor([[1., 2., 2., 1.],
            [2., 4., 4., 2.],
            [2., 4., 4., 2.],
            [1., 2., 2., 1.]])
    """
    o = _pair(output_size, "output_size", "fold")
    k, d, p, s = _check_params("fold", kernel_size, dilation, padding, stride)
    shape = tuple(input.shape)
    if len(shape) not in (2, 3) or 0 in shape[-2:]:
        raise op_error(TracegradRuntimeError, "fold", "Expected 2D or 3D (batch mode) tensor "
                       "for input with possibly 0 batch size and non-zero dimensions for "
                       f"input, but got: {list(shape)}")
    rows, length = shape[-2:]
    dim = 1                  # PyTorch names the batched dims, also for unbatched input
    if rows % (k[0] * k[1]):
        raise op_error(TracegradRuntimeError, "fold", f"Expected size of input's dimension "
                       f"{dim} to be divisible by the product of kernel_size, but got "
                       f"input.size({dim})={rows} and kernel_size={k}.")
    blocks = _blocks(o, k, d, p, s)
    if blocks[0] * blocks[1] != length:
        raise op_error(TracegradRuntimeError, "fold",
                       f"Given output_size={o}, kernel_size={k}, dilation={d}, padding={p}, "
                       f"stride={s}, expected size of input's dimension {dim + 1} to match "
                       f"the calculated number of sliding blocks {blocks[0]} * {blocks[1]} = "
                       f"{blocks[0] * blocks[1]}, but got input.size({dim + 1})={length}.")
    if min(blocks) < 1:
        raise op_error(TracegradRuntimeError, "fold",
                       f"Given output_size={o}, kernel_size={k}, dilation={d}, padding={p}, "
                       f"stride={s}, calculated shape of the array of sliding blocks as "
                       f"{blocks}, but its components must be at least one.")
    _check_float(input, "fold", "col2im_out_cpu")
    batched = input if len(shape) == 3 else O.unsqueeze(input, 0)
    out = O.col2im(batched, o, k, s, p, d)
    return out if len(shape) == 3 else O.squeeze(out, 0)


class Unfold(Module):
    """`Unfold(kernel_size, dilation=1, padding=0, stride=1)`: `functional.unfold`."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """`Fold(output_size, kernel_size, dilation=1, padding=0, stride=1)`: `functional.fold`."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                    self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
