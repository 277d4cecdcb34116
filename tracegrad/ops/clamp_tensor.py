"""`clamp`/`clip`/`clamp_` with tensor bounds (`torch.clamp(x, min=lo_t, max=hi_t)`): a
composite of `where`, `maximum` and `minimum`, broadcasting all three operands and promoting
their dtypes as PyTorch does.

Note [Clamp's gradients to tensor bounds]
The value is PyTorch's, `minimum(maximum(x, min), max)` (NaN anywhere gives NaN; min > max
gives max). The gradients follow PyTorch's derivative formulas, which the plain composite
would not (at ties and when min > max): `x` gets the gradient where min <= x <= max; `min`
where x < min < max; `max` where x > max or max < min; a position where none holds (x below
min == max, or a NaN) passes no gradient. With one bound: `x` where x >= min (x <= max),
the bound elsewhere. (One difference kept: where `min` is NaN and x > max, PyTorch sends
the gradient to `max` of a NaN result; here it goes nowhere.) The grad_fn is WhereBackward0
where PyTorch names ClampBackward1.
"""
from .._errors import TracegradTypeError
from .._tensor import Tensor
from . import elementwise as E

__all__ = []


def _type_error(input, min, max):
    kinds = [f"{k}={'Tensor' if isinstance(v, Tensor) else type(v).__name__}"
             for k, v in (("max", max), ("min", min)) if v is not None]
    got = ", ".join(["Tensor"] + kinds)
    return TracegradTypeError(f"clamp() received an invalid combination of arguments - got "
                              f"({got}), but expected one of: (Tensor input, Number min, "
                              "Number max) or (Tensor input, Tensor min, Tensor max)")


def clamp_tensor(input, min=None, max=None):
    """`clamp` where a bound is a tensor (the other a tensor or None); see the Note."""
    if any(v is not None and not isinstance(v, Tensor) for v in (min, max)):
        raise _type_error(input, min, max)
    if max is None:
        v = E.maximum(input, min).detach()
        return E.where(E.ge(input, min), input, E.where(E.lt(input, min), min, v))
    if min is None:
        v = E.minimum(input, max).detach()
        return E.where(E.le(input, max), input, E.where(E.gt(input, max), max, v))
    v = E.minimum(E.maximum(input, min), max).detach()
    in_range = E.logical_and(E.ge(input, min), E.le(input, max))
    to_min = E.logical_and(E.lt(input, min), E.lt(min, max))
    to_max = E.logical_and(E.logical_or(E.gt(input, max), E.lt(max, min)),
                           E.logical_not(E.isnan(v)))
    return E.where(in_range, input, E.where(to_min, min, E.where(to_max, max, v)))


def clamp_tensor_(input, min=None, max=None):
    """`clamp_` with tensor bounds: the result must fit `input` (dtype and shape)."""
    from .composite_missing import write_result
    return write_result("clamp_", input, clamp_tensor(input, min, max))
