"""Decompositions of `torch.linalg`: qr, eigh, eigvalsh, svd, svdvals (batched, real).

Note [Packed decompositions]
A primitive has one output, and a decomposition several (Q and R; eigenvalues and
eigenvectors; U, S and Vh) that must come from one factorization: computing each factor
separately could pair a Q with an R of another sign choice. So each decomposition is one
primitive whose output packs its factors, each flattened, side by side along the last axis
(*, size(F1) + size(F2) + ...); the op function cuts the factors out with `narrow` and
`reshape` (differentiable views), and the VJP cuts the packed cotangent the same way. A
factor the caller does not use gets a zero cotangent, as a symbolic zero in PyTorch.

Gradients (PyTorch's formulas, FunctionsManual.cpp, written in tracegrad ops so they
differentiate again; `sym`/`skew` below are X + X^T and X - X^T):
  qr (reduced, m >= n):  M = R gR^T - gQ^T Q,
                         gA = (gQ + Q copyltu(M)) R^-T,  copyltu(M) = tril(M,-1) + tril(M,-1)^T
                         + diag(M). Other shapes and modes raise PyTorch's error in backward.
  eigh:  gA = V (diag(gw) + F o (V^T gV - gV^T V)/2) V^T,  F_ij = 1/(w_j - w_i), F_ii = 0
         (distinct eigenvalues where gV is nonzero, as PyTorch: Note [Repeated values]).
  svd (k = min(m, n); with full_matrices only the first k columns of U and rows of Vh, as
       PyTorch):  gA = U [(skew(U^T gU)/E) S + S (skew(V^T gV)/E) + diag(gS)] V^T
                  + (I - UU^T) gU S^-1 V^T + U S^-1 gV^T (I - VV^T),  E_jk = S_k^2 - S_j^2.
The factors' signs are LAPACK's (numpy calls the routines PyTorch calls: geqrf, syevd, gesdd);
on the JAX backend these primitives call the numpy kernel on the host (rules_linalg.py), so a
compiled program's factors are eager's exactly.
"""
import math

import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradRuntimeError, TracegradNotImplementedError, op_error
from . import creation as C
from . import elementwise as E
from .linalg_solvers import _check_float, _check_matrix, _check_square, mT
from .primitive import Primitive
from .return_types import copy_out
from .shape import narrow, reshape, unsqueeze
from .structure import tril

__all__ = ["qr", "eigh", "eigvalsh", "svd", "svdvals"]


# ---- packing (Note [Packed decompositions]) ----
def _pack(batch, *factors):
    return np.ascontiguousarray(np.concatenate(
        [f.reshape(batch + (-1,)) for f in factors], axis=-1))


def _unpack(p, shapes):
    batch, off, out = tuple(p.shape[:-1]), 0, []
    for s in shapes:
        size = math.prod(s)
        out.append(reshape(narrow(p, -1, off, size), batch + tuple(s)))
        off += size
    return out


def _packed_shape(sizes):
    def rule(shapes, attrs):
        a = shapes[0]
        return tuple(a[:-2]) + (sum(math.prod(s) for s in sizes(a[-2], a[-1], attrs)),)
    return rule


def _matmul(a, b):
    from .linalg import matmul
    return matmul(a, b)


def _eye_like(x, n):
    return C.eye(n, dtype=x.dtype)


def _safe_recip(x):
    """1/x, and 0 where x == 0 (Note [Repeated values]): never inf, nor nan in its gradient."""
    zero = E.eq(x, 0.0)
    return E.where(zero, 0.0, E.reciprocal(E.where(zero, 1.0, x)))


# Note [Repeated values]
# The eigenvector (singular vector) terms of the eigh (svd) VJP divide by differences of
# eigenvalues (squared singular values) and the svd's by the singular values. PyTorch skips
# them when the vectors' gradient is undefined (eigvalsh, svdvals, a loss of the eigenvalues
# only); here the packed cotangent holds zeros there instead, and 0 * (1/0) would be NaN. So
# the reciprocals are taken as 0 where the difference (value) is exactly 0: the gradient of
# the eigenvalues (singular values) alone is exact for any input, repeated values included;
# where the vectors' gradient is nonzero at repeated values, PyTorch returns inf/NaN and this
# drops the undefined terms instead.


# ---- qr ----
def _qr_shapes(m, n, attrs):
    k = min(m, n)
    return ((m, m), (m, n)) if attrs["mode"] == "complete" else ((m, k), (k, n))


def _qr_kernel(a, mode):
    q, r = np.linalg.qr(a, mode=mode)
    return _pack(a.shape[:-2], q, r)


def _qr_vjp(g, ins, out, n):
    m, cols = n.shapes[0][-2:]
    mode = n.attrs["mode"]
    if mode == "complete" and m > cols:
        raise op_error(TracegradRuntimeError, None, "The QR decomposition is not "
                       "differentiable when mode='complete' and nrows > ncols.")
    if m < cols:
        raise op_error(TracegradNotImplementedError, "linalg.qr", "tracegrad differentiates "
                       "linalg.qr only for m >= n (more rows than columns), not yet wide input.")
    Q, R = _unpack(out, _qr_shapes(m, cols, n.attrs))
    gQ, gR = _unpack(g, _qr_shapes(m, cols, n.attrs))
    M = E.sub(_matmul(R, mT(gR)), _matmul(mT(gQ), Q))
    low = tril(M, -1)
    eye = _eye_like(M, M.shape[-1])
    copyltu = E.add(E.add(low, mT(low)), E.mul(M, eye))
    b = E.add(gQ, _matmul(Q, copyltu))
    from .linalg_solvers import _solve_tri
    return (mT(_solve_tri(R, mT(b), True, False)),)        # b R^-T


QR = Primitive("linalg_qr", E._quiet(_qr_kernel), vjp=_qr_vjp, saves_out=True,
               shape_rule=_packed_shape(_qr_shapes), grad_fn_name="LinalgQrBackward0",
               layout="c", doc="Q and R of each matrix, packed (Note [Packed decompositions])")


class _Result(tuple):
    """A named tuple like torch.return_types.<name>."""

    __slots__ = ()
    _fields = ()
    _name = ""

    def __getattr__(self, name):
        if name in self._fields:
            return self[self._fields.index(name)]
        raise AttributeError(name)

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"torch.return_types.{self._name}(\n{body})"


def _result(name, fields):
    return type(name, (_Result,), {"__slots__": (), "_fields": fields, "_name": name})


QRResult = _result("linalg_qr", ("Q", "R"))
EighResult = _result("linalg_eigh", ("eigenvalues", "eigenvectors"))
SVDResult = _result("linalg_svd", ("U", "S", "Vh"))


def qr(A, mode="reduced", *, out=None):
    """(Q, R) with A = QR: Q orthonormal columns, R upper triangular; a named tuple.

    `mode`: 'reduced' (Q is m x k, k = min(m, n)), 'complete' (Q is m x m) or 'r' (Q empty).
    Differentiable for mode='reduced' with m >= n, as in PyTorch."""
    op = "linalg.qr"
    _check_matrix(op, A)
    _check_float(op, A)
    if mode not in ("reduced", "r", "complete"):
        raise op_error(TracegradRuntimeError, None, f"qr received unrecognized mode '{mode}' "
                       "but expected one of 'reduced' (default), 'r', or 'complete'")
    p = dispatch(QR, (A,), {"mode": "complete" if mode == "complete" else "reduced"})
    m, n = A.shape[-2:]
    Q, R = _unpack(p, _qr_shapes(m, n, {"mode": mode}))
    if mode == "r":
        Q = C.zeros(0, dtype=A.dtype)
        R = dispatch(QR_R_ONLY, (R,))          # its backward is PyTorch's error
    return copy_out(QRResult((Q, R)), out)


def _r_only_vjp(g, ins, out, n):
    raise op_error(TracegradRuntimeError, None, "The derivative of linalg.qr depends on Q, "
                   "which is not computed when mode='r'. Please use linalg.qr(A, "
                   "mode='reduced') if you are going to differentiate through linalg.qr.")


QR_R_ONLY = Primitive("linalg_qr_r_only", lambda r: r.copy(), vjp=_r_only_vjp,
                      shape_rule=lambda shapes, attrs: tuple(shapes[0]),
                      grad_fn_name="LinalgQrBackward0",
                      doc="R of qr(mode='r'): its gradient is PyTorch's error")


# ---- eigh ----
def _eigh_shapes(m, n, attrs):
    return ((n,), (n, n))


def _eigh_kernel(a, UPLO):
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    return _pack(a.shape[:-2], w, v)


def _eigh_vjp(g, ins, out, n):
    k = n.shapes[0][-1]
    w, V = _unpack(out, ((k,), (k, k)))
    gw, gV = _unpack(g, ((k,), (k, k)))
    eye = _eye_like(w, k)
    F = _safe_recip(E.sub(unsqueeze(w, -2), unsqueeze(w, -1)))      # 1/(w_j - w_i)
    VtgV = _matmul(mT(V), gV)
    inner = E.add(E.mul(F, E.mul(E.sub(VtgV, mT(VtgV)), 0.5)), E.mul(unsqueeze(gw, -2), eye))
    return (_matmul(V, _matmul(inner, mT(V))),)


EIGH = Primitive("linalg_eigh", E._quiet(_eigh_kernel), vjp=_eigh_vjp, saves_out=True,
                 shape_rule=_packed_shape(_eigh_shapes), grad_fn_name="LinalgEighBackward0",
                 layout="c", doc="eigenvalues and eigenvectors of each symmetric matrix, "
                 "packed (Note [Packed decompositions])")


def _check_eigh(op, A, UPLO):
    _check_square(op, A)
    if A.dtype.np.kind != "f" or A.dtype.name == "float16":
        from .. import _dtype as D
        raise op_error(TracegradNotImplementedError, None,
                       f"\"linalg_eigh_cpu\" not implemented for '{D.scalar_type_name(A.dtype)}'")
    if UPLO not in ("L", "U"):
        raise op_error(TracegradRuntimeError, None,
                       f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def eigh(A, UPLO="L", *, out=None):
    """(eigenvalues, eigenvectors) of each symmetric matrix: a named tuple.

    Read from A's lower (`UPLO='L'`) or upper triangle; eigenvalues ascending, eigenvectors
    as columns. Gradients need distinct eigenvalues, as in PyTorch."""
    _check_eigh("linalg.eigh", A, UPLO)
    n = A.shape[-1]
    w, V = _unpack(dispatch(EIGH, (A,), {"UPLO": UPLO}), ((n,), (n, n)))
    return copy_out(EighResult((w, V)), out)


def eigvalsh(A, UPLO="L", *, out=None):
    """The eigenvalues (ascending) of each symmetric matrix of `A`."""
    _check_eigh("linalg.eigvalsh", A, UPLO)
    res = eigh(A, UPLO)[0]
    return res if out is None else out.copy_(res)


# ---- svd ----
def _svd_shapes(m, n, attrs):
    k = min(m, n)
    if attrs["full_matrices"]:
        return ((m, m), (k,), (n, n))
    return ((m, k), (k,), (k, n))


def _svd_kernel(a, full_matrices):
    try:
        u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    except np.linalg.LinAlgError:
        return _svd_failed(a, full_matrices)
    return _pack(a.shape[:-2], u, s, vh)


def _svd_failed(a, full_matrices):
    """gesdd did not converge: PyTorch's LinAlgError for the first matrix holding a NaN;
    without one (an inf), NaN factors for the matrices that failed, as PyTorch returns."""
    from .._errors import LinAlgError
    from .linalg_kernels import _batch_prefix, _elements
    mats = _elements(a)
    for k, m in enumerate(mats):
        if np.isnan(m).any():
            raise op_error(LinAlgError, "linalg.svd", _batch_prefix(a, k) + "The algorithm "
                           "failed to converge because the input matrix contained non-finite "
                           "values.")
    parts = []
    for m in mats:
        try:
            parts.append(_svd_kernel(m, full_matrices))
        except np.linalg.LinAlgError:
            parts.append(np.full(_svd_kernel(np.zeros_like(m), full_matrices).shape, np.nan,
                                 a.dtype))
    return np.stack(parts).reshape(a.shape[:-2] + parts[0].shape)


def _svd_vjp(g, ins, out, n):
    m, cols = n.shapes[0][-2:]
    k = min(m, cols)
    shapes = _svd_shapes(m, cols, n.attrs)
    U, S, Vh = _unpack(out, shapes)
    gU, gS, gVh = _unpack(g, shapes)
    if n.attrs["full_matrices"]:               # PyTorch differentiates the reduced factors
        U, gU = narrow(U, -1, 0, k), narrow(gU, -1, 0, k)
        Vh, gVh = narrow(Vh, -2, 0, k), narrow(gVh, -2, 0, k)
    V, gV = mT(Vh), mT(gVh)
    eye = _eye_like(S, k)
    S2 = E.mul(S, S)
    inv_e = _safe_recip(E.sub(unsqueeze(S2, -2), unsqueeze(S2, -1)))   # 1/(S_k^2 - S_j^2)
    UtgU, VtgV = _matmul(mT(U), gU), _matmul(mT(V), gV)
    skU, skV = E.sub(UtgU, mT(UtgU)), E.sub(VtgV, mT(VtgV))
    inner = E.mul(E.add(E.mul(skU, unsqueeze(S, -2)), E.mul(unsqueeze(S, -1), skV)), inv_e)
    inner = E.add(inner, E.mul(unsqueeze(gS, -2), eye))
    gA = _matmul(U, _matmul(inner, Vh))
    inv_s = unsqueeze(_safe_recip(S), -2)
    if m > k:
        t = E.mul(E.sub(gU, _matmul(U, UtgU)), inv_s)               # (I - UU^T) gU S^-1
        gA = E.add(gA, _matmul(t, Vh))
    if cols > k:
        t = E.mul(E.sub(gV, _matmul(V, VtgV)), inv_s)               # (I - VV^T) gV S^-1
        gA = E.add(gA, _matmul(U, mT(t)))
    return (gA,)


SVD = Primitive("linalg_svd", E._quiet(_svd_kernel), vjp=_svd_vjp, saves_out=True,
                shape_rule=_packed_shape(_svd_shapes), grad_fn_name="LinalgSvdBackward0",
                layout="c", may_raise=True, doc="U, S and Vh of each matrix, packed (Note [Packed "
                "decompositions])")


def svd(A, full_matrices=True, *, driver=None, out=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending: a named tuple.

    `full_matrices=False` gives the reduced factors (U m x k, Vh k x n, k = min(m, n)); with
    `full_matrices=True` gradients flow through their first k columns only, as in PyTorch."""
    op = "linalg.svd"
    _check_matrix(op, A)
    _check_float(op, A)
    attrs = {"full_matrices": bool(full_matrices)}
    m, n = A.shape[-2:]
    U, S, Vh = _unpack(dispatch(SVD, (A,), attrs), _svd_shapes(m, n, attrs))
    return copy_out(SVDResult((U, S, Vh)), out)


def svdvals(A, *, driver=None, out=None):
    """The singular values (descending) of each matrix of `A`."""
    _check_matrix("linalg.svdvals", A)
    _check_float("linalg.svd", A)
    res = svd(A, full_matrices=False)[1]
    return res if out is None else out.copy_(res)

