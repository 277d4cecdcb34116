"""`sgn`, `frac`, `fmax`, `fmin`, `swapdims` and the in-place `frac_`, `sgn_`, `lerp_`,
`addcmul_`, `addcdiv_`: composites of existing primitives, so tracing, gradients (to any
order) and the JAX lowering come with them.

Values, dtypes, errors and gradients are PyTorch's (fmax/fmin send a tie's gradient to
`input`, and a NaN operand's to the other one, as PyTorch's derivative formulas do); only
grad_fn names differ (the last primitive names the node). An in-place composite computes
the out-of-place result, checks it fits the tensor (PyTorch's cast and broadcast errors)
and copies it in: one version bump, the leaf and view rules of `copy_`.
"""
from .. import _dtype as D
from .._errors import (TracegradNotImplementedError, TracegradRuntimeError,
                       TracegradTypeError, op_error)
from .._tensor import Tensor
from . import elementwise as E
from . import shape as S
from .fmod_prim import trunc

__all__ = ["sgn", "frac", "frac_", "fmax", "fmin", "swapdims"]


def sgn(input):
    """The sign of each element (for real tensors, as `sign`: -1, 0 or 1; 0 for NaN).

    >>> sgn(tensor([-2.0, 0.0, 3.0]))
    tensor([-1.,  0.,  1.])
    """
    if input.dtype is D.bool_:
        return input.clone()
    return E.sign(input)


def frac(input):
    """The fractional part, `input - trunc(input)` (sign kept); floating tensors only.

    >>> frac(tensor([-1.5, 2.25]))
    tensor([-0.5000,  0.2500])
    """
    if not input.dtype.is_floating_point:
        raise op_error(TracegradNotImplementedError, "frac", '"frac_cpu" not implemented for '
                       f"'{D.scalar_type_name(input.dtype)}'")
    return E.sub(input, trunc(input))


def _binary_tensors(op, input, other):
    for pos, (name, v) in enumerate((("input", input), ("other", other)), 1):
        if not isinstance(v, Tensor):
            raise TracegradTypeError(f"{op}(): argument '{name}' (position {pos}) must be "
                                     f"Tensor, not {type(v).__name__}")


def fmax(input, other):
    """Elementwise maximum ignoring NaN (NaN only where both are NaN), as torch.fmax.

    >>> fmax(tensor([1.0, nan]), tensor([nan, 2.0]))
    tensor([1., 2.])
    """
    _binary_tensors("fmax", input, other)
    keep = E.logical_or(E.ge(input, other), E.isnan(other))
    return E.where(keep, input, other)


def fmin(input, other):
    """Elementwise minimum ignoring NaN (NaN only where both are NaN), as torch.fmin.

    >>> fmin(tensor([1.0, nan]), tensor([nan, 2.0]))
    tensor([1., 2.])
    """
    _binary_tensors("fmin", input, other)
    keep = E.logical_or(E.le(input, other), E.isnan(other))
    return E.where(keep, input, other)


def swapdims(input, dim0, dim1):
    """Alias of `transpose` (a view with two dimensions swapped)."""
    return S.transpose(input, dim0, dim1)


def write_result(op, self, res):
    """Copy the out-of-place result `res` into `self` as PyTorch's in-place op would: a
    result type that cannot be cast to self's dtype, or a broadcast shape other than self's,
    raises PyTorch's RuntimeError."""
    if res.dtype is not self.dtype and not D.can_cast(res.dtype, self.dtype):
        raise op_error(TracegradRuntimeError, op,
                       f"result type {D.scalar_type_name(res.dtype)} can't be cast to the "
                       f"desired output type {D.scalar_type_name(self.dtype)}",
                       "Convert the tensor first, e.g. `x = x.float()`.")
    if tuple(res.shape) != tuple(self.shape):
        raise op_error(TracegradRuntimeError, op,
                       f"output with shape {list(self.shape)} doesn't match the broadcast "
                       f"shape {list(res.shape)}",
                       "In-place ops cannot grow a tensor; use the out-of-place op.")
    self.copy_(res)
    return self


def frac_(input):
    """`frac` in place (floating tensors only)."""
    return write_result("frac_", input, frac(input))


def sgn_(input):
    """`sgn` in place."""
    return write_result("sgn_", input, sgn(input))


def lerp_(input, end, weight):
    """`lerp` in place: `input += weight * (end - input)`."""
    return write_result("lerp_", input, E.lerp(input, end, weight))


def addcmul_(input, tensor1, tensor2, *, value=1):
    """`addcmul` in place: `input += value * tensor1 * tensor2`."""
    from .composite_math import addcmul
    return write_result("addcmul_", input, addcmul(input, tensor1, tensor2, value=value))


def addcdiv_(input, tensor1, tensor2, *, value=1):
    """`addcdiv` in place: `input += value * tensor1 / tensor2`."""
    from .composite_math import addcdiv
    return write_result("addcdiv_", input, addcdiv(input, tensor1, tensor2, value=value))


def swapdims_(input, dim0, dim1):
    """Alias of `transpose_` (two dimensions swapped in place)."""
    from .inplace_shape import transpose_
    return transpose_(input, dim0, dim1)
