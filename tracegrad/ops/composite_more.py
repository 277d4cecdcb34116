"""`hstack`, `vstack`, `roll`, `diag`, `nan_to_num`: composites of existing primitives (cat,
narrow, where, indexing), so tracing, gradients and JAX lowering come with them.

Values, dtypes and gradients are PyTorch's; only the grad_fn node names differ (the
composite's last primitive names the node, e.g. CatBackward0 for roll's RollBackward0).
"""
import numbers

import numpy as np

from .._errors import (TracegradIndexError, TracegradRuntimeError, TracegradTypeError,
                       op_error)
from .._tensor import Tensor
from . import creation as C
from . import elementwise as E
from . import shape as S
from .compare import isposinf, isneginf

__all__ = ["hstack", "vstack", "roll", "diag", "nan_to_num", "nan_to_num_"]


def _tensor_list(tensors, name):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TracegradTypeError(f"{name}(): argument 'tensors' (position 1) must be tuple of "
                                 f"Tensors, not {type(tensors).__name__}")
    if not tensors:
        raise op_error(TracegradRuntimeError, name, f"{name} expects a non-empty TensorList")
    return list(tensors)


def hstack(tensors):
    """Concatenate horizontally: along dim 0 for 1-D (and 0-d) tensors, else along dim 1.

    >>> hstack([tensor([1, 2]), tensor([3])])
    tensor([1, 2, 3])
    """
    ts = [t.reshape(1) if t.ndim == 0 else t for t in _tensor_list(tensors, "hstack")]
    return S.cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    """Concatenate vertically (dim 0), after making every tensor at least 2-D (a 1-D
    tensor of n elements becomes one row, 1 x n).

    >>> vstack([tensor([1, 2]), tensor([3, 4])])
    tensor([[1, 2],
            [3, 4]])
    """
    ts = []
    for t in _tensor_list(tensors, "vstack"):
        ts.append(t.reshape(1, -1) if t.ndim < 2 else t)
    return S.cat(ts, 0)


def _ints(v, what):
    if isinstance(v, bool) or isinstance(v, numbers.Integral):
        return (int(v),)
    if isinstance(v, (list, tuple)) and all(
            isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in v):
        return tuple(int(i) for i in v)
    bad = v if not isinstance(v, (list, tuple)) else next(
        i for i in v if not isinstance(i, numbers.Integral) or isinstance(i, bool))
    pos = 2 if what == "shifts" else 3
    raise TracegradTypeError(f"roll(): argument '{what}' (position {pos}) must be tuple of "
                             f"ints, not "
                             f"{type(bad).__name__}")


def _roll_dim(x, s, d):
    n = x.shape[d]
    s = s % n if n else 0
    if s == 0:
        return x
    return S.cat([S.narrow(x, d, n - s, s), S.narrow(x, d, 0, n - s)], d)


def roll(input, shifts, dims=None):
    """Shift elements cyclically by `shifts` along `dims` (None: over the flattened tensor).


    >>> roll(tensor([1, 2, 3, 4]), 1)
    tensor([4, 1, 2, 3])
    """
    shifts = _ints(shifts, "shifts")
    dims = () if dims is None else _ints(dims, "dims")
    if not shifts:
        raise op_error(TracegradRuntimeError, "roll", "`shifts` required")
    if not dims and len(shifts) == 1:
        flat = input.flatten()
        out = _roll_dim(flat, shifts[0], 0)
        return (S.clone(input) if out is flat else out.view(tuple(input.shape)))
    if len(shifts) != len(dims):
        raise op_error(TracegradRuntimeError, "roll",
                       f"shifts and dimensions must align. shifts: {len(shifts)}, "
                       f"dims:{len(dims)}")
    nd = max(input.ndim, 1)
    ds = []
    for d in dims:
        if input.ndim == 0:
            raise TracegradIndexError(f"Dimension specified as {d} but tensor has no "
                                      "dimensions")
        if not -nd <= d < nd:
            raise TracegradIndexError(f"Dimension out of range (expected to be in range of "
                                      f"[{-nd}, {nd - 1}], but got {d})")
        ds.append(d % nd)
    if input.numel() == 0:
        return S.clone(input)
    out = input
    for s, d in zip(shifts, ds):
        out = _roll_dim(out, s, d)
    return S.clone(out) if out is input else out


def diag(input, diagonal=0):
    """1-D input: a square matrix with `input` on its `diagonal`-th diagonal (0 the main
    one, > 0 above, < 0 below). 2-D input: that diagonal of the matrix, as a 1-D copy.

    >>> diag(tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    """
    if not isinstance(diagonal, numbers.Integral) or isinstance(diagonal, bool):
        raise TracegradTypeError(f"diag(): argument 'diagonal' (position 2) must be int, not "
                                 f"{type(diagonal).__name__}")
    k = int(diagonal)
    if input.ndim == 1:
        n = input.shape[0]
        m = n + abs(k)
        # where, not a product with the identity: an inf on the diagonal leaves zeros
        # (not nan) around it, and the gradient is exactly the diagonal of grad
        sq = E.where(C.eye(n, dtype=input.dtype).bool(), input.unsqueeze(0), 0)
        if k == 0:
            return sq
        out = C.zeros((m, m), dtype=input.dtype)
        r, c = max(-k, 0), max(k, 0)
        out[r:r + n, c:c + n] = sq
        return out
    if input.ndim == 2:
        rows, cols = input.shape
        r0, c0 = max(-k, 0), max(k, 0)
        n = max(0, min(rows - r0, cols - c0))
        ri = C.arange(r0, r0 + n)
        ci = C.arange(c0, c0 + n)
        return input[ri, ci]
    raise op_error(TracegradRuntimeError, "diag",
                   f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


def _finite_value(v, name):
    if v is None:
        return None
    if isinstance(v, Tensor):
        return float(v.item())
    if isinstance(v, (numbers.Real, np.floating, np.integer)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, bool):
        return float(v)
    raise TracegradTypeError(f"nan_to_num(): argument '{name}' must be float, not "
                             f"{type(v).__name__}")


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """Replace NaN by `nan`, +inf by `posinf` and -inf by `neginf` (defaults: 0 and the dtype's
    largest and lowest finite values). Integer and bool tensors come back unchanged (a copy). The gradient flows where the input is finite.

    >>> nan_to_num(tensor([float('nan'), 1.0]))
    tensor([0., 1.])
    """
    nan = _finite_value(nan, "nan")
    posinf = _finite_value(posinf, "posinf")
    neginf = _finite_value(neginf, "neginf")
    if not input.dtype.is_floating_point:
        return S.clone(input)
    fi = np.finfo(input._data.dtype)
    nan = 0.0 if nan is None else nan
    posinf = float(fi.max) if posinf is None else posinf
    neginf = float(fi.min) if neginf is None else neginf
    out = E.where(E.isnan(input), nan, input)
    out = E.where(isposinf(input), posinf, out)
    return E.where(isneginf(input), neginf, out)


def nan_to_num_(input, nan=0.0, posinf=None, neginf=None):
    """In-place `nan_to_num`."""
    res = nan_to_num(input, nan, posinf, neginf)
    if input.dtype.is_floating_point:
        input.copy_(res)
    return input
