"""`Adam` and `AdamW`, numerically following PyTorch's single-tensor (for-loop) path.

Per parameter, with t the step count (a 0-d float tensor in the state, as in PyTorch):
    g = -grad if maximize else grad
    p *= 1 - lr * weight_decay                    (AdamW / decoupled_weight_decay)
    g = g + weight_decay * p                      (Adam with weight_decay)
    m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
    vmax = max(vmax, v)                           (amsgrad; used instead of v below)
    p += -(lr / (1 - beta1**t)) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)
"""
from .. import _dtype as D
from .. import ops as O
from .._errors import TracegradValueError
from ..ops.elementwise import _check_lerp_dtypes  # (shared with ops.lerp)
from . import _fast
from .._effects import as_scalar_for, hyper
from .._tensor import Tensor
from .optimizer import (Optimizer, check_flags, check_step_flags, check_tensor_lr,
                        grad_mode_of_step, step_counter)


def _lerp_(t, end, weight):
    """In-place `t + weight * (end - t)`, evaluated the way PyTorch's lerp kernel does,
    with its dtype check: PyTorch's `exp_avg.lerp_(grad, 1 - beta1)` raises when the
    gradient's dtype is not the state's (a model moved to float64 or float16 after its
    optimizer made float32 state), so these optimizers do too, rather than step on in a
    precision PyTorch never computes in."""
    _check_lerp_dtypes(t, end)
    diff = O.sub(end, t)
    if abs(weight) < 0.5:
        return t.add_(O.mul(diff, as_scalar_for(weight, diff)))
    return t.copy_(O.sub(end, O.mul(diff, as_scalar_for(1 - weight, diff))))



def check_adam_args(lr, eps, betas, weight_decay):
    """PyTorch's checks (and messages) of the options Adam's relatives share."""
    check_tensor_lr(lr)
    if not 0.0 <= lr:
        raise TracegradValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise TracegradValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise TracegradValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise TracegradValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise TracegradValueError(f"Invalid weight_decay value: {weight_decay}")

def _check_adam_tensors(lr, betas, foreach, capturable):
    """Adam's own checks of tensor hyper-parameters, PyTorch's order and messages."""
    from .._tensor import Tensor
    if isinstance(lr, Tensor):
        if foreach and not capturable:
            raise TracegradValueError("lr as a Tensor is not supported for capturable=False "
                                      "and foreach=True")
        check_tensor_lr(lr)


def _check_adam_betas(betas, foreach, capturable):
    from .._tensor import Tensor
    if not (all(isinstance(b, float) for b in betas[:2])
            or all(isinstance(b, Tensor) for b in betas[:2])):
        raise TracegradValueError("betas must be either both floats or both Tensors")
    for i, b in enumerate(betas[:2]):
        if isinstance(b, Tensor):
            if not capturable and foreach:
                raise TracegradValueError(f"betas[{i}] as a Tensor is not supported for "
                                          "capturable=False and foreach=True")
            if b.numel() != 1:
                raise TracegradValueError(f"Tensor betas[{i}] must be 1-element")


class Adam(Optimizer):
    """`Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
    *, maximize=False, decoupled_weight_decay=False)`."""

    _runtime_keys = ("lr", "betas", "eps", "weight_decay")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check_adam_tensors(lr, betas, foreach, capturable)
        check_adam_args(lr, eps, betas, weight_decay)
        _check_adam_betas(betas, foreach, capturable)
        check_flags(capturable=capturable, differentiable=differentiable, fused=fused,
                    foreach=foreach)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    @grad_mode_of_step
    def step(self, closure=None):
        """One Adam update of every parameter that has a gradient."""
        loss = self._closure_loss(closure)
        direct = _fast.active()
        for group in self.param_groups:
            check_step_flags(self, group, self._state_of)
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                state = self._state_of(p, group)
                if not (direct and self._direct(p, g, group, state)):
                    self._update(p, group, state)
        return loss

    def _direct(self, p, g, group, state):
        """The update on numpy arrays (Note [Direct updates] in _fast.py); False: not done."""
        beta1, beta2 = group["betas"]
        return _fast.adam_update(p, g, state, group["lr"], beta1, beta2, group["eps"],
                                 group["weight_decay"], group["amsgrad"], group["maximize"],
                                 group["decoupled_weight_decay"])

    def _state_of(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = step_counter(group.get("fused"))
            state["exp_avg"] = O.zeros_like(p)
            state["exp_avg_sq"] = O.zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = O.zeros_like(p)
        return state

    def _update(self, p, group, state):
        # runtime values when compiled (a scheduler or the user may rewrite them per step)
        lr, eps, wd = hyper(group, "lr"), hyper(group, "eps"), hyper(group, "weight_decay")
        beta1, beta2 = group["betas"]        # (a pair, as eager unpacking checks)
        # runtime values when compiled: OneCycleLR rewrites beta1 every step
        beta1, beta2 = hyper(group, "betas", 0), hyper(group, "betas", 1)
        g = -p.grad if group["maximize"] else p.grad
        step_t = state["step"]
        # (weight decay's decisions on runtime values come before the first in-place
        # write, as in sgd.py; the step count's increment commutes with them)
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(as_scalar_for(1 - lr * wd, p))
            else:
                g = g.add(p, alpha=as_scalar_for(wd, p))
        step_t.add_(1)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        _lerp_(m, g, 1 - beta1)
        v.mul_(as_scalar_for(beta2, v)).add_(O.mul(O.mul(g, as_scalar_for(1 - beta2, g)), g))
        if isinstance(lr, Tensor):
            # compiled: the step count is a runtime value (its item() would be a guard
            # failing every call); float64 arithmetic, as eager's Python floats
            step = step_t.to(D.float64)
            step_size = lr / (1 - beta1 ** step)
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        else:
            step = step_t.item()
            step_size = lr / (1 - beta1 ** step)
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]
            vmax.copy_(O.maximum(vmax, v))
            v = vmax
        denom = O.div(O.sqrt(v), as_scalar_for(bias_correction2_sqrt, v))
        denom.add_(as_scalar_for(eps, v))
        p.add_(O.div(O.mul(m, as_scalar_for(-step_size, m)), denom))


class AdamW(Adam):
    """Adam with decoupled weight decay (default weight_decay=1e-2)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
