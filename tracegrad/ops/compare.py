"""Whole-tensor and tolerance comparisons: `equal`, `isclose`, `allclose`, `isinf`,
`isfinite`, `isposinf`, `isneginf` (functions and Tensor methods, as in PyTorch).

Each is composed of existing comparison primitives, so it traces and compiles with no new
kernel. `equal` and `allclose` return Python bools: inside a traced function that is a
`bool()` of a traced value, so it becomes a guard and a different answer re-traces.
"""
import math

from .._errors import TracegradRuntimeError, TracegradTypeError, op_error
from .._tensor import Tensor
from . import elementwise as E
from . import reduction as R

__all__ = ["equal", "isclose", "allclose", "isinf", "isfinite", "isposinf", "isneginf"]


def isinf(input):
    """Which elements are +inf or -inf (all False for integer tensors)."""
    return E.eq(E.abs(input), math.inf)


def isposinf(input):
    return E.eq(input, math.inf)


def isneginf(input):
    return E.eq(input, -math.inf)


def isfinite(input):
    """Which elements are neither inf nor NaN."""
    return E.logical_and(E.eq(input, input), E.ne(E.abs(input), math.inf))


def equal(input, other):
    """True when both tensors have the same shape and equal elements (NaN never equals).

    >>> equal(tracegrad.ones(2), tracegrad.ones(2))
    True
    """
    if not isinstance(other, Tensor):
        raise TracegradTypeError(f"equal(): argument 'other' (position 2) must be Tensor, "
                                 f"not {type(other).__name__}")
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(R.all(E.eq(input, other)))


def _check_close(op, input, other, rtol, atol):
    if input.dtype is not other.dtype:
        raise op_error(TracegradRuntimeError, op,
                       f"{input.type()[6:-6]} did not match {other.type()[6:-6]}")
    if rtol < 0:
        raise op_error(TracegradRuntimeError, op,
                       f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise op_error(TracegradRuntimeError, op,
                       f"atol must be greater than or equal to zero, but got {atol}")


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise `|input - other| <= atol + rtol * |other|` (equal infinities are close;
    NaNs only with `equal_nan`); integer and bool tensors compare exactly."""
    _check_close("isclose", input, other, rtol, atol)
    same = E.eq(input, other)
    if not input.is_floating_point():
        return same
    finite = E.logical_and(isfinite(input), isfinite(other))
    a, b = E.where(finite, input, 0.0), E.where(finite, other, 0.0)   # no inf - inf
    close = E.le(E.abs(E.sub(a, b)), E.add(E.mul(E.abs(b), rtol), atol))
    close = E.logical_or(same, E.logical_and(close, finite))
    if equal_nan:
        close = E.logical_or(close, E.logical_and(E.isnan(input), E.isnan(other)))
    return close


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """`isclose(...).all()` as a Python bool."""
    _check_close("allclose", input, other, rtol, atol)
    return bool(R.all(isclose(input, other, rtol, atol, equal_nan)))
