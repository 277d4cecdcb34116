"""Loss functions of `nn.functional`: `mse_loss`, `nll_loss`, `cross_entropy`.

Class-index losses accept every layout PyTorch accepts -- (C,) with a 0-d target, (N, C)
with (N,), (N, C, d1, ...) with (N, d1, ...) -- and record what PyTorch records: one
`nll_loss` primitive (NllLossBackward0; NllLoss2DBackward0 for (N, C, H, W), other ranks
viewed as (N, C, 1, -1) first), under it one `log_softmax` for `cross_entropy`. The target
checks run in the nll_loss kernel (`ops/loss.py`). Label smoothing's extra term flattens to
(M, C) rows and (M,) targets, picks by advanced indexing (differentiable) and masks ignored
targets with `where` (never multiplied by zero), so an ignored row holding -inf neither
poisons the value nor the gradient.
"""
import warnings

from .. import ops as O
from ..ops import loss as _loss
from .._dtype import int64 as _int64
from .._errors import TracegradRuntimeError, TracegradValueError, op_error


def _reduction(reduction, size_average=None, reduce=None):
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
        warnings.warn("size_average and reduce args will be deprecated, please use "
                      f"reduction='{reduction}' instead.", stacklevel=3)
    if reduction not in ("none", "mean", "sum"):
        raise TracegradValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return O.mean(loss)
    return O.sum(loss) if reduction == "sum" else loss


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error `(input - target) ** 2`, reduced by `reduction`."""
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input "
                      f"size ({input.shape}). This will likely lead to incorrect results due "
                      "to broadcasting. Please ensure they have the same size.", stacklevel=2)
    reduction = _reduction(reduction, size_average, reduce)
    if weight is None:
        return _loss.mse_loss(input, target, reduction)
    diff = O.sub(input, target)
    sq = O.mul(diff, diff)
    if tuple(weight.shape) != tuple(input.shape):
        raise TracegradValueError("Weights and input must have the same size.")
    sq = O.mul(sq, weight)
    if reduction == "mean":
        return O.div(O.sum(sq), O.sum(weight))
    return _reduce(sq, reduction)


# ---------------- class-index losses ----------------
def _scalar_type(t):
    """PyTorch's name of a tensor's element type in messages: Long, Int, Float, Bool."""
    return t.type()[6:-6]


def _check_layout(input, target):
    """PyTorch's checks of an nll_loss input/target pair. Class indexes must be int64
    (PyTorch also takes uint8, which tracegrad has no dtype for): an int32 or bool target
    raises as in PyTorch rather than being silently accepted."""
    if target.dtype is not _int64:
        raise op_error(TracegradRuntimeError, "nll_loss",
                       f"expected target dtype to be Long or Byte, but got "
                       f"{_scalar_type(target)}")
    if input.ndim == 1:
        if target.ndim != 0:
            raise op_error(TracegradRuntimeError, "nll_loss",
                           "0D or 1D target tensor expected, multi-target not supported")
        return
    if input.ndim < 1 or target.ndim != input.ndim - 1:
        raise op_error(TracegradRuntimeError, "nll_loss",
                       "0D or 1D target tensor expected, multi-target not supported"
                       if input.ndim == 2 else
                       f"Expected target of {input.ndim - 1} dimensions for input of "
                       f"{input.ndim} dimensions, got {target.ndim}")
    if input.shape[0] != target.shape[0]:
        raise op_error(TracegradValueError, "nll_loss",
                       f"Expected input batch_size ({input.shape[0]}) to match target "
                       f"batch_size ({target.shape[0]}).")
    if tuple(input.shape[2:]) != tuple(target.shape[1:]):
        raise op_error(TracegradRuntimeError, "nll_loss",
                       f"size mismatch (got input: {list(input.shape)}, target: "
                       f"{list(target.shape)})")


def _flatten(input, target):
    """(M, C) rows of class scores and (M,) targets, plus the per-element output shape."""
    _check_layout(input, target)
    if input.ndim == 2:
        return input, target, tuple(target.shape)          # already (M, C) and (M,)
    if input.ndim == 1:
        return O.unsqueeze(input, 0), O.reshape(target, (1,)), ()
    c = input.shape[1]
    input = O.permute(input, (0,) + tuple(range(2, input.ndim)) + (1,))    # (N, d1.., C)
    return O.reshape(input, (-1, c)), O.reshape(target, (-1,)), tuple(target.shape)


def _torch_layout(input, target):
    """Scores and targets as PyTorch's nll_loss hands them to its kernels: (C,), (N, C)
    and (N, C, H, W) as they are, other ranks viewed as (N, C, 1, -1) (nll_loss2d)."""
    _check_layout(input, target)
    if input.ndim in (1, 2, 4):
        return input, target
    n, c = input.shape[:2]
    return O.reshape(input, (n, c, 1, -1)), O.reshape(target, (n, 1, -1))


def _check(target, n_classes, ignore_index, weight):
    """The weight's shape; the nll_loss kernel checks the target values (out of bounds)."""
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != n_classes):
        raise op_error(TracegradRuntimeError, "nll_loss",
                       f"weight tensor should be defined either for all {n_classes} classes or "
                       f"no classes but got weight tensor of shape: {list(weight.shape)}")


def _pick(scores, target, weight, ignore_index):
    """Per-row weight-scaled `-scores[i, target[i]]` (0 where ignored) and the weight mask."""
    valid = O.ne(target, ignore_index)
    safe = O.where(valid, target, 0)
    picked = scores[O.arange(scores.shape[0]), safe]
    w = None if weight is None else weight[safe]
    loss = O.neg(picked if w is None else O.mul(picked, w))
    loss = O.where(valid, loss, 0.0)
    w_eff = valid.to(scores.dtype) if w is None else O.where(valid, w, 0.0)
    return loss, w_eff, valid


def _weighted_reduce(per_row, w_eff, reduction, shape):
    if reduction == "none":
        return _as_target_shape(per_row, shape)
    total = O.sum(per_row)
    return O.div(total, O.sum(w_eff)) if reduction == "mean" else total


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of class-index targets given log-probabilities `input`.

    'mean' divides by the summed weights of the non-ignored targets (PyTorch's rule).
    """
    reduction = _reduction(reduction, size_average, reduce)
    return _nll(input, target, weight, ignore_index, reduction)


def _nll(input, target, weight, ignore_index, reduction):
    """The one NllLossBackward0 (NllLoss2DBackward0) node, in the target's layout for
    'none' (a ViewBackward0 on top for ranks PyTorch views, as it does)."""
    scores, t = _torch_layout(input, target)
    _check(t, input.shape[0 if input.ndim == 1 else 1], ignore_index, weight)
    loss = _loss.nll_loss(scores, t, weight, reduction, ignore_index)
    return _as_target_shape(loss, tuple(target.shape)) if reduction == "none" else loss


def _as_target_shape(loss, shape):
    """Per-row losses in the target's layout; a (N, C) input's need no reshape (and so keep
    printing grad_fn=<NllLossBackward0>, as PyTorch's do)."""
    return loss if tuple(loss.shape) == tuple(shape) else O.reshape(loss, shape)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """`nll_loss(log_softmax(input, class_dim), target)`, with optional label smoothing.

    Class-index targets (integer) or class probabilities (floating, same shape as input).

    >>> cross_entropy(tracegrad.zeros(2, 4), tracegrad.tensor([0, 3]))
    tensor(1.3863)
    """
    reduction = _reduction(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise op_error(TracegradRuntimeError, "cross_entropy",
                       f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    class_dim = 0 if input.ndim == 1 else 1
    logp = O.log_softmax(input, class_dim)
    if tuple(target.shape) == tuple(input.shape):
        # PyTorch decides by shape alone: same shape means class probabilities
        if not target.is_floating_point():
            raise op_error(TracegradRuntimeError, "cross_entropy",
                           "Expected floating point type for target with class "
                           f"probabilities, got {_scalar_type(target)}")
        return _soft_targets(logp, target, weight, class_dim, reduction, label_smoothing)
    nll = _nll(logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0.0:
        return nll
    scores, t, shape = _flatten(logp, target)
    n_classes = scores.shape[1]
    _, w_eff, valid = _pick(scores, t, weight, ignore_index)
    # Smoothing term: uniform target over classes, each class weighted by weight[c].
    per_class = scores if weight is None else O.mul(scores, weight)
    smooth = O.where(valid, O.neg(O.sum(per_class, 1)), 0.0)
    smooth = _weighted_reduce(smooth, w_eff, reduction, shape)
    return O.add(_loss.mul_scalar(nll, 1.0 - label_smoothing),
                 _loss.mul_scalar(smooth, label_smoothing / n_classes))


def _soft_targets(logp, target, weight, class_dim, reduction, label_smoothing):
    n_classes = logp.shape[class_dim]
    if label_smoothing > 0.0:
        target = O.add(O.mul(target, 1.0 - label_smoothing), label_smoothing / n_classes)
    prod = O.mul(logp, target)
    if weight is not None:
        shape = [1] * logp.ndim
        shape[class_dim] = n_classes
        prod = O.mul(prod, O.reshape(weight, tuple(shape)))
    # PyTorch's order: -(sum over classes) per row, or -(sum of all) then / rows for 'mean'
    if reduction == "none":
        return O.neg(O.sum(prod, class_dim))
    total = O.neg(O.sum(prod))
    return _loss.div_scalar(total, logp.numel() / n_classes) if reduction == "mean" else total
