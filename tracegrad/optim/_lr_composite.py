"""Schedules made of phases or of other schedulers: `OneCycleLR`, `SequentialLR`,
`ChainedScheduler` (re-exported by `tracegrad.optim.lr_scheduler`)."""
import math
from bisect import bisect_right

from .._effects import replayed
from .._errors import TracegradTypeError, TracegradValueError
from .lr_scheduler import LRScheduler, _per_group, set_group_value
from .optimizer import Optimizer


def _annealing_cos(start, end, pct):
    """Cosine from `start` (pct=0) to `end` (pct=1)."""
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def _annealing_linear(start, end, pct):
    return (end - start) * pct + start


_ANNEAL = {"cos": _annealing_cos, "linear": _annealing_linear}


def _phases(total_steps, pct_start, three_phase):
    """Where each phase ends and which group keys it anneals between."""
    up = {"end_step": float(pct_start * total_steps) - 1, "start_lr": "initial_lr",
          "end_lr": "max_lr", "start_momentum": "max_momentum",
          "end_momentum": "base_momentum"}
    if not three_phase:
        return [up, {"end_step": total_steps - 1, "start_lr": "max_lr", "end_lr": "min_lr",
                     "start_momentum": "base_momentum", "end_momentum": "max_momentum"}]
    return [up,
            {"end_step": float(2 * pct_start * total_steps) - 2, "start_lr": "max_lr",
             "end_lr": "initial_lr", "start_momentum": "base_momentum",
             "end_momentum": "max_momentum"},
            {"end_step": total_steps - 1, "start_lr": "initial_lr", "end_lr": "min_lr",
             "start_momentum": "max_momentum", "end_momentum": "max_momentum"}]


def _total_steps(total_steps, epochs, steps_per_epoch):
    if total_steps is not None:
        if not isinstance(total_steps, int) or total_steps <= 0:
            raise TracegradValueError(
                f"Expected positive integer total_steps, but got {total_steps}")
        return total_steps
    if epochs is not None and steps_per_epoch is not None:
        if not isinstance(epochs, int) or epochs <= 0:
            raise TracegradValueError(f"Expected positive integer epochs, but got {epochs}")
        if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
            raise TracegradValueError(
                f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
        return epochs * steps_per_epoch
    raise TracegradValueError("You must define either total_steps OR (epochs AND "
                              "steps_per_epoch)")


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr warms up from max_lr/div_factor to max_lr over `pct_start` of
    `total_steps`, then anneals to max_lr/div_factor/final_div_factor ('cos' or 'linear');
    with `cycle_momentum`, SGD's `momentum` (or Adam's beta1) moves the opposite way.
    Call `step()` after every batch."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True,
                 base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TracegradTypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        self.total_steps = _total_steps(total_steps, epochs, steps_per_epoch)
        self._schedule_phases = _phases(self.total_steps, pct_start, three_phase)
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise TracegradValueError(
                f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in _ANNEAL:
            raise TracegradValueError("anneal_strategy must be one of 'cos' or 'linear', "
                                      f"instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        if last_epoch == -1:
            for mx, g in zip(_per_group("max_lr", optimizer, max_lr), optimizer.param_groups):
                g["initial_lr"] = mx / div_factor
                g["max_lr"] = mx
                g["min_lr"] = g["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self._init_momentum(optimizer, base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)

    def _init_momentum(self, optimizer, base_momentum, max_momentum, last_epoch):
        if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
            raise TracegradValueError("optimizer must support momentum or beta1 with "
                                      "`cycle_momentum` option enabled")
        self.use_beta1 = "betas" in optimizer.defaults
        if last_epoch != -1:
            return
        maxs = _per_group("max_momentum", optimizer, max_momentum)
        bases = _per_group("base_momentum", optimizer, base_momentum)
        for mx, base, g in zip(maxs, bases, optimizer.param_groups):
            if self.use_beta1:
                g["betas"] = (mx, *g["betas"][1:])
            else:
                g["momentum"] = mx
            g["max_momentum"] = mx
            g["base_momentum"] = base

    def _chain_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise TracegradValueError(f"Tried to step {step} times. The specified number of "
                                      f"total steps is {self.total_steps}")
        anneal = _ANNEAL[self._anneal_func_type]
        lrs = []
        for g in self.optimizer.param_groups:
            start = 0.0
            for i, ph in enumerate(self._schedule_phases):
                end = ph["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(anneal(g[ph["start_lr"]], g[ph["end_lr"]], pct))
                    if self.cycle_momentum:
                        self._set_momentum(g, anneal(g[ph["start_momentum"]],
                                                     g[ph["end_momentum"]], pct))
                    break
                start = end
        return lrs


class SequentialLR(LRScheduler):
    """Run `schedulers[i]` between `milestones[i-1]` and `milestones[i]`; at a milestone
    the next scheduler restarts from its epoch 0."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _check_children(self, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise TracegradValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                f"than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to "
                f"{len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            set_group_value(g, "lr", g["initial_lr"])
        self._undo(self)                  # the children's constructors each stepped once
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def recursive_undo(self, sched=None):
        self._undo(self if sched is None else sched)

    def _undo(self, sched):
        if hasattr(sched, "_schedulers"):
            for s in sched._schedulers:
                self._undo(s)
        elif hasattr(sched, "last_epoch"):
            sched.last_epoch -= 1

    @replayed
    def step(self):
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched._update_lr(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()

    def state_dict(self):
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        children = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, sd in zip(self._schedulers, children):
            s.load_state_dict(sd)


class ChainedScheduler(LRScheduler):
    """Step every scheduler in `schedulers` at each `step()` (their effects compose)."""

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise TracegradValueError("ChainedScheduler expects at least one scheduler to be "
                                      "chained, but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_children(self, optimizer, schedulers)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = [g["lr"] for g in schedulers[-1].optimizer.param_groups]

    @replayed
    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self._schedulers[-1].optimizer.param_groups]

    state_dict = SequentialLR.state_dict
    load_state_dict = SequentialLR.load_state_dict


def _check_children(parent, optimizer, schedulers):
    name = type(parent).__name__
    if len(schedulers) < 1:
        raise TracegradValueError(f"{name} expects at least one scheduler, but got no "
                                  "scheduler.")
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TracegradTypeError(f"{name} at index {i} should have `optimizer` as its "
                                     "attribute.")
        if s.optimizer is not optimizer:
            raise TracegradValueError(
                f"{name} expects all schedulers to belong to the same optimizer, but got "
                f"scheduler {type(s).__name__} at index {i} has {s.optimizer}, which is "
                f"different from {type(optimizer).__name__}.")
