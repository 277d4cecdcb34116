"""numpy kernels of the modified Bessel functions of the first kind: `i0`, `i1` and the
exponentially scaled `i0e`, `i1e` (power series below 20, Hankel's asymptotic series beyond;
~1e-15 relative). Edge values as PyTorch's: nan at +-inf unscaled, 0 (signed for i1e) scaled,
and i1(-0) = +0.
"""
import numpy as np

from .special_kernels import _f64, _finish

__all__ = ["i0", "i1", "i0e", "i1e"]

def _bessel_i_scaled(nu, a):
    """exp(-|x|) I_nu(|x|) for finite a = |x| >= 0 (nu = 0 or 1): the power series
    (positive terms, no cancellation) up to 20, Hankel's asymptotic series beyond."""
    out = np.empty(a.shape)
    small = a <= 20.0
    z = a[small]
    q = 0.25 * z * z
    term = np.ones_like(z) if nu == 0 else 0.5 * z
    s = term.copy()
    for k in range(1, 80):
        term = term * q / (k * (k + nu))
        s = s + term
    out[small] = s * np.exp(-z)
    z = a[~small]
    mu = 4.0 * nu * nu
    term, s = np.ones_like(z), np.ones_like(z)
    for k in range(1, 30):                        # sum (-1)^k prod(mu - (2j-1)^2) / (k! (8z)^k)
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * z)
        s = s + term
    out[~small] = s / np.sqrt(2.0 * np.pi * z)
    return out


def _bessel(nu, x, scaled):
    a = np.asarray(x)
    v = _f64(a)
    with np.errstate(all="ignore"):
        fin = np.isfinite(v)
        out = np.full(v.shape, np.nan)
        r = _bessel_i_scaled(nu, np.abs(v[fin]))
        if not scaled:
            r = r * np.exp(np.abs(v[fin]))
        if nu == 1:                                    # I1 is odd; +0 at -0 as PyTorch
            r = np.where(v[fin] == 0, 0.0, np.copysign(r, v[fin]))
        out[fin] = r
        if scaled:                                     # PyTorch: 0 (signed for i1e) at +-inf
            inf = np.isinf(v)
            out[inf] = 0.0 if nu == 0 else np.copysign(0.0, v[inf])
    return _finish(out, a)


def i0(x):
    """The modified Bessel function of the first kind of order 0 (nan at +-inf, as PyTorch)."""
    return _bessel(0, x, False)


def i1(x):
    """Order 1 (odd)."""
    return _bessel(1, x, False)


def i0e(x):
    """exp(-|x|) i0(x)."""
    return _bessel(0, x, True)


def i1e(x):
    """exp(-|x|) i1(x)."""
    return _bessel(1, x, True)
