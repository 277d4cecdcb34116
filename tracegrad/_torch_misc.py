"""Top-level `torch.*` helpers PyTorch scripts call that are neither ops nor modules:
`detach`, `fill`, `is_inference`, `unflatten`, `scalar_tensor`, `asarray`, `range` (the
deprecated, end-inclusive one), `broadcast_shapes`, `is_warn_always_enabled` /
`set_warn_always`.

Each is written with existing ops and creation functions, with PyTorch's signature,
defaults, dtypes, warnings and error types.
"""
import math
import warnings

import numpy as np

from . import _dtype as D
from ._errors import TracegradRuntimeError, TracegradValueError, op_error
from ._tensor import Size, Tensor, from_array

__all__ = ["detach", "fill", "is_inference", "unflatten", "scalar_tensor", "asarray",
           "broadcast_shapes", "is_warn_always_enabled", "set_warn_always", "range"]

_WARN_ALWAYS = [False]


def detach(input):
    """`input.detach()`."""
    return input.detach()


def fill(input, value):
    """A new tensor of `input`'s shape and dtype filled with `value` (a number or a 0-dim
    tensor, whose gradient is the sum of the output's).

    >>> fill(zeros(2), 3.0)
    tensor([3., 3.])
    """
    return input.clone().fill_(value)


def is_inference(input):
    """`input.is_inference()`."""
    return input.is_inference()


def unflatten(input, dim, sizes):
    """`input.unflatten(dim, sizes)`: dimension `dim` split into `sizes`."""
    return input.unflatten(dim, sizes)


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None,
                  requires_grad=False):
    """A 0-dim tensor holding `s`, of the default (floating) dtype unless `dtype` is given.

    >>> scalar_tensor(3)
    tensor(3.)
    """
    from .ops.creation import tensor
    if isinstance(s, Tensor):
        s = s.item()
    return tensor(s, dtype=dtype or D.get_default_dtype(), requires_grad=requires_grad)


_ASARRAY_WARNING = ("torch.asarray: unspecified requires_grad now defaults to obj.requires_grad "
                    "instead of False. Pass requires_grad=False explicitly to get the old "
                    "behavior and silence this warning.")


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=None):
    """`obj` as a tensor, sharing memory with a tensor or numpy array where `dtype` and
    `copy` allow (`copy=True` always copies; `copy=False` refuses to); lists and numbers are
    copied, as `tensor` does. A tensor `obj` is returned itself when nothing changes.

    >>> a = np.zeros(2); t = asarray(a); a[0] = 5.0; t
    tensor([5., 0.], dtype=torch.float64)
    """
    from .ops.creation import tensor
    if dtype is not None:
        dtype = D.as_dtype(dtype)
    if isinstance(obj, Tensor):
        return _asarray_tensor(obj, dtype, copy, requires_grad)
    if isinstance(obj, np.ndarray):
        want = dtype or D._FROM_NP.get(obj.dtype)
        if want is not None and (copy is not True) and want.np == obj.dtype:
            t = from_array(obj)
        elif copy is False:
            raise op_error(TracegradValueError, "asarray",
                           f"can't alias NumPy array with dtype '{obj.dtype}' into dtype "
                           f"'{D.scalar_type_name(dtype)}'.")
        else:
            t = tensor(obj.copy(), dtype=dtype)
        return t.requires_grad_(True) if requires_grad else t
    if copy is False:
        raise op_error(TracegradValueError, "asarray",
                       f"can't alias a {type(obj).__name__} into a tensor without copying.",
                       "Pass copy=None or copy=True.")
    return tensor(obj, dtype=dtype, requires_grad=bool(requires_grad))


def _asarray_tensor(obj, dtype, copy, requires_grad):
    convert = dtype is not None and dtype is not obj.dtype
    if convert and copy is False:
        raise op_error(TracegradValueError, "asarray",
                       f"can't alias tensor with dtype '{D.scalar_type_name(obj.dtype)}' into "
                       f"dtype '{D.scalar_type_name(dtype)}'.")
    if not convert and not copy and requires_grad is False and obj.requires_grad \
            and obj.is_leaf:                 # PyTorch clears the flag on obj itself
        return obj.requires_grad_(False)
    base = obj.detach() if requires_grad is False and obj.requires_grad else obj
    out = base.to(dtype) if convert else base.clone() if copy else base
    if requires_grad and out.is_leaf:
        out.requires_grad_(True)
    elif requires_grad is None and out is obj and obj.requires_grad:
        warnings.warn(_ASARRAY_WARNING, UserWarning, stacklevel=3)
    return out


def broadcast_shapes(*shapes):
    """The shape tensors of `shapes` broadcast to (each an int or a sequence of ints).

    >>> broadcast_shapes((2, 1), (3,))
    tracegrad.Size([2, 3])
    """
    shapes = [(s,) if isinstance(s, (int, np.integer)) else tuple(s) for s in shapes]
    out = [1] * max((len(s) for s in shapes), default=0)
    for k, s in enumerate(shapes):
        for i, n in enumerate(s):
            if n < 0:
                raise op_error(TracegradValueError, "broadcast_shapes",
                               "Attempting to broadcast a dimension with negative length!")
            j = len(out) - len(s) + i
            if n != 1 and out[j] not in (1, n):
                raise op_error(TracegradRuntimeError, "broadcast_shapes",
                               f"Attempting to broadcast a dimension of length {n} at "
                               f"{i - len(s)}! Mismatching argument at index {k} had {s}; "
                               f"but expected shape should be broadcastable to {out}")
            if n != 1:
                out[j] = n
            elif out[j] == 1:
                out[j] = n
    return Size(out)


def is_warn_always_enabled():
    """Whether `set_warn_always(True)` is in effect."""
    return _WARN_ALWAYS[0]


def set_warn_always(b):
    """Record the warn-always flag (tracegrad's warnings follow Python's filters either
    way); `is_warn_always_enabled()` reads it back."""
    _WARN_ALWAYS[0] = bool(b)


_RANGE_WARNING = ("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).")


def range(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None,
          requires_grad=False):
    """Deprecated (warns as PyTorch does): `start, start + step, ...` up to and including
    `end`, of the default dtype unless `dtype` is given.

    >>> range(1, 4)
    tensor([1., 2., 3., 4.])
    """
    from .ops.creation import tensor
    warnings.warn(_RANGE_WARNING, UserWarning, stacklevel=2)
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if step == 0:
        raise op_error(TracegradRuntimeError, "range", "step must be nonzero")
    if (end - start) * step < 0:
        raise op_error(TracegradRuntimeError, "range",
                       "upper bound and lower bound inconsistent with step sign")
    n = int(math.floor((end - start) / step)) + 1
    dtype = D.as_dtype(dtype) if dtype is not None else D.get_default_dtype()
    values = start + np.arange(n, dtype=np.float64) * step
    return tensor(values.astype(dtype.np), dtype=dtype, requires_grad=requires_grad)
