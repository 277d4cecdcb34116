"""`avg_pool3d` and `adaptive_avg_pool3d` over (N, C, D, H, W) or (C, D, H, W) input, each
a 2-D pool over (H, W) followed by a 1-D pool over D.

Why separable is exact: PyTorch divides a 3-D window's sum by a product of per-dimension
counts (the window clipped to the padded input when `count_include_pad`, else to the
input; adaptive windows floor(i * L / n) .. ceil((i + 1) * L / n) per dimension), so the
3-D mean is the depth mean of the (H, W) means. With `divisor_override` the (H, W) pass
sums (divisor 1) and the depth pass divides by the override. Built from the 2-D pools, so
gradients, tracing and both backends are theirs.

>>> avg_pool3d(tracegrad.arange(8.).view(1, 1, 2, 2, 2), 2)
tensor([[[[[3.5000]]]]])
"""
from .. import ops as O
from .._errors import TracegradRuntimeError, op_error
from ..ops import pool as _pool
from ._functional_3d import _pool_triples


def _batched(input, op, message):
    if input.ndim not in (4, 5) or 0 in input.shape[-3:]:
        raise op_error(TracegradRuntimeError, op, message)
    return input.ndim == 4, (O.unsqueeze(input, 0) if input.ndim == 4 else input)


def _depth_last(y, n, c, depth):
    """(N, C * D, OH, OW) -> (N * C, OH * OW, D): depth last, for the 1-D pass."""
    oh, ow = y.shape[-2:]
    return O.transpose(O.reshape(y, (n * c, depth, oh * ow)), 1, 2), (oh, ow)


def _depth_back(z, n, c, hw, unbatched):
    """(N * C, OH * OW, OD) -> (N, C, OD, OH, OW) (unbatched: without N)."""
    out = O.permute(O.reshape(z, (n, c) + hw + (z.shape[-1],)), (0, 1, 4, 2, 3))
    return O.squeeze(out, 0) if unbatched else out


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over each kd x kh x kw window (zero padding counted when `count_include_pad`;
    `divisor_override` replaces the window size as the divisor).

    >>> avg_pool3d(tracegrad.ones(1, 2, 4, 4, 4), 2).shape
    torch.Size([1, 2, 2, 2, 2])
    """
    from ._functional_extra import avg_pool2d
    unbatched, x = _batched(input, "avg_pool3d",
                            "non-empty 4D or 5D (batch mode) tensor expected for input")
    k, s, p, _ = _pool_triples(kernel_size, stride, padding, 1, "avg_pool3d")
    if divisor_override is not None and divisor_override == 0:
        raise op_error(TracegradRuntimeError, "avg_pool3d", "divisor must be not zero")
    n, c, depth, h, w = x.shape
    out = tuple(_pool.out_len(*a, 1, ceil_mode) for a in zip((depth, h, w), k, s, p))
    if min(out) < 1:
        raise op_error(TracegradRuntimeError, "avg_pool3d", f"Given input size: "
                       f"({c}x{depth}x{h}x{w}). Calculated output size: "
                       f"({c}x{out[0]}x{out[1]}x{out[2]}). Output size is too small")
    y = avg_pool2d(O.reshape(x, (n, c * depth, h, w)), k[1:], s[1:], p[1:], ceil_mode,
                   count_include_pad, None if divisor_override is None else 1)
    y, hw = _depth_last(y, n, c, depth)
    z = avg_pool2d(O.unsqueeze(y, 2), (1, k[0]), (1, s[0]), (0, p[0]), ceil_mode,
                   count_include_pad, divisor_override)
    return _depth_back(O.squeeze(z, 2), n, c, hw, unbatched)


def adaptive_avg_pool3d(input, output_size):
    """Average pooling to a fixed `output_size` (an int or a triple; None keeps that
    input size).

    >>> adaptive_avg_pool3d(tracegrad.ones(2, 5, 6, 7), (2, None, 3)).shape
    torch.Size([2, 2, 6, 3])
    """
    from ._functional_extra import adaptive_avg_pool2d
    from ._functional_layers_more import adaptive_avg_pool1d
    unbatched, x = _batched(input, "adaptive_avg_pool3d", "adaptive_avg_pool3d(): Expected "
                            f"4D or 5D tensor, but got {list(input.shape)}")
    size = (tuple(output_size) if isinstance(output_size, (tuple, list))
            else (output_size,) * 3)
    if len(size) != 3:
        raise op_error(TracegradRuntimeError, "adaptive_avg_pool3d",
                       "adaptive_avg_pool3d: internal error: output_size.size() must be 3")
    n, c, depth, h, w = x.shape
    size = tuple(int(d if o is None else o) for o, d in zip(size, (depth, h, w)))
    y = adaptive_avg_pool2d(O.reshape(x, (n, c * depth, h, w)), size[1:])
    y, hw = _depth_last(y, n, c, depth)
    return _depth_back(adaptive_avg_pool1d(y, size[0]), n, c, hw, unbatched)
