"""`mode(input, dim=-1, keepdim=False)`: the most frequent value along a dim and its index,
as PyTorch's (values, indices) named tuple.

Note [Mode's ties]
Of the values occurring most often, the smallest wins (PyTorch sorts and keeps the first
longest run), and its index is the position of its *last* occurrence along `dim`: what
PyTorch's CPU kernel gives for rows of up to 16 elements (where its sort is an insertion
sort, hence stable). On longer rows PyTorch's unstable sort makes the index some
occurrence of the mode that depends on its sorting algorithm; tracegrad keeps the last one
(deterministic, and `input.gather(dim, indices) == values` in both). NaNs count as distinct
values here; PyTorch's result on rows with NaNs depends on how its sort moves them.

Two primitives: `mode_index` (the int64 indices, no gradient) and `mode` (the values,
ModeBackward0: the gradient goes to the selected index only, like max along a dim).
"""
import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradIndexError, op_error
from . import elementwise as E
from . import shape_rules as SR
from .primitive import Primitive
from .reduction import _MinMax, _wrap_dim

__all__ = ["mode"]


def mode_positions(x, axis):
    """numpy: the index along `axis` (kept, size 1) of the mode of each row (Note [Mode's ties])."""
    if x.ndim == 0:
        return np.zeros((), np.int64)
    moved = np.moveaxis(x, axis, -1)
    n = moved.shape[-1]
    rows = moved.reshape(-1, n)
    order = np.argsort(rows, axis=-1, kind="stable")
    s = np.take_along_axis(rows, order, axis=-1)
    pos = np.broadcast_to(np.arange(n), s.shape)
    differs = s[:, 1:] != s[:, :-1]                  # nan != nan: each NaN is its own run
    ones = np.ones((s.shape[0], 1), bool)
    starts = np.concatenate([ones, differs], axis=1)
    ends = np.concatenate([differs, ones], axis=1)
    run_start = np.maximum.accumulate(np.where(starts, pos, 0), axis=1)
    length = np.where(ends, pos - run_start + 1, 0)
    best = np.argmax(length, axis=1)                 # the first longest run: smallest value
    idx = order[np.arange(len(order)), best].astype(np.int64)
    return np.expand_dims(idx.reshape(moved.shape[:-1]), axis)


def _index_kernel(x, dim, keepdim):
    idx = mode_positions(x, dim)
    return idx if keepdim or x.ndim == 0 else np.squeeze(idx, dim)


def _values_kernel(x, dim, keepdim):
    if x.ndim == 0:
        return x.copy()
    v = np.take_along_axis(x, mode_positions(x, dim), axis=dim)
    return v if keepdim else np.squeeze(v, dim)


def _mode_vjp(g, ins, out, n):
    x = ins[0]
    if x.ndim == 0:
        return (g,)
    from .creation import arange
    from .reduction import _expand_back
    from .shape import reshape
    d = n.attrs["dim"]
    idx = dispatch(MODE_INDEX, (x,), {"dim": d, "keepdim": True})
    shape = [1] * x.ndim
    shape[d] = x.shape[d]
    onehot = E.eq(reshape(arange(x.shape[d]), shape), idx).to(x.dtype)
    return (E.mul(_expand_back(g, n.shapes[0], (d,), n.attrs["keepdim"]), onehot),)


MODE_INDEX = Primitive("mode_index", _index_kernel, shape_rule=SR.reduce_dim)
MODE = Primitive("mode", _values_kernel, vjp=_mode_vjp, saves=(0,), grad_fn_name="ModeBackward0",
                 shape_rule=SR.reduce_dim)


class _Mode(_MinMax):
    __slots__ = ()
    _name = "mode"


def mode(input, dim=-1, keepdim=False):
    """The most frequent value along `dim` and its index, a (values, indices) named tuple.

    Ties go to the smallest value, and the index is that of its last occurrence
    (Note [Mode's ties]).

    >>> mode(tensor([1., 2., 2., 1., 3., 1.]))
    torch.return_types.mode(
    values=tensor(1.),
    indices=tensor(5))
    """
    d = _wrap_dim(dim, input.ndim, "mode")
    if input.ndim and input.shape[d] == 0:
        raise op_error(TracegradIndexError, "mode", f"mode(): Expected reduction dim {d} to "
                       "have non-zero size.")
    attrs = {"dim": d, "keepdim": keepdim}
    return _Mode((dispatch(MODE, (input,), attrs), dispatch(MODE_INDEX, (input,), attrs)))

