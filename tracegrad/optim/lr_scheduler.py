"""`tracegrad.optim.lr_scheduler`: learning-rate schedules with PyTorch's names and numbers.

Each scheduler writes `group["lr"]` (a plain float) of its optimizer's parameter groups, so
a compiled training step reads the new rate as a runtime value and never re-traces; `step`
is `_effects.replayed`, so `sched.step()` inside a compiled function runs after every call.

Note [Chainable forms]
PyTorch computes `step()` (no epoch argument) *recursively* from the current
`group["lr"]` (e.g. cosine annealing multiplies the last rate by a ratio of cosines), and
only `step(epoch)` uses closed forms. The two differ in the last bits, so to give exactly
PyTorch's sequence every `_chain_lr` below evaluates the same expression in the same
order as PyTorch does, and `_closed_form_lr` its closed form.
"""
import math
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter
from functools import wraps

from .._effects import replayed
from .._errors import TracegradTypeError, TracegradValueError
from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR",
           "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
           "SequentialLR", "OneCycleLR", "ChainedScheduler", "ReduceLROnPlateau",
           "CosineAnnealingWarmRestarts", "CyclicLR"]

_EPOCH_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated "
    "where possible. Please use `scheduler.step()` to step the scheduler. During the "
    "deprecation, if epoch is different from None, the closed form is used instead of the "
    "new chainable form, where available.")


def _lrs(optimizer, key="lr"):
    """The groups' `key` values; a tensor one (a tensor lr) as a copy, as PyTorch's
    `_param_groups_val_list` (the group's tensor is filled in place at every step)."""
    return [_copy(g[key]) for g in optimizer.param_groups]


def _copy(v):
    from .._tensor import Tensor
    return v.clone() if isinstance(v, Tensor) else v


def set_group_value(group, key, value):
    """`group[key] = value`, but a tensor place (a tensor lr) is filled in place instead of
    rebound, as PyTorch's `_update_param_group_val` (whoever holds the tensor sees it)."""
    from .._tensor import Tensor
    cur = group[key]
    if isinstance(cur, Tensor):
        cur.fill_(value.item() if isinstance(value, Tensor) else value)
    else:
        group[key] = value


def _per_group(name, optimizer, value):
    """`value` for each parameter group: a list/tuple of the right length, or one value."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise TracegradValueError(f"{name} must have the same length as "
                                      f"optimizer.param_groups. {name} has {len(value)} "
                                      f"values, param_groups has {n}.")
        return list(value)
    return [value] * n


def _track_optimizer_step(optimizer):
    """Wrap `optimizer.step` once so schedulers can tell whether it ran before them."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    opt_ref = weakref.ref(optimizer)
    func = optimizer.step.__func__

    @wraps(func)
    def wrapper(*args, **kwargs):
        opt = opt_ref()
        opt._opt_called = True
        return func.__get__(opt, opt.__class__)(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    optimizer.step = wrapper


class LRScheduler:
    """Base class: `LRScheduler(optimizer, last_epoch=-1)`.

    Subclasses define `_chain_lr()` (the rates for `self.last_epoch`, see Note [Chainable
    forms]) and may define `_closed_form_lr()` (used by the deprecated `step(epoch)`).
    """

    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TracegradTypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _copy(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming scheduler with last_epoch >= 0. Load the "
                                   "optimizer's state_dict first, or start with last_epoch=-1.")
        self.base_lrs = _lrs(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _track_optimizer_step(optimizer)
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def _replay_refusal(self):
        """Why a compiled call cannot replay `step()` (`_effects.replayed`): a parameter
        group whose lr, momentum or betas is a tensor makes the schedule compute with
        tensors, which a replay after the program would do too late for an optimizer step
        the call makes after this one (and its new tensor is the trace's)."""
        from .._tensor import Tensor
        for g in self.optimizer.param_groups:
            for k in ("lr", "momentum", "betas"):
                v = g.get(k)
                if isinstance(v, Tensor) or isinstance(v, tuple) and any(
                        isinstance(b, Tensor) for b in v):
                    return f"over a tensor {k!r}"
        return None

    def state_dict(self):
        """Every attribute but the optimizer (plain numbers, lists and strings)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def get_last_lr(self):
        """The learning rates the last `step()` set, one per parameter group."""
        return self._last_lr

    def get_lr(self):
        """The rates for the current `last_epoch` (call `get_last_lr()` from outside)."""
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please "
                          "use `get_last_lr()`.", UserWarning, stacklevel=2)
        return self._chain_lr()

    def _chain_lr(self):
        raise NotImplementedError

    def _set_momentum(self, group, value):
        """Cycle a group's momentum (`use_beta1`: Adam's beta1), as CyclicLR and OneCycleLR
        do."""
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    @replayed
    def step(self, epoch=None):
        """Advance one epoch (or jump to `epoch`, deprecated) and update the groups' lr."""
        if self._step_count == 1:
            self._warn_order()
        self._step_count += 1
        if epoch is not None:        # (the caller of the `replayed` wrapper)
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=3)
        self._update_lr(epoch)

    def _warn_order(self):
        if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
            warnings.warn("Seems like `optimizer.step()` has been overridden after learning "
                          "rate scheduler initialization. Please, make sure to call "
                          "`optimizer.step()` before `lr_scheduler.step()`.",
                          UserWarning, stacklevel=4)     # past step()'s `replayed` wrapper
        elif not getattr(self.optimizer, "_opt_called", False):
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
                          "In PyTorch 1.1.0 and later, you should call them in the opposite "
                          "order: `optimizer.step()` before `lr_scheduler.step()`.  Failure "
                          "to do this will result in PyTorch skipping the first value of "
                          "the learning rate schedule.", UserWarning, stacklevel=4)

    def _update_lr(self, epoch=None):
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            set_group_value(group, "lr", lr)
        self._last_lr = _lrs(self.optimizer)


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch); `lr_lambda` is one function or one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise TracegradValueError(f"Expected {len(optimizer.param_groups)} "
                                          f"lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        """Plain functions and lambdas are not saved; callable objects save their `__dict__`."""
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else dict(f.__dict__)
                            for f in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        saved = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, d in zip(self.lr_lambdas, saved):
            if d is not None:
                fn.__dict__.update(d)

    def _chain_lr(self):
        return [base * f(self.last_epoch) for f, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(LambdaLR):
    """lr *= lr_lambda(epoch) at every step after the first."""

    def _chain_lr(self):
        if self.last_epoch > 0:
            return [g["lr"] * f(self.last_epoch)
                    for f, g in zip(self.lr_lambdas, self.optimizer.param_groups)]
        return _lrs(self.optimizer)


class StepLR(LRScheduler):
    """lr *= gamma every `step_size` epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _chain_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _lrs(self.optimizer)
        return [lr * self.gamma for lr in _lrs(self.optimizer)]

    def _closed_form_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr *= gamma at each epoch in `milestones` (a repeated milestone applies gamma twice)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self.milestones = Counter(self.milestones)    # a checkpoint may hold a plain dict

    def _chain_lr(self):
        if self.last_epoch not in self.milestones:
            return _lrs(self.optimizer)
        return [lr * self.gamma ** self.milestones[self.last_epoch]
                for lr in _lrs(self.optimizer)]

    def _closed_form_lr(self):
        ms = sorted(self.milestones.elements())
        return [b * self.gamma ** bisect_right(ms, self.last_epoch) for b in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = initial_lr * factor until `total_iters`, then initial_lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise TracegradValueError("Constant multiplicative factor expected to be between "
                                      "0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def _chain_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in _lrs(self.optimizer)]
        if self.last_epoch != self.total_iters:
            return _lrs(self.optimizer)
        return [lr * (1.0 / self.factor) for lr in _lrs(self.optimizer)]

    def _closed_form_lr(self):
        return [b * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for b in self.base_lrs]


class LinearLR(LRScheduler):
    """The factor on initial_lr moves linearly from `start_factor` to `end_factor` over
    `total_iters` epochs."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise TracegradValueError("Starting multiplicative factor expected to be greater "
                                      "than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise TracegradValueError("Ending multiplicative factor expected to be between 0 "
                                      "and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def _chain_lr(self):
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in _lrs(self.optimizer)]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _lrs(self.optimizer)
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor
                              + (self.last_epoch - 1) * span)
        return [lr * ratio for lr in _lrs(self.optimizer)]

    def _closed_form_lr(self):
        span = self.end_factor - self.start_factor
        return [b * (self.start_factor + span * min(self.total_iters, self.last_epoch)
                     / self.total_iters) for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr *= gamma every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _chain_lr(self):
        if self._is_initial:
            return _lrs(self.optimizer)
        return [lr * self.gamma for lr in _lrs(self.optimizer)]

    def _closed_form_lr(self):
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = initial_lr * (1 - epoch / total_iters) ** power, constant after total_iters."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def _chain_lr(self):
        if self._is_initial or self.last_epoch > self.total_iters:
            return _lrs(self.optimizer)
        t, n = self.last_epoch, self.total_iters
        decay = ((1.0 - t / n) / (1.0 - (t - 1) / n)) ** self.power
        return [lr * decay for lr in _lrs(self.optimizer)]

    def _closed_form_lr(self):
        n = self.total_iters
        return [b * (1.0 - min(n, self.last_epoch) / n) ** self.power for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, computed
    recursively as PyTorch does (it keeps cycling past T_max)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):   # noqa: N803
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def _chain_lr(self):
        t, T, lo = self.last_epoch, self.T_max, self.eta_min
        groups = self.optimizer.param_groups
        if self._is_initial:
            return _lrs(self.optimizer)
        if self._step_count == 1 and t > 0:
            return [lo + (b - lo) * (1 + math.cos(t * math.pi / T)) / 2 for b in self.base_lrs]
        if (t - 1 - T) % (2 * T) == 0:
            return [g["lr"] + (b - lo) * (1 - math.cos(math.pi / T)) / 2
                    for b, g in zip(self.base_lrs, groups)]
        ratio = (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
        return [ratio * (g["lr"] - lo) + lo for g in groups]

    def _closed_form_lr(self):
        lo = self.eta_min
        return [lo + (b - lo) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for b in self.base_lrs]


from ._lr_composite import ChainedScheduler, OneCycleLR, SequentialLR  # noqa: E402,F401
from ._lr_plateau import ReduceLROnPlateau  # noqa: E402,F401
from ._lr_cyclic import CosineAnnealingWarmRestarts, CyclicLR  # noqa: E402,F401
