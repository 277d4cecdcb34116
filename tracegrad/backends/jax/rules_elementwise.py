"""Lowering rules of the elementwise primitives (ops/elementwise.py): arithmetic, unary math,
the fused backward kernels, comparisons and logic.

Operands arrive already cast by the tracer to the dtype the primitive's promotion rule picks
(Python numbers stay weakly typed in jax as in numpy), so most rules are one jnp call. Integer
division by zero raises in eager execution; here it is a runtime check (Note in table.py).
"""
import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from ...ops import elementwise as E
from ...ops import fmod_prim as FM
from ...ops import shift_prim as SH
from .table import register, simple


def _is_int(x):
    return hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.integer) or \
        hasattr(x, "dtype") and x.dtype == jnp.bool_


for _p, _f in ((E.ADD, jnp.add), (E.SUB, jnp.subtract), (E.MUL, jnp.multiply),
               (E.MAXIMUM, jnp.maximum), (E.MINIMUM, jnp.minimum),
               (E.EQ, jnp.equal), (E.NE, jnp.not_equal), (E.LT, jnp.less),
               (E.LE, jnp.less_equal), (E.GT, jnp.greater), (E.GE, jnp.greater_equal),
               (E.AND, jnp.bitwise_and), (E.OR, jnp.bitwise_or), (E.XOR, jnp.bitwise_xor),
               (E.INVERT, jnp.invert), (E.LOGICAL_AND, jnp.logical_and),
               (E.LOGICAL_OR, jnp.logical_or), (E.LOGICAL_NOT, jnp.logical_not),
               (E.EXP, jnp.exp), (E.LOG, jnp.log), (E.LOG1P, jnp.log1p), (E.LOG2, jnp.log2),
               (E.EXPM1, jnp.expm1), (E.SQRT, jnp.sqrt),
               (E.RSQRT, lax.rsqrt), (E.SIN, jnp.sin), (E.COS, jnp.cos), (E.TANH, jnp.tanh),
               (E.RECIPROCAL, jnp.reciprocal), (E.NEG, jnp.negative), (E.ABS, jnp.abs),
               (E.ERF, lax.erf)):
    simple(_p, _f)

# sign(nan) is 0 in PyTorch (and in our numpy kernel), nan in jnp.sign
simple(E.SIGN, lambda x: x if x.dtype == jnp.bool_ else
       jnp.where(jnp.isnan(x), jnp.zeros_like(x), jnp.sign(x)))

simple(E.RSUB, lambda x, y: jnp.subtract(y, x))


@register(E.DIV)
def _div(ctx, node, x, y):
    """Note [Division by a literal]
    XLA rewrites `x / c` for a constant `c` into `x * (1 / c)`, which is not IEEE division
    (`1 - 999 / 1000` came out 2e-17 off numpy's and Python's). A 0-d dividend is a Python
    number traced per call (tracing/numbers.py, integers.py), whose arithmetic must be
    Python's to the bit: there the constant goes behind an optimization barrier, which
    keeps XLA's division exact. (Arrays divided by a literal are rewritten too, and the
    barrier does not stop the CPU code generator's loop-invariant reciprocal; that
    last-bit difference of the jax backend is known and left.)"""
    if (isinstance(y, (int, float)) and not isinstance(y, bool) and getattr(x, "ndim", 1) == 0
            and jnp.issubdtype(x.dtype, jnp.floating)):
        y = lax.optimization_barrier(jnp.asarray(y, x.dtype))
    return jnp.true_divide(x, y)
simple(E.WHERE, jnp.where)


@register(E.POW)
def _pow(ctx, node, x, y):
    dt = node.output.type.dtype.np
    if jnp.issubdtype(dt, jnp.integer):
        ctx.check(jnp.any(jnp.asarray(y) < 0))      # numpy refuses negative integer powers
        if hasattr(y, "dtype"):
            x = np.asarray(x).astype(dt) if type(x) is int else x  # wraps: (-1) ** uint8
            return _int_pow(jnp.asarray(x, dt), jnp.asarray(y, dt))
    elif dt in (np.float32, np.float64) and np.ndim(y) == 0 and \
            not (dt == np.float64 and np.ndim(x) == 0):
        # numpy's float32/float64 loop takes a scalar power of one half as a square root (as
        # PyTorch does): (-inf) ** 0.5 is nan and (-0.0) ** 0.5 is -0.0, where pow gives inf
        # and 0.0 (eager's 0-d float64 powers are pow's: Note [Scalar powers])
        if type(y) in (int, float):
            return jnp.sqrt(x) if y == 0.5 else jnp.power(x, y)
        return jnp.where(y == 0.5, jnp.sqrt(x), jnp.power(x, y))
    return jnp.power(x, y)


def _int_pow(x, y):
    """`x ** y` for integer arrays, wrapping as numpy does. `jnp.power` looks at only the low
    6 bits of an array exponent (2 ** 70 gave 64, 2 ** 64 gave 1, (-1) ** 65 gave -1 only by
    luck), so this walks every bit of the (non-negative) exponent."""
    acc = jnp.ones_like(x * y)
    info = np.iinfo(y.dtype)
    for _ in range(info.bits - (info.min < 0)):      # a sign bit is never set here
        acc = jnp.where(y & 1, acc * x, acc)
        x = x * x
        y = y >> 1
    return acc


@register(E.POW_TENSOR, E.POW_SCALAR_BASE)
def _pow_tensor(ctx, node, x, y):
    """ops/elementwise.py's `_power_tensor`: integer powers wrap and count every exponent
    bit; negative ones are 1, +-1 or 0, as PyTorch gives (not numpy's error)."""
    dt = node.output.type.dtype.np
    if not jnp.issubdtype(dt, jnp.integer):
        return _pow(ctx, node, x, y)
    x = np.asarray(x).astype(dt) if type(x) is int else x     # wraps: (-1) ** uint8
    x, y = jnp.asarray(x, dt), jnp.asarray(y, dt)
    neg = y < 0
    r = _int_pow(x, jnp.where(neg, 0, y))
    odd = jnp.where(y % 2 == 0, 1, -1).astype(dt)
    one = jnp.ones_like(r)
    return jnp.where(neg, jnp.where(x == 1, one, jnp.where(x == -1, odd, 0 * one)), r)


def _int_div(f):
    def rule(ctx, node, x, y):
        if jnp.issubdtype(node.output.type.dtype.np, jnp.integer):
            ctx.check(jnp.any(jnp.asarray(y) == 0))   # eager raises ZeroDivisionError
        return f(x, y)
    return rule


register(E.FLOOR_DIVIDE, E.DIV_FLOOR)(_int_div(jnp.floor_divide))
register(E.DIV_TRUNC)(_int_div(lambda x, y: lax.div(x, y) if jnp.issubdtype(
    jnp.result_type(x, y), jnp.integer) else jnp.trunc(jnp.true_divide(x, y))))
register(E.REMAINDER, E.REMAINDER_TENSOR)(_int_div(jnp.remainder))
register(FM.FMOD, FM.FMOD_TENSOR)(_int_div(jnp.fmod))


@register(E.SIGMOID)
def _sigmoid(ctx, node, x):
    return 1.0 / (1.0 + jnp.exp(-x))


@register(E.RELU)
def _relu(ctx, node, x):
    return x if x.dtype == jnp.bool_ else jnp.maximum(x, 0)


def _int_safe(f):
    def rule(ctx, node, x):
        return f(x) if jnp.issubdtype(x.dtype, jnp.floating) else x
    return rule


register(E.FLOOR)(_int_safe(jnp.floor))
register(E.CEIL)(_int_safe(jnp.ceil))
register(E.ROUND)(_int_safe(jnp.round))


@register(E.ROUND_DECIMALS)
def _round_decimals(ctx, node, x):
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return x
    return jnp.round(x, node.attrs.get("decimals", 0))


@register(E.CLAMP)
def _clamp(ctx, node, x):
    lo, hi = node.attrs.get("min"), node.attrs.get("max")
    if lo is not None:
        x = jnp.maximum(x, lo)
    if hi is not None:
        x = jnp.minimum(x, hi)
    return x


simple(E.TANH_BACKWARD, lambda g, y: g * (1.0 - y * y))
simple(E.SIGMOID_BACKWARD, lambda g, y: g * (y * (1.0 - y)))
simple(E.SIN_BACKWARD, lambda g, x: g * jnp.cos(x))
simple(E.THRESHOLD_BACKWARD, lambda g, y: jnp.where(y <= 0, jnp.zeros_like(g), g))

_SQRT_HALF, _SQRT_2_PI = 1.0 / math.sqrt(2.0), math.sqrt(2.0 / math.pi)


@register(E.GELU)
def _gelu(ctx, node, x):
    if node.attrs["approximate"] == "tanh":
        inner = (x + x * x * x * 0.044715) * _SQRT_2_PI
        return x * 0.5 * (jnp.tanh(inner) + 1.0)
    return x * 0.5 * (lax.erf(x * _SQRT_HALF) + 1.0)


@register(E.XLOGY, E.XLOGY_SCALAR_SELF, E.XLOGY_SCALAR_OTHER)
def _xlogy(ctx, node, x, y):
    x, y = jnp.asarray(x), jnp.asarray(y)
    return jnp.where((x == 0) & ~jnp.isnan(y), jnp.zeros((), node.output.type.dtype.np),
                     x * jnp.log(y)).astype(node.output.type.dtype.np)

from ...ops import trig_prim as TR  # noqa: E402

for _p, _f in ((TR.TAN, jnp.tan), (TR.ASIN, jnp.arcsin), (TR.ACOS, jnp.arccos),
               (TR.ATAN, jnp.arctan), (TR.SINH, jnp.sinh), (TR.COSH, jnp.cosh),
               (TR.ASINH, jnp.arcsinh), (TR.ACOSH, jnp.arccosh), (TR.ATANH, jnp.arctanh),
               (TR.LOG10, jnp.log10), (TR.ATAN2, jnp.arctan2)):
    simple(_p, _f)


# bitwise shifts (ops/shift_prim.py): PyTorch's results past the bit width, as the kernel
def _shift(left):
    def rule(ctx, node, x, y):
        dt = node.output.type.dtype.np
        bits = dt.itemsize * 8
        x = jnp.asarray(x, dt)
        y = jnp.asarray(y) if hasattr(y, "dtype") else jnp.asarray(int(y), jnp.int64)
        ok = (y >= 0) & (y < bits)
        s = jnp.where(ok, y, 0).astype(dt)
        if left:
            return jnp.where(ok, jnp.left_shift(x, s), jnp.zeros((), dt))
        return jnp.where(ok, jnp.right_shift(x, s), jnp.right_shift(x, dt.type(bits - 1)))
    return rule


register(SH.LSHIFT)(_shift(True))
register(SH.RSHIFT)(_shift(False))
