"""Running extremes, logcumsumexp and NaN-aware order statistics: `cummax cummin
logcumsumexp kthvalue nanmedian nanquantile`.

Note [Running extremes by their indices]
`cummax`/`cummin` find the index of each running extreme with a never-differentiable
primitive (PyTorch's choices: a tie moves the index to the later element, a NaN is the
extreme from where it appears and each later NaN takes the index), then `gather` the values
at those indices: the values are exactly the input's, and the gradient is PyTorch's (each
output's gradient added into the element it came from).

`logcumsumexp` is one primitive on numpy's exact `logaddexp.accumulate` (float16 in float32);
its VJP, grad x[j] = sum over i >= j of g[i] * exp(x[j] - out[i]), is built from an (i, j)
table in tracegrad ops so it differentiates again.

`kthvalue`, `nanmedian` and `nanquantile` sort (NaN last) and pick, so their gradients flow
through sort's VJP to the picked elements (Note [Order statistics by sort] in
composite_math.py); a tensor `q` is not differentiated (PyTorch's linear interpolation
weight gives `q` a gradient). A tie in `kthvalue` may name another of the equal elements
than PyTorch's quickselect does (same value).
"""
import math

import numpy as np

from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import (TracegradIndexError, TracegradNotImplementedError,
                       TracegradRuntimeError, op_error)
from .._tensor import Tensor, _wrap_dim
from . import elementwise as E
from . import reduction as R
from . import shape as S
from . import shape_rules as SR
from .primitive import Primitive
from .return_types import named

__all__ = ["cummax", "cummin", "logcumsumexp", "kthvalue", "nanmedian", "nanquantile"]


def _extreme_indices(better):
    def kernel(x, dim):
        if x.ndim == 0:
            return np.zeros((), np.int64)
        acc = better.accumulate(x, axis=dim)
        hit = x == acc
        if x.dtype.kind == "f":
            hit |= np.isnan(x)
        shape = [1] * x.ndim
        shape[dim] = x.shape[dim]
        pos = np.where(hit, np.arange(x.shape[dim]).reshape(shape), 0)
        return np.maximum.accumulate(pos, axis=dim).astype(np.int64)
    return kernel


CUMMAX_INDICES = Primitive("cummax_indices", _extreme_indices(np.maximum), nondiff=True,
                           shape_rule=SR.same, doc="where each running maximum is")
CUMMIN_INDICES = Primitive("cummin_indices", _extreme_indices(np.minimum), nondiff=True,
                           shape_rule=SR.same, doc="where each running minimum is")


def _running(name, prim, input, dim):
    from .gather_scatter import gather
    d = _wrap_dim(dim, max(input.ndim, 1), name)
    idx = dispatch(prim, (input,), {"dim": d if input.ndim else 0})
    values = gather(input, d, idx) if input.ndim else S.clone(input)
    return named(name, ("values", "indices"), (values, idx))


def cummax(input, dim):
    """(values, indices) of the running maximum along `dim` (Note [Running extremes by their
    indices]).

    >>> cummax(tensor([1., 3., 2.]), 0).indices
    tensor([0, 1, 1])
    """
    return _running("cummax", CUMMAX_INDICES, input, dim)


def cummin(input, dim):
    """(values, indices) of the running minimum along `dim`."""
    return _running("cummin", CUMMIN_INDICES, input, dim)


def _logcumsumexp_kernel(x, dim):
    if x.ndim == 0:
        return x.copy()
    if x.dtype == np.float16:
        return np.logaddexp.accumulate(x.astype(np.float32), axis=dim).astype(np.float16)
    return np.logaddexp.accumulate(x, axis=dim)


def _logcumsumexp_vjp(g, ins, out, n):
    from .._tensor import from_array
    from .scan import _from_last, _to_last
    x = ins[0]
    if not n.shapes[0]:
        return (g,)
    d = n.attrs["dim"]
    xl, ol, gl = _to_last(x, d), _to_last(out, d), _to_last(g, d)
    below = from_array(np.tri(xl.shape[-1], dtype=bool))       # [i, j]: j <= i
    diff = E.where(below, E.sub(S.unsqueeze(xl, -2), S.unsqueeze(ol, -1)), -math.inf)
    gx = R.sum(E.mul(S.unsqueeze(gl, -1), E.exp(diff)), -2)   # sum over i
    return (_from_last(gx, d),)


LOGCUMSUMEXP = Primitive("logcumsumexp", E._quiet(_logcumsumexp_kernel), vjp=_logcumsumexp_vjp,
                         saves=(0,), saves_out=True, shape_rule=SR.same)


def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along `dim`, computed stably (floating tensors).

    >>> logcumsumexp(tensor([-1000., 0.]), 0)
    tensor([-1000.,     0.])
    """
    if not input.dtype.is_floating_point:
        raise op_error(TracegradNotImplementedError, "logcumsumexp", '"logcumsumexp_out_cpu" '
                       f"not implemented for '{D.scalar_type_name(input.dtype)}'")
    d = _wrap_dim(dim, max(input.ndim, 1), "logcumsumexp")
    return dispatch(LOGCUMSUMEXP, (input,), {"dim": d if input.ndim else 0})


def kthvalue(input, k, dim=-1, keepdim=False):
    """(values, indices) of the `k`-th smallest element along `dim` (NaN is the largest)."""
    from .sort import sort
    d = _wrap_dim(dim, max(input.ndim, 1), "kthvalue")
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise op_error(TracegradRuntimeError, "kthvalue",
                       f"kthvalue(): selected number k out of range for dimension {d}")
    if input.ndim == 0:
        from .creation import zeros
        return named("kthvalue", ("values", "indices"),
                     (S.clone(input), zeros((), dtype=D.int64)))
    v, i = sort(input, d)
    v, i = S.select(v, d, k - 1), S.select(i, d, k - 1)
    if keepdim:
        v, i = S.unsqueeze(v, d), S.unsqueeze(i, d)
    return named("kthvalue", ("values", "indices"), (v, i))


def _sorted_counts(x, d):
    """x sorted along d (NaN last) with its indices, and the count of non-NaN per row
    (keepdim)."""
    from .sort import sort
    v, i = sort(x, d)
    c = R.sum(E.logical_not(E.isnan(x)), d, keepdim=True)
    return v, i, c


def nanmedian(input, dim=None, keepdim=False):
    """The lower median of the non-NaN values (NaN where all are NaN); with `dim`, a
    (values, indices) named tuple."""
    from .gather_scatter import gather
    if dim is None:
        flat = S.reshape(input, (-1,))
        if flat.shape[0] == 0:
            return E.mul(R.sum(flat), math.nan)
        v, _, c = _sorted_counts(flat, 0)
        pos = E.clamp(E.floor_divide(E.sub(c, 1), 2), min=0)
        return S.reshape(gather(v, 0, pos), ())
    d = _wrap_dim(dim, max(input.ndim, 1), "nanmedian")
    if input.ndim == 0:
        from .creation import zeros
        return named("nanmedian", ("values", "indices"),
                     (S.clone(input), zeros((), dtype=D.int64)))
    if input.shape[d] == 0:
        raise op_error(TracegradIndexError, "nanmedian", "nanmedian(): Expected reduction dim "
                       f"{d} to have non-zero size.")
    v, i, c = _sorted_counts(input, d)
    pos = E.clamp(E.floor_divide(E.sub(c, 1), 2), min=0)
    vals, idx = gather(v, d, pos), gather(i, d, pos)
    if not keepdim:
        vals, idx = S.squeeze(vals, d), S.squeeze(idx, d)
    return named("nanmedian", ("values", "indices"), (vals, idx))


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """`quantile` of the non-NaN values (NaN where a row is all NaN)."""
    from .composite_math import _INTERP
    from .gather_scatter import gather
    if interpolation not in _INTERP:
        raise op_error(TracegradRuntimeError, "nanquantile", "quantile() interpolation must "
                       "be one of linear, lower, higher, midpoint or nearest. Got "
                       f"{interpolation}")
    if not input.is_floating_point():
        raise op_error(TracegradRuntimeError, "nanquantile", "quantile() input tensor must be "
                       "either float or double dtype")
    if isinstance(q, Tensor) and q.dtype is not input.dtype:
        raise op_error(TracegradRuntimeError, "nanquantile", "quantile() q tensor must be same "
                       "dtype as the input tensor")
    qs = q.tolist() if isinstance(q, Tensor) else q
    scalar_q = not isinstance(qs, list)
    qs = [qs] if scalar_q else qs
    if isinstance(q, Tensor) and q.ndim > 1:
        raise op_error(TracegradRuntimeError, "nanquantile", "quantile() q must be a scalar or "
                       "1D tensor")
    if any(not (0.0 <= float(x) <= 1.0) for x in qs):
        raise op_error(TracegradRuntimeError, "nanquantile", "quantile() q values must be in "
                       "the range [0, 1]")
    x = S.reshape(input, (-1,)) if dim is None else input
    d = 0 if dim is None else _wrap_dim(dim, max(input.ndim, 1), "nanquantile")
    if x.ndim == 0:
        x = S.reshape(x, (1,))
    if x.shape[d] == 0:
        raise op_error(TracegradRuntimeError, "nanquantile", "quantile() input tensor must be "
                       "non-empty")
    v, _, c = _sorted_counts(x, d)
    # keepdim: (.., 1, ..); an all-NaN row picks its first NaN (and its gradient, as PyTorch)
    last = E.clamp(E.sub(c, 1), min=0).to(x.dtype)
    outs = []
    for qv in qs:
        pos = E.mul(last, float(qv))
        lo, hi = E.floor(pos), E.ceil(pos)
        a, b = gather(v, d, lo.long()), gather(v, d, hi.long())
        if interpolation == "lower":
            r = a
        elif interpolation == "higher":
            r = b
        elif interpolation == "midpoint":
            r = E.where(E.eq(lo, hi), a, E.add(a, E.mul(E.sub(b, a), 0.5)))
        elif interpolation == "nearest":
            r = E.where(E.eq(E.round(pos), lo), a, b)       # half to even, as PyTorch
        else:
            r = E.where(E.eq(lo, hi), a, E.add(a, E.mul(E.sub(b, a), E.sub(pos, lo))))
        if keepdim:
            r = S.reshape(r, (1,) * input.ndim) if dim is None else r
        else:
            r = S.squeeze(r, d) if x.ndim else r
            if dim is None:
                r = S.reshape(r, ())
        outs.append(r)
    return outs[0] if scalar_q else S.stack(outs, 0)
