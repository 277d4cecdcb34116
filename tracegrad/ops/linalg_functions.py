"""Matrix functions of `torch.linalg`: matrix_exp (a primitive), and pinv and lstsq
(composites of svd or eigh).

matrix_exp's kernel is scaling and squaring with a Pade approximant of degree 3, 5, 7, 9 or
13 chosen from the 1-norm (Higham 2005, "The scaling and squaring method for the matrix
exponential revisited"), per matrix of the batch, computed in float64. Its VJP is the adjoint
of the Frechet derivative, read off one larger exponential (Mathias 1996):
exp([[A^T, G], [0, A^T]]) has L(A^T, G) as its top-right block. The VJP is this primitive
again, so gradients of gradients come free.

pinv(A) = V diag(1/S) U^T over the singular values above max(atol, rtol * S_max) (eigh's
eigenvalues by absolute value for `hermitian=True`); its gradient is that of the svd, defined
where the singular values are distinct and nonzero (PyTorch's own formula also covers rank-
deficient input: see tracegrad.linalg).
"""
import math

import numpy as np

from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import LinAlgError, TracegradRuntimeError, op_error
from . import creation as C
from . import elementwise as E
from .linalg_solvers import _check_float, _check_matrix, _square_float, mT
from .primitive import Primitive
from .shape import cat, narrow, unsqueeze

__all__ = ["matrix_exp", "pinv", "pinverse", "lstsq", "matrix_power", "multi_dot",
           "cholesky_inverse"]

_PADE = {
    3: (120., 60., 12., 1.),
    5: (30240., 15120., 3360., 420., 30., 1.),
    7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
    9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880.,
        3960., 90., 1.),
    13: (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
         129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
         40840800., 960960., 16380., 182., 1.),
}
_THETA = ((3, 1.495585217958292e-2), (5, 2.539398330063230e-1), (7, 9.504178996162932e-1),
          (9, 2.097847961257068e0))
_THETA13 = 5.371920351148152


def _pade(a, m):
    b = _PADE[m]
    n = a.shape[-1]
    eye = np.eye(n)
    if m < 13:
        a2 = a @ a
        powers = [eye, a2]
        while len(powers) < (m + 1) // 2:
            powers.append(powers[-1] @ a2)
        u = a @ sum(b[2 * k + 1] * p for k, p in enumerate(powers))
        v = sum(b[2 * k] * p for k, p in enumerate(powers))
    else:
        a2 = a @ a
        a4 = a2 @ a2
        a6 = a4 @ a2
        u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2)
                 + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
        v = (a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2)
             + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye)
    return np.linalg.solve(v - u, v + u)


def _expm(a):
    """exp of one float64 matrix."""
    if a.size == 0 or not np.isfinite(a).all():
        return np.full_like(a, np.nan) if a.size else a.copy()
    norm = np.abs(a).sum(axis=0).max()
    for m, theta in _THETA:
        if norm <= theta:
            return _pade(a, m)
    s = max(0, int(math.ceil(math.log2(norm / _THETA13)))) if norm > 0 else 0
    r = _pade(a / 2.0 ** s, 13)
    for _ in range(s):
        r = r @ r
    return r


def _matrix_exp_kernel(a):
    flat = a.astype(np.float64).reshape((-1,) + a.shape[-2:])
    out = np.stack([_expm(m) for m in flat]) if len(flat) else flat.copy()
    return np.ascontiguousarray(out.reshape(a.shape).astype(a.dtype))


def _matrix_exp_vjp(g, ins, out, n):
    at = mT(ins[0])
    k = at.shape[-1]
    zeros = C.zeros(tuple(at.shape), dtype=at.dtype)
    block = cat([cat([at, g], -1), cat([zeros, at], -1)], -2)
    big = dispatch(MATRIX_EXP, (block,))
    return (narrow(narrow(big, -2, 0, k), -1, k, k),)


MATRIX_EXP = Primitive("linalg_matrix_exp", E._quiet(_matrix_exp_kernel), vjp=_matrix_exp_vjp,
                       saves=(0,), shape_rule=lambda shapes, attrs: tuple(shapes[0]),
                       grad_fn_name="LinalgMatrixExpBackward0", layout="c",
                       doc="the exponential of each square matrix")


def matrix_exp(A):
    """exp(A) = sum_k A^k / k! of each square matrix of `A`."""
    _square_float("linalg.matrix_exp", A)
    return dispatch(MATRIX_EXP, (A,))


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The Moore-Penrose pseudo-inverse of each matrix of `A` (via svd, or eigh if hermitian).

    Keeps the singular values above max(atol, rtol * largest); rtol defaults to
    eps * max(m, n) when neither is given."""
    from .linalg_decomp import eigh, svd
    if A.ndim < 2 or A.dtype.np.kind != "f" or A.dtype.name == "float16":
        raise op_error(TracegradRuntimeError, None,
                       f"linalg.pinv({D.scalar_type_name(A.dtype)}{{{list(A.shape)}}}): expected a "
                       "tensor with 2 or more dimensions of float, double, cfloat or cdouble "
                       "types")
    _check_matrix("linalg.pinv", A)
    _check_float("linalg.pinv", A)
    m, n = A.shape[-2:]
    if rtol is None:
        rtol = np.finfo(A.dtype.np).eps * max(m, n) if atol is None or atol == 0 else 0.0
    if hermitian:
        w, V = eigh(A)
        inv_s = _kept_reciprocal(E.abs(w), atol, rtol, E.abs(w))      # 1/|w|, then 1/w
        res = _matmul(E.mul(V, unsqueeze(E.mul(inv_s, E.sign(w)), -2)), mT(V))
    else:
        U, s, Vh = svd(A, full_matrices=False)
        inv_s = _kept_reciprocal(s, atol, rtol, s)
        res = _matmul(E.mul(mT(Vh), unsqueeze(inv_s, -2)), mT(U))
    return res if out is None else out.copy_(res)


def pinverse(input, rcond=1e-15):
    """torch.pinverse: `pinv` with relative cutoff `rcond`."""
    return pinv(input, rtol=rcond)


class _LstsqResult(tuple):
    """(solution, residuals, rank, singular_values) like torch.return_types.linalg_lstsq."""

    __slots__ = ()
    _fields = ("solution", "residuals", "rank", "singular_values")
    solution = property(lambda self: self[0])
    residuals = property(lambda self: self[1])
    rank = property(lambda self: self[2])
    singular_values = property(lambda self: self[3])

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"torch.return_types.linalg_lstsq(\n{body})"


_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution X minimizing ||AX - B|| (minimum norm): a named tuple.

    (solution, residuals, rank, singular_values) as PyTorch fills them for `driver` ('gelsy'
    by default: residuals and singular_values empty). The solution is pinv(A) B with
    singular values below rcond * largest dropped (rcond defaults to eps * max(m, n)), so
    its gradient is the svd's (distinct nonzero singular values)."""
    from .linalg_decomp import svdvals
    from .reduction import amax, sum as _sum
    op = "torch.linalg.lstsq"
    if A.dtype is not B.dtype:
        raise op_error(TracegradRuntimeError, op, "Expected input and other to have the same "
                       f"dtype, but got input's dtype {D.scalar_type_name(A.dtype)} and other's "
                       f"dtype {D.scalar_type_name(B.dtype)}")
    if A.ndim < 2:
        raise op_error(TracegradRuntimeError, op, "input must have at least 2 dimensions.")
    _check_float("linalg.lstsq", A)
    driver = "gelsy" if driver is None else driver
    if driver not in _DRIVERS:
        raise op_error(TracegradRuntimeError, op, "parameter `driver` should be one of "
                       "(gels, gelsy, gelsd, gelss)")
    m, n = A.shape[-2:]
    vector = B.ndim == A.ndim - 1
    b = unsqueeze(B, -1) if vector else B
    if b.ndim < 2 or b.shape[-2] != m:
        raise op_error(TracegradRuntimeError, op, "input.size(-2) should match other.size(-2)")
    if rcond is None:
        rcond = float(np.finfo(A.dtype.np).eps) * max(m, n)
    if driver == "gels":
        _full_rank_or_raise(A)
    x = _matmul(pinv(A, rtol=rcond), b)
    empty = C.zeros(0, dtype=A.dtype)
    s = svdvals(A.detach())
    rank = _sum(E.gt(s, E.mul(amax(s, -1, keepdim=True), rcond)), -1) if min(m, n) else (
        C.zeros(tuple(A.shape[:-2]), dtype=D.int64))
    residuals = empty
    if driver != "gelsy" and m > n and bool((rank == n).all()):
        residuals = _sum(E.pow(E.sub(_matmul(A, x), b), 2), -2)
    if vector:
        x = x.squeeze(-1)
    return _LstsqResult((x, residuals, empty.long() if driver == "gels" else rank,
                         s if driver in ("gelsd", "gelss") else empty))


def matrix_power(A, n):
    """A^n for each square matrix by repeated squaring (n < 0: inv(A)^-n; n = 0: identity)."""
    from .linalg_solvers import _check_square, inv
    _check_square("linalg.matrix_power", A)
    if n == 0:
        return C.eye(A.shape[-1], dtype=A.dtype).expand(tuple(A.shape)).clone()
    base = inv(A) if n < 0 else A
    n, res = abs(int(n)), None
    while True:
        if n & 1:
            res = base if res is None else _matmul(res, base)
        n >>= 1
        if not n:
            return res
        base = _matmul(base, base)


def multi_dot(tensors, *, out=None):
    """The product of a chain of matrices (the first and last may be vectors), left to right.

    PyTorch picks the cheapest order; the value is the same up to rounding."""
    ts = list(tensors)
    if len(ts) < 2:
        raise op_error(TracegradRuntimeError, None, "multi_dot(): expected at least 2 tensors "
                       f"but got {len(ts)}")
    for i, t in enumerate(ts):
        where = "the first tensor" if i == 0 else "the last tensor" if i == len(ts) - 1 \
            else f"tensor {i}"
        ok = t.ndim == 2 or (t.ndim == 1 and i in (0, len(ts) - 1))
        if not ok:
            raise op_error(TracegradRuntimeError, None, f"multi_dot(): {where} must be "
                           f"{'1D or 2D' if i in (0, len(ts) - 1) else '2D'} but got {t.ndim}D")
    res = ts[0]
    for t in ts[1:]:
        res = _matmul(res, t)
    return res if out is None else out.copy_(res)


def cholesky_inverse(L, upper=False, *, out=None):
    """The inverse of A = L L^T (`upper=True`: A = U^T U) from its Cholesky factor."""
    from .._errors import TracegradNotImplementedError
    from .linalg_solvers import cholesky_solve
    if L.ndim < 2:
        raise op_error(TracegradRuntimeError, None, "cholesky_inverse: The input tensor A must "
                       "have at least 2 dimensions.")
    if L.dtype.np.kind != "f":
        raise op_error(TracegradNotImplementedError, None, '"cholesky_inverse_out_cpu" not '
                       f"implemented for '{D.scalar_type_name(L.dtype)}'")
    res = cholesky_solve(C.eye(L.shape[-1], dtype=L.dtype), L, upper)
    return res if out is None else out.copy_(res)


def _full_rank_or_raise(A):
    """gels (QR without pivoting) fails at R's first exact zero diagonal entry."""
    from .linalg_decomp import qr
    from .reduction import sum as _sum
    k = min(A.shape[-2:])
    R = qr(A.detach() if A.shape[-2] >= A.shape[-1] else mT(A.detach()), mode="r")[1]
    diag = _sum(E.mul(narrow(narrow(R, -2, 0, k), -1, 0, k), C.eye(k, dtype=R.dtype)), -1)
    zero = E.eq(diag, 0.0)
    if bool(zero.any()):
        flags = zero.reshape(-1, k).tolist()
        first = min(row.index(True) for row in flags if True in row) + 1
        raise op_error(LinAlgError, "torch.linalg.lstsq", "The least squares solution could "
                       "not be computed because the input matrix does not have full rank "
                       f"(error code: {first}).")


def _kept_reciprocal(s, atol, rtol, mags):
    """1/s where s exceeds the cutoff, else 0 (and a zero gradient there, never nan)."""
    from .reduction import amax
    if s.shape[-1] == 0:
        return s
    cutoff = E.mul(amax(mags, -1, keepdim=True), float(rtol)) if rtol else None
    if atol is not None and atol != 0:
        a = atol if not hasattr(atol, "shape") else unsqueeze(atol, -1)
        cutoff = E.maximum(C.full_like(s, 0.0) + a, cutoff) if cutoff is not None else (
            C.full_like(s, 0.0) + a)
    keep = E.gt(mags, cutoff)
    safe = E.where(keep, s, 1.0)
    return E.where(keep, E.reciprocal(safe), 0.0)


def _matmul(a, b):
    from .linalg import matmul
    return matmul(a, b)
