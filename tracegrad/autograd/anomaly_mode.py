"""Anomaly detection (`torch.autograd.detect_anomaly` / `set_detect_anomaly`): while it is
on, backward checks every gradient a node returns and raises PyTorch's RuntimeError
("Function 'DivBackward0' returned nan values in its 1th output.") at the first NaN.

Note [Anomaly mode and compile]
A compiled backward is one fused program: it has no per-node outputs to check, and a NaN
that a later op drops (a `where`) would go unseen where eager raises. So while anomaly
mode is on, compiled functions run eagerly (with one warning per function), which is what
a debugging session wants anyway. The mode is process-wide, as PyTorch's is. Turned on
inside a compiled function (`with detect_anomaly(): loss.backward()` in a training step),
it is an effect the trace reports (Note [Effects]): such calls run eagerly too, with a
warning, so the backward inside checks each node as eager does.
"""
import functools
import warnings

import numpy as np

from .. import _effects
from .._errors import TracegradRuntimeError

STATE = {"enabled": False, "check_nan": True}

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled"]


def is_anomaly_enabled():
    return STATE["enabled"]


def is_anomaly_check_nan_enabled():
    return STATE["check_nan"]


def check_outputs(node, grads):
    """Raise PyTorch's error if a gradient `node` returned holds a NaN."""
    if not STATE["check_nan"]:
        return
    for i, g in enumerate(grads):
        if g is not None and g._data.dtype.kind == "f" and np.isnan(g._data).any():
            raise TracegradRuntimeError(
                f"Function '{node.name()}' returned nan values in its {i}th output.")


def _note_inside(what):
    """Anomaly mode turned on inside a traced function (Note [Anomaly mode and compile])."""
    _effects.note("anomaly", f"{what} (anomaly detection checks every backward node)")


class set_detect_anomaly:
    """Turn anomaly detection on or off now; as a context manager, restore on exit."""

    def __init__(self, mode, check_nan=True):
        if mode:
            _note_inside("set_detect_anomaly(True)")
        self.prev = dict(STATE)
        STATE.update(enabled=bool(mode), check_nan=bool(check_nan))

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        STATE.update(self.prev)
        return False


class detect_anomaly:
    """`with detect_anomaly():` (or as a decorator) turns anomaly detection on for a block."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self):
        _note_inside("detect_anomaly()")
        self.prev = dict(STATE)
        STATE.update(enabled=True, check_nan=bool(self.check_nan))

    def __exit__(self, *exc):
        STATE.update(self.prev)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return func(*args, **kwargs)
        return wrapper
