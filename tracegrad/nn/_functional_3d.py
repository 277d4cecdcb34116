"""`conv3d`: 3-D cross-correlation as a sum of 2-D ones, one per kernel depth offset.

For kernel depth offset `k`, the input planes that offset reads (every `stride`-th plane
from `k * dilation`) are folded into the batch and convolved with `weight[:, :, k]` by
`conv2d`; the sum over `k` is the 3-D result. Built only from existing ops, so gradients
(to any order), tracing and both backends come with them.

>>> conv3d(tracegrad.ones(1, 2, 4, 4, 4), tracegrad.ones(3, 2, 3, 3, 3)).shape
torch.Size([1, 3, 2, 2, 2])
"""
from .. import _dtype as D
from .. import ops as O
from .._errors import TracegradRuntimeError, op_error
from ._conv_checks import check_conv_ranks


def _triple(v, name):
    if isinstance(v, int):
        return (v, v, v)
    v = tuple(v)
    if len(v) == 1:
        return v * 3
    if len(v) != 3:
        raise op_error(TracegradRuntimeError, "conv3d",
                       f"expected {name} to be a single integer value or a list of 3 values "
                       f"to match the convolution dimensions, but got {name}={list(v)}")
    return v


def _pads(padding, kernel, stride, dilation):
    """((front, back), (top, bottom), (left, right)) zero padding."""
    if not isinstance(padding, str):
        return tuple((p, p) for p in _triple(padding, "padding"))
    if padding == "valid":
        return ((0, 0),) * 3
    if padding != "same":
        raise op_error(TracegradRuntimeError, "conv3d", f"Invalid padding string: {padding!r}",
                       "Use 'valid', 'same', an int or a triple of ints.")
    if stride != (1, 1, 1):
        raise op_error(TracegradRuntimeError, "conv3d",
                       "padding='same' is not supported for strided convolutions")
    total = tuple(d * (k - 1) for k, d in zip(kernel, dilation))
    return tuple((t // 2, t - t // 2) for t in total)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D cross-correlation of input (N, C, D, H, W) or (C, D, H, W) with weight
    (out, C/groups, kd, kh, kw), plus bias. `padding`: an int, a triple, "valid" or "same".

    >>> conv3d(tracegrad.ones(1, 2, 4, 4, 4), tracegrad.ones(3, 2, 3, 3, 3), padding=1).shape
    torch.Size([1, 3, 4, 4, 4])
    """
    from .functional import conv2d, pad
    unbatched = check_conv_ranks("conv3d", input, weight, 3)
    x = O.unsqueeze(input, 0) if unbatched else input
    stride, dilation = _triple(stride, "stride"), _triple(dilation, "dilation")
    kernel = tuple(weight.shape[2:])
    pads = _pads(padding, kernel, stride, dilation)
    if any(pads[i][j] for i in range(3) for j in range(2)):
        x = pad(x, (*pads[2], *pads[1], *pads[0]))
    n, c, d = x.shape[:3]
    span = dilation[0] * (kernel[0] - 1) + 1
    if span > d:
        padded = " x ".join(str(v) for v in x.shape[2:])
        raise op_error(TracegradRuntimeError, "conv3d",
                       f"Calculated padded input size per channel: ({padded}). Kernel size: "
                       f"({' x '.join(str(k) for k in kernel)}). Kernel size can't be greater "
                       "than actual input size")
    out_d = (d - span) // stride[0] + 1
    out = None
    for k in range(kernel[0]):
        start = k * dilation[0]
        planes = x[:, :, start:start + (out_d - 1) * stride[0] + 1:stride[0]]
        planes = O.reshape(O.permute(planes, (0, 2, 1, 3, 4)),
                           (n * out_d, c) + tuple(x.shape[3:]))
        y = conv2d(planes, O.select(weight, 2, k), None, stride[1:], 0, dilation[1:], groups)
        out = y if out is None else O.add(out, y)
    out = O.permute(O.reshape(out, (n, out_d) + tuple(out.shape[1:])), (0, 2, 1, 3, 4))
    if bias is not None:
        out = O.add(out, O.reshape(bias, (-1, 1, 1, 1)))
    return O.squeeze(out, 0) if unbatched else out


def _pool_triples(kernel_size, stride, padding, dilation, op="max_pool3d"):
    k = _triple(kernel_size, "kernel_size")
    s = k if stride is None or stride == () or stride == [] else _triple(stride, "stride")
    p, d = _triple(padding, "padding"), _triple(dilation, "dilation")
    if min(k) <= 0 or min(s) <= 0 or min(d) <= 0:
        raise op_error(TracegradRuntimeError, op, "kernel size, stride and dilation "
                       f"should be greater than zero, but got {list(k)}, {list(s)}, {list(d)}")
    for kk, pp, dd in zip(k, p, d):
        if pp < 0 or pp > ((kk - 1) * dd + 1) // 2:
            raise op_error(TracegradRuntimeError, op, "pad should be at most half of "
                           f"effective kernel size, but got pad={pp}, kernel_size={kk} and "
                           f"dilation={dd}")
    return k, s, p, d


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over each kd x kh x kw window of (N, C, D, H, W) or (C, D, H, W) input (-inf
    padding): for each kernel depth offset, `max_pool2d` of the depth planes it reads, then
    the max over the offsets (the first on ties, as PyTorch's scan). `return_indices=True`
    also returns each maximum's flat index `d * H * W + h * W + w` in its volume.

    >>> max_pool3d(tracegrad.arange(8.).view(1, 1, 2, 2, 2), 2)
    tensor([[[[[7.]]]]])
    """
    from ..ops import pool as _pool
    if input.ndim not in (4, 5):
        raise op_error(TracegradRuntimeError, "max_pool3d", "non-empty 4D or 5D (batch mode) "
                       f"tensor expected for input, but got: {list(input.shape)}")
    k, s, p, d = _pool_triples(kernel_size, stride, padding, dilation)
    unbatched = input.ndim == 4
    x = O.unsqueeze(input, 0) if unbatched else input
    size = tuple(x.shape[2:])
    out = tuple(_pool.out_len(*a, ceil_mode) for a in zip(size, k, s, p, d))
    if min(out) < 1:
        raise op_error(TracegradRuntimeError, "max_pool3d", f"Given input size: "
                       f"({'x'.join(str(v) for v in x.shape[1:])}). Calculated output size: "
                       f"({x.shape[1]}x{'x'.join(str(v) for v in out)}). Output size is too "
                       "small")
    values, indices = [], []
    for kk in range(k[0]):
        v, i = _depth_offset(x, kk, out, k, s, p, d, ceil_mode)
        values.append(v)
        indices.append(i)
    res, which = O.max(O.stack(values), dim=0)
    if not return_indices:
        return O.squeeze(res, 0) if unbatched else res
    idx = O.squeeze(O.gather(O.stack(indices), 0, O.unsqueeze(which, 0)), 0)
    return (O.squeeze(res, 0), O.squeeze(idx, 0)) if unbatched else (res, idx)


def _depth_offset(x, kk, out, k, s, p, d, ceil_mode):
    """The 2-D pooled maxima (and flat 3-D indices) of the planes depth offset `kk` reads,
    for every output depth; -inf (index 0) where that plane is padding."""
    from .functional import max_pool2d
    n, c, depth, h, w = x.shape
    shift = kk * d[0] - p[0]                      # input plane of output depth od: od*s + shift
    lo = (-shift + s[0] - 1) // s[0] if shift < 0 else 0         # first od reading input
    hi = (depth - 1 - shift) // s[0] + 1 if depth - 1 >= shift else 0   # past the last one
    hi = min(hi, out[0])
    lo = min(lo, hi)
    tail = (c, out[1], out[2])
    parts_v, parts_i = [], []
    if lo > 0:
        parts_v.append(O.full((n, lo) + tail, float("-inf"), dtype=x.dtype))
        parts_i.append(O.zeros((n, lo) + tail, dtype=D.int64))
    if hi > lo:
        start = lo * s[0] + shift
        planes = x[:, :, start:start + (hi - lo - 1) * s[0] + 1:s[0]]
        planes = O.reshape(O.permute(planes, (0, 2, 1, 3, 4)), (n * (hi - lo), c, h, w))
        v, i = max_pool2d(planes, k[1:], s[1:], p[1:], d[1:], ceil_mode, True)
        parts_v.append(O.reshape(v, (n, hi - lo) + tail))
        plane_of = O.reshape(O.arange(lo, hi) * s[0] + shift, (1, hi - lo, 1, 1, 1))
        parts_i.append(O.add(O.reshape(i, (n, hi - lo) + tail), O.mul(plane_of, h * w)))
    if out[0] > hi:
        rest = out[0] - hi
        parts_v.append(O.full((n, rest) + tail, float("-inf"), dtype=x.dtype))
        parts_i.append(O.zeros((n, rest) + tail, dtype=D.int64))
    v, i = (O.cat(parts, 1) if len(parts) > 1 else parts[0] for parts in (parts_v, parts_i))
    return O.permute(v, (0, 2, 1, 3, 4)), O.permute(i, (0, 2, 1, 3, 4))


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    """Transposed 3-D convolution: input (N, Cin, D, H, W) or (Cin, D, H, W), weight
    (Cin, Cout / groups, kd, kh, kw). Each kernel depth offset `k` is a `conv_transpose2d`
    of every input plane, placed at output depth `i * stride + k * dilation`; the planes
    are summed and `padding` cropped from both ends of the depth.

    >>> conv_transpose3d(tracegrad.ones(1, 2, 3, 3, 3), tracegrad.ones(2, 4, 2, 2, 2)).shape
    torch.Size([1, 4, 4, 4, 4])
    """
    from .functional import conv_transpose2d, pad
    unbatched = check_conv_ranks("conv_transpose3d", input, weight, 3, transposed=True)
    x = O.unsqueeze(input, 0) if unbatched else input
    s, p, op, d = (_triple(v, name) for v, name in ((stride, "stride"), (padding, "padding"),
                                                    (output_padding, "output_padding"),
                                                    (dilation, "dilation")))
    if op[0] >= s[0] and op[0] >= d[0]:
        raise op_error(TracegradRuntimeError, "conv_transpose3d", "output padding must be "
                       f"smaller than either stride or dilation, but got output_padding_depth: "
                       f"{op[0]} stride_depth: {s[0]} dilation_depth: {d[0]}")
    n, cin, depth, h, w = x.shape
    kd = weight.shape[2]
    full = (depth - 1) * s[0] + d[0] * (kd - 1) + 1 + op[0]
    planes = O.reshape(O.permute(x, (0, 2, 1, 3, 4)), (n * depth, cin, h, w))
    out = None
    for k in range(kd):
        y = conv_transpose2d(planes, O.select(weight, 2, k), None, s[1:], p[1:], op[1:],
                             groups, d[1:])
        y = O.permute(O.reshape(y, (n, depth) + tuple(y.shape[1:])), (0, 2, 1, 3, 4))
        if s[0] > 1:                        # input plane i lands at depth i * stride
            y = O.stack([y] + [O.zeros_like(y)] * (s[0] - 1), dim=3)
            y = O.reshape(y, y.shape[:2] + (depth * s[0],) + tuple(y.shape[4:]))
            y = O.narrow(y, 2, 0, (depth - 1) * s[0] + 1)
        before = k * d[0]
        y = pad(y, (0, 0, 0, 0, before, full - before - y.shape[2]))
        out = y if out is None else O.add(out, y)
    size = full - 2 * p[0]
    if size < 1:
        raise op_error(TracegradRuntimeError, "conv_transpose3d", "Output size is too small")
    out = O.narrow(out, 2, p[0], size)
    if bias is not None:
        out = O.add(out, O.reshape(bias, (-1, 1, 1, 1)))
    return O.squeeze(out, 0) if unbatched else out
