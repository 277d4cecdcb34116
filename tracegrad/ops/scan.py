"""Scans along one dim: cumsum and cumprod.

Integer and bool inputs accumulate in int64, as in PyTorch; `dtype=` converts first.
Floating inputs accumulate as PyTorch's CPU kernels do (`acc_type`): float16 in float32,
float32 and float64 in float64, element by element, each result rounded to the input's
dtype (a float16 cumsum of 2,000 numbers differed from torch's in most elements). The
cumsum VJP is a reversed cumsum (flip, cumsum, flip). The cumprod VJP is exact at zeros: the
gradient of out[i] with respect to x[k] (k <= i) is the product of x[0..i] without x[k],
built from prefix products with the reduction's zero-safe `prod` rule, so it differentiates
again (Note in reduction._others_at_zeros).
"""
import numpy as np

from .._dispatch import dispatch
from .._tensor import _wrap_dim
from . import elementwise as E
from . import shape_rules as SR
from .primitive import Primitive


def _acc_dtype(x):
    return np.int64 if x.dtype.kind in "biu" else x.dtype


def acc_float(dt):
    """The dtype PyTorch's CPU scans accumulate floating `dt` in (its `acc_type`)."""
    return np.float32 if dt == np.float16 else np.float64


def _scan(fn, x, dim):
    if x.ndim == 0:
        return x.astype(_acc_dtype(x))
    if x.dtype.kind != "f":
        return fn(x, axis=dim, dtype=_acc_dtype(x))
    acc = acc_float(x.dtype)
    return fn(x, axis=dim, dtype=acc).astype(x.dtype, copy=acc != x.dtype)


def _cumsum_kernel(x, dim):
    return _scan(np.cumsum, x, dim)


def _cumprod_kernel(x, dim):
    return _scan(np.cumprod, x, dim)


def _cumsum_vjp(g, ins, out, n):
    if not n.shapes[0]:
        return (g,)
    from .structure import flip
    d = n.attrs["dim"]
    return (flip(cumsum(flip(g, (d,)), d), (d,)),)


def _cumprod_vjp(g, ins, out, n):
    """grad x[k] = sum_{i >= k} g[i] * prod_{j <= i, j != k} x[j], from an (i, j) table."""
    x = ins[0]
    if not n.shapes[0]:
        return (g,)
    from .._tensor import from_array
    from .reduction import _others_at_zeros, prod, sum as rsum
    from .shape import unsqueeze
    d = n.attrs["dim"]
    xl, gl = _to_last(x, d), _to_last(g, d)                # scan dim last: (..., m)
    below = from_array(np.tri(xl.shape[-1], dtype=bool))   # [i, j]: j <= i
    table = E.where(below, unsqueeze(xl, -2), 1.0)         # (..., i, j)
    zero = E.eq(table, 0)
    safe = E.where(zero, 1.0, table)
    last = (table.ndim - 1,)
    others = E.where(zero, _others_at_zeros(table, zero, safe, last),
                     E.div(prod(table, -1, keepdim=True), safe))
    others = E.where(below, others, 0.0)                   # x[k] is not in out[i] for k > i
    gk = rsum(E.mul(unsqueeze(gl, -1), others), -2)        # sum over i
    return (_from_last(gk, d),)


def _to_last(x, d):
    from .shape import permute
    return permute(x, tuple(i for i in range(x.ndim) if i != d) + (d,))


def _from_last(x, d):
    from .shape import permute
    perm = list(range(x.ndim - 1))
    perm.insert(d, x.ndim - 1)
    return permute(x, tuple(perm))


CUMSUM = Primitive("cumsum", E._quiet(_cumsum_kernel), vjp=_cumsum_vjp, shape_rule=SR.same)
CUMPROD = Primitive("cumprod", E._quiet(_cumprod_kernel), vjp=_cumprod_vjp, saves=(0,),
                    shape_rule=SR.same)


def cumsum(input, dim, *, dtype=None):
    """Running sums along `dim`; integer inputs give int64 unless `dtype` names another."""
    if dtype is not None:
        input = input.to(dtype)
    out = dispatch(CUMSUM, (input,), {"dim": _wrap_dim(dim, input.ndim, "cumsum")})
    return out if dtype is None or out.dtype is dtype else out.to(dtype)


def cumprod(input, dim, *, dtype=None):
    """Running products along `dim`."""
    if dtype is not None:
        input = input.to(dtype)
    out = dispatch(CUMPROD, (input,), {"dim": _wrap_dim(dim, input.ndim, "cumprod")})
    return out if dtype is None or out.dtype is dtype else out.to(dtype)   # as cumsum
