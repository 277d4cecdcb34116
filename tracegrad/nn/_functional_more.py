"""More of `nn.functional` that training code reaches for: `softplus`, `cosine_similarity`,
`pad`, each composed of tracegrad ops with PyTorch's values and gradients.
"""
from .. import ops as O
from .._errors import TracegradRuntimeError, op_error

__all__ = ["softplus", "cosine_similarity", "pad"]


def softplus(input, beta=1.0, threshold=20.0):
    """`log(1 + exp(beta * x)) / beta`, and `x` itself where `beta * x > threshold`.

    The exponential only ever sees the values it is kept for, so neither its value nor
    its gradient overflows in the branch `where` drops."""
    bx = O.mul(input, beta)
    linear = O.gt(bx, threshold)
    soft = O.div(O.log1p(O.exp(O.where(linear, 0.0, bx))), beta)
    return O.where(linear, input, soft)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Cosine of the angle between `x1` and `x2` along `dim` (broadcast together).

    PyTorch's formula: each operand divided by its 2-norm (clamped below by `eps` without
    changing the norm's gradient), then the products summed."""
    x1, x2 = O.broadcast_tensors(x1, x2)

    def unit(x):
        n = O.norm(x, 2, dim, keepdim=True)
        with_floor = O.clamp(n, min=eps).detach()
        return O.div(x, O.add(n, O.sub(with_floor, n.detach())))
    return O.sum(O.mul(unit(x1), unit(x2)), dim)


def pad(input, pad, mode="constant", value=None):
    """Pads (or, with negative amounts, crops) the last `len(pad) // 2` dimensions:
    `pad = (left_last, right_last, left_second_last, ...)`; mode 'constant', 'reflect',
    'replicate' or 'circular' (the last three in `_functional_pad_modes.py`)."""
    if mode != "constant":
        from ._functional_pad_modes import MODES, pad_mode
        if mode not in MODES:
            raise NotImplementedError(f"Unrecognised padding mode {mode}")
        return pad_mode(input, pad, mode)
    if len(pad) % 2:
        raise op_error(TracegradRuntimeError, "pad", "Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise op_error(TracegradRuntimeError, "pad",
                       "Padding length should be less than or equal to two times the input "
                       "dimension but got padding length "
                       f"{len(pad)} and input of dimension {input.ndim}")
    shape = list(input.shape)
    src, dst = [slice(None)] * input.ndim, [slice(None)] * input.ndim
    for k in range(len(pad) // 2):
        d = input.ndim - 1 - k
        lo, hi = int(pad[2 * k]), int(pad[2 * k + 1])
        n = shape[d] + lo + hi
        if shape[d] - max(-lo, 0) - max(-hi, 0) < 0:      # cropped past nothing
            raise op_error(TracegradRuntimeError, "pad",
                           "narrow(): length must be non-negative.")
        src[d] = slice(max(-lo, 0), shape[d] - max(-hi, 0))
        dst[d] = slice(max(lo, 0), n - max(hi, 0))
        shape[d] = n
    out = O.full(tuple(shape), 0.0 if value is None else value, dtype=input.dtype)
    if out.numel() and input[tuple(src)].numel():
        out[tuple(dst)] = input[tuple(src)]
    return out
