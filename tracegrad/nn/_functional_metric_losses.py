"""Distance and metric-learning losses of `nn.functional`: `pairwise_distance`,
`triplet_margin_loss`, `margin_ranking_loss`, `cosine_embedding_loss`,
`hinge_embedding_loss`, `soft_margin_loss`, `poisson_nll_loss`, `gaussian_nll_loss`, with
PyTorch's formulas, defaults, reductions and checks, composed of tracegrad ops.
"""
import math

from .. import ops as O
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from ._losses import _reduce, _reduction

__all__ = ["pairwise_distance", "triplet_margin_loss", "margin_ranking_loss",
           "cosine_embedding_loss", "hinge_embedding_loss", "soft_margin_loss",
           "poisson_nll_loss", "gaussian_nll_loss"]


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """`||x1 - x2 + eps||_p` over the last dim (PyTorch adds `eps` to the difference)."""
    dim = -1 if max(x1.ndim, x2.ndim) > 0 else 0
    d = O.add(O.sub(x1, x2), eps)
    if d.ndim == 0:
        return O.abs(d)
    return O.norm(d, p, dim, keepdim=keepdim)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """`max(d(a, p) - d(a, n) + margin, 0)`, with `d(p, n)` in place of `d(a, n)` where it is
    smaller when `swap`."""
    reduction = _reduction(reduction, size_average, reduce)
    dims = {anchor.ndim, positive.ndim, negative.ndim}
    if len(dims) != 1:
        raise op_error(TracegradRuntimeError, "triplet_margin_loss", "The anchor, positive, "
                       "and negative tensors are expected to have the same number of "
                       f"dimensions, but got: anchor {anchor.ndim}D, positive "
                       f"{positive.ndim}D, and negative {negative.ndim}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = O.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(O.clamp(O.add(O.sub(d_pos, d_neg), margin), min=0.0), reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """`max(0, -target * (input1 - input2) + margin)`."""
    reduction = _reduction(reduction, size_average, reduce)
    if not (input1.ndim == input2.ndim == target.ndim):
        raise op_error(TracegradRuntimeError, "margin_ranking_loss", "margin_ranking_loss : "
                       "All input tensors should have same dimension but got sizes: input1: "
                       f"{input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    loss = O.clamp(O.add(O.mul(O.neg(target), O.sub(input1, input2)), margin), min=0.0)
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """`1 - cos(x1, x2)` where `target == 1`, `max(0, cos(x1, x2) - margin)` where -1.

    PyTorch's own formula: the cosine over the last dim with `eps = 1e-12` added to each
    squared norm (not `cosine_similarity`'s clamp)."""
    reduction = _reduction(reduction, size_average, reduce)
    eps = 1e-12
    dim = input1.ndim - 1
    prod = O.sum(O.mul(input1, input2), dim)
    m1 = O.add(O.sum(O.mul(input1, input1), dim), eps)
    m2 = O.add(O.sum(O.mul(input2, input2), dim), eps)
    cos = O.div(prod, O.sqrt(O.mul(m1, m2)))
    pos = O.rsub(cos, 1.0)
    neg = O.clamp(O.sub(cos, margin), min=0.0)
    zeros = O.zeros_like(cos)
    loss = O.add(O.where(O.eq(target, 1), pos, zeros), O.where(O.eq(target, -1), neg, zeros))
    return _reduce(loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """`x` where `target == 1`, `max(0, margin - x)` where `target == -1` (summed, as
    PyTorch's, where the target is neither)."""
    reduction = _reduction(reduction, size_average, reduce)
    zeros = O.zeros_like(input)
    margin_clamp = O.clamp(O.rsub(input, margin), min=0.0)
    out_margin = O.where(O.ne(target, 1), margin_clamp, zeros)
    out_self = O.where(O.ne(target, -1), input, zeros)
    return _reduce(O.add(out_margin, out_self), reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """`log(1 + exp(-target * input))`."""
    reduction = _reduction(reduction, size_average, reduce)
    return _reduce(O.log1p(O.exp(O.mul(O.neg(target), input))), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """`exp(x) - target * x` (log_input) or `x - target * log(x + eps)`, plus Stirling's term
    `t log t - t + log(2 pi t) / 2` where `target > 1` when `full`."""
    reduction = _reduction(reduction, size_average, reduce)
    if log_input:
        loss = O.sub(O.exp(input), O.mul(target, input))
    else:
        loss = O.sub(input, O.mul(target, O.log(O.add(input, eps))))
    if full:
        t = target
        safe = O.where(O.gt(t, 1), t, O.ones_like(t))
        stirling = O.add(O.sub(O.mul(safe, O.log(safe)), safe),
                         O.mul(O.log(O.mul(safe, 2 * math.pi)), 0.5))
        loss = O.add(loss, O.where(O.gt(t, 1), stirling, O.zeros_like(stirling)))
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """`(log(max(var, eps)) + (input - target)^2 / max(var, eps)) / 2` (+ `log(2 pi) / 2`
    when `full`); `var` may miss the last dim or have it of size 1 (homoscedastic). As in
    PyTorch (an in-place clamp under no_grad), the clamp passes the gradient straight
    through: it is the gradient at the clamped value."""
    if isinstance(var, (int, float)):
        var = O.full_like(input, float(var))
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = O.unsqueeze(var, -1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise TracegradValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise TracegradValueError(reduction + " is not valid")
    if bool(O.any(O.lt(var, 0))):
        raise TracegradValueError("var has negative entry/entries")
    with_floor = O.clamp(var, min=eps).detach()
    v = O.add(var, O.sub(with_floor, var.detach()))
    loss = O.mul(O.add(O.log(v), O.div(O.square(O.sub(input, target)), v)), 0.5)
    if full:
        loss = O.add(loss, 0.5 * math.log(2 * math.pi))
    return _reduce(loss, reduction)
