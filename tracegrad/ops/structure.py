"""Structural rearrangements that copy: tril, triu, flip and repeat_interleave.

tril/triu keep the lower/upper triangle of the last two dims (their VJP is the same mask on
the cotangent); flip reverses dims (its own VJP). `repeat_interleave` with an int repeats
each entry in place, written as PyTorch writes it (unsqueeze, expand, copy, flatten: the
result's grad_fn is a ViewBackward0); with a tensor of repeats it is an index_select of the
repeated positions. Those repeat counts decide the result's shape, so they are read as
Python ints: under a tracer that read is a guard, and new counts re-trace.
"""
import numpy as np

from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import TracegradRuntimeError, TracegradTypeError, op_error
from .._tensor import Tensor, _wrap_dim, from_array
from . import shape_rules as SR
from .primitive import Primitive, inplace_of


# ---------------- tril / triu ----------------
def _tril_kernel(x, diagonal):
    return np.tril(x, diagonal)


def _triu_kernel(x, diagonal):
    return np.triu(x, diagonal)


TRIL = Primitive("tril", _tril_kernel, shape_rule=SR.same,
                 vjp=lambda g, i, o, n: (tril(g, n.attrs["diagonal"]),))
TRIU = Primitive("triu", _triu_kernel, shape_rule=SR.same,
                 vjp=lambda g, i, o, n: (triu(g, n.attrs["diagonal"]),))


TRIL_ = inplace_of(TRIL)
TRIU_ = inplace_of(TRIU)


def _triangle(prim, input, diagonal):
    if input.ndim < 2:
        name = prim.name.rstrip("_")
        raise op_error(TracegradRuntimeError, prim.name,
                       f"{name}: input tensor must have at least 2 dimensions")
    return dispatch(prim, (input,), {"diagonal": int(diagonal)})


def tril(input, diagonal=0):
    """The lower triangle of the last two dims (entries with j - i <= diagonal); zeros above."""
    return _triangle(TRIL, input, diagonal)


def triu(input, diagonal=0):
    """The upper triangle of the last two dims (entries with j - i >= diagonal); zeros below."""
    return _triangle(TRIU, input, diagonal)


def tril_(input, diagonal=0):
    return _triangle(TRIL_, input, diagonal)


def triu_(input, diagonal=0):
    return _triangle(TRIU_, input, diagonal)


# ---------------- flip ----------------
def _flip_kernel(x, dims):
    if x.ndim == 0 or not dims:
        return x.copy()
    return np.flip(x, dims).copy()


FLIP = Primitive("flip", _flip_kernel, shape_rule=SR.same,
                 vjp=lambda g, i, o, n: (dispatch(FLIP, (g,), n.attrs),))


def flip(input, dims):
    """A copy with the order of entries reversed along each of `dims`."""
    if isinstance(dims, int):
        raise op_error(TracegradTypeError, "flip", "flip(): argument 'dims' (position 2) must "
                       "be tuple of ints, not int", "Pass a tuple, e.g. `flip(x, (0,))`.")
    wrapped = []
    for d in dims:
        w = _wrap_dim(d, input.ndim, "flip")
        if w in wrapped:
            raise op_error(TracegradRuntimeError, "flip",
                           f"dim {w} appears multiple times in the list of dims")
        wrapped.append(w)
    return dispatch(FLIP, (input,), {"dims": tuple(sorted(wrapped))})


def _flip_method(self, *dims):
    """`x.flip(0, 1)` or `x.flip((0, 1))`."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    return flip(self, dims)


# ---------------- repeat_interleave ----------------
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each entry repeated `repeats` times along `dim` (the flattened input when None);
    `repeat_interleave(counts)` alone gives `arange(len(counts))` repeated by `counts`."""
    if repeats is None:
        counts = input
        if counts.ndim > 1 or counts.dtype not in (D.int64, D.int32):
            raise op_error(TracegradRuntimeError, "repeat_interleave",
                           "repeats has to be a 1D int64/int32 tensor")
        from .creation import arange
        return repeat_interleave(arange(counts.numel()), counts, 0)
    if dim is None:
        from .shape import reshape
        input, dim = reshape(input, (-1,)), 0
    d = _wrap_dim(dim, input.ndim, "repeat_interleave")
    if isinstance(repeats, Tensor) and repeats.ndim == 0:
        repeats = int(repeats.item())
    if isinstance(repeats, Tensor):
        return _by_counts(input, repeats, d)
    if not isinstance(repeats, (int, np.integer)):
        raise op_error(TracegradTypeError, "repeat_interleave", "repeat_interleave(): argument "
                       f"'repeats' must be int or Tensor, not {type(repeats).__name__}")
    if repeats < 0:
        raise op_error(TracegradRuntimeError, "repeat_interleave", "Repeats must be non-negative")
    return _by_int(input, int(repeats), d)


def _by_int(input, repeats, d):
    from .shape import clone, expand, reshape, unsqueeze
    if input.ndim == 0:
        input, d = reshape(input, (1,)), 0
    shape = tuple(input.shape)
    big = expand(unsqueeze(input, d + 1), shape[:d + 1] + (repeats,) + shape[d + 1:])
    return reshape(clone(big), shape[:d] + (shape[d] * repeats,) + shape[d + 1:])


def _by_counts(input, repeats, d):
    from .gather_scatter import index_select
    if repeats.ndim != 1 or repeats.dtype not in (D.int64, D.int32):
        raise op_error(TracegradRuntimeError, "repeat_interleave",
                       "repeats has to be a 1D int64/int32 tensor")
    size = input.shape[d] if input.ndim else 1
    if repeats.shape[0] != size:
        raise op_error(TracegradRuntimeError, "repeat_interleave",
                       "repeats must have the same size as input along dim, but got "
                       f"repeats.size(0) = {repeats.shape[0]} and input.size({d}) = {size}")
    counts = repeats.tolist()               # the result's shape: a guard when tracing
    if any(c < 0 for c in counts):
        raise op_error(TracegradRuntimeError, "repeat_interleave", "repeats can not be negative")
    positions = from_array(np.repeat(np.arange(size, dtype=np.int64), counts))
    if input.ndim == 0:
        from .shape import reshape
        input = reshape(input, (1,))
    return index_select(input, d, positions)
