"""`nn.init.trunc_normal_` and `nn.init.orthogonal_`, PyTorch's algorithms.

Both draw from tracegrad's generator (`rand` / `randn`, so `manual_seed` governs them) and
finish in numpy (an inverse normal CDF; a QR decomposition). Initializers run outside
compiled code in practice; called inside a traced function, the numpy part would be
frozen at trace time, so such calls are reported and run eagerly (Note [Effects]).
"""
import math
import warnings

import numpy as np

from .. import _effects, _mode
from .._errors import TracegradValueError
from .._tensor import Tensor
from ..ops import creation as C

__all__ = ["trunc_normal_", "orthogonal_"]

# Acklam's rational approximation of the inverse normal CDF (relative error < 1.2e-9),
# refined below by one Newton step on math.erf
_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
      1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
      6.680131188771972e+01, -1.328068155800751e+01)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
      -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
      3.754408661907416e+00)


def _poly(c, x):
    r = np.zeros_like(x)
    for k in c:
        r = r * x + k
    return r


def _ndtri(p):
    """Inverse of the standard normal CDF, elementwise, for p in (0, 1) (float64)."""
    p = np.clip(p, 1e-300, 1 - 1e-16)
    lo, hi = p < 0.02425, p > 1 - 0.02425
    q = np.sqrt(-2 * np.log(np.where(lo, p, np.where(hi, 1 - p, 0.5))))
    r = (p - 0.5) ** 2
    mid = (p - 0.5) * _poly(_A, r) / (_poly(_B, r) * r + 1)
    tail = _poly(_C, q) / (_poly(_D, q) * q + 1)
    x = np.where(lo, tail, np.where(hi, -tail, mid))
    err = 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) - p      # one Newton step
    return x - err * math.sqrt(2 * math.pi) * np.exp(x * x / 2)


def _norm_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std^2) samples truncated to [a, b] (inverse-CDF sampling)."""
    _effects.note("random", "nn.init.trunc_normal_() (finished in numpy)")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    lo, hi = _norm_cdf((a - mean) / std), _norm_cdf((b - mean) / std)
    with _mode.no_grad():
        u = C.rand(tuple(tensor.shape), dtype=tensor.dtype, generator=generator)
        p = lo + (hi - lo) * u.numpy().astype(np.float64)
        z = np.clip(_ndtri(p) * std + mean, a, b)
        return tensor.copy_(Tensor._wrap(z.astype(tensor.dtype.np)))


def orthogonal_(tensor, gain=1, generator=None):
    """Fill with a (semi-)orthogonal matrix, as PyTorch: QR of a normal matrix, signs
    fixed by R's diagonal, times `gain`; higher ranks are flattened past dimension 0."""
    _effects.note("random", "nn.init.orthogonal_() (finished in numpy)")
    if tensor.ndim < 2:
        raise TracegradValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with _mode.no_grad():
        flat = C.randn(rows, cols, dtype=tensor.dtype, generator=generator).numpy()
        if rows < cols:
            flat = flat.T
        q, r = np.linalg.qr(flat)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        q = (q * gain).astype(tensor.dtype.np).reshape(tuple(tensor.shape))
        return tensor.copy_(Tensor._wrap(np.ascontiguousarray(q)))
