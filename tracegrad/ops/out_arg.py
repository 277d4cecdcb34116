"""The `out=` argument of PyTorch functions (`torch.add(a, b, out=a[1:])`): the result is
written into the given tensor, which is returned.

PyTorch's rules, in its order: no autograd through `out=` (any argument requiring grad, with
grad mode on, raises); the result's dtype must cast to `out`'s; `out` must not partly overlap
an input (Note [Overlapping in-place operands] in _overlap.py); an `out` of another shape is
resized, with a warning unless it was empty. The write is an ordinary in-place `copy_`
(one version bump, traced and functionalized like any other write). tracegrad resizes only
a tensor that is not a view and not inside a compiled trace; other shape mismatches raise.

>>> a = tg.zeros(2, 3); tg.add(a[0], 1.0, out=a[1]); a.tolist()[1]
[1.0, 1.0, 1.0]
"""
import functools
import warnings

import numpy as np

from .. import _dtype as D
from .. import _effects, _mode
from .._errors import TracegradRuntimeError, TracegradTypeError, op_error
from .._overlap import PARTIAL, overlap
from .._tensor import Tensor


def write_out(op, out, res, inputs):
    """Write result `res` of function `op` on `inputs` into `out` (see the module doc)."""
    tensors = _check_grad(op, out, inputs)
    if not D.can_cast(res.dtype, out.dtype):
        raise op_error(TracegradRuntimeError, op, f"result type "
                       f"{D.scalar_type_name(res.dtype)} can't be cast to the desired output "
                       f"type {D.scalar_type_name(out.dtype)}")
    root = _root(out._data)
    for t in tensors:
        if _root(t._data) is not root:
            continue
        _effects.layout_read(root)           # a guard inside a trace
        if overlap(out._data, t._data) == PARTIAL:
            raise op_error(TracegradRuntimeError, op, "unsupported operation: some elements "
                           "of the input tensor and the written-to tensor refer to a single "
                           "memory location.", "Please clone() the tensor before performing "
                           "the operation.")
    if tuple(out.shape) != tuple(res.shape):
        _resize(op, out, tuple(res.shape))
    out.copy_(res)
    return out


def _check_grad(op, out, inputs):
    """The tensors among `inputs`, after PyTorch's refusal of autograd through `out=`."""
    if not isinstance(out, Tensor):
        raise op_error(TracegradTypeError, op, f"{op}(): argument 'out' must be Tensor, not "
                       f"{type(out).__name__}")
    tensors = [t for t in _flat(inputs) if isinstance(t, Tensor)]
    if _mode.is_grad_enabled() and (out.requires_grad or any(t.requires_grad for t in tensors)):
        raise op_error(TracegradRuntimeError, op, f"{op}(): functions with out=... arguments "
                       "don't support automatic differentiation, but one of the arguments "
                       "requires grad.")
    return tensors


def _resize(op, out, shape):
    if out._base is not None or _effects.active() is not None or out.requires_grad:
        raise op_error(TracegradRuntimeError, op, f"{op}(): out= has shape "
                       f"{list(out.shape)} but the result has shape {list(shape)}; tracegrad "
                       "resizes only a tensor that is not a view, outside compiled code.",
                       "Pass an `out` of the result's shape.")
    if out.numel():
        warnings.warn(f"An output with one or more elements was resized since it had shape "
                      f"{list(out.shape)}, which does not match the required output shape "
                      f"{list(shape)}. This behavior is deprecated, and in a future PyTorch "
                      "release outputs will not be resized unless they have zero elements.",
                      UserWarning, stacklevel=4)
    out._data = np.zeros(shape, dtype=out._data.dtype)


def _root(a):
    from .._tensor_storage import _root as root
    return root(a)


def _flat(xs):
    for x in xs:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def with_out(fn, name=None):
    """`fn` taking an `out=` keyword as PyTorch's function of that name does."""
    op = name or fn.__name__

    @functools.wraps(fn)
    def f(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        inputs = list(args) + list(kwargs.values())
        _check_grad(op, out, inputs)          # before anything is computed
        return write_out(op, out, fn(*args, **kwargs), inputs)
    return f


WITH_OUT = ("add sub mul div true_divide pow matmul mm bmm exp log sqrt sin cos tanh sigmoid "
            "abs neg clamp maximum minimum sum mean prod cat stack").split()
