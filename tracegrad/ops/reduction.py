"""Reduction primitives: sum, mean, prod, amax/amin, max/min with indices, argmax/argmin, norm,
var/std, logsumexp, softmax and log_softmax.

`dim` may be None (all dimensions), an int or a tuple; `keepdim` as in PyTorch. VJP rules
re-insert reduced dimensions with `_expand_back` before broadcasting against the input.
"""
import builtins
import contextlib
import warnings

import numpy as np

from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import TracegradIndexError, TracegradRuntimeError, op_error
from .._tensor import Tensor, _wrap_dim
from . import elementwise as E
from . import shape_rules as SR
from .primitive import Primitive, overload_of


def _dims(dim, ndim, op):
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        if len(dim) == 0:
            return tuple(range(ndim))
        out = tuple(sorted(_wrap_dim(d, ndim, op) for d in dim))
    else:
        out = (_wrap_dim(dim, ndim, op),)
    return out if ndim else ()


def _expand_back(g, shape, dims, keepdim):
    """Broadcast a reduced gradient back to `shape`."""
    from .shape import expand, reshape
    if not keepdim and dims:
        kshape = tuple(1 if i in dims else s for i, s in enumerate(shape))
        g = reshape(g, kshape)
    return expand(g, shape) if g.shape != tuple(shape) else g


def _count(shape, dims):
    n = 1
    for d in dims:
        n *= shape[d]
    return n


# ---- sum / mean ----
_add_reduce = np.add.reduce      # ufunc.reduce directly: np.sum's wrapper costs microseconds


def _sum_kernel(x, dims, keepdim):
    return _add_reduce(x, axis=dims, keepdims=keepdim)


def _sum_vjp(g, ins, out, n):
    a = n.attrs
    return (_expand_back(g, n.shapes[0], a["dims"], a["keepdim"]),)


def _mean_kernel(x, dims, keepdim):
    n = 1
    for d in dims:
        n *= x.shape[d]
    if x.dtype == np.float16:          # accumulate half in float32, as np.mean does
        return (_add_reduce(x, axis=dims, keepdims=keepdim, dtype=np.float32) / n).astype(
            np.float16)
    s = _add_reduce(x, axis=dims, keepdims=keepdim)
    if type(s) is not np.ndarray:      # a numpy scalar: the operator is the fast path
        return s / s.dtype.type(n)
    return np.true_divide(s, n, out=s, dtype=x.dtype)


_mean_kernel = E._quiet(_mean_kernel)    # an empty mean is nan, silently (Note [Quiet kernels])


def _mean_specialize(node):
    """The element count and the result's kind are static (Note [Static kernels])."""
    x, (dims, keepdim) = node.inputs[0], (node.attrs["dims"], node.attrs["keepdim"])
    dt = x.type.dtype.np
    if dt == np.float16 or not dims:
        return None
    n = 1
    for d in dims:
        n *= x.type.shape[d]
    if len(dims) == len(x.type.shape) and not keepdim:
        count = dt.type(n)                   # the sum is a numpy scalar

        def mean(x):
            return _add_reduce(x, axis=dims) / count
    else:
        def mean(x):
            s = _add_reduce(x, axis=dims, keepdims=keepdim)
            return np.true_divide(s, n, out=s, dtype=dt)
    return mean


def _mean_vjp(g, ins, out, n):
    a = n.attrs
    cnt = _count(n.shapes[0], a["dims"])
    return (E.div(_expand_back(g, n.shapes[0], a["dims"], a["keepdim"]), cnt),)


SUM = Primitive("sum", E._quiet(_sum_kernel), vjp=_sum_vjp, shape_rule=SR.reduce)
MEAN = Primitive("mean", _mean_kernel, vjp=_mean_vjp, specialize=_mean_specialize,
                 shape_rule=SR.reduce)
SUM_DIM = overload_of(SUM, "sum_dim", "SumBackward1")       # sum(x, dim): another overload
MEAN_DIM = overload_of(MEAN, "mean_dim", "MeanBackward1")


def sum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over `dim` (all dims when None). Integer and bool inputs sum to int64 unless
    `dtype` names another (`sum(dtype=int8)` wraps, as PyTorch's int8 accumulator does)."""
    if dtype is not None:
        input = input.to(dtype)
    out = dispatch(SUM if dim is None else SUM_DIM, (input,),
                   {"dims": _dims(dim, input.ndim, "sum"), "keepdim": keepdim})
    return out if dtype is None or out.dtype is dtype else out.to(dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    """Arithmetic mean; floating inputs only, like PyTorch."""
    if dtype is not None:
        input = input.to(dtype)
    if not input.is_floating_point():
        raise op_error(TracegradRuntimeError, "mean",
                       "mean(): could not infer output dtype. Input dtype must be either a "
                       f"floating point or complex dtype. Got: {_tname(input)}",
                       "Convert first, e.g. `x.float().mean()`.")
    return dispatch(MEAN if dim is None else MEAN_DIM, (input,),
                    {"dims": _dims(dim, input.ndim, "mean"), "keepdim": keepdim})


def _tname(t):
    return D.scalar_type_name(t.dtype)


# ---- prod ----
def _prod_kernel(x, dims, keepdim):
    return np.prod(x, axis=dims, keepdims=keepdim)


def _prod_except_kernel(x, dims):
    """For each element, the product of the other elements of its reduction group."""
    moved = np.moveaxis(x, dims, tuple(range(x.ndim - len(dims), x.ndim)))
    lead = moved.shape[:x.ndim - len(dims)]
    flat = moved.reshape(lead + (-1,))
    ones = np.ones(lead + (1,), dtype=x.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], -1), -1)
    right = np.flip(np.cumprod(np.flip(np.concatenate([flat[..., 1:], ones], -1), -1), -1), -1)
    res = (left * right).reshape(moved.shape)
    return np.moveaxis(res, tuple(range(x.ndim - len(dims), x.ndim)), dims)


PROD_EXCEPT = Primitive("prod_except", E._quiet(_prod_except_kernel), shape_rule=SR.same)


def _prod_vjp(g, ins, out, n):
    x = ins[0]
    a = n.attrs
    ge = _expand_back(g, n.shapes[0], a["dims"], a["keepdim"])
    # No data-dependent branch (a tracer would turn it into a guard): where x == 0 the
    # product of the others is built from differentiable ops (_others_at_zeros);
    # elsewhere out / x, which differentiates again.
    zero = E.eq(x, 0)
    safe = E.where(zero, 1.0, x)
    others = E.where(zero, _others_at_zeros(x, zero, safe, a["dims"]),
                     E.div(_expand_back(out, n.shapes[0], a["dims"], a["keepdim"]), safe))
    return (E.mul(ge, others),)


def _others_at_zeros(x, zero, safe, dims):
    """prod of the other group members, for members that are 0, exact to first derivative.

    With P = prod of the nonzero members and r = how many *other* members are zero: r == 0
    gives P; r == 1 gives P * x_r (value 0, derivative P with respect to that other zero);
    r >= 2 gives 0. Written with tracegrad ops, so second-order gradients are right.
    """
    p = prod(safe, dims, keepdim=True)
    rest = E.sub(sum(zero, dims, keepdim=True), 1)
    zx = E.where(zero, x, 0.0)
    other_zero = E.sub(sum(zx, dims, keepdim=True), zx)
    factor = E.where(E.eq(rest, 0), 1.0, E.where(E.eq(rest, 1), other_zero, 0.0))
    return E.mul(p, factor)


PROD = Primitive("prod", E._quiet(_prod_kernel), vjp=_prod_vjp, saves=(0,), saves_out=True,
                 shape_rule=SR.reduce)
PROD_DIM = overload_of(PROD, "prod_dim", "ProdBackward1")


def prod(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    out = dispatch(PROD if dim is None else PROD_DIM, (input,),
                   {"dims": _dims(dim, input.ndim, "prod"), "keepdim": keepdim})
    return out if dtype is None or out.dtype is dtype else out.to(dtype)   # as sum


# ---- amax / amin (gradient shared evenly among ties) ----
def _even_vjp(g, ins, out, n):
    x = ins[0]
    a = n.attrs
    ob = _expand_back(out, n.shapes[0], a["dims"], a["keepdim"])
    mask = E.eq(x, ob).to(x.dtype)
    cnt = sum(mask, a["dims"], keepdim=True)
    ge = _expand_back(g, n.shapes[0], a["dims"], a["keepdim"])
    return (E.div(E.mul(ge, mask), cnt),)


def _check_nonempty(x, dims, op):
    if x.size == 0 and (not dims or builtins.any(x.shape[d] == 0 for d in dims)):
        raise ValueError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")


def _amax_kernel(x, dims, keepdim):
    _check_nonempty(x, dims, "amax")
    return np.amax(x, axis=dims, keepdims=keepdim)


def _amin_kernel(x, dims, keepdim):
    _check_nonempty(x, dims, "amin")
    return np.amin(x, axis=dims, keepdims=keepdim)


AMAX = Primitive("amax", _amax_kernel, vjp=_even_vjp, saves=(0,), saves_out=True,
                 shape_rule=SR.reduce)
AMIN = Primitive("amin", _amin_kernel, vjp=_even_vjp, saves=(0,), saves_out=True,
                 shape_rule=SR.reduce)
MAX_ALL = Primitive("max_all", _amax_kernel, vjp=_even_vjp, saves=(0,), saves_out=True,
                    grad_fn_name="MaxBackward1", shape_rule=SR.reduce)
MIN_ALL = Primitive("min_all", _amin_kernel, vjp=_even_vjp, saves=(0,), saves_out=True,
                    grad_fn_name="MinBackward1", shape_rule=SR.reduce)


def amax(input, dim=(), keepdim=False):
    return dispatch(AMAX, (input,), {"dims": _dims(dim, input.ndim, "amax"), "keepdim": keepdim})


def amin(input, dim=(), keepdim=False):
    return dispatch(AMIN, (input,), {"dims": _dims(dim, input.ndim, "amin"), "keepdim": keepdim})


# ---- max / min along a dim: values get the gradient at the selected index only ----
def _sel_kernel(arg):
    def k(x, dim, keepdim):
        if x.shape and x.shape[dim] == 0 if x.ndim else False:
            raise IndexError("cannot reduce over a zero-size dimension")
        idx = arg(x, axis=dim, keepdims=True) if x.ndim else np.zeros((), np.int64)
        v = np.take_along_axis(x, idx, axis=dim) if x.ndim else x.copy()
        return v if keepdim or not x.ndim else np.squeeze(v, dim)
    return k


def _sel_vjp(arg):
    def vjp(g, ins, out, n):
        x = ins[0]
        a = n.attrs
        if x.ndim == 0:
            return (g,)
        idx = arg(x, a["dim"], keepdim=True)
        from .creation import arange
        from .shape import reshape
        shape = [1] * x.ndim
        shape[a["dim"]] = x.shape[a["dim"]]
        onehot = E.eq(reshape(arange(x.shape[a["dim"]]), shape), idx).to(x.dtype)
        return (E.mul(_expand_back(g, n.shapes[0], (a["dim"],), a["keepdim"]), onehot),)
    return vjp


def _argmax_kernel(x, dim=None, keepdim=False):
    if dim is None:
        r = np.argmax(x.reshape(-1))
        return np.asarray(r).reshape((1,) * x.ndim if keepdim else ())
    return np.argmax(x, axis=dim, keepdims=keepdim) if x.ndim else np.zeros((), np.int64)


def _argmin_kernel(x, dim=None, keepdim=False):
    if dim is None:
        r = np.argmin(x.reshape(-1))
        return np.asarray(r).reshape((1,) * x.ndim if keepdim else ())
    return np.argmin(x, axis=dim, keepdims=keepdim) if x.ndim else np.zeros((), np.int64)


ARGMAX = Primitive("argmax", _argmax_kernel, shape_rule=SR.arg_reduce)
ARGMIN = Primitive("argmin", _argmin_kernel, shape_rule=SR.arg_reduce)


def _argmax(input, dim=None, keepdim=False):
    return dispatch(ARGMAX, (input,), {"dim": _arg_dim(input, dim, "argmax"), "keepdim": keepdim})


def _argmin(input, dim=None, keepdim=False):
    return dispatch(ARGMIN, (input,), {"dim": _arg_dim(input, dim, "argmin"), "keepdim": keepdim})


def _no_bool(input, op):
    """PyTorch's argmax/argmin refuse bool tensors (its max/min(dim) take them)."""
    if input.dtype is D.bool_:
        raise op_error(TracegradRuntimeError, op, f"{op}(): does not support bool input",
                       "Convert first, e.g. `mask.int()`.")


def argmax(input, dim=None, keepdim=False):
    _no_bool(input, "argmax")
    return _argmax(input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    _no_bool(input, "argmin")
    return _argmin(input, dim, keepdim)


def _arg_dim(input, dim, op):
    """The wrapped dim; an empty reduction raises PyTorch's IndexError (numpy: ValueError)."""
    if dim is None:
        if input.numel() == 0:
            raise op_error(TracegradIndexError, op, f"{op}(): Expected reduction dim to be "
                           "specified for input.numel() == 0.", "Pass dim=...")
        return None
    dim = _wrap_dim(dim, input.ndim, op)
    if input.ndim and input.shape[dim] == 0:
        raise op_error(TracegradIndexError, op, f"{op}(): Expected reduction dim {dim} to have "
                       "non-zero size.")
    return dim


MAX_DIM = Primitive("max_dim", _sel_kernel(np.argmax), vjp=_sel_vjp(_argmax), saves=(0,),
                    grad_fn_name="MaxBackward0", shape_rule=SR.reduce_dim)
MIN_DIM = Primitive("min_dim", _sel_kernel(np.argmin), vjp=_sel_vjp(_argmin), saves=(0,),
                    grad_fn_name="MinBackward0", shape_rule=SR.reduce_dim)


class _MinMax(tuple):
    """(values, indices) named tuple like torch.return_types.max."""

    values = property(lambda self: self[0])
    indices = property(lambda self: self[1])

    def __repr__(self):
        return f"torch.return_types.{self._name}(\nvalues={self[0]!r},\nindices={self[1]!r})"


def _minmax(name, all_prim, dim_prim, argf, elementwise):
    def op(input, dim=None, keepdim=False):
        if isinstance(dim, Tensor):
            return elementwise(input, dim)
        if dim is None:
            if input.numel() == 0:
                raise op_error(TracegradRuntimeError, name,
                               f"{name}(): Expected reduction dim to be specified for "
                               "input.numel() == 0. Specify the reduction dim with the 'dim' "
                               "argument.")
            return dispatch(all_prim, (input,), {"dims": tuple(range(input.ndim)),
                                                 "keepdim": False})
        d = _wrap_dim(dim, input.ndim, name)
        vals = dispatch(dim_prim, (input,), {"dim": d, "keepdim": keepdim})
        r = _MinMax((vals, argf(input, d, keepdim)))
        r._name = name
        return r
    op.__name__ = name
    return op


class _MinMax(_MinMax):
    __slots__ = ()
    _name = "max"


max = _minmax("max", MAX_ALL, MAX_DIM, _argmax, E.maximum)
min = _minmax("min", MIN_ALL, MIN_DIM, _argmin, E.minimum)


# ---- norm ----
_DOT_TYPES = (np.dtype(np.float32), np.dtype(np.float64))

def _norm_kernel(x, p, dims, keepdim):
    if p == 2:
        if len(dims) == x.ndim and x.size <= 4096 and x.dtype in _DOT_TYPES:
            # the whole of a small tensor (`y.norm()` in a loop condition): a dot product is
            # one call instead of square, sum and their temporaries; large ones keep the
            # pairwise sum's accuracy
            f = x.ravel()
            r = np.sqrt(f.dot(f))
            return r.reshape((1,) * x.ndim) if keepdim else r
        return np.sqrt(_add_reduce(x * x, axis=dims, keepdims=keepdim))
    ax = np.abs(x)
    if p in (INF, -INF):
        return (np.amax if p > 0 else np.amin)(ax, axis=dims, keepdims=keepdim)
    if p == 0:
        return np.sum(ax != 0, axis=dims, keepdims=keepdim).astype(x.dtype)
    if p == 1:
        return np.sum(ax, axis=dims, keepdims=keepdim)
    with np.errstate(all="ignore"):
        return np.power(np.sum(np.power(ax, p), axis=dims, keepdims=keepdim), 1.0 / p)


def _norm_vjp(g, ins, out, n):
    x = ins[0]
    a = n.attrs
    p = a["p"]
    ge = _expand_back(g, n.shapes[0], a["dims"], a["keepdim"])
    ob = _expand_back(out, n.shapes[0], a["dims"], a["keepdim"])
    if p == 0:
        return (None,)              # a count: PyTorch leaves the gradient undefined
    if p == 1:
        return (E.mul(ge, E.sign(x)),)
    if p in (INF, -INF):            # shared evenly among the elements attaining the norm
        hit = E.eq(E.abs(x), ob).to(x.dtype)
        scale = E.div(E.mul(E.sign(x), hit), sum(hit, a["dims"], keepdim=True))
        return (E.mul(ge, scale),)
    if p == 2:
        scale = E.div(x, ob)
    else:
        scale = E.div(E.mul(x, E.pow(E.abs(x), p - 2)), E.pow(ob, p - 1))
    scale = E.where(E.eq(ob, 0), 0.0, scale)
    return (E.mul(ge, scale),)


NORM = Primitive("norm", E._quiet(_norm_kernel), vjp=_norm_vjp, saves=(0,), saves_out=True,
                 grad_fn_name="LinalgVectorNormBackward0",    # torch.norm runs vector_norm
                 shape_rule=SR.reduce)
INF = float("inf")


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector p-norm over `dim` (all elements by default); p may be 'fro', a number or inf."""
    if not input.is_floating_point():
        raise op_error(TracegradRuntimeError, "norm",
                       f"linalg.vector_norm: Expected a floating point or complex tensor as input."
                       f" Got {_tname(input)}", "Convert first, e.g. `x.float().norm()`.")
    if p == "fro" or p is None:
        p = 2
    dims = _dims(dim, input.ndim, "norm")
    return dispatch(NORM, (input,), {"p": p, "dims": dims, "keepdim": keepdim})


# ---- var / std ----
def _var_kernel(x, dims, correction, keepdim):
    with np.errstate(all="ignore"), _no_dof_warning(x, dims, correction):
        return np.var(x, axis=dims, ddof=correction, keepdims=keepdim)


@contextlib.contextmanager
def _no_dof_warning(x, dims, correction):
    """numpy's "Degrees of freedom <= 0" RuntimeWarning silenced: `var`/`std` give
    PyTorch's UserWarning instead, from Python (`_dof_warning`), so that a compiled call
    replays it on every call on any backend (Note [Warnings replayed])."""
    if _count(x.shape, dims) - correction > 0:
        yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _dof_warning(input, dims, correction, op):
    if _count(input.shape, dims) - correction <= 0:
        warnings.warn(f"{op}(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the reduction factor (input numel divided by output numel).",
                      UserWarning, stacklevel=3)


def _var_vjp(g, ins, out, n):
    x = ins[0]
    a = n.attrs
    cnt = _count(n.shapes[0], a["dims"]) - a["correction"]
    centered = E.sub(x, mean(x, a["dims"], keepdim=True))
    ge = _expand_back(g, n.shapes[0], a["dims"], a["keepdim"])
    return (E.mul(ge, E.mul(centered, 2.0 / cnt if cnt > 0 else float("inf"))),)


def _std_kernel(x, dims, correction, keepdim):
    with np.errstate(all="ignore"), _no_dof_warning(x, dims, correction):
        return np.std(x, axis=dims, ddof=correction, keepdims=keepdim)


def _std_vjp(g, ins, out, n):
    x = ins[0]
    a = n.attrs
    cnt = _count(n.shapes[0], a["dims"]) - a["correction"]
    centered = E.sub(x, mean(x, a["dims"], keepdim=True))
    ob = _expand_back(out, n.shapes[0], a["dims"], a["keepdim"])
    ge = _expand_back(g, n.shapes[0], a["dims"], a["keepdim"])
    return (E.div(E.mul(ge, centered), E.mul(ob, float(cnt))),)


VAR = Primitive("var", _var_kernel, vjp=_var_vjp, saves=(0,), shape_rule=SR.reduce)
STD = Primitive("std", _std_kernel, vjp=_std_vjp, saves=(0,), saves_out=True,
                shape_rule=SR.reduce)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def _check_var_dtype(input, op):
    if not input.is_floating_point():
        raise op_error(TracegradRuntimeError, op,
                       "std and var only support floating point and complex dtypes",
                       f"Convert first, e.g. `x.float().{op}()`.")


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    _check_var_dtype(input, "var")
    if isinstance(unbiased, bool) is False and unbiased is not None and dim is None:
        dim, unbiased = unbiased, None
    dims, correction = _dims(dim, input.ndim, "var"), _correction(unbiased, correction)
    _dof_warning(input, dims, correction, "var")
    return dispatch(VAR, (input,), {"dims": dims, "correction": correction,
                                    "keepdim": keepdim})


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    _check_var_dtype(input, "std")
    if isinstance(unbiased, bool) is False and unbiased is not None and dim is None:
        dim, unbiased = unbiased, None
    dims, correction = _dims(dim, input.ndim, "std"), _correction(unbiased, correction)
    _dof_warning(input, dims, correction, "std")
    return dispatch(STD, (input,), {"dims": dims, "correction": correction,
                                    "keepdim": keepdim})


# ---- logsumexp, softmax, log_softmax ----
def _lse_kernel(x, dims, keepdim):
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=dims, keepdims=keepdim))
    m = np.amax(x, axis=dims, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(all="ignore"):
        r = np.log(np.sum(np.exp(x - m), axis=dims, keepdims=True)) + m
    return r if keepdim else np.squeeze(r, dims)


def _lse_vjp(g, ins, out, n):
    x = ins[0]
    a = n.attrs
    ob = _expand_back(out, n.shapes[0], a["dims"], a["keepdim"])
    ge = _expand_back(g, n.shapes[0], a["dims"], a["keepdim"])
    return (E.mul(ge, E.exp(E.sub(x, ob))),)


LOGSUMEXP = Primitive("logsumexp", _lse_kernel, vjp=_lse_vjp, saves=(0,), saves_out=True,
                      shape_rule=SR.reduce)


def logsumexp(input, dim, keepdim=False):
    if not input.is_floating_point():
        input = input.to(D.get_default_dtype())
    return dispatch(LOGSUMEXP, (input,), {"dims": _dims(dim, input.ndim, "logsumexp"),
                                          "keepdim": keepdim})


def _softmax_kernel(x, dim):
    if x.ndim == 0:                  # one element: 1, but nan for inf or nan (as PyTorch)
        return _softmax_kernel(x.reshape(1), 0).reshape(())
    m = np.amax(x, axis=dim, keepdims=True) if x.size else 0
    with np.errstate(all="ignore"):
        e = np.exp(x - m)
        return e / np.sum(e, axis=dim, keepdims=True)


def _softmax_vjp(g, ins, out, n):
    return (_fused_backward.softmax_backward(g, out, n.attrs["dim"]),)


def _log_softmax_kernel(x, dim):
    if x.ndim == 0:                  # one element: 0, but nan for inf or nan (as PyTorch)
        return _log_softmax_kernel(x.reshape(1), 0).reshape(())
    if x.size == 0:
        return x.copy()
    # ufunc methods directly: ndarray.max/.sum wrappers cost more than the math on small x
    s = np.subtract(x, np.maximum.reduce(x, axis=dim, keepdims=True))
    lse = np.log(_add_reduce(np.exp(s), axis=dim, keepdims=True))
    return np.subtract(s, lse, out=s)


_log_softmax_kernel = E._quiet(_log_softmax_kernel)


def _log_softmax_vjp(g, ins, out, n):
    return (_fused_backward.log_softmax_backward(g, out, n.attrs["dim"]),)


SOFTMAX = Primitive("softmax", _softmax_kernel, vjp=_softmax_vjp, saves_out=True,
                    shape_rule=SR.same)
LOG_SOFTMAX = Primitive("log_softmax", _log_softmax_kernel, vjp=_log_softmax_vjp,
                        saves_out=True, shape_rule=SR.same)


def softmax(input, dim=None, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1     # PyTorch's legacy implicit-dim choice
    _check_float_kernel(input, "softmax_lastdim_kernel_impl")
    return dispatch(SOFTMAX, (input,), {"dim": _wrap_dim(dim, input.ndim, "softmax")})


def log_softmax(input, dim=None, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
    _check_float_kernel(input, "log_softmax_lastdim_kernel_impl")
    return dispatch(LOG_SOFTMAX, (input,), {"dim": _wrap_dim(dim, input.ndim, "log_softmax")})


def _check_float_kernel(input, kernel):
    """PyTorch has no integer kernel for softmax-like ops: NotImplementedError, named."""
    if not input.is_floating_point():
        from .._errors import TracegradNotImplementedError
        raise op_error(TracegradNotImplementedError, kernel.split("_lastdim")[0],
                       f'"{kernel}" not implemented for \'{_tname(input)}\'',
                       "Convert first, e.g. `x.float()`.")


# any/all of a uint8 tensor are uint8 in PyTorch (a leftover of uint8 masks); bool otherwise
def _any_kernel(x, dims, keepdim):
    r = np.any(x, axis=dims, keepdims=keepdim)
    return r.astype(np.uint8) if x.dtype == np.uint8 else r


def _all_kernel(x, dims, keepdim):
    r = np.all(x, axis=dims, keepdims=keepdim)
    return r.astype(np.uint8) if x.dtype == np.uint8 else r


ANY = Primitive("any", _any_kernel, shape_rule=SR.reduce)
ALL = Primitive("all", _all_kernel, shape_rule=SR.reduce)


def any(input, dim=None, keepdim=False):
    """True where any element (along `dim`) is nonzero; never differentiable."""
    return dispatch(ANY, (input,), {"dims": _dims(dim, input.ndim, "any"), "keepdim": keepdim})


def all(input, dim=None, keepdim=False):
    return dispatch(ALL, (input,), {"dims": _dims(dim, input.ndim, "all"), "keepdim": keepdim})


# the fused gradients of softmax and log_softmax (imported last: that module uses this one)
from . import fused_backward as _fused_backward  # noqa: E402
