"""Math and reduction composites real programs reach for next: `logaddexp clamp_min clamp_max
var_mean std_mean nansum nanmean count_nonzero addcmul addcdiv logit cdist median quantile
searchsorted bucketize trapezoid`.

Each is composed of existing differentiable primitives, so gradients, tracing, compiled
programs and the JAX backend come for free; only the grad_fn names differ from PyTorch's
(a composite's node is its last primitive's).

Note [Order statistics by sort]: `median` and `quantile` sort along the dim and pick
(`median`: PyTorch's *lower* median, index (n - 1) // 2; `quantile`: PyTorch's 'linear',
'lower', 'higher', 'midpoint', 'nearest' between the two neighbouring order statistics), so
their gradient flows to the picked entries through sort's VJP, as PyTorch's does. nan sorts
last in numpy and in PyTorch, so a nan in the input gives nan, as PyTorch.
"""
import math

from .._errors import TracegradIndexError, TracegradRuntimeError, TracegradValueError, op_error
from .. import _dtype as D
from .._tensor import Tensor, _wrap_dim
from . import elementwise as E
from . import reduction as R
from . import shape as S
from .reduction import _MinMax

__all__ = ["logaddexp", "logaddexp2", "clamp_min", "clamp_max", "var_mean", "std_mean",
           "nansum", "nanmean", "count_nonzero", "addcmul", "addcdiv", "logit", "cdist",
           "median", "quantile", "searchsorted", "bucketize", "trapezoid"]


def logaddexp(input, other):
    """`log(exp(input) + exp(other))` without overflow: `max + log1p(exp(-|input - other|))`."""
    m = E.maximum(input, other)
    return E.add(m, E.log1p(E.exp(E.neg(E.abs(E.sub(input, other))))))


def logaddexp2(input, other):
    """`log2(2**input + 2**other)`."""
    m = E.maximum(input, other)
    d = E.mul(E.neg(E.abs(E.sub(input, other))), math.log(2.0))
    return E.add(m, E.div(E.log1p(E.exp(d)), math.log(2.0)))


def clamp_min(input, min):
    return E.clamp(input, min=min)


def clamp_max(input, max):
    return E.clamp(input, max=max)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """`(var(input, ...), mean(input, ...))` over the same dims."""
    if not isinstance(unbiased, bool) and unbiased is not None and dim is None:
        dim, unbiased = unbiased, None
    v = R.var(input, dim, unbiased, keepdim, correction=correction)
    return v, R.mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """`(std(input, ...), mean(input, ...))` over the same dims."""
    if not isinstance(unbiased, bool) and unbiased is not None and dim is None:
        dim, unbiased = unbiased, None
    s = R.std(input, dim, unbiased, keepdim, correction=correction)
    return s, R.mean(input, dim, keepdim)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum treating nan as zero (its gradient there is zero, as PyTorch's)."""
    if input.is_floating_point():
        input = E.where(E.isnan(input), 0.0, input)
    return R.sum(input, dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean of the non-nan entries (nan where every entry is nan)."""
    if not input.is_floating_point():
        raise op_error(TracegradRuntimeError, "nanmean", "nanmean(): expected input to have "
                       f"floating point or complex dtype but got {input.dtype}")
    n = R.sum(E.logical_not(E.isnan(input)), dim, keepdim)
    return E.div(nansum(input, dim, keepdim, dtype=dtype), n)


def count_nonzero(input, dim=None):
    """Number of non-zero entries (int64) over `dim` (int or tuple; all when None)."""
    return R.sum(E.ne(input, 0), dim)


def addcmul(input, tensor1, tensor2, *, value=1):
    """`input + value * tensor1 * tensor2`."""
    prod = E.mul(tensor1, tensor2)
    return E.add(input, prod if value == 1 else E.mul(prod, value))


def addcdiv(input, tensor1, tensor2, *, value=1):
    """`input + value * tensor1 / tensor2` (integer tensor1 and tensor2: RuntimeError).

    PyTorch no longer divides two integer tensors here and raises; so does this."""
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        from .._errors import TracegradRuntimeError, op_error
        raise op_error(TracegradRuntimeError, "addcdiv",
                       "Integer division with addcdiv is no longer supported, and in a future "
                       " release addcdiv will perform a true division of tensor1 and tensor2. "
                       "The historic addcdiv behavior can be implemented as (input + value * "
                       "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and"
                       " as (input + value * tensor1 / tensor2) for float inputs. The future "
                       "addcdiv behavior is just the latter implementation: (input + value * "
                       "tensor1 / tensor2), for all dtypes.")
    q = E.div(tensor1, tensor2)
    return E.add(input, q if value == 1 else E.mul(q, value))


def logit(input, eps=None):
    """`log(p / (1 - p))`, `p` clamped to `[eps, 1 - eps]` when `eps` is given."""
    if eps is not None:
        input = E.clamp(input, min=eps, max=1.0 - eps)
    return E.log(E.div(input, E.rsub(input, 1.0)))


def cdist(x1, x2, p=2.0, compute_mode=None):
    """p-norm distances between the rows of `x1` (..., P, M) and `x2` (..., R, M): (..., P, R).

    Computed as the norm of the broadcast differences (PyTorch's exact path), so a zero
    distance has a zero gradient, as PyTorch's."""
    if x1.ndim < 2 or x2.ndim < 2:
        raise op_error(TracegradRuntimeError, "cdist", "cdist only supports at least 2D "
                       f"tensors, X1 got: {x1.ndim}D" if x1.ndim < 2 else
                       f"cdist only supports at least 2D tensors, X2 got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise op_error(TracegradRuntimeError, "cdist", "X1 and X2 must have the same number "
                       f"of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise op_error(TracegradRuntimeError, "cdist", "cdist only supports non-negative p "
                       "values")
    d = E.sub(S.unsqueeze(x1, -2), S.unsqueeze(x2, -3))
    if p == 0:
        return R.sum(E.ne(d, 0), -1).to(d.dtype)
    return R.norm(d, p, -1)


def median(input, dim=None, keepdim=False):
    """The lower median; with `dim`, a (values, indices) named tuple (Note [Order statistics
    by sort])."""
    if dim is None:
        flat = S.reshape(input, (-1,))
        if flat.shape[0] == 0:
            return E.mul(R.sum(flat), math.nan) if input.is_floating_point() else R.sum(flat)
        from .sort import sort
        v, _ = sort(flat)
        return v[(flat.shape[0] - 1) // 2]
    from .sort import sort
    d = _wrap_dim(dim, input.ndim, "median")
    n = input.shape[d] if input.ndim else 1
    if n == 0:
        raise op_error(TracegradIndexError, "median", "median(): Expected reduction dim "
                       f"{d} to have non-zero size.")
    if input.ndim == 0:
        from .creation import zeros
        v, i = input.clone(), zeros((), dtype=D.int64)
    else:
        v, i = sort(input, d)
        v, i = S.select(v, d, (n - 1) // 2), S.select(i, d, (n - 1) // 2)
        if keepdim:
            v, i = S.unsqueeze(v, d), S.unsqueeze(i, d)
    out = _MinMax((v, i))
    out._name = "median"
    return out


_INTERP = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The `q`-th quantiles (q a float or a 1-D tensor in [0, 1]) along `dim` (flattened when
    None); a tensor `q` puts its dim first, as PyTorch."""
    from .sort import sort
    if interpolation not in _INTERP:
        raise op_error(TracegradRuntimeError, "quantile", "quantile() interpolation must be "
                       f"one of linear, lower, higher, midpoint or nearest. Got {interpolation}")
    if not input.is_floating_point():
        raise op_error(TracegradRuntimeError, "quantile", "quantile() input tensor must be "
                       "either float or double dtype")
    qs = q.tolist() if isinstance(q, Tensor) else q
    scalar_q = not isinstance(qs, list)
    qs = [qs] if scalar_q else qs
    if any(not (0.0 <= float(x) <= 1.0) for x in qs):
        raise op_error(TracegradRuntimeError, "quantile", "quantile() q values must be in "
                       "the range [0, 1]")
    x = S.reshape(input, (-1,)) if dim is None else input
    d = 0 if dim is None else _wrap_dim(dim, input.ndim, "quantile")
    n = x.shape[d]
    if n == 0:
        raise op_error(TracegradRuntimeError, "quantile", "quantile() input tensor must be "
                       "non-empty")
    v, _ = sort(x, d)
    outs = []
    for qv in qs:
        pos = float(qv) * (n - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        a, b = S.select(v, d, lo), S.select(v, d, hi)
        frac = pos - lo
        if interpolation == "lower" or hi == lo:
            r = a
        elif interpolation == "higher":
            r = b
        elif interpolation == "midpoint":
            r = E.add(a, E.mul(E.sub(b, a), 0.5))
        elif interpolation == "nearest":
            r = a if round(pos) == lo else b     # PyTorch rounds half to even too
        else:
            r = E.add(a, E.mul(E.sub(b, a), frac))
        if keepdim:
            r = S.unsqueeze(r, d) if dim is not None else \
                S.reshape(r, (1,) * input.ndim)
        outs.append(r)
    return outs[0] if scalar_q else S.stack(outs, 0)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Indices where `input`'s values would be inserted to keep the last dim of
    `sorted_sequence` sorted (left-most, or right-most with `right=True`/`side='right'`).

    Counts the entries below (or at most) each value, so it traces and lowers as a
    comparison and a sum; not differentiable (int64, or int32 with `out_int32`)."""
    if side is not None:
        if side not in ("left", "right"):
            raise op_error(TracegradRuntimeError, "searchsorted", "side can only be 'left' or "
                           f"'right' but got {side}")
        if right and side == "left":
            raise op_error(TracegradRuntimeError, "searchsorted", "side and right can't be "
                           "set to opposites, got side of left while right was True")
        right = side == "right"
    if sorter is not None:
        from .gather_scatter import gather
        sorted_sequence = gather(sorted_sequence, -1, sorter)
    scalar = not isinstance(input, Tensor)
    if scalar:
        from .creation import tensor
        input = tensor(input, dtype=sorted_sequence.dtype)
    if sorted_sequence.ndim > 1 and sorted_sequence.shape[:-1] != input.shape[:-1]:
        raise op_error(TracegradRuntimeError, "searchsorted", "torch.searchsorted(): "
                       "boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                       "boundaries tensor and input value tensor must match, but we got "
                       f"boundaries tensor {list(sorted_sequence.shape)} and input value "
                       f"tensor {list(input.shape)}")
    if sorted_sequence.ndim == 1:
        seq = S.reshape(sorted_sequence, (1,) * input.ndim + tuple(sorted_sequence.shape))
    else:
        seq = S.unsqueeze(sorted_sequence, -2)
    cmp = E.le if right else E.lt
    out = R.sum(cmp(seq, S.unsqueeze(input, -1)), -1)
    return out.int() if out_int32 else out


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value: `boundaries[i-1] < x <= boundaries[i]` (`right=False`) or
    `boundaries[i-1] <= x < boundaries[i]`; `boundaries` is 1-D and sorted."""
    if boundaries.ndim != 1:
        raise op_error(TracegradRuntimeError, "bucketize", "boundaries tensor must be 1 "
                       f"dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule along `dim`, with spacing `dx` (default 1) or sample points `x`."""
    if x is not None and dx is not None:
        raise op_error(TracegradValueError, "trapezoid", "trapezoid(): cannot pass both x "
                       "and dx")
    d = _wrap_dim(dim, y.ndim, "trapezoid")
    n = y.shape[d]
    if n == 0:
        return R.sum(y, d)
    y0, y1 = S.narrow(y, d, 0, n - 1), S.narrow(y, d, 1, n - 1)
    mid = E.mul(E.add(y0, y1), 0.5)
    if x is None:
        return E.mul(R.sum(mid, d), 1.0 if dx is None else dx)
    xd = d if x.ndim == y.ndim else x.ndim - 1
    dxs = E.sub(S.narrow(x, xd, 1, n - 1), S.narrow(x, xd, 0, n - 1))
    if x.ndim == 1 and y.ndim > 1:
        dxs = S.reshape(dxs, (n - 1,) + (1,) * (y.ndim - 1 - d))
    return R.sum(E.mul(mid, dxs), d)
