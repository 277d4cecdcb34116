"""`scatter_reduce` / `Tensor.scatter_reduce_`: reduce `src` into a copy of `input` at
`index` along `dim`, with reduce "sum", "prod", "mean", "amax" or "amin" and `include_self`.

One primitive (its numpy kernel accumulates with ufunc.at, so repeated indices combine); its
VJP is PyTorch's derivative written in tracegrad ops (gather, scatter_add, where, and this
primitive again for "prod"), so gradients of gradients work:
- sum: `input` gets g, `src` g gathered at the index;
- mean: both divided by the count per position (input counts once when included);
- prod: g * result / x, with zeros handled as PyTorch does (a zero in `input` or a single
  zero among a position's `src` values gets the product of the others);
- amax/amin: g shared evenly among the values equal to the result (`input`'s and `src`'s);
- include_self=False: `input` gets no gradient where something was scattered.
Integer "mean" divides rounding down, as PyTorch does. "max"/"min" are accepted as PyTorch
accepts them (aliases of amax/amin).
"""
import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradRuntimeError, TracegradTypeError, op_error
from .._tensor import Tensor
from . import elementwise as E
from . import gather_scatter as G
from . import shape_rules as SR
from .primitive import Primitive, inplace_of

__all__ = ["scatter_reduce"]

_REDUCES = {"sum": "sum", "prod": "prod", "mean": "mean", "amax": "amax", "amin": "amin",
            "max": "amax", "min": "amin"}
_UFUNC = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum,
          "amin": np.minimum}


def _identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    if info is None:                                          # bool
        return reduce == "amin"
    return info.min if reduce == "amax" else info.max


def _kernel(x, index, src, dim, reduce, include_self):
    if x.ndim == 0:                          # a 0-d input: one position, every index is 0
        r = _kernel(x.reshape(1), index.reshape(-1), np.asarray(src).reshape(-1)[:index.size],
                    0, reduce, include_self)
        return r.reshape(())
    G._check_bounds(index, x.shape[dim], dim, "scatter_reduce")
    pos = G._along(index, dim)
    s = G._corner(src, index.shape)
    out = x.copy()
    if not include_self:
        out[pos] = _identity(reduce, x.dtype)
    _UFUNC[reduce].at(out, pos, s)
    if reduce == "mean":
        count = np.ones(x.shape, np.int64) if include_self else np.zeros(x.shape, np.int64)
        np.add.at(count, pos, 1)
        count = np.maximum(count, 1)
        if x.dtype.kind == "f":
            out = (out / count).astype(x.dtype)
        else:
            out = np.floor_divide(out, count).astype(x.dtype)
    return out


def _pad(gs, src_shape):
    """A gradient computed over the index's corner of `src`, zero past it."""
    if tuple(gs.shape) == tuple(src_shape):
        return gs
    from .creation import zeros
    from .shape import INDEX_PUT
    key = tuple(slice(0, s) for s in gs.shape)
    return dispatch(INDEX_PUT, (zeros(src_shape, dtype=gs.dtype), gs), {"key": key})


def _corner_t(t, shape):
    if tuple(t.shape) == tuple(shape):
        return t
    return t[tuple(slice(0, s) for s in shape)]


def _vjp(g, ins, out, n):
    x, index, src = ins
    dim, reduce, inc = n.attrs["dim"], n.attrs["reduce"], n.attrs["include_self"]
    gather = lambda t: dispatch(G.GATHER, (t, index), {"dim": dim})     # noqa: E731
    scatter_add = lambda t, s: dispatch(G.SCATTER_ADD, (t, index, s), {"dim": dim})  # noqa
    srcc = _corner_t(src, index.shape)
    if reduce == "sum":
        gx, gs = g, gather(g)
    elif reduce == "mean":
        from .creation import ones_like, zeros_like
        n_ = scatter_add(ones_like(g) if inc else zeros_like(g), ones_like(srcc))
        gd = E.div(g, E.where(E.eq(n_, 0), 1.0, n_))
        gx, gs = gd, gather(gd)
    elif reduce == "prod":
        from .creation import zeros_like
        again = lambda a, s: dispatch(SCATTER_REDUCE, (a, index, s), n.attrs)  # noqa: E731
        x_zero = E.eq(x, 0)
        masked_x = E.where(x_zero, 1.0, x)
        gx = E.div(E.mul(g, again(masked_x, srcc)), masked_x)
        s_zero = E.eq(srcc, 0)
        zeros_at = gather(scatter_add(zeros_like(g), s_zero.to(g.dtype)))
        single = E.logical_and(s_zero, E.eq(zeros_at, 1))
        masked_src_result = again(x, E.where(single, 1.0, srcc))
        gs = E.where(single, gather(E.mul(g, masked_src_result)),
                     E.div(gather(E.mul(g, out)), E.where(s_zero, 1.0, srcc)))
    else:
        value = gather(out)
        x_is = E.eq(x, out).to(g.dtype)
        s_is = E.eq(srcc, value).to(g.dtype)
        gd = E.div(g, scatter_add(x_is, s_is))
        gx, gs = E.mul(x_is, gd), E.mul(s_is, gather(gd))
    if not inc:
        gx = dispatch(G.SCATTER_VALUE, (gx, index, 0.0), {"dim": dim})
    return (gx if n.needs[0] else None, None, _pad(gs, n.shapes[2]) if n.needs[2] else None)


SCATTER_REDUCE = Primitive("scatter_reduce", E._quiet(_kernel), vjp=_vjp, saves=(0, 1, 2),
                           saves_out=True, shape_rule=SR.same, may_raise=True)
SCATTER_REDUCE_ = inplace_of(SCATTER_REDUCE, writes="indexed")


def _call(op, prim, input, dim, index, src, reduce, include_self):
    if not isinstance(src, Tensor):
        raise TracegradTypeError(f"{op}(): argument 'src' (position 3) must be Tensor, not "
                                 f"{type(src).__name__}")
    if reduce not in _REDUCES:
        raise op_error(TracegradRuntimeError, op, "reduce argument must be either sum, prod, "
                       f"mean, amax or amin, got {reduce}")
    d = G._check_index(op, input, dim, index, (("src", src),))
    if src.dtype is not input.dtype:
        raise op_error(TracegradRuntimeError, op, "scatter(): Expected self.dtype to be equal "
                       "to src.dtype", "Convert src, e.g. `src.to(x.dtype)`.")
    return dispatch(prim, (input, index, src), {"dim": d, "reduce": _REDUCES[reduce],
                                                 "include_self": bool(include_self)})


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """A copy of `input` with `src` reduced in at `index` along `dim` (see the module note).

    >>> scatter_reduce(tensor([1., 2.]), 0, tensor([0, 0]), tensor([5., 6.]), "amax")
    tensor([6., 2.])
    """
    return _call("scatter_reduce", SCATTER_REDUCE, input, dim, index, src, reduce,
                 include_self)


def scatter_reduce_(input, dim, index, src, reduce, *, include_self=True):
    """`scatter_reduce` in place."""
    return _call("scatter_reduce_", SCATTER_REDUCE_, input, dim, index, src, reduce,
                 include_self)
