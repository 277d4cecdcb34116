"""Bitwise shifts of integer tensors: `bitwise_left_shift`, `bitwise_right_shift`, the `<<` and
`>>` operators and their in-place forms (`<<=`, `>>=`, `bitwise_left_shift_`, ...).

PyTorch's semantics, which numpy's shifts leave undefined: operands promote as for `&`; a
shift by a negative amount or by at least the result's bit width gives 0 to the left and the
sign fill (`x >> (bits - 1)`: 0 or -1) to the right; the left shift wraps. Floating and bool
results raise PyTorch's NotImplementedError (`"lshift_cpu" not implemented for 'Float'`).
Never differentiable.
"""
import numpy as np

from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import TracegradNotImplementedError, op_error
from .primitive import Primitive, inplace_of, promote
from . import shape_rules as SR

__all__ = ["bitwise_left_shift", "bitwise_right_shift"]


def _shift_kernel(name, left):
    def kernel(x, y):
        dt = np.result_type(x, y)
        if dt.kind not in "iu":
            raise op_error(TracegradNotImplementedError, name,
                           f'"{name}_cpu" not implemented for '
                           f"'{D.scalar_type_name(D.from_numpy_dtype(dt))}'")
        bits = dt.itemsize * 8
        xa = np.asarray(x, dtype=dt)
        ya = np.asarray(y) if isinstance(y, np.ndarray) else np.asarray(int(y), dtype=np.int64)
        ok = (ya >= 0) & (ya < bits)
        s = np.where(ok, ya, 0).astype(dt)
        if left:
            return np.where(ok, np.left_shift(xa, s), np.zeros((), dt))
        return np.where(ok, np.right_shift(xa, s), np.right_shift(xa, dt.type(bits - 1)))
    return kernel


LSHIFT = Primitive("bitwise_left_shift", _shift_kernel("lshift", True), dtype_rule=promote,
                   nondiff=True, shape_rule=SR.broadcast)
RSHIFT = Primitive("bitwise_right_shift", _shift_kernel("rshift", False), dtype_rule=promote,
                   nondiff=True, shape_rule=SR.broadcast)
LSHIFT_ = inplace_of(LSHIFT)
RSHIFT_ = inplace_of(RSHIFT)


def bitwise_left_shift(input, other):
    """`input << other` elementwise on integers (0 past the bit width, as PyTorch).

    >>> bitwise_left_shift(tensor([1, -2]), 2)
    tensor([ 4, -8])
    """
    return dispatch(LSHIFT, (input, other))


def bitwise_right_shift(input, other):
    """`input >> other` elementwise on integers (arithmetic: the sign fills).

    >>> bitwise_right_shift(tensor([8, -8]), 2)
    tensor([ 2, -2])
    """
    return dispatch(RSHIFT, (input, other))


def bitwise_left_shift_(input, other):
    """`input <<= other` (the result must fit input's dtype)."""
    return dispatch(LSHIFT_, (input, other))


def bitwise_right_shift_(input, other):
    """`input >>= other` (the result must fit input's dtype)."""
    return dispatch(RSHIFT_, (input, other))
