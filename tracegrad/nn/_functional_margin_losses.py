"""Multi-class and multi-label margin losses (`F.multi_margin_loss`,
`F.multilabel_margin_loss`, `F.multilabel_soft_margin_loss`) and
`F.triplet_margin_with_distance_loss`, with PyTorch's formulas, reductions and checks.

Composites of tracegrad ops. Target checks that depend on target values (a class out of
range) read them; compiled, they are guards on the check's outcome (as in `one_hot`).
"""
from .. import _dtype as D
from .. import ops as O
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from ._functional_metric_losses import pairwise_distance
from ._losses import _reduce, _reduction


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """Per sample: `sum_{i != y} max(0, margin - x[y] + x[i]) ** p * weight[y] / C`
    (p is 1 or 2), for input (N, C) or (C,) and class targets (N,) or ()."""
    reduction = _reduction(reduction, size_average, reduce)
    if p not in (1, 2):
        raise TracegradValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise TracegradValueError("weight must be one-dimensional")
    unbatched = input.ndim <= 1
    x = O.reshape(input, (1, -1)) if unbatched else input
    n, c = x.shape
    if input.ndim > 2 or target.ndim > 1 or target.numel() != n:
        raise op_error(TracegradRuntimeError, "multi_margin_loss",
                       "multi_margin_loss: target tensor should be 1-D with size equal to the "
                       "number of input samples (batch size). Expected target size "
                       f"[{n}], but got {list(target.shape)}. Input has shape "
                       f"{list(input.shape)}.")
    t = O.reshape(target, (n,))
    if n and bool(O.logical_or(O.lt(O.amin(t), 0), O.ge(O.amax(t), c))):
        raise op_error(TracegradRuntimeError, "multi_margin_loss", "target out of range")
    t1 = O.unsqueeze(t, 1)
    x_y = O.gather(x, 1, t1)                                            # (N, 1)
    z = O.clamp(O.add(O.sub(x, x_y), float(margin)), min=0.0)
    if p == 2:
        z = O.mul(z, z)
    z = O.where(O.eq(O.unsqueeze(O.arange(c), 0), t1), O.zeros_like(z), z)    # i != y
    if weight is not None:
        z = O.mul(z, O.unsqueeze(weight[t], 1))
    loss = O.div(O.sum(z, 1), float(c))
    if unbatched:
        loss = O.reshape(loss, ())
    return _reduce(loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample: `sum_{j in targets} sum_{i not in targets} max(0, 1 - (x[j] - x[i])) / C`,
    where the targets are the class indices of `target` before its first -1."""
    reduction = _reduction(reduction, size_average, reduce)
    unbatched = input.ndim <= 1
    x = O.reshape(input, (1, -1)) if unbatched else input
    if input.ndim > 2 or tuple(target.shape) != tuple(input.shape):
        raise op_error(TracegradRuntimeError, "multilabel_margin_loss",
                       f"inconsistent target size: {list(target.shape)} for input of size: "
                       f"{list(input.shape)}")
    n, c = x.shape
    t = O.reshape(target, (n, c))
    valid = O.cumprod(O.ne(t, -1).to(D.int64), 1)                       # before the first -1
    if t.numel() and bool(O.any(O.logical_and(O.eq(valid, 1),
                                              O.logical_or(O.lt(t, 0), O.ge(t, c))))):
        raise op_error(TracegradRuntimeError, "multilabel_margin_loss",
                       "argument #2 'target' is out of range")
    classes = O.reshape(O.arange(c), (1, 1, c))
    hits = O.logical_and(O.eq(O.unsqueeze(t, 2), classes), O.unsqueeze(O.eq(valid, 1), 2))
    count = O.sum(hits.to(x.dtype), 1)                                  # (N, C) per class
    is_target = O.gt(count, 0.0)
    # hinge[n, j, i] = max(0, 1 - (x[j] - x[i]))
    hinge = O.clamp(O.add(O.sub(O.unsqueeze(x, 1), O.unsqueeze(x, 2)), 1.0), min=0.0)
    mask = O.mul(O.unsqueeze(count, 2), O.unsqueeze(O.logical_not(is_target).to(x.dtype), 1))
    loss = O.div(O.sum(O.mul(hinge, mask), (1, 2)), float(c))
    if unbatched:
        loss = O.reshape(loss, ())
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Per sample: `-mean_c weight[c] * (y log sigmoid(x) + (1 - y) log sigmoid(-x))`."""
    reduction = _reduction(reduction, size_average, reduce)
    loss = O.neg(O.add(O.mul(target, _logsigmoid(input)),
                       O.mul(O.rsub(target, 1.0),
                             _logsigmoid(O.neg(input)))))
    if weight is not None:
        loss = O.mul(loss, weight)
    loss = O.mean(loss, input.ndim - 1)
    return _reduce(loss, reduction)


def _logsigmoid(x):
    from ._functional_activations import logsigmoid
    return logsigmoid(x)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """`max(d(a, p) - d(a, n) + margin, 0)` for any distance `d` (default
    `pairwise_distance`); with `swap`, `min(d(a, n), d(p, n))` as the negative distance."""
    if reduction not in ("none", "mean", "sum"):
        raise TracegradValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise TracegradValueError(f"margin must be greater than 0, got {margin}")
    dims = {anchor.ndim, positive.ndim, negative.ndim}
    if len(dims) != 1:
        raise op_error(TracegradRuntimeError, "triplet_margin_with_distance_loss",
                       "The anchor, positive, and negative tensors are expected to have the "
                       f"same number of dimensions, but got: anchor {anchor.ndim}D, positive "
                       f"{positive.ndim}D, and negative {negative.ndim}D inputs")
    d = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = d(anchor, positive), d(anchor, negative)
    if swap:
        d_neg = O.minimum(d_neg, d(positive, negative))
    return _reduce(O.clamp(O.add(O.sub(d_pos, d_neg), float(margin)), min=0.0), reduction)
