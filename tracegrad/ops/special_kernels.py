"""numpy kernels of the special functions numpy lacks: `lgamma`, `digamma`, `polygamma`,
`erfc`, `erfinv` (plain functions of arrays; the primitives live in ops/special_prim.py).

Every kernel computes in float64 and rounds once to the operand's dtype, so float32 results
are (nearly always) the correctly rounded ones. Edge values follow PyTorch 2.x:
lgamma is +inf at 0, the negative integers and +-inf; digamma(+0) = -inf, digamma(-0) = +inf,
nan at the negative integers and -inf; polygamma(n >= 1) is (-1)^(n+1) inf at the poles,
0 (n = 1) or nan (n >= 2) at +inf as PyTorch's Hurwitz zeta gives; erfinv(+-1) = +-inf and
nan outside [-1, 1]. One difference: PyTorch's trigamma at a negative integer is a huge finite
number (its sin(pi x) is not exactly 0 there); here it is +inf, the value at the pole.

Methods (all vectorised over the array):
- lgamma: Stirling's series after shifting x up to >= 15 by the recurrence; the reflection
  formula below 0.5, with sin(pi x) taken on x reduced mod 2 so large |x| stays exact.
- digamma / polygamma(n): the recurrence psi^(n)(x) = psi^(n)(x+1) - (-1)^n n! / x^(n+1) up
  to x >= 15 + n, then the asymptotic (Bernoulli) series; negative x by the reflection
  formula psi^(n)(x) = -pi^(n+1) P_n(cot(pi x)) - (-1)^(n+1) psi^(n)(1-x), where
  P_0 = c, P_(k+1)(c) = -(1 + c^2) P_k'(c) are the derivatives of cot.
- erf / erfc: math.erf / math.erfc per element (correctly rounded in float64; one Python
  call per element, as the repo's erf already does).
- erfinv: Giles' single-precision rational guess, then Halley steps on erf (or on erfc
  near +-1, where 1 - |y| is exact) to full float64 precision.
"""
import math

import numpy as np

__all__ = ["lgamma", "digamma", "polygamma", "erf", "erfc", "erfinv", "ndtri", "log_ndtr"]

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


# ---------------- erf, erfc, erfinv ----------------

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


# ---------------- modified Bessel functions I0, I1 (and exponentially scaled) ----------------

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
