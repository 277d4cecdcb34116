"""Legacy tensor constructors: `Tensor(data)`, `Tensor(2, 3)`, `FloatTensor`, `LongTensor`, ...

`tracegrad.Tensor(...)` called as a function behaves like PyTorch's `torch.Tensor(...)`:
a tensor of the default floating dtype, from a sequence or numpy array (copied), of a
given size (uninitialised in PyTorch, zero-filled here), empty for no argument, or an
alias of an existing tensor. The typed names (`FloatTensor`, `LongTensor`, ...) build
tensors of their dtype and answer `isinstance` by dtype, as PyTorch's do.
"""
import numbers

import numpy as np

from . import _dtype as D
from ._device import check_device
from ._errors import TracegradTypeError, TracegradValueError
from ._tensor import Tensor


def _is_size(args):
    return all(isinstance(a, numbers.Integral) and not isinstance(a, (bool, np.bool_))
               for a in args)


def legacy_new(dtype, args, kwargs):
    """The tensor `torch.<Type>Tensor(*args, device=None)` makes (`dtype` None: default)."""
    from .ops.creation import tensor, zeros
    unknown = set(kwargs) - {"device"}
    if unknown:
        raise TracegradTypeError(f"new() received an invalid combination of arguments: "
                                 f"unexpected keyword(s) {sorted(unknown)}; only 'device' "
                                 f"is accepted (use tracegrad.tensor(data, dtype=...))")
    check_device(kwargs.get("device"))
    want = dtype or D.get_default_dtype()
    if not args:
        return zeros(0, dtype=want)
    if _is_size(args):
        return zeros(*args, dtype=want)
    if len(args) == 1:
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not want:
                raise TracegradTypeError(f"expected a tensor of dtype {want}, but got one of "
                                         f"dtype {data.dtype}")
            return data.detach()
        if isinstance(data, (list, tuple, np.ndarray)):
            return tensor(data, dtype=want)
        kind = type(data).__name__
        raise TracegradTypeError(f"new(): data must be a sequence (got {kind})")
    raise TracegradTypeError(f"new(): arguments must be a size (ints) or one sequence, got "
                             f"{tuple(type(a).__name__ for a in args)}")


def _tensor_new(cls, *args, **kwargs):
    if cls is not Tensor:                     # a subclass with no __new__ of its own
        return object.__new__(cls)
    return legacy_new(None, args, kwargs)


def _tensor_init(self, *args, **kwargs):
    """All work happens in `__new__` (tensors are built by `Tensor._wrap` internally)."""


Tensor.__new__ = staticmethod(_tensor_new)
Tensor.__init__ = _tensor_init


class _LegacyType(type):
    """Metaclass of `FloatTensor` & co: calling builds a tensor of the class's dtype;
    `isinstance(t, FloatTensor)` holds for float32 tensors."""

    def __call__(cls, *args, **kwargs):
        return legacy_new(cls.dtype, args, kwargs)

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __repr__(cls):
        return f"<class 'tracegrad.{cls.__name__}'>"


def _legacy(name, dtype):
    return _LegacyType(name, (), {"dtype": dtype, "__doc__": f"Legacy constructor of "
                                  f"{dtype} tensors: `{name}(data)` or `{name}(*size)`."})


FloatTensor = _legacy("FloatTensor", D.float32)
DoubleTensor = _legacy("DoubleTensor", D.float64)
HalfTensor = _legacy("HalfTensor", D.float16)
LongTensor = _legacy("LongTensor", D.int64)
IntTensor = _legacy("IntTensor", D.int32)
ShortTensor = _legacy("ShortTensor", D.int16)
CharTensor = _legacy("CharTensor", D.int8)
ByteTensor = _legacy("ByteTensor", D.uint8)
BoolTensor = _legacy("BoolTensor", D.bool_)

_BY_NAME = {f"torch.{c.__name__}": c for c in (FloatTensor, DoubleTensor, HalfTensor,
                                              LongTensor, IntTensor, ShortTensor, CharTensor,
                                              ByteTensor, BoolTensor)}
_tensor_type = Tensor.type


def _type(self, dtype=None, non_blocking=False, **kwargs):
    """`t.type()` names the legacy type (`'torch.FloatTensor'`); `t.type(tg.LongTensor)`,
    `t.type('torch.LongTensor')` or `t.type(tg.int64)` converts."""
    if isinstance(dtype, str):
        if dtype not in _BY_NAME:
            raise TracegradValueError(f"invalid type: '{dtype}'")
        dtype = _BY_NAME[dtype]
    if isinstance(dtype, _LegacyType):
        dtype = dtype.dtype
    return _tensor_type(self, dtype)


Tensor.type = _type
