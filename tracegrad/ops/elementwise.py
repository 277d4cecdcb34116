"""Elementwise primitives: arithmetic, unary math, comparisons and logical ops.

Each declaration carries its kernel, dtype rule and VJP (written with tracegrad ops, so
higher-order gradients come free). Gradients of broadcast operands are reduced with
`sum_to`, the single unbroadcast helper.
"""
import math

import numpy as np

from .._dispatch import dispatch
from .._dtype import get_default_dtype, scalar_type_name, wrap_int
from .._dtype import python_number as _python_number
from .._tensor import Tensor
from . import shape_rules as SR
from .primitive import Primitive, inplace_of, overload_of, promote, promote_float, promote_tail




# Note [Quiet kernels] is in _quiet.py: the warnings switch shared by kernels, dispatch and
# generated programs.
from .._quiet import quiet_kernel as _quiet


def _st(g, shape):
    if g._data.shape == shape:       # not `g.shape`: VJPs run per op, skip building a Size
        return g
    from .shape import sum_to
    return sum_to(g, shape)


# ---------------- binary arithmetic ----------------

def _add_vjp(g, ins, out, n):
    a, b = n.needs
    return (_st(g, n.shapes[0]) if a else None, _st(g, n.shapes[1]) if b else None)


def _sub_vjp(g, ins, out, n):
    a, b = n.needs
    return (_st(g, n.shapes[0]) if a else None, _st(neg(g), n.shapes[1]) if b else None)


def _mul_vjp(g, ins, out, n):
    x, y = ins
    a, b = n.needs
    return (_st(mul(g, y), n.shapes[0]) if a else None, _st(mul(g, x), n.shapes[1]) if b else None)


def _div_vjp(g, ins, out, n):
    x, y = ins
    a, b = n.needs
    gx = div(g, y)
    return (_st(gx, n.shapes[0]) if a else None,
            _st(neg(mul(gx, div(x, y))), n.shapes[1]) if b else None)


def _pow_vjp(g, ins, out, n):
    x, y = ins
    a, b = n.needs
    gx = gy = None
    if a:
        if isinstance(y, (int, float)):
            gx = mul(g, y * pow(x, y - 1)) if y != 0 else mul(g, 0.0)
        else:
            gx = _st(mul(g, mul(y, pow(x, sub(y, 1)))), n.shapes[0])
    if b:
        out = pow(x, y)
        # log in the result dtype: an integer base must not be logged in float32
        if isinstance(x, np.ndarray):
            x = Tensor._wrap(x)
        lx = log(x.to(out.dtype)) if not isinstance(x, (int, float)) else float(
            np.log(x)) if x > 0 else (
            float("-inf") if x == 0 else float("nan"))
        t = mul(g, mul(out, lx))
        if not isinstance(x, (int, float)):
            t = where(logical_and(eq(x, 0), ge(y, 0)), 0.0, t)
        elif x == 0:
            t = where(ge(y, 0), 0.0, t)
        gy = _st(t, n.shapes[1])
    return (gx, gy)


def _minmax_vjp(cmp):
    def vjp(g, ins, out, n):
        x, y = ins
        a, b = n.needs
        win = cmp(x, y)
        tie = eq(x, y)
        half = mul(g, 0.5)
        gx = where(win, g, where(tie, half, 0.0))
        gy = where(win, 0.0, where(tie, half, g))
        return (_st(gx, n.shapes[0]) if a else None, _st(gy, n.shapes[1]) if b else None)
    return vjp


def _rem_vjp(g, ins, out, n):
    x, y = ins
    a, b = n.needs
    gy = None
    if b:
        gy = _st(neg(mul(g, floor(div(x, y)))), n.shapes[1])
    return (_st(g, n.shapes[0]) if a else None, gy)


def _int_zero_check(op, f):
    """Integer division by zero raises, as in PyTorch (floats give inf/nan)."""
    def k(x, y):
        if np.result_type(x, y).kind in "iub" and np.any(np.asarray(y) == 0):
            raise _err(op, "ZeroDivisionError")
        return f(x, y)
    return k


def _floor_div(x, y):
    return np.floor_divide(x, y)


def _remainder(x, y):
    """Python's `%` (the divisor's sign), as PyTorch computes it: from C's `fmod`, so a zero
    result keeps the dividend's sign (`-3.0 % 3` is -0.0, `6.0 % -3` is 0.0), where numpy
    gives zero the divisor's sign (JAX agrees with PyTorch)."""
    r = np.mod(x, y)
    if r.dtype.kind == "f":
        zero = r == 0
        if zero.any():
            r = np.where(zero, np.copysign(r, np.asarray(x, dtype=r.dtype)), r)
    return r


def _no_bool_subtraction(op):
    """Promotion that refuses bool tensors, as PyTorch does (`1 - mask` is a bug magnet)."""
    def rule(args):
        n = sum(1 for a in args if type(a) is bool     # not np.True_: a float to PyTorch
                or not isinstance(a, np.generic)
                and getattr(getattr(a, "_data", a), "dtype", None) == np.bool_)
        if n == 2:
            raise _err(op, "Subtraction, the `-` operator, with two bool tensors is not "
                       "supported. Use the `^` or `logical_xor()` operator instead.")
        if n:
            raise _err(op, "Subtraction, the `-` operator, with a bool tensor is not "
                       "supported. If you are trying to invert a mask, use the `~` or "
                       "`logical_not()` operator instead.")
        return promote(args)
    rule.keeps_float = True          # float operands take dispatch's fast path, never this
    return rule


ADD = Primitive("add", _quiet(np.add), vjp=_add_vjp, dtype_rule=promote, shape_rule=SR.broadcast)
SUB = Primitive("sub", _quiet(np.subtract), vjp=_sub_vjp, dtype_rule=_no_bool_subtraction("sub"),
                shape_rule=SR.broadcast)
# each operand's gradient reads the other (PyTorch saves only what will be read)
MUL = Primitive("mul", _quiet(np.multiply), vjp=_mul_vjp, saves_for={0: (1,), 1: (0,)},
                dtype_rule=promote, shape_rule=SR.broadcast)
DIV = Primitive("div", _quiet(np.true_divide), vjp=_div_vjp, saves_for={0: (1,), 1: (0, 1)},
                dtype_rule=promote_float, shape_rule=SR.broadcast)
def _power(x, y, out=None):
    """Note [Scalar powers]
    `np.power` on arrays may run a vectorised pow that differs from the C library's `pow`
    in the last bit (numpy 2 on AVX-512: ~5% of float64 operands), while Python's `**` on
    floats, numpy's float64 scalars and PyTorch's CPU kernels call `pow`. An optimizer's
    bias correction `beta1 ** step` is Python arithmetic eagerly and 0-d float64 tensors
    in a compiled step (runtime hyper-parameters), so 0-d float64 powers are computed on
    numpy scalars: the compiled step then rounds as eager does."""
    if out is None and not np.ndim(x) and not np.ndim(y):
        r = np.power(x, y)
        if r.dtype == np.float64:
            return np.asarray(np.float64(x) ** np.float64(y))
        return r
    return np.power(x, y) if out is None else np.power(x, y, out=out)


_power.accepts_out = True
POW = Primitive("pow", _quiet(_power), vjp=_pow_vjp, saves=(0, 1), dtype_rule=promote,
                shape_rule=SR.broadcast, may_raise="integer")   # integers to negative powers


def _power_tensor(x, y, out=None):
    """`_power` with a tensor exponent. PyTorch refuses negative integer powers only for a
    Python exponent (`t ** -1`); with a tensor exponent an integer power is computed as
    integer division would: 1 for base 1, +-1 for base -1 (by the exponent's parity), 0 for
    any other base (0 included). numpy refuses them all."""
    if np.asarray(y).dtype.kind not in "iu" or np.asarray(x).dtype.kind not in "iu":
        return _power(x, y, out)
    neg = np.less(y, 0)
    if not neg.any():
        return _power(x, y, out)
    r = np.power(x, np.where(neg, 0, y))
    odd = np.where(np.remainder(y, 2) == 0, 1, -1)
    r = np.where(neg, np.where(x == 1, 1, np.where(x == -1, odd, 0)), r).astype(r.dtype)
    if out is None:
        return r
    np.copyto(out, r, casting="unsafe")
    return out


_power_tensor.accepts_out = True
_quiet_power_tensor = _quiet(_power_tensor)
POW_TENSOR = overload_of(POW, "pow_tensor", "PowBackward1",              # tensor ** tensor
                         kernel=_quiet_power_tensor)
POW_SCALAR_BASE = overload_of(POW, "pow_scalar_base", "PowBackward2",    # number ** tensor
                              kernel=_quiet_power_tensor)


def _rsub_vjp(g, ins, out, n):
    a, b = n.needs
    return (_st(neg(g), n.shapes[0]) if a else None, _st(g, n.shapes[1]) if b else None)


RSUB = Primitive("rsub", _quiet(lambda x, y: np.subtract(y, x)), vjp=_rsub_vjp,
                 dtype_rule=_no_bool_subtraction("rsub"), shape_rule=SR.broadcast,
                 grad_fn_name="RsubBackward1", doc="`other - input` (Python's `2 - x`)")
def _floor_divide_vjp(g, ins, out, n):
    # PyTorch records a node (the result requires grad) whose backward refuses to run.
    raise _err("floor_divide", "derivative for aten::floor_divide is not implemented")


FLOOR_DIVIDE = Primitive("floor_divide", _int_zero_check("floor_divide", _quiet(_floor_div)),
                         vjp=_floor_divide_vjp, shape_rule=SR.broadcast,
                         dtype_rule=promote, grad_fn_name="NotImplemented", may_raise="integer")


def _trunc_div(x, y):
    """Division rounded toward zero; exact for integers (no float round trip)."""
    if np.result_type(x, y).kind in "iub":
        q = np.floor_divide(x, y)
        return np.where((np.subtract(x, np.multiply(q, y)) != 0) & (q < 0), q + 1, q)
    return np.trunc(np.true_divide(x, y))


def _rounded_div_vjp(g, ins, out, n):
    # Note [Rounded division]: PyTorch's DivBackward2 for rounding_mode "floor" / "trunc"
    # gives zero gradients (the quotient is piecewise constant), unlike `//`.
    a, b = n.needs
    zero = mul(g, 0.0)
    return (_st(zero, n.shapes[0]) if a else None, _st(zero, n.shapes[1]) if b else None)


DIV_FLOOR = Primitive("div_floor", _int_zero_check("div", _quiet(_floor_div)),
                      vjp=_rounded_div_vjp, shape_rule=SR.broadcast, dtype_rule=promote,
                      grad_fn_name="DivBackward2", may_raise="integer",
                      doc="`div(input, other, rounding_mode='floor')`")
DIV_TRUNC = Primitive("div_trunc", _int_zero_check("div", _quiet(_trunc_div)),
                      vjp=_rounded_div_vjp, shape_rule=SR.broadcast, dtype_rule=promote,
                      grad_fn_name="DivBackward2", may_raise="integer",
                      doc="`div(input, other, rounding_mode='trunc')`")
REMAINDER = Primitive("remainder", _int_zero_check("remainder", _quiet(_remainder)), vjp=_rem_vjp,
                      saves=(0, 1), shape_rule=SR.broadcast,
                      dtype_rule=promote, may_raise="integer")
REMAINDER_TENSOR = overload_of(REMAINDER, "remainder_tensor", "RemainderBackward1")
MAXIMUM = Primitive("maximum", np.maximum, vjp=_minmax_vjp(lambda x, y: gt(x, y)), saves=(0, 1),
                    dtype_rule=promote, shape_rule=SR.broadcast)
MINIMUM = Primitive("minimum", np.minimum, vjp=_minmax_vjp(lambda x, y: lt(x, y)), saves=(0, 1),
                    dtype_rule=promote, shape_rule=SR.broadcast)


def _where_kernel(c, x, y):
    return np.where(c, x, y)


def _where_vjp(g, ins, out, n):
    c = ins[0]
    _, a, b = n.needs
    return (None, _st(where(c, g, 0.0), n.shapes[1]) if a else None,
            _st(where(c, 0.0, g), n.shapes[2]) if b else None)


def _where_dtype(args):
    d = promote_tail(args)
    return d


WHERE = Primitive("where", _where_kernel, vjp=_where_vjp, saves=(0,), dtype_rule=None,
                  shape_rule=SR.broadcast)

ADD_ = inplace_of(ADD)
SUB_ = inplace_of(SUB)
MUL_ = inplace_of(MUL)
DIV_ = inplace_of(DIV)
POW_ = inplace_of(POW)
POW_TENSOR_ = inplace_of(POW_TENSOR)


def _scalar_or(x):
    return x


def add(input, other, *, alpha=1):
    """`input + alpha * other` with broadcasting and PyTorch type promotion."""
    if alpha != 1:
        other = mul(other, alpha)
    return dispatch(ADD, (input, other))


def sub(input, other, *, alpha=1):
    if alpha != 1:
        other = mul(other, alpha)
    return dispatch(SUB, (input, other))


def mul(input, other):
    return dispatch(MUL, (input, other))


def div(input, other, *, rounding_mode=None):
    if rounding_mode is None:
        return dispatch(DIV, (input, other))
    if rounding_mode == "floor":
        return dispatch(DIV_FLOOR, (input, other))
    if rounding_mode == "trunc":
        return dispatch(DIV_TRUNC, (input, other))
    from .._errors import TracegradRuntimeError, op_error
    raise op_error(TracegradRuntimeError, "div", "div expected rounding_mode to be one of None, "
                   f"'trunc', or 'floor' but found '{rounding_mode}'")


divide = div


def true_divide(input, other):
    """`div` without rounding: integer and bool operands divide into the default float dtype.

    >>> true_divide(tensor([3], dtype=int8), 2)
    tensor([1.5000])
    """
    return dispatch(DIV, (input, other))


def trunc_div(x, y):
    """`x / y` rounded toward zero (`div(..., rounding_mode='trunc')`)."""
    return dispatch(DIV_TRUNC, (x, y))


def promote_dtype_of(*args):
    from .. import _dtype as D
    return D._FROM_NP[promote(args)]


def pow(input, exponent):
    if isinstance(exponent, Tensor):
        return dispatch(POW_TENSOR if isinstance(input, Tensor) else POW_SCALAR_BASE,
                        (input, exponent))
    return dispatch(POW, (input, exponent))


def pow_(input, exponent):
    return dispatch(POW_TENSOR_ if isinstance(exponent, Tensor) else POW_, (input, exponent))


def rsub(input, other):
    """`other - input`, what `2 - x` runs (PyTorch records RsubBackward1 for it)."""
    return dispatch(RSUB, (input, other))


def floor_divide(input, other):
    return dispatch(FLOOR_DIVIDE, (input, other))


def remainder(input, other):
    both = isinstance(input, Tensor) and isinstance(other, Tensor)
    return dispatch(REMAINDER_TENSOR if both else REMAINDER, (input, other))


def maximum(input, other):
    return dispatch(MAXIMUM, (input, other))


def minimum(input, other):
    return dispatch(MINIMUM, (input, other))


def where(condition, input=None, other=None):
    """Elementwise `input if condition else other`; `where(cond)` alone gives nonzero indices."""
    if input is None and other is None:
        from .shape import nonzero
        return nonzero(condition, as_tuple=True)
    if isinstance(condition, Tensor) and condition.dtype.name != "bool":
        raise _err("where", "where expected condition to be a boolean tensor, but got a tensor "
                   f"with dtype {scalar_type_name(condition.dtype)}")
    d = _where_dtype((condition, input, other))
    args = []
    for a in (input, other):
        traced = _traced(a, d)           # a number read per call (tracing/numbers.py)
        if isinstance(a, Tensor) and a._data.dtype != d:
            a = a.to(_np2d(d))
        elif traced is not None:
            a = traced
        elif not isinstance(a, Tensor):
            if not isinstance(a, (bool, int, float, np.ndarray, np.generic)):
                from .._errors import TracegradTypeError, op_error
                raise op_error(TracegradTypeError, "where", "expected a tensor or a number, got "
                               f"{type(a).__name__}", "Make a tensor of it first: "
                               "tracegrad.tensor(...).")
            try:
                a = np.asarray(a, dtype=d)[()]
            except OverflowError:
                raise _err("where", f"value cannot be converted to type {np.dtype(d).name}_t "
                           "without overflow") from None
            a = a.item()
        args.append(a)
    if not any(isinstance(a, Tensor) for a in args):   # two numbers: PyTorch's dtype, not numpy's
        from .._tensor import from_array
        args[0] = from_array(np.asarray(args[0], dtype=d))
    return dispatch(WHERE, (condition, args[0], args[1]))


def _traced(a, d):
    """A Python number traced per call as a 0-d tensor of dtype `d`, or None."""
    if type(a) in (bool, int, float) or isinstance(a, (Tensor, np.ndarray, np.generic)):
        return None
    from ..tracing.numbers import traced_scalar
    return traced_scalar(a, d)


def _np2d(d):
    from .. import _dtype as D
    return D._FROM_NP[np.dtype(d)]


# ---------------- unary math ----------------

def _unary(name, kernel, vjp, *, saves=(), saves_out=False, float_only=True, grad_fn_name=None):
    return Primitive(name, kernel, vjp=vjp, saves=saves, saves_out=saves_out,
                     dtype_rule=promote_float if float_only else promote,
                     grad_fn_name=grad_fn_name, elementwise=True, shape_rule=SR.same)


def _int_safe(f):
    def k(x, **kw):
        if x.dtype.kind != "f":
            return x.copy()
        return f(x, **kw)
    return k


def _sigmoid(x, out=None):
    # the same IEEE operations as 1 / (1 + exp(-x)), done in one buffer when `out` is given
    if out is None and x.ndim == 0:      # numpy hands back scalars for 0-d inputs
        return np.asarray(1.0 / (1.0 + np.exp(-x)))
    r = np.negative(x, out=out)
    np.exp(r, out=r)
    np.add(r, 1.0, out=r)
    return np.reciprocal(r, out=r)


def _rsqrt(x, out=None):
    if out is None and x.ndim == 0:
        return np.asarray(1.0 / np.sqrt(x))
    r = np.sqrt(x, out=out)
    return np.reciprocal(r, out=r)


_sigmoid.accepts_out = _rsqrt.accepts_out = True
_sigmoid = _quiet(_sigmoid)
_rsqrt = _quiet(_rsqrt)


def _relu(x, out=None):
    if x.dtype.kind == "b":
        return x.copy() if out is None else np.copyto(out, x) or out
    return np.maximum(x, 0, out=out)


_relu.accepts_out = True


def _clamp(x, min=None, max=None):
    if x.dtype.kind in "iu" and x.dtype.itemsize < 8:    # PyTorch wraps int bounds, numpy raises
        min = wrap_int(min, x.dtype) if type(min) is int else min
        max = wrap_int(max, x.dtype) if type(max) is int else max
    if min is not None:
        x = np.maximum(x, min)
    if max is not None:
        x = np.minimum(x, max)
    return x if (min is not None or max is not None) else x.copy()


def _round(x, decimals=0):
    if x.dtype.kind != "f":
        return x.copy()
    if decimals:                     # x * 10**decimals may overflow: inf, silently as PyTorch
        with np.errstate(all="ignore"):
            return np.round(x, decimals)
    return np.round(x, decimals)


def _zeros_vjp(g, ins, out, n):
    return (mul(g, 0.0),)


EXP = _unary("exp", _quiet(np.exp), lambda g, i, o, n: (mul(g, o),), saves_out=True)
LOG = _unary("log", _quiet(np.log), lambda g, i, o, n: (div(g, i[0]),), saves=(0,))
LOG1P = _unary("log1p", _quiet(np.log1p), lambda g, i, o, n: (div(g, add(i[0], 1.0)),),
               saves=(0,), grad_fn_name="Log1PBackward0")      # PyTorch's spelling
# PyTorch's derivatives: grad / (x * ln 2) and grad * (expm1(x) + 1)
LOG2 = _unary("log2", _quiet(np.log2),
              lambda g, i, o, n: (div(g, mul(i[0], 0.6931471805599453)),), saves=(0,),
              grad_fn_name="Log2Backward0")
EXPM1 = _unary("expm1", _quiet(np.expm1), lambda g, i, o, n: (mul(g, add(o, 1.0)),),
               saves_out=True, grad_fn_name="Expm1Backward0")
SQRT = _unary("sqrt", _quiet(np.sqrt), lambda g, i, o, n: (div(g, mul(o, 2.0)),), saves_out=True)
RSQRT = _unary("rsqrt", _rsqrt, lambda g, i, o, n: (mul(g, mul(pow(o, 3), -0.5)),),
               saves_out=True)
SIN = _unary("sin", _quiet(np.sin), lambda g, i, o, n: (_sin_backward(g, i[0]),), saves=(0,))
COS = _unary("cos", _quiet(np.cos), lambda g, i, o, n: (neg(mul(g, sin(i[0]))),), saves=(0,))
TANH = _unary("tanh", np.tanh, lambda g, i, o, n: (_tanh_backward(g, o),), saves_out=True)
SIGMOID = _unary("sigmoid", _sigmoid, lambda g, i, o, n: (_sigmoid_backward(g, o),),
                 saves_out=True)
RECIPROCAL = _unary("reciprocal", _quiet(np.reciprocal),
                    lambda g, i, o, n: (neg(mul(g, mul(o, o))),), saves_out=True)
def _neg(x):
    if x.dtype == np.bool_:
        raise _err("neg", "Negation, the `-` operator, on a bool tensor is not supported. If "
                   "you are trying to invert a mask, use the `~` or `logical_not()` operator "
                   "instead.")
    return np.negative(x)


NEG = _unary("neg", _neg, lambda g, i, o, n: (neg(g),), float_only=False)
def _abs(x):
    if x.dtype == np.bool_:
        raise _no_kernel("abs", "Bool")
    return np.abs(x)


ABS = _unary("abs", _abs, lambda g, i, o, n: (mul(g, sign(i[0])),), saves=(0,),
             float_only=False)
def _sign(x, out=None):
    """np.sign, but 0 for nan as PyTorch gives ((x > 0) - (x < 0)); a bool is its own sign
    (numpy has no bool loop)."""
    if x.dtype == np.bool_:
        if out is None:
            return x.copy()
        np.copyto(out, x)
        return out
    r = np.sign(x, out=out)
    if r.dtype.kind == "f":
        r = np.asarray(r)            # a 0-d input gives a numpy scalar
        np.copyto(r, 0, where=np.isnan(r))
    return r


_sign.accepts_out = True
SIGN = _unary("sign", _sign, _zeros_vjp, float_only=False)
RELU = _unary("relu", _relu, lambda g, i, o, n: (_threshold_backward(g, o),), saves_out=True,
              float_only=False)
FLOOR = _unary("floor", _int_safe(np.floor), _zeros_vjp, float_only=False)
CEIL = _unary("ceil", _int_safe(np.ceil), _zeros_vjp, float_only=False)
ROUND = _unary("round", _round, _zeros_vjp, float_only=False)
ROUND_DECIMALS = overload_of(ROUND, "round_decimals", "RoundBackward1")


def _clamp_vjp(g, ins, out, n):
    x = ins[0]
    lo, hi = n.attrs.get("min"), n.attrs.get("max")
    mask = None
    if lo is not None:
        mask = ge(x, lo)
    if hi is not None:
        m2 = le(x, hi)
        mask = m2 if mask is None else logical_and(mask, m2)
    return (mul(g, mask) if mask is not None else g,)


# ClampBackward1 is PyTorch's name for Python-number bounds (the only kind supported here)
CLAMP = _unary("clamp", _clamp, _clamp_vjp, saves=(0,), float_only=False,
               grad_fn_name="ClampBackward1")

# ---------------- fused backward primitives ----------------

# Note [Fused backward primitives]
# The VJPs of tanh, sigmoid, sin and relu are one primitive each (PyTorch has tanh_backward,
# sigmoid_backward, threshold_backward) instead of two or three dispatched ops: on small
# tensors each dispatch costs far more than its arithmetic. A kernel does the same IEEE
# operations, in the same order and dtype, as the composite rule it replaces, so first-order
# gradients are unchanged bit for bit (threshold_backward selects instead of multiplying by
# a mask, as PyTorch does: masked entries are +0 even where the gradient is inf or nan).
# Each has its own VJP in tracegrad ops, again reproducing the composite rule's operations,
# so second-order gradients are unchanged too. With `out=` (the memory planner), `out` may
# be the buffer of either operand: kernels build their temporaries fresh and write `out`
# only in their last step.

def _tanh_backward_kernel(g, y, out=None):
    if out is None:
        return g * (1.0 - y * y)
    t = np.asarray(y * y)          # 0-d operands give numpy scalars: `out=` needs an array
    np.subtract(1.0, t, out=t)
    return np.multiply(g, t, out=out)


def _sigmoid_backward_kernel(g, y, out=None):
    if out is None:
        return g * (y * (1.0 - y))
    t = np.asarray(1.0 - y)
    np.multiply(y, t, out=t)
    return np.multiply(g, t, out=out)


def _sin_backward_kernel(g, x, out=None):
    return np.multiply(g, np.cos(x), out=out)


_SAME_WIDTH_INT = {np.dtype(np.float16): np.int16, np.dtype(np.float32): np.int32,
                   np.dtype(np.float64): np.int64}


def _threshold_backward_kernel(g, y, out=None):
    """PyTorch's `y <= 0 ? 0 : g` (a NaN or inf gradient where y <= 0 becomes +0).

    Branch-free: the float's bits, as a same-width int, are multiplied by 1 (keep) or 0
    (drop: the bits of +0). `np.where`/`np.putmask` branch per element and mispredict on a
    relu's random sign pattern: at 256x512 float32 they take ~460 us against ~45 us here.
    (Three numpy calls; ANDing with a mask of all ones or zeros took four, ~10% more.)"""
    it = _SAME_WIDTH_INT.get(g.dtype)
    if it is None or g.dtype != y.dtype or g.shape != y.shape:
        r = np.where(y <= 0, 0, g).astype(g.dtype, copy=False)
        return r if out is None else np.copyto(out, r) or out
    keep = np.less_equal(y, 0)              # before writing: `out` may be `y`
    if type(keep) is np.ndarray:            # (not `y > 0`: a NaN `y` keeps `g`)
        np.logical_not(keep, out=keep)
    else:                                   # 0-d: numpy gave a scalar
        keep = not keep
    if out is None:
        out = np.empty(g.shape, g.dtype)
    np.multiply(g.view(it), keep, out=out.view(it))
    return out


for _k in (_tanh_backward_kernel, _sigmoid_backward_kernel, _sin_backward_kernel,
           _threshold_backward_kernel):
    _k.accepts_out = True


def _tanh_backward_vjp(gg, ins, out, n):
    g, y = ins
    a, b = n.needs
    gy = None
    if b:       # the composite rule's path: y*y read y twice, so two equal terms add up
        u = mul(neg(mul(gg, g)), y)
        gy = add(u, u)
    return (_tanh_backward(gg, y) if a else None, gy)


def _sigmoid_backward_vjp(gg, ins, out, n):
    g, y = ins
    a, b = n.needs
    gy = None
    if b:       # d/dy of g*y*(1-y): (gg*g)*(1-y) - (gg*g)*y, summed in the composite's order
        q = mul(gg, g)
        gy = sub(mul(q, sub(1.0, y)), mul(q, y))
    return (_sigmoid_backward(gg, y) if a else None, gy)


def _sin_backward_vjp(gg, ins, out, n):
    g, x = ins
    a, b = n.needs
    return (_sin_backward(gg, x) if a else None,
            neg(mul(mul(gg, g), sin(x))) if b else None)


def _threshold_backward_vjp(gg, ins, out, n):
    # piecewise constant in y: no gradient flows to it (PyTorch returns zeros)
    return (_threshold_backward(gg, ins[1]) if n.needs[0] else None, None)


def _fused(name, kernel, vjp, saves, grad_fn_name=None):
    return Primitive(name, _quiet(kernel), vjp=vjp, saves=saves, dtype_rule=promote,
                     grad_fn_name=grad_fn_name, elementwise=True, shape_rule=SR.broadcast,
                     doc="fused VJP (see Note [Fused backward primitives])")


TANH_BACKWARD = _fused("tanh_backward", _tanh_backward_kernel, _tanh_backward_vjp, (0, 1))
SIGMOID_BACKWARD = _fused("sigmoid_backward", _sigmoid_backward_kernel,
                          _sigmoid_backward_vjp, (0, 1))
# PyTorch computes sin's gradient as a plain product, so its node is MulBackward0
SIN_BACKWARD = _fused("sin_backward", _sin_backward_kernel, _sin_backward_vjp, (0, 1),
                      grad_fn_name="MulBackward0")
THRESHOLD_BACKWARD = _fused("threshold_backward", _threshold_backward_kernel,
                            _threshold_backward_vjp, (1,))


def _tanh_backward(grad, output):
    """`grad * (1 - output**2)`: the gradient of tanh from its output."""
    return dispatch(TANH_BACKWARD, (grad, output))


def _sigmoid_backward(grad, output):
    """`grad * output * (1 - output)`: the gradient of sigmoid from its output."""
    return dispatch(SIGMOID_BACKWARD, (grad, output))


def _sin_backward(grad, input):
    """`grad * cos(input)`: the gradient of sin."""
    return dispatch(SIN_BACKWARD, (grad, input))


def _threshold_backward(grad, output):
    """`grad` where `output > 0`, else 0: the gradient of relu from its output."""
    return dispatch(THRESHOLD_BACKWARD, (grad, output))


EXP_ = inplace_of(EXP)
RELU_ = inplace_of(RELU)
SIGMOID_ = inplace_of(SIGMOID)
TANH_ = inplace_of(TANH)
CLAMP_ = inplace_of(CLAMP)
NEG_ = inplace_of(NEG)
LOG1P_ = inplace_of(LOG1P)
LOG2_ = inplace_of(LOG2)
EXPM1_ = inplace_of(EXPM1)


def _mk_unary(prim):
    def op(input):
        return dispatch(prim, (input,))
    op.__name__ = prim.name
    op.__doc__ = f"Elementwise `{prim.name}` (PyTorch semantics; differentiable)."
    return op


exp = _mk_unary(EXP)
log = _mk_unary(LOG)
log1p = _mk_unary(LOG1P)
log2 = _mk_unary(LOG2)
expm1 = _mk_unary(EXPM1)
sqrt = _mk_unary(SQRT)
rsqrt = _mk_unary(RSQRT)
sin = _mk_unary(SIN)
cos = _mk_unary(COS)
tanh = _mk_unary(TANH)
sigmoid = _mk_unary(SIGMOID)
reciprocal = _mk_unary(RECIPROCAL)
neg = _mk_unary(NEG)
negative = neg
abs = _mk_unary(ABS)
sign = _mk_unary(SIGN)
relu = _mk_unary(RELU)
floor = _mk_unary(FLOOR)
ceil = _mk_unary(CEIL)


# erf: numpy has none; math.erf is correctly rounded in float64 (one Python call per element).
_ERF_UFUNC = np.frompyfunc(math.erf, 1, 1)


def _erf_kernel(x):
    return np.asarray(_ERF_UFUNC(x), dtype=x.dtype)


def _erf_vjp(g, ins, out, n):
    x = ins[0]
    return (mul(g, mul(exp(neg(mul(x, x))), 2.0 / math.sqrt(math.pi))),)


ERF = _unary("erf", _erf_kernel, _erf_vjp, saves=(0,))
erf = _mk_unary(ERF)


# gelu: one node (GeluBackward0) as in PyTorch; exact (erf) or the tanh approximation
_SQRT_HALF, _SQRT_2_PI = 1.0 / math.sqrt(2.0), math.sqrt(2.0 / math.pi)


def _gelu_kernel(x, approximate):
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * _SQRT_2_PI
        return x * 0.5 * (np.tanh(inner) + 1.0)
    return x * 0.5 * (_erf_kernel(x * _SQRT_HALF) + 1.0)


def _gelu_vjp(g, ins, out, n):
    return (_fused_backward.gelu_backward(g, ins[0], n.attrs["approximate"]),)


GELU = _unary("gelu", _quiet(_gelu_kernel), _gelu_vjp, saves=(0,), grad_fn_name="GeluBackward0")


def _gelu(input, approximate="none"):
    """Gaussian error linear unit: `nn.functional.gelu` (torch has no top-level gelu)."""
    return dispatch(GELU, (input,), {"approximate": approximate})


def round(input, *, decimals=0):
    if decimals:
        return dispatch(ROUND_DECIMALS, (input,), {"decimals": decimals})
    return dispatch(ROUND, (input,))


def clamp(input, min=None, max=None):
    """Clamp into [min, max]; either bound may be None (not both)."""
    if min is None and max is None:
        raise _err("clamp", "At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        from .clamp_tensor import clamp_tensor
        return clamp_tensor(input, min, max)
    # numpy scalars bound as the Python numbers they hold, as in PyTorch (numpy would
    # promote a float32 tensor clamped by np.float64(0.1) to float64)
    min, max = (_python_number(v) if isinstance(v, np.generic) else v for v in (min, max))
    attrs = _clamp_attrs(min, max)
    if input.dtype.category < 2 and any(isinstance(v, float) for v in (min, max)):
        input = input.to(get_default_dtype())          # int tensor, float bound: a float result
    _check_int_bounds(input.dtype, min, max)
    return dispatch(CLAMP, (input,), attrs)


# the largest finite value and C++ name of the floating dtypes a Python bound may overflow
_FLOAT_TOPS = {"float16": (65504.0, "c10::Half"), "float32": (3.4028234663852886e38, "float"),
               "bfloat16": (3.3895313892515355e38, "c10::BFloat16")}


def _check_int_bounds(dt, *bounds):
    """PyTorch's overflow check of Python bounds: into the dtype's range, where an unsigned
    dtype also takes negatives down to -max (they wrap), and a finite bound must not pass a
    floating dtype's largest value (`half.clamp(max=1e5)` raises; inf and nan do not)."""
    if dt.category == 2:
        top, cname = _FLOAT_TOPS.get(dt.name, (None, None))
        for v in bounds:
            if (top is not None and type(v) in (int, float) and not -top <= v <= top
                    and v == v and v not in (math.inf, -math.inf)):
                raise _err("clamp", f"value cannot be converted to type {cname} without "
                           "overflow")
        return
    if dt.itemsize >= 8 or dt.category == 0:
        return
    info = np.iinfo(dt.np)
    low = info.min if info.min else -int(info.max)
    for v in bounds:
        if type(v) is int and not low <= v <= info.max:
            raise _err("clamp", f"value cannot be converted to type {dt.name}_t without overflow")


clip = clamp


def _clamp_attrs(lo, hi):
    for v in (lo, hi):
        if isinstance(v, Tensor):           # clamp and clamp_ route these to clamp_tensor.py
            raise _err("clamp", "tensor bounds reached the number-bound primitive")
    return {"min": lo, "max": hi}


def _no_kernel(op, dtype_name):
    """PyTorch's error for an op without a kernel for this dtype (NotImplementedError)."""
    from .._errors import TracegradNotImplementedError, op_error
    return op_error(TracegradNotImplementedError, op,
                    f'"{op}_cpu" not implemented for \'{dtype_name}\'')


def _err(op, msg):
    from .._errors import TracegradRuntimeError, op_error
    return op_error(TracegradRuntimeError, op, msg)


# ---------------- comparisons and logic (never differentiable) ----------------

def _cmp(name, kernel):
    prim = Primitive(name, kernel, dtype_rule=promote, nondiff=True, shape_rule=SR.broadcast)

    def op(input, other):
        return dispatch(prim, (input, other))
    op.__name__ = name
    return prim, op


EQ, eq = _cmp("eq", np.equal)
NE, ne = _cmp("ne", np.not_equal)
LT, lt = _cmp("lt", np.less)
LE, le = _cmp("le", np.less_equal)
GT, gt = _cmp("gt", np.greater)
GE, ge = _cmp("ge", np.greater_equal)


def _bitwise(name, kernel):
    def k(x, y):
        if x.dtype.kind == "f" if hasattr(x, "dtype") else isinstance(x, float):
            raise _no_kernel(name, "Float")
        return kernel(x, y)
    return _cmp(name, k)


AND, logical_and_bits = _bitwise("bitwise_and", np.bitwise_and)
OR, bitwise_or = _bitwise("bitwise_or", np.bitwise_or)
XOR, bitwise_xor = _bitwise("bitwise_xor", np.bitwise_xor)
bitwise_and = logical_and_bits


def _invert(x):
    if x.dtype.kind == "f":
        from .._errors import TracegradTypeError, op_error
        raise op_error(TracegradTypeError, "bitwise_not",
                       "~ (operator.invert) is only implemented on integer and Boolean-type "
                       "tensors", "Use logical_not() or compare instead.")
    return np.invert(x)


INVERT = Primitive("bitwise_not", _invert, nondiff=True, shape_rule=SR.same)
LOGICAL_AND = Primitive("logical_and", np.logical_and, nondiff=True, shape_rule=SR.broadcast)
LOGICAL_OR = Primitive("logical_or", np.logical_or, nondiff=True, shape_rule=SR.broadcast)
LOGICAL_NOT = Primitive("logical_not", np.logical_not, nondiff=True, shape_rule=SR.same)


def bitwise_not(input):
    return dispatch(INVERT, (input,))


def logical_and(input, other):
    return dispatch(LOGICAL_AND, (input, other))


def logical_or(input, other):
    return dispatch(LOGICAL_OR, (input, other))


def logical_not(input):
    return dispatch(LOGICAL_NOT, (input,))


def isnan(input):
    return ne(input, input)


def square(input):
    return mul(input, input)


_CPP_NAMES = {"float16": "c10::Half", "float32": "float", "float64": "double",
              "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int",
              "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
              "bool": "bool"}        # PyTorch's C++ names of its dtypes, in some messages


def _check_lerp_dtypes(input, end, weight=None):
    """PyTorch's lerp kernel's dtype check: `end` (and a dimensioned tensor `weight`) of
    `input`'s dtype. Optimizers updating their state with lerp (Adam's `exp_avg`) run it
    too: a model moved to another dtype after its optimizer made state is an error there."""
    for name, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t.dtype is not input.dtype and (name == "end" or t.ndim):
            raise _err("lerp", f"expected dtype {_CPP_NAMES[input.dtype.name]} for `{name}` "
                       f"but got dtype {_CPP_NAMES[t.dtype.name]}")


def lerp(input, end, weight):
    """`input + weight * (end - input)`; PyTorch's kernel takes floating operands of one
    dtype only (a dimensioned `weight` too), where promotion would hide a mixed-precision
    mistake."""
    _check_lerp_dtypes(input, end, weight)
    if not input.dtype.is_floating_point:
        from .._errors import TracegradNotImplementedError, op_error
        kind = "tensor" if isinstance(weight, Tensor) else "scalar"
        raise op_error(TracegradNotImplementedError, "lerp", f'"lerp_kernel_{kind}" not '
                       f"implemented for '{scalar_type_name(input.dtype)}'")
    return add(input, mul(weight, sub(end, input)))


# Binary arithmetic is elementwise too: the memory planner may write results in place.
for _p in (ADD, SUB, MUL, DIV, POW, REMAINDER, MAXIMUM, MINIMUM, RSUB):
    _p.elementwise = True


# gelu's fused gradient (imported last: that module builds on this one)
from . import fused_backward as _fused_backward  # noqa: E402


# xlogy: PyTorch's kernel (0 where x == 0 unless y is nan, else x * log(y)) and derivatives
# (self: xlogy(grad, other), 0 where self == 0 and other <= 0; other: grad * self / other), so kl_div built on it
# has PyTorch's values and gradients, with no warning for 0 * log(0).
def _x_times_log(log):
    """The kernel `x * log(y)`, 0 where x == 0 unless y is nan (xlogy with `np.log`,
    special.xlog1py with `np.log1p`)."""
    def kernel(x, y):
        ly = log(y)
        if not isinstance(y, np.ndarray):   # a Python number: its log stays weakly typed
            ly = float(ly)
        r = np.multiply(x, ly)
        zero = np.logical_and(np.equal(x, 0), np.logical_not(np.isnan(y)))
        return np.where(zero, np.zeros((), r.dtype), r)
    return kernel


_xlogy_kernel = _x_times_log(np.log)


def _xlogy_vjp(g, ins, out, n):
    x, y = ins
    a, b = n.needs
    gx = gy = None
    if a:
        gx = xlogy(g, y)
        gx = _st(where(logical_and(eq(x, 0), le(y, 0)), 0.0, gx), n.shapes[0])
    if b:
        gy = _st(div(mul(g, x), y), n.shapes[1])
    return gx, gy


XLOGY = Primitive("xlogy", _quiet(_xlogy_kernel), vjp=_xlogy_vjp, saves=(0, 1),
                  dtype_rule=promote_float, shape_rule=SR.broadcast,
                  grad_fn_name="XlogyBackward0")
XLOGY_SCALAR_SELF = overload_of(XLOGY, "xlogy_scalar_self", "XlogyBackward1")    # number, t
XLOGY_SCALAR_OTHER = overload_of(XLOGY, "xlogy_scalar_other", "XlogyBackward2")  # t, number


def xlogy(input, other):
    """`input * log(other)`, and 0 where `input` is 0 (unless `other` is nan), as
    torch.xlogy; differentiable in both."""
    prim = (XLOGY if isinstance(input, Tensor) and isinstance(other, Tensor) else
            XLOGY_SCALAR_OTHER if isinstance(input, Tensor) else XLOGY_SCALAR_SELF)
    return dispatch(prim, (input, other))
