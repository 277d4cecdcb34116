"""`SGD`: stochastic gradient descent with momentum, dampening, Nesterov and weight decay.

Per parameter, in PyTorch's order of operations (single-tensor path):
    g = -grad if maximize else grad
    g = g + weight_decay * p                      (if weight_decay)
    buf = g (first step) | momentum * buf + (1 - dampening) * g
    g = g + momentum * buf if nesterov else buf   (if momentum)
    p -= lr * g
"""
from .._errors import TracegradValueError
from .._effects import as_scalar_for, hyper
from . import _fast
from ..ops import elementwise as O
from .optimizer import (Optimizer, add_scaled_, check_flags, check_tensor_lr, check_step_flags,
                        grad_mode_of_step)


class SGD(Optimizer):
    """`SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
    *, maximize=False)`.

    >>> opt = SGD(model.parameters(), lr=0.1, momentum=0.9)     # doctest: +SKIP
    >>> loss.backward(); opt.step(); opt.zero_grad()              # doctest: +SKIP
    """

    _runtime_keys = ("lr", "momentum", "dampening", "weight_decay")
    _foreach_differentiable = True
    _differentiable_graph = True

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        check_tensor_lr(lr)
        if lr < 0.0:
            raise TracegradValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise TracegradValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise TracegradValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise TracegradValueError("Nesterov momentum requires a momentum and zero dampening")
        check_flags(differentiable=differentiable, fused=fused, foreach=foreach)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    @grad_mode_of_step
    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns the closure's loss."""
        loss = self._closure_loss(closure)
        direct = _fast.active()
        for group in self.param_groups:
            check_step_flags(self, group)
            for p in group["params"]:
                g = p.grad
                if g is not None and not (direct and self._direct(p, g, group)):
                    self._update(p, group)
        return loss

    def _direct(self, p, g, group):
        """The update on numpy arrays (Note [Direct updates] in _fast.py); False: not done."""
        # no state entry without momentum (PyTorch's state_dict has none either)
        state = self.state[p] if group["momentum"] != 0 else {}
        return _fast.sgd_update(p, g, state, group["lr"], group["momentum"],
                                group["dampening"], group["weight_decay"], group["nesterov"],
                                group["maximize"])

    def _update(self, p, group):
        # momentum, weight decay and dampening: runtime values when compiled, as lr
        # (OneCycleLR cycles momentum; a weight-decay schedule rewrites weight_decay)
        # (each used in one operation at most: numpy float32 values stay runtime values,
        # Note [Narrow numpy hyper-parameters] in _effects.py)
        momentum = hyper(group, "momentum", narrow=True)
        wd = hyper(group, "weight_decay", narrow=True)
        g = -p.grad if group["maximize"] else p.grad
        if wd != 0:
            g = g.add(p, alpha=as_scalar_for(wd, p))
        if momentum != 0:
            # Decisions on runtime values (`alpha != 1` inside `add(.., alpha=..)`) are
            # taken before the buffer is written, so a compiled step's chain of updates
            # to it stays unbroken and runs in the buffer itself (Note [Update chains]);
            # `x.add_(y, alpha=a)` is `x.add_(y * a)` for a != 1, so the math is eager's.
            unit = group["nesterov"] and momentum == 1
            state = self.state[p]
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = g.detach().clone()
                state["momentum_buffer"] = buf
            else:
                a = 1 - hyper(group, "dampening", narrow=True)
                damped = g if a == 1 else O.mul(g, as_scalar_for(a, g))
                buf.mul_(as_scalar_for(momentum, buf)).add_(damped)
            if group["nesterov"]:
                g = g.add(buf) if unit else g.add(O.mul(buf, as_scalar_for(momentum, buf)))
            else:
                g = buf
        add_scaled_(p, g, -hyper(group, "lr", narrow=True))   # lr: a runtime value when compiled
