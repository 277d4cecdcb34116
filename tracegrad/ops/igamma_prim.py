"""The regularized incomplete gamma functions `igamma(a, x)` = P(a, x) and `igammac(a, x)` =
Q(a, x) = 1 - P(a, x) (torch.igamma / torch.special.gammainc), and their in-place forms.

The kernel (numpy; no scipy) computes in float64: the power series of P where x < a + 1, the
continued fraction of Q (modified Lentz) elsewhere, until converged (at most 5000 terms: a up
to about 1e5). Special values are PyTorch's (Cephes'): a = 0 gives P = 1 for x > 0, x = 0 gives
P = 0 for a > 0; negative arguments, and a = x = 0, give NaN; x = inf gives P = 1 and a = inf
(x finite) P = 0. Floating tensors only (integers raise PyTorch's NotImplementedError).

Gradients: with respect to x, PyTorch's exp((a - 1) log x - x - lgamma(a)) (negated for
igammac), in tracegrad ops; with respect to a, PyTorch has none and its backward raises, as
ours does.
"""
import numpy as np

from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import TracegradNotImplementedError, op_error
from . import elementwise as E
from . import shape_rules as SR
from .primitive import Primitive, inplace_of, promote

__all__ = ["igamma", "igammac"]

_TERMS = 5000
_TINY = 1e-300


def _lower_series(a, x):
    term = 1.0 / a
    total = term.copy()
    for n in range(1, _TERMS):
        term = term * x / (a + n)
        total = total + term
        if np.all(np.abs(term) < np.abs(total) * 1e-17):
            break
    return total


def _upper_fraction(a, x):
    b = x + 1.0 - a
    c = np.full_like(x, 1.0 / _TINY)
    d = 1.0 / np.where(np.abs(b) < _TINY, _TINY, b)
    h = d.copy()
    for i in range(1, _TERMS):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = 1.0 / np.where(np.abs(d) < _TINY, _TINY, d)
        c = b + an / np.where(np.abs(c) < _TINY, _TINY, c)
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1.0) < 1e-16):
            break
    return h


def _regularized(a, x, upper):
    """P(a, x), or Q(a, x) when `upper`, elementwise in float64."""
    from .special_kernels import lgamma
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    out = np.full(a.shape, np.nan)
    with np.errstate(all="ignore"):
        ok = (a > 0) & (x > 0) & np.isfinite(a) & np.isfinite(x)
        aa, xx = a[ok], x[ok]
        pref = np.exp(aa * np.log(xx) - xx - lgamma(aa))
        series = xx < aa + 1.0
        r = np.empty(aa.shape)          # P, or Q when `upper`: each side without 1 - (1 - r)
        if series.any():
            p = pref[series] * _lower_series(aa[series], xx[series])
            r[series] = 1.0 - p if upper else p
        frac = ~series
        if frac.any():
            q = pref[frac] * _upper_fraction(aa[frac], xx[frac])
            r[frac] = q if upper else 1.0 - q
        out[ok] = np.clip(r, 0.0, 1.0)
        # PyTorch's (Cephes') special values, as P
        lower = np.full(a.shape, np.nan)
        lower[(a == 0) & (x > 0)] = 1.0
        lower[(x == 0) & (a > 0)] = 0.0
        lower[(x == np.inf) & (a >= 0) & ~np.isnan(a)] = 1.0
        lower[(a == np.inf) & np.isfinite(x) & (x >= 0)] = 0.0
        edge = ~ok & ~np.isnan(lower)
        out[edge] = 1.0 - lower[edge] if upper else lower[edge]
    return out


def _kernel(name, upper):
    def kernel(a, x):
        dt = np.result_type(a, x)
        if dt.kind != "f":
            raise op_error(TracegradNotImplementedError, name, f'"{name}_cpu" not implemented '
                           f"for '{D.scalar_type_name(D.from_numpy_dtype(dt))}'")
        return _regularized(a, x, upper).astype(dt)
    return kernel


def _vjp(upper):
    def vjp(g, ins, out, n):
        from .special_prim import lgamma
        a, x = ins
        if n.needs[0]:
            raise op_error(TracegradNotImplementedError, None, "the derivative for "
                           f"'{n.prim.name.rstrip('_')}: input' is not implemented.")
        if not n.needs[1]:
            return (None, None)
        d = E.exp(E.sub(E.sub(E.mul(E.sub(a, 1.0), E.log(x)), x), lgamma(a)))
        gx = E.mul(g, E.neg(d) if upper else d)
        return (None, E._st(gx, n.shapes[1]))
    return vjp


IGAMMA = Primitive("igamma", _kernel("igamma", False), vjp=_vjp(False), saves=(0, 1),
                   dtype_rule=promote, shape_rule=SR.broadcast, elementwise=True)
IGAMMAC = Primitive("igammac", _kernel("igammac", True), vjp=_vjp(True), saves=(0, 1),
                    dtype_rule=promote, shape_rule=SR.broadcast, elementwise=True)
IGAMMA_, IGAMMAC_ = inplace_of(IGAMMA), inplace_of(IGAMMAC)


def igamma(input, other):
    """The regularized lower incomplete gamma function P(input, other).

    >>> igamma(tensor([1.0]), tensor([0.5]))
    tensor([0.3935])
    """
    return dispatch(IGAMMA, (input, other))


def igammac(input, other):
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P."""
    return dispatch(IGAMMAC, (input, other))


def igamma_(input, other):
    """`igamma` in place."""
    return dispatch(IGAMMA_, (input, other))


def igammac_(input, other):
    """`igammac` in place."""
    return dispatch(IGAMMAC_, (input, other))
