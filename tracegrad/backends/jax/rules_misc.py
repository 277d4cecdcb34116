"""Lowering rules of linear algebra, losses, convolution patches and creation primitives
(ops/linalg.py, ops/loss.py, ops/conv.py, ops/creation.py, the tracer's `constant`).

Matrix products ask XLA for full float precision (`Precision.HIGHEST`; CPU always computes
so, accelerators would otherwise round float32 operands to bfloat16). Random draws have no
rule here: they stay on the host (lower.py, Note [Host draws]).
"""
import jax.numpy as jnp
from jax import lax

from ...tracing import CONSTANT
from ...ops import conv as C
from ...ops import creation as K
from ...ops import linalg as L
from ...ops import loss as LS
from ...autograd import function as _function
from .table import register, simple

_HI = lax.Precision.HIGHEST


@register(L.MATMUL, L.MM)
def _matmul(ctx, node, x, y):
    return jnp.matmul(x, y, precision=_HI)


@register(L.DOT)
def _dot(ctx, node, x, y):
    return jnp.dot(x, y, precision=_HI)


@register(L.EINSUM)
def _einsum(ctx, node, *xs):
    return jnp.einsum(node.attrs["eq"], *xs, precision=_HI)


@register(LS.NLL_LOSS, LS.NLL_LOSS2D)
def _nll(ctx, node, scores, t, w):
    """Scores (C,), (M, C) or (N, C, d1, ...) as (M, C) rows, classes last (ops/loss.py)."""
    a = node.attrs
    shape = t.shape
    if scores.ndim == 1:
        scores, t = scores.reshape(1, -1), t.reshape(1)
    elif scores.ndim > 2:
        scores, t = jnp.moveaxis(scores, 1, -1).reshape(-1, scores.shape[1]), t.reshape(-1)
    m, c = scores.shape
    valid = t != a["ignore_index"]
    ctx.check(jnp.any(((t < 0) | (t >= c)) & valid))      # eager raises IndexError
    safe = jnp.where(valid, t, 0)
    wr = jnp.asarray(w)[safe] if hasattr(w, "shape") and jnp.ndim(w) else jnp.ones(t.shape)
    wr = jnp.where(valid, wr, 0).astype(scores.dtype)
    picked = scores[jnp.arange(m), safe]
    per = jnp.where(valid, -picked * wr, 0).astype(scores.dtype)
    if a["reduction"] == "none":
        return per.reshape(shape)
    total = jnp.sum(per)
    return total if a["reduction"] == "sum" else total / jnp.sum(wr)


@register(LS.MSE_LOSS)
def _mse(ctx, node, x, y):
    d = jnp.subtract(x, y)
    sq = d * d
    r = node.attrs["reduction"]
    if r == "none":
        return sq
    return jnp.sum(sq) if r == "sum" else jnp.mean(sq)


@register(C.IM2COL)
def _im2col(ctx, node, x):
    a = node.attrs
    n, c = x.shape[:2]
    (kh, kw), (sh, sw), (dh, dw) = a["kernel_size"], a["stride"], a["dilation"]
    oh, ow = C.out_size(x.shape[2:], a["kernel_size"], a["stride"], a["padding"],
                        a["dilation"])
    xp = jnp.pad(x, ((0, 0), (0, 0)) + tuple(tuple(p) for p in a["padding"]))
    cols = [xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            for i in range(kh) for j in range(kw)]
    # (kh*kw, n, c, oh, ow) -> (n, c, kh*kw, oh, ow) -> (n, c*kh*kw, oh*ow)
    return jnp.stack(cols, 2).reshape(n, c * kh * kw, oh * ow)


@register(C.COL2IM)
def _col2im(ctx, node, cols):
    a = node.attrs
    (kh, kw), (sh, sw), (dh, dw) = a["kernel_size"], a["stride"], a["dilation"]
    (pt, pb), (pl, pr) = a["padding"]
    h, w = a["output_size"]
    oh, ow = C.out_size(a["output_size"], a["kernel_size"], a["stride"], a["padding"],
                        a["dilation"])
    n, c = cols.shape[0], cols.shape[1] // (kh * kw)
    cols = cols.reshape(n, c, kh, kw, oh, ow)
    out = jnp.zeros((n, c, h + pt + pb, w + pl + pr), cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out = out.at[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                         j * dw:j * dw + sw * (ow - 1) + 1:sw].add(cols[:, :, i, j])
    return out[:, :, pt:pt + h, pl:pl + w]


@register(K.FULL)
def _full(ctx, node):
    a = node.attrs
    return jnp.full(tuple(a["shape"]), a["fill_value"], dtype=a["dtype"])


@register(CONSTANT)
def _constant(ctx, node):
    return jnp.asarray(node.attrs["value"])


# once_differentiable's copies (Note [once_differentiable in compiled code]): the value of
# operand 0; what they mean for autograd matters only when replayed through eager dispatch
simple(_function.ONCE_DIFFERENTIABLE, lambda x, *grad_outputs: x)
simple(_function._CONSTANT, lambda x: x)
