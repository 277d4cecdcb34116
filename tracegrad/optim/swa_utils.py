"""`tracegrad.optim.swa_utils`: stochastic weight averaging and exponential moving averages
of a model's weights, with PyTorch's names, defaults and numbers.

- `AveragedModel(model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False)`
  keeps a deep copy of `model` (`.module`) and a long buffer `n_averaged`;
  `update_parameters(model)` copies the weights on the first call and averages them in
  afterwards: by default the running mean p += (p_model - p) / (n + 1), otherwise
  `avg_fn(p, p_model, n)` per tensor or `multi_avg_fn(ps, p_models, n)` on lists (e.g.
  `get_ema_multi_avg_fn(0.999)`). With `use_buffers`, buffers are averaged too; without,
  they are copied from the model.
- `SWALR(optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos")` anneals each
  group's lr to `swa_lr` over `anneal_epochs` steps, then holds it.
- `update_bn(loader, model)` recomputes BatchNorm running statistics with one pass over
  `loader` (cumulative averages, as for the averaged weights).
"""
import itertools
import math
from copy import deepcopy

from .. import _dtype as D
from .. import _mode
from .. import ops as O
from .._errors import TracegradValueError
from .._tensor import Tensor
from ..nn.module import Module
from .adam import _lerp_
from .lr_scheduler import LRScheduler, _per_group

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise TracegradValueError(f"Invalid decay value {decay} provided. Please provide a "
                                  "value in [0,1] range.")


def _lerp_by_tensor_(t, end, weight):
    """`_lerp_` with a 0-d tensor weight: both of the kernel's formulas, one selected (no
    decision on the weight's value)."""
    diff = O.sub(end, t)
    near = O.lt(O.abs(weight), 0.5)
    t.copy_(O.where(near, O.add(t, O.mul(diff, weight)),
                    O.sub(end, O.mul(diff, O.sub(1, weight)))))


def get_ema_multi_avg_fn(decay=0.999):
    """An exponential moving average over lists: ema = lerp(ema, p, 1 - decay)."""
    _check_decay(decay)

    @_mode.no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        if ema_param_list[0].is_floating_point():
            for p_ema, p in zip(ema_param_list, current_param_list):
                _lerp_(p_ema, p, 1 - decay)
        else:
            for p_ema, p in zip(ema_param_list, current_param_list):
                p_ema.copy_(p_ema * decay + p * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """The running mean over lists: p = lerp(p, p_model, 1 / (n + 1))."""
    @_mode.no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        if averaged_param_list[0].is_floating_point():
            if isinstance(num_averaged, Tensor):
                # a weight of the default dtype, as PyTorch's `1 / (n + 1)`; kept a tensor
                # so a compiled step reads the count per call (its float() would be a
                # guard failing on every call)
                weight = O.div(1, num_averaged + 1)
                for p_avg, p in zip(averaged_param_list, current_param_list):
                    _lerp_by_tensor_(p_avg, p, weight)
                return
            for p_avg, p in zip(averaged_param_list, current_param_list):
                _lerp_(p_avg, p, 1 / (num_averaged + 1))
        else:
            for p_avg, p in zip(averaged_param_list, current_param_list):
                p_avg.add_(O.sub(p, p_avg) * weight)
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """An exponential moving average per tensor: decay * ema + (1 - decay) * p."""
    _check_decay(decay)

    @_mode.no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """The running mean per tensor: p + (p_model - p) / (n + 1)."""
    @_mode.no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """An average of a model's weights over training (SWA, or EMA with an `avg_fn`);
    `forward` runs the averaged copy."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        self.register_buffer("n_averaged", O.tensor(0, dtype=D.int64))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _places(self, model):
        if self.use_buffers:
            return (itertools.chain(self.module.parameters(), self.module.buffers()),
                    itertools.chain(model.parameters(), model.buffers()))
        return self.parameters(), model.parameters()

    def update_parameters(self, model):
        """Average `model`'s current weights into this copy (the first call copies them)."""
        mine, theirs = self._places(model)
        averaged, current = [], []
        first = bool(self.n_averaged == 0)
        with _mode.no_grad():
            for p_avg, p in zip(mine, theirs):
                p = p.detach()
                averaged.append(p_avg.detach())
                current.append(p)
                if first:
                    p_avg.detach().copy_(p)
            if self.n_averaged > 0:
                self._average(averaged, current)
            if not self.use_buffers:       # buffers follow the model
                for b_avg, b in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b.detach())
            self.n_averaged += 1

    def _average(self, averaged, current):
        n = self.n_averaged
        if self.avg_fn is not None:
            for p_avg, p in zip(averaged, current):
                p_avg.copy_(self.avg_fn(p_avg, p, n))
            return
        # PyTorch groups the tensors by dtype before calling multi_avg_fn
        groups = {}
        for p_avg, p in zip(averaged, current):
            pair = groups.setdefault(p_avg.dtype, ([], []))
            pair[0].append(p_avg)
            pair[1].append(p)
        for ps_avg, ps in groups.values():
            if self.multi_avg_fn is not None:
                self.multi_avg_fn(ps_avg, ps, n)
            else:                          # the CPU default: one tensor at a time
                avg_fn = get_swa_avg_fn()
                for p_avg, p in zip(ps_avg, ps):
                    p_avg.copy_(avg_fn(p_avg, p, n))


@_mode.no_grad()
def update_bn(loader, model, device=None):
    """Recompute the running mean and variance of every BatchNorm in `model` with one pass
    over `loader` (batches, or tuples whose first item is the input), as cumulative
    averages; the model's training flag and the layers' momenta are restored."""
    from ..nn.batchnorm import _BatchNorm
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr from its value to `swa_lr` over `anneal_epochs` steps
    ('cos' or 'linear'), then keep `swa_lr`."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        swa_lrs = _per_group("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise TracegradValueError("anneal_strategy must be one of 'cos' or 'linear', "
                                      f"instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise TracegradValueError("anneal_epochs must be equal or greater than 0, got "
                                      f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" \
            else self._linear_anneal

    def _chain_lr(self):
        # the lr before annealing is recovered from the current one (the chainable form)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / span)))
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        alpha = self.anneal_func(max(0, min(1, step / span)))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
