"""Device-related Tensor methods: the `device` attribute, `to(...)`, `cpu()`, `cuda()`, and
the `new_*` constructors (which take `device=` like the creation functions).

Every tensor lives on `device('cpu')`. `to` accepts PyTorch's three call forms
(`to(device=None, dtype=None, non_blocking=False, copy=False)`, `to(dtype, ...)`,
`to(other_tensor, ...)`); a non-CPU device raises `DeviceUnavailableError`.
"""
from . import _dtype as D
from ._device import _CPU, DeviceUnavailableError, _unavailable, check_device, is_device_like
from ._errors import TracegradTypeError
from ._tensor import Tensor
from . import ops as O
from .ops import shape as S


def _parse_to(args, kwargs):
    """(device, dtype, non_blocking, copy) from `to`'s positional and keyword arguments."""
    bad = set(kwargs) - {"device", "dtype", "non_blocking", "copy", "memory_format"}
    if bad:
        raise TracegradTypeError(f"to() got an unexpected keyword argument '{bad.pop()}'")
    dev, dtype = kwargs.get("device"), kwargs.get("dtype")
    flags = []
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        dtype, dev = rest.pop(0).dtype, _CPU
    elif rest and (rest[0] is None or is_device_like(rest[0]) or isinstance(rest[0], int)
                   and not isinstance(rest[0], bool)):
        dev = rest.pop(0)
        if rest and _is_dtype(rest[0]):
            dtype = rest.pop(0)
    elif rest and _is_dtype(rest[0]):
        dtype = rest.pop(0)
    for a in rest:
        if not isinstance(a, bool):
            raise TracegradTypeError(
                f"to() received an invalid combination of arguments - got "
                f"{tuple(type(x).__name__ for x in args)}; expected (device=None, dtype=None, "
                f"non_blocking=False, copy=False), (dtype, ...) or (Tensor, ...)")
        flags.append(a)
    non_blocking = flags[0] if flags else kwargs.get("non_blocking", False)
    copy = flags[1] if len(flags) > 1 else kwargs.get("copy", False)
    return dev, dtype, non_blocking, copy


def _is_dtype(a):
    return isinstance(a, D.dtype) or a in (float, int, bool)


def to(self, *args, **kwargs):
    """Convert dtype and/or device: `to(torch.float64)`, `to("cpu")`, `to(other)`,
    `to(device=None, dtype=None, non_blocking=False, copy=False)`. Returns `self` when
    nothing changes and `copy` is False."""
    dev, dtype, _, copy = _parse_to(args, kwargs)
    if dev is not None:
        check_device(dev)
    if dtype is None:
        return self.clone() if copy else self
    return S.to_dtype(self, dtype, copy)


def cuda(self, device=None, non_blocking=False, memory_format=None):
    raise DeviceUnavailableError(_unavailable("cuda"))


def mps(self, memory_format=None):
    raise DeviceUnavailableError(_unavailable("mps"))


def cpu(self, memory_format=None):
    return self


def _new(fill):
    def new(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
            pin_memory=False):
        check_device(device)
        return fill(*size, dtype=dtype or self.dtype, requires_grad=requires_grad)
    return new


def new_tensor(self, data, dtype=None, device=None, requires_grad=False, layout=None,
               pin_memory=False):
    check_device(device)
    return O.tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
             layout=None, pin_memory=False):
    check_device(device)
    return O.full(size, fill_value, dtype=dtype or self.dtype, requires_grad=requires_grad)


Tensor.new_zeros = _new(O.zeros)
Tensor.new_ones = _new(O.ones)
Tensor.new_empty = _new(O.empty)
Tensor.new_tensor = new_tensor
Tensor.new_full = new_full
Tensor.device = property(lambda self: _CPU)
Tensor.is_cuda = property(lambda self: False)
Tensor.is_cpu = property(lambda self: True)
Tensor.get_device = lambda self: -1
Tensor.to = to
Tensor.cuda = cuda
Tensor.mps = mps
Tensor.cpu = cpu
