"""Lowering rules of the reductions (ops/reduction.py): sum, mean, prod, extrema and their
indices, norms, var/std, logsumexp, softmax, log_softmax, any/all.

`dims` attributes are already wrapped and sorted by the ops; the stable forms (max-shifted
softmax and logsumexp) follow the numpy kernels so values agree to rounding.
"""
import jax.numpy as jnp

from ...ops import reduction as R
from .table import register


def _ax(node):
    return tuple(node.attrs["dims"])


@register(R.SUM, R.SUM_DIM)
def _sum(ctx, node, x):
    return jnp.sum(x, axis=_ax(node), keepdims=node.attrs["keepdim"])


@register(R.MEAN, R.MEAN_DIM)
def _mean(ctx, node, x):
    return jnp.mean(x, axis=_ax(node), keepdims=node.attrs["keepdim"])


@register(R.PROD, R.PROD_DIM)
def _prod(ctx, node, x):
    return jnp.prod(x, axis=_ax(node), keepdims=node.attrs["keepdim"])


@register(R.PROD_EXCEPT)
def _prod_except(ctx, node, x):
    dims = tuple(node.attrs["dims"])
    nd = x.ndim
    tail = tuple(range(nd - len(dims), nd))
    moved = jnp.moveaxis(x, dims, tail)
    lead = moved.shape[:nd - len(dims)]
    flat = moved.reshape(lead + (-1,))
    ones = jnp.ones(lead + (1,), x.dtype)
    left = jnp.cumprod(jnp.concatenate([ones, flat[..., :-1]], -1), -1)
    right = jnp.flip(jnp.cumprod(jnp.flip(jnp.concatenate([flat[..., 1:], ones], -1), -1), -1),
                     -1)
    return jnp.moveaxis((left * right).reshape(moved.shape), tail, dims)


@register(R.AMAX, R.MAX_ALL)
def _amax(ctx, node, x):
    return jnp.max(x, axis=_ax(node), keepdims=node.attrs["keepdim"])


@register(R.AMIN, R.MIN_ALL)
def _amin(ctx, node, x):
    return jnp.min(x, axis=_ax(node), keepdims=node.attrs["keepdim"])


def _arg(f):
    def rule(ctx, node, x):
        dim, keepdim = node.attrs.get("dim"), node.attrs.get("keepdim", False)
        if x.ndim == 0:
            return jnp.zeros((), jnp.int64 if ctx.x64 else jnp.int32)
        if dim is None:
            r = f(x.reshape(-1))
            return r.reshape((1,) * x.ndim) if keepdim else r
        return f(x, axis=dim, keepdims=keepdim)
    return rule


register(R.ARGMAX)(_arg(jnp.argmax))
register(R.ARGMIN)(_arg(jnp.argmin))


def _sel(f):
    def rule(ctx, node, x):
        if x.ndim == 0:
            return x
        return f(x, axis=node.attrs["dim"], keepdims=node.attrs["keepdim"])
    return rule


register(R.MAX_DIM)(_sel(jnp.max))
register(R.MIN_DIM)(_sel(jnp.min))


@register(R.NORM)
def _norm(ctx, node, x):
    p, dims, keep = node.attrs["p"], _ax(node), node.attrs["keepdim"]
    if p == 2:
        return jnp.sqrt(jnp.sum(x * x, axis=dims, keepdims=keep))
    ax = jnp.abs(x)
    if p in (R.INF, -R.INF):
        return (jnp.max if p > 0 else jnp.min)(ax, axis=dims, keepdims=keep)
    if p == 0:
        return jnp.sum(ax != 0, axis=dims, keepdims=keep).astype(x.dtype)
    if p == 1:
        return jnp.sum(ax, axis=dims, keepdims=keep)
    return jnp.power(jnp.sum(jnp.power(ax, p), axis=dims, keepdims=keep), 1.0 / p)


@register(R.VAR)
def _var(ctx, node, x):
    a = node.attrs
    return jnp.var(x, axis=_ax(node), ddof=a["correction"], keepdims=a["keepdim"])


@register(R.STD)
def _std(ctx, node, x):
    a = node.attrs
    return jnp.std(x, axis=_ax(node), ddof=a["correction"], keepdims=a["keepdim"])


@register(R.LOGSUMEXP)
def _lse(ctx, node, x):
    dims, keep = _ax(node), node.attrs["keepdim"]
    if x.size == 0:
        return jnp.log(jnp.sum(jnp.exp(x), axis=dims, keepdims=keep))
    m = jnp.max(x, axis=dims, keepdims=True)
    m = jnp.where(jnp.isfinite(m), m, 0)
    r = jnp.log(jnp.sum(jnp.exp(x - m), axis=dims, keepdims=True)) + m
    return r if keep else jnp.squeeze(r, dims)


@register(R.SOFTMAX)
def _softmax(ctx, node, x):
    if x.ndim == 0:                  # 1, but nan for inf or nan (as the numpy kernel)
        return (x - x) + 1
    d = node.attrs["dim"]
    e = jnp.exp(x - jnp.max(x, axis=d, keepdims=True)) if x.size else x
    return e / jnp.sum(e, axis=d, keepdims=True)


@register(R.LOG_SOFTMAX)
def _log_softmax(ctx, node, x):
    if x.ndim == 0:                  # 0, but nan for inf or nan
        return x - x
    if x.size == 0:
        return x
    d = node.attrs["dim"]
    s = x - jnp.max(x, axis=d, keepdims=True)
    return s - jnp.log(jnp.sum(jnp.exp(s), axis=d, keepdims=True))


@register(R.ANY)
def _any(ctx, node, x):
    return jnp.any(x, axis=_ax(node), keepdims=node.attrs["keepdim"])


@register(R.ALL)
def _all(ctx, node, x):
    return jnp.all(x, axis=_ax(node), keepdims=node.attrs["keepdim"])
