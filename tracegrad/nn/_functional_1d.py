"""1-D convolution and pooling over (N, C, L) or (C, L) input: `conv1d`, `max_pool1d`,
`avg_pool1d`, each the 2-D op on a height-1 image (kernel (1, k), stride (1, s), ...), so
gradients, tracing and JAX lowering are the 2-D ops'. A max pool's indices are positions
along L, as in PyTorch (the 2-D flat index h * W + w with h = 0).
"""
from .. import ops as O
from .._errors import TracegradRuntimeError, op_error
from . import _functional_extra as FX
from . import functional as F
from ._conv_checks import check_conv_ranks


def _one(v, name):
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(t) != 1:
        raise op_error(TracegradRuntimeError, name,
                       f"expected {name} to be a single integer value or a list of 1 values to "
                       f"match the convolution dimensions, but got {name}={list(t)}")
    return t[0]


def _to_2d(input, op):
    if input.ndim not in (2, 3):
        raise op_error(TracegradRuntimeError, op, f"Expected 2D (unbatched) or 3D (batched) "
                       f"input to {op}, but got input of size: {list(input.shape)}")
    return O.unsqueeze(input, -2)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation: input (N, C, L) or (C, L), weight (out, C/groups, k).

    >>> conv1d(tracegrad.ones(1, 2, 8), tracegrad.ones(3, 2, 3), padding=1).shape
    torch.Size([1, 3, 8])
    """
    check_conv_ranks("conv1d", input, weight, 1)
    x = O.unsqueeze(input, -2)
    pad = padding if isinstance(padding, str) else (0, _one(padding, "padding"))
    out = F.conv2d(x, O.unsqueeze(weight, 2), bias, (1, _one(stride, "stride")), pad,
                   (1, _one(dilation, "dilation")), groups)
    return O.squeeze(out, -2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over windows of `kernel_size` along the last dim (stride defaults to kernel)."""
    k = _one(kernel_size, "kernel_size")
    s = k if stride is None or stride == [] or stride == () else _one(stride, "stride")
    out = FX.max_pool2d(_to_2d(input, "max_pool1d"), (1, k), (1, s),
                        (0, _one(padding, "padding")), (1, _one(dilation, "dilation")),
                        ceil_mode, return_indices)
    if return_indices:
        return O.squeeze(out[0], -2), O.squeeze(out[1], -2)
    return O.squeeze(out, -2)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """Mean over windows of `kernel_size` along the last dim."""
    k = _one(kernel_size, "kernel_size")
    s = k if stride is None or stride == [] or stride == () else _one(stride, "stride")
    out = FX.avg_pool2d(_to_2d(input, "avg_pool1d"), (1, k), (1, s),
                        (0, _one(padding, "padding")), ceil_mode, count_include_pad)
    return O.squeeze(out, -2)
