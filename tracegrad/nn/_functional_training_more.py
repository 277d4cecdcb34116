"""`nn.functional.kl_div` and `nn.functional.group_norm`, composed of tracegrad ops with
PyTorch's formulas, reductions, warnings and checks (so they trace, differentiate and lower
to JAX with no new primitive).

- kl_div is PyTorch's own composite: `xlogy(target, target) - target * input` (or, with
  `log_target`, `exp(target) * (target - input)`), then the reduction; 'batchmean' sums and
  divides by the batch size. xlogy is a primitive with PyTorch's derivatives, so even the
  gradient with respect to a zero target is PyTorch's (nan: xlogy's divides by it).
- group_norm reshapes to (N, groups, rest), normalizes with the layer-norm primitive over
  the last dim (biased variance), reshapes back and applies the per-channel affine. Values
  and gradients are PyTorch's (to rounding); the node is AddBackward0/ViewBackward0 where
  PyTorch prints NativeGroupNormBackward0.
"""
import warnings

from .. import ops as O
from .._dtype import scalar_type_name
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from ..ops import normalization as _norm
from ._functional_extra import _float_only
from ._losses import _reduction

__all__ = ["kl_div", "group_norm"]


def kl_div(input, target, size_average=None, reduce=None, reduction="mean",
           log_target=False):
    """Kullback-Leibler divergence of `target` from `input` (log-probabilities):
    pointwise `target * (log(target) - input)` (`log_target`: `target` is a
    log-probability too), reduced by 'none' | 'mean' | 'sum' | 'batchmean' (sum / batch
    size: the true KL divergence per sample; 'mean' divides by every element and warns)."""
    if size_average is not None or reduce is not None:
        reduction = _reduction(None, size_average, reduce)
        batchmean = False
    else:
        if reduction == "mean":
            warnings.warn(
                "reduction: 'mean' divides the total loss by both the batch size and the "
                "support size.'batchmean' divides only by the batch size, and aligns with the "
                "KL div math definition.'mean' will be changed to behave the same as "
                "'batchmean' in the next major release.", stacklevel=2)
        batchmean = reduction == "batchmean"
        if batchmean:
            reduction = "sum"
        elif reduction not in ("none", "mean", "sum"):
            raise TracegradValueError(f"{reduction} is not a valid value for reduction")
    for t in (input, target):
        if not t.dtype.is_floating_point:
            raise op_error(TracegradRuntimeError, "kl_div",
                           "kl_div: Integral inputs not supported.")
    if log_target:
        loss = O.mul(O.exp(target), O.sub(target, input))
    else:
        loss = O.sub(O.xlogy(target, target), O.mul(target, input))
    if reduction == "mean":
        loss = O.mean(loss)
    elif reduction == "sum":
        loss = O.sum(loss)
    if batchmean and input.ndim != 0:
        loss = O.div(loss, input.shape[0])
    return loss


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize each group of `num_groups` channel groups per sample (biased variance
    over the group's channels and spatial positions), then `* weight + bias` per channel.

    >>> group_norm(tracegrad.tensor([[1.0, 3.0]]).reshape(1, 2, 1), 1).flatten()
    tensor([-1.0000,  1.0000])
    """
    if input.ndim < 2:
        raise op_error(TracegradRuntimeError, "group_norm",
                       f"Expected at least 2 dimensions for input tensor but received "
                       f"{input.ndim}")
    shape = tuple(input.shape)
    n, c = shape[0], shape[1]
    size = [n * c // num_groups, num_groups] + list(shape[2:])
    prod = size[0]
    for s in size[2:]:
        prod *= s
    if prod == 1:
        raise TracegradValueError(f"Expected more than 1 value per channel when training, "
                                  f"got input size {size}")
    if c % num_groups:
        raise op_error(TracegradRuntimeError, "group_norm",
                       f"Expected number of channels in input to be divisible by num_groups, "
                       f"but got input of shape {list(shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.shape[0] != c):
            raise op_error(TracegradRuntimeError, "group_norm",
                           f"Expected {name} to be a vector of size equal to the number of "
                           f"channels in input, but got {name} of shape {list(t.shape)} and "
                           f"input of shape {list(shape)}")
    _float_only(input, "GroupNormKernelImpl")
    for t in (weight, bias):
        if t is not None and t.dtype is not input.dtype:
            raise op_error(TracegradRuntimeError, "group_norm",
                           "mixed dtype (CPU): expect parameter to have scalar type of "
                           f"{scalar_type_name(input.dtype)}")
    out = _norm.layer_norm(input.reshape(n, num_groups, -1), 1, None, None, eps)
    out = out.reshape(shape)
    bshape = (1, c) + (1,) * (len(shape) - 2)
    if weight is not None:
        out = O.mul(out, weight.reshape(bshape))
    if bias is not None:
        out = O.add(out, bias.reshape(bshape))
    return out
