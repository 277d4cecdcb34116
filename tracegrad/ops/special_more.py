"""The rest of `torch.special` that needs its own primitive or a careful composite:
`entr`, `xlog1py`, `ndtri`, `log_ndtr`, `sinc` (primitives, PyTorch's grad_fn names and
derivatives) and `ndtr`, `exp2` (composites, as PyTorch composes ndtr too).

Derivatives (tools/autograd/derivatives.yaml), in tracegrad ops:
entr' = -(1 + log x) (inf at 0, nan below, as PyTorch);
xlog1py: d/dx = xlog1py(g, y), 0 where x == 0 and y <= -1; d/dy = g x / (1 + y);
ndtri' = sqrt(2 pi) exp(ndtri(p)^2 / 2); log_ndtr' = exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi);
sinc' = (cos(pi x) - sinc(x)) / x, 0 at x == 0.
"""
import math

import numpy as np

from .._dispatch import dispatch
from .._tensor import Tensor
from . import elementwise as E
from . import shape_rules as SR
from . import special_kernels_erf as K
from .primitive import Primitive, overload_of, promote_float

__all__ = ["entr", "xlog1py", "ndtr", "ndtri", "log_ndtr", "sinc", "exp2"]


def _entr_kernel(x):
    with np.errstate(all="ignore"):
        r = -x * np.log(x)
    r = np.where(x == 0, np.zeros((), r.dtype), r)
    return np.where(x < 0, np.asarray(-np.inf, r.dtype), r)


def _entr_vjp(g, ins, out, n):
    return (E.mul(g, E.neg(E.add(E.log(ins[0]), 1.0))),)


ENTR = E._unary("entr", E._quiet(_entr_kernel), _entr_vjp, saves=(0,),
                grad_fn_name="SpecialEntrBackward0")


_xlog1py_kernel = E._x_times_log(np.log1p)


def _xlog1py_vjp(g, ins, out, n):
    x, y = ins
    a, b = n.needs
    gx = gy = None
    if a:
        gx = xlog1py(g, y)
        gx = E._st(E.where(E.logical_and(E.eq(x, 0), E.le(y, -1)), 0.0, gx), n.shapes[0])
    if b:
        gy = E._st(E.div(E.mul(g, x), E.add(y, 1.0)), n.shapes[1])
    return gx, gy


XLOG1PY = Primitive("xlog1py", E._quiet(_xlog1py_kernel), vjp=_xlog1py_vjp, saves=(0, 1),
                    dtype_rule=promote_float, shape_rule=SR.broadcast,
                    grad_fn_name="SpecialXlog1PyBackward0")
XLOG1PY_SCALAR_SELF = overload_of(XLOG1PY, "xlog1py_scalar_self", "SpecialXlog1PyBackward1")
XLOG1PY_SCALAR_OTHER = overload_of(XLOG1PY, "xlog1py_scalar_other", "SpecialXlog1PyBackward2")


def _ndtri_vjp(g, ins, out, n):
    return (E.mul(g, E.mul(E.exp(E.mul(E.mul(out, out), 0.5)), math.sqrt(2.0 * math.pi))),)


def _log_ndtr_vjp(g, ins, out, n):
    x = ins[0]
    e = E.exp(E.neg(E.add(E.mul(E.mul(x, x), 0.5), out)))
    return (E.mul(g, E.mul(e, 1.0 / math.sqrt(2.0 * math.pi))),)


def _ndtri_kernel(x):
    return K.ndtri(x)


def _log_ndtr_kernel(x):
    return K.log_ndtr(x)


NDTRI = E._unary("ndtri", E._quiet(_ndtri_kernel), _ndtri_vjp, saves_out=True,
                 grad_fn_name="SpecialNdtriBackward0")
LOG_NDTR = E._unary("log_ndtr", E._quiet(_log_ndtr_kernel), _log_ndtr_vjp, saves=(0,),
                    saves_out=True, grad_fn_name="SpecialLogNdtrBackward0")


def _sinc_kernel(x):
    px = np.pi * np.where(x == 0, np.ones((), x.dtype), x)
    return np.where(x == 0, np.ones((), x.dtype), np.sin(px) / px).astype(x.dtype, copy=False)


def _sinc_vjp(g, ins, out, n):
    x = ins[0]
    zero = E.eq(x, 0)
    xs = E.where(zero, 1.0, x)
    d = E.div(E.sub(E.cos(E.mul(xs, math.pi)), out), xs)
    return (E.mul(g, E.where(zero, 0.0, d)),)


SINC = E._unary("sinc", E._quiet(_sinc_kernel), _sinc_vjp, saves=(0,), saves_out=True)


def entr(input):
    """Elementwise entropy term `-x log x`: 0 at 0, -inf for x < 0.

    >>> entr(tensor([0., 0.5]))
    tensor([0.0000, 0.3466])
    """
    return dispatch(ENTR, (input,))


def xlog1py(input, other):
    """`input * log1p(other)`, and 0 where `input` is 0 (unless `other` is nan).

    >>> xlog1py(tensor([0., 2.]), tensor([-1., 1.]))
    tensor([0.0000, 1.3863])
    """
    prim = (XLOG1PY if isinstance(input, Tensor) and isinstance(other, Tensor) else
            XLOG1PY_SCALAR_OTHER if isinstance(input, Tensor) else XLOG1PY_SCALAR_SELF)
    return dispatch(prim, (input, other))


def ndtr(input):
    """The standard normal CDF, `(1 + erf(x / sqrt 2)) / 2`, via erfc (accurate tails).

    >>> ndtr(tensor([0.]))
    tensor([0.5000])
    """
    from .special_prim import erfc
    return E.mul(erfc(E.mul(input, -math.sqrt(0.5))), 0.5)


def ndtri(input):
    """The inverse of the standard normal CDF: -inf at 0, +inf at 1, nan outside [0, 1].

    >>> ndtri(tensor([0.5, 0.975]))
    tensor([0.0000, 1.9600])
    """
    return dispatch(NDTRI, (input,))


def log_ndtr(input):
    """log of the standard normal CDF, accurate far into the left tail.

    >>> log_ndtr(tensor([-40.]))
    tensor([-804.6084])
    """
    return dispatch(LOG_NDTR, (input,))


def sinc(input):
    """The normalised sinc `sin(pi x) / (pi x)`, 1 at 0.

    >>> sinc(tensor([0., 0.5]))
    tensor([1.0000, 0.6366])
    """
    return dispatch(SINC, (input,))


def exp2(input):
    """`2 ** input` elementwise (integers give the default float).

    >>> exp2(tensor([3.]))
    tensor([8.])
    """
    if isinstance(input, Tensor) and not input.is_floating_point():
        from .. import _dtype as D
        input = input.to(D.get_default_dtype())
    return E.pow(2.0, input)


def sinc_(self):
    """In-place `sinc` (bumps `_version`)."""
    return dispatch(SINC_, (self,))


from .primitive import inplace_of  # noqa: E402
SINC_ = inplace_of(SINC)
