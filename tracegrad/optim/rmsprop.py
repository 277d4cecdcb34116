"""`RMSprop`, numerically following PyTorch's single-tensor (for-loop) path, which is the
path PyTorch takes for CPU tensors.

Per parameter, with the step count a 0-d float tensor in the state, as in PyTorch:
    g = -grad if maximize else grad
    g = g + weight_decay * p                       (if weight_decay)
    v = alpha * v + (1 - alpha) * g * g            (square_avg)
    m = lerp(m, g, 1 - alpha); d = sqrt(v - m * m) (centered; else d = sqrt(v))
    d = d + eps
    buf = momentum * buf + g / d; p -= lr * buf    (if momentum > 0)
    p += (-lr * g) / d                             (otherwise)
Every option a scheduler may rewrite is a runtime value in a compiled step (`hyper`).
"""
from .. import ops as O
from .._effects import as_scalar_for, hyper
from .._errors import TracegradValueError
from .adam import _lerp_
from .optimizer import PerParameter, check_flags, check_tensor_lr, step_counter, add_scaled_


class RMSprop(PerParameter):
    """`RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
    centered=False, *, maximize=False)`."""

    _runtime_keys = ("lr", "alpha", "eps", "weight_decay", "momentum")

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        check_tensor_lr(lr)
        for name, v, what in (("lr", lr, "learning rate"), ("eps", eps, "epsilon value"),
                              ("momentum", momentum, "momentum value"),
                              ("weight_decay", weight_decay, "weight_decay value"),
                              ("alpha", alpha, "alpha value")):
            if not 0.0 <= v:
                raise TracegradValueError(f"Invalid {what}: {v}")
        check_flags(capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)


    def _state_of(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = step_counter()
            state["square_avg"] = O.zeros_like(p)
            if group["momentum"] > 0:
                state["momentum_buffer"] = O.zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = O.zeros_like(p)
        return state

    def _update(self, p, group, state):
        # (each used in one operation at most: numpy float32 values stay runtime values,
        # Note [Narrow numpy hyper-parameters] in _effects.py)
        lr, alpha, eps = (hyper(group, k, narrow=True) for k in ("lr", "alpha", "eps"))
        wd, momentum = (hyper(group, k, narrow=True) for k in ("weight_decay", "momentum"))
        g = -p.grad if group["maximize"] else p.grad
        # (decisions on runtime values before the first in-place write, as in sgd.py)
        if wd != 0:
            g = g.add(p, alpha=as_scalar_for(wd, p))
        use_momentum = momentum > 0
        state["step"].add_(1)
        v = state["square_avg"]
        v.mul_(as_scalar_for(alpha, v)).add_(O.mul(O.mul(g, as_scalar_for(1 - alpha, g)), g))
        if group["centered"]:
            m = state["grad_avg"]
            _lerp_(m, g, 1 - alpha)
            avg = O.sqrt(O.add(v, O.mul(O.mul(m, -1.0), m)))
        else:
            avg = O.sqrt(v)
        avg.add_(as_scalar_for(eps, avg))
        if use_momentum:
            buf = state["momentum_buffer"]
            buf.mul_(as_scalar_for(momentum, buf)).add_(O.div(g, avg))
            add_scaled_(p, buf, -lr)
        else:
            p.add_(O.div(O.mul(g, as_scalar_for(-lr, g)), avg))
