"""Trigonometric, hyperbolic and base-10 logarithm primitives: `tan asin acos atan sinh cosh
asinh acosh atanh log10` (unary, integers promote to the default float) and `atan2` (binary,
broadcasting, PyTorch's promotion then float).

Each is one primitive on the numpy ufunc, with PyTorch's derivative written in tracegrad ops
(tools/autograd/derivatives.yaml), so higher-order gradients come free:
tan' = 1 + tan^2 (from the result), asin' = rsqrt(1 - x^2), acos' = -rsqrt(1 - x^2),
atan' = 1 / (1 + x^2), sinh' = cosh, cosh' = sinh, asinh' = rsqrt(x^2 + 1),
acosh' = rsqrt(x^2 - 1), atanh' = 1 / (1 - x^2), log10' = 1 / (x ln 10);
atan2(y, x): dy = x / (x^2 + y^2), dx = -y / (x^2 + y^2).
Outside the domain the value is nan (as PyTorch), never a numpy warning.
"""
import math

import numpy as np

from .._dispatch import dispatch
from . import elementwise as E
from . import shape_rules as SR
from .primitive import Primitive, promote_float

__all__ = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log10",
           "atan2", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "arctan2"]


def _sq(x):
    return E.mul(x, x)


def _unary(name, kernel, grad, saves_out=False, grad_fn_name=None):
    """`grad(g, x, out)` is the input's gradient."""
    def vjp(g, ins, out, n):
        return (grad(g, ins[0] if ins else None, out),)
    return E._unary(name, E._quiet(kernel), vjp, saves=() if saves_out else (0,),
                    saves_out=saves_out, grad_fn_name=grad_fn_name)


TAN = _unary("tan", np.tan, lambda g, x, o: E.mul(g, E.add(_sq(o), 1.0)), saves_out=True)
ASIN = _unary("asin", np.arcsin, lambda g, x, o: E.mul(g, E.rsqrt(E.rsub(_sq(x), 1.0))))
ACOS = _unary("acos", np.arccos,
              lambda g, x, o: E.mul(g, E.neg(E.rsqrt(E.rsub(_sq(x), 1.0)))))
ATAN = _unary("atan", np.arctan, lambda g, x, o: E.div(g, E.add(_sq(x), 1.0)))
SINH = _unary("sinh", np.sinh, lambda g, x, o: E.mul(g, cosh(x)))
COSH = _unary("cosh", np.cosh, lambda g, x, o: E.mul(g, sinh(x)))
ASINH = _unary("asinh", np.arcsinh, lambda g, x, o: E.mul(g, E.rsqrt(E.add(_sq(x), 1.0))))
ACOSH = _unary("acosh", np.arccosh, lambda g, x, o: E.mul(g, E.rsqrt(E.sub(_sq(x), 1.0))))
ATANH = _unary("atanh", np.arctanh, lambda g, x, o: E.div(g, E.rsub(_sq(x), 1.0)))
LOG10 = _unary("log10", np.log10, lambda g, x, o: E.div(g, E.mul(x, math.log(10.0))),
               grad_fn_name="Log10Backward0")


def _atan2_vjp(g, ins, out, n):
    y, x = ins
    a, b = n.needs
    recip = E.reciprocal(E.add(_sq(y), _sq(x)))
    gy = E._st(E.mul(E.mul(g, x), recip), n.shapes[0]) if a else None
    gx = E._st(E.mul(E.mul(g, E.neg(y)), recip), n.shapes[1]) if b else None
    return (gy, gx)


ATAN2 = Primitive("atan2", E._quiet(np.arctan2), vjp=_atan2_vjp, saves=(0, 1),
                  shape_rule=SR.broadcast, dtype_rule=promote_float, elementwise=True,
                  doc="the angle of the point (other, input), in (-pi, pi]")


def _op(prim):
    def op(input):
        return dispatch(prim, (input,))
    op.__name__ = prim.name
    op.__doc__ = (f"Elementwise `{prim.name}` (PyTorch semantics; integers give the default "
                  f"float; differentiable).")
    return op


tan, asin, acos, atan = _op(TAN), _op(ASIN), _op(ACOS), _op(ATAN)
sinh, cosh, asinh, acosh, atanh = _op(SINH), _op(COSH), _op(ASINH), _op(ACOSH), _op(ATANH)
log10 = _op(LOG10)


def atan2(input, other):
    """Elementwise angle of `(other, input)` (`input` is y), broadcasting both.

    >>> atan2(tensor([1.]), tensor([-1.]))
    tensor([2.3562])
    """
    return dispatch(ATAN2, (input, other))


arcsin, arccos, arctan, arctan2 = asin, acos, atan, atan2
arcsinh, arccosh, arctanh = asinh, acosh, atanh
