"""Process-wide settings and dtype facts that PyTorch scripts touch in their preamble:
`finfo` / `iinfo`, `set_float32_matmul_precision`, `use_deterministic_algorithms`,
`set_num_threads`.

tracegrad computes in numpy on the CPU, deterministically, at full float32 precision, so
the settings change nothing about the numbers: they are accepted, validated as PyTorch
validates them, and read back as set (a script that asks gets what it asked for). Read or
set inside a compiled function, each is guarded or replayed per call (Note [Settings read
and set] in _effects.py).
"""
import os
import warnings

import numpy as np

from . import _dtype as D
from . import _effects
from ._errors import TracegradRuntimeError, TracegradTypeError

__all__ = ["finfo", "iinfo", "set_float32_matmul_precision", "get_float32_matmul_precision",
           "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_num_threads",
           "get_num_threads"]


def _g(x):
    return f"{x:.6g}"


class finfo:
    """Machine limits of a floating dtype (the default dtype when none is given).

    >>> finfo(tracegrad.float32).eps
    1.1920928955078125e-07
    """

    def __init__(self, type=None):
        d = D.get_default_dtype() if type is None else type
        if not isinstance(d, D.dtype) or not d.is_floating_point:
            raise TracegradTypeError("torch.finfo() requires a floating point input type. Use "
                                     "torch.iinfo to handle 'torch.finfo'")
        np_dtype = d.np                 # bfloat16 without ml_dtypes raises, naming the fix
        f = D._ml_dtypes.finfo(np_dtype) if d is D.bfloat16 else np.finfo(np_dtype)
        self.bits, self.dtype = int(f.bits), d.name
        self.eps, self.max, self.min = float(f.eps), float(f.max), float(f.min)
        self.tiny = self.smallest_normal = float(f.smallest_normal)
        self.resolution = 10.0 ** -int(f.precision)

    def __repr__(self):
        return (f"finfo(resolution={_g(self.resolution)}, min={_g(self.min)}, "
                f"max={_g(self.max)}, eps={_g(self.eps)}, "
                f"smallest_normal={_g(self.smallest_normal)}, tiny={_g(self.tiny)}, "
                f"dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype: `iinfo(tracegrad.int64).max`."""

    def __init__(self, type):
        if not isinstance(type, D.dtype) or type.is_floating_point:
            raise TracegradTypeError("torch.iinfo() requires an integer input type. Use "
                                     "torch.finfo to handle 'torch.iinfo'")
        i = np.iinfo(type.np) if type is not D.bool_ else None
        self.bits = 8 if i is None else int(i.bits)
        self.min, self.max = (0, 1) if i is None else (int(i.min), int(i.max))
        self.dtype = type.name

    def __repr__(self):
        return f"iinfo(min={self.min:.6g}, max={self.max:.6g}, dtype={self.dtype})"


_state = {"matmul": "highest", "deterministic": False, "warn_only": False,
          "threads": os.cpu_count() or 1}


def set_float32_matmul_precision(precision):
    """Accepted for PyTorch scripts; numpy's float32 matmul is always 'highest'."""
    if precision not in ("highest", "high", "medium"):
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "setFloat32MatmulPrecision call has no effect.", stacklevel=2)
        return
    _effects.setting_set(set_float32_matmul_precision, (precision,), {}, _state, ("matmul",))
    _state["matmul"] = precision


def _read(key):
    """A setting's value; read inside a trace, a guard (Note [Settings read and set])."""
    _effects.setting_read(_state, key, f"the setting {_NAMES[key]}")
    return _state[key]


_NAMES = {"matmul": "float32_matmul_precision", "deterministic": "deterministic algorithms",
          "warn_only": "deterministic algorithms' warn_only", "threads": "num_threads"}


def get_float32_matmul_precision():
    return _read("matmul")


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Accepted for PyTorch scripts; tracegrad's kernels are always deterministic."""
    _effects.setting_set(use_deterministic_algorithms, (mode,), {"warn_only": warn_only},
                         _state, ("deterministic", "warn_only"))
    _state["deterministic"], _state["warn_only"] = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _read("deterministic")


def is_deterministic_algorithms_warn_only_enabled():
    return _read("warn_only")


def set_num_threads(int):
    """Accepted for PyTorch scripts (numpy's BLAS picks its own thread count)."""
    if not isinstance(int, type(1)) or int <= 0:
        raise TracegradRuntimeError("set_num_threads expects a positive integer")
    _effects.setting_set(set_num_threads, (int,), {}, _state, ("threads",))
    _state["threads"] = int


def get_num_threads():
    return _read("threads")
