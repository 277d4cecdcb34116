"""Lowering rules of the primitives of ops/elementwise_more.py (signbit, copysign, gcd, lcm,
nextafter, heaviside, frexp's exponent: each one jnp call as the numpy kernel) and of
ops/shape_more.py's `unfold` view (a gather of the positions its kernel reads) and of
ops/scan_more.py (the running extremes' indices, logcumsumexp) and ops/igamma_prim.py."""
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...ops import elementwise_more as EM
from ...ops import igamma_prim as IG
from ...ops import scan_more as SC
from ...ops import shape_more as SM
from .table import register, simple

simple(EM.SIGNBIT, lambda x: jnp.signbit(x.astype(jnp.int8) if x.dtype == jnp.bool_ else x))
for _p, _f in ((EM.GCD, jnp.gcd), (EM.LCM, jnp.lcm), (EM.NEXTAFTER, jnp.nextafter),
               (EM.COPYSIGN, jnp.copysign)):
    simple(_p, _f)          # (the in-place forms lower as these)
simple(EM.HEAVISIDE, lambda x, v: jnp.where(x == 0, v, x > 0).astype(jnp.result_type(x, v)))
simple(EM.FREXP_EXPONENT, lambda x: jnp.frexp(x)[1].astype(jnp.int32))


@register(SM.UNFOLD)
def _unfold(ctx, node, x):
    # the flat positions the windows read, found with the numpy kernel at lowering time
    a = node.attrs
    pos = np.asarray(SM.UNFOLD.kernel(np.arange(x.size).reshape(x.shape), **a))
    return x.reshape(-1)[jnp.asarray(pos.reshape(-1))].reshape(pos.shape)


def _extreme_indices(better):
    def rule(ctx, node, x):
        d = node.attrs["dim"]
        if x.ndim == 0:
            return jnp.zeros((), jnp.int64)
        acc = lax.associative_scan(better, x, axis=d)      # NaN propagates, as numpy's
        hit = x == acc
        if jnp.issubdtype(x.dtype, jnp.floating):
            hit = hit | jnp.isnan(x)
        shape = [1] * x.ndim
        shape[d] = x.shape[d]
        pos = jnp.where(hit, jnp.arange(x.shape[d]).reshape(shape), 0)
        return lax.associative_scan(jnp.maximum, pos, axis=d).astype(jnp.int64)
    return rule


register(SC.CUMMAX_INDICES)(_extreme_indices(jnp.maximum))
register(SC.CUMMIN_INDICES)(_extreme_indices(jnp.minimum))


@register(SC.LOGCUMSUMEXP)
def _logcumsumexp(ctx, node, x):
    if x.ndim == 0:
        return x
    d = node.attrs["dim"]
    if x.dtype == jnp.float16:
        return lax.cumlogsumexp(x.astype(jnp.float32), axis=d).astype(jnp.float16)
    return lax.cumlogsumexp(x, axis=d)


simple(IG.IGAMMA, lax.igamma)
simple(IG.IGAMMAC, lax.igammac)
