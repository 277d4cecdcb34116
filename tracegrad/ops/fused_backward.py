"""Backward primitives of softmax, log_softmax and gelu: one dispatch per gradient.

Note [Fused backward of fused forwards]
softmax, log_softmax and gelu are single forward primitives; their gradients used to be
composites of three to ten dispatched ops, which on small tensors cost far more than the
arithmetic. Here each gradient is one primitive, named as PyTorch names the node a
`create_graph=True` backward records (`SoftmaxBackwardDataBackward0`,
`LogSoftmaxBackwardDataBackward0`, `GeluBackwardBackward0`). Each has its own VJP written with
tracegrad ops, so gradients of gradients (and of those) still come from the ordinary
machinery, eagerly and in traced programs. Kernels compute what the composite rules they
replace computed, in the same order of operations:
    log_softmax: g - exp(y) * sum(g, dim)            (y = log_softmax(x))
    softmax:     y * (g - sum(g * y, dim))           (y = softmax(x))
    gelu:        g * gelu'(x)                         (exact erf form or the tanh form)
"""
import math

import numpy as np

from .._dispatch import dispatch
from . import elementwise as E
from . import reduction as R
from . import shape_rules as SR
from .primitive import Primitive, promote


_quiet = E._quiet      # numpy's floating-point warnings off inside the kernel


# ---- log_softmax ----
@_quiet
def _log_softmax_backward_kernel(g, y, dim):
    s = np.add.reduce(g, axis=dim, keepdims=True)
    return np.subtract(g, np.multiply(np.exp(y), s))


def _log_softmax_backward_vjp(gg, ins, out, n):
    g, y = ins
    d = n.attrs["dim"]
    ey = E.exp(y)
    ag, ay = n.needs
    # r = g - exp(y) * sum(g): linear in g; y enters through exp(y)
    rg = E.sub(gg, R.sum(E.mul(gg, ey), d, keepdim=True)) if ag else None
    ry = E.neg(E.mul(E.mul(gg, ey), R.sum(g, d, keepdim=True))) if ay else None
    return rg, ry


LOG_SOFTMAX_BACKWARD = Primitive(
    "log_softmax_backward", _log_softmax_backward_kernel, vjp=_log_softmax_backward_vjp,
    saves=(0, 1), dtype_rule=promote, grad_fn_name="LogSoftmaxBackwardDataBackward0",
    shape_rule=SR.same, doc="see Note [Fused backward of fused forwards]")


def log_softmax_backward(g, y, dim):
    """The gradient of `y = log_softmax(x, dim)` given the output gradient `g`."""
    return dispatch(LOG_SOFTMAX_BACKWARD, (g, y), {"dim": dim})


# ---- softmax ----
@_quiet
def _softmax_backward_kernel(g, y, dim):
    s = np.add.reduce(np.multiply(g, y), axis=dim, keepdims=True)
    return np.multiply(y, np.subtract(g, s))


def _softmax_backward_vjp(gg, ins, out, n):
    g, y = ins
    d = n.attrs["dim"]
    ag, ay = n.needs
    # r = y * (g - sum(g * y)): the map g -> r is self-adjoint
    rg = softmax_backward(gg, y, d) if ag else None
    ry = None
    if ay:
        ry = E.sub(E.mul(gg, E.sub(g, R.sum(E.mul(g, y), d, keepdim=True))),
                   E.mul(g, R.sum(E.mul(gg, y), d, keepdim=True)))
    return rg, ry


SOFTMAX_BACKWARD = Primitive(
    "softmax_backward", _softmax_backward_kernel, vjp=_softmax_backward_vjp, saves=(0, 1),
    dtype_rule=promote, grad_fn_name="SoftmaxBackwardDataBackward0", shape_rule=SR.same,
    doc="see Note [Fused backward of fused forwards]")


def softmax_backward(g, y, dim):
    """The gradient of `y = softmax(x, dim)` given the output gradient `g`."""
    return dispatch(SOFTMAX_BACKWARD, (g, y), {"dim": dim})


# ---- gelu ----
_SQRT_HALF, _SQRT_2_PI = 1.0 / math.sqrt(2.0), math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_A = 0.044715


@_quiet
def _gelu_backward_kernel(g, x, approximate):
    if approximate == "tanh":
        t = np.tanh((x + x * x * x * _A) * _SQRT_2_PI)
        du = ((x * x) * (3 * _A) + 1.0) * _SQRT_2_PI
        d = (t + 1.0) * 0.5 + (x * 0.5) * (1.0 - t * t) * du
    else:
        cdf = (E._erf_kernel(x * _SQRT_HALF) + 1.0) * 0.5
        pdf = np.exp((x * x) * -0.5) * _INV_SQRT_2PI
        d = cdf + x * pdf
    return g * d


def _gelu_second(x, approximate):
    """gelu''(x), written with tracegrad ops."""
    if approximate == "tanh":
        t = E.tanh(E.mul(E.add(x, E.mul(E.mul(E.mul(x, x), x), _A)), _SQRT_2_PI))
        du = E.mul(E.add(E.mul(E.mul(x, x), 3 * _A), 1.0), _SQRT_2_PI)
        inner = E.add(E.sub(du, E.mul(E.mul(x, t), E.mul(du, du))),
                      E.mul(E.mul(x, x), 3 * _A * _SQRT_2_PI))
        return E.mul(E.sub(1.0, E.mul(t, t)), inner)
    pdf = E.mul(E.exp(E.mul(E.mul(x, x), -0.5)), _INV_SQRT_2PI)
    return E.mul(pdf, E.sub(2.0, E.mul(x, x)))


def _gelu_backward_vjp(gg, ins, out, n):
    g, x = ins
    approximate = n.attrs["approximate"]
    ag, ax = n.needs
    rg = gelu_backward(gg, x, approximate) if ag else None
    rx = E.mul(E.mul(gg, g), _gelu_second(x, approximate)) if ax else None
    return rg, rx


GELU_BACKWARD = Primitive(
    "gelu_backward", _gelu_backward_kernel, vjp=_gelu_backward_vjp, saves=(0, 1),
    dtype_rule=promote, grad_fn_name="GeluBackwardBackward0", shape_rule=SR.same,
    doc="see Note [Fused backward of fused forwards]")


def gelu_backward(g, x, approximate="none"):
    """The gradient of `gelu(x, approximate)` given the output gradient `g`."""
    return dispatch(GELU_BACKWARD, (g, x), {"approximate": approximate})
