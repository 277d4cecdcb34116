"""Elementwise math PyTorch has and tracegrad lacked: `hypot copysign heaviside gcd lcm
float_power frexp ldexp nextafter signbit deg2rad rad2deg` and their in-place forms.

Primitives where numpy has the function and a composite would differ: `signbit` (the sign
bit of -0.0 and -nan), `gcd`/`lcm` (integers, never differentiable), `nextafter` (its
gradient is PyTorch's: `grad` to input, zero to other), `heaviside` (PyTorch records a node
whose backward refuses to run) and frexp's exponent. The rest compose existing ops, so their
gradients are PyTorch's formulas: hypot' = x / hypot, copysign' = result / input (0 at 0),
frexp's mantissa' = 1 / 2^exponent, ldexp = input * 2^other, float_power = pow in float64.
Dtype rules and error types follow PyTorch 2.13.
"""
import math

import numpy as np

from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import (TracegradNotImplementedError, TracegradRuntimeError, TracegradTypeError,
                       op_error)
from .._tensor import Tensor
from . import elementwise as E
from . import shape as S
from . import shape_rules as SR
from .primitive import Primitive, inplace_of, promote, promote_float

__all__ = ["hypot", "copysign", "heaviside", "gcd", "gcd_", "lcm", "lcm_", "float_power",
           "frexp", "ldexp", "ldexp_", "nextafter", "signbit", "deg2rad", "deg2rad_",
           "rad2deg", "rad2deg_"]


def in_place(op, input, fn, *args, **kwargs):
    """`fn(input, *args)` written into `input` (write_result's cast and shape rules). The
    result is computed from a clone when `input` requires grad: its gradient may read the
    old values, which the write overwrites (PyTorch's in-place ops keep them too)."""
    from .composite_missing import write_result
    src = S.clone(input) if input.requires_grad else input
    return write_result(op, input, fn(src, *args, **kwargs))


def _not_implemented(op, dt):
    return op_error(TracegradNotImplementedError, op, f'"{op}_cpu" not implemented for '
                    f"'{D.scalar_type_name(dt)}'")


def _signbit_kernel(x):
    return np.signbit(x.astype(np.int8) if x.dtype == np.bool_ else x)


SIGNBIT = Primitive("signbit", _signbit_kernel, nondiff=True, shape_rule=SR.same,
                    elementwise=True, doc="True where the sign bit is set (-0.0 and -nan too)")


def _int_kernel(name, fn):
    def kernel(x, y):
        if x.dtype.kind not in "iu":
            raise _not_implemented(name, D.from_numpy_dtype(x.dtype))
        return fn(x, y)
    return kernel


GCD = Primitive("gcd", _int_kernel("gcd", np.gcd), dtype_rule=promote, nondiff=True,
                shape_rule=SR.broadcast, elementwise=True)
LCM = Primitive("lcm", _int_kernel("lcm", np.lcm), dtype_rule=promote, nondiff=True,
                shape_rule=SR.broadcast, elementwise=True)
GCD_, LCM_ = inplace_of(GCD), inplace_of(LCM)


def _nextafter_kernel(x, y):
    if x.dtype.kind != "f":
        raise _not_implemented("nextafter", D.from_numpy_dtype(x.dtype))
    return np.nextafter(x, y)


def _nextafter_vjp(g, ins, out, n):
    from .creation import zeros
    a, b = n.needs
    return (E._st(g, n.shapes[0]) if a else None,
            zeros(n.shapes[1], dtype=g.dtype) if b else None)


NEXTAFTER = Primitive("nextafter", _nextafter_kernel, vjp=_nextafter_vjp, dtype_rule=promote,
                      shape_rule=SR.broadcast, elementwise=True)
NEXTAFTER_ = inplace_of(NEXTAFTER)


def _heaviside_kernel(x, v):
    return np.where(x == 0, v, x > 0).astype(np.result_type(x, v))


def _heaviside_vjp(g, ins, out, n):
    # PyTorch records a node (the result requires grad) whose backward refuses to run
    raise op_error(TracegradRuntimeError, "heaviside", "derivative for aten::heaviside is not "
                   "implemented")


HEAVISIDE = Primitive("heaviside", _heaviside_kernel, vjp=_heaviside_vjp,
                      shape_rule=SR.broadcast, grad_fn_name="NotImplemented", elementwise=True)
HEAVISIDE_ = inplace_of(HEAVISIDE, grad_fn_name="NotImplemented")


def _copysign_vjp(g, ins, out, n):
    """PyTorch's: input gets grad * result / input (0 where input is 0), other zero."""
    from .creation import zeros
    x = ins[0]
    a, b = n.needs
    gx = None
    if a:
        ratio = E.where(E.eq(x, 0), 0.0, E.div(out, x))
        gx = E._st(E.mul(g, ratio), n.shapes[0])
    return (gx, zeros(n.shapes[1], dtype=g.dtype) if b and n.shapes[1] is not None else None)


COPYSIGN = Primitive("copysign", np.copysign, vjp=_copysign_vjp, saves=(0,), saves_out=True,
                     dtype_rule=promote_float, shape_rule=SR.broadcast, elementwise=True)
COPYSIGN_ = inplace_of(COPYSIGN)


def _frexp_exponent_kernel(x):
    return np.frexp(x)[1].astype(np.int32)


FREXP_EXPONENT = Primitive("frexp_exponent", _frexp_exponent_kernel, nondiff=True,
                           shape_rule=SR.same, doc="the exponent of frexp, as int32")


def signbit(input):
    """True where `input`'s sign bit is set (negative numbers, -0.0, -nan).

    >>> signbit(tensor([-0.0, 0.0, -1.0]))
    tensor([ True, False,  True])
    """
    return dispatch(SIGNBIT, (input,))


def gcd(input, other):
    """Greatest common divisor of integers (non-negative; gcd(0, 0) = 0)."""
    return dispatch(GCD, (input, other))


def lcm(input, other):
    """Least common multiple of integers (non-negative)."""
    return dispatch(LCM, (input, other))


def gcd_(input, other):
    """`gcd` in place."""
    return dispatch(GCD_, (input, other))


def lcm_(input, other):
    """`lcm` in place."""
    return dispatch(LCM_, (input, other))


def nextafter(input, other):
    """The next floating-point value after `input` towards `other`."""
    return dispatch(NEXTAFTER, (input, other))


def nextafter_(input, other):
    """`nextafter` in place."""
    return dispatch(NEXTAFTER_, (input, other))


def _heaviside_check(input, values):
    def dt(x):                               # (numpy arrays are tensor operands too)
        return x.dtype if isinstance(x, Tensor) else D.from_numpy_dtype(np.asarray(x).dtype)
    if dt(input) is not dt(values):
        raise op_error(TracegradRuntimeError, "heaviside", "heaviside is not yet implemented "
                       "for tensors with different dtypes.")


def heaviside(input, values):
    """0 where input < 0, `values` where input == 0, 1 where input > 0 (same dtypes).

    >>> heaviside(tensor([-1.5, 0.0, 2.0]), tensor(0.5))
    tensor([0.0000, 0.5000, 1.0000])
    """
    _heaviside_check(input, values)
    return dispatch(HEAVISIDE, (input, values))


def heaviside_(input, values):
    """`heaviside` in place."""
    _heaviside_check(input, values)
    return dispatch(HEAVISIDE_, (input, values))


def _float_dtype(op, *args):
    dt = D.from_numpy_dtype(promote(args))
    return dt if dt.is_floating_point else D.get_default_dtype()


def hypot(input, other):
    """sqrt(input^2 + other^2) elementwise (floating tensors; broadcasting).

    >>> hypot(tensor([3.0]), tensor([4.0]))
    tensor([5.])
    """
    dt = D.from_numpy_dtype(promote((input, other)))
    if not dt.is_floating_point:
        raise _not_implemented("hypot", dt)
    x, y = input.to(dt), other.to(dt)
    return E.sqrt(E.add(E.mul(x, x), E.mul(y, y)))


def copysign(input, other):
    """`input`'s magnitude with `other`'s sign (its sign bit: -0.0 counts); a float result.

    >>> copysign(tensor([1.0, -2.0]), tensor([-0.0, 3.0]))
    tensor([-1.,  2.])
    """
    if not isinstance(input, Tensor):
        raise TracegradTypeError("copysign(): argument 'input' (position 1) must be Tensor, "
                                 f"not {type(input).__name__}")
    return dispatch(COPYSIGN, (input, other))


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2^exponent, |mantissa| in [0.5, 1);
    exponent int32. Floating tensors only."""
    from .return_types import named
    if not input.dtype.is_floating_point:
        raise op_error(TracegradRuntimeError, "frexp", "torch.frexp() only supports "
                       "floating-point dtypes")
    e = dispatch(FREXP_EXPONENT, (input,))
    # a power of two divides exactly: the mantissa numpy gives, and PyTorch's gradient
    m = E.div(input, E.pow(2.0, e.to(input.dtype)))
    return named("frexp", ("mantissa", "exponent"), (m, e))


def ldexp(input, other):
    """`input * 2 ** other` (a float result)."""
    return E.mul(input, E.pow(2.0, other))


def ldexp_(input, other):
    """`ldexp` in place."""
    return in_place("ldexp_", input, ldexp, other)


def float_power(input, exponent):
    """`input ** exponent` computed in float64 (the result is float64)."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TracegradTypeError("float_power(): argument 'input' (position 1) must be Tensor, "
                                 f"not {type(input).__name__}")
    b = input.to(D.float64) if isinstance(input, Tensor) else float(input)
    e = exponent.to(D.float64) if isinstance(exponent, Tensor) else float(exponent)
    return E.pow(b, e)


def float_power_(input, exponent):
    """`float_power` in place: input must already be float64."""
    if input.dtype is not D.float64:
        raise op_error(TracegradRuntimeError, "float_power_", "the base given to float_power_ "
                       f"has dtype {D.scalar_type_name(input.dtype)} but the operation's result "
                       "requires dtype Double")
    return in_place("float_power_", input, float_power, exponent)


def _scale(op, input, factor):
    x = input if input.dtype.is_floating_point else input.to(D.get_default_dtype())
    return E.mul(x, factor)


def deg2rad(input):
    """Degrees to radians (integers give the default float)."""
    return _scale("deg2rad", input, math.pi / 180.0)


def rad2deg(input):
    """Radians to degrees (integers give the default float)."""
    return _scale("rad2deg", input, 180.0 / math.pi)


def deg2rad_(input):
    """`deg2rad` in place (floating tensors)."""
    return in_place("deg2rad_", input, deg2rad)


def rad2deg_(input):
    """`rad2deg` in place (floating tensors)."""
    return in_place("rad2deg_", input, rad2deg)


def hypot_(input, other):
    """`hypot` in place."""
    return in_place("hypot_", input, hypot, other)


def copysign_(input, other):
    """`copysign` in place."""
    return dispatch(COPYSIGN_, (input, other))
