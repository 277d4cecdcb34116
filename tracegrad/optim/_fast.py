"""Eager optimizer updates computed directly on the tensors' numpy arrays.

Note [Direct updates]
An optimizer step runs under no_grad and only overwrites parameters and state in place, so
dispatching each arithmetic op (a dozen per parameter for Adam) buys nothing but cost. When
no trace is active, `sgd_update` / `adam_update` instead run the same numpy operations, in
the same order, with the same scalar operands (`_dispatch._scalar`, Note [Scalar operands])
as the op-by-op updates in `sgd.py` / `adam.py`, so results are identical bit for bit; each
in-place write bumps the written tensor's version counter once, as the in-place op would.
They return False, leaving the update to the op-by-op path, whenever that path could behave
differently: a tracer is recording (a compiled step must see every op), a hyper-parameter is
not a Python number, or a tensor involved is an inference tensor, read-only, not floating
point, or differs from its parameter in dtype or shape (the ops' promotion, broadcasting and
error messages then apply).
"""
import numpy as np

from .. import _mode
from .._dispatch import _scalar, note_write, trace_hook
from .._tensor import Tensor
from ..ops.elementwise import _quiet

_FLOATS = frozenset(np.dtype(t) for t in (np.float32, np.float64))


def active():
    """True when direct updates may run: eager, no trace being recorded, gradients not
    recorded (a `differentiable=True` step records the ops of its update)."""
    return trace_hook.get() is None and not _mode.is_grad_enabled()


def _plain(p, *others):
    """All of `p`, `others` are plain writable float tensors of p's dtype and shape."""
    d = p._data
    if d.dtype not in _FLOATS or p._inference or not d.flags.writeable:
        return False
    for t in others:
        if t is None:
            continue
        if type(t) is not Tensor and not isinstance(t, Tensor):
            return False
        e = t._data
        if e.dtype is not d.dtype and e.dtype != d.dtype or e.shape != d.shape or t._inference:
            return False
    return True


def _numbers(*xs):
    """Every hyper-parameter is a plain Python number (a tensor learning rate, say, takes
    the op-by-op path, whose promotion rules then apply)."""
    for x in xs:
        if type(x) is not float and type(x) is not int:
            return False
    return True


def _bump(t):
    t._vc.v += 1
    note_write(t._data)


def _axpy_(y, x, alpha, dt):
    """`y.add_(x, alpha=alpha)` as tracegrad computes it: `y += x * alpha` (alpha != 1)."""
    if alpha == 1:
        np.add(y, x, out=y)
    else:
        np.add(y, np.multiply(x, _scalar(alpha, dt)), out=y)


@_quiet        # inf/nan gradients give inf/nan parameters silently, as the ops (and PyTorch) do
def sgd_update(p, g, state, lr, momentum, dampening, weight_decay, nesterov, maximize):
    """One SGD update of `p` with gradient tensor `g` (sgd.py's op order); False: not done."""
    if not _numbers(lr, momentum, dampening, weight_decay):
        return False
    buf = state.get("momentum_buffer") if momentum != 0 else None
    if not _plain(p, g, buf) or buf is not None and not buf._data.flags.writeable:
        return False
    pd, dt = p._data, p._data.dtype
    gd = g._data
    if maximize:
        gd = np.negative(gd)
    if weight_decay != 0:
        gd = np.add(gd, np.multiply(pd, _scalar(weight_decay, dt)))
    if momentum != 0:
        if buf is None:
            buf = Tensor._wrap(np.array(gd))     # a copy (0-d results are scalars)
            state["momentum_buffer"] = buf
        else:
            bd = buf._data
            np.multiply(bd, _scalar(momentum, dt), out=bd)
            _bump(buf)
            _axpy_(bd, gd, 1 - dampening, dt)
            _bump(buf)
        bd = buf._data
        gd = np.add(gd, np.multiply(bd, _scalar(momentum, dt))) if nesterov else bd
    _axpy_(pd, gd, -lr, dt)
    _bump(p)
    return True


@_quiet
def adam_update(p, g, state, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize,
                decoupled):
    """One Adam/AdamW update (adam.py's op order); False: not done (state untouched)."""
    if not _numbers(lr, beta1, beta2, eps, weight_decay):
        return False
    step_t, m, v = state.get("step"), state.get("exp_avg"), state.get("exp_avg_sq")
    vmax = state.get("max_exp_avg_sq") if amsgrad else None
    if (not _plain(p, g, m, v, vmax) or not isinstance(step_t, Tensor) or step_t._inference
            or step_t._data.shape != () or step_t._data.dtype not in _FLOATS
            or any(not t._data.flags.writeable for t in (m, v, step_t))
            or amsgrad and (vmax is None or not vmax._data.flags.writeable)):
        return False
    pd, dt = p._data, p._data.dtype
    gd = np.negative(g._data) if maximize else g._data
    sd = step_t._data
    np.add(sd, _scalar(1, sd.dtype), out=sd)
    _bump(step_t)
    if weight_decay != 0:
        if decoupled:
            np.multiply(pd, _scalar(1 - lr * weight_decay, dt), out=pd)
            _bump(p)
        else:
            gd = np.add(gd, np.multiply(pd, _scalar(weight_decay, dt)))
    md, vd = m._data, v._data
    _lerp_(md, gd, 1 - beta1, dt)
    _bump(m)
    np.multiply(vd, _scalar(beta2, dt), out=vd)
    _bump(v)
    np.add(vd, np.multiply(np.multiply(gd, _scalar(1 - beta2, dt)), gd), out=vd)
    _bump(v)
    step = sd.item()
    step_size = lr / (1 - beta1 ** step)
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    if amsgrad:
        np.maximum(vmax._data, vd, out=vmax._data)
        _bump(vmax)
        vd = vmax._data
    denom = np.true_divide(np.sqrt(vd), _scalar(bias_correction2_sqrt, dt))
    denom = np.add(denom, _scalar(eps, dt))
    np.add(pd, np.true_divide(np.multiply(md, _scalar(-step_size, dt)), denom), out=pd)
    _bump(p)
    return True


def _lerp_(t, end, weight, dt):
    """adam.py's `_lerp_` (PyTorch's lerp kernel) on arrays, in place on `t`."""
    if abs(weight) < 0.5:
        np.add(t, np.multiply(np.subtract(end, t), _scalar(weight, dt)), out=t)
    else:
        np.copyto(t, np.subtract(end, np.multiply(np.subtract(end, t), _scalar(1 - weight, dt))))
