"""C's truncating arithmetic: `fmod`, the remainder with the sign of the dividend (PyTorch's
`torch.fmod` / `Tensor.fmod`), and `trunc`, rounding toward zero.

One primitive on numpy's `np.fmod` (exact, unlike `x - trunc(x / y) * y`); its VJP is
PyTorch's: `grad_x = g`, `grad_y = -g * trunc(x / y)`. Integer division by zero raises
(ZeroDivisionError as PyTorch's RuntimeError), floats give nan. `remainder` (Python's `%`,
the sign of the divisor) lives with the arithmetic in `elementwise.py`.
"""
import numpy as np

from .._dispatch import dispatch
from .._tensor import Tensor
from . import elementwise as E
from . import shape_rules as SR
from .primitive import Primitive, inplace_of, overload_of, promote

__all__ = ["fmod", "trunc"]


def _fmod_vjp(g, ins, out, n):
    x, y = ins
    a, b = n.needs
    gy = None
    if b:
        gy = E._st(E.neg(E.mul(g, E.trunc_div(x, y))), n.shapes[1])
    return (E._st(g, n.shapes[0]) if a else None, gy)


FMOD = Primitive("fmod", E._int_zero_check("fmod", E._quiet(np.fmod)), vjp=_fmod_vjp,
                 saves=(0, 1), shape_rule=SR.broadcast, dtype_rule=promote,
                 may_raise="integer", doc="C's remainder: the result has the dividend's sign")
FMOD_TENSOR = overload_of(FMOD, "fmod_tensor", "FmodBackward1")
FMOD_ = inplace_of(FMOD, "fmod_")


def fmod(input, other):
    """Elementwise `input - trunc(input / other) * other` (sign of `input`).

    >>> fmod(tensor([-3., 3.]), 2)
    tensor([-1.,  1.])
    """
    return dispatch(FMOD_TENSOR if isinstance(other, Tensor) else FMOD, (input, other))


def fmod_(input, other):
    return dispatch(FMOD_, (input, other))


def trunc(input):
    """Round toward zero (`floor` of positives, `ceil` of negatives); integers unchanged.
    A composite: its gradient is zero, as PyTorch's.

    >>> trunc(tensor([-1.7, 1.7]))
    tensor([-1.,  1.])
    """
    if not input.dtype.is_floating_point:
        return input.clone()
    return E.where(E.lt(input, 0), E.ceil(input), E.floor(input))
