"""Cyclic schedules: `CosineAnnealingWarmRestarts` (SGDR) and `CyclicLR`, with PyTorch's
arguments, checks, numbers and `state_dict` contents.

Both write plain floats into the param groups (lr, and for CyclicLR's `cycle_momentum`
SGD's `momentum` or Adam's beta1), which a compiled step reads per call; `step` is
`_effects.replayed`, so `sched.step()` inside a compiled function runs after every call.
"""
import math
import types

from .._effects import replayed
from .._errors import TracegradTypeError, TracegradValueError
from .lr_scheduler import LRScheduler, _lrs, _per_group, set_group_value
from .optimizer import Optimizer


class CosineAnnealingWarmRestarts(LRScheduler):
    """lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2, where T_cur
    counts epochs since the last restart and T_i (first T_0) is multiplied by `T_mult` at
    every restart. `step(epoch)` takes a fractional epoch (per-batch annealing:
    `sched.step(epoch + i / iters)`)."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):  # noqa: N803
        if T_0 <= 0 or not isinstance(T_0, int):
            raise TracegradValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise TracegradValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise TracegradValueError(f"Expected float or int eta_min, but got {eta_min} of "
                                      f"type {type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def _chain_lr(self):
        lo = self.eta_min
        return [lo + (b - lo) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for b in self.base_lrs]

    @replayed
    def step(self, epoch=None):
        """Advance one epoch, or go to `epoch` (a float for a position inside an epoch)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise TracegradValueError(f"Expected non-negative epoch, but got {epoch}")
            self._seek(epoch)
        self.last_epoch = math.floor(epoch)
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            set_group_value(group, "lr", lr)
        self._last_lr = _lrs(self.optimizer)

    def _seek(self, epoch):
        """T_cur and T_i at `epoch`: which restart period it falls in, and where."""
        if epoch < self.T_0:
            self.T_i = self.T_0
            self.T_cur = epoch
        elif self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        else:
            m = self.T_mult
            n = int(math.log((epoch / self.T_0 * (m - 1) + 1), m))
            self.T_cur = epoch - self.T_0 * (m ** n - 1) / (m - 1)
            self.T_i = self.T_0 * m ** n


class CyclicLR(LRScheduler):
    """Cyclical learning rate: lr goes from `base_lr` up to `max_lr` over `step_size_up`
    iterations and back over `step_size_down`, the amplitude scaled per cycle
    ('triangular': 1; 'triangular2': halved each cycle) or per iteration ('exp_range':
    gamma ** iteration), or by `scale_fn`. With `cycle_momentum`, SGD's momentum (Adam's
    beta1) cycles the opposite way between `max_momentum` and `base_momentum`. Call
    `step()` after every batch."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TracegradTypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                set_group_value(group, "lr", lr)
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise TracegradValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise TracegradValueError("optimizer must support momentum or beta1 with "
                                          "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for mx, base, group in zip(self.max_momentums, self.base_momentums,
                                           optimizer.param_groups):
                    self._set_momentum(group, mx)
                    group["max_momentum"] = mx
                    group["base_momentum"] = base
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self):
        """The built-in modes fix `scale_mode` (a custom `scale_fn` keeps the given one)."""
        if self._scale_fn_custom is None:
            self.scale_mode = "iterations" if self.mode == "exp_range" else "cycle"

    def scale_fn(self, x):
        """The amplitude's factor at cycle (or iteration) `x`."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def _chain_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [base + (mx - base) * scale_factor * self.scale_fn(at)
               for base, mx in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for base, mx, group in zip(self.base_momentums, self.max_momentums,
                                       self.optimizer.param_groups):
                self._set_momentum(group, mx - (mx - base) * scale_factor * self.scale_fn(at))
        return lrs

    def state_dict(self):
        """As the base class; a custom `scale_fn` is saved as its `__dict__` when it is a
        callable object, and not at all when it is a function or lambda."""
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        fn = state_dict.pop("_scale_fn_custom")
        state_dict.pop("_scale_fn_ref", None)
        super().load_state_dict(state_dict)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()
