"""numpy kernels of the gamma family numpy lacks: `lgamma`, `digamma`, `polygamma` and the
reparameterization gradient of Gamma draws (plain functions of arrays; the primitives live in
ops/special_prim.py and ops/random_dists.py; erf-family kernels are in special_kernels_erf.py,
Bessel ones in special_kernels_bessel.py).

Every kernel computes in float64 and rounds once to the operand's dtype, so float32 results
are (nearly always) the correctly rounded ones. Edge values follow PyTorch 2.x:
lgamma is +inf at 0, the negative integers and +-inf; digamma(+0) = -inf, digamma(-0) = +inf,
nan at the negative integers and -inf; polygamma(n >= 1) is (-1)^(n+1) inf at the poles,
0 (n = 1) or nan (n >= 2) at +inf as PyTorch's Hurwitz zeta gives. One difference: PyTorch's
trigamma at a negative integer is a huge finite number (its sin(pi x) is not exactly 0
there); here it is +inf, the value at the pole.

Methods (all vectorised over the array):
- lgamma: Taylor series about the zeros 1 and 2; elsewhere Stirling's series after shifting
  x up to >= 15 by the recurrence; the reflection formula below 0.5, with sin(pi x) taken on
  x reduced to [-1/2, 1/2] so large |x| stays exact.
- digamma / polygamma(n): the recurrence psi^(n)(x) = psi^(n)(x+1) - (-1)^n n! / x^(n+1) up
  to x >= 15 + n, then the asymptotic (Bernoulli) series; negative x by the reflection
  formula psi^(n)(x) = -pi^(n+1) P_n(cot(pi x)) - (-1)^(n+1) psi^(n)(1-x), where
  P_0 = c, P_(k+1)(c) = -(1 + c^2) P_k'(c) are the derivatives of cot.
- standard_gamma_grad: see its docstring.
"""
import math

import numpy as np

__all__ = ["lgamma", "digamma", "polygamma", "standard_gamma_grad"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
# Bernoulli numbers B_2k, k = 1..12
_B2K = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
        43867 / 798, -174611 / 330, 854513 / 138, -236364091 / 2730]


def _f64(x):
    return np.asarray(x, dtype=np.float64)


def _finish(r, like):
    """`r` (float64) in the result dtype of operand `like` (integers give the default float)."""
    return np.asarray(r, dtype=like.dtype) if like.dtype.kind == "f" else np.asarray(r)


def _is_pole(x):
    """0, -0 and the negative integers (and -inf)."""
    return (x <= 0) & (np.floor(x) == x)


def _abs_sinpi(x):
    """|sin(pi x)| with x reduced to [-1/2, 1/2] first (exact), so it is accurate near and
    exactly 0 at the integers."""
    return np.abs(np.sin(np.pi * (x - np.round(x))))


def _cotpi(x):
    """cot(pi x), relatively accurate also near the half-integers (its zeros): there it is
    tan(pi (1/2 - |r|)) with 1/2 - |r| exact."""
    r = x - np.round(x)                        # in [-1/2, 1/2], exact
    far = np.abs(r) > 0.25
    near_half = np.copysign(np.tan(np.pi * (0.5 - np.abs(r))), r)
    return np.where(far, near_half, 1.0 / np.tan(np.pi * r))


# ---------------- lgamma ----------------

def _lgamma_pos(x):
    """lgamma for x >= 0.5 (finite)."""
    prod = np.ones_like(x)
    z = x.copy()
    for _ in range(15):
        small = z < 15.0
        if not small.any():
            break
        prod = np.where(small, prod * z, prod)
        z = np.where(small, z + 1.0, z)
    iz2 = 1.0 / (z * z)
    s = np.zeros_like(z)
    for k in range(8, 0, -1):                   # sum B_2k / (2k (2k-1) z^(2k-1))
        s = s * iz2 + _B2K[k - 1] / (2 * k * (2 * k - 1))
    s = s / z
    return (z - 0.5) * np.log(z) - z + _HALF_LOG_2PI + s - np.log(prod)


def _zeta_minus_one(k, n=12):
    """zeta(k) - 1 for integer k >= 2 (Euler-Maclaurin after n - 2 terms), in float64."""
    head = sum(j ** -k for j in range(2, n))
    tail = n ** (1 - k) / (k - 1) + 0.5 * n ** -k
    rising = k                                  # k (k+1) ... (k + 2j - 2)
    for j in range(1, 8):
        tail += _B2K[j - 1] / math.factorial(2 * j) * rising * n ** (-k - 2 * j + 1)
        rising *= (k + 2 * j - 1) * (k + 2 * j)
    return head + tail


_EULER = 0.57721566490153286061
_ZM1 = [_zeta_minus_one(k) for k in range(2, 40)]          # zeta(k) - 1, k = 2..39
# lgamma(1 + z) = -gamma z + sum_k (-1)^k zeta(k) z^k / k;
# lgamma(2 + z) = (1 - gamma) z + sum_k (-1)^k (zeta(k) - 1) z^k / k   (|z| < 1)
_AT1 = [0.0, -_EULER] + [(-1) ** k * (1.0 + _ZM1[k - 2]) / k for k in range(2, 40)]
_AT2 = [0.0, 1.0 - _EULER] + [(-1) ** k * _ZM1[k - 2] / k for k in range(2, 40)]


def _lgamma_near(z, coefs):
    return np.polynomial.polynomial.polyval(z, coefs)


def lgamma(x):
    """log |Gamma(x)| elementwise."""
    a = _f64(x)
    with np.errstate(all="ignore"):
        out = np.full(a.shape, np.inf)
        fin = np.isfinite(a) & ~_is_pole(a)
        out[np.isnan(a)] = np.nan
        # near the zeros at 1 and 2 the Taylor series keeps the relative accuracy
        near1, near2 = fin & (np.abs(a - 1.0) <= 0.25), fin & (np.abs(a - 2.0) <= 0.25)
        out[near1] = _lgamma_near(a[near1] - 1.0, _AT1)
        out[near2] = _lgamma_near(a[near2] - 2.0, _AT2)
        pos = fin & (a >= 0.5) & ~near1 & ~near2
        if pos.any():
            out[pos] = _lgamma_pos(a[pos])
        neg = fin & (a < 0.5)
        if neg.any():
            v = a[neg]
            # Gamma(x) Gamma(1 - x) = pi / sin(pi x)
            out[neg] = (math.log(math.pi) - np.log(_abs_sinpi(v))
                        - _lgamma_pos(1.0 - v))
    return _finish(out, np.asarray(x))


# ---------------- digamma and polygamma ----------------

def _cot_derivative_polys(n):
    """Coefficients (lowest first) of P_n with d^n/dx^n cot(pi x) = pi^n P_n(cot(pi x))."""
    p = np.array([0.0, 1.0])                   # P_0(c) = c
    for _ in range(n):
        dp = p[1:] * np.arange(1, len(p))       # P'
        # -(1 + c^2) P'
        q = np.zeros(len(dp) + 2)
        q[:len(dp)] -= dp
        q[2:2 + len(dp)] -= dp
        p = q
    return p


def _fact_ratio(a, b=0):
    """a! / b! as a float, inf past float64's range (polygamma of order > 170)."""
    try:
        return math.factorial(a) / math.factorial(b)
    except OverflowError:
        return math.inf


def _psi_n_pos(n, x):
    """psi^(n)(x) for finite x > 0."""
    z = x.copy()
    acc = np.zeros_like(z)
    lim = 15.0 + n
    fact = _fact_ratio(n)
    sign = -1.0 if n % 2 == 0 else 1.0        # (-1)^(n+1)
    for _ in range(int(lim) + 1):
        small = z < lim
        if not small.any():
            break
        if n == 0:
            acc = np.where(small, acc - 1.0 / z, acc)
        else:
            acc = np.where(small, acc + sign * fact / z ** (n + 1), acc)
        z = np.where(small, z + 1.0, z)
    iz2 = 1.0 / (z * z)
    if n == 0:
        s = np.zeros_like(z)
        for k in range(10, 0, -1):              # sum B_2k / (2k z^2k)
            s = s * iz2 + _B2K[k - 1] / (2 * k)
        return acc + np.log(z) - 0.5 / z - s * iz2
    # (-1)^(n+1) [ (n-1)!/z^n + n!/(2 z^(n+1)) + sum_k B_2k (2k+n-1)!/(2k)! / z^(2k+n) ]
    s = np.zeros_like(z)
    for k in range(12, 0, -1):
        s = s * iz2 + _B2K[k - 1] * _fact_ratio(2 * k + n - 1, 2 * k)
    s = s * iz2
    head = _fact_ratio(n - 1) + fact * 0.5 / z
    return acc + sign * (head + s) / z ** n


def polygamma(n, x):
    """The n-th derivative of digamma elementwise (n = 0 is digamma)."""
    n = int(n)
    a = _f64(x)
    with np.errstate(all="ignore"):
        out = np.empty(a.shape)
        nan = np.isnan(a)
        pole = _is_pole(a) & np.isfinite(a)
        posinf, neginf = a == np.inf, a == -np.inf
        sign = -1.0 if n % 2 == 0 else 1.0     # (-1)^(n+1)
        out[nan] = np.nan
        if n == 0:
            out[pole] = np.where(a[pole] == 0, np.where(np.signbit(a[pole]), np.inf, -np.inf),
                                 np.nan)
            out[posinf], out[neginf] = np.inf, np.nan
        else:
            out[pole] = sign * np.inf
            out[posinf] = 0.0 if n == 1 else np.nan
            out[neginf] = np.nan if n == 1 else sign * np.inf
        fin = np.isfinite(a) & ~pole
        pos = fin & (a > 0)
        if pos.any():
            out[pos] = _psi_n_pos(n, a[pos])
        neg = fin & (a < 0)
        if neg.any():
            v = a[neg]
            c = _cotpi(v)
            pn = np.polynomial.polynomial.polyval(c, _cot_derivative_polys(n))
            out[neg] = -math.pi ** (n + 1) * pn - sign * _psi_n_pos(n, 1.0 - v)
    return _finish(out, np.asarray(x))


def digamma(x):
    """The logarithmic derivative of Gamma elementwise."""
    return polygamma(0, x)


# ---------------- the reparameterized gradient of Gamma draws ----------------

def standard_gamma_grad(alpha, x):
    """d x / d alpha at a fixed CDF value, for x drawn from Gamma(alpha, 1): the implicit
    reparameterization gradient -(dP(alpha, x)/d alpha) / pdf(x; alpha).

    From the series P(alpha, x) = x^alpha e^-x sum_k x^k / Gamma(alpha + k + 1), the ratio is
    -sum_k r_k (log x - psi(alpha + k + 1)) with r_0 = x / alpha, r_k = r_(k-1) x / (alpha + k)
    (positive terms times a slowly varying factor; psi by its recurrence). Exact to ~1e-14;
    each element sums until its terms are negligible (about x - alpha + 12 sqrt(x) terms).
    Above alpha = 1e5 the Wilson-Hilferty transform (x = alpha (1 - 1/(9 alpha) +
    z / (3 sqrt(alpha)))^3 at fixed z) gives it instead (relative error ~1e-8)."""
    a = np.asarray(alpha, dtype=np.float64)
    v = np.asarray(x, dtype=np.float64)
    a, v = np.broadcast_arrays(a, v)
    out = np.empty(a.shape)
    with np.errstate(all="ignore"):
        big = a > 1e5
        if big.any():
            ab, xb = a[big], v[big]
            c = 1.0 - 1.0 / (9.0 * ab)
            z = (np.cbrt(xb / ab) - c) * 3.0 * np.sqrt(ab)
            w = c + z / (3.0 * np.sqrt(ab))
            dw = 1.0 / (9.0 * ab * ab) - z / (6.0 * ab ** 1.5)
            out[big] = w ** 3 + 3.0 * ab * w * w * dw
        idx = np.flatnonzero(~big)
        aa, xx = a.ravel()[idx], v.ravel()[idx]
        lx = np.log(xx)
        r = xx / aa
        psi = digamma(aa + 1.0)
        s = r * (lx - psi)
        kmax = np.maximum(0.0, xx - aa) + 12.0 * np.sqrt(xx) + 40.0
        k = 1
        while idx.size:
            psi = psi + 1.0 / (aa + k)
            r = r * xx / (aa + k)
            s = s + r * (lx - psi)
            k += 1
            done = kmax < k
            if done.any():
                out.ravel()[idx[done]] = -s[done]
                keep = ~done
                idx, aa, xx, lx, r, psi, s, kmax = (t[keep] for t in (idx, aa, xx, lx, r, psi,
                                                                       s, kmax))
    return out
