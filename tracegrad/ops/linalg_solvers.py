"""Solver primitives of `torch.linalg`: inv, det, slogdet, solve, cholesky, solve_triangular,
and the op functions built on them (argument checks, vector right-hand sides, `left=False`,
`upper=True`), batched over leading dimensions.

Each primitive's VJP is written with these same primitives (PyTorch's derivatives.yaml
formulas), so gradients of gradients come free:
  inv:    X = A^-1,          gA = -X^T g X^T
  det:    d = det A,         gA = g d A^-T          (A^-T by `inv`: fails at singular A)
  logabsdet: gA = g A^-T;    the sign is not differentiable
  solve:  X = A^-1 B,        gB = A^-T g, gA = -gB X^T
  solve_triangular: as solve, gA kept to A's triangle (strictly, when unitriangular)
  cholesky: A = L L^T,       P = L^T gL with its lower triangle kept and diagonal halved,
                             gA = sym(L^-T P L^-1), sym(S) = (S + S^T) / 2
Every kernel may raise on its data (Note [LAPACK failures] in linalg_kernels.py), so each is
`may_raise`: a compiled program that fails there re-runs eagerly and raises eager's error.
"""
from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import TracegradRuntimeError, op_error
from . import creation as C
from . import elementwise as E
from . import linalg_kernels as K
from .primitive import Primitive, promote
from .shape import permute, sum_to, unsqueeze, squeeze
from .structure import tril, triu

__all__ = ["inv", "det", "slogdet", "logdet", "solve", "cholesky", "solve_triangular",
           "cholesky_solve", "inverse", "inv_ex", "cholesky_ex"]


def mT(x):
    n = x.ndim
    return permute(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _mat(x):
    """A batch of scalars (*,) as (*, 1, 1), to scale matrices."""
    return unsqueeze(unsqueeze(x, -1), -1)


# ---- shape rules ----
def _same(shapes, attrs):
    return tuple(shapes[0])


def _batch(shapes, attrs):
    return tuple(shapes[0][:-2])


def _solve_shape(shapes, attrs):
    a, b = shapes
    import numpy as np
    return tuple(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))) + tuple(b[-2:])


# ---- VJPs ----
def _inv_vjp(g, ins, out, n):
    xt = mT(out)
    return (E.neg(_matmul(_matmul(xt, g), xt)),)


def _det_vjp(g, ins, out, n):
    return (E.mul(_mat(E.mul(g, out)), mT(_inv(ins[0]))),)


def _logabsdet_vjp(g, ins, out, n):
    return (E.mul(_mat(g), mT(_inv(ins[0]))),)


def _solve_vjp(g, ins, out, n):
    a = ins[0]
    gb = _solve(mT(a), g)
    ga = sum_to(E.neg(_matmul(gb, mT(out))), n.shapes[0]) if n.needs[0] else None
    return (ga, sum_to(gb, n.shapes[1]) if n.needs[1] else None)


def _solve_triangular_vjp(g, ins, out, n):
    a = ins[0]
    upper, unit = n.attrs["upper"], n.attrs["unitriangular"]
    gb = _solve_tri(mT(a), g, not upper, unit)
    ga = None
    if n.needs[0]:
        full = E.neg(_matmul(gb, mT(out)))
        ga = sum_to(triu(full, 1 if unit else 0) if upper else tril(full, -1 if unit else 0),
                    n.shapes[0])
    return (ga, sum_to(gb, n.shapes[1]) if n.needs[1] else None)


def _cholesky_vjp(g, ins, out, n):
    L = out
    eye = C.eye(L.shape[-1], dtype=L.dtype)
    p = _matmul(mT(L), g)
    p = E.add(tril(p, -1), E.mul(E.mul(p, eye), 0.5))
    y = _solve_tri(mT(L), p, True, False)                 # L^-T P
    s = mT(_solve_tri(mT(L), mT(y), True, False))         # L^-T P L^-1
    return (E.mul(E.add(s, mT(s)), 0.5),)


INV = Primitive("linalg_inv", E._quiet(K.inv), vjp=_inv_vjp, saves_out=True, shape_rule=_same,
                grad_fn_name="LinalgInvExBackward0", layout="c", may_raise=True,
                doc="the inverse of each square matrix")
DET = Primitive("linalg_det", E._quiet(K.det), vjp=_det_vjp, saves=(0,), saves_out=True,
                shape_rule=_batch, grad_fn_name="LinalgDetBackward0", layout="c",
                doc="the determinant of each square matrix")
SLOGDET_SIGN = Primitive("linalg_slogdet_sign", E._quiet(K.slogdet_sign), shape_rule=_batch,
                         layout="c", doc="the sign of the determinant of each square matrix")
LOGABSDET = Primitive("linalg_logabsdet", E._quiet(K.logabsdet), vjp=_logabsdet_vjp,
                      saves=(0,), shape_rule=_batch, grad_fn_name="LinalgSlogdetBackward0",
                      layout="c",
                      doc="log |det A| of each square matrix")
SOLVE = Primitive("linalg_solve", E._quiet(K.solve), vjp=_solve_vjp, saves=(0,),
                  saves_out=True, dtype_rule=promote, shape_rule=_solve_shape,
                  grad_fn_name="LinalgSolveExBackward0", layout="c", may_raise=True,
                  doc="X with AX = B, batch dims broadcast")
SOLVE_TRIANGULAR = Primitive(
    "linalg_solve_triangular", E._quiet(K.solve_triangular), vjp=_solve_triangular_vjp,
    saves=(0,),
    saves_out=True, dtype_rule=promote, shape_rule=_solve_shape, layout="c",
    grad_fn_name="LinalgSolveTriangularBackward0",
    doc="X with AX = B for a triangular A (substitution; inf/nan at a zero diagonal)")
INV_INFO = Primitive("linalg_inv_info", E._quiet(K.inv_info), shape_rule=_batch, layout="c",
                     doc="LAPACK's info of LU: the first zero pivot (1-based), or 0")
CHOLESKY_INFO = Primitive("linalg_cholesky_info", E._quiet(K.cholesky_info),
                          shape_rule=_batch, layout="c",
                          doc="LAPACK's info of Cholesky: the order of the first "
                          "leading minor that is not positive-definite, or 0")
CHOLESKY = Primitive("linalg_cholesky", E._quiet(K.cholesky), vjp=_cholesky_vjp, saves_out=True,
                     shape_rule=_same, grad_fn_name="LinalgCholeskyExBackward0", layout="c",
                     may_raise=True, doc="the lower Cholesky factor of each matrix")


def _matmul(a, b):
    from .linalg import matmul
    return matmul(a, b)


def _inv(a):
    return dispatch(INV, (a,))


def _solve(a, b):
    return dispatch(SOLVE, (a, b))


def _solve_tri(a, b, upper, unit):
    return dispatch(SOLVE_TRIANGULAR, (a, b), {"upper": bool(upper),
                                               "unitriangular": bool(unit)})


# ---- argument checks (PyTorch's messages) ----
def _check_float(op, *ts):
    for t in ts:
        if t.dtype.np.kind != "f":
            raise op_error(TracegradRuntimeError, op, "Expected a floating point or complex "
                           f"tensor as input. Got {D.scalar_type_name(t.dtype)}")
        if t.dtype is D.float16:
            raise op_error(TracegradRuntimeError, op, "Low precision dtypes not supported. "
                           f"Got {D.scalar_type_name(t.dtype)}")


def _check_matrix(op, t, name="A"):
    if t.ndim < 2:
        raise op_error(TracegradRuntimeError, op,
                       f"The input tensor {name} must have at least 2 dimensions.")


def _check_square(op, A):
    _check_matrix(op, A)
    if A.shape[-1] != A.shape[-2]:
        raise op_error(TracegradRuntimeError, op, "A must be batches of square matrices, but "
                       f"they are {A.shape[-2]} by {A.shape[-1]} matrices")


def _square_float(op, A):
    _check_square(op, A)
    _check_float(op, A)


def _same_dtype(op, A, B):
    if A.dtype is not B.dtype:
        raise op_error(TracegradRuntimeError, op, "Expected A and B to have the same dtype, "
                       f"but found A of type {D.scalar_type_name(A.dtype)} and B of type "
                       f"{D.scalar_type_name(B.dtype)} instead")


def _check_rhs(op, A, B):
    if A.shape[-1] != B.shape[-2]:
        raise op_error(TracegradRuntimeError, op, "Incompatible shapes of A and B for the "
                       f"equation AX = B ({A.shape[-2]}x{A.shape[-1]} and "
                       f"{B.shape[-2]}x{B.shape[-1]})")
    try:
        import numpy as np
        np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    except ValueError:
        raise op_error(TracegradRuntimeError, op, "The size of A's and B's batch dimensions "
                       f"cannot be broadcast: {list(A.shape)} and {list(B.shape)}") from None


# ---- the op functions ----
def inv(A, *, out=None):
    """The inverse of each square matrix of `A` (*, n, n); LinAlgError if one is singular."""
    _square_float("linalg.inv", A)
    res = dispatch(INV, (A,))
    return res if out is None else out.copy_(res)


inverse = inv


class _ExResult(tuple):
    """(result, info) named tuple like torch.return_types.linalg_inv_ex."""

    __slots__ = ()
    info = property(lambda self: self[1])

    def __repr__(self):
        return (f"torch.return_types.{self._name}(\n{self._field}={self[0]!r},\n"
                f"info={self[1]!r})")


class _InvExResult(_ExResult):
    __slots__ = ()
    _name, _field = "linalg_inv_ex", "inverse"
    inverse = property(lambda self: self[0])


class _CholeskyExResult(_ExResult):
    __slots__ = ()
    _name, _field = "linalg_cholesky_ex", "L"
    L = property(lambda self: self[0])


def inv_ex(A, *, check_errors=False, out=None):
    """(inverse, info): `inv` that reports singular matrices in int32 `info` instead.

    info is 0, or the 1-based index of LU's first zero pivot; a singular matrix's inverse
    is NaN here (PyTorch leaves LAPACK's partial result). `check_errors=True` raises as inv."""
    _square_float("linalg.inv_ex", A)
    res = _InvExResult((dispatch(INV, (A,), {"check": check_errors and "linalg.inv_ex"}),
                        dispatch(INV_INFO, (A,))))
    if out is not None:
        out[0].copy_(res[0])
        out[1].copy_(res[1])
        return out
    return res


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """(L, info): `cholesky` that reports matrices that are not positive-definite in `info`.

    info is 0, or the order of the first leading minor that is not positive-definite; such a
    matrix's factor is NaN here (PyTorch leaves LAPACK's partial result)."""
    _square_float("linalg.cholesky_ex", A)
    src = mT(A) if upper else A
    L = dispatch(CHOLESKY, (src,), {"check": check_errors and "linalg.cholesky_ex"})
    res = _CholeskyExResult((mT(L) if upper else L, dispatch(CHOLESKY_INFO, (src,))))
    if out is not None:
        out[0].copy_(res[0])
        out[1].copy_(res[1])
        return out
    return res


def det(A, *, out=None):
    """The determinant of each square matrix of `A` (*, n, n), shape (*)."""
    _square_float("linalg.det", A)
    res = dispatch(DET, (A,))
    return res if out is None else out.copy_(res)


class _SlogdetResult(tuple):
    """(sign, logabsdet) named tuple like torch.return_types.linalg_slogdet."""

    __slots__ = ()
    sign = property(lambda self: self[0])
    logabsdet = property(lambda self: self[1])

    def __repr__(self):
        return (f"torch.return_types.linalg_slogdet(\nsign={self[0]!r},\n"
                f"logabsdet={self[1]!r})")


def slogdet(A, *, out=None):
    """(sign, logabsdet) of det(A) for each square matrix: a named tuple.

    sign is -1, 0 or 1 and logabsdet log |det A| (-inf for a singular matrix). Only
    logabsdet is differentiable (sign carries no grad_fn; in PyTorch it has one)."""
    _square_float("linalg.slogdet", A)
    res = _SlogdetResult((dispatch(SLOGDET_SIGN, (A,)), dispatch(LOGABSDET, (A,))))
    if out is not None:
        out[0].copy_(res[0])
        out[1].copy_(res[1])
        return out
    return res


def logdet(input):
    """log det A: nan where det A < 0, -inf where it is 0 (torch.logdet)."""
    _square_float("linalg.slogdet", input)
    sign = dispatch(SLOGDET_SIGN, (input,))
    return E.add(dispatch(LOGABSDET, (input,)), E.log(sign))


def _is_vector_rhs(A, B):
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def solve(A, B, *, left=True, out=None):
    """X with AX = B (`left=False`: XA = B); LinAlgError if a matrix of `A` is singular.

    `B` is a batch of matrices, or of vectors (shape (*, n) matching A's (*, n, n), or 1-D);
    batch dimensions broadcast."""
    op = "linalg.solve"
    _square_float(op, A)
    _check_float(op, B)
    _same_dtype(op, A, B)
    vector = _is_vector_rhs(A, B)
    if not left:
        A = mT(A)
        if not vector:
            B = mT(B)
    b = unsqueeze(B, -1) if vector else B
    _check_rhs(op, A, b)
    res = dispatch(SOLVE, (A, b))
    res = squeeze(res, -1) if vector else res if left else mT(res)
    return res if out is None else out.copy_(res)


def cholesky(A, *, upper=False, out=None):
    """L with A = L L^T for each symmetric positive-definite matrix (LinAlgError if not).

    L is read from A's lower triangle; `upper=True` gives U = L^T from the upper triangle."""
    _square_float("linalg.cholesky", A)
    res = mT(dispatch(CHOLESKY, (mT(A),))) if upper else dispatch(CHOLESKY, (A,))
    return res if out is None else out.copy_(res)


def cholesky_legacy(input, upper=False, *, out=None):
    """The Cholesky factor of each matrix (torch.cholesky; use linalg.cholesky).

    Deprecated in PyTorch in favour of `torch.linalg.cholesky`, which it calls."""
    return cholesky(input, upper=upper, out=out)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with AX = B (`left=False`: XA = B) for triangular A (keyword `upper` required).

    Only the upper (or lower) triangle of `A` is read, its diagonal taken as ones when
    `unitriangular`; a zero on the diagonal gives inf/nan, never an error, as in PyTorch."""
    op = "linalg.solve_triangular"
    _check_float(op, A, B)
    _check_matrix(op, A)
    _check_matrix(op, B, "B")
    _check_square(op, A)
    if not left:
        A, B, upper = mT(A), mT(B), not upper
    _check_rhs(op, A, B)
    res = _solve_tri(A, B, upper, unitriangular)
    res = res if left else mT(res)
    return res if out is None else out.copy_(res)


def cholesky_solve(B, L, upper=False, *, out=None):
    """X with A X = B, A given by its Cholesky factor L (A = L L^T; upper: A = U^T U).

    >>> cholesky_solve(B, linalg.cholesky(A))      # solve(A, B) for an SPD A
    """
    op = "cholesky_solve"
    if B.ndim < 2:
        raise op_error(TracegradRuntimeError, op, f"b should have at least 2 dimensions, but "
                       f"has {B.ndim} dimensions instead")
    if L.ndim < 2:
        raise op_error(TracegradRuntimeError, op, f"u should have at least 2 dimensions, but "
                       f"has {L.ndim} dimensions instead")
    _check_float(op, B, L)
    _check_square(op, L)
    _check_rhs(op, L, B)
    if upper:
        y = _solve_tri(mT(L), B, False, False)
        res = _solve_tri(L, y, True, False)
    else:
        y = _solve_tri(L, B, False, False)
        res = _solve_tri(mT(L), y, True, False)
    return res if out is None else out.copy_(res)
