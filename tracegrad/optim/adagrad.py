"""`Adagrad`, numerically following PyTorch's single-tensor (for-loop) path, which is the
path PyTorch takes for CPU tensors.

State is made in the constructor, as PyTorch does (so `state_dict()` lists it before the
first step): `step`, a 0-d float tensor, and `sum`, filled with `initial_accumulator_value`.
Per parameter with a gradient:
    step += 1
    g = -grad if maximize else grad
    g = g + weight_decay * p                       (if weight_decay)
    clr = lr / (1 + (step - 1) * lr_decay)
    sum += g * g;  std = sqrt(sum) + eps;  p += (-clr * g) / std
lr, lr_decay, eps and weight_decay are runtime values in a compiled step (`hyper`), so a
scheduler changing lr never re-traces it.
"""
from .. import _dtype as D
from .. import _mode
from .. import ops as O
from .._effects import as_scalar_for, hyper
from .._errors import TracegradValueError
from .._tensor import Tensor
from .optimizer import Optimizer, check_flags, check_tensor_lr, grad_mode_of_step, step_counter


class Adagrad(Optimizer):
    """`Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
    eps=1e-10, foreach=None, *, maximize=False)`."""

    _runtime_keys = ("lr", "lr_decay", "eps", "weight_decay")

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        check_tensor_lr(lr)
        for name, v in (("learning rate", lr), ("lr_decay value", lr_decay),
                        ("weight_decay value", weight_decay),
                        ("initial_accumulator_value value", initial_accumulator_value),
                        ("epsilon value", eps)):
            if not 0.0 <= v:
                raise TracegradValueError(f"Invalid {name}: {v}")
        check_flags(differentiable=differentiable, fused=fused, foreach=foreach)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._state_of(p, group)

    def _state_of(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = step_counter(group.get("fused"))
            with _mode.no_grad():
                state["sum"] = O.full_like(p, group["initial_accumulator_value"])
        return state

    @grad_mode_of_step
    def step(self, closure=None):
        """One Adagrad update of every parameter that has a gradient."""
        return self._update_each(closure)

    def _update(self, p, group, state):
        lr, lr_decay = hyper(group, "lr"), hyper(group, "lr_decay")
        eps, wd = hyper(group, "eps"), hyper(group, "weight_decay")
        g = -p.grad if group["maximize"] else p.grad
        step_t = state["step"]
        # (decisions on runtime values before the first in-place write, as in sgd.py)
        if wd != 0:
            g = g.add(p, alpha=as_scalar_for(wd, p))
        step_t.add_(1)
        if isinstance(lr, Tensor) or isinstance(lr_decay, Tensor):
            # compiled: the step count is a runtime value (its item() would be a guard
            # failing every call); float64 arithmetic, as eager's Python floats
            step = step_t.to(D.float64)
        else:
            step = step_t.item()
        clr = lr / (1 + (step - 1) * lr_decay)
        s = state["sum"]
        s.add_(O.mul(g, g))
        std = O.sqrt(s)
        std.add_(as_scalar_for(eps, std))
        p.add_(O.div(O.mul(g, as_scalar_for(-clr, g)), std))
