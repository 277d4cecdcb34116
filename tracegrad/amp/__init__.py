"""`tracegrad.amp`: PyTorch's automatic-mixed-precision entry points, `autocast` and
`GradScaler`, as a CPU-only PyTorch build runs them.

A CUDA autocast or CUDA GradScaler disables itself with PyTorch's warning (what every AMP
script does on a machine without a GPU); `GradScaler("cpu")` scales, unscales and skips
steps on non-finite gradients exactly as PyTorch's; CPU autocast (computing in lower
precision) is not supported and says so.
"""
from .autocast_mode import (autocast, custom_bwd, custom_fwd, get_autocast_dtype,  # noqa: F401
                            is_autocast_available, is_autocast_enabled)
from .grad_scaler import GradScaler  # noqa: F401

__all__ = ["autocast", "GradScaler", "is_autocast_available", "custom_fwd", "custom_bwd"]
