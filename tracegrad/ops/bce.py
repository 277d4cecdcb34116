"""Binary cross-entropy primitives: `binary_cross_entropy` over probabilities and
`binary_cross_entropy_with_logits` over logits (BinaryCrossEntropyBackward0,
BinaryCrossEntropyWithLogitsBackward0), each one node as in PyTorch.

Operands: input, target (same shape), weight (broadcast to input) or the Python number 1.0,
and for the logits version pos_weight (broadcast along the last dim) or 1.0; attribute
`reduction` ("none", "sum", "mean"). As in PyTorch:
- BCE is `-w * (t * log(x) + (1 - t) * log(1 - x))` with each log clamped to >= -100; its input
  gradient is `w * (x - t) / max(x * (1 - x), 1e-12)`;
- with logits, `l = (pw - 1) * t + 1` and the loss is `w * ((1 - t) * x + l * softplus(-x))`
  computed stably; its input gradient `w * (l * sigmoid(x) - l + 1 - t)`.
Input and target are differentiated (again differentiable: VJPs are tracegrad ops); weight and
pos_weight are not (nn.functional refuses them requiring grad, as PyTorch does).
"""
import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradRuntimeError, op_error
from . import elementwise as E
from . import shape_rules as SR
from .primitive import Primitive


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    return np.asarray(loss.sum() if reduction == "sum" else loss.mean(dtype=loss.dtype))


def _bce_kernel(x, t, w, reduction):
    if x.size and not ((x >= 0) & (x <= 1)).all():
        raise op_error(TracegradRuntimeError, "binary_cross_entropy",
                       "all elements of input should be between 0 and 1")
    with np.errstate(all="ignore"):
        lx = np.maximum(np.log(x), -100.0)
        l1x = np.maximum(np.log1p(-x), -100.0)
        loss = ((t - 1.0) * l1x - t * lx) * w
    return _reduce(loss.astype(x.dtype, copy=False), reduction)


def _grad_scale(g, n):
    """The incoming cotangent per element: g itself, or g / numel for 'mean'."""
    if n.attrs["reduction"] != "mean":
        return g
    size = 1
    for s in n.shapes[0]:
        size *= s
    return E.div(g, float(size))


def _bce_vjp(g, ins, out, n):
    x, t, w = ins
    gs = _grad_scale(g, n)
    if not isinstance(w, (int, float)):
        gs = E.mul(gs, w)
    dx = dt = None
    if n.needs[0]:
        denom = E.clamp(E.mul(x, E.rsub(x, 1.0)), min=1e-12)
        dx = E._st(E.mul(gs, E.div(E.sub(x, t), denom)), n.shapes[0])
    if n.needs[1]:
        logs = E.sub(E.clamp(E.log1p(E.neg(x)), min=-100.0), E.clamp(E.log(x), min=-100.0))
        dt = E._st(E.mul(gs, logs), n.shapes[1])
    return dx, dt, None


def _softplus_neg(x):
    """log(1 + exp(-x)), stable for every x."""
    return np.maximum(-x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def _logits_kernel(x, t, w, pw, reduction):
    with np.errstate(all="ignore"):
        lw = (pw - 1.0) * t + 1.0
        loss = ((1.0 - t) * x + lw * _softplus_neg(x)) * w
    return _reduce(np.asarray(loss).astype(x.dtype, copy=False), reduction)


def _logits_vjp(g, ins, out, n):
    x, t, w, pw = ins
    gs = _grad_scale(g, n)
    if not isinstance(w, (int, float)):
        gs = E.mul(gs, w)
    has_pw = not isinstance(pw, (int, float))
    dx = dt = None
    if n.needs[0]:
        if has_pw:                                    # l * sigmoid(x) - l + 1 - t
            lw = E.add(E.mul(E.sub(pw, 1.0), t), 1.0)
            d = E.sub(E.mul(E.sigmoid(x), lw), E.sub(lw, E.rsub(t, 1.0)))
        else:
            d = E.sub(E.sigmoid(x), t)
        dx = E._st(E.mul(gs, d), n.shapes[0])
    if n.needs[1]:
        d = E.neg(x)                                  # d loss / d t = -x + (pw - 1) * softplus(-x)
        if has_pw:
            sp = E.add(E.relu(d), E.log1p(E.exp(E.neg(E.abs(x)))))
            d = E.add(d, E.mul(E.sub(pw, 1.0), sp))
        dt = E._st(E.mul(gs, d), n.shapes[1])
    return dx, dt, None, None


def _shape(shapes, attrs):
    """The broadcast elementwise loss for reduction 'none', else a 0-d total."""
    return SR.broadcast(shapes, attrs) if attrs["reduction"] == "none" else ()


BCE = Primitive("binary_cross_entropy", _bce_kernel, vjp=_bce_vjp, saves=(0, 1, 2),
                grad_fn_name="BinaryCrossEntropyBackward0", shape_rule=_shape, may_raise=True)
BCE_LOGITS = Primitive("binary_cross_entropy_with_logits", _logits_kernel, vjp=_logits_vjp,
                       saves=(0, 1, 2, 3), grad_fn_name="BinaryCrossEntropyWithLogitsBackward0",
                       shape_rule=_shape)


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """The primitive (arguments checked by nn.functional)."""
    return dispatch(BCE, (input, target, 1.0 if weight is None else weight),
                    {"reduction": reduction})


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction="mean"):
    """The primitive (arguments checked by nn.functional)."""
    return dispatch(BCE_LOGITS, (input, target, 1.0 if weight is None else weight,
                                 1.0 if pos_weight is None else pos_weight),
                    {"reduction": reduction})
