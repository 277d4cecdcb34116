"""Shape and selection ops of PyTorch tracegrad lacked: `Tensor.unfold` (a view primitive),
`tensor_split hsplit vsplit dsplit atleast_1d atleast_2d atleast_3d column_stack row_stack
dstack take take_along_dim unravel_index slice_scatter select_scatter diagonal_scatter
as_strided_scatter combinations aminmax cumulative_trapezoid trapz`.

All but `unfold` compose existing primitives (views where PyTorch returns views: the split
pieces are narrow/slice views), so gradients and both compiled backends come with them.
`unfold(dimension, size, step)` is a view as in PyTorch: its kernel is a strided numpy view
of the input (memory shared; writes through it reach the input, eagerly by CopySlices and in
compiled code by `view_scatter`), and its gradient adds each window's gradient back into
the positions it read (overlapping windows accumulate) with `index_add`, so it
differentiates again. Overlapping windows (step < size) are a read-only view: an in-place
write into them raises "more than one element of the written-to tensor refers to a single
memory location", where PyTorch writes the shared elements once per window.
"""
import itertools
import math
import numbers

import numpy as np

from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import (TracegradIndexError, TracegradRuntimeError, TracegradTypeError,
                       TracegradValueError, op_error)
from .._tensor import Tensor, _wrap_dim
from . import creation as C
from . import elementwise as E
from . import reduction as R
from . import shape as S
from .primitive import Primitive

__all__ = ["tensor_split", "hsplit", "vsplit", "dsplit", "atleast_1d", "atleast_2d",
           "atleast_3d", "column_stack", "row_stack", "dstack", "take", "take_along_dim",
           "unravel_index", "slice_scatter", "select_scatter", "diagonal_scatter",
           "as_strided_scatter", "combinations", "aminmax", "cumulative_trapezoid", "trapz"]


def _fail(op, msg, cls=TracegradRuntimeError):
    return op_error(cls, op, msg)


# ---- unfold: a view of sliding windows ----
def _unfold_kernel(x, dim, size, step):
    if x.ndim == 0:
        return x.reshape(1)
    n = (x.shape[dim] - size) // step + 1
    shape = x.shape[:dim] + (n,) + x.shape[dim + 1:] + (size,)
    st = x.strides
    strides = st[:dim] + (st[dim] * step,) + st[dim + 1:] + (st[dim],)
    overlapping = step < size and n > 1
    return np.lib.stride_tricks.as_strided(x, shape=shape, strides=strides,
                                           writeable=x.flags.writeable and not overlapping)


def _unfold_shape(shapes, attrs):
    s, d, size, step = shapes[0], attrs["dim"], attrs["size"], attrs["step"]
    if not s:
        return (1,)
    return tuple(s[:d]) + ((s[d] - size) // step + 1,) + tuple(s[d + 1:]) + (size,)


def _unfold_vjp(g, ins, out, n):
    from .index_add import index_add
    shape, a = n.shapes[0], n.attrs
    if not shape:
        return (S.reshape(g, ()),)
    d, size, step = a["dim"], a["size"], a["step"]
    w = g.shape[d]
    idx = (np.arange(w)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    from .._tensor import from_array
    gm = S.reshape(S.permute(g, tuple(range(d + 1)) + (g.ndim - 1,) +
                             tuple(range(d + 1, g.ndim - 1))),
                   tuple(shape[:d]) + (w * size,) + tuple(shape[d + 1:]))
    return (index_add(C.zeros(tuple(shape), dtype=g.dtype), d, from_array(idx), gm),)


UNFOLD = Primitive("unfold", _unfold_kernel, aliases=0, vjp=_unfold_vjp,
                   shape_rule=_unfold_shape, layout="reorders",
                   doc="sliding windows of `size` every `step` along `dim`, as a last dim")


def unfold(input, dimension, size, step):
    """A view of every slice of `size` elements along `dimension`, `step` apart, as a new
    last dimension.

    >>> arange(5.).unfold(0, 2, 2)
    tensor([[0., 1.],
            [2., 3.]])
    """
    nd = max(input.ndim, 1)
    d = _wrap_dim(dimension, nd, "unfold")
    length = input.shape[d] if input.ndim else 1
    if size > length:
        raise _fail("unfold", f"maximum size for tensor at dimension {d} is {length} but size "
                    f"is {size}")
    if size < 0:
        raise _fail("unfold", f"size is {size} but must be >= 0")
    if step <= 0:
        raise _fail("unfold", f"step is {step} but must be > 0")
    return dispatch(UNFOLD, (input,), {"dim": d, "size": int(size), "step": int(step)})


# ---- splitting ----
def _pieces(input, d, bounds):
    n = input.shape[d]
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        a, b = min(max(a, 0), n), min(max(b, 0), n)
        out.append(S.narrow(input, d, a, max(b - a, 0)))
    return tuple(out)


def tensor_split(input, indices_or_sections, dim=0):
    """Split into `sections` nearly equal pieces (the first `n % sections` one longer), or
    at `indices` (a list, or a 1-D tensor; a 0-d tensor counts as sections); views.

    >>> [t.tolist() for t in tensor_split(arange(5), 2)]
    [[0, 1, 2], [3, 4]]
    """
    if input.ndim == 0:
        raise _fail("tensor_split", "tensor_split expected at least a 1-dimensional tensor, "
                    "but got a tensor with 0 dims")
    d = _wrap_dim(dim, input.ndim, "tensor_split")
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios.dtype.is_floating_point or ios.dtype is D.bool_:
            raise _fail("tensor_split", "tensor_split expected tensor_indices_or_sections to "
                        f"have integer dtype, but got {D.scalar_type_name(ios.dtype)}")
        if ios.ndim > 1:
            raise _fail("tensor_split", "tensor_split expected tensor_indices_or_sections to be "
                        f"a zero-dimensional or one-dimensional tensor, but got a tensor with "
                        f"{ios.ndim} dims")
        ios = int(ios.item()) if ios.ndim == 0 else [int(v) for v in ios.tolist()]
    n = input.shape[d]
    if isinstance(ios, numbers.Integral):
        if ios <= 0:
            raise _fail("tensor_split", f"number of sections must be larger than 0, got {ios}")
        q, r = divmod(n, int(ios))
        bounds = [0]
        for k in range(int(ios)):
            bounds.append(bounds[-1] + q + (1 if k < r else 0))
        return _pieces(input, d, bounds)
    idx = [int(i) for i in ios]
    return _pieces(input, d, [0] + [i + n if i < 0 else i for i in idx] + [n])


def _split_along(op, input, ios, d, need):
    if input.ndim < need:
        raise _fail(op, f"torch.{op} requires a tensor with at least {need} dimension, but got "
                    f"a tensor with {input.ndim} dimensions!")
    if isinstance(ios, numbers.Integral) and not isinstance(ios, bool):
        n = input.shape[d]
        if ios == 0 or n % ios:
            raise _fail(op, f"torch.{op} attempted to split along dimension {d}, but the size "
                        f"of the dimension {n} is not divisible by the split_size {ios}!")
    return tensor_split(input, ios, d)


def hsplit(input, indices_or_sections):
    """Split along dim 1 (dim 0 of a 1-D tensor); sections must divide it."""
    return _split_along("hsplit", input, indices_or_sections, 0 if input.ndim == 1 else 1, 1)


def vsplit(input, indices_or_sections):
    """Split along dim 0 of an at least 2-D tensor; sections must divide it."""
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    """Split along dim 2 of an at least 3-D tensor; sections must divide it."""
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


# ---- at least n-d and stacking ----
def _atleast(op, tensors, fix):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(fix(t) for t in tensors[0])
    if len(tensors) == 1:
        return fix(tensors[0])
    return tuple(fix(t) for t in tensors)


def _view(t, shape):
    return S.view(t, shape) if tuple(t.shape) != tuple(shape) else t


def atleast_1d(*tensors):
    """Each tensor with at least one dimension (a 0-d one becomes shape (1,)); a tuple for
    several."""
    return _atleast("atleast_1d", tensors, lambda t: _view(t, (1,)) if t.ndim == 0 else t)


def _2d(t):
    return _view(t, (1, 1)) if t.ndim == 0 else _view(t, (1,) + tuple(t.shape)) \
        if t.ndim == 1 else t


def _3d(t):
    if t.ndim == 0:
        return _view(t, (1, 1, 1))
    if t.ndim == 1:
        return _view(t, (1, t.shape[0], 1))
    if t.ndim == 2:
        return _view(t, tuple(t.shape) + (1,))
    return t


def atleast_2d(*tensors):
    """Each tensor with at least two dimensions (0-d: (1, 1); 1-D (n,): (1, n))."""
    return _atleast("atleast_2d", tensors, _2d)


def atleast_3d(*tensors):
    """Each tensor with at least three dimensions (1-D (n,): (1, n, 1); 2-D: (m, n, 1))."""
    return _atleast("atleast_3d", tensors, _3d)


def _list(op, tensors):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TracegradTypeError(f"{op}(): argument 'tensors' (position 1) must be tuple of "
                                 f"Tensors, not {type(tensors).__name__}")
    return list(tensors)


def column_stack(tensors):
    """Stack 0-d and 1-D tensors as columns (each (n,) becomes (n, 1)), then `hstack`."""
    ts = [S.reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t
          for t in _list("column_stack", tensors)]
    return S.cat(ts, 1)


def row_stack(tensors):
    """Alias of `vstack`."""
    from .composite_more import vstack
    return vstack(tensors)


def dstack(tensors):
    """Concatenate along dim 2 after `atleast_3d`."""
    return S.cat([_3d(t) for t in _list("dstack", tensors)], 2)


# ---- selection ----
def _index_dtype(op, index, what="index"):
    if index.dtype is not D.int64:
        raise _fail(op, f"{op}(): Expected a long tensor for {what}, but got "
                    f"{D.scalar_type_name(index.dtype)}")


def take(input, index):
    """`input` flattened, read at `index` (any shape; negative counts from the end).

    >>> take(tensor([[1, 2], [3, 4]]), tensor([0, -1]))
    tensor([1, 4])
    """
    _index_dtype("take", index)
    n = input.numel()
    if index.numel():
        lo, hi = int(R.amin(index)), int(R.amax(index))
        for bad in (lo, hi):
            if bad < -n or bad >= n:
                raise _fail("take", f"out of range: tried to access index {bad} on a tensor of "
                            f"{n} elements.", TracegradIndexError)
    return S.reshape(input, (-1,))[index]


def take_along_dim(input, indices, dim=None):
    """`gather` along `dim` with `input` and `indices` broadcast in the other dims; without
    `dim`, `take` of the flattened input."""
    from .gather_scatter import gather
    # PyTorch takes any integer indices without `dim` (flattened), only int64 with it
    if indices.dtype is not D.int64 and (dim is not None or indices.dtype.is_floating_point
                                         or indices.dtype is D.bool_):
        raise _fail("take_along_dim", "torch.take_along_dim(): dtype of indices should be "
                    f"Long but got {D.scalar_type_name(indices.dtype)}")
    indices = indices.long()
    if dim is None:
        return gather(S.reshape(input, (-1,)), 0, S.reshape(indices, (-1,)))
    if input.ndim != indices.ndim:
        raise _fail("take_along_dim", "torch.take_along_dim(): input and indices should have "
                    f"the same number of dimensions, but got {input.ndim} dimensions for input,"
                    f" and {indices.ndim} dimensions for indices")
    d = _wrap_dim(dim, input.ndim, "take_along_dim")
    si, sx = list(input.shape), list(indices.shape)
    si[d] = sx[d] = 1
    b = list(np.broadcast_shapes(tuple(si), tuple(sx)))
    bx, bi = list(b), list(b)
    bx[d], bi[d] = input.shape[d], indices.shape[d]
    return gather(S.expand(input, tuple(bx)), d, S.expand(indices, tuple(bi)))


def unravel_index(indices, shape):
    """The coordinates in a tensor of `shape` of each flat index (a tuple of int64 tensors,
    one per dimension, of indices' shape); indices count modulo the number of elements."""
    if not isinstance(indices, Tensor):
        raise TracegradTypeError("expected 'indices' to be a tensor, but got "
                                 f"{type(indices).__name__}")
    if indices.dtype.is_floating_point or indices.dtype is D.bool_:
        raise TracegradTypeError("expected 'indices' to be integer dtype, but got "
                                 f"{indices.dtype}")
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise TracegradValueError(f"'shape' cannot have negative values, but got {shape}")
    idx = indices.long()
    out = []
    for k in range(len(shape)):
        stride = math.prod(shape[k + 1:])
        out.append(E.remainder(E.floor_divide(idx, stride), shape[k]))
    return tuple(out)


# ---- the out-of-place writes ----
def _scatter_into(op, input, src, view_of):
    out = S.clone(input)
    v = view_of(out)
    if tuple(v.shape) != tuple(src.shape):
        raise _fail(op, f"expected src to have a size equal to the slice of self. src size = "
                    f"{list(src.shape)}, slice size = {list(v.shape)}")
    v.copy_(src)
    return out


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A copy of `input` with `src` written into `input[..., start:end:step, ...]` (at
    `dim`)."""
    d = _wrap_dim(dim, input.ndim, "slice_scatter")
    key = (slice(None),) * d + (slice(start, end, step),)
    return _scatter_into("slice_scatter", input, src, lambda t: t[key])


def select_scatter(input, src, dim, index):
    """A copy of `input` with `src` written into `input.select(dim, index)`."""
    return _scatter_into("select_scatter", input, src, lambda t: S.select(t, dim, index))


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of `input` with `src` written onto `input.diagonal(offset, dim1, dim2)`."""
    from .diagonal_view import diagonal
    return _scatter_into("diagonal_scatter", input, src,
                         lambda t: diagonal(t, offset, dim1, dim2))


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A copy of `input` with `src` written into `input.as_strided(size, stride,
    storage_offset)` (contiguous input; see ops/as_strided.py)."""
    from .as_strided import as_strided
    if not input.is_contiguous():
        input = S.contiguous(input)
    return _scatter_into("as_strided_scatter", input, src,
                         lambda t: as_strided(t, size, stride, storage_offset))


def combinations(input, r=2, with_replacement=False):
    """The length-`r` combinations of a 1-D tensor's elements, as rows (itertools order).

    >>> combinations(tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    if input.ndim != 1:
        raise _fail("combinations", f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise _fail("combinations", f"Expect a non-negative number, but got {r}")
    if r == 0:
        return C.zeros((0,), dtype=input.dtype)
    gen = itertools.combinations_with_replacement if with_replacement \
        else itertools.combinations
    idx = np.array(list(gen(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    from .._tensor import from_array
    return input[from_array(idx)]


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) of all elements or along `dim` (ties share the gradient, as amin/amax)."""
    from .return_types import named
    if input.numel() == 0 and (dim is None or input.shape[_wrap_dim(dim, input.ndim,
                                                                    "aminmax")] == 0):
        raise _fail("aminmax", "aminmax(): cannot compute aminmax over an empty dimension as "
                    "the operation has no identity.")
    if dim is None:
        dims = tuple(range(input.ndim))
    else:
        dims = (_wrap_dim(dim, max(input.ndim, 1), "aminmax"),) if input.ndim else ()
    return named("aminmax", ("min", "max"),
                 (R.amin(input, dims, keepdim), R.amax(input, dims, keepdim)))


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid rule along `dim` (one element fewer than `y` there)."""
    from .scan import cumsum
    if x is not None and dx is not None:
        raise TracegradValueError("cumulative_trapezoid(): cannot pass both x and dx")
    d = _wrap_dim(dim, y.ndim, "cumulative_trapezoid")
    n = y.shape[d]
    if n == 0:
        return y.clone()
    mid = E.add(S.narrow(y, d, 0, n - 1), S.narrow(y, d, 1, n - 1))
    if x is None:
        return cumsum(E.div(E.mul(mid, 1.0 if dx is None else dx), 2.0), d)
    xd = d if x.ndim == y.ndim else x.ndim - 1
    dxs = E.sub(S.narrow(x, xd, 1, n - 1), S.narrow(x, xd, 0, n - 1))
    if x.ndim == 1 and y.ndim > 1:
        dxs = S.reshape(dxs, (n - 1,) + (1,) * (y.ndim - 1 - d))
    return cumsum(E.div(E.mul(dxs, mid), 2.0), d)


def trapz(y, x=None, *, dx=None, dim=-1):
    """Alias of `trapezoid` (PyTorch's older name)."""
    from .composite_math import trapezoid
    return trapezoid(y, x, dx=dx, dim=dim)
