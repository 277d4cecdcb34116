"""Ordering along one dim: sort, argsort and topk.

`sort` and `topk` return `(values, indices)` like `max(dim=...)`: the values come from a
differentiable primitive (SortBackward0, TopkBackward0), the int64 indices from a separate
non-differentiable one, so each primitive has one output. Both orders are stable (ties keep
their original order, descending too), and NaN counts as the largest value, as in PyTorch.
The VJP recomputes the order from the saved input and scatters the cotangent back there
(a scatter_add, whose own VJP is a gather: higher orders stay within these primitives).
"""
import numpy as np

from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import TracegradRuntimeError, op_error
from .._tensor import _wrap_dim
from . import shape_rules as SR
from .primitive import Primitive, overload_of
from .reduction import _MinMax


def _order(x, dim, descending):
    """Stable argsort along `dim` (descending: ties still in ascending position order)."""
    if x.ndim == 0:
        return np.zeros((), np.int64)
    if not descending:
        return np.argsort(x, axis=dim, kind="stable").astype(np.int64, copy=False)
    n = x.shape[dim]
    rev = np.argsort(np.flip(x, dim), axis=dim, kind="stable")
    return (n - 1 - np.flip(rev, dim)).astype(np.int64, copy=False)


def _take(x, idx, dim):
    return x.copy() if x.ndim == 0 else np.take_along_axis(x, idx, axis=dim)


def _first(idx, k, dim):
    if idx.ndim == 0:
        return idx
    return idx[(slice(None),) * dim + (slice(0, k),)]


# ---------------- sort / argsort ----------------
def _sort_kernel(x, dim, descending):
    return _take(x, _order(x, dim, descending), dim)


def _argsort_kernel(x, dim, descending):
    return _order(x, dim, descending)


def _scatter_back(g, idx, n):
    from .creation import zeros
    from .gather_scatter import SCATTER_ADD
    if not n.shapes[0]:
        return g
    return dispatch(SCATTER_ADD, (zeros(n.shapes[0], dtype=g.dtype), idx, g),
                    {"dim": n.attrs["dim"]})


def _sort_vjp(g, ins, out, n):
    a = n.attrs
    idx = dispatch(ARGSORT, (ins[0],), {"dim": a["dim"], "descending": a["descending"]})
    return (_scatter_back(g, idx, n),)


SORT = Primitive("sort", _sort_kernel, vjp=_sort_vjp, saves=(0,), shape_rule=SR.same)
SORT_STABLE = overload_of(SORT, "sort_stable", "SortBackward1")     # sort(stable=...)
ARGSORT = Primitive("argsort", _argsort_kernel, shape_rule=SR.same)


def _values_indices(name, values, indices):
    r = _MinMax((values, indices))
    r._name = name
    return r


def sort(input, dim=-1, descending=False, stable=None):
    """(values, indices) sorted along `dim`; `stable` is accepted (every sort here is)."""
    d = _wrap_dim(dim, input.ndim, "sort")
    attrs = {"dim": d, "descending": bool(descending)}
    values = dispatch(SORT if stable is None else SORT_STABLE, (input,), attrs)
    return _values_indices("sort", values, dispatch(ARGSORT, (input,), attrs))


def argsort(input, dim=-1, descending=False, stable=False):
    """The int64 indices that sort `input` along `dim`."""
    d = _wrap_dim(dim, input.ndim, "argsort")
    return dispatch(ARGSORT, (input,), {"dim": d, "descending": bool(descending)})


# ---------------- topk ----------------
def _topk_indices_kernel(x, k, dim, largest):
    return _first(_order(x, dim, largest), k, dim)


def _topk_kernel(x, k, dim, largest):
    return _take(x, _topk_indices_kernel(x, k, dim, largest), dim)


def _topk_vjp(g, ins, out, n):
    a = n.attrs
    idx = dispatch(TOPK_INDICES, (ins[0],), a)
    return (_scatter_back(g, idx, n),)


def _topk_shape(shapes, attrs):
    shape = list(shapes[0])
    if shape:
        shape[attrs["dim"]] = attrs["k"]
    return tuple(shape)


TOPK = Primitive("topk", _topk_kernel, vjp=_topk_vjp, saves=(0,), shape_rule=_topk_shape)
TOPK_INDICES = Primitive("topk_indices", _topk_indices_kernel, shape_rule=_topk_shape)


def topk(input, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the `k` largest (or smallest) entries along `dim`, in order."""
    d = _wrap_dim(dim, input.ndim, "topk")
    if input.dtype is D.bool_:
        raise op_error(TracegradRuntimeError, "topk", "topk does not support bool dtypes on "
                       "CPU", "Convert first, e.g. `mask.int()`.")
    size = input.shape[d] if input.ndim else 1
    if not 0 <= k <= size:
        raise op_error(TracegradRuntimeError, "topk", "selected index k out of range",
                       f"k must be between 0 and {size} (the size of dim {d}).")
    attrs = {"k": int(k), "dim": d, "largest": bool(largest)}
    values = dispatch(TOPK, (input,), attrs)
    return _values_indices("topk", values, dispatch(TOPK_INDICES, (input,), attrs))
