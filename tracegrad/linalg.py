"""`tracegrad.linalg`: norms, solvers, decompositions and matrix functions of `torch.linalg`.

Norms (`vector_norm`, `matrix_norm`, `norm`) are composed of tracegrad's `norm` primitive
(LinalgVectorNormBackward0, as PyTorch records) and `sum`/`amax`. Matrix norms that need a
singular value decomposition ('nuc', 2, -2) reduce `svdvals`.

Solvers (`inv`, `inv_ex`, `det`, `slogdet`, `solve`, `cholesky`, `cholesky_ex`,
`solve_triangular`; top-level `inverse`, `det`, `logdet`, `slogdet`, `cholesky_solve`:
ops/linalg_solvers.py), decompositions (`qr`, `eigh`, `eigvalsh`, `svd`, `svdvals`:
ops/linalg_decomp.py) and `matrix_exp`, `pinv`, `lstsq`, `matrix_power`, `multi_dot`
(top-level `cholesky_inverse`, `pinverse`, `matrix_power`: ops/linalg_functions.py) and
`householder_product` (top-level `orgqr`, and `geqrf`: ops/householder.py) are
batched over leading dimensions, take float32 and float64 (integers raise PyTorch's
RuntimeError), and differentiate twice: each is a primitive whose VJP is written in tracegrad
ops, or a composite of such.

Where they differ from PyTorch:
- Singular input: `inv`/`solve` raise `LinAlgError` on an exact zero pivot of LU, and
  `cholesky` on a non-positive pivot, with PyTorch's messages; numpy's LAPACK build rounds as
  it does, so on nearly singular input one library may meet an exact zero where the other
  meets a tiny pivot (one raises, the other returns huge values).
- `det` and `slogdet` differentiate through `inv`, so their gradient at an exactly singular
  matrix raises LinAlgError (PyTorch's is finite there); `slogdet`'s sign has no grad_fn.
- `pinv`'s and `lstsq`'s gradients are the svd's: they need distinct nonzero singular values
  (PyTorch's own pinv formula also covers rank-deficient input). `lstsq` solves through
  pinv for every driver (PyTorch's default gelsy uses a pivoted QR): the same minimum-norm
  solution up to rounding, rank decided from the singular values.
- `inv_ex`/`cholesky_ex` give NaN for a failed matrix (PyTorch: LAPACK's partial result);
  `info` is PyTorch's.
- eigh/svd with repeated eigenvalues (singular values): gradients of the values alone are
  exact; the vectors' undefined terms there are dropped where PyTorch gives inf/NaN (Note
  [Repeated values] in ops/linalg_decomp.py).
- `qr` differentiates mode='reduced' with m >= n (and square 'complete'), not wide input;
  `svd` with `full_matrices=True` differentiates the first k = min(m, n) columns of U and rows
  of Vh only — PyTorch 2.13 does the same (it does not raise).
- The `driver` argument of `svd`/`svdvals` is accepted and ignored (numpy's gesdd is used).
- In compiled programs the decompositions and matrix_exp run eager's numpy kernel on the
  JAX backend too (a host callback), so factor signs match eager exactly.
"""
from . import ops as O
from ._errors import TracegradRuntimeError

__all__ = ["vector_norm", "matrix_norm", "norm"]

_INF = float("inf")


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The `ord`-norm of `x` flattened (or along `dim`): `ord` a number, inf or -inf."""
    if dtype is not None:
        x = x.to(dtype)
    res = O.norm(x, ord, dim, keepdim)
    return res if out is None else out.copy_(res)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """'fro', 'nuc', 1, -1, 2, -2, inf or -inf norm of the matrices in the last two dims."""
    if dtype is not None:
        A = A.to(dtype)
    if A.ndim < 2:
        raise TracegradRuntimeError(f"linalg.matrix_norm: The input tensor A must have at "
                                    f"least 2 dimensions.")
    d0, d1 = (d % A.ndim for d in dim)
    if ord == "fro":
        res = O.norm(A, 2, (d0, d1), keepdim)
    elif ord in (1, -1, _INF, -_INF):
        rows, cols = (d0, d1) if abs(ord) == 1 else (d1, d0)
        reduce = O.amax if ord > 0 else O.amin
        if not keepdim and cols > rows:       # the summed dimension is gone
            cols -= 1
        res = reduce(O.sum(O.abs(A), rows, keepdim=keepdim), cols, keepdim=keepdim)
    elif ord in ("nuc", 2, -2):
        res = _spectral(A, ord, d0, d1, keepdim)
    else:
        raise TracegradRuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    return res if out is None else out.copy_(res)


def _spectral(A, ord, d0, d1, keepdim):
    """The nuclear norm (sum), 2-norm (largest) or -2-norm (smallest singular value)."""
    from .ops.linalg_decomp import svdvals
    rest = [d for d in range(A.ndim) if d not in (d0, d1)]
    s = svdvals(O.permute(A, tuple(rest) + (d0, d1)))
    res = (O.sum if ord == "nuc" else O.amax if ord == 2 else O.amin)(s, -1)
    if keepdim:
        for d in sorted((d0, d1)):
            res = O.unsqueeze(res, d)
    return res


def norm(input, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):
    """A vector norm (1-D input, an int `dim`, or no `ord`) or a matrix norm (2-D input or
    a pair `dim`), as PyTorch decides."""
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(input, 2 if ord is None else ord, dims, keepdim, dtype=dtype,
                               out=out)
        return matrix_norm(input, "fro" if ord is None else ord, dims, keepdim, dtype=dtype,
                           out=out)
    if ord is None:
        return vector_norm(input, 2, None, keepdim, dtype=dtype, out=out)
    if input.ndim == 1:
        return vector_norm(input, ord, None, keepdim, dtype=dtype, out=out)
    if input.ndim == 2:
        return matrix_norm(input, ord, (-2, -1), keepdim, dtype=dtype, out=out)
    raise TracegradRuntimeError("linalg.norm: If dim is not specified but ord is, the input "
                                f"must be 1D or 2D. Got {input.ndim}D.")


from ._errors import LinAlgError  # noqa: E402,F401
from .ops.linalg_solvers import (inv, det, slogdet, solve, cholesky,  # noqa: E402,F401
                                 solve_triangular, inv_ex, cholesky_ex)
__all__ += ["LinAlgError", "inv", "det", "slogdet", "solve", "cholesky", "solve_triangular",
            "inv_ex", "cholesky_ex"]
from .ops.linalg_decomp import qr, eigh, eigvalsh, svd, svdvals  # noqa: E402,F401
__all__ += ["qr", "eigh", "eigvalsh", "svd", "svdvals"]
from .ops.linalg_functions import (matrix_exp, pinv, lstsq, matrix_power,  # noqa: E402,F401
                                   multi_dot)
__all__ += ["matrix_exp", "pinv", "lstsq", "matrix_power", "multi_dot"]
from .ops.householder import householder_product  # noqa: E402,F401
__all__ += ["householder_product"]
from .ops.linalg_more import linalg_cross as cross  # noqa: E402,F401
__all__ += ["cross"]
from .ops.lu_factorization import lu_factor  # noqa: E402,F401
__all__ += ["lu_factor"]
