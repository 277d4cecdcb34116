"""Small linear-algebra ops of PyTorch composed of existing primitives: `mv addmv addr
addbmm inner vdot dist cov corrcoef trace diag_embed diagflat chain_matmul cross
linalg_cross vander frobenius_norm nuclear_norm` and the in-place `addmv_ addr_ addbmm_
addmm_ baddbmm_`.

Gradients, tracing and both compiled backends come from the primitives they use; only the
grad_fn names differ from PyTorch's. The `add*` family is `beta * input + alpha * product`;
with `beta=0` the input's values are ignored (nan and inf included) and its gradient is
zero, as PyTorch's. `cross` without `dim` takes the first dimension of size 3 and warns,
as PyTorch 2.13 deprecates it
(each deprecation warning once per process, as PyTorch's).
"""
import warnings

import numpy as np

from .. import _dtype as D
from .._errors import TracegradRuntimeError, op_error
from .._tensor import Tensor, _wrap_dim
from . import creation as C
from . import elementwise as E
from . import reduction as R
from . import shape as S
from .diagonal_view import diagonal as _diagonal
from .elementwise_more import in_place
from .linalg import dot, matmul, mm, outer

__all__ = ["mv", "addmv", "addmv_", "addr", "addbmm", "inner", "vdot", "dist", "cov",
           "corrcoef", "diag_embed", "diagflat", "chain_matmul", "cross", "vander",
           "frobenius_norm", "nuclear_norm"]


def _bshape(a, b):
    try:
        return tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise S._broadcast_error("broadcast", [tuple(a), tuple(b)]) from None


_WARNED = set()          # PyTorch gives each deprecation warning once per process


def _warn_once(key, msg, stacklevel=3):
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(msg, UserWarning, stacklevel=stacklevel)


def _fail(op, msg):
    return op_error(TracegradRuntimeError, op, msg)


def _scaled_sum(op, input, prod, beta, alpha):
    """`beta * input + alpha * prod`, input broadcast to prod's shape (never growing it)."""
    if tuple(_bshape(input.shape, prod.shape)) != tuple(prod.shape):
        raise _fail(op, f"The expanded size of the tensor ({prod.shape[-1]}) must match the "
                    f"existing size ({input.shape[-1]}) at non-singleton dimension "
                    f"{input.ndim - 1}.  Target sizes: {list(prod.shape)}.  Tensor sizes: "
                    f"{list(input.shape)}")
    p = prod if alpha == 1 else E.mul(prod, alpha)
    if beta == 0:        # input ignored; its gradient is zero (where routes none to it)
        return E.where(C.zeros((), dtype=D.bool_), input, p)
    return E.add(input if beta == 1 else E.mul(input, beta), p)


def mv(input, vec):
    """The matrix-vector product of a 2-D `input` and a 1-D `vec`.

    >>> mv(ones(2, 3), ones(3))
    tensor([3., 3.])
    """
    if input.ndim != 2 or vec.ndim != 1:
        raise _fail("mv", f"vector + matrix @ vector expected, got 1, {input.ndim}, "
                    f"{vec.ndim}")
    if input.shape[1] != vec.shape[0]:
        raise _fail("mv", f"size mismatch, got input ({input.shape[0]}), mat "
                    f"({input.shape[0]}x{input.shape[1]}), vec ({vec.shape[0]})")
    return matmul(input, vec)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """`beta * input + alpha * (mat @ vec)`; input (at most 1-D) broadcasts to mat's rows."""
    if input.ndim > 1 or mat.ndim != 2 or vec.ndim != 1:
        raise _fail("addmv", f"vector + matrix @ vector expected, got {input.ndim}, "
                    f"{mat.ndim}, {vec.ndim}")
    if mat.shape[1] != vec.shape[0] or (input.ndim and input.shape[0] not in (1, mat.shape[0])):
        raise _fail("addmv", f"size mismatch, got input ({input.shape[0] if input.ndim else 1})"
                    f", mat ({mat.shape[0]}x{mat.shape[1]}), vec ({vec.shape[0]})")
    return _scaled_sum("addmv", input, matmul(mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """`beta * input + alpha * outer(vec1, vec2)`; input broadcasts to the outer product."""
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise _fail("addr", f"addr: Expected 1-D argument vec1, but got {vec1.ndim}-D"
                    if vec1.ndim != 1 else
                    f"addr: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    return _scaled_sum("addr", input, outer(vec1, vec2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """`beta * input + alpha * sum_b(batch1[b] @ batch2[b])`, one (n, b*m) @ (b*m, p) product.
    """
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise _fail("addbmm", "batch1 must be a 3D tensor" if batch1.ndim != 3
                    else "batch2 must be a 3D tensor")
    b, n, m = batch1.shape
    if batch2.shape[0] != b or batch2.shape[1] != m:
        raise _fail("addbmm", f"batch1 and batch2 must have same number of batches, got {b} "
                    f"and {batch2.shape[0]}" if batch2.shape[0] != b else
                    f"Incompatible matrix sizes for bmm ({n}x{m} and "
                    f"{batch2.shape[1]}x{batch2.shape[2]})")
    lhs = S.reshape(S.permute(batch1, (1, 0, 2)), (n, b * m))
    return _scaled_sum("addbmm", input, mm(lhs, S.reshape(batch2, (b * m, batch2.shape[2]))),
                       beta, alpha)


def addmv_(input, mat, vec, *, beta=1, alpha=1):
    """`addmv` in place."""
    return in_place("addmv_", input, addmv, mat, vec, beta=beta, alpha=alpha)


def addr_(input, vec1, vec2, *, beta=1, alpha=1):
    """`addr` in place."""
    return in_place("addr_", input, addr, vec1, vec2, beta=beta, alpha=alpha)


def addbmm_(input, batch1, batch2, *, beta=1, alpha=1):
    """`addbmm` in place."""
    return in_place("addbmm_", input, addbmm, batch1, batch2, beta=beta, alpha=alpha)


def addmm_(input, mat1, mat2, *, beta=1, alpha=1):
    """`addmm` in place."""
    from .linear import addmm
    return in_place("addmm_", input, addmm, mat1, mat2, beta=beta, alpha=alpha)


def baddbmm_(input, batch1, batch2, *, beta=1, alpha=1):
    """`baddbmm` in place."""
    from .baddbmm import baddbmm
    return in_place("baddbmm_", input, baddbmm, batch1, batch2, beta=beta, alpha=alpha)


def inner(input, other):
    """Sum of products over the last dimension of both (a product with a 0-d operand).

    >>> inner(ones(2, 3), ones(4, 3)).shape
    torch.Size([2, 4])
    """
    if input.ndim == 0 or other.ndim == 0:
        return E.mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise _fail("inner", f"inner() the last dimension must match on both input tensors "
                    f"but got shapes {list(input.shape)} and {list(other.shape)}")
    k = input.shape[-1]
    res = mm(S.reshape(input, (-1, k)), S.t(S.reshape(other, (-1, k))))
    return S.reshape(res, tuple(input.shape[:-1]) + tuple(other.shape[:-1]))


def vdot(input, other):
    """The dot product of two 1-D tensors (real tensors: as `dot`)."""
    return dot(input, other)


def dist(input, other, p=2):
    """The `p`-norm of `input - other` (broadcast); floating tensors only.

    >>> dist(tensor([0., 3.]), tensor([4., 0.]))
    tensor(5.)
    """
    d = E.sub(input, other)
    if not d.dtype.is_floating_point:
        raise _fail("dist", "norm(): input dtype should be either floating point or complex. "
                    f"Got {D.scalar_type_name(d.dtype)} instead.")
    return R.norm(d, p)


def _weights(name, w, n, integer):
    if w.ndim > 1:
        raise _fail("cov", f"cov(): expected {name} to have one or fewer dimensions but got "
                    f"{name} with {w.ndim} dimensions")
    if w.numel() != n:
        raise _fail("cov", f"cov(): expected {name} to have the same numel as there are "
                    f"observations in the input but got {w.numel()} != {n}")
    if integer and w.dtype.is_floating_point:
        raise _fail("cov", "cov(): expected fweights to have integral dtype but got "
                    f"fweights with {D.scalar_type_name(w.dtype)} dtype")
    if not integer and not w.dtype.is_floating_point:
        raise _fail("cov", "cov(): expected aweights to have floating point dtype but got "
                    f"aweights with {D.scalar_type_name(w.dtype)} dtype")
    return w


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in `input`'s rows (observations in columns),
    weighted by integer `fweights` and float `aweights`, as torch.cov.

    >>> cov(tensor([[0., 2.], [1., 1.]]))
    tensor([[ 2., -1.],
            [-1.,  0.5]])
    """
    if input.ndim > 2:
        raise _fail("cov", "cov(): expected input to have two or fewer dimensions but got an "
                    f"input with {input.ndim} dimensions")
    x = input if input.ndim == 2 else S.reshape(input, (1, -1))
    if not x.dtype.is_floating_point:
        x = x.to(D.get_default_dtype())
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = _weights("fweights", fweights, n, True)
    if aweights is not None:
        a = _weights("aweights", aweights, n, False)
        w = a if w is None else E.mul(w, a)
    if w is None:
        avg = R.mean(x, 1)
        w_sum = float(n)
        factor = n - correction
    else:
        w_sum = R.sum(w)
        avg = E.div(R.sum(E.mul(x, w), 1), w_sum)
        if correction == 0:
            factor = w_sum
        elif aweights is None:
            factor = E.sub(w_sum, correction)
        else:
            factor = E.sub(w_sum, E.div(E.mul(R.sum(E.mul(w, aweights)), correction), w_sum))
    if isinstance(factor, Tensor):
        factor = E.clamp(factor, min=0)
    elif factor <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the number of observations.", UserWarning, stacklevel=2)
        factor = 0
    xm = E.sub(x, S.unsqueeze(avg, 1))
    c = mm(xm, S.t(xm if w is None else E.mul(xm, w)))
    return S.squeeze(E.div(c, factor))


def corrcoef(input):
    """Pearson correlation coefficients of the variables in `input`'s rows, clipped to
    [-1, 1]."""
    if input.ndim > 2:
        raise _fail("corrcoef", "corrcoef(): expected input to have two or fewer dimensions "
                    f"but got an input with {input.ndim} dimensions")
    c = cov(input)
    if c.ndim == 0:
        return E.div(c, c)
    std = E.sqrt(_diagonal(c))
    c = E.div(c, S.unsqueeze(std, 1))
    c = E.div(c, S.unsqueeze(std, 0))
    return E.clamp(c, -1, 1)


def trace(input):
    """The sum of a matrix's main diagonal (integers sum in int64).

    >>> trace(tensor([[1, 2], [3, 4]]))
    tensor(5)
    """
    if input.ndim != 2:
        raise _fail("trace", f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return R.sum(_diagonal(input))


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose (dim1, dim2) matrices have `input`'s last dimension on their
    `offset`-th diagonal (zeros elsewhere).

    >>> diag_embed(tensor([[1., 2.]])).shape
    torch.Size([1, 2, 2])
    """
    nd = input.ndim + 1
    d1, d2 = _wrap_dim(dim1, nd, "diag_embed"), _wrap_dim(dim2, nd, "diag_embed")
    if d1 == d2:
        raise _fail("diag_embed", f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    x = input if input.ndim else S.reshape(input, (1,))
    n, k = x.shape[-1], int(offset)
    m = n + abs(k)
    if k:
        x = S.cat([x, C.zeros(tuple(x.shape[:-1]) + (abs(k),), dtype=x.dtype)], -1)
    r = C.arange(m)
    mask = E.eq(E.sub(S.unsqueeze(r, 0), S.unsqueeze(r, 1)), k)     # [row, col]: col-row == k
    # row r holds x[r] above the main diagonal, column c holds x[c] below it
    out = E.where(mask, S.unsqueeze(x, -1 if k >= 0 else -2), C.zeros((), dtype=x.dtype))
    from .composite_shape import movedim
    return movedim(out, (-2, -1), (d1, d2))


def diagflat(input, offset=0):
    """A square matrix with the flattened `input` on its `offset`-th diagonal."""
    from .composite_more import diag
    return diag(S.reshape(input, (-1,)), offset)


def chain_matmul(*matrices, out=None):
    """The product of 2-D matrices left to right (deprecated in PyTorch for
    `linalg.multi_dot`, and warns so)."""
    _warn_once("chain_matmul", "torch.chain_matmul is deprecated and will be removed in a "
               "future PyTorch release. Use torch.linalg.multi_dot instead, which accepts a "
               "list of two or more tensors rather than multiple parameters.")
    if len(matrices) == 0:
        raise _fail("chain_matmul", "chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        if m.ndim != 2:
            raise _fail("chain_matmul", f"Tensor dimension is {m.ndim}, expected 2 instead.")
    res = S.clone(matrices[0]) if len(matrices) == 1 else matrices[0]
    for m in matrices[1:]:
        res = mm(res, m)
    return res if out is None else out.copy_(res)


def linalg_cross(input, other, *, dim=-1, out=None):
    """`torch.linalg.cross`: the 3-vector cross product along `dim` (broadcasting)."""
    if input.ndim != other.ndim:
        raise _fail("linalg.cross", "linalg.cross: inputs must have the same number of "
                    "dimensions.")
    d = _wrap_dim(dim, input.ndim, "linalg.cross")
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise _fail("linalg.cross", f"linalg.cross: inputs dimension {dim} must have length 3. "
                    f"Got {input.shape[d]} and {other.shape[d]}")
    a, b = S.broadcast_tensors(input, other)
    a1, a2, a3 = S.unbind(a, d)
    b1, b2, b3 = S.unbind(b, d)
    res = S.stack([E.sub(E.mul(a2, b3), E.mul(a3, b2)), E.sub(E.mul(a3, b1), E.mul(a1, b3)),
                   E.sub(E.mul(a1, b2), E.mul(a2, b1))], d)
    return res if out is None else out.copy_(res)


def cross(input, other, dim=None, *, out=None):
    """The cross product along `dim`; without `dim`, the first dimension of size 3 (with
    PyTorch's deprecation warning)."""
    if dim is None:
        _warn_once("cross", "Using torch.cross without specifying the dim arg is deprecated."
                   "\nPlease either pass the dim explicitly or simply use torch.linalg.cross."
                   "\nThe default value of dim will change to agree with that of linalg.cross "
                   "in a future release.")
        shape = _bshape(input.shape, other.shape) \
            if input.ndim == other.ndim else input.shape
        dims = [i for i, s in enumerate(shape) if s == 3]
        if not dims:
            raise _fail("cross", "no dimension of size 3 in input")
        dim = dims[0]
    return linalg_cross(input, other, dim=dim, out=out)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of 1-D `x`: columns x^(N-1) ... x^0 (`increasing`: x^0 first),
    built by a running product as PyTorch does (integers give int64)."""
    if x.ndim != 1:
        raise _fail("vander", "x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise _fail("vander", "N must be non-negative.")
    from .scan import cumprod
    dt = x.dtype if x.dtype.is_floating_point else D.int64
    if n == 0:
        return C.zeros((x.shape[0], 0), dtype=dt)
    cols = [C.ones((x.shape[0], 1), dtype=dt)]
    if n > 1:
        cols.append(S.expand(S.unsqueeze(x.to(dt), 1), (x.shape[0], n - 1)))
    res = cumprod(S.cat(cols, 1), 1)
    if not increasing:
        from .structure import flip
        res = flip(res, (1,))
    return res


def _deprecated(name, use):
    _warn_once(name, f"at::{name} is deprecated and it is just left for JIT compatibility. "
               f"It will be removed in a future PyTorch release. Please use {use} instead",
               stacklevel=4)


def frobenius_norm(input, dim, keepdim=False, *, out=None):
    """The 2-norm over `dim` (deprecated in PyTorch for `linalg.vector_norm`)."""
    _deprecated("frobenius_norm", "`linalg.vector_norm(A, 2., dim, keepdim)`")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise _fail("frobenius_norm", f"Expected at most 2 dimensions, but got {len(dims)} "
                    "dimensions instead.")
    res = R.norm(input, 2, dims, keepdim)
    return res if out is None else out.copy_(res)


def nuclear_norm(input, dim=None, keepdim=False, *, out=None):
    """The sum of singular values of the matrices in `dim` (default the last two; deprecated
    in PyTorch for `linalg.matrix_norm(A, 'nuc')`)."""
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    _deprecated("nuclear_norm", "`linalg.matrix_norm(A, 'nuc', dim, keepdim)`")
    from ..linalg import matrix_norm
    if dim is None:
        if input.ndim != 2:
            raise _fail("nuclear_norm", f"Expected a tensor with 2 dimensions, but got a tensor "
                        f"with {input.ndim} dimension{'s' if input.ndim != 1 else ''} instead.")
        dim = (-2, -1)
    res = matrix_norm(input, "nuc", tuple(dim), keepdim)
    return res if out is None else out.copy_(res)

