"""`Adadelta`, following PyTorch's single-tensor (for-loop) path, which is the path PyTorch
takes for CPU tensors, operation by operation.

Per parameter, with the step count a 0-d float tensor in the state, as in PyTorch:
    g = -grad if maximize else grad;  g = g + weight_decay * p     (if weight_decay)
    v = rho * v + (1 - rho) * g * g                               (square_avg)
    delta = sqrt(u + eps) / sqrt(v + eps) * g                     (u: acc_delta)
    u = rho * u + (1 - rho) * delta * delta
    p -= lr * delta
lr, rho, eps and weight_decay are runtime values in a compiled step (`hyper`).
"""
from .. import ops as O
from .._effects import as_scalar_for, hyper
from .._errors import TracegradValueError
from .optimizer import PerParameter, check_flags, check_tensor_lr, add_scaled_


class Adadelta(PerParameter):
    """`Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
    capturable=False, maximize=False, differentiable=False)`."""

    _runtime_keys = ("lr", "rho", "eps", "weight_decay")
    _moments = ("square_avg", "acc_delta")

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise TracegradValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise TracegradValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise TracegradValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise TracegradValueError(f"Invalid weight_decay value: {weight_decay}")
        check_flags(capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)



    def _update(self, p, group, state):
        # (each used in one operation at most but rho: Note [Narrow numpy hyper-parameters])
        lr, rho = hyper(group, "lr"), hyper(group, "rho")
        eps, wd = hyper(group, "eps"), hyper(group, "weight_decay")
        g = -p.grad if group["maximize"] else p.grad
        # (decisions on runtime values before the first in-place write, as in sgd.py)
        if wd != 0:
            g = g.add(p, alpha=as_scalar_for(wd, p))
        state["step"].add_(1)
        v, u = state["square_avg"], state["acc_delta"]
        v.mul_(as_scalar_for(rho, v)).add_(O.mul(O.mul(g, as_scalar_for(1 - rho, g)), g))
        std = O.sqrt(O.add(v, as_scalar_for(eps, v)))
        delta = O.sqrt(O.add(u, as_scalar_for(eps, u)))
        delta.div_(std).mul_(g)
        u.mul_(as_scalar_for(rho, u)).add_(
            O.mul(O.mul(delta, as_scalar_for(1 - rho, delta)), delta))
        add_scaled_(p, delta, -lr)
