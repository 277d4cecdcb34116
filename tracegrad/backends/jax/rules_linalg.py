"""Lowering rules of the linalg primitives: the solvers (ops/linalg_solvers.py) to
jax.numpy.linalg and jax.lax.linalg; the decompositions (qr, eigh, svd), matrix_exp and
LAPACK's info as a host call to their numpy kernel.

The eager kernels raise LinAlgError where LAPACK reports an exact zero pivot (inv, solve) or a
pivot that is not positive (cholesky) (Note [LAPACK failures] in ops/linalg_kernels.py). A
jitted program cannot raise, so each rule records a runtime check (`ctx.check`): an exact
zero on the diagonal of jax's LU factor, or a non-finite result from finite input. A call
where it holds re-runs on the numpy backend, which raises eager's error (or, where only the
check was too cautious, returns eager's result). Batch dimensions are broadcast first:
jax.lax.linalg wants equal batch shapes.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...ops import linalg_decomp as LD
from ...ops import linalg_functions as LF
from ...ops import linalg_solvers as LS
from .table import register


def _diag(a):
    return jnp.diagonal(a, axis1=-2, axis2=-1)


def _nonfinite_from_finite(a, r):
    return jnp.all(jnp.isfinite(a)) & ~jnp.all(jnp.isfinite(r))


def _zero_pivot(a):
    if a.shape[-1] == 0:
        return jnp.asarray(False)
    lu = lax.linalg.lu(a)[0]
    return jnp.any(_diag(lu) == 0)


def _broadcast(a, b):
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return (jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:]))


@register(LS.INV)
def _inv(ctx, node, a):
    r = jnp.linalg.inv(a)
    ctx.check(_zero_pivot(a) | _nonfinite_from_finite(a, r))
    return r


@register(LS.DET)
def _det(ctx, node, a):
    return jnp.linalg.det(a)


@register(LS.SLOGDET_SIGN)
def _sign(ctx, node, a):
    return jnp.linalg.slogdet(a)[0]


@register(LS.LOGABSDET)
def _logabsdet(ctx, node, a):
    return jnp.linalg.slogdet(a)[1]


@register(LS.SOLVE)
def _solve(ctx, node, a, b):
    dt = jnp.result_type(a, b)
    a, b = _broadcast(a.astype(dt), b.astype(dt))
    r = jnp.linalg.solve(a, b)
    ctx.check(_zero_pivot(a) | _nonfinite_from_finite(a, r))
    return r


@register(LS.CHOLESKY)
def _cholesky(ctx, node, a):
    r = lax.linalg.cholesky(a, symmetrize_input=False)     # the lower triangle, as numpy
    ctx.check(~jnp.all(jnp.isfinite(_diag(r))))      # cholesky_ex's NaNs: eager's too
    return jnp.tril(r)


@register(LS.SOLVE_TRIANGULAR)
def _solve_triangular(ctx, node, a, b):
    dt = jnp.result_type(a, b)
    a, b = _broadcast(a.astype(dt), b.astype(dt))
    return lax.linalg.triangular_solve(a, b, left_side=True, lower=not node.attrs["upper"],
                                       unit_diagonal=node.attrs["unitriangular"])


# ---- decompositions, matrix_exp and LAPACK's info: the numpy kernel on the host ----
# qr, eigh and svd factors are unique only up to signs (and eigh's eigenvectors up to a basis
# of a repeated eigenvalue's space); jax's own routines may choose differently from the
# LAPACK calls eager makes, so the rule runs eager's kernel through `jax.pure_callback`: a
# compiled program's factors are eager's exactly.
def _host(ctx, node, a):
    want = node.output.type
    shape, dt = tuple(want.shape), np.dtype(want.dtype.np)
    attrs = node.attrs

    def run(x):
        try:
            return np.asarray(node.prim.kernel(np.array(x), **attrs), dtype=dt), np.False_
        except Exception:        # noqa: BLE001 -- svd of a NaN: the numpy re-run raises it
            return np.zeros(shape, dt), np.True_
    out, failed = jax.pure_callback(
        run, (jax.ShapeDtypeStruct(shape, dt), jax.ShapeDtypeStruct((), np.bool_)), a)
    ctx.check(failed)
    return out


# matrix_exp's kernel computes in float64 (Pade, then squaring) whatever the dtype
from ...ops import lu_factorization as LUF  # noqa: E402
for _p in (LD.QR, LD.EIGH, LD.SVD, LF.MATRIX_EXP, LS.INV_INFO, LS.CHOLESKY_INFO,
           LUF.LU_FACTOR, LUF.LU_PIVOTS):
    register(_p)(_host)


@register(LUF.LU_ROW_ORDER)
def _lu_row_order(ctx, node, piv):
    # the pivots' row swaps replayed in jnp (an int64 host result would meet jax's int32
    # canonicalization when x64 is off)
    m, inverse = node.attrs["m"], node.attrs["inverse"]
    p = piv.astype(jnp.int32) - 1
    rows = jnp.arange(m, dtype=jnp.int32)
    perm = jnp.broadcast_to(rows, p.shape[:-1] + (m,))
    for j in range(p.shape[-1]):
        pj = p[..., j:j + 1]
        a = perm[..., j:j + 1]
        b = jnp.take_along_axis(perm, pj, -1)
        perm = jnp.where(rows == j, b, jnp.where(rows == pj, a, perm))
    if inverse:
        perm = jnp.argsort(perm, axis=-1)
    return perm.astype(jnp.int64)
register(LD.QR_R_ONLY)(lambda ctx, node, r: r)
