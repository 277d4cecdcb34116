"""LU factorization with partial pivoting: `torch.lu` (`pivot=True`, `get_infos`),
`linalg.lu_factor`, `lu_unpack` and `lu_solve` (`lu` and `lu_solve` warn once, deprecated as
in PyTorch).

Two primitives on one numpy kernel (LAPACK getrf's algorithm: at each column the row of
largest magnitude, first on ties, swapped up; batched over leading dimensions): `lu_factor`
(the packed L\\U matrix, differentiable) and `lu_pivots` (LAPACK's 1-based int32 pivots,
never differentiable); `lu_row_order` turns pivots into a row permutation. The gradient of a
square factorization A = P L U is PyTorch's:
    gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T,
written with `solve_triangular`, so it differentiates again; a non-square one raises
NotImplementedError in backward. `lu_unpack` and `lu_solve` compose tril/triu, gather and
`solve_triangular`, differentiable in LU_data and B. In compiled programs the JAX backend
runs the numpy kernel on the host (as the other decompositions), so pivots match eager.
Where a pivot is exactly zero the column is left unscaled and `get_infos` reports it, as
LAPACK; numpy's elimination may round differently from LAPACK's blocked one.
"""
import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradNotImplementedError, TracegradRuntimeError, op_error
from . import creation as C
from . import elementwise as E
from . import shape as S
from .primitive import Primitive
from .return_types import copy_out, named

__all__ = ["lu", "lu_unpack", "lu_solve"]


def _factor(a):
    m, n = a.shape[-2:]
    k = min(m, n)
    A = np.array(a, copy=True).reshape((-1, m, n))
    piv = np.zeros((A.shape[0], k), np.int32)
    rows = np.arange(A.shape[0])
    with np.errstate(all="ignore"):
        for j in range(k):
            p = j + np.argmax(np.abs(A[:, j:, j]), axis=1)
            piv[:, j] = p + 1
            top = A[rows, j, :].copy()
            A[rows, j, :] = A[rows, p, :]
            A[rows, p, :] = top
            d = A[:, j, j]
            scale = np.where(d == 0, 1, d)[:, None]
            A[:, j + 1:, j] = A[:, j + 1:, j] / scale
            A[:, j + 1:, j + 1:] -= A[:, j + 1:, j:j + 1] * A[:, j:j + 1, j + 1:]
    return A.reshape(a.shape), piv.reshape(a.shape[:-2] + (k,))


def _lu_kernel(a):
    return _factor(a)[0]


def _pivots_kernel(a):
    return _factor(a)[1]


def _row_order_kernel(piv, m, inverse):
    """perm with (P^T A)[i] = A[perm[i]]; `inverse`: inv with inv[perm[i]] = i."""
    p = np.asarray(piv).reshape((-1, piv.shape[-1])).astype(np.int64) - 1
    out = np.tile(np.arange(m), (p.shape[0], 1))
    rows = np.arange(p.shape[0])
    for j in range(p.shape[1]):
        a, b = out[rows, j].copy(), out[rows, p[:, j]].copy()
        out[rows, j], out[rows, p[:, j]] = b, a
    if inverse:
        out = np.argsort(out, axis=-1)
    return out.reshape(piv.shape[:-1] + (m,))


def _tri_parts(LU):
    n = LU.shape[-1]
    eye = C.eye(n, dtype=LU.dtype)
    from .structure import tril, triu
    return E.add(tril(LU, -1), eye), triu(LU)


def _lu_vjp(g, ins, out, n):
    from .linalg_solvers import solve_triangular
    from .structure import tril, triu
    A = ins[0]
    m, k = A.shape[-2:]
    if m != k:
        raise op_error(TracegradNotImplementedError, "lu", "the gradient of a non-square LU "
                       "factorization is not implemented", "Factor a square matrix.")
    L, U = _tri_parts(out)
    phi = E.add(tril(S.transpose(L, -2, -1) @ tril(g, -1), -1),
                triu(triu(g) @ S.transpose(U, -2, -1)))
    X = solve_triangular(S.transpose(L, -2, -1), phi, upper=True, unitriangular=True)
    Y = solve_triangular(S.transpose(U, -2, -1), X, upper=False, left=False)
    return (_rows(Y, _order(A, inverse=True)),)


def _shape_same(shapes, attrs):
    return tuple(shapes[0])


def _pivot_shape(shapes, attrs):
    s = shapes[0]
    return tuple(s[:-2]) + (min(s[-2], s[-1]),)


def _order_shape(shapes, attrs):
    return tuple(shapes[0][:-1]) + (attrs["m"],)


LU_FACTOR = Primitive("lu_factor", _lu_kernel, vjp=_lu_vjp, saves=(0,), saves_out=True,
                      shape_rule=_shape_same, grad_fn_name="LinalgLuFactorExBackward0")
LU_PIVOTS = Primitive("lu_pivots", _pivots_kernel, nondiff=True, shape_rule=_pivot_shape)
LU_ROW_ORDER = Primitive("lu_row_order", _row_order_kernel, nondiff=True,
                         shape_rule=_order_shape)


def _order(A, inverse, piv=None):
    if piv is None:
        piv = dispatch(LU_PIVOTS, (A.detach(),))
    return dispatch(LU_ROW_ORDER, (piv,), {"m": A.shape[-2], "inverse": inverse})


def _rows(Y, order):
    """Y's rows taken in `order` (batched): out[..., r, :] = Y[..., order[r], :]."""
    from .gather_scatter import gather
    idx = S.expand(S.unsqueeze(order, -1), tuple(order.shape) + (Y.shape[-1],))
    return gather(Y, -2, idx)


def _check(op, A):
    from .linalg_solvers import _check_float, _check_matrix
    _check_matrix(op, A)
    _check_float(op, A)


def _infos(LU, k):
    from .. import _dtype as D
    from . import reduction as R
    from .diagonal_view import diagonal
    if k == 0:
        return C.zeros(tuple(LU.shape[:-2]), dtype=D.int32)
    d = diagonal(LU[..., :k, :k], 0, -2, -1)
    first = R.amin(E.where(E.eq(d, 0), E.add(C.arange(k), 1), k + 1), -1)
    return E.where(E.eq(first, k + 1), 0, first).to(D.int32)


def lu(A, pivot=True, get_infos=False, out=None):
    """(A_LU, pivots[, infos]): A = P L U packed, LAPACK's 1-based int32 pivots and, with
    `get_infos`, each matrix's info (0, or k + 1 for the first exactly zero pivot k)."""
    from .linalg_more import _warn_once
    _warn_once("lu", "torch.lu is deprecated in favor of torch.linalg.lu_factor / "
               "torch.linalg.lu_factor_ex and will be removed in a future PyTorch release.")
    return _lu(A, pivot, get_infos, out)


def _lu(A, pivot, get_infos, out):
    _check("lu", A)
    if not pivot:
        raise op_error(TracegradRuntimeError, "lu", "LU without pivoting is not implemented "
                       "on the CPU")
    LU = dispatch(LU_FACTOR, (A,))
    piv = dispatch(LU_PIVOTS, (A.detach(),))
    res = (LU, piv)
    if get_infos:
        res = res + (_infos(LU.detach(), piv.shape[-1]),)
    return copy_out(res, out)


def lu_factor(A, *, pivot=True, out=None):
    """`torch.linalg.lu_factor`: (LU, pivots)."""
    LU, piv = _lu(A, pivot, False, None)
    res = named("linalg_lu_factor", ("LU", "pivots"), (LU, piv))
    return copy_out(res, out)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """(P, L, U) with A = P L U from `lu`'s packed result (empty tensors for the parts not
    unpacked)."""
    from .structure import tril, triu
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    empty = C.zeros((0,), dtype=LU_data.dtype)
    L = U = P = empty
    if unpack_data:
        L = E.add(tril(LU_data[..., :, :k], -1), C.eye(m, k, dtype=LU_data.dtype))
        U = triu(LU_data[..., :k, :])
    if unpack_pivots:
        inv = dispatch(LU_ROW_ORDER, (LU_pivots,), {"m": m, "inverse": True})
        P = E.eq(S.unsqueeze(inv, -1), C.arange(m)).to(LU_data.dtype)
    res = named("lu_unpack", ("P", "L", "U"), (P, L, U))
    return copy_out(res, out)


def lu_solve(b, LU_data, LU_pivots, *, out=None):
    """X with A X = b from `lu`'s packed result: two triangular solves after the row swaps."""
    from .linalg_more import _warn_once
    from .linalg_solvers import solve_triangular
    _warn_once("lu_solve", "torch.lu_solve is deprecated in favor of torch.linalg.lu_solve"
               "and will be removed in a future PyTorch release.")
    m = LU_data.shape[-2]
    if LU_data.shape[-1] != m:
        raise op_error(TracegradRuntimeError, "lu_solve", "linalg.lu_solve: Expected LU to be "
                       "square")
    perm = dispatch(LU_ROW_ORDER, (LU_pivots,), {"m": m, "inverse": False})
    pb = _rows(b, S.expand(perm, tuple(b.shape[:-2]) + (m,)) if perm.ndim < b.ndim - 1
               else perm)
    y = solve_triangular(LU_data, pb, upper=False, unitriangular=True)
    x = solve_triangular(LU_data, y, upper=True)
    return x if out is None else out.copy_(x)
