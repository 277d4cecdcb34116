"""Elementwise regression losses of `nn.functional`: `l1_loss`, `smooth_l1_loss`,
`huber_loss` (PyTorch's formulas, reductions and checks).

Each is composed of tracegrad ops (`abs`, `where`, ...), so it traces and differentiates
with no new primitive; the values and gradients are PyTorch's (`where` picks the branch
PyTorch's kernel takes, `|d| < beta` quadratic, else linear), though the printed grad_fn
names are the composing ops' (`MeanBackward0` as PyTorch's l1_loss, but `WhereBackward0`
where PyTorch prints `SmoothL1LossBackward0` / `HuberLossBackward0`).
"""
import warnings

from .. import ops as O
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from ._losses import _reduce, _reduction

__all__ = ["l1_loss", "smooth_l1_loss", "huber_loss"]


def _diff(input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input "
                      f"size ({input.shape}). This will likely lead to incorrect results due "
                      "to broadcasting. Please ensure they have the same size.", stacklevel=3)
    return O.sub(input, target)


def _weighted(loss, weight, input, reduction, mean_by_weight):
    if tuple(weight.shape) != tuple(input.shape):
        raise TracegradValueError("Weights and input must have the same size.")
    loss = O.mul(loss, weight)
    if reduction == "mean" and mean_by_weight:
        return O.div(O.sum(loss), O.sum(weight))
    return _reduce(loss, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error `|input - target|`, reduced by `reduction` ('mean' with a
    `weight` divides by the summed weights, as PyTorch does)."""
    reduction = _reduction(reduction, size_average, reduce)
    loss = O.abs(_diff(input, target))
    if weight is not None:
        return _weighted(loss, weight, input, reduction, True)
    return _reduce(loss, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean",
                   beta=1.0):
    """`0.5 * d**2 / beta` where `|d| < beta`, else `|d| - 0.5 * beta` (l1_loss for
    beta=0)."""
    reduction = _reduction(reduction, size_average, reduce)
    if beta < 0:
        raise op_error(TracegradRuntimeError, "smooth_l1_loss",
                       "smooth_l1_loss does not support negative values for beta.")
    d = _diff(input, target)
    a = O.abs(d)
    if beta == 0.0:
        return _reduce(a, reduction)
    loss = O.where(O.lt(a, beta), O.div(O.mul(O.mul(d, d), 0.5), beta), O.sub(a, 0.5 * beta))
    return _reduce(loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """`0.5 * d**2` where `|d| < delta`, else `delta * (|d| - 0.5 * delta)`."""
    reduction = _reduction(reduction)
    if delta <= 0:
        raise op_error(TracegradRuntimeError, "huber_loss",
                       "huber_loss does not support non-positive values for delta.")
    d = _diff(input, target)
    a = O.abs(d)
    loss = O.where(O.lt(a, delta), O.mul(O.mul(d, d), 0.5),
                   O.mul(O.sub(a, 0.5 * delta), delta))
    if weight is not None:
        return _weighted(loss, weight, input, reduction, False)
    return _reduce(loss, reduction)
