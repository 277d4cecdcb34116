"""Products of Householder reflectors: `linalg.householder_product` (LAPACK's orgqr), and the
non-differentiable QR factorization in reflector form (`geqrf`) that produces its input.

`householder_product(A, tau)` is a composite of matmuls and elementwise ops, so autograd,
double backward and compilation come from those ops. With reflectors
H_i = I - tau_i v_i v_i^T, v_i = e_i + (column i of A strictly below the diagonal), the
result is the first n columns of H_0 H_1 ... H_{k-1}. It is built right to left on the
m x n identity: M <- M - tau_i v_i (v_i^T M), O(k m n) work, no m x m matrix.
"""
import numpy as np

from .. import _dtype as D
from .._errors import TracegradRuntimeError, op_error
from .._tensor import Tensor, from_array
from . import creation as C
from . import elementwise as E
from .linalg import matmul
from .shape import broadcast_to, transpose, unsqueeze

_OP = "linalg.householder_product"


def _check(input, tau):
    if not isinstance(input, Tensor) or not isinstance(tau, Tensor):
        raise op_error(TracegradRuntimeError, _OP, "expected input and tau to be tensors")
    if input.ndim < 2:
        raise op_error(TracegradRuntimeError, _OP,
                       "input must have at least 2 dimensions.")
    m, n = input.shape[-2:]
    if m < n:
        raise op_error(TracegradRuntimeError, _OP, "input.shape[-2] must be greater than or "
                       "equal to input.shape[-1]")
    if tau.ndim and n < tau.shape[-1]:
        raise op_error(TracegradRuntimeError, _OP, "input.shape[-1] must be greater than or "
                       "equal to tau.shape[-1]")
    if tau.ndim != input.ndim - 1 or tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
        raise op_error(TracegradRuntimeError, _OP, "Expected batch dimensions of tau to be "
                       "equal to input.shape[:-2], but got "
                       f"{list(tau.shape[:-1])} and {list(input.shape[:-2])}")
    if not input.dtype.is_floating_point or tau.dtype is not input.dtype:
        raise op_error(TracegradRuntimeError, _OP, "tau and input must be floating tensors of "
                       f"one dtype, got {tau.dtype} and {input.dtype}")


def householder_product(input, tau):
    """The first n columns of the product of k Householder reflectors stored in `input`
    (m x n, m >= n >= k, reflector vectors below the diagonal, unit diagonal implied) and
    `tau` (k scales), batched over leading dimensions; differentiable twice.

    >>> A, tau = tracegrad.geqrf(X)                   # X = Q R
    >>> Q = tracegrad.linalg.householder_product(A, tau)
    """
    _check(input, tau)
    m, n = input.shape[-2:]
    eye = C.eye(m, n, dtype=input.dtype)
    vectors = E.add(input.tril(-1), eye)                   # (..., m, n), unit diagonal
    out = broadcast_to(eye, tuple(input.shape))
    if not tau.shape[-1]:           # no reflector: the identity, still a function of both
        out = E.add(out, E.add(input[..., :0].sum(), tau.sum()))   # (exact zeros, grad_fn)
    for i in reversed(range(tau.shape[-1])):
        v = vectors[..., :, i:i + 1]                       # (..., m, 1)
        t = unsqueeze(tau[..., i:i + 1], -1)               # (..., 1, 1)
        out = E.sub(out, E.mul(t, matmul(v, matmul(transpose(v, -2, -1), out))))
    return out


def geqrf(input):
    """(a, tau): the QR factorization of `input` in LAPACK's reflector form — R on and above
    the diagonal of `a`, the reflectors below it, their scales in `tau`. Not differentiable
    (as in PyTorch), so the results never require grad; eager only (it reads the values)."""
    if not isinstance(input, Tensor) or input.ndim < 2:
        raise op_error(TracegradRuntimeError, "geqrf", "input must have at least 2 dimensions.")
    if not input.dtype.is_floating_point:
        raise op_error(TracegradRuntimeError, "geqrf", '"geqrf_cpu" not implemented for '
                       f"'{D.scalar_type_name(input.dtype)}'")
    x = input.detach().numpy()
    if x.size == 0:
        k = min(x.shape[-2:])
        return (from_array(x.copy()), from_array(np.zeros(x.shape[:-2] + (k,), x.dtype)))
    h, tau = np.linalg.qr(x, mode="raw")       # h holds the transposed factorization
    a = np.ascontiguousarray(np.swapaxes(h, -1, -2)).astype(x.dtype, copy=False)
    return from_array(a), from_array(tau.astype(x.dtype, copy=False))
