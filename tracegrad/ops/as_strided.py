"""`as_strided` / `Tensor.as_strided_` (a view with explicit sizes, strides and storage
offset) and `Tensor.resize_`.

Note [as_strided relative to the input]
PyTorch counts `stride` and `storage_offset` in the input's storage. Here the primitive's
attributes count them in the input's own elements, in row-major order (`offset` is the
storage offset less the input's), which is the same thing for a contiguous input whose
elements the view stays within. That keeps the primitive meaningful wherever the IR puts
the input (a compiled program's buffer, a jax array): its kernel is a strided view of the
contiguous input (memory shared, as in PyTorch), of a contiguous copy otherwise. A
non-contiguous input, or a view reaching storage outside the input's elements, raises
NotImplementedError (loudly, where PyTorch would compute); sizes and strides PyTorch
refuses raise its RuntimeError. The gradient adds each output element's gradient into the
input element it reads (overlaps accumulate), written with index_add so it differentiates
again.

`resize_` keeps the first elements (row-major) and shares memory when shrinking; growing
copies into new memory (zeros past the old elements, where PyTorch leaves them
uninitialized). Like the in-place shape ops (Note [Shape changed in place] in
inplace_shape.py), `as_strided_` and `resize_` make a compiled call run eagerly, loudly.
"""
import math

import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradNotImplementedError, TracegradRuntimeError, op_error
from . import shape as S
from .primitive import Primitive

__all__ = ["as_strided"]


def _positions(size, stride, offset):
    """The input element (row-major) each output element reads, as an int64 array."""
    pos = np.full(tuple(size), offset, dtype=np.int64)
    for d, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        pos = pos + (np.arange(n, dtype=np.int64) * st).reshape(shape)
    return pos


def _kernel(x, size, stride, offset):
    xc = x if x.flags.c_contiguous else np.ascontiguousarray(x)
    flat = xc.reshape(-1)
    start = flat[offset:] if offset < flat.size else flat[flat.size:]
    return np.lib.stride_tricks.as_strided(start, shape=size,
                                           strides=tuple(s * x.itemsize for s in stride))


def _vjp(g, ins, out, n):
    from .creation import zeros
    from .index_add import index_add
    from .._tensor import from_array
    shape = n.shapes[0]
    a = n.attrs
    idx = from_array(_positions(a["size"], a["stride"], a["offset"]).reshape(-1))
    numel = math.prod(shape)
    gx = index_add(zeros(numel, dtype=g.dtype), 0, idx, S.reshape(g, (-1,)))
    return (S.reshape(gx, tuple(shape)),)


def _shape_rule(shapes, attrs):
    return tuple(attrs["size"])


AS_STRIDED = Primitive("as_strided", _kernel, vjp=_vjp, aliases=0, shape_rule=_shape_rule,
                       layout="reorders")


def _ints(v, what):
    if isinstance(v, int):
        return (v,)
    return tuple(int(i) for i in v)


def _check(op, input, size, stride, storage_offset):
    from .. import _tensor_storage as TS
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if len(size) != len(stride):
        raise op_error(TracegradRuntimeError, op, "mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise op_error(TracegradRuntimeError, op, "as_strided: Negative strides are not "
                       f"supported at the moment, got strides: {list(stride)}")
    if any(n < 0 for n in size):
        raise op_error(TracegradRuntimeError, op, f"Trying to create tensor with negative "
                       f"dimension {min(size)}: {list(size)}")
    own = TS.storage_offset(input)
    start = own if storage_offset is None else int(storage_offset)
    if start < 0:
        raise op_error(TracegradRuntimeError, op, f"Tensor: invalid storage offset {start}")
    last = start + sum((n - 1) * st for n, st in zip(size, stride)) if all(size) else start - 1
    root = TS._root(input._data).size
    if last >= root:
        item = input._data.itemsize
        raise op_error(TracegradRuntimeError, op,
                       f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                       f"offset {start}, and itemsize {item} requiring a storage size of "
                       f"{(last + 1) * item} are out of bounds for storage of size "
                       f"{root * item}")
    if not input.is_contiguous() or start < own or last >= own + input.numel():
        raise op_error(TracegradNotImplementedError, op,
                       f"{op} of a non-contiguous tensor, or reaching storage outside the "
                       "tensor's own elements, is not supported (Note [as_strided relative "
                       "to the input])", "Call it on a contiguous tensor (e.g. the base "
                       "tensor, or `x.contiguous()`) within its elements.")
    return {"size": size, "stride": stride, "offset": start - own}


def as_strided(input, size, stride, storage_offset=None):
    """A view of `input` with the given sizes and strides (in elements), starting at
    `storage_offset` (default: the input's own); see the module note for what is supported.

    >>> as_strided(arange(6.0), (2, 2), (1, 2))
    tensor([[0., 2.],
            [1., 3.]])
    """
    return dispatch(AS_STRIDED, (input,), _check("as_strided", input, size, stride,
                                                  storage_offset))


def as_strided_(input, size, stride, storage_offset=None):
    """`as_strided` in place: the tensor becomes that view of its memory."""
    from .inplace_shape import _apply
    attrs = _check("as_strided_", input, size, stride, storage_offset)
    return _apply("as_strided_", input, lambda t: dispatch(AS_STRIDED, (t,), attrs))


def resize_(input, *size, memory_format=None):
    """Give the tensor shape `size` in place, keeping its first elements (row-major);
    refused for a tensor that requires grad, as PyTorch refuses it."""
    from .inplace_shape import _become
    if len(size) == 1 and not isinstance(size[0], int):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    if input.requires_grad:
        raise op_error(TracegradRuntimeError, "resize_", "cannot resize variables that "
                       "require grad", "Resize a detached tensor, or create a new one.")
    if any(s < 0 for s in size):
        raise op_error(TracegradRuntimeError, "resize_", "Trying to create tensor with "
                       f"negative dimension {min(size)}: {list(size)}")
    n = math.prod(size)
    if n <= input.numel() and input.is_contiguous():
        new = S.reshape(S.reshape(input, (-1,))[:n], size)
    elif input._base is None:
        from .creation import zeros
        flat = S.reshape(input.contiguous() if not input.is_contiguous() else input, (-1,))
        if n > input.numel():
            flat = S.cat([flat, zeros(n - input.numel(), dtype=input.dtype)])
        new = S.reshape(flat[:n], size)
    else:
        raise op_error(TracegradNotImplementedError, "resize_", "resize_ of a view that is "
                       "not contiguous or grows is not supported", "Resize the base tensor, "
                       "or a clone.")
    return _become("resize_", input, new)
