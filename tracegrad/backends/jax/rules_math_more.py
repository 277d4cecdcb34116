"""Lowering rules of the elementwise primitives of ops/elementwise_more.py: signbit, copysign, gcd,
lcm, nextafter, heaviside and frexp's exponent, each one jnp call as the numpy kernel."""
import jax.numpy as jnp

from ...ops import elementwise_more as EM
from .table import simple

simple(EM.SIGNBIT, lambda x: jnp.signbit(x.astype(jnp.int8) if x.dtype == jnp.bool_ else x))
for _p, _f in ((EM.GCD, jnp.gcd), (EM.LCM, jnp.lcm), (EM.NEXTAFTER, jnp.nextafter),
               (EM.COPYSIGN, jnp.copysign)):
    simple(_p, _f)          # (the in-place forms lower as these)
simple(EM.HEAVISIDE, lambda x, v: jnp.where(x == 0, v, x > 0).astype(jnp.result_type(x, v)))
simple(EM.FREXP_EXPONENT, lambda x: jnp.frexp(x)[1].astype(jnp.int32))
