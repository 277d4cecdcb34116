"""`F.interpolate` for modes 'nearest', 'nearest-exact', 'linear', 'bilinear', 'trilinear',
'bicubic' (and `align_corners`), and 'area' (adaptive average pooling to the output size,
3-D and 4-D input, as PyTorch). The resampling modes are separable: each spatial dim is
resampled by `index_select` with source indices (and, for linear modes, blend weights)
computed in numpy from the sizes alone, so the gradient is index_select's and mul's and a
trace records no data-dependent decision.

PyTorch's source coordinates for output position j of a dim resized from `n` to `m`
(scale = n / m, or 1 / scale_factor when a scale_factor is given and
recompute_scale_factor is not True):
    nearest:                 min(floor(j * scale), n - 1)        (computed in float32)
    nearest-exact:           min(floor((j + 0.5) * scale), n - 1)   (float32 too)
    linear, align_corners:   j * (n - 1) / (m - 1)               (0 when m == 1)
    linear, otherwise:       max((j + 0.5) * scale - 0.5, 0)
A linear source x blends positions floor(x) and min(floor(x) + 1, n - 1) with weight
x - floor(x). Bicubic (4-D input) uses the linear modes' source x without the clamp at 0
and blends the four positions floor(x) - 1 .. floor(x) + 2 (clamped into [0, n - 1]) with
Keys' cubic convolution weights (A = -0.75), as PyTorch's upsample_bicubic2d.
`antialias=True` changes nothing when no dim shrinks in bilinear mode (PyTorch's result is
then the plain one); other antialiased resizes raise rather than differ.
"""
import math

import numpy as np

from .. import ops as O
from .._errors import TracegradNotImplementedError, TracegradValueError, op_error

_LINEAR = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}
_A = -0.75


def _sizes(input, size, scale_factor, recompute):
    dims = input.ndim - 2
    if (size is None) == (scale_factor is None):
        raise TracegradValueError("only one of size or scale_factor should be defined")
    if size is not None:
        size = list(size) if isinstance(size, (list, tuple)) else [size] * dims
        if len(size) != dims:
            raise TracegradValueError(
                f"Input and output must have the same number of spatial dimensions, but got "
                f"input with spatial dimensions of {list(input.shape[2:])} and output size of "
                f"{size}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                "output size in (o1, o2, ...,oK) format.")
        return [int(s) for s in size], [None] * dims
    sf = list(scale_factor) if isinstance(scale_factor, (list, tuple)) else [scale_factor] * dims
    if len(sf) != dims:
        raise TracegradValueError(
            f"Input and scale_factor must have the same number of spatial dimensions, but got "
            f"input with spatial dimensions of {list(input.shape[2:])} and scale_factor of "
            f"shape {sf}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
            "scale_factor in (s1, s2, ...,sK) format.")
    out = [int(math.floor(float(n) * float(s))) for n, s in zip(input.shape[2:], sf)]
    return out, ([None] * dims if recompute else [float(s) for s in sf])


def _scale(n, m, sf, align_corners):
    if align_corners:
        return (n - 1) / (m - 1) if m > 1 else 0.0
    return 1.0 / sf if sf else n / m


def _nearest(x, d, n, m, sf, exact=False):
    scale = np.float32(1.0 / sf if sf else n / m)
    j = np.arange(m, dtype=np.float32) + (np.float32(0.5) if exact else np.float32(0))
    src = np.minimum(np.floor(j * scale).astype(np.int64), n - 1)
    return O.index_select(x, d, O.tensor(src))


def _linear(x, d, n, m, sf, align_corners):
    scale = _scale(n, m, sf, align_corners)
    j = np.arange(m, dtype=np.float64)
    src = j * scale if align_corners else np.maximum((j + 0.5) * scale - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    lam = (src - i0).reshape((m,) + (1,) * (x.ndim - 1 - d))
    a, b = O.index_select(x, d, O.tensor(i0)), O.index_select(x, d, O.tensor(i1))
    w1 = O.tensor(lam.astype(x.dtype.np))
    return O.add(a, O.mul(O.sub(b, a), w1))


def _cubic_weights(t):
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 for fraction t."""
    def near(x):                 # |x| <= 1
        return ((_A + 2) * x - (_A + 3)) * x * x + 1

    def far(x):                  # 1 < |x| < 2
        return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _bicubic(x, d, n, m, sf, align_corners):
    scale = _scale(n, m, sf, align_corners)
    j = np.arange(m, dtype=np.float64)
    src = j * scale if align_corners else (j + 0.5) * scale - 0.5
    i0 = np.floor(src).astype(np.int64)
    t = (src - i0).reshape((m,) + (1,) * (x.ndim - 1 - d))
    out = None
    for k, w in enumerate(_cubic_weights(t)):
        taps = O.index_select(x, d, O.tensor(np.clip(i0 - 1 + k, 0, n - 1)))
        term = O.mul(taps, O.tensor(w.astype(x.dtype.np)))
        out = term if out is None else O.add(out, term)
    return out


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of (N, C, d1, ...) input by `size` or `scale_factor`.

    >>> interpolate(tracegrad.tensor([[[1., 2.]]]), scale_factor=2, mode="linear")
    tensor([[[1.0000, 1.2500, 1.7500, 2.0000]]])
    """
    if mode not in ("nearest", "nearest-exact", "area") + tuple(_LINEAR):
        raise op_error(TracegradNotImplementedError, "interpolate",
                       f"tracegrad: interpolate mode={mode!r} is not supported (nearest, "
                       "nearest-exact, area, linear, bilinear, trilinear, bicubic)")
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise TracegradValueError("align_corners option can only be set with the "
                                  "interpolating modes: linear | bilinear | bicubic | trilinear")
    if antialias and (mode not in ("bilinear", "bicubic") or input.ndim != 4):
        raise TracegradValueError("Anti-alias option is restricted to bilinear, bicubic, and "
                                  "lanczos modes and requires a 4-D tensor as input")
    if mode in _LINEAR and input.ndim != _LINEAR[mode]:
        raise op_error(TracegradNotImplementedError, "interpolate",
                       f"Got {input.ndim}D input, but {mode} mode needs "
                       f"{_LINEAR[mode]}D input")
    if input.ndim < 3:
        raise TracegradValueError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {input.ndim}D) for the modes: nearest | linear | "
                                  "bilinear | bicubic | trilinear | area | nearest-exact "
                                  f"(got {mode})")
    sizes, sfs = _sizes(input, size, scale_factor, recompute_scale_factor)
    if antialias and (mode == "bicubic" or any(m < n for m, n in zip(sizes, input.shape[2:]))):
        raise op_error(TracegradNotImplementedError, "interpolate",
                       "tracegrad: antialias=True is implemented only where it changes nothing "
                       "(bilinear, no dim shrinking); use antialias=False")
    if mode == "area":
        return _area(input, sizes)
    out = input
    for k, (m, sf) in enumerate(zip(sizes, sfs)):
        d, n = 2 + k, input.shape[2 + k]
        if mode in ("nearest", "nearest-exact"):
            out = _nearest(out, d, n, m, sf, mode == "nearest-exact")
        elif mode == "bicubic":
            out = _bicubic(out, d, n, m, sf, bool(align_corners))
        else:
            out = _linear(out, d, n, m, sf, bool(align_corners))
    return out


def _area(input, sizes):
    from ._functional_extra import adaptive_avg_pool2d
    from ._functional_layers_more import adaptive_avg_pool1d
    if input.ndim == 3:
        return adaptive_avg_pool1d(input, sizes[0])
    if input.ndim == 4:
        return adaptive_avg_pool2d(input, tuple(sizes))
    raise op_error(TracegradNotImplementedError, "interpolate", "tracegrad: interpolate "
                   "mode='area' supports 3-D and 4-D input (adaptive_avg_pool3d is missing)")
