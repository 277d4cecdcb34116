"""`nn.functional.bilinear`, `pixel_shuffle`, `pixel_unshuffle` and `adaptive_avg_pool1d`,
composed of tracegrad ops (einsum, reshape, permute and the 2-D adaptive pool).
"""
from .. import ops as O
from .._errors import TracegradRuntimeError, op_error

__all__ = ["bilinear", "pixel_shuffle", "pixel_unshuffle", "adaptive_avg_pool1d"]


def bilinear(input1, input2, weight, bias=None):
    """`y[..., o] = x1[..., i] W[o, i, j] x2[..., j] + b[o]`."""
    if input1.shape[:-1] != input2.shape[:-1]:
        raise op_error(TracegradRuntimeError, "bilinear", "bilinear(): input batch dimensions "
                       f"do not match: got {list(input1.shape[:-1])} and "
                       f"{list(input2.shape[:-1])}")
    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1] or \
            input2.shape[-1] != weight.shape[2]:
        raise op_error(TracegradRuntimeError, "bilinear", "bilinear(): input sizes "
                       f"{input1.shape[-1]} and {input2.shape[-1]} do not match weight "
                       f"{list(weight.shape)}")
    y = O.einsum("...i,oij,...j->...o", input1, weight, input2)
    return y if bias is None else O.add(y, bias)


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    r = int(upscale_factor)
    if input.ndim < 3:
        raise op_error(TracegradRuntimeError, "pixel_shuffle", "pixel_shuffle expects input to "
                       f"have at least 3 dimensions, but got input with {input.ndim} "
                       "dimension(s)")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise op_error(TracegradRuntimeError, "pixel_shuffle", "pixel_shuffle expects its "
                       "input's 'channel' dimension to be divisible by the square of upscale_"
                       f"factor, but input.size(-3)={c} is not divisible by {r * r}")
    b = len(batch)
    x = O.reshape(input, tuple(batch) + (c // (r * r), r, r, h, w))
    x = O.permute(x, list(range(b)) + [b, b + 3, b + 1, b + 4, b + 2])
    return O.reshape(x, tuple(batch) + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    r = int(downscale_factor)
    if input.ndim < 3:
        raise op_error(TracegradRuntimeError, "pixel_unshuffle", "pixel_unshuffle expects input "
                       f"to have at least 3 dimensions, but got input with {input.ndim} "
                       "dimension(s)")
    *batch, c, h, w = input.shape
    if h % r or w % r:
        raise op_error(TracegradRuntimeError, "pixel_unshuffle", "pixel_unshuffle expects "
                       "height and width to be divisible by downscale_factor, but got "
                       f"{h} and {w} for factor {r}")
    b = len(batch)
    x = O.reshape(input, tuple(batch) + (c, h // r, r, w // r, r))
    x = O.permute(x, list(range(b)) + [b, b + 2, b + 4, b + 1, b + 3])
    return O.reshape(x, tuple(batch) + (c * r * r, h // r, w // r))


def adaptive_avg_pool1d(input, output_size):
    """Average pooling of (N, C, L) or (C, L) to `output_size` (the 2-D pool on a height of
    1, so the windows are PyTorch's floor/ceil ones)."""
    from ._functional_extra import adaptive_avg_pool2d
    if input.ndim not in (2, 3):
        raise op_error(TracegradRuntimeError, "adaptive_avg_pool1d", "adaptive_avg_pool1d(): "
                       f"Expected 2D or 3D tensor, but got {list(input.shape)}")
    size = output_size[0] if isinstance(output_size, (tuple, list)) else output_size
    return O.squeeze(adaptive_avg_pool2d(O.unsqueeze(input, -2), (1, size)), -2)
