"""`autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`: a context manager
and decorator. For 'cuda' (no GPU here) it disables itself with PyTorch's warning, as
CPU-only PyTorch does, and the region runs in full precision. Enabled CPU autocast would
change result dtypes (bfloat16/float16 matmuls) that tracegrad cannot compute: it raises
NotImplementedError rather than silently computing something else.

Also PyTorch's queries of the autocast state: `is_autocast_enabled(device_type)` (never,
here) and `get_autocast_dtype(device_type)`, the dtype the innermost region of that device
named (disabled ones too, as PyTorch's `__enter__` sets it) or the device's default.
Note [Autocast dtype read in a compiled function]
The dtype is process-wide state set by `__enter__` and put back by `__exit__`: read inside
a trace outside any region the trace entered, it is a setting read (Note [Settings read and
set] in _effects.py), guarded at the call's value, so a region entered around a compiled
call with another dtype re-traces; read inside a region the trace entered, it is the
trace's own value, the same on every call. A custom Function's forward is run again by
each compiled call, outside those regions: one that asks runs eagerly, with a warning;
`custom_fwd`'s record of the dtype on `ctx` is compared per call like any ctx attribute
(Note [Per-call ctx attributes]). (PyTorch keeps the dtype per thread; here it is one
value per device for the process, which only `get_autocast_dtype` can observe.)
"""
import functools
import warnings

from .. import _effects
from .._dtype import bfloat16, float16
from .._errors import TracegradRuntimeError

_DEVICES = ("cpu", "cuda", "mps", "xpu", "xla", "hpu", "mtia", "meta")
# PyTorch's device strings (its message lists them)
_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip",
                 "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                 "privateuseone")
_BF16_DEFAULT = ("cpu", "xla", "hpu")


def _device(device_type):
    """The device type of a device string ('cuda:0' -> 'cuda'), checked as PyTorch does."""
    if device_type == "":
        raise TracegradRuntimeError("Device string must not be empty")
    base, _, index = device_type.partition(":")
    if base not in _DEVICE_TYPES:
        raise TracegradRuntimeError(
            f"Expected one of {', '.join(_DEVICE_TYPES)} device type at start of device "
            f"string: {device_type}")
    if ":" in device_type and not index.isdigit():
        raise TracegradRuntimeError(f"Invalid device string: '{device_type}'")
    return base


def _default_dtype(device_type):
    return bfloat16 if device_type in _BF16_DEFAULT else float16


# device -> the dtype of the innermost region entered, else the device's default
_dtypes = {d: _default_dtype(d) for d in _DEVICE_TYPES}
# how many times user code asked get_autocast_dtype: a custom Function's forward that
# asks runs eagerly in a compiled function (tracing/custom_function.py), as compiled calls
# run that forward again outside the regions the trace entered
READS = [0]


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for `device_type` ('cuda' when not given): never here (CUDA
    autocast disables itself without a GPU; CPU autocast raises when enabled)."""
    if device_type is not None:
        _device(device_type)
    return False


def get_autocast_dtype(device_type):
    """The dtype autocast regions of `device_type` compute in: the innermost region's
    `dtype` (PyTorch sets it even for a disabled region), else the device's default
    (bfloat16 on 'cpu', float16 on 'cuda'). (Note [Autocast dtype read in a compiled
    function])"""
    device_type = _device(device_type)
    READS[0] += 1
    _effects.setting_read(_dtypes, device_type, f"the autocast dtype of {device_type!r}")
    return _dtypes[device_type]


def is_autocast_available(device_type):
    return device_type == "cpu"


class autocast:
    """`with autocast(device_type="cuda", dtype=float16, enabled=use_amp): ...`"""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device = device_type
        # PyTorch: a region without a dtype takes the one in effect (an outer region's)
        self.fast_dtype = (get_autocast_dtype(device_type)
                           if dtype is None and device_type in _DEVICE_TYPES else dtype)
        self._enabled = bool(enabled)
        if self._enabled and device_type != "cpu":
            if device_type == "cuda":
                warnings.warn("CUDA is not available or torch_xla is imported. Disabling "
                              "autocast.", stacklevel=2)
            else:
                warnings.warn(f"User provided device_type of '{device_type}', but "
                              f"{device_type} is not available. Disabling", stacklevel=2)
            self._enabled = False
        if self._enabled:
            raise NotImplementedError(
                "tracegrad: autocast on the CPU (computing in bfloat16/float16) is not "
                "supported; run in full precision, e.g. autocast('cpu', enabled=False)")

    def __enter__(self):
        device = self.device
        if device in _DEVICE_TYPES:
            self._prev = _dtypes[device]
            tracer = _effects.active()      # Note [Autocast dtype read in a compiled
            key = (id(_dtypes), device)     # function]: the region's dtype is the trace's
            self._owned = tracer is not None and key not in tracer.settings_set
            if self._owned:
                tracer.settings_set.add(key)
            _dtypes[device] = self.fast_dtype or _default_dtype(device)
        return self

    def __exit__(self, *exc):
        device = self.device
        if device in _DEVICE_TYPES:
            _dtypes[device] = self._prev
            tracer = _effects.active()
            if getattr(self, "_owned", False) and tracer is not None:
                tracer.settings_set.discard((id(_dtypes), device))
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for the `forward` of a custom `autograd.Function` under autocast
    (`@torch.amp.custom_fwd(device_type="cuda")`): records on `ctx` whether autocast was
    on and its dtype, for `custom_bwd`. Autocast is never on here, so `cast_inputs` (which
    casts floating inputs only inside an enabled region) leaves the inputs as they are."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = _dtypes[_device(device_type)]   # (compared on ctx per call)
        args[0]._fwd_used_autocast = (is_autocast_enabled(device_type)
                                      if cast_inputs is None else False)
        return fwd(*args, **kwargs)
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for the `backward` of a custom `autograd.Function` whose forward has
    `custom_fwd`: runs it in the autocast state the forward ran in."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type=device_type, enabled=args[0]._fwd_used_autocast,
                      dtype=args[0]._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd
