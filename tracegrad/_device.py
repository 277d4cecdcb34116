"""Devices: `tracegrad.device`, the default device, and the one check every `device=` goes
through.

tracegrad runs on the CPU only (numpy). `device("cuda")`, `device("mps")` and friends are
valid *names*, as in PyTorch, but any attempt to put a tensor there raises
`DeviceUnavailableError` (a RuntimeError, and an AssertionError like PyTorch's
"Torch not compiled with CUDA enabled"), so a program written for a GPU fails loudly at
the first placement instead of silently running somewhere else.
"""
from ._errors import TracegradRuntimeError, TracegradTypeError

_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
          "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
          "privateuseone")


_builtin_type = type


class DeviceUnavailableError(TracegradRuntimeError, AssertionError):
    """A tensor or module was asked to live on a device tracegrad has no kernels for."""


class device:
    """`device(type, index=None)` or `device("cpu:0")`: where a tensor lives.

    Equality and hashing follow PyTorch: two devices are equal when type and index are;
    a device never equals a string (compare `str(d)` or `d.type` instead).

    >>> device("cpu")
    device(type='cpu')
    """

    __slots__ = ("_type", "_index")

    def __init__(self, type, index=None):   # noqa: A002 (PyTorch's argument name)
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, int) and not isinstance(type, bool):
            raise DeviceUnavailableError(
                "Cannot access accelerator device when none is available. "
                "tracegrad runs on the CPU only; use device('cpu').")
        elif not isinstance(type, str):
            raise TracegradTypeError(f"device() received an invalid argument: expected str, "
                                     f"device or int, got {_builtin_type(type).__name__}")
        else:
            type, index = _parse(type, index)
        object.__setattr__(self, "_type", type)
        object.__setattr__(self, "_index", index)

    type = property(lambda self: self._type)
    index = property(lambda self: self._index)

    def __setattr__(self, name, value):
        raise AttributeError(f"attribute '{name}' of 'torch.device' objects is not writable")

    def __eq__(self, other):
        if not isinstance(other, device):
            return NotImplemented
        return (self._type, self._index) == (other._type, other._index)

    def __hash__(self):
        return hash((self._type, self._index))

    def __repr__(self):
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __str__(self):
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __reduce__(self):
        return (device, (self._type, self._index))

    def __enter__(self):
        global _default_stack
        _default_stack = _default_stack + (get_default_device(),)
        set_default_device(self)
        return self

    def __exit__(self, *exc):
        global _default_stack
        prev, _default_stack = _default_stack[-1], _default_stack[:-1]
        set_default_device(prev)
        return False


def _parse(text, index):
    name, sep, idx = text.partition(":")
    if name not in _TYPES:
        raise TracegradRuntimeError(
            f"Expected one of {', '.join(_TYPES)} device type at start of device string: "
            f"{text}")
    if sep:
        if index is not None or not idx.isdigit() or (len(idx) > 1 and idx[0] == "0"):
            raise TracegradRuntimeError(f"Invalid device string: '{text}'")
        index = int(idx)
    if index is not None and (not isinstance(index, int) or index < 0):
        raise TracegradRuntimeError(f"Device index must not be negative, got {index}")
    return name, index


_CPU = device("cpu")
_default = _CPU
_default_stack = ()


def check_device(dev):
    """The `device` argument of an op, checked: None or anything naming the CPU passes
    (returning `device('cpu')`); any other device raises `DeviceUnavailableError`."""
    if dev is None:
        return _default
    d = dev if isinstance(dev, device) else device(dev)
    if d.type == "cpu":
        return _CPU
    raise DeviceUnavailableError(_unavailable(d.type))


def _unavailable(kind):
    if kind == "cuda":
        return ("Torch not compiled with CUDA enabled: tracegrad runs on the CPU only "
                "(numpy). Use device='cpu' or drop the .cuda()/.to('cuda') call.")
    return (f"tracegrad is not linked with support for {kind} devices: it runs on the CPU "
            f"only (numpy). Use device='cpu'.")


def set_default_device(dev):
    """Set the device new tensors are created on; only the CPU (or None) is accepted."""
    global _default
    _default = _CPU if dev is None else check_device(dev)


def get_default_device():
    return _default


def is_device_like(obj):
    """True for a `device` or a string naming a device type (`"cpu"`, `"cuda:0"`)."""
    if isinstance(obj, device):
        return True
    return isinstance(obj, str) and obj.partition(":")[0] in _TYPES
