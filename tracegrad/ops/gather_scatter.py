"""Selecting and placing elements along one dim: gather, scatter (src or value), scatter_add,
index_select, masked_fill, and their in-place forms.

Note [Along a dim]
`gather(x, dim, index)` reads `x[i0, .., index[i0, .., ik], .., in]` for every position of
`index`; scatter writes there. Both address `x` through one index tuple (`_along`): the
positions of `index` in every dim but `dim`, `index` itself in `dim`. `index` may be smaller
than `x` (and than `src`) in every dim, so it addresses a corner of them, as in PyTorch.
Gradients pair them up: gather's is a scatter_add into zeros, scatter_add's (for `src`) a
gather, so every order of derivative stays within these primitives.
"""
import numpy as np

from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import (TracegradIndexError, TracegradRuntimeError, TracegradTypeError,
                       op_error)
from .._tensor import Tensor, _wrap_dim
from . import elementwise as E
from . import shape_rules as SR
from .primitive import Primitive, inplace_of, overload_of


def _along(index, dim):
    """The index tuple addressing, for each position of `index`, element index[...] along
    `dim` (Note [Along a dim])."""
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim] = index
    return tuple(grid)


def _check_bounds(index, size, dim, op, cls=TracegradRuntimeError):
    """PyTorch checks indices in its kernels (negative ones are out of bounds too)."""
    if index.size == 0:
        return
    lo, hi = int(index.min()), int(index.max())
    if lo < 0 or hi >= size:
        bad = lo if lo < 0 else hi
        where = f"index {bad} is out of bounds for dimension {dim} with size {size}"
        if cls is TracegradIndexError:       # PyTorch's IndexError text, then ours
            where = f"index out of range in self ({where})"
        raise op_error(cls, op, where)


def _corner(a, shape):
    """`a` cut down to its leading `shape` corner (index smaller than src)."""
    if a.shape == tuple(shape):
        return a
    return a[tuple(slice(0, s) for s in shape)]


# ---------------- gather ----------------
def _gather_kernel(x, index, dim):
    if x.ndim == 0:
        _check_bounds(index, 1, dim, "gather")
        return np.broadcast_to(x, index.shape).copy()
    _check_bounds(index, x.shape[dim], dim, "gather")
    return x[_along(index, dim)]


def _gather_vjp(g, ins, out, n):
    from .creation import zeros
    z = zeros(n.shapes[0], dtype=g.dtype)
    return (dispatch(SCATTER_ADD, (z, ins[1], g), {"dim": n.attrs["dim"]}), None)


GATHER = Primitive("gather", _gather_kernel, vjp=_gather_vjp, saves_for={0: (1,)},
                   shape_rule=SR.operand(1), may_raise=True)


def _check_index(op, input, dim, index, others=()):
    """PyTorch's static checks of gather/scatter operands; returns the wrapped dim."""
    if not isinstance(index, Tensor):
        raise op_error(TracegradTypeError, op, f"{op}(): argument 'index' must be Tensor, not "
                       f"{type(index).__name__}")
    d = _wrap_dim(dim, input.ndim, op)
    if index.dtype not in (D.int64, D.int32):
        raise op_error(TracegradRuntimeError, op,
                       f"{op.rstrip('_')}(): Expected dtype int32/int64 for index",
                       "Convert it, e.g. `index.long()`.")
    if input.ndim and index.ndim and index.ndim != input.ndim:
        raise op_error(TracegradRuntimeError, op, "Index tensor must have the same number of "
                       "dimensions as input tensor")
    for name, t in others:
        if t.ndim and index.ndim and index.ndim != t.ndim:
            raise op_error(TracegradRuntimeError, op, "Index tensor must have the same number "
                           f"of dimensions as {name} tensor")
    if input.ndim and index.ndim:
        for k in range(index.ndim):
            small = index.shape[k] <= input.shape[k] or k == d
            if not small or any(index.shape[k] > t.shape[k] for _, t in others if t.ndim):
                raise op_error(TracegradRuntimeError, op, _size_message(op, k, d, index, input,
                                                                         others))
    return d


def _size_message(op, k, d, index, input, others):
    if op == "gather":
        return (f"Size does not match at dimension {k} expected index {list(index.shape)} to "
                f"be no larger than self {list(input.shape)} apart from dimension {d}")
    src = others[0][1] if others else None
    tail = f" and to be no larger size than src {list(src.shape)}" if src is not None else ""
    return (f"Expected index {list(index.shape)} to be no larger than self "
            f"{list(input.shape)} apart from dimension {d}{tail}")


def gather(input, dim, index, *, sparse_grad=False):
    """`out[i][j] = input[index[i][j]][j]` for dim 0 (and likewise for other dims)."""
    d = _check_index("gather", input, dim, index)
    return dispatch(GATHER, (input, index), {"dim": d})


# ---------------- scatter / scatter_add ----------------
def _scatter_kernel(x, index, src, dim):
    out = x.copy()
    if x.ndim == 0:
        _check_bounds(index, 1, dim, "scatter")
        if index.size:
            out[...] = np.asarray(src).reshape(-1)[-1] if np.ndim(src) else src
        return out
    _check_bounds(index, x.shape[dim], dim, "scatter")
    out[_along(index, dim)] = src if np.ndim(src) == 0 else _corner(src, index.shape)
    return out


def _scatter_add_kernel(x, index, src, dim):
    out = x.copy()
    if x.ndim == 0:
        _check_bounds(index, 1, dim, "scatter_add")
        out[...] += np.sum(_corner(src, index.shape))
        return out
    _check_bounds(index, x.shape[dim], dim, "scatter_add")
    np.add.at(out, _along(index, dim), _corner(src, index.shape))     # repeats accumulate
    return out


def _src_grad(g, index, dim, src_shape):
    """The gradient of `src`: g gathered at the index, zero past the index's corner."""
    picked = dispatch(GATHER, (g, index), {"dim": dim})
    if tuple(picked.shape) == tuple(src_shape):
        return picked
    from .creation import zeros
    from .shape import INDEX_PUT
    key = tuple(slice(0, s) for s in picked.shape)
    return dispatch(INDEX_PUT, (zeros(src_shape, dtype=g.dtype), picked), {"key": key})


def _scatter_vjp(g, ins, out, n):
    index, dim = ins[1], n.attrs["dim"]
    gx = dispatch(SCATTER_VALUE, (g, index, 0.0), {"dim": dim}) if n.needs[0] else None
    gs = _src_grad(g, index, dim, n.shapes[2]) if n.needs[2] else None
    return (gx, None, gs)


def _scatter_add_vjp(g, ins, out, n):
    gs = _src_grad(g, ins[1], n.attrs["dim"], n.shapes[2]) if n.needs[2] else None
    return (g if n.needs[0] else None, None, gs)


def _scatter_value_vjp(g, ins, out, n):
    return (dispatch(SCATTER_VALUE, (g, ins[1], 0.0), {"dim": n.attrs["dim"]}), None, None)


SCATTER = Primitive("scatter", _scatter_kernel, vjp=_scatter_vjp,
                    saves_for={0: (1,), 2: (1,)}, shape_rule=SR.same, may_raise=True)
SCATTER_VALUE = Primitive("scatter_value", _scatter_kernel, vjp=_scatter_value_vjp,
                          saves_for={0: (1,), 2: ()}, grad_fn_name="ScatterBackward1",
                          shape_rule=SR.same, may_raise=True)
SCATTER_ADD = Primitive("scatter_add", E._quiet(_scatter_add_kernel), vjp=_scatter_add_vjp,
                        saves_for={2: (1,)}, shape_rule=SR.same, may_raise=True)
SCATTER_ = inplace_of(SCATTER, "scatter_", writes="indexed")
SCATTER_VALUE_ = inplace_of(SCATTER_VALUE, "scatter_value_", writes="indexed")
SCATTER_ADD_ = inplace_of(SCATTER_ADD, "scatter_add_", writes="indexed")


def _scatter_call(op, prims, input, dim, index, src, value, reduce):
    if reduce is not None:
        from .._errors import TracegradNotImplementedError
        raise op_error(TracegradNotImplementedError, op, f"{op}(reduce=...) is not supported",
                       "Use scatter_add for reduce='add'.")
    if src is None:
        src = value
    if isinstance(src, Tensor):
        d = _check_index(op, input, dim, index, (("src", src),))
        if src.dtype is not input.dtype:
            raise op_error(TracegradRuntimeError, op, f"{op.rstrip('_')}(): Expected self.dtype "
                           "to be equal to src.dtype", "Convert src, e.g. `src.to(x.dtype)`.")
        return dispatch(prims[0], (input, index, src), {"dim": d})
    if not isinstance(src, (int, float, bool)):
        raise op_error(TracegradTypeError, op, f"{op}(): src must be a Tensor or a number, got "
                       f"{type(src).__name__}")
    d = _check_index(op, input, dim, index)
    return dispatch(prims[1], (input, index, src), {"dim": d})


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """A copy of `input` with `src` (a tensor, or a number `value`) written at `index` along
    `dim`: `out[index[i][j]][j] = src[i][j]` for dim 0."""
    return _scatter_call("scatter", (SCATTER, SCATTER_VALUE), input, dim, index, src, value,
                         reduce)


def scatter_(input, dim, index, src=None, value=None, *, reduce=None):
    return _scatter_call("scatter_", (SCATTER_, SCATTER_VALUE_), input, dim, index, src, value,
                         reduce)


def scatter_add(input, dim, index, src):
    """A copy of `input` with `src` added at `index` along `dim` (repeats accumulate)."""
    if not isinstance(src, Tensor):
        raise op_error(TracegradTypeError, "scatter_add", "scatter_add(): argument 'src' must "
                       f"be Tensor, not {type(src).__name__}")
    return _scatter_call("scatter_add", (SCATTER_ADD, None), input, dim, index, src, None, None)


def scatter_add_(input, dim, index, src):
    return _scatter_call("scatter_add_", (SCATTER_ADD_, None), input, dim, index, src, None,
                         None)


# ---------------- index_select ----------------
def _index_select_kernel(x, index, dim):
    # PyTorch's CPU kernel raises IndexError along dim 0 (the lookup-table case, and a 0-d
    # input) and RuntimeError along most other dims
    cls = TracegradIndexError if dim == 0 else TracegradRuntimeError
    if x.ndim == 0:
        _check_bounds(index, 1, 0, "index_select", cls)
        return x.reshape(1)[index.reshape(-1)].reshape(index.shape)
    _check_bounds(index, x.shape[dim], dim, "index_select", cls)
    return np.take(x, index, axis=dim)


def _index_select_vjp(g, ins, out, n):
    """Rows of g added back at their index: a scatter_add with the index spread over g."""
    from .creation import zeros
    from .shape import expand, reshape
    index, dim, shape = ins[1], n.attrs["dim"], n.shapes[0]
    if not shape:
        from .reduction import sum as rsum
        return (rsum(g), None)
    view = [1] * len(shape)
    view[dim] = index.shape[0] if index.ndim else 1
    spread = expand(reshape(index, tuple(view)), tuple(g.shape))
    return (dispatch(SCATTER_ADD, (zeros(shape, dtype=g.dtype), spread, g), {"dim": dim}), None)


def _index_select_shape(shapes, attrs):
    shape, n = list(shapes[0]), (tuple(shapes[1]) or (1,))[0]
    if not shape:
        return tuple(shapes[1])
    shape[attrs["dim"]] = n
    return tuple(shape)


INDEX_SELECT = Primitive("index_select", _index_select_kernel, vjp=_index_select_vjp,
                         saves_for={0: (1,)}, shape_rule=_index_select_shape, may_raise=True)


def index_select(input, dim, index):
    """The entries of `input` at `index` (1-D) along `dim`."""
    d = _wrap_dim(dim, input.ndim, "index_select")
    if not isinstance(index, Tensor) or index.dtype not in (D.int64, D.int32) or index.ndim > 1:
        raise op_error(TracegradRuntimeError, "index_select",
                       "index_select(): Index is supposed to be a vector of dtype int32/int64")
    return dispatch(INDEX_SELECT, (input, index), {"dim": d})


# ---------------- masked_fill ----------------
def _masked_fill_kernel(x, mask, value):
    return np.where(mask, value, x).astype(x.dtype, copy=False)


def _masked_fill_vjp(g, ins, out, n):
    mask = ins[1]
    gx = E._st(E.where(mask, 0.0, g), n.shapes[0]) if n.needs[0] else None
    gv = None
    if n.needs[2]:
        from .reduction import sum as rsum
        gv = rsum(E.where(mask, g, 0.0))
    return (gx, None, gv)


MASKED_FILL = Primitive("masked_fill", _masked_fill_kernel, vjp=_masked_fill_vjp,
                        saves_for={0: (1,), 2: (1,)}, shape_rule=SR.broadcast)
MASKED_FILL_TENSOR = overload_of(MASKED_FILL, "masked_fill_tensor", "MaskedFillBackward1")
MASKED_FILL_ = inplace_of(MASKED_FILL)
MASKED_FILL_TENSOR_ = inplace_of(MASKED_FILL_TENSOR)


def _masked_fill(op, prims, input, mask, value):
    if not isinstance(mask, Tensor) or mask.dtype is not D.bool_:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise op_error(TracegradRuntimeError, op, "masked_fill_ only supports boolean masks, "
                       f"but got mask with dtype {_long_name(got)}",
                       "Build the mask with a comparison, e.g. `x > 0`.")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise op_error(TracegradRuntimeError, op, "masked_fill_ only supports a "
                           "0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
        prim = prims[1]
    else:
        prim = prims[0]
    if op.endswith("_"):
        shape = tuple(np.broadcast_shapes(input.shape, mask.shape))
        if shape != tuple(input.shape):
            raise op_error(TracegradRuntimeError, op, f"output with shape {list(input.shape)} "
                           f"doesn't match the broadcast shape {list(shape)}")
    return dispatch(prim, (input, mask, value))


def _long_name(name):
    return {"int64": "long int", "int32": "int", "float32": "float",
            "float64": "double"}.get(name, name)


def masked_fill(input, mask, value):
    """A copy of `input` with `value` where `mask` is True (cast to input's dtype)."""
    return _masked_fill("masked_fill", (MASKED_FILL, MASKED_FILL_TENSOR), input, mask, value)


def masked_fill_(input, mask, value):
    return _masked_fill("masked_fill_", (MASKED_FILL_, MASKED_FILL_TENSOR_), input, mask, value)
