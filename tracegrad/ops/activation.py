"""Activation primitives the nn layers need beyond `elementwise.py`: `silu` (x * sigmoid(x),
PyTorch's SiluBackward0) and its in-place variant `silu_`.

The VJP `g * s * (1 + x * (1 - s))`, s = sigmoid(x), is written in tracegrad ops, so it
differentiates again.
"""
import numpy as np

from .._dispatch import dispatch
from . import elementwise as E
from . import shape_rules as SR
from .primitive import Primitive, inplace_of, promote_float


def _silu_kernel(x):
    with np.errstate(all="ignore"):
        return x / (1.0 + np.exp(-x))


def _silu_vjp(g, ins, out, n):
    x = ins[0]
    s = E.sigmoid(x)
    return (E.mul(g, E.mul(s, E.add(E.mul(x, E.rsub(s, 1.0)), 1.0))),)


SILU = Primitive("silu", _silu_kernel, vjp=_silu_vjp, saves=(0,), dtype_rule=promote_float,
                 grad_fn_name="SiluBackward0", elementwise=True, shape_rule=SR.same)
SILU_ = inplace_of(SILU)


def silu(input):
    """`input * sigmoid(input)` (one node, SiluBackward0)."""
    return dispatch(SILU, (input,))


def silu_(input):
    """In place `silu` (bumps the version; grad_fn SiluBackward0 as in PyTorch)."""
    return dispatch(SILU_, (input,))
