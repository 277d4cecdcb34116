"""The orthogonal parametrization (`nn.utils.parametrizations.orthogonal`), PyTorch's maps
and numbers.

A tall n x k matrix (a wide one is handled transposed) is the image of an unconstrained
n x k tensor X under one of three maps:
- "matrix_exp": Q = expm(A)[:, :k], A = L - L^T, L the lower triangle of X padded to n x n;
- "cayley": Q = ((I - A/2)^-1 (I + A/2))[:, :k], the same A;
- "householder": Q = H_0 ... H_{k-1} restricted to k columns, the reflectors taken from
  the strict lower triangle of X, each column's sign from X's diagonal (not differentiated).
Every map sends X = 0 (householder: X = -I) to the identity columns.

With `use_trivialization=True` (the default) the module keeps a buffer `base`, an n x n
orthogonal matrix, and the weight is `base @ Q`: assigning an orthogonal matrix (also at
registration) stores it (or the Q factor of a QR with a positive diagonal, completing a
rectangular one with random columns) as `base` and resets X to -I, so the weight equals the
assigned matrix and the optimisation starts at the identity of the map. Without it,
assigning works for "householder" only (through the QR in reflector form); registration
then keeps the weight as X.
"""
from ... import ops as O
from ..._errors import TracegradNotImplementedError, TracegradValueError
from ..._mode import no_grad
from ..._settings import finfo
from ..._tensor import Tensor
from ...ops.householder import geqrf, householder_product
from ...ops.linalg_decomp import qr
from ...ops.linalg_functions import matrix_exp
from ...ops.linalg_solvers import solve
from ..module import Module

MAPS = ("matrix_exp", "cayley", "householder")


def _diagonal(x):
    """The main diagonal of a tall (..., n, k) matrix, shape (..., k)."""
    return (x * O.eye(x.shape[-2], x.shape[-1], dtype=x.dtype)).sum(-2)


def _is_orthogonal(q):
    n, k = q.shape[-2:]
    eye = O.eye(k, dtype=q.dtype)
    return bool(O.allclose(q.mT @ q, eye, atol=10.0 * n * finfo(q.dtype).eps))


def _make_orthogonal(a):
    """The Q factor of a tall `a` = QR whose R has a non-negative diagonal."""
    q, r = qr(a)
    return q * O.sign(_diagonal(r)).unsqueeze(-2)


class _Orthogonal(Module):
    """The parametrization `orthogonal` registers (named as PyTorch names it)."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2:]
        transposed = n < k
        if transposed:
            X, n, k = X.mT, k, n
        if self.orthogonal_map == "householder":
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            Q = householder_product(A, tau)
            Q = Q * _diagonal(X).int().unsqueeze(-2)      # signs only: not differentiated
        else:
            L = X.tril()
            if n != k:
                pad = O.zeros(*X.shape[:-2], n, n - k, dtype=X.dtype)
                L = O.cat([L, pad], -1)
            A = L - L.mT                                  # skew-symmetric, n x n
            if self.orthogonal_map == "matrix_exp":
                Q = matrix_exp(A)
            else:
                eye = O.eye(n, dtype=A.dtype)
                Q = solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        if "base" in self._buffers:
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q):
        with no_grad():
            return self._right_inverse(Q)

    def _right_inverse(self, Q):
        if tuple(Q.shape) != self.shape:
            raise TracegradValueError(f"Expected a matrix or batch of matrices of shape "
                                      f"{_size(self.shape)}. Got a tensor of shape "
                                      f"{_size(Q.shape)}.")
        Q_init = Q
        n, k = Q.shape[-2:]
        transposed = n < k
        if transposed:
            Q, n, k = Q.mT, k, n
        if "base" not in self._buffers:
            if self.orthogonal_map != "householder":
                raise TracegradNotImplementedError(
                    "It is not possible to assign to the matrix exponential or the Cayley "
                    "parametrizations when use_trivialization=False.")
            A, tau = geqrf(Q)
            # a positive diagonal of R picks one of the QR decompositions; LAPACK's tau == 0
            # (no reflection) is undone by the opposite sign
            sign = O.sign(_diagonal(A))
            sign = O.where(tau == 0, -sign, sign)
            eye = O.eye(n, k, dtype=A.dtype)
            A = A * (1 - eye) + sign.unsqueeze(-2) * eye    # R above, reflectors below
            return A.mT if transposed else A
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:                          # complete Q with random columns, then orthogonalize
            N = O.randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype)
            Q = _make_orthogonal(O.cat([Q, N], -1))
        self.base = Q
        # -I: the householder map sends it to the identity (and the exp/Cayley maps ignore
        # the diagonal), so the weight is `base` restricted to Q_init's shape
        return O.zeros_like(Q_init) - O.eye(*Q_init.shape[-2:], dtype=Q_init.dtype)


def _size(shape):
    return "torch.Size([" + ", ".join(str(s) for s in shape) + "])"


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Make `module.<name>` an orthogonal matrix (or batch of them): its columns orthonormal
    when tall, rows when wide, through `orthogonal_map` ("matrix_exp", "cayley" or
    "householder"; default "matrix_exp" for square weights, else "householder").

    >>> layer = orthogonal(nn.Linear(4, 4))
    >>> layer.weight.mT @ layer.weight                # the identity, up to rounding
    """
    from . import parametrize
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise TracegradValueError(f"Module '{module}' has no parameter or buffer with name "
                                  f"'{name}'")
    if weight.ndim < 2:
        raise TracegradValueError("Expected a matrix or batch of matrices. Got a tensor of "
                                  f"{weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in MAPS:
        raise TracegradValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                                  f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
