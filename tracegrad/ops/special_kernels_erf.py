"""numpy kernels of the error-function family: `erf`, `erfc`, `erfinv`, `ndtri`, `log_ndtr`
(plain functions of arrays, float64 inside, rounded once to the operand's dtype).

- erf / erfc: math.erf / math.erfc per element (within ~2 ulp in float64; one Python
  call per element, as the repo's erf already does).
- erfinv: Giles' single-precision rational guess (an asymptotic guess in the far tail), then
  Halley steps on erf (or on erfc near +-1, where 1 - |y| is exact) to full float64 precision;
  +-inf at +-1, nan outside [-1, 1].
- ndtri: the same core with the tail mass min(p, 1 - p) passed on exactly.
- log_ndtr: log1p / log of erfc, and the asymptotic series below -20.
"""
import math

import numpy as np

from .special_kernels import _HALF_LOG_2PI, _f64, _finish

__all__ = ["erf", "erfc", "erfinv", "ndtri", "log_ndtr"]

_ERF = np.frompyfunc(math.erf, 1, 1)
_ERFC = np.frompyfunc(math.erfc, 1, 1)


def _erf64(a):
    return np.asarray(_ERF(a), dtype=np.float64).reshape(a.shape)


def _erfc64(a):
    return np.asarray(_ERFC(a), dtype=np.float64).reshape(a.shape)


def erf(x):
    a = np.asarray(x)
    return _finish(_erf64(_f64(a)), a)


def erfc(x):
    """1 - erf(x) without cancellation."""
    a = np.asarray(x)
    return _finish(_erfc64(_f64(a)), a)


_ERFINV_CENTRAL = [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]
_ERFINV_TAIL = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _horner(coefs, w):
    p = np.full_like(w, coefs[0])
    for c in coefs[1:]:
        p = p * w + c
    return p


def _erfinv_core(m, one_minus):
    """x >= 0 with erf(x) = m for 0 <= m < 1, given `one_minus` = 1 - m exactly."""
    w = -np.log(one_minus * (1.0 + m))
    x = np.where(w < 5.0, _horner(_ERFINV_CENTRAL, w - 2.5) * m,
                 _horner(_ERFINV_TAIL, np.sqrt(w) - 3.0) * m)
    # far tail (1 - m < ~1e-7, beyond float32's range where the guess was fitted):
    # erfc(x) ~ exp(-x^2) / (x sqrt(pi)) solved by two fixed-point steps
    far = w > 16.0
    if far.any():
        lg = -np.log(one_minus)
        g = np.sqrt(lg)
        for _ in range(2):
            g = np.sqrt(lg - np.log(g * math.sqrt(math.pi)))
        x = np.where(far, g, x)
    # Halley steps on erf(x) - m (on erfc(x) - (1 - m) in the tail): two from the rational
    # guess reach full precision; the far-tail guesses take more, so later steps run only on
    # the elements whose last correction was still large
    todo = np.ones(x.shape, bool)
    for step in range(5):
        xs, ms, oms = x[todo], m[todo], one_minus[todo]
        tail = ms > 0.5
        d = np.where(tail, oms - _erfc64(xs), _erf64(xs) - ms)
        d = d / (_TWO_OVER_SQRT_PI * np.exp(-xs * xs))
        delta = d / (1.0 + xs * d)
        x[todo] = xs - delta
        if step >= 1:         # a correction below 1e-9 leaves an error of ~1e-27 (cubic)
            moved = np.abs(delta) > 1e-9 * np.abs(xs)
            todo[todo] = moved
            if not todo.any():
                break
    return x


def erfinv(y):
    """The inverse of erf elementwise: +-inf at +-1, nan outside [-1, 1]."""
    a = np.asarray(y)
    v = _f64(a)
    with np.errstate(all="ignore"):
        out = np.full(v.shape, np.nan)
        out[v == 1.0], out[v == -1.0] = np.inf, -np.inf
        ok = np.abs(v) < 1.0
        if ok.any():
            t = v[ok]
            m = np.abs(t)
            x = _erfinv_core(m, 1.0 - m)               # 1 - m is exact for m >= 0.5
            out[ok] = np.where(t == 0.0, t, np.sign(t) * x)    # keeps the sign of -0.0
    return _finish(out, a)


def ndtri(p):
    """The inverse of the standard normal CDF: -inf at 0, +inf at 1, nan outside [0, 1].
    Accurate in both tails: the tail mass min(p, 1 - p) is passed on exactly."""
    a = np.asarray(p)
    v = _f64(a)
    with np.errstate(all="ignore"):
        out = np.full(v.shape, np.nan)
        out[v == 0.0], out[v == 1.0] = -np.inf, np.inf
        ok = (v > 0.0) & (v < 1.0)
        if ok.any():
            t = v[ok]
            q = np.minimum(t, 1.0 - t)                 # 1 - t is exact for t >= 0.5
            x = _erfinv_core(np.abs(1.0 - 2.0 * t), 2.0 * q)
            out[ok] = np.where(t < 0.5, -x, np.where(t == 0.5, 0.0, x)) * math.sqrt(2.0)
    return _finish(out, a)


_SQRT_HALF = math.sqrt(0.5)


def log_ndtr(x):
    """log of the standard normal CDF, accurate for very negative x (asymptotic series)."""
    a = np.asarray(x)
    v = _f64(a)
    with np.errstate(all="ignore"):
        out = np.empty(v.shape)
        hi = v > 0.0
        out[hi] = np.log1p(-0.5 * _erfc64(v[hi] * _SQRT_HALF))
        mid = (v <= 0.0) & (v >= -20.0)
        out[mid] = np.log(0.5 * _erfc64(-v[mid] * _SQRT_HALF))
        lo = ~hi & ~mid                                   # x < -20, -inf and nan
        z = v[lo]
        iz2 = 1.0 / (z * z)
        s, term = np.ones_like(z), np.ones_like(z)
        for k in range(1, 12):                            # 1 - 1/z^2 + 3/z^4 - 15/z^6 ...
            term = -term * (2 * k - 1) * iz2
            s = s + term
        out[lo] = -0.5 * z * z - np.log(-z) - _HALF_LOG_2PI + np.log(s)
        out[lo & np.isnan(v)] = np.nan
    return _finish(out, a)
