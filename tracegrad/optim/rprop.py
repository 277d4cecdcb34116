"""`Rprop` (resilient backpropagation), following PyTorch's single-tensor (for-loop) path,
which is the path PyTorch takes for CPU tensors, operation by operation.

State per parameter: `step`, `prev` (the last gradient used) and `step_size` (filled with
lr when the state is made; lr is read nowhere else). Per parameter with a gradient:
    s = sign(g * prev) mapped to etaplus (> 0), etaminus (< 0), 1 (= 0)
    step_size = clamp(step_size * s, step_size_min, step_size_max)
    g = 0 where s == etaminus (a sign change skips this update)
    p -= sign(g) * step_size;  prev = g
etas and step_sizes are runtime values in a compiled step (`hyper`): the masks are `where`s.
"""
from .. import ops as O
from .._effects import as_scalar_for, hyper
from .._errors import TracegradValueError
from .._tensor import Tensor
from .optimizer import PerParameter, check_flags, check_tensor_lr, step_counter


class Rprop(PerParameter):
    """`Rprop(params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False,
    foreach=None, maximize=False, differentiable=False)`."""

    _runtime_keys = ("lr", "etas", "step_sizes")

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise TracegradValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise TracegradValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        check_flags(capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)


    def _state_of(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = step_counter()
            state["prev"] = O.zeros_like(p)
            state["step_size"] = O.full_like(p.grad, group["lr"])
        return state

    def _update(self, p, group, state):
        etaminus, etaplus = group["etas"]                 # (pairs, as eager unpacking checks)
        lo, hi = group["step_sizes"]
        etaminus, etaplus = hyper(group, "etas", 0), hyper(group, "etas", 1)
        lo, hi = hyper(group, "step_sizes", 0), hyper(group, "step_sizes", 1)
        g = -p.grad if group["maximize"] else p.grad
        prev, step_size = state["prev"], state["step_size"]
        state["step"].add_(1)
        sign = O.sign(O.mul(g, prev))
        minus = as_scalar_for(etaminus, sign)
        sign = O.where(O.gt(sign, 0), as_scalar_for(etaplus, sign), sign)
        sign = O.where(O.lt(sign, 0), minus, sign)
        sign = O.where(O.eq(sign, 0), 1.0, sign)
        step_size.mul_(sign)
        if isinstance(lo, Tensor) or isinstance(hi, Tensor):      # compiled: runtime bounds
            step_size.copy_(O.minimum(O.maximum(step_size, as_scalar_for(lo, step_size)),
                                      as_scalar_for(hi, step_size)))
        else:
            step_size.clamp_(lo, hi)
        g = O.where(O.eq(sign, minus), 0.0, g)
        p.add_(O.mul(O.mul(O.sign(g), -1.0), step_size))
        prev.copy_(g)
