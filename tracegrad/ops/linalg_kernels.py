"""numpy kernels of the solver primitives (ops/linalg_solvers.py), and the LinAlgError each
raises where PyTorch's LAPACK call reports failure.

Note [LAPACK failures]
PyTorch raises `torch.linalg.LinAlgError` when LAPACK reports `info > 0`: `getrf` met an exact
zero pivot (linalg.inv, linalg.solve: "The diagonal element k is zero"), `potrf` met a leading
minor whose pivot is not > 0 or is NaN (linalg.cholesky: "the leading minor of order k").
numpy calls the same LAPACK routines (`gesv`, `potrf`) and raises its own LinAlgError on the
same `info`, but without the index, and its cholesky returns NaNs instead of failing on NaN
input. So the kernels run numpy, and on failure (or on a NaN cholesky) find the batch element
and the index by redoing that element's factorization unblocked, as LAPACK's `getf2`/`potf2`
do; its message is PyTorch's. Rounding may differ between the two LAPACK builds on nearly
singular input: an exact zero pivot in one and a tiny one in the other (see tracegrad.linalg).

`solve_triangular` never fails (PyTorch's `trsm` gives inf/NaN for a zero diagonal): it is
forward/back substitution over rows, vectorized over the batch and right-hand sides.
"""
import numpy as np

from .._errors import LinAlgError, op_error


def _batch_prefix(a, k):
    return f"(Batch element {k}): " if a.ndim > 2 else ""


def _elements(a):
    """The matrices of batch `a` in order, flattened."""
    return a.reshape((-1,) + a.shape[-2:])


def zero_pivot(m):
    """1-based index of the first exact zero pivot of LU with partial pivoting (getf2), or 0."""
    m = np.array(m, dtype=np.float64 if m.dtype == np.float64 else m.dtype)
    n = m.shape[0]
    with np.errstate(all="ignore"):
        for j in range(n):
            p = j + int(np.argmax(np.abs(m[j:, j])))
            if m[p, j] == 0:
                return j + 1
            if p != j:
                m[[j, p]] = m[[p, j]]
            m[j + 1:, j] /= m[j, j]
            m[j + 1:, j + 1:] -= np.outer(m[j + 1:, j], m[j, j + 1:])
    return 0


def not_pd_order(m):
    """1-based order of the first leading minor whose pivot is not > 0 (potf2), or 0."""
    n = m.shape[0]
    L = np.zeros_like(m)
    with np.errstate(all="ignore"):
        for j in range(n):
            d = m[j, j] - L[j, :j] @ L[j, :j]
            if not d > 0:
                return j + 1
            L[j, j] = np.sqrt(d)
            L[j + 1:, j] = (m[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return 0


def _singular(op, a, text):
    """The LinAlgError for the first singular matrix of batch `a`."""
    mats = _elements(a)
    for k, m in enumerate(mats):
        i = zero_pivot(m)
        if i:
            return op_error(LinAlgError, op, _batch_prefix(a, k) + text(i))
    return op_error(LinAlgError, op, text(a.shape[-1]))     # numpy's and our LU disagree


def _inv_text(i):
    return (f"The diagonal element {i} is zero, the inversion could not be completed because "
            "the input matrix is singular.")


def inv(a, check="linalg.inv"):
    """A^-1; `check` names the op in the error, or is False (inv_ex): a singular matrix's
    inverse comes out NaN, no error."""
    try:
        return np.ascontiguousarray(np.linalg.inv(a))
    except np.linalg.LinAlgError:
        if check:
            raise _singular(check, a, _inv_text) from None
    return _per_matrix(a, np.linalg.inv)


def _per_matrix(a, f):
    """`f` of each matrix of batch `a`, NaN for those it fails on."""
    out = np.empty(a.shape, a.dtype)
    flat = out.reshape((-1,) + a.shape[-2:])
    for k, m in enumerate(_elements(a)):
        try:
            flat[k] = f(m)
        except np.linalg.LinAlgError:
            flat[k] = np.nan
    return out


def _info(a, fast, find):
    """The int32 LAPACK `info` of each matrix of batch `a` (0: succeeded)."""
    try:
        fast(a)
        if fast is not np.linalg.cholesky or np.isfinite(a).all():
            return np.zeros(a.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        pass
    return np.array([find(m) for m in _elements(a)], np.int32).reshape(a.shape[:-2])


def inv_info(a):
    return _info(a, np.linalg.inv, zero_pivot)


def cholesky_info(a):
    return _info(a, np.linalg.cholesky, not_pd_order)


def _solve_text(i):
    return "The solver failed because the input matrix is singular."


def solve(a, b):
    """X with AX = B; `b` a batch of matrices, batch dims broadcast with `a`'s."""
    try:
        return np.ascontiguousarray(np.linalg.solve(a, b))
    except np.linalg.LinAlgError:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        full = np.broadcast_to(a, batch + a.shape[-2:])
        raise _singular("torch.linalg.solve", full, _solve_text) from None


def det(a):
    return np.asarray(np.linalg.det(a))


def slogdet_sign(a):
    return np.asarray(np.linalg.slogdet(a)[0])


def logabsdet(a):
    return np.asarray(np.linalg.slogdet(a)[1])


def cholesky(a, check="linalg.cholesky"):
    """The lower factor L (A = L L^T) from A's lower triangle; `check` names the op in the
    error, or is False (cholesky_ex): a matrix that is not positive-definite gives NaNs."""
    if not check:
        return _per_matrix(a, np.linalg.cholesky)
    try:
        L = np.linalg.cholesky(a)
        bad = not np.isfinite(np.diagonal(L, 0, -2, -1)).all()   # numpy passes NaN
    except np.linalg.LinAlgError:
        bad = True
    if not bad:
        return np.ascontiguousarray(L)
    for k, m in enumerate(_elements(a)):
        i = not_pd_order(m)
        if i:
            raise op_error(LinAlgError, check, _batch_prefix(a, k) +
                           "The factorization could not be completed because the input is not "
                           f"positive-definite (the leading minor of order {i} is not "
                           "positive-definite).")
    return np.ascontiguousarray(L)


def solve_triangular(a, b, upper, unitriangular):
    """X with AX = B for the upper (or lower) triangle of A, by substitution."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    x = np.array(np.broadcast_to(b, batch + b.shape[-2:]), dtype=np.result_type(a, b))
    n = a.shape[-1]
    rows = range(n - 1, -1, -1) if upper else range(n)
    with np.errstate(all="ignore"):
        for i in rows:
            done = slice(i + 1, n) if upper else slice(0, i)
            r = x[..., i, :] - np.matmul(a[..., i:i + 1, done], x[..., done, :])[..., 0, :]
            x[..., i, :] = r if unitriangular else r / a[..., i, i, None]
    return x
