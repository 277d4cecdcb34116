"""The diagonal view: `diagonal(input, offset, dim1, dim2)` and `fill_diagonal_`.

`diagonal` is a view, as in PyTorch: the result shares the input's memory and version
counter, so `x.diagonal().copy_(v)` or `.zero_()` writes into `x` (through the ordinary
view machinery: CopySlices eagerly, `view_scatter` in compiled code). numpy's `diagonal`
returns a read-only view; the kernel makes it writable when the input is. Its VJP places the
cotangent on the diagonal of zeros (`diagonal_backward`), whose own VJP takes the diagonal
again, so gradients of any order flow. `fill_diagonal_` writes through such views.

>>> x = tg.zeros(3, 3); x.diagonal().fill_(1.0); x.tolist()[1]
[0.0, 1.0, 0.0]
"""
import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradRuntimeError, op_error
from .._tensor import _wrap_dim
from .primitive import Primitive


def _view(x, offset, dim1, dim2):
    d = np.diagonal(x, offset, dim1, dim2)
    if x.flags.writeable:
        d.setflags(write=True)
    return d


def _backward_kernel(g, shape, offset, dim1, dim2):
    z = np.zeros(shape, dtype=g.dtype)
    _view(z, offset, dim1, dim2)[...] = g
    return z


def _shape(shapes, attrs):
    shape, off = shapes[0], attrs["offset"]
    d1, d2 = attrs["dim1"], attrs["dim2"]
    n1, n2 = shape[d1], shape[d2]
    n = max(0, min(n1, n2 - off) if off >= 0 else min(n1 + off, n2))
    return tuple(s for k, s in enumerate(shape) if k not in (d1, d2)) + (n,)


def _backward_shape(shapes, attrs):
    return tuple(attrs["shape"])


def _vjp(g, ins, o, n):
    attrs = dict(n.attrs, shape=n.shapes[0])
    return (dispatch(DIAGONAL_BACKWARD, (g,), attrs),)


def _backward_vjp(g, ins, o, n):
    a = n.attrs
    return (dispatch(DIAGONAL, (g,), {"offset": a["offset"], "dim1": a["dim1"],
                                      "dim2": a["dim2"]}),)


DIAGONAL = Primitive("diagonal", _view, aliases=0, vjp=_vjp, shape_rule=_shape,
                     grad_fn_name="DiagonalBackward0")
DIAGONAL_BACKWARD = Primitive("diagonal_backward", _backward_kernel, vjp=_backward_vjp,
                              shape_rule=_backward_shape,
                              grad_fn_name="DiagonalBackwardBackward0")


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The elements `input[..., i, i + offset]` over dims `dim1` and `dim2`, as a view whose
    last dim runs along the diagonal (PyTorch's `torch.diagonal`)."""
    n = input.ndim
    d1, d2 = _wrap_dim(dim1, n, "diagonal"), _wrap_dim(dim2, n, "diagonal")
    if d1 == d2:
        raise op_error(TracegradRuntimeError, "diagonal",
                       f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return dispatch(DIAGONAL, (input,), {"offset": int(offset), "dim1": d1, "dim2": d2})


def fill_diagonal_(input, fill_value, wrap=False):
    """Fill the main diagonal (all indices equal) in place; with `wrap`, a tall matrix's
    diagonal starts again every `columns + 1` rows, as in PyTorch."""
    shape = input.shape
    if len(shape) < 2:
        raise op_error(TracegradRuntimeError, "fill_diagonal_", "dimensions must larger than 1")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise op_error(TracegradRuntimeError, "fill_diagonal_",
                       "all dimensions of input must be of equal length")
    rows, cols = shape[0], shape[1]
    if len(shape) == 2 and wrap and rows > cols + 1:
        # the rows below the first square: blocks of `cols + 1` rows, each a diagonal
        for start in range(0, rows, cols + 1):
            diagonal(input[start:start + cols]).fill_(fill_value)
        return input
    d = input
    for _ in range(len(shape) - 2):     # all dims equal: the diagonal of the diagonal ...
        d = diagonal(d, 0, 0, 1).movedim(-1, 0)
    diagonal(d).fill_(fill_value)
    return input
