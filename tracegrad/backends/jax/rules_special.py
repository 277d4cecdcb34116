"""Lowering rules of the special-function primitives (ops/special_prim.py, ops/special_more.py):
jax's own lgamma, digamma, polygamma, erfc, erf_inv, ndtri and log_ndtr, with the values at
the edges (zeros, poles, infinities) set to what the numpy kernels (and PyTorch) give, where
jax's differ: digamma(+-0) = -+inf, polygamma at poles and +-inf. Also `mode` (ops/mode.py,
by a stable sort) and the rejection-sampled draws of ops/random_dists.py (not lowered).
"""
import jax.numpy as jnp
import jax.scipy.special as jss
from jax import lax

from ...ops import special_prim as SP
from .table import register, simple


def _is_pole(x):
    return (x <= 0) & (jnp.floor(x) == x) & jnp.isfinite(x)


@register(SP.LGAMMA)
def _lgamma(ctx, node, x):
    # jax's float32 lgamma is ~5e-7 off at 1 and 2, where eager (and PyTorch) give exactly 0
    return jnp.where((x == 1) | (x == 2), jnp.zeros((), x.dtype), lax.lgamma(x))


simple(SP.ERFC, lax.erfc)
simple(SP.ERFINV, lax.erf_inv)


@register(SP.DIGAMMA)
def _digamma(ctx, node, x):
    return _polygamma(0, x)


@register(SP.POLYGAMMA)
def _polygamma_rule(ctx, node, x):
    return _polygamma(node.attrs["n"], x)


def _polygamma(n, x):
    inf = jnp.asarray(jnp.inf, x.dtype)
    nan = jnp.asarray(jnp.nan, x.dtype)
    if n == 0:
        v = lax.digamma(x)
        at_pole = jnp.where(x == 0, jnp.where(jnp.signbit(x), inf, -inf), nan)
        return jnp.where(_is_pole(x), at_pole, jnp.where(x == -jnp.inf, nan, v))
    sign = -1.0 if n % 2 == 0 else 1.0
    v = jss.polygamma(n, x)
    v = jnp.where(_is_pole(x), sign * inf, v)
    v = jnp.where(x == jnp.inf, jnp.zeros((), x.dtype) if n == 1 else nan, v)
    return jnp.where(x == -jnp.inf, nan if n == 1 else sign * inf, v)


from ...ops import special_more as SM  # noqa: E402


@register(SM.ENTR)
def _entr(ctx, node, x):
    r = jnp.where(x > 0, -x * jnp.log(jnp.where(x > 0, x, 1)), 0).astype(x.dtype)
    r = jnp.where(jnp.isnan(x), x, r)
    return jnp.where(x < 0, -jnp.inf, r).astype(x.dtype)


@register(SM.XLOG1PY, SM.XLOG1PY_SCALAR_SELF, SM.XLOG1PY_SCALAR_OTHER)
def _xlog1py(ctx, node, x, y):
    x, y = jnp.asarray(x), jnp.asarray(y)
    return jnp.where((x == 0) & ~jnp.isnan(y), jnp.zeros((), node.output.type.dtype.np),
                     x * jnp.log1p(y)).astype(node.output.type.dtype.np)


simple(SM.NDTRI, jss.ndtri)
simple(SM.LOG_NDTR, jss.log_ndtr)
simple(SM.SINC, jnp.sinc)


from ...ops.mode import MODE, MODE_INDEX  # noqa: E402  (ops.mode is also a function)


def _mode_positions(x, axis):
    """The jax twin of ops/mode.py's `mode_positions` (Note [Mode's ties]): kept axis."""
    moved = jnp.moveaxis(x, axis, -1)
    iota = lax.broadcasted_iota(jnp.int32, moved.shape, moved.ndim - 1)
    s, order = lax.sort((moved, iota), dimension=moved.ndim - 1, is_stable=True, num_keys=1)
    pos = iota
    differs = s[..., 1:] != s[..., :-1]
    ones = jnp.ones(moved.shape[:-1] + (1,), bool)
    starts = jnp.concatenate([ones, differs], axis=-1)
    ends = jnp.concatenate([differs, ones], axis=-1)
    run_start = lax.cummax(jnp.where(starts, pos, 0), axis=moved.ndim - 1)
    length = jnp.where(ends, pos - run_start + 1, 0)
    best = jnp.argmax(length, axis=-1)[..., None]
    idx = jnp.take_along_axis(order, best, axis=-1)
    return jnp.moveaxis(idx, -1, axis)


@register(MODE_INDEX)
def _mode_index(ctx, node, x):
    if x.ndim == 0:
        return jnp.zeros((), jnp.int64 if ctx.x64 else jnp.int32)
    idx = _mode_positions(x, node.attrs["dim"])
    return idx if node.attrs["keepdim"] else jnp.squeeze(idx, node.attrs["dim"])


@register(MODE)
def _mode_values(ctx, node, x):
    if x.ndim == 0:
        return x
    d = node.attrs["dim"]
    v = jnp.take_along_axis(x, _mode_positions(x, d), axis=d)
    return v if node.attrs["keepdim"] else jnp.squeeze(v, d)


from ...ops.random_dists import (POISSON, STANDARD_GAMMA, STANDARD_GAMMA_GRAD,  # noqa: E402
                                 BINOMIAL)
from .table import Unsupported  # noqa: E402


@register(POISSON, STANDARD_GAMMA, BINOMIAL)
def _rejection_draw(ctx, node, gen, params):
    # numpy's rejection samplers consume a data-dependent count of raw numbers: no host draw
    # of a fixed shape reproduces them, so the path runs on the numpy backend
    raise Unsupported(node.prim, "a rejection sampler (its raw draws depend on the values)")


from ...ops import special_bessel as SB  # noqa: E402


def _bessel_rule(f, scaled, odd):
    def rule(ctx, node, x):
        v = f(x)
        if odd:
            v = jnp.where(x == 0, jnp.zeros((), x.dtype), v)       # +0 at -0
        if scaled:          # PyTorch (and the numpy kernels): 0 at +-inf, signed for i1e
            zero = jnp.zeros((), x.dtype)
            return jnp.where(jnp.isinf(x), zero * jnp.sign(x) if odd else zero, v)
        return jnp.where(jnp.isinf(x), jnp.asarray(jnp.nan, x.dtype), v)
    return rule


register(SB.I0)(_bessel_rule(jss.i0, False, False))
register(SB.I1)(_bessel_rule(jss.i1, False, True))
register(SB.I0E)(_bessel_rule(jss.i0e, True, False))
register(SB.I1E)(_bessel_rule(jss.i1e, True, True))


@register(STANDARD_GAMMA_GRAD)
def _standard_gamma_grad(ctx, node, alpha, x):
    # a series summed until each element's terms are negligible (a data-dependent length)
    raise Unsupported(node.prim, "a series of data-dependent length")
