"""Gradient clipping: `clip_grad_norm_`, `clip_grad_value_`, `get_total_norm`,
`clip_grads_with_norm_`, with PyTorch's arithmetic.

The total norm is the p-norm of the per-gradient p-norms; every gradient is multiplied by
`clamp(max_norm / (total_norm + 1e-6), max=1)`, always (no `if` on the norm), so a traced
training step records the clipping as ops and never guards on the norm's value unless
`error_if_nonfinite=True` asks for that check.
"""
import warnings

from ... import _mode
from ... import ops as O
from ..._errors import TracegradRuntimeError
from ..._tensor import Tensor


_INF = float("inf")


def _as_list(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _per_call(number):
    """`float(number)`, except that a float argument a compiled call reads per call (a
    `Number`: Note [Numbers read per call] in tracing/numbers.py) stays one, so a clipping
    threshold passed as a changing float never re-traces."""
    from ...tracing.numbers import Number
    return number if type(number) is Number else float(number)


def _grads(parameters):
    return [p.grad for p in _as_list(parameters) if p.grad is not None]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The `norm_type`-norm of all `tensors` seen as one vector (a 0-d tensor).

    >>> get_total_norm([tracegrad.tensor([3.0]), tracegrad.tensor([4.0])])
    tensor(5.)
    """
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return O.tensor(0.0)
    # PyTorch groups by (device, dtype) before stacking: keep its order of the norms
    order = {}
    for t in tensors:
        order.setdefault(t.dtype, []).append(t)
    norms = [O.norm(t, norm_type) for group in order.values() for t in group]
    first = tensors[0].dtype
    total = O.norm(O.stack([n.to(first) for n in norms]), norm_type)
    if error_if_nonfinite and bool(O.logical_or(O.isnan(total), O.eq(O.abs(total), _INF))):
        raise TracegradRuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


@_mode.no_grad()
def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients of `parameters` by `clamp(max_norm / (total_norm + 1e-6), max=1)`."""
    grads = _grads(parameters)
    if not grads:
        return
    coef = O.clamp(O.div(_per_call(max_norm), O.add(total_norm, 1e-6)), max=1.0)
    for g in grads:
        g.mul_(coef.to(g.dtype) if coef.dtype is not g.dtype else coef)


@_mode.no_grad()
def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Clip the gradients' total norm to `max_norm` in place; returns the total norm
    (before clipping) as a tensor.

    >>> total = clip_grad_norm_(model.parameters(), max_norm=1.0)   # doctest: +SKIP
    """
    parameters = _as_list(parameters)        # a generator is read once, used twice
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """Deprecated alias of `clip_grad_norm_` (warns, as PyTorch does)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


@_mode.no_grad()
def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient of `parameters` into `[-clip_value, clip_value]` in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        g.clamp_(min=-clip_value, max=clip_value)
