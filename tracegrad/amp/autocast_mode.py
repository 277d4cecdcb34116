"""`autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`: a context manager
and decorator. For 'cuda' (no GPU here) it disables itself with PyTorch's warning, as
CPU-only PyTorch does, and the region runs in full precision. Enabled CPU autocast would
change result dtypes (bfloat16/float16 matmuls) that tracegrad cannot compute: it raises
NotImplementedError rather than silently computing something else.
"""
import functools
import warnings

_DEVICES = ("cpu", "cuda", "mps", "xpu", "xla", "hpu", "mtia", "meta")


def is_autocast_available(device_type):
    return device_type == "cpu"


class autocast:
    """`with autocast(device_type="cuda", dtype=float16, enabled=use_amp): ...`"""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device = device_type
        self.fast_dtype = dtype
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
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper
