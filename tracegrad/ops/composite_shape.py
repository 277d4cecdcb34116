"""Shape and structure composites: `meshgrid rot90 fliplr flipud movedim moveaxis tile
tensordot kron diff block_diag cartesian_prod`, each built from reshape, expand, flip,
permute, matmul, cat and item assignment, so gradients, tracing and JAX come free.

Note [Views as PyTorch's]: PyTorch's `meshgrid` and `movedim` return views of their inputs;
here `movedim` is a `permute` and `meshgrid` a reshape and an `expand`, views too, so the
version counter and in-place writes through them behave as PyTorch's. `rot90`, `flip*`,
`tile`, `kron`, `diff` and `block_diag` return new tensors, as PyTorch's do.
"""
import warnings

from .. import _dtype as D
from .._errors import TracegradRuntimeError, op_error
from .._tensor import Tensor, _wrap_dim
from . import elementwise as E
from . import shape as S
from .structure import flip

__all__ = ["meshgrid", "rot90", "fliplr", "flipud", "movedim", "moveaxis", "tile",
           "tensordot", "kron", "diff", "block_diag", "cartesian_prod"]


def _tensors(args, op):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    return args


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 0-d or 1-D tensors; `indexing` 'ij' (the default, with
    PyTorch's warning when it is not given) or 'xy' (the first two dims swapped)."""
    tensors = _tensors(tensors, "meshgrid")
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass "
                      "the indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise op_error(TracegradRuntimeError, "meshgrid", "torch.meshgrid: indexing must be "
                       f"one of \"xy\" or \"ij\", but received: {indexing}")
    if not tensors:
        raise op_error(TracegradRuntimeError, "meshgrid", "meshgrid expects a non-empty "
                       "TensorList")
    for t in tensors:
        if t.ndim > 1:
            raise op_error(TracegradRuntimeError, "meshgrid", "torch.meshgrid: Expected 0D or "
                           f"1D tensor in the tensor list but got: {t}")
    swap = indexing == "xy" and len(tensors) >= 2
    ts = [S.reshape(t, (-1,)) for t in tensors]
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.shape[0] for t in ts)
    out = []
    for k, t in enumerate(ts):
        view = [1] * len(ts)
        view[k] = shape[k]
        out.append(S.expand(S.reshape(t, tuple(view)), shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees `k` times in the plane of `dims` (from the first towards the
    second axis)."""
    dims = list(dims)
    if len(dims) != 2:
        raise op_error(TracegradRuntimeError, "rot90", "expected total rotation dims == 2, but "
                       f"got dims = {len(dims)}")
    if input.ndim < 2:
        raise op_error(TracegradRuntimeError, "rot90", "expected total dims >= 2, but got "
                       f"total dims = {input.ndim}")
    d0, d1 = (_wrap_dim(d, input.ndim, "rot90") for d in dims)
    if d0 == d1:
        raise op_error(TracegradRuntimeError, "rot90", "expected rotation dims to be "
                       f"different, but got dim0 = {d0} and dim1 = {d1}")
    k = k % 4
    if k == 1:
        return S.transpose(flip(input, [d1]), d0, d1)
    if k == 2:
        return flip(input, [d0, d1])
    if k == 3:
        return S.transpose(flip(input, [d0]), d0, d1)
    return input.clone()


def fliplr(input):
    if input.ndim < 2:
        raise op_error(TracegradRuntimeError, "fliplr", "Input must be >= 2-d.")
    return flip(input, [1])


def flipud(input):
    if input.ndim < 1:
        raise op_error(TracegradRuntimeError, "flipud", "Input must be >= 1-d.")
    return flip(input, [0])


def movedim(input, source, destination):
    """`input` with the dims `source` moved to `destination` (ints or sequences), the others
    keeping their order: a permute (a view)."""
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise op_error(TracegradRuntimeError, "movedim", "movedim: Invalid source or "
                       "destination dims: source "
                       f"({src} dims) should contain the same number of dims as destination "
                       f"({dst} dims)")
    n = input.ndim
    src = [_wrap_dim(d, n, "movedim") for d in src]
    dst = [_wrap_dim(d, n, "movedim") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise op_error(TracegradRuntimeError, "movedim", "movedim: repeated dim in "
                       f"`source` ({src}) or `destination` ({dst})")
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [o if o is not None else next(rest) for o in order]
    return S.permute(input, order)


moveaxis = movedim


def tile(input, dims):
    """`repeat` with `dims` padded by leading ones to the input's rank."""
    dims = tuple(dims)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return S.repeat(input, dims)


def tensordot(a, b, dims=2, out=None):
    """Sums the products over the last `dims` dims of `a` and the first of `b`, or over the
    dim lists `dims = ([a dims], [b dims])`: a permute, a reshape and one matmul."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise op_error(TracegradRuntimeError, "tensordot", "tensordot expects dims >= 0, "
                           f"but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
    if len(da) != len(db):
        raise op_error(TracegradRuntimeError, "tensordot", "both dimension lists should have "
                       "same length")
    da = [_wrap_dim(d, a.ndim, "tensordot") for d in da]
    db = [_wrap_dim(d, b.ndim, "tensordot") for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise op_error(TracegradRuntimeError, "tensordot", "contracted dimensions need to "
                           f"match, but first has size {a.shape[i]} in dim {i} and second has "
                           f"size {b.shape[j]} in dim {j}")
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = 1
    for d in da:
        k *= a.shape[d]
    ma = S.reshape(S.permute(a, fa + da), (-1, k))
    mb = S.reshape(S.permute(b, db + fb), (k, -1))
    from .linalg import matmul
    return S.reshape(matmul(ma, mb), tuple(a.shape[d] for d in fa) +
                     tuple(b.shape[d] for d in fb))


def kron(input, other):
    """The Kronecker product: block (i, j, ...) is `input[i, j, ...] * other`."""
    n = max(input.ndim, other.ndim)
    a = S.reshape(input, (1,) * (n - input.ndim) + tuple(input.shape))
    b = S.reshape(other, (1,) * (n - other.ndim) + tuple(other.shape))
    ia = sum(((s, 1) for s in a.shape), ())
    ib = sum(((1, s) for s in b.shape), ())
    prod = E.mul(S.reshape(a, ia), S.reshape(b, ib))
    return S.reshape(prod, tuple(x * y for x, y in zip(a.shape, b.shape)))


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The `n`-th forward difference along `dim` (`!=` of neighbours for bool), after
    concatenating `prepend` and `append`."""
    if input.ndim == 0:
        raise op_error(TracegradRuntimeError, "diff", "diff expects input to be at least "
                       "one-dimensional")
    if n < 0:
        raise op_error(TracegradRuntimeError, "diff", "order must be non-negative but got "
                       f"{n}")
    d = _wrap_dim(dim, input.ndim, "diff")
    parts = [p for p in (prepend, input, append) if p is not None]
    if len(parts) > 1:
        parts = [p if p.ndim else S.expand(S.reshape(p, (1,) * input.ndim),
                                           tuple(1 if i == d else s
                                                 for i, s in enumerate(input.shape)))
                 for p in parts]
        input = S.cat(parts, d)
    x = input
    for _ in range(n):
        m = x.shape[d]
        if m == 0:
            break
        hi, lo = S.narrow(x, d, 1, m - 1), S.narrow(x, d, 0, m - 1)
        x = E.ne(hi, lo) if x.dtype == D.bool_ else E.sub(hi, lo)
    return x


def block_diag(*tensors):
    """A block-diagonal matrix from 0-d, 1-D (one row) or 2-D tensors, promoted together."""
    from .creation import zeros
    from ..ops.primitive import _operand_dtype
    mats = []
    for k, t in enumerate(tensors):
        if t.ndim > 2:
            raise op_error(TracegradRuntimeError, "block_diag", "torch.block_diag: Input "
                           f"tensors must have 2 or fewer dimensions. Input {k} has {t.ndim} "
                           "dimensions")
        mats.append(S.reshape(t, (1, -1)) if t.ndim < 2 else t)
    if not mats:
        return zeros((1, 0))
    dtype = _operand_dtype(tuple(tensors))
    rows, cols = sum(m.shape[0] for m in mats), sum(m.shape[1] for m in mats)
    out = zeros((rows, cols), dtype=dtype)
    r = c = 0
    for m in mats:
        h, w = m.shape
        if h and w:
            out[r:r + h, c:c + w] = m
        r, c = r + h, c + w
    return out


def cartesian_prod(*tensors):
    """Every combination of the 1-D tensors' entries, one per row (the tensor itself for
    one input)."""
    tensors = _tensors(tensors, "cartesian_prod")
    for t in tensors:
        if t.ndim != 1:
            raise op_error(TracegradRuntimeError, "cartesian_prod", "Expect a 1D vector, but "
                           f"got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return S.stack([S.reshape(g, (-1,)) for g in grids], 1)
