"""The tensor math weight and spectral normalization share (old hook-based and new
parametrization-based forms): `norm_except_dim`, `_weight_norm`, and spectral norm's
matrix view and power iteration, as PyTorch computes them."""
from ... import ops as O
from ..._mode import no_grad
from .. import functional as F


def norm_except_dim(v, pow=2, dim=0):
    """The `pow`-norm of `v` over every dimension but `dim`, kept as size-1 dimensions
    (`dim=-1`: over all of `v`, a 0-d tensor)."""
    if dim == -1:
        return v.norm(pow)
    dim = dim + v.ndim if dim < 0 else dim
    return v.norm(pow, dim=tuple(d for d in range(v.ndim) if d != dim), keepdim=True)


def _weight_norm(v, g, dim=0):
    """w = v * (g / ||v||), the norm over every dimension but `dim`."""
    return O.mul(v, O.div(g, norm_except_dim(v, 2, dim)))


def weight_to_matrix(weight, dim):
    """`weight` as a matrix whose rows run along `dim`."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.flatten(1)


def power_iteration_(weight_mat, u, v, n, eps, v_first=False):
    """`n` steps of the power method on `weight_mat`, updating the buffers `u`, `v` in
    place (no gradient): u = normalize(W v), v = normalize(W^T u) (`v_first`: the other
    order, as the hook-based spectral_norm does)."""
    with no_grad():
        for _ in range(n):
            if v_first:
                v.copy_(F.normalize(O.matmul(weight_mat.t(), u), dim=0, eps=eps))
                u.copy_(F.normalize(O.matmul(weight_mat, v), dim=0, eps=eps))
            else:
                u.copy_(F.normalize(O.matmul(weight_mat, v), dim=0, eps=eps))
                v.copy_(F.normalize(O.matmul(weight_mat.t(), u), dim=0, eps=eps))
