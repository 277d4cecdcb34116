"""Special-function primitives: `lgamma digamma polygamma erfc erfinv` (unary, integers
promote to the default float as in PyTorch), their in-place variants, and `mvlgamma`
(a composite of lgamma).

Kernels are in ops/special_kernels.py. PyTorch's derivatives (tools/autograd/derivatives.yaml)
are written in tracegrad ops, so gradients of any order come free:
lgamma' = digamma, digamma' = polygamma(1, x), polygamma(n)' = polygamma(n + 1, x),
erfc' = -2/sqrt(pi) exp(-x^2), erfinv' = sqrt(pi)/2 exp(erfinv(x)^2) (from the result).
"""
import math

import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradRuntimeError
from . import elementwise as E
from . import special_kernels as K
from . import special_kernels_erf as KE
from .primitive import inplace_of

__all__ = ["lgamma", "digamma", "polygamma", "erfc", "erfinv", "mvlgamma"]


def _kernel(f):
    def k(x, **attrs):
        return f(x, **attrs)
    k.__name__ = f.__name__
    return E._quiet(k)      # overflow to inf in the final cast is PyTorch's value, silently


def _lgamma_vjp(g, ins, out, n):
    return (E.mul(g, digamma(ins[0])),)


def _digamma_vjp(g, ins, out, n):
    return (E.mul(g, polygamma(1, ins[0])),)


def _polygamma_vjp(g, ins, out, n):
    return (E.mul(g, polygamma(n.attrs["n"] + 1, ins[0])),)


def _erfc_vjp(g, ins, out, n):
    x = ins[0]
    return (E.mul(g, E.mul(E.exp(E.neg(E.mul(x, x))), -2.0 / math.sqrt(math.pi))),)


def _erfinv_vjp(g, ins, out, n):
    return (E.mul(g, E.mul(E.exp(E.mul(out, out)), math.sqrt(math.pi) / 2.0)),)


LGAMMA = E._unary("lgamma", _kernel(K.lgamma), _lgamma_vjp, saves=(0,))
DIGAMMA = E._unary("digamma", _kernel(K.digamma), _digamma_vjp, saves=(0,))
def _polygamma_kernel(x, n):
    return K.polygamma(n, x)


POLYGAMMA = E._unary("polygamma", _kernel(_polygamma_kernel), _polygamma_vjp, saves=(0,))
ERFC = E._unary("erfc", _kernel(KE.erfc), _erfc_vjp, saves=(0,))
ERFINV = E._unary("erfinv", _kernel(KE.erfinv), _erfinv_vjp, saves_out=True)
LGAMMA_, DIGAMMA_, POLYGAMMA_ = inplace_of(LGAMMA), inplace_of(DIGAMMA), inplace_of(POLYGAMMA)
ERFC_, ERFINV_, ERF_ = inplace_of(ERFC), inplace_of(ERFINV), inplace_of(E.ERF)


def lgamma(input):
    """log |Gamma(input)| elementwise; +inf at 0 and the negative integers.

    >>> lgamma(tensor([0.5, 3.]))
    tensor([0.5724, 0.6931])
    """
    return dispatch(LGAMMA, (input,))


def digamma(input):
    """The logarithmic derivative of Gamma; -inf at +0, nan at the negative integers.

    >>> digamma(tensor([1.]))
    tensor([-0.5772])
    """
    return dispatch(DIGAMMA, (input,))


def _check_n(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise TracegradRuntimeError("polygamma(n, x) does not support negative n.")
    return int(n)


def polygamma(n, input):
    """The n-th derivative of digamma (n = 0 is digamma), elementwise.

    >>> polygamma(1, tensor([1.]))
    tensor([1.6449])
    """
    return dispatch(POLYGAMMA, (input,), {"n": _check_n(n)})


def erfc(input):
    """The complementary error function `1 - erf(x)`, accurate where erf is near 1.

    >>> erfc(tensor([0., 3.]))
    tensor([1.0000e+00, 2.2090e-05])
    """
    return dispatch(ERFC, (input,))


def erfinv(input):
    """The inverse error function on (-1, 1); +-inf at +-1, nan outside.

    >>> erfinv(tensor([0., 0.5]))
    tensor([0.0000, 0.4769])
    """
    return dispatch(ERFINV, (input,))


def mvlgamma(input, p):
    """The multivariate log-gamma of dimension `p`, elementwise.

    `p (p - 1) / 4 log(pi) + sum_{j < p} lgamma(input - j / 2)` (integers promote to float;
    like PyTorch 2.x, no domain check: +inf where an lgamma term is at a pole).

    >>> mvlgamma(tensor([2.5]), 2)
    tensor([0.8570])
    """
    from .reduction import sum as _sum
    from .shape import stack
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1:
        raise TracegradRuntimeError("p has to be greater than or equal to 1")
    terms = stack([lgamma(E.sub(input, j / 2.0) if j else input) for j in range(int(p))],
                  dim=-1)
    return E.add(_sum(terms, dim=-1), p * (p - 1) / 4.0 * math.log(math.pi))


# ---- Tensor methods (attached by _tensor_methods.py) ----

def _inplace(prim):
    def method(self):
        return dispatch(prim, (self,))
    method.__name__ = prim.name
    method.__doc__ = f"In-place `{prim.functional.name}` (bumps `_version`)."
    return method


lgamma_, digamma_, erfc_, erfinv_, erf_ = (_inplace(LGAMMA_), _inplace(DIGAMMA_), _inplace(ERFC_),
                                           _inplace(ERFINV_), _inplace(ERF_))


def polygamma_method(self, n):
    """`x.polygamma(n)` is `polygamma(n, x)`."""
    return polygamma(n, self)


def polygamma_(self, n):
    """In-place `polygamma(n, self)` (bumps `_version`)."""
    return dispatch(POLYGAMMA_, (self,), {"n": _check_n(n)})


def mvlgamma_(self, p):
    """In-place `mvlgamma(self, p)` (bumps `_version`)."""
    return self.copy_(mvlgamma(self, p))
