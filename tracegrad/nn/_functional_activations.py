"""The activations of `nn.functional` beyond relu/gelu/silu/softplus: `elu selu celu mish
hardswish hardsigmoid relu6 hardtanh softsign logsigmoid tanhshrink softshrink hardshrink
threshold glu prelu softmin`, with PyTorch's formulas, defaults and checks.

Each is composed of tracegrad ops, so it traces and differentiates with no new primitive.
`where` picks the branch PyTorch's backward kernel takes at a kink (elu at 0: the exponential
side, PyTorch's `x <= 0`; hardswish at -3 and 3: the flat and linear sides; hardtanh,
hardsigmoid, the shrinks and threshold at their bounds: gradient 0), so gradients at kinks
match too. The exponential only sees the values its branch keeps, so a large input gives no
overflow in the branch `where` drops.
`inplace=True` computes out of place and copies into the input (`copy_`), bumping its
version as PyTorch's in-place kernels do (from a clone where the formula saves the input).
"""
from .. import ops as O
from .._errors import TracegradRuntimeError, op_error

__all__ = ["elu", "selu", "celu", "mish", "hardswish", "hardsigmoid", "relu6", "hardtanh",
           "softsign", "logsigmoid", "tanhshrink", "softshrink", "hardshrink", "threshold",
           "glu", "prelu", "softmin", "elu_", "selu_", "celu_", "hardtanh_", "threshold_"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _inplace(input, out, inplace):
    return input.copy_(out) if inplace else out


def _expm1_neg(input, alpha, scale=1.0):
    """`alpha * (exp(x / scale) - 1)` on the non-positive entries (0 elsewhere)."""
    neg = O.where(O.gt(input, 0), 0.0, input)
    return O.mul(O.expm1(O.mul(neg, 1.0 / scale) if scale != 1.0 else neg), alpha)


def elu(input, alpha=1.0, inplace=False):
    """`x` if `x > 0` else `alpha * (exp(x) - 1)`."""
    out = O.where(O.gt(input, 0), input, _expm1_neg(input, alpha))
    return _inplace(input, out, inplace)


def elu_(input, alpha=1.0):
    return elu(input, alpha, True)


def selu(input, inplace=False):
    """`scale * elu(x, alpha)` with the self-normalising constants."""
    out = O.mul(O.where(O.gt(input, 0), input, _expm1_neg(input, _SELU_ALPHA)), _SELU_SCALE)
    return _inplace(input, out, inplace)


def selu_(input):
    return selu(input, True)


def celu(input, alpha=1.0, inplace=False):
    """`max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`."""
    if alpha == 0:
        raise op_error(TracegradRuntimeError, "celu", "ZeroDivisionError")
    out = O.where(O.gt(input, 0), input, _expm1_neg(input, alpha, alpha))
    return _inplace(input, out, inplace)


def celu_(input, alpha=1.0):
    return celu(input, alpha, True)


def mish(input, inplace=False):
    """`x * tanh(softplus(x))`."""
    from ._functional_more import softplus
    x = input.clone() if inplace else input       # the product saves x; copy_ overwrites it
    out = O.mul(x, O.tanh(softplus(x)))
    return _inplace(input, out, inplace)


def hardsigmoid(input, inplace=False):
    """`relu6(x + 3) / 6`; its gradient is 1/6 strictly inside (-3, 3), as PyTorch's."""
    inside = O.logical_and(O.gt(input, -3.0), O.lt(input, 3.0))
    lin = O.div(O.add(input, 3.0), 6.0)
    out = O.where(inside, lin, O.where(O.le(input, -3.0), 0.0, 1.0).to(lin.dtype))
    return _inplace(input, out, inplace)


def hardswish(input, inplace=False):
    """`x * relu6(x + 3) / 6`; gradient `x / 3 + 0.5` inside (-3, 3), 0 at -3 and below,
    1 at 3 and above (PyTorch's backward)."""
    x = input.clone() if inplace else input       # the product saves x; copy_ overwrites it
    out = O.where(O.le(x, -3.0), 0.0, O.where(O.ge(x, 3.0), x, O.div(O.mul(x, O.add(x, 3.0)),
                                                                   6.0)))
    return _inplace(input, out, inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """`x` clamped to `[min_val, max_val]`; the gradient is 0 at the bounds, as PyTorch's."""
    if min_val > max_val:
        raise op_error(TracegradRuntimeError, "hardtanh", "min_val cannot be greater than "
                       "max_val")
    inside = O.logical_and(O.gt(input, min_val), O.lt(input, max_val))
    out = O.where(inside, input, O.clamp(input, min_val, max_val).detach())
    return _inplace(input, out, inplace)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, True)


def relu6(input, inplace=False):
    """`min(max(0, x), 6)` (PyTorch's hardtanh(x, 0, 6))."""
    return hardtanh(input, 0.0, 6.0, inplace)


def softsign(input):
    """`x / (1 + |x|)`."""
    return O.div(input, O.add(O.abs(input), 1.0))


def logsigmoid(input):
    """`log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))`, stable for large |x|."""
    return O.sub(O.minimum(input, O.zeros_like(input)),
                 O.log1p(O.exp(O.neg(O.abs(input)))))


def tanhshrink(input):
    """`x - tanh(x)`."""
    return O.sub(input, O.tanh(input))


def softshrink(input, lambd=0.5):
    """`x - lambd` above `lambd`, `x + lambd` below `-lambd`, 0 between."""
    if lambd < 0:
        raise op_error(TracegradRuntimeError, "softshrink", "lambda must be greater or equal "
                       f"to 0, but found to be {lambd}.")
    return O.where(O.gt(input, lambd), O.sub(input, lambd),
                   O.where(O.lt(input, -lambd), O.add(input, lambd), 0.0))


def hardshrink(input, lambd=0.5):
    """`x` where `|x| > lambd`, else 0."""
    return O.where(O.logical_or(O.gt(input, lambd), O.lt(input, -lambd)), input, 0.0)


def threshold(input, threshold, value, inplace=False):
    """`x` where `x > threshold`, else `value`."""
    out = O.where(O.gt(input, threshold), input, value)
    return _inplace(input, out, inplace)


def threshold_(input, threshold, value):
    return globals()["threshold"](input, threshold, value, True)


def glu(input, dim=-1):
    """`a * sigmoid(b)` of the two halves of `input` along `dim`."""
    if input.ndim == 0:
        raise op_error(TracegradRuntimeError, "glu", "glu does not support scalars because "
                       "halving size must be even")
    n = input.shape[dim]
    if n % 2:
        raise op_error(TracegradRuntimeError, "glu", "Halving dimension must be even, but "
                       f"dimension {dim % input.ndim} is size {n}")
    a, b = O.chunk(input, 2, dim)
    return O.mul(a, O.sigmoid(b))


def prelu(input, weight):
    """`x` if `x > 0` else `weight * x`; `weight` has one entry or one per channel (dim 1)."""
    if weight.ndim > 1:
        raise op_error(TracegradRuntimeError, "prelu", "prelu: Expected `weight` to be a "
                       "scalar or 1D tensor, but got: ndim = " f"{weight.ndim}")
    w = weight
    if weight.numel() != 1:
        channels = input.shape[1] if input.ndim >= 2 else 1
        if input.ndim == 0 or weight.numel() != channels:
            raise op_error(TracegradRuntimeError, "prelu", "Mismatch of parameter numbers "
                           f"and input channel size. Found parameter numbers = "
                           f"{weight.numel()} and channel size = {channels}.")
        if input.ndim >= 2:
            w = O.reshape(weight, (-1,) + (1,) * (input.ndim - 2))
    elif weight.ndim == 1:
        w = O.reshape(weight, ())
    return O.where(O.gt(input, 0), input, O.mul(w, input))


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """`softmax(-x, dim)`."""
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return O.softmax(O.neg(input), dim)

