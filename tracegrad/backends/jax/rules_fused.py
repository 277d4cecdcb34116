"""Lowering rules of the fused primitives: products with a bias (ops/linear.py: `linear`,
`linear_nobias`, `addmm`, `mm_tn`, and the reshapes `unsafe_view` / `squeeze_row` around
them), the one-node gradients of softmax, log_softmax and gelu (ops/fused_backward.py),
`nll_loss_backward` (ops/loss.py) and the number overloads `mul_scalar` / `div_scalar`.

Each follows its kernel's order of operations; products ask for full float precision
(`Precision.HIGHEST`, as rules_misc.py). `dropout_noise` has no rule: it is a random draw kept
on the host (Note [Host draws] in lower.py).
"""
import math

import jax.numpy as jnp
from jax import lax

from ...ops.fused_backward import GELU_BACKWARD, LOG_SOFTMAX_BACKWARD, SOFTMAX_BACKWARD
from ...ops.linear import ADDMM, LINEAR, LINEAR_NOBIAS, MM_TN, SQUEEZE_ROW, UNSAFE_VIEW
from ...ops.loss import DIV_SCALAR, MUL_SCALAR, NLL_LOSS2D_BACKWARD, NLL_LOSS_BACKWARD
from .table import register, simple

_HI = lax.Precision.HIGHEST

simple(MUL_SCALAR, jnp.multiply)
simple(DIV_SCALAR, jnp.true_divide)


@register(UNSAFE_VIEW, SQUEEZE_ROW)
def _reshape(ctx, node, x):
    return jnp.reshape(x, tuple(node.attrs["shape"]))


@register(LINEAR)
def _linear(ctx, node, b, x, w):
    return jnp.matmul(x, w.T, precision=_HI) + b


@register(LINEAR_NOBIAS)
def _linear_nobias(ctx, node, x, w):
    return jnp.matmul(x, w.T, precision=_HI)


@register(MM_TN)
def _mm_tn(ctx, node, a, b):
    return jnp.matmul(a.T, b, precision=_HI)


@register(ADDMM)
def _addmm(ctx, node, c, a, b):
    beta, alpha = node.attrs["beta"], node.attrs["alpha"]
    out = jnp.matmul(a, b, precision=_HI)
    if alpha != 1:
        out = out * jnp.asarray(alpha, out.dtype)
    if beta == 0:                   # input ignored: its nan and inf do not propagate
        return out
    return out + (c if beta == 1 else c * jnp.asarray(beta, c.dtype))


def _sum_dim(x, d):
    """numpy's `add.reduce(x, axis=d, keepdims=True)`: a 0-d x is its own sum."""
    return x if x.ndim == 0 else jnp.sum(x, axis=d, keepdims=True)


@register(LOG_SOFTMAX_BACKWARD)
def _log_softmax_backward(ctx, node, g, y):
    return g - jnp.exp(y) * _sum_dim(g, node.attrs["dim"])


@register(SOFTMAX_BACKWARD)
def _softmax_backward(ctx, node, g, y):
    return y * (g - _sum_dim(g * y, node.attrs["dim"]))


_SQRT_HALF, _SQRT_2_PI = 1.0 / math.sqrt(2.0), math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI, _A = 1.0 / math.sqrt(2.0 * math.pi), 0.044715


@register(GELU_BACKWARD)
def _gelu_backward(ctx, node, g, x):
    if node.attrs["approximate"] == "tanh":
        t = jnp.tanh((x + x * x * x * _A) * _SQRT_2_PI)
        du = ((x * x) * (3 * _A) + 1.0) * _SQRT_2_PI
        d = (t + 1.0) * 0.5 + (x * 0.5) * (1.0 - t * t) * du
    else:
        cdf = (lax.erf(x * _SQRT_HALF) + 1.0) * 0.5
        pdf = jnp.exp((x * x) * -0.5) * _INV_SQRT_2PI
        d = cdf + x * pdf
    return g * d


@register(NLL_LOSS_BACKWARD, NLL_LOSS2D_BACKWARD)
def _nll_backward(ctx, node, g, t, w):
    """ops/loss.py's `_nll_backward_kernel`: `-w[t_i] * g` (over the summed weights for
    'mean') at each row's target class, for every layout of the scores."""
    a = node.attrs
    shape = tuple(a["shape"])
    if a["reduction"] == "none" and len(shape) != 2:
        g = g.reshape(-1)
    rows_t = t.reshape(-1) if len(shape) != 2 else t
    c = shape[-1] if len(shape) < 3 else shape[1]
    rows = _nll_backward_rows(g, rows_t, w, a, (rows_t.shape[0], c))
    if len(shape) <= 2:
        return rows.reshape(shape)
    moved = rows.reshape((shape[0],) + shape[2:] + (c,))
    return jnp.moveaxis(moved, -1, 1)


def _nll_backward_rows(g, t, w, a, shape):
    valid = t != a["ignore_index"]
    safe = jnp.where(valid, t, 0)
    wr = jnp.asarray(w)[safe] if hasattr(w, "shape") and jnp.ndim(w) else jnp.ones(t.shape)
    wr = jnp.where(valid, wr, 0)
    coef = -wr.astype(g.dtype)
    if a["reduction"] == "mean":
        coef = coef / jnp.sum(wr.astype(g.dtype))
    vals = jnp.where(valid, coef * g, 0).astype(g.dtype)
    return jnp.zeros(shape, g.dtype).at[jnp.arange(shape[0]), safe].set(vals)

