"""`GradScaler`: loss scaling for mixed-precision training, PyTorch's algorithm.

Enabled (device "cpu"): `scale(loss)` multiplies by the scale (a float32 0-d tensor),
`unscale_(opt)` divides the optimizer's gradients by it and records whether any is
inf/NaN, `step(opt)` unscales if needed and skips `opt.step()` when one was, `update()`
backs the scale off by `backoff_factor` after a skipped step and grows it by
`growth_factor` after `growth_interval` clean ones. Per optimizer, the order
unscale_ -> step -> update is checked with PyTorch's errors. Device "cuda" (no GPU here)
disables the scaler with PyTorch's warning; disabled, every method is a pass-through
(`step` just calls `opt.step()`), which is what AMP scripts rely on without a GPU.

Inside a compiled function an enabled scaler's `unscale_`, `step` and `update` are
reported effects (Note [Effects]): their Python bookkeeping (which optimizers were unscaled
or stepped, the growth count) is not something a compiled program replays, and a cached
call skipping it would unscale twice or step on stale decisions. Such calls run eagerly,
with a warning. `scale(loss)` has no bookkeeping (its product with the scale tensor, read
per call, is all it does; the scale made at its first use is Python state the trace writes
and the next call's guards see), so a compiled forward-and-backward of gradient
accumulation stays compiled. A disabled scaler has no state and stays compiled. Reading an enabled scaler stays compiled:
its attributes are guarded like an optimizer's (compiler/state_kinds.py), and
`get_scale()` and the state dict's numbers are values read per call, as the user's own
`.item()` is, so a compiled function logging the scale never returns a stale one.
"""
import warnings

import numpy as np

from .. import _effects, _mode
from .._errors import TracegradError, TracegradRuntimeError
from .._tensor import Tensor
from .._tensor_methods import item_for_user as _item_for_user

_READY, _UNSCALED, _STEPPED = 0, 1, 2


class ScalerUsageError(TracegradError, AssertionError):
    """A GradScaler method called before `scale()` (or `update()` before any inf check):
    PyTorch raises AssertionError here, so this is one too."""


class GradScaler:
    """`GradScaler(device="cuda", init_scale=65536.0, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)`."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled and device == "cuda":
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ValueError("The backoff factor must be < 1.0.")
        self._init_scale, self._growth_factor = init_scale, growth_factor
        self._backoff_factor, self._growth_interval = backoff_factor, growth_interval
        self._init_growth_tracker = 0
        self._scale = None
        self._growth_tracker = None
        self._per_optimizer_states = {}

    def is_enabled(self):
        return self._enabled

    def _lazy_init(self):
        from .. import ops as O
        self._scale = O.full((), self._init_scale, dtype=_float32())
        self._growth_tracker = O.full((), self._init_growth_tracker, dtype=_int32())

    def scale(self, outputs):
        """`outputs` (a tensor, or an iterable of them) times the current scale."""
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._lazy_init()
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if hasattr(outputs, "__iter__"):
            return map(self.scale, outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer):
        return self._per_optimizer_states.setdefault(
            id(optimizer), {"stage": _READY, "found_inf": None})

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale, in place; note any inf/NaN."""
        if not self._enabled:
            return
        _note("unscale_")
        if self._scale is None:
            raise ScalerUsageError("Attempted unscale_ but _scale is None.  This may "
                                   "indicate your script did not use scaler.scale(loss "
                                   "or outputs) earlier in the iteration.")
        st = self._state(optimizer)
        if st["stage"] == _UNSCALED:
            raise TracegradRuntimeError("unscale_() has already been called on this optimizer "
                                        "since the last update().")
        if st["stage"] == _STEPPED:
            raise TracegradRuntimeError("unscale_() is being called after step().")
        inv = float(np.float32(1.0 / np.float64(self._scale.item())))
        found = False
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]
                 if p.grad is not None]
        if any(g.dtype.name == "float16" for g in grads):     # before any is unscaled,
            raise ValueError("Attempting to unscale FP16 gradients.")   # as PyTorch
        with _mode.no_grad():
            for g in grads:
                found = found or not bool(g.isfinite().all())   # before scaling
                g.mul_(inv)
        st["found_inf"] = found
        st["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """`optimizer.step()` unless the unscaled gradients held an inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        _note("step")
        if "closure" in kwargs:
            raise TracegradRuntimeError("Closure use is not currently supported if "
                                        "GradScaler is enabled.")
        if self._scale is None:
            raise ScalerUsageError("Attempted step but _scale is None.  This may "
                                   "indicate your script did not use scaler.scale(loss "
                                   "or outputs) earlier in the iteration.")
        st = self._state(optimizer)
        if st["stage"] == _STEPPED:
            raise TracegradRuntimeError("step() has already been called since the last "
                                        "update().")
        if st["stage"] == _READY:
            self.unscale_(optimizer)
        ret = None if st["found_inf"] else optimizer.step(*args, **kwargs)
        st["stage"] = _STEPPED
        return ret

    def update(self, new_scale=None):
        """Back off after a skipped step, grow after `growth_interval` clean ones."""
        if not self._enabled:
            return
        _note("update")
        if self._scale is None:
            raise ScalerUsageError("Attempted update but _scale is None.  This may "
                                   "indicate your script did not use scaler.scale(loss "
                                   "or outputs) earlier in the iteration.")
        with _mode.no_grad():
            if new_scale is not None:
                self._scale.fill_(float(new_scale.item() if isinstance(new_scale, Tensor)
                                        else new_scale))
            else:
                found = [s["found_inf"] for s in self._per_optimizer_states.values()
                         if s["found_inf"] is not None]
                if not found:
                    raise ScalerUsageError("No inf checks were recorded prior to update.")
                tracker = int(self._growth_tracker.item())
                if any(found):           # float32 scale times the float64 factor
                    self._scale.fill_(float(np.float32(self._scale.item()
                                                       * self._backoff_factor)))
                    tracker = 0
                elif tracker + 1 == self._growth_interval:
                    grown = np.float32(self._scale.item() * self._growth_factor)
                    if np.isfinite(grown):
                        self._scale.fill_(float(grown))
                    tracker = 0
                else:
                    tracker += 1
                self._growth_tracker.fill_(tracker)
        # cleared in place: a compiled function reading the scaler (`get_scale()`) guards
        # this dict's identity, and a new one every step would re-trace it every call
        self._per_optimizer_states.clear()

    def get_scale(self):
        if not self._enabled:
            return 1.0
        if self._scale is None:
            return self._init_scale
        return _item_for_user(self._scale)

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": (self._init_growth_tracker if self._growth_tracker is None
                                    else _item_for_user(self._growth_tracker))}   # an int32

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise TracegradRuntimeError("The source state dict is empty, possibly because it "
                                        "was saved from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])


def _note(method):
    _effects.note("amp", f"GradScaler.{method}() of an enabled scaler (its bookkeeping is "
                         "Python state a compiled call would not replay)")


def _float32():
    from .. import float32
    return float32


def _int32():
    from .. import int32
    return int32
