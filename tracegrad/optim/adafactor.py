"""`Adafactor`, numerically following PyTorch's single-tensor (for-loop) path
(torch.optim.Adafactor, PyTorch 2.5+), whose lr and eps1 differ from the paper's.

State is made at the first step with a gradient, as PyTorch does: `step` (a 0-d float
tensor) and, for a gradient of two or more dims, the factored second moment `row_var`
(last dim 1) and `col_var` (second-to-last dim 1), else the full `variance`. Per
parameter, with t the step count, G the gradient (negated if maximize), n its numel:
    w = t ** beta2_decay                     (1 - beta2_t)
    rho = min(lr, 1 / sqrt(t));  alpha = max(eps2, ||p|| / sqrt(n)) * rho
    p *= 1 - lr * weight_decay               (if weight_decay)
    2+ dims: row_var = lerp(row_var, ||G||^2 over the last dim / its size, w); col_var
             likewise over dim -2; V = (row_var @ col_var) / max(mean(row_var, -2), eps1)
    else:    variance = lerp(variance, G * G, w);  V = variance
    U = G / sqrt(max(V, eps1 ** 2));  p -= alpha / max(1, ||U|| / (sqrt(n) * d)) * U
eps1 None means the parameter dtype's machine epsilon. In a compiled step every
hyper-parameter and the step count are runtime values (0-d float64), so the same program
serves every step and a scheduler never re-traces it.
"""
from .. import _dtype as D
from .. import ops as O
from .._effects import as_scalar_for, hyper
from .._errors import TracegradValueError
from .._settings import finfo
from .._tensor import Tensor
from .adam import _lerp_
from .optimizer import (Optimizer, check_tensor_lr, grad_mode_of_step, step_counter,
                        step_value)


def _lerp_any_(t, end, weight):
    """`t.lerp_(end, weight)` for a Python or a runtime (0-d tensor) weight: PyTorch's
    kernel picks its formula by |weight| < 0.5, a choice made per element here when the
    weight is a runtime value (a branch on it would be a guard failing as t grows)."""
    if not isinstance(weight, Tensor):
        return _lerp_(t, end, weight)
    diff = O.sub(end, t)
    w = as_scalar_for(weight, diff)
    low = O.add(t, O.mul(diff, w))
    high = O.sub(end, O.mul(diff, O.rsub(w, 1)))
    return t.copy_(O.where(O.lt(O.abs(w), 0.5), low, high))


def _maximum(a, b):
    """max of two scalars, Python numbers eagerly, 0-d tensors in a compiled step."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return O.maximum(O.as_tensor(a, dtype=D.float64), O.as_tensor(b, dtype=D.float64))
    return max(a, b)


def _minimum(a, b):
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return O.minimum(O.as_tensor(a, dtype=D.float64), O.as_tensor(b, dtype=D.float64))
    return min(a, b)


def _norm(t, runtime):
    """||t|| as eager reads it (`.item()`, a Python float) or, compiled, a 0-d float64."""
    n = O.norm(t)
    return n.to(D.float64) if runtime else n.item()


class Adafactor(Optimizer):
    """`Adafactor(params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
    weight_decay=0.0, *, foreach=None, maximize=False)`.

    >>> Adafactor([tracegrad.nn.Parameter(tracegrad.ones(2))]).defaults["eps"]
    (None, 0.001)
    """

    _runtime_keys = ("lr", "beta2_decay", "eps", "d", "weight_decay")

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        check_tensor_lr(lr)
        for ok, msg in ((0.0 <= lr, f"Learning rate should be >= 0 but is: {lr}"),
                        (0.0 >= beta2_decay, f"beta2_decay should be <= 0 but is: {beta2_decay}"),
                        (eps[0] is None or 0.0 <= eps[0],
                         f"epsilon1 should be >= 0 but is: {eps[0]}"),
                        (0.0 <= eps[1], f"epsilon2 should be >= 0 but is: {eps[1]}"),
                        (1.0 <= d, f"Clipping threshold d should be >= 1 but is: {d}"),
                        (0.0 <= weight_decay,
                         f"weight_decay should be >= 0 but is: {weight_decay}")):
            if not ok:
                raise TracegradValueError(msg)
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    @grad_mode_of_step
    def step(self, closure=None):
        """One Adafactor update of every parameter that has a gradient."""
        return self._update_each(closure)

    def _state_of(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = step_counter()
            g = p.grad
            if g.ndim > 1:
                state["row_var"] = O.zeros(tuple(g.shape[:-1]) + (1,), dtype=g.dtype)
                state["col_var"] = O.zeros(tuple(g.shape[:-2]) + (1, g.shape[-1]),
                                           dtype=g.dtype)
            else:
                state["variance"] = O.zeros_like(g)
        return state

    def _update(self, p, group, state):
        lr, beta2_decay = hyper(group, "lr"), hyper(group, "beta2_decay")
        d, wd = hyper(group, "d"), hyper(group, "weight_decay")
        eps1, eps2 = hyper(group, "eps", 0), hyper(group, "eps", 1)
        runtime = isinstance(lr, Tensor)
        g = -p.grad if group["maximize"] else p.grad
        if eps1 is None:
            eps1 = finfo(p.dtype).eps
        step_t = state["step"]
        step_t.add_(1)
        step = step_value(step_t, runtime)
        w = step ** beta2_decay
        rho = _minimum(lr, 1 / step ** 0.5)
        root_n = p.numel() ** 0.5
        alpha = _maximum(eps2, _norm(p, runtime) / root_n) * rho
        if wd != 0:
            p.mul_(as_scalar_for(1 - lr * wd, p))
        if g.ndim > 1:
            row, col = state["row_var"], state["col_var"]
            _lerp_any_(row, O.div(O.square(O.norm(g, dim=-1, keepdim=True)), g.shape[-1]), w)
            _lerp_any_(col, O.div(O.square(O.norm(g, dim=-2, keepdim=True)), g.shape[-2]), w)
            scale = O.mean(row, -2, keepdim=True)
            var = O.div(O.matmul(row, col), O.maximum(scale, as_scalar_for(eps1, scale)))
        else:
            _lerp_any_(state["variance"], O.mul(g, g), w)
            var = state["variance"]
        floor = eps1 * eps1
        update = O.mul(O.rsqrt(O.maximum(var, as_scalar_for(floor, var))), g)
        denom = _maximum(1.0, _norm(update, runtime) / (root_n * d))
        p.add_(O.mul(update, as_scalar_for(-alpha / denom, update)))
