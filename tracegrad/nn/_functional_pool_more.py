"""Adaptive max pooling (`F.adaptive_max_pool1d/2d/3d`, with `return_indices`) and max
unpooling (`F.max_unpool1d/2d/3d`), as composites of gathers and scatters.

Adaptive windows follow PyTorch: output cell i of n over a length L covers
[floor(i * L / n), ceil((i + 1) * L / n)). Each window's positions are listed in a
numpy-built (cells, K) index table (short windows repeat their last position, which never
changes a maximum); the input is gathered through it and reduced by `max(dim=-1)`, whose
gradient goes to the first maximal position, as PyTorch's kernel chooses. Indices are flat
positions in the input's spatial plane (h * W + w), as PyTorch returns them.

`max_unpool` scatters each value to its index in a zero plane of the output size; its
gradient is the gather at those indices.
"""
import numpy as np

from .. import _dtype as D
from .. import ops as O
from .._errors import TracegradRuntimeError, TracegradValueError, op_error


def _windows(length, n):
    """(n, K) int64 positions of the adaptive windows over `length` (padded by repeats)."""
    starts = (np.arange(n) * length) // n
    ends = -((-(np.arange(n) + 1) * length) // n)
    k = int((ends - starts).max()) if n else 0
    idx = starts[:, None] + np.arange(k)[None, :]
    return np.minimum(idx, (ends - 1)[:, None]).astype(np.int64)


def _window_table(spatial, outs):
    """Flat positions (row-major over `spatial`) of every output cell's window:
    shape outs + (K,), K the product of the per-dim window lengths. Row-major window order
    makes `max` pick the first maximum in PyTorch's scan order."""
    table = np.zeros((1,) * len(outs) + (1,), np.int64)
    for d, (n, o) in enumerate(zip(spatial, outs)):
        w = _windows(n, o)                                          # (o, Kd)
        expand = [1] * len(outs)
        expand[d] = o
        w = w.reshape(expand + [1, w.shape[1]])
        table = (table[..., :, None] * n + w).reshape(
            [max(a, b) for a, b in zip(table.shape[:-1], expand)] + [-1])
    return table


def _out_sizes(output_size, spatial, k, op):
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * k
    if len(sizes) != k:
        raise op_error(TracegradRuntimeError, op,
                       f"{op}(): internal error: output_size.size() must be {k}")
    return tuple(s if o is None else int(o) for o, s in zip(sizes, spatial))


def _adaptive_max(input, output_size, return_indices, k, op):
    if input.ndim not in (k + 1, k + 2):
        if k == 1:
            raise op_error(TracegradRuntimeError, op,
                           f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional "
                           "tensor for argument #1 'self' (while checking arguments for "
                           f"{op})")
        raise op_error(TracegradRuntimeError, op, f"{op}(): Expected {k + 1}D or {k + 2}D "
                       f"tensor, but got: {list(input.shape)}")
    for d in range(1, input.ndim):
        if input.shape[d] == 0:
            raise op_error(TracegradRuntimeError, op,
                           f"{op}(): Expected input to have non-zero size for non-batch "
                           f"dimensions, but input has sizes {list(input.shape)} with "
                           f"dimension {d} being empty")
    spatial = tuple(input.shape[-k:])
    outs = _out_sizes(output_size, spatial, k, op)
    lead = tuple(input.shape[:-k])
    table = _window_table(spatial, outs)                            # outs + (K,)
    flat = O.reshape(input, lead + (-1,))
    if table.size == 0:
        shape = lead + outs
        vals = O.reshape(O.index_select(flat, -1, O.tensor(np.zeros(0, np.int64))), shape)
        return (vals, O.zeros(shape, dtype=D.int64)) if return_indices else vals
    picked = O.index_select(flat, -1, O.tensor(table.reshape(-1)))
    picked = O.reshape(picked, lead + table.shape)
    vals, pos = O.max(picked, -1)
    if not return_indices:
        return vals
    tab = O.tensor(table.reshape(-1, table.shape[-1]))               # (cells, K)
    cells = O.reshape(O.arange(tab.shape[0]), outs)
    indices = O.reshape(tab[O.reshape(O.expand(cells, pos.shape), (-1,)),
                            O.reshape(pos, (-1,))], pos.shape)
    return vals, indices


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max over adaptive windows of (N, C, L) or (C, L) input to length `output_size`.

    >>> adaptive_max_pool1d(tracegrad.tensor([[1., 3., 2., 5., 4.]]), 2)
    tensor([[3., 5.]])
    """
    return _adaptive_max(input, output_size, return_indices, 1, "adaptive_max_pool1d")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max over adaptive windows of (N, C, H, W) or (C, H, W) input to `output_size`
    (an int, or a pair whose None entries keep the input's size)."""
    return _adaptive_max(input, output_size, return_indices, 2, "adaptive_max_pool2d")




def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max over adaptive windows of (N, C, D, H, W) or (C, D, H, W) input."""
    return _adaptive_max(input, output_size, return_indices, 3, "adaptive_max_pool3d")


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool3d(input, output_size, True)


def _tuple(v, k):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * k


def _unpool_size(input, kernel_size, stride, padding, output_size, k):
    kernel = _tuple(kernel_size, k)
    stride = _tuple(stride if stride is not None else kernel_size, k)
    padding = _tuple(padding, k)
    default = tuple((input.shape[input.ndim - k + d] - 1) * stride[d] + kernel[d]
                    - 2 * padding[d] for d in range(k))
    if output_size is None:
        return default
    size = tuple(output_size)
    if len(size) == k + 2 or (len(size) == k + 1 and input.ndim == k + 1):
        size = size[-k:]
    if len(size) != k:
        raise TracegradValueError(f"output_size should be a sequence containing {k} or {k + 2} "
                                  f"elements, but it has a length of '{len(size)}'")
    for d in range(k):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < size[d] < hi:
            raise TracegradValueError(f'invalid output_size "{tuple(output_size)}" (dim {d} '
                                      f"must be between {lo} and {hi})")
    return size


def _max_unpool(input, indices, kernel_size, stride, padding, output_size, k, op):
    if indices.dtype is not D.int64:
        raise op_error(TracegradRuntimeError, op, "elements in indices should be type int64 "
                       f"but got: {indices.dtype}")
    if tuple(indices.shape) != tuple(input.shape):
        raise op_error(TracegradRuntimeError, op, "Expected shape of indices to be same as "
                       f"that of the input tensor ({list(input.shape)}) but got indices tensor "
                       f"with shape: {list(indices.shape)}")
    if input.ndim not in (k + 1, k + 2):
        raise op_error(TracegradRuntimeError, op, f"Input to {op} should be a {k + 1}d or "
                       f"{k + 2}d Tensor, but got a tensor with {input.ndim} dimensions.")
    size = _unpool_size(input, kernel_size, stride, padding, output_size, k)
    plane = int(np.prod(size))
    lead = tuple(input.shape[:-k])
    flat_idx = O.reshape(indices, lead + (-1,))
    if flat_idx.numel() and bool(O.logical_or(O.lt(O.amin(flat_idx), 0),
                                              O.ge(O.amax(flat_idx), plane))):
        bad = _first_bad(flat_idx, plane)                # (compiled: a guard on the outcome)
        raise op_error(TracegradRuntimeError, op, f"Found an invalid max index: {bad} (output "
                       f"volumes are of size {'x'.join(str(s) for s in size)})")
    zeros = O.zeros(lead + (plane,), dtype=input.dtype)
    out = O.scatter(zeros, -1, flat_idx, O.reshape(input, lead + (-1,)))
    return O.reshape(out, lead + size)


def _first_bad(flat_idx, plane):
    a = flat_idx.detach().numpy().reshape(-1)
    return int(a[(a < 0) | (a >= plane)][0])


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of `max_pool1d(return_indices=True)`: each value at its index in a
    zero signal (other positions 0)."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1,
                       "max_unpool1d")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of `max_pool3d(return_indices=True)`."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3,
                       "max_unpool3d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of `max_pool2d(return_indices=True)`: each value at its flat
    index (h * W + w) in a zero plane of `output_size` (default: the pooling's input)."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2,
                       "max_unpool2d")
