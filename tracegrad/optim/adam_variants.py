"""`NAdam`, `RAdam` and `Adamax`: Adam's relatives, following PyTorch's single-tensor
(for-loop) path, the one it takes for CPU tensors, operation by operation.

Per parameter, with t the step count (a 0-d float tensor in the state) and g the gradient
(negated when maximizing; plus weight_decay * p unless the decay is decoupled, which
instead scales p by 1 - lr * weight_decay first):
    NAdam   mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay));  mu_product *= mu_t
            m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
            d = sqrt(v / (1 - beta2**t)) + eps
            p += -lr (1 - mu_t) / (1 - mu_product) * g / d
            p += -lr mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / d
    RAdam   m, v as Adam; rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
            p -= m / (1 - beta1**t) * lr * (sqrt(1 - beta2**t) / (sqrt(v) + eps)) * rect
            when rho_t > 5 (rect the variance rectification term), else p -= m_hat * lr
    Adamax  m = lerp(m, g, 1 - beta1);  u = max(beta2 * u, |g| + eps)
            p += -(lr / (1 - beta1**t)) * m / u
Inside `tracegrad.compile` every hyper-parameter is a runtime value (`_effects.hyper`) and
so is the step count (`step_value`), so a scheduler never re-traces the step; RAdam's
`rho_t > 5` is then a `where` on the two updates (both computed as eager computes the
one it takes), not a guard failing once the warm-up ends.
"""
from .. import ops as O
from .._effects import as_scalar_for, hyper
from .._errors import TracegradValueError
from .._tensor import Tensor
from .adam import _lerp_, check_adam_args
from .optimizer import PerParameter, check_flags, step_value


class _Moments(PerParameter):
    """Shared step loop, state, hyper-parameter reads and weight decay of the three."""

    _runtime_keys = ("lr", "betas", "eps", "weight_decay")
    _scalars = ()                          # (name, initial value) of 0-d state, first
    _moments = ("exp_avg", "exp_avg_sq")   # zero tensors like the parameter

    def _hypers(self, group):
        lr, eps, wd = hyper(group, "lr"), hyper(group, "eps"), hyper(group, "weight_decay")
        beta1, beta2 = group["betas"]        # (a pair, as eager unpacking checks)
        return lr, eps, wd, hyper(group, "betas", 0), hyper(group, "betas", 1)

    @staticmethod
    def _decay(p, g, lr, wd, decoupled):
        """Weight decay, PyTorch's way; returns the gradient to use."""
        if wd != 0:
            if decoupled:
                p.mul_(as_scalar_for(1 - lr * wd, p))
            else:
                g = g.add(p, alpha=as_scalar_for(wd, p))
        return g


class NAdam(_Moments):
    """`NAdam(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None, maximize=False,
    capturable=False, differentiable=False)`."""

    _scalars = (("mu_product", 1.0),)

    _runtime_keys = _Moments._runtime_keys + ("momentum_decay",)
    _capturable_what = "params, mu_products and state_steps"
    _capturable_what_foreach = "params, mu_products, and state_steps"

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        check_adam_args(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise TracegradValueError(f"Invalid momentum_decay value: {momentum_decay}")
        check_flags(capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, p, group, state):
        lr, eps, wd, beta1, beta2 = self._hypers(group)
        momentum_decay = hyper(group, "momentum_decay")
        runtime = isinstance(lr, Tensor)
        g = -p.grad if group["maximize"] else p.grad
        step_t, mu_product = state["step"], state["mu_product"]
        # (decisions on runtime values before the first in-place write, as in sgd.py; the
        # step count's increment commutes with them)
        g = self._decay(p, g, lr, wd, group["decoupled_weight_decay"])
        step_t.add_(1)
        step = step_value(step_t, runtime)
        bias_correction2 = 1 - beta2 ** step
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        mu_product.mul_(as_scalar_for(mu, mu_product))
        m, v = state["exp_avg"], state["exp_avg_sq"]
        _lerp_(m, g, 1 - beta1)
        v.mul_(as_scalar_for(beta2, v)).add_(O.mul(O.mul(g, as_scalar_for(1 - beta2, g)), g))
        denom = O.sqrt(O.div(v, as_scalar_for(bias_correction2, v)))
        prod = step_value(mu_product, runtime)
        prod_next = prod * mu_next
        denom.add_(as_scalar_for(eps, denom))
        c1 = -lr * (1.0 - mu) / (1.0 - prod)
        c2 = (-lr * mu_next) / (1.0 - prod_next)
        p.add_(O.div(O.mul(g, as_scalar_for(c1, g)), denom))
        p.add_(O.div(O.mul(m, as_scalar_for(c2, m)), denom))


class RAdam(_Moments):
    """`RAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
    differentiable=False)`."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        check_adam_args(lr, eps, betas, weight_decay)
        check_flags(capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, p, group, state):
        lr, eps, wd, beta1, beta2 = self._hypers(group)
        runtime = isinstance(lr, Tensor)
        g = -p.grad if group["maximize"] else p.grad
        step_t = state["step"]
        g = self._decay(p, g, lr, wd, group["decoupled_weight_decay"])
        step_t.add_(1)
        step = step_value(step_t, runtime)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        _lerp_(m, g, 1 - beta1)
        v.mul_(as_scalar_for(beta2, v)).add_(O.mul(O.mul(g, as_scalar_for(1 - beta2, g)), g))
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        m_hat = O.div(m, as_scalar_for(bias_correction1, m))
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        plain = O.mul(m_hat, as_scalar_for(lr, m_hat))
        if not runtime:
            if rho_t > 5.0:
                rect = _rect(rho_t, rho_inf)
                plain = O.mul(O.mul(plain, _adaptive_lr(v, eps, bias_correction2)), rect)
            p.add_(plain, alpha=-1.0)
            return
        # compiled: both updates, selected by the runtime condition (no guard); the
        # rectification's operand is 1 where it is not taken (its root would be NaN)
        rectified = O.gt(rho_t, 5.0)
        ratio = O.where(rectified, _rect_ratio(rho_t, rho_inf), 1.0)
        rect = ratio ** 0.5
        upd = O.mul(O.mul(plain, _adaptive_lr(v, as_scalar_for(eps, v),
                                              bias_correction2)), as_scalar_for(rect, plain))
        p.add_(O.where(rectified, upd, plain), alpha=-1.0)


def _rect_ratio(rho_t, rho_inf):
    return (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)


def _rect(rho_t, rho_inf):
    return _rect_ratio(rho_t, rho_inf) ** 0.5


def _adaptive_lr(v, eps, bias_correction2):
    """sqrt(1 - beta2**t) / (sqrt(v) + eps), as PyTorch evaluates it."""
    root = O.sqrt(v)
    root.add_(as_scalar_for(eps, root))
    return O.div(as_scalar_for(bias_correction2 ** 0.5, root), root)


class Adamax(_Moments):
    """`Adamax(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None,
    *, maximize=False, differentiable=False, capturable=False)`."""

    _moments = ("exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        check_adam_args(lr, eps, betas, weight_decay)
        check_flags(capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _update(self, p, group, state):
        lr, eps, wd, beta1, beta2 = self._hypers(group)
        g = -p.grad if group["maximize"] else p.grad
        step_t = state["step"]
        g = self._decay(p, g, lr, wd, False)
        step_t.add_(1)
        m, u = state["exp_avg"], state["exp_inf"]
        _lerp_(m, g, 1 - beta1)
        u.mul_(as_scalar_for(beta2, u))
        bound = O.abs(g)
        bound.add_(as_scalar_for(eps, bound))
        u.copy_(O.maximum(u, bound))
        clr = lr / (1 - beta1 ** step_value(step_t, isinstance(lr, Tensor)))
        p.add_(O.div(O.mul(m, as_scalar_for(-clr, m)), u))
