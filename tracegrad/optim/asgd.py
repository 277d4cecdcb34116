"""`ASGD` (averaged SGD), following PyTorch's single-tensor (for-loop) path, which is the
path PyTorch takes for CPU tensors, operation by operation.

State per parameter: `step`, `eta` (the current rate, starting at lr), `mu` (the averaging
weight, 1 until step t0) and `ax` (the average). Per parameter with a gradient:
    g = -grad if maximize else grad;  g = g + weight_decay * p     (if weight_decay)
    p *= 1 - lambd * eta;  p -= eta * g
    ax += (p - ax) * mu  if mu != 1  else  ax = p
    eta = lr / (1 + lambd * lr * step) ** alpha;  mu = 1 / max(1, step - t0)
In a compiled step lr, lambd, alpha, t0 and weight_decay are runtime values (`hyper`), and
eta, mu and the step count are read as tensors: `mu != 1` is a `where`, not a guard.
"""
from .. import _dtype as D
from .. import ops as O
from .._effects import as_scalar_for, hyper
from .._errors import TracegradValueError
from .._tensor import Tensor
from .optimizer import (PerParameter, check_flags, check_tensor_lr, scalar_state, step_counter,
                        step_value)


class ASGD(PerParameter):
    """`ASGD(params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
    maximize=False, differentiable=False, capturable=False)`."""

    _runtime_keys = ("lr", "lambd", "alpha", "t0", "weight_decay")
    _capturable_what = "params, mus, etas, and state_steps"

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise TracegradValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise TracegradValueError(f"Invalid weight_decay value: {weight_decay}")
        check_flags(capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)


    def _state_of(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = step_counter()
            state["eta"] = scalar_state(group["lr"])
            state["mu"] = scalar_state(1.0)
            state["ax"] = O.zeros_like(p)
        return state

    def _update(self, p, group, state):
        lr, lambd, alpha = hyper(group, "lr"), hyper(group, "lambd"), hyper(group, "alpha")
        t0, wd = hyper(group, "t0"), hyper(group, "weight_decay")
        runtime = isinstance(lr, Tensor)
        g = -p.grad if group["maximize"] else p.grad
        step_t, eta, mu, ax = state["step"], state["eta"], state["mu"], state["ax"]
        # (decisions on runtime values before the first in-place write, as in sgd.py)
        if wd != 0:
            g = g.add(p, alpha=as_scalar_for(wd, p))
        step_t.add_(1)
        eta_value = step_value(eta, runtime)
        p.mul_(as_scalar_for(1 - lambd * eta_value, p))
        p.add_(O.mul(g, as_scalar_for(-eta_value, g)))
        if runtime:
            ax.copy_(O.where(O.ne(mu, 1), O.add(ax, O.mul(O.sub(p, ax), mu)), p))
        elif mu.item() != 1:
            ax.add_(O.sub(p, ax).mul_(mu))
        else:
            ax.copy_(p)
        step = step_value(step_t, runtime)
        new_eta = lr / ((1 + lambd * lr * step) ** alpha)
        # (each new value goes through a tensor of the default dtype, as PyTorch's
        # `as_tensor(value)`: a loaded float64 eta still gets float32-rounded values)
        if runtime:
            eta.copy_(new_eta.to(D.get_default_dtype()))
            mu.copy_((1 / O.maximum(step - t0, 1.0)).to(D.get_default_dtype()))
        else:
            eta.copy_(O.tensor(new_eta))
            mu.copy_(O.tensor(1 / max(1, step - t0)))
