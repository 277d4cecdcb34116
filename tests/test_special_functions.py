"""Special functions (lgamma, digamma, polygamma, erfc, erfinv, mvlgamma and `tracegrad.special`):
values against PyTorch on dense grids with the edge values (poles, zeros, infinities, nan)
in float32 and float64, against high-precision references (mpmath, when installed) where
PyTorch's own float64 kernels are less accurate, gradients to second order by finite
differences, PyTorch's gradients, compiled == eager on the numpy and jax backends, integer
promotion, in-place variants and errors."""
import math

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import special as S

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(1234)
EDGES = np.array([0.0, -0.0, -1.0, -2.0, -7.0, 1.0, 2.0, np.inf, -np.inf, np.nan, 1e-30,
                  -1e-30, 1e30, -1e30, 0.5, -0.5, 171.6, 2.5e305])
EDGES32 = EDGES[~(np.isfinite(EDGES) & (np.abs(EDGES) > 1e38))]
GRID = np.concatenate([np.linspace(-30, 30, 6001) + 1e-7, RNG.uniform(-50, 50, 2000),
                       np.exp(RNG.uniform(-30, 30, 1000)), np.linspace(0.5, 3, 1001)])
UNIT = np.concatenate([np.linspace(-1, 1, 4001), 1 - np.exp(-RNG.uniform(0, 36, 500)),
                       -1 + np.exp(-RNG.uniform(0, 36, 500)), np.exp(-RNG.uniform(0, 700, 300))])
UNIT_EDGES = np.array([-1.0, 1.0, 1.5, -1.5, 0.0, -0.0, np.nan, np.inf, -np.inf])
PROB = np.concatenate([RNG.uniform(0, 1, 2000), np.exp(-RNG.uniform(0, 690, 500)),
                       [0.0, 1.0, 0.5, 1.5, -0.5, np.nan, 1 - 2 ** -53]])
TOL = {np.float32: dict(rtol=2e-6, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}

# (tracegrad function, torch function, float64 inputs)
CASES = {
    "lgamma": (tg.lgamma, torch.lgamma, GRID),
    "digamma": (tg.digamma, torch.digamma, GRID),
    "erfc": (tg.erfc, torch.erfc, np.linspace(-30, 30, 6001)),
    "erfinv": (tg.erfinv, torch.erfinv, UNIT),
    "ndtri": (S.ndtri, torch.special.ndtri, PROB),
    "log_ndtr": (S.log_ndtr, torch.special.log_ndtr, np.linspace(-1000, 40, 5001)),
    "entr": (S.entr, torch.special.entr, np.linspace(-2, 20, 2001)),
    "sinc": (S.sinc, torch.special.sinc, np.linspace(-20, 20, 4001)),
    "ndtr": (S.ndtr, torch.special.ndtr, np.linspace(-40, 40, 4001)),
    "i0": (tg.i0, torch.i0, np.concatenate([np.linspace(-40, 40, 4001),
                                            np.linspace(-720, 720, 1001)])),
    "i1": (S.i1, torch.special.i1, np.linspace(-720, 720, 4001)),
    "i0e": (S.i0e, torch.special.i0e, np.linspace(-800, 800, 4001)),
    "i1e": (S.i1e, torch.special.i1e, np.linspace(-800, 800, 4001)),
}


def _cmp(ours, theirs, rtol, atol):
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    inf = np.isinf(theirs)
    assert np.array_equal(ours[inf], theirs[inf])
    ok = np.isfinite(theirs)
    np.testing.assert_allclose(ours[ok], theirs[ok], rtol=rtol, atol=atol)




@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_match_torch_on_grids(name, dtype):
    f, tf, x = CASES[name]
    x = x.astype(dtype)
    ours = f(tg.tensor(x)).numpy()
    assert ours.dtype == dtype
    theirs = tf(torch.tensor(x)).numpy()
    tol = dict(TOL[dtype])
    if name == "digamma":
        # PyTorch's digamma is ~1e-9 relative in float64 (and 2e-4 in float32 near its root
        # 1.4616): the high-precision comparison below is the strict one
        tol = dict(rtol=1e-8, atol=1e-9) if dtype == np.float64 else dict(rtol=2e-6, atol=3e-6)
    if name == "lgamma" and dtype == np.float64:
        tol["atol"] = 1e-12                 # near the zeros of lgamma below 0
    if name in ("i0", "i1") and dtype == np.float32:
        x = x[np.abs(x) < 88]            # PyTorch's float32 exp(x) overflows first beyond
        ours, theirs = f(tg.tensor(x)).numpy(), tf(torch.tensor(x)).numpy()
    if name in ("log_ndtr", "ndtr", "entr") and dtype == np.float32:
        tol["rtol"] = 1e-5                  # PyTorch evaluates these in float32 arithmetic
    _cmp(ours, theirs, **tol)


@pytest.mark.parametrize("fname", ["lgamma", "digamma", "erfc", "erfinv"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_edge_values_match_torch(fname, dtype):
    x = (UNIT_EDGES if fname == "erfinv" else EDGES32 if dtype == np.float32 else EDGES)
    x = x.astype(dtype)
    ours = getattr(tg, fname)(tg.tensor(x)).numpy()
    theirs = getattr(torch, fname)(torch.tensor(x)).numpy()
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    fin = ~np.isnan(theirs)
    np.testing.assert_allclose(ours[fin], theirs[fin], rtol=2e-6)   # torch's float digamma
    # signs of zeros and infinities too (digamma(-0) = +inf, erfinv(-0) = -0)
    assert np.array_equal(np.signbit(ours[fin]), np.signbit(theirs[fin]))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6])
def test_polygamma_matches_torch(n):
    pos = np.concatenate([np.linspace(0.0123, 30, 1200), np.exp(RNG.uniform(-10, 10, 300))])
    neg = np.linspace(-9.7377, -0.0123, 400)
    # PyTorch's trigamma is ~5e-8 relative; below 0 its sums cancel (1e-7 relative at
    # half-integers, where the reflection formula used here is exact: see the mpmath test)
    for x, rtol in ((pos, 5e-8 if n == 1 else 1e-12), (neg, 1e-6)):
        _cmp(tg.polygamma(n, tg.tensor(x)).numpy(),
             torch.polygamma(n, torch.tensor(x)).numpy(), rtol=rtol, atol=0)
        x32 = x.astype(np.float32)
        _cmp(tg.polygamma(n, tg.tensor(x32)).numpy(),
             torch.polygamma(n, torch.tensor(x32)).numpy(), rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_polygamma_edges_match_torch(n):
    # PyTorch's trigamma at a negative integer is a huge finite number (sin(pi x) != 0 in
    # floating point); tracegrad gives the pole's +inf there: compare elsewhere
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -0.5, 1e-30, 2.5e305]
                 + ([] if n == 1 else [-1.0, -2.0, -1e30]))
    _cmp(tg.polygamma(n, tg.tensor(x)).numpy(), torch.polygamma(n, torch.tensor(x)).numpy(),
         rtol=1e-7, atol=0)
    assert tg.polygamma(1, tg.tensor([-3.0])).item() == math.inf


def test_high_precision_reference():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    x = np.concatenate([GRID[::40], [1.0 + 1e-7, 2.0 - 1e-7, -2.4999, 1e-300, -9.5, -2.5]])
    lg = np.array([float(mpmath.log(abs(mpmath.gamma(v)))) for v in x])
    np.testing.assert_allclose(tg.lgamma(tg.tensor(x)).numpy(), lg, rtol=2e-13, atol=1e-14)
    dg = np.array([float(mpmath.digamma(v)) for v in x])
    np.testing.assert_allclose(tg.digamma(tg.tensor(x)).numpy(), dg, rtol=1e-13, atol=1e-14)
    for n in (1, 2, 5):
        pg = np.array([float(mpmath.polygamma(n, v)) for v in x[::3]])
        np.testing.assert_allclose(tg.polygamma(n, tg.tensor(x[::3])).numpy(), pg, rtol=1e-13)
    y = UNIT[::20]
    ei = np.array([float(mpmath.erfinv(v)) for v in y])
    np.testing.assert_allclose(tg.erfinv(tg.tensor(y)).numpy(), ei, rtol=1e-15, atol=1e-300)


def test_integer_and_bool_operands_promote_like_torch():
    for f, tf in [(tg.lgamma, torch.lgamma), (tg.digamma, torch.digamma),
                  (tg.erfc, torch.erfc), (tg.erfinv, torch.erfinv), (S.entr, torch.special.entr),
                  (S.ndtri, torch.special.ndtri), (S.sinc, torch.special.sinc),
                  (S.exp2, torch.special.exp2), (S.log_ndtr, torch.special.log_ndtr),
                  (S.i0, torch.special.i0), (S.i1e, torch.special.i1e)]:
        for data in ([0, 1, 2, -3], [True, False]):
            ours, theirs = f(tg.tensor(data)), tf(torch.tensor(data))
            assert str(ours.dtype) == str(theirs.dtype)
            _cmp(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-7)
    assert tg.polygamma(1, tg.tensor([1, 2])).dtype == tg.float32
    assert tg.mvlgamma(tg.tensor([3, 4]), 2).dtype == tg.float32


def _f64(*data):
    return [tg.tensor(d, dtype=tg.float64, requires_grad=True) for d in data]


GRAD_FUNCS = {
    "lgamma": (tg.lgamma, [0.3, 1.7, -2.5, 6.0]),
    "digamma": (tg.digamma, [0.3, 1.7, -2.5, 6.0]),
    "polygamma1": (lambda x: tg.polygamma(1, x), [0.3, 1.7, -2.5, 6.0]),
    "polygamma3": (lambda x: tg.polygamma(3, x), [0.3, 1.7, -2.5, 6.0]),
    "erfc": (tg.erfc, [-1.5, 0.0, 0.7, 2.5]),
    "erfinv": (tg.erfinv, [-0.9, 0.0, 0.3, 0.99]),
    "mvlgamma": (lambda x: tg.mvlgamma(x, 3), [1.3, 2.0, 5.5]),
    "ndtri": (S.ndtri, [0.01, 0.3, 0.5, 0.97]),
    "log_ndtr": (S.log_ndtr, [-30.0, -3.0, 0.2, 4.0]),
    "entr": (S.entr, [0.1, 0.5, 2.0]),
    "sinc": (S.sinc, [-1.3, 0.2, 0.5, 2.7]),
    "ndtr": (S.ndtr, [-3.0, 0.0, 1.5]),
    "exp2": (S.exp2, [-1.0, 0.5, 3.0]),
    "i0": (tg.i0, [-2.5, 0.3, 4.0]),
    "i1": (S.i1, [-2.5, 0.3, 4.0]),
    "i0e": (S.i0e, [-2.5, 0.3, 25.0]),
    "i1e": (S.i1e, [-2.5, 0.3, 25.0]),
}


@pytest.mark.parametrize("name", sorted(GRAD_FUNCS))
def test_gradcheck_and_gradgradcheck(name):
    f, data = GRAD_FUNCS[name]
    x, = _f64(data)
    assert tg.autograd.gradcheck(f, (x,))
    assert tg.autograd.gradgradcheck(f, (x,))


def test_xlog1py_gradients_and_values_match_torch():
    xs = [0.0, 0.0, 2.0, -1.5, 0.0]
    ys = [-1.0, float("nan"), 1e-9, 3.0, 0.5]
    x, y = _f64(xs, ys)
    out = S.xlog1py(x, y)
    out.sum().backward()
    tx = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
    ty = torch.tensor(ys, dtype=torch.float64, requires_grad=True)
    tout = torch.special.xlog1py(tx, ty)
    tout.sum().backward()
    _cmp(out.detach().numpy(), tout.detach().numpy(), 1e-15, 0)
    _cmp(x.grad.numpy(), tx.grad.numpy(), 1e-15, 0)
    _cmp(y.grad.numpy(), ty.grad.numpy(), 1e-15, 0)
    assert type(out.grad_fn).__name__ == type(tout.grad_fn).__name__
    a, b = _f64([0.5, 2.0], [0.3, 4.0])
    assert tg.autograd.gradgradcheck(S.xlog1py, (a, b))
    assert S.xlog1py(2.0, tg.tensor([1.0])).item() == pytest.approx(2 * math.log(2))


# PyTorch's gradients at the points where the formulas meet their edges
TORCH_GRAD_POINTS = {
    "lgamma": ([0.3, -2.5, 1.0, 50.0], torch.lgamma),
    "digamma": ([0.3, -2.5, 1.0, 50.0], torch.digamma),
    "erfc": ([-2.0, 0.0, 3.0], torch.erfc),
    "erfinv": ([-0.5, 0.0, 0.999], torch.erfinv),
    "entr": ([0.0, 0.5, -1.0], torch.special.entr),
    "sinc": ([0.0, 1e-20, 0.5, 3.0], torch.special.sinc),
    "ndtri": ([0.2, 0.5, 0.999], torch.special.ndtri),
    "log_ndtr": ([-50.0, -2.0, 0.0, 8.0], torch.special.log_ndtr),
    "i0": ([0.0, 0.5, -3.0, 30.0], torch.special.i0),
    "i1": ([0.0, 0.5, -3.0, 30.0], torch.special.i1),
    "i0e": ([0.0, 0.5, -3.0, 30.0], torch.special.i0e),
    "i1e": ([0.0, 0.5, -3.0, 30.0], torch.special.i1e),
}


@pytest.mark.parametrize("name", sorted(TORCH_GRAD_POINTS))
def test_first_and_second_gradients_match_torch(name):
    data, tf = TORCH_GRAD_POINTS[name]
    f = getattr(S, name, None) or getattr(tg, name)
    x, = _f64(data)
    g, = tg.autograd.grad(f(x).sum(), x, create_graph=True)
    tx = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    tgr, = torch.autograd.grad(tf(tx).sum(), tx, create_graph=True)
    _cmp(g.detach().numpy(), tgr.detach().numpy(), 1e-9, 1e-12)
    if name in ("entr", "sinc"):
        return                  # PyTorch's second derivative at 0 is not the point here
    gg, = tg.autograd.grad(g.sum(), x)
    tgg, = torch.autograd.grad(tgr.sum(), tx)
    _cmp(gg.numpy(), tgg.numpy(), 1e-7, 1e-12)


def test_grad_fn_names_match_torch():
    x = tg.tensor([0.3], requires_grad=True)
    tx = torch.tensor([0.3], requires_grad=True)
    for f, tf in [(tg.lgamma, torch.lgamma), (tg.digamma, torch.digamma),
                  (lambda t: tg.polygamma(2, t), lambda t: torch.polygamma(2, t)),
                  (lambda t: tg.polygamma(0, t), lambda t: torch.polygamma(0, t)),
                  (tg.erfc, torch.erfc), (tg.erfinv, torch.erfinv), (S.entr, torch.special.entr),
                  (S.ndtri, torch.special.ndtri), (S.log_ndtr, torch.special.log_ndtr),
                  (S.sinc, torch.special.sinc), (tg.i0, torch.i0), (S.i1, torch.special.i1),
                  (S.i0e, torch.special.i0e), (S.i1e, torch.special.i1e)]:
        assert type(f(x).grad_fn).__name__ == type(tf(tx).grad_fn).__name__


def _program(x):
    y = tg.lgamma(x) + x.digamma() + tg.polygamma(2, x) + x.polygamma(1) + x.erfc()
    z = (x / 8).erfinv() + S.ndtri(tg.sigmoid(x)) + S.log_ndtr(x) + S.sinc(x) + S.entr(x.abs())
    return (y * z).sum() + tg.mvlgamma(x.abs() + 2, 2).sum() + S.xlog1py(x, x.abs()).sum()


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
def test_compiled_matches_eager(backend, dtype):
    if backend == "jax":
        pytest.importorskip("jax")
    data = [0.3, 1.7, -2.5, 6.0, -0.7, 0.05]
    x = tg.tensor(data, dtype=dtype, requires_grad=True)
    _program(x).backward()
    eager = x.grad.clone()
    x.grad = None
    cf = tg.compile(_program, backend=backend)
    for _ in range(2):
        out = cf(x)
        out.backward()
        ref = _program(x.detach())
        assert np.isfinite(ref.item())
        tol = 1e-5 if dtype == tg.float32 else 1e-11
        np.testing.assert_allclose(out.item(), ref.item(), rtol=tol)
        np.testing.assert_allclose(x.grad.numpy(), eager.numpy(), rtol=tol, atol=tol)
        x.grad = None


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_compiled_edge_values_match_eager(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    fns = [tg.lgamma, tg.digamma, tg.erfc, S.entr, S.sinc, S.log_ndtr, S.i0, S.i1, S.i0e,
           S.i1e]
    fns += [lambda t, n=n: tg.polygamma(n, t) for n in (1, 2, 3)]
    for dtype in (tg.float32, tg.float64):
        x = tg.tensor(EDGES32 if dtype == tg.float32 else EDGES, dtype=dtype)
        u = tg.tensor(UNIT_EDGES, dtype=dtype)
        for f, arg in [(f, x) for f in fns] + [(tg.erfinv, u), (S.ndtri, u)]:
            cf = tg.compile(f, backend=backend)
            cf(arg)                                     # the first call traces (eagerly)
            # jax's float32 kernels are a few ulps off eager's (float64-then-rounded) ones
            f32 = dtype == tg.float32
            _cmp(cf(arg).numpy(), f(arg).numpy(), 3e-6 if f32 else 1e-6, 1e-6 if f32 else 1e-300)


def test_in_place_variants():
    for name in ["lgamma", "digamma", "erfc", "erfinv", "erf", "sinc", "i0"]:
        x = tg.tensor([0.3, 0.5])
        v = x._version
        r = getattr(x, name + "_")()
        assert r is x and x._version == v + 1
        tx = torch.tensor([0.3, 0.5])
        getattr(tx, name + "_")()
        np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-6)
    x, tx = tg.tensor([0.3, 2.5]), torch.tensor([0.3, 2.5])
    x.polygamma_(2)
    tx.polygamma_(2)
    np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-6)
    x, tx = tg.tensor([2.3, 2.5]), torch.tensor([2.3, 2.5])
    x.mvlgamma_(2)
    tx.mvlgamma_(2)
    np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="can't be cast"):
        tg.tensor([1, 2]).lgamma_()
    leaf = tg.tensor([0.5], requires_grad=True)
    with pytest.raises(RuntimeError):
        leaf.digamma_()


def test_in_place_gradient():
    x = tg.tensor([0.3, 2.5], dtype=tg.float64, requires_grad=True)
    y = x * 1.0
    y.lgamma_()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tg.digamma(x.detach()).numpy())


def test_errors_match_torch():
    x = tg.tensor([1.0])
    with pytest.raises(RuntimeError, match="negative n"):
        tg.polygamma(-1, x)
    with pytest.raises(TypeError):
        tg.polygamma(1.0, x)
    with pytest.raises(TypeError):
        tg.polygamma(True, x)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        tg.mvlgamma(x, 0)


def test_mvlgamma_matches_torch():
    x = np.array([[2.3, 3.5, 10.0], [1.6, 4.0, 0.9]])
    for p in (1, 2, 4):
        _cmp(tg.mvlgamma(tg.tensor(x), p).numpy(), torch.mvlgamma(torch.tensor(x), p).numpy(),
             1e-12, 1e-13)
        _cmp(S.multigammaln(tg.tensor(x), p).numpy(),
             torch.special.multigammaln(torch.tensor(x), p).numpy(), 1e-12, 1e-13)


def test_special_namespace_names_and_aliases():
    assert S.gammaln is tg.lgamma and S.psi is tg.digamma and S.expit is tg.sigmoid
    x = np.linspace(-3, 3, 13)
    p = np.linspace(0.05, 0.95, 13)
    for name, arg, kw in [("expit", x, {}), ("logit", p, {}), ("logit", p, {"eps": 0.1}),
                          ("log1p", p, {}), ("expm1", x, {}), ("exp2", x, {}), ("erf", x, {}),
                          ("round", x, {}), ("logsumexp", x, {"dim": 0}),
                          ("softmax", x, {"dim": 0}), ("log_softmax", x, {"dim": 0}),
                          ("xlogy", p, {"other": p[::-1].copy()})]:
        ours = getattr(S, name)(tg.tensor(arg), **{k: tg.tensor(v) if isinstance(
            v, np.ndarray) else v for k, v in kw.items()})
        theirs = getattr(torch.special, name)(torch.tensor(arg), **{k: torch.tensor(v) if
                                                                     isinstance(v, np.ndarray)
                                                                     else v for k, v in kw.items()})
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-14)
    assert set(S.__all__) <= set(dir(torch.special))


@pytest.mark.parametrize("name", ["i0", "i1", "i0e", "i1e"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bessel_edge_values_match_torch(name, dtype):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 800.0, -800.0, 88.0, -88.0, 1e-30],
                 dtype=dtype)           # (float32 i0/i1 overflow to inf at 800 in both)
    ours = getattr(S, name)(tg.tensor(x)).numpy()
    theirs = getattr(torch.special, name)(torch.tensor(x)).numpy()
    assert ours.dtype == theirs.dtype
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    fin = ~np.isnan(theirs)
    np.testing.assert_allclose(ours[fin], theirs[fin], rtol=2e-6, atol=0)
    assert np.array_equal(np.signbit(ours[fin]), np.signbit(theirs[fin]))
