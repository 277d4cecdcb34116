"""Gamma, Poisson, Beta and Dirichlet (tracegrad.distributions) against torch.distributions:
log_prob, mean, mode, variance, entropy and KL values and gradients, argument and support
validation, samples (reproducible under manual_seed, right moments, in the support),
reparameterized samples (the implicit gamma gradient against a high-precision reference and
PyTorch's approximation; unbiased gradients of expectations), `tracegrad.poisson`, and
compiled (numpy, jax) == eager, draws included."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad import distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions
RNG = np.random.default_rng(11)


def _both(a, dtype=np.float64, grad=False):
    a = np.asarray(a, dtype)
    return tg.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _close(ours, theirs, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol,
                               atol=atol)


def _params(n=6):
    return RNG.uniform(0.2, 5.0, n), RNG.uniform(0.2, 5.0, n)


def _make(name, a, b):
    """The pair of distributions `name` built from parameter tensors a (and b)."""
    if name == "Gamma":
        return D.Gamma(a[0], b[0]), TD.Gamma(a[1], b[1])
    if name == "Beta":
        return D.Beta(a[0], b[0]), TD.Beta(a[1], b[1])
    if name == "Poisson":
        return D.Poisson(a[0]), TD.Poisson(a[1])
    return D.Dirichlet(a[0]), TD.Dirichlet(a[1])


def _values(name, shape):
    if name == "Gamma":
        return RNG.uniform(0.01, 6.0, shape)
    if name == "Beta":
        return RNG.uniform(0.01, 0.99, shape)
    if name == "Poisson":
        return RNG.integers(0, 9, shape).astype(float)
    v = RNG.uniform(0.05, 1.0, shape)
    return v / v.sum(-1, keepdims=True)


@pytest.mark.parametrize("name", ["Gamma", "Beta", "Poisson", "Dirichlet"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_statistics_and_log_prob_match_torch(name, dtype):
    ca, cb = _params()
    if name == "Dirichlet":
        ca = RNG.uniform(0.3, 4.0, (3, 4))
    a, b = _both(ca, dtype, grad=True), _both(cb, dtype, grad=True)
    ours, theirs = _make(name, a, b)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-5)
    for stat in ("mean", "mode", "variance", "stddev"):
        o, t = getattr(ours, stat), getattr(theirs, stat)
        assert o.dtype == getattr(tg, str(t.dtype).split(".")[1])
        _close(o, t, **tol)
    v = _values(name, tuple(theirs.batch_shape) + tuple(theirs.event_shape))
    vo, vt = _both(v, dtype)
    lo, lt = ours.log_prob(vo), theirs.log_prob(vt)
    _close(lo, lt, **tol)
    terms = [(lo, lt)]
    if name != "Poisson":
        _close(ours.entropy(), theirs.entropy(), **tol)
        terms.append((ours.entropy(), theirs.entropy()))
    # gradients of log_prob + entropy with respect to the parameters
    so = sum(x.sum() for x, _ in terms)
    st = sum(x.sum() for _, x in terms)
    params_o = [a[0]] + ([b[0]] if name in ("Gamma", "Beta") else [])
    params_t = [a[1]] + ([b[1]] if name in ("Gamma", "Beta") else [])
    go = tg.autograd.grad(so, params_o)
    gt = torch.autograd.grad(st, params_t)
    for x, y in zip(go, gt):     # PyTorch's float64 trigamma is only ~5e-8 relative
        _close(x, y, **(dict(rtol=1e-7, atol=1e-9) if dtype == np.float64
                        else dict(rtol=1e-4, atol=1e-4)))


def test_edge_values_match_torch():
    torch.set_default_dtype(torch.float64)
    tg.set_default_dtype(tg.float64)
    g, tgm = D.Gamma(tg.tensor([2.0, 0.5, 1.0]), tg.tensor([3.0, 1.0, 2.0])), \
        TD.Gamma(torch.tensor([2.0, 0.5, 1.0]), torch.tensor([3.0, 1.0, 2.0]))
    _close(g.log_prob(tg.tensor([0.0, 0.0, 0.0])), tgm.log_prob(torch.tensor([0.0, 0.0, 0.0])))
    b, tb = D.Beta(tg.tensor([0.5, 2.0]), tg.tensor([1.0, 0.7])), \
        TD.Beta(torch.tensor([0.5, 2.0]), torch.tensor([1.0, 0.7]))
    np.testing.assert_array_equal(np.isnan(b.mode.numpy()), np.isnan(tb.mode.numpy()))
    _close(b.log_prob(tg.tensor([0.0, 1.0])), tb.log_prob(torch.tensor([0.0, 1.0])))
    p, tp = D.Poisson(tg.tensor([0.0, 3.5])), TD.Poisson(torch.tensor([0.0, 3.5]))
    _close(p.log_prob(tg.tensor([0.0, 2.0])), tp.log_prob(torch.tensor([0.0, 2.0])))
    _close(p.log_prob(tg.tensor([1.0, 0.0])), tp.log_prob(torch.tensor([1.0, 0.0])))
    d, td = D.Dirichlet(tg.tensor([[0.5, 0.7, 0.2], [2.0, 0.5, 0.5]])), \
        TD.Dirichlet(torch.tensor([[0.5, 0.7, 0.2], [2.0, 0.5, 0.5]]))
    _close(d.mode, td.mode)
    with pytest.raises(NotImplementedError):
        p.entropy()


@pytest.mark.parametrize("name", ["Gamma", "Beta", "Poisson", "Dirichlet"])
def test_kl_matches_torch(name):
    shape = (3, 4) if name == "Dirichlet" else (5,)
    p1, p2, q1, q2 = (RNG.uniform(0.3, 4.0, shape) for _ in range(4))
    a, b = _both(p1, grad=True), _both(p2)
    c, d = _both(q1), _both(q2)
    po, pt = _make(name, a, b)
    qo, qt = _make(name, c, d)
    ko, kt = D.kl_divergence(po, qo), TD.kl_divergence(pt, qt)
    _close(ko, kt, rtol=1e-8, atol=1e-10)      # PyTorch's float64 digamma: ~1e-9 relative
    go, = tg.autograd.grad(ko.sum(), a[0])
    gt, = torch.autograd.grad(kt.sum(), a[1])
    _close(go, gt, rtol=1e-7, atol=1e-9)


def test_validation_errors_match_torch():
    # validate_args=True on both sides: once torch.compile or torch.func has run in the
    # process, torch turns its default validation off (dynamo's TorchPatcher)
    v = dict(validate_args=True)
    for make in (lambda m: m.Gamma(m_t(m, [-1.0]), 1.0, **v),
                 lambda m: m.Gamma(1.0, m_t(m, [0.0]), **v),
                 lambda m: m.Beta(m_t(m, [0.0]), 1.0, **v),
                 lambda m: m.Poisson(m_t(m, [-0.5]), **v),
                 lambda m: m.Dirichlet(m_t(m, [1.0, -1.0]), **v)):
        with pytest.raises(ValueError) as theirs:
            make(TD)
        with pytest.raises(ValueError) as ours:
            make(D)
        head = str(theirs.value).split(" of distribution")[0]
        assert str(ours.value).startswith(head)
    for dist, tdist, bad in [(D.Gamma(2.0, 1.0, **v), TD.Gamma(2.0, 1.0, **v), -1.0),
                             (D.Poisson(2.0, **v), TD.Poisson(2.0, **v), 1.5),
                             (D.Beta(2.0, 1.0, **v), TD.Beta(2.0, 1.0, **v), 1.5)]:
        with pytest.raises(ValueError) as theirs:
            tdist.log_prob(torch.tensor(bad))
        with pytest.raises(ValueError) as ours:
            dist.log_prob(tg.tensor(bad))
        assert str(ours.value).split(" of the distribution")[0] == \
            str(theirs.value).split(" of the distribution")[0]
    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.Dirichlet(tg.tensor(1.0))
    assert D.Gamma(-1.0, 1.0, validate_args=False).concentration.item() == -1.0


def m_t(m, data):
    return (tg if m is D else torch).tensor(data)


def test_reprs_match_torch():
    assert repr(D.Gamma(2.0, 3.0)) == repr(TD.Gamma(2.0, 3.0))
    assert repr(D.Poisson(tg.tensor([1.0, 2.0]))) == repr(TD.Poisson(torch.tensor([1.0, 2.0])))
    assert repr(D.Beta(2.0, 3.0)) == repr(TD.Beta(2.0, 3.0))
    assert repr(D.Dirichlet(tg.ones(3))) == repr(TD.Dirichlet(torch.ones(3)))


@pytest.mark.parametrize("name", ["Gamma", "Beta", "Poisson", "Dirichlet"])
def test_samples_are_reproducible_in_support_with_the_right_moments(name):
    a, b = tg.tensor([0.4, 2.0, 7.5]), tg.tensor([1.5, 0.5, 2.0])
    dist = {"Gamma": lambda: D.Gamma(a, b), "Beta": lambda: D.Beta(a, b),
            "Poisson": lambda: D.Poisson(a),
            "Dirichlet": lambda: D.Dirichlet(tg.tensor([[0.4, 2.0, 3.0]]))}[name]()
    tg.manual_seed(5)
    s1 = dist.sample((20000,))
    tg.manual_seed(5)
    s2 = dist.sample((20000,))
    np.testing.assert_array_equal(s1.numpy(), s2.numpy())
    assert tuple(s1.shape) == (20000,) + tuple(dist.batch_shape) + tuple(dist.event_shape)
    assert s1.dtype == tg.float32 and not s1.requires_grad
    x = s1.numpy().astype(np.float64)
    assert np.all(x >= 0) and (name not in ("Beta", "Dirichlet") or np.all(x <= 1))
    if name == "Poisson":
        assert np.all(x == np.floor(x))
    if name == "Dirichlet":
        np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(x.mean(0), dist.mean.numpy(), rtol=0.05, atol=0.01)
    np.testing.assert_allclose(x.var(0), dist.variance.numpy(), rtol=0.1, atol=0.005)


def test_poisson_function():
    tg.manual_seed(1)
    r = tg.poisson(tg.tensor([0.0, 1.0, 100.0], dtype=tg.float64))
    assert r.dtype == tg.float64 and r[0].item() == 0.0
    with pytest.raises(RuntimeError, match="invalid Poisson rate, expected rate to be "
                                           "non-negative"):
        tg.poisson(tg.tensor([-1.0]))
    with pytest.raises(NotImplementedError, match="\"poisson_cpu\" not implemented for 'Long'"):
        tg.poisson(tg.tensor([1, 2]))
    rate = tg.tensor([2.0, 3.0], requires_grad=True)
    drawn = tg.poisson(rate)
    assert drawn.requires_grad        # as PyTorch: a node whose gradient is zero
    drawn.sum().backward()
    assert rate.grad.tolist() == [0.0, 0.0]
    with tg.no_grad():
        assert not tg.poisson(rate).requires_grad
    g = tg.Generator().manual_seed(3)
    a = tg.poisson(tg.full((5,), 4.0), generator=g)
    g.manual_seed(3)
    np.testing.assert_array_equal(a.numpy(), tg.poisson(tg.full((5,), 4.0), generator=g).numpy())


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_compiled_matches_eager(backend):
    if backend == "jax":
        pytest.importorskip("jax")

    def nll(conc, rate, x, y, counts):
        g = D.Gamma(conc, rate)
        b = D.Beta(conc, rate)
        p = D.Poisson(rate)
        return -(g.log_prob(x).sum() + b.log_prob(y).sum() + p.log_prob(counts).sum()
                 - g.entropy().sum() + D.kl_divergence(b, D.Beta(rate, conc)).sum())

    conc = tg.tensor([0.7, 2.0, 3.5], dtype=tg.float64, requires_grad=True)
    rate = tg.tensor([1.5, 0.4, 2.0], dtype=tg.float64, requires_grad=True)
    x, y = tg.tensor([0.3, 2.0, 1.1], dtype=tg.float64), tg.tensor([0.2, 0.5, 0.9],
                                                                    dtype=tg.float64)
    counts = tg.tensor([0.0, 3.0, 1.0], dtype=tg.float64)
    cf = tg.compile(nll, backend=backend)
    for _ in range(2):
        out = cf(conc, rate, x, y, counts)
        out.backward()
        gc, gr = conc.grad.clone(), rate.grad.clone()
        conc.grad = rate.grad = None
        ref = nll(conc, rate, x, y, counts)
        ref.backward()
        np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-12)
        np.testing.assert_allclose(gc.numpy(), conc.grad.numpy(), rtol=1e-10)
        np.testing.assert_allclose(gr.numpy(), rate.grad.numpy(), rtol=1e-10)
        conc.grad = rate.grad = None


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_compiled_sampling_draws_anew_like_eager(backend):
    if backend == "jax":
        pytest.importorskip("jax")

    def draw(conc):
        return D.Gamma(conc, 2.0).sample((4,)) + D.Poisson(conc).sample() \
            + D.Dirichlet(conc).sample()

    conc = tg.tensor([0.5, 1.5, 3.0])
    cf = tg.compile(draw, backend=backend)
    tg.manual_seed(9)
    compiled = [cf(conc).numpy() for _ in range(3)]
    tg.manual_seed(9)
    eager = [draw(conc).numpy() for _ in range(3)]
    for c, e in zip(compiled, eager):
        np.testing.assert_array_equal(c, e)
    assert not np.array_equal(compiled[1], compiled[2])


def test_standard_gamma_grad_is_exact():
    from tracegrad.ops.special_kernels import standard_gamma_grad
    rng = np.random.default_rng(4)
    alpha = np.concatenate([rng.uniform(0.05, 3, 300), rng.uniform(3, 2000, 300),
                            [2e5, 1e7]])
    x = np.maximum(rng.standard_gamma(alpha), 1e-300)
    # PyTorch approximates this gradient (to ~1e-3 relative at worst)
    np.testing.assert_allclose(standard_gamma_grad(alpha, x),
                               torch._standard_gamma_grad(torch.tensor(alpha),
                                                          torch.tensor(x)).numpy(), rtol=3e-3)
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    for a, v in [(0.05, 0.01), (0.3, 0.7), (1.0, 2.06), (10.0, 3.7), (100.0, 103.6),
                 (1000.0, 921.2)]:
        am, vm = mpmath.mpf(a), mpmath.mpf(v)
        dp = mpmath.diff(lambda t: mpmath.gammainc(t, 0, vm, regularized=True), am)
        pdf = vm ** (am - 1) * mpmath.exp(-vm) / mpmath.gamma(am)
        assert standard_gamma_grad(np.array([a]), np.array([v]))[0] == pytest.approx(
            float(-dp / pdf), rel=1e-12)


def test_rsample_gradients_are_unbiased():
    tg.manual_seed(3)
    n = 40000
    c = tg.tensor([0.4, 2.0, 6.0], dtype=tg.float64, requires_grad=True)
    r = tg.tensor([1.5, 0.5, 2.0], dtype=tg.float64, requires_grad=True)
    s = D.Gamma(c, r).rsample((n,))
    assert type(s.grad_fn).__name__ == "DivBackward0" and D.Gamma(c, r).has_rsample
    s.mean(0).sum().backward()                   # d E[x] / dc = 1 / r, d / dr = -c / r^2
    np.testing.assert_allclose(c.grad.numpy(), 1 / r.detach().numpy(), rtol=0.03)
    np.testing.assert_allclose(r.grad.numpy(), -(c / r ** 2).detach().numpy(), rtol=0.03)
    a = tg.tensor([0.7, 3.0], dtype=tg.float64, requires_grad=True)
    b = tg.tensor([2.0, 1.5], dtype=tg.float64)
    D.Beta(a, b).rsample((n,)).mean(0).sum().backward()    # d/da a / (a + b) = b / (a + b)^2
    np.testing.assert_allclose(a.grad.numpy(), (b / (a + b) ** 2).detach().numpy(),
                               rtol=0.03)
    k = tg.tensor([0.5, 1.0, 2.5], dtype=tg.float64, requires_grad=True)
    x = D.Dirichlet(k).rsample((n,))
    np.testing.assert_allclose(x.sum(-1).detach().numpy(), 1.0, rtol=1e-12)
    x[:, 0].mean().backward()                              # d/dk0 k0 / sum(k)
    kk = k.detach().numpy()
    expect = np.array([kk[1:].sum(), -kk[0], -kk[0]]) / kk.sum() ** 2
    np.testing.assert_allclose(k.grad.numpy(), expect, rtol=0.05, atol=0.003)


def test_rsample_double_backward_raises_like_torch():
    c = tg.tensor([2.0], requires_grad=True)
    g, = tg.autograd.grad(D.Gamma(c, 1.0).rsample().sum(), c, create_graph=True)
    with pytest.raises(NotImplementedError, match="the derivative for '_standard_gamma_grad' "
                                                  "is not implemented"):
        tg.autograd.grad(g.sum(), c)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_compiled_rsample_gradients_match_eager(backend):
    if backend == "jax":
        pytest.importorskip("jax")

    def f(c, r):
        return D.Gamma(c, r).rsample((6,)).log().sum() + D.Beta(c, r).rsample().sum()

    c = tg.tensor([2.0, 0.5], requires_grad=True)
    r = tg.tensor([3.0, 1.0], requires_grad=True)
    cf = tg.compile(f, backend=backend)
    tg.manual_seed(0)
    got = []
    for _ in range(3):
        cf(c, r).backward()
        got.append((c.grad.clone().numpy(), r.grad.clone().numpy()))
        c.grad = r.grad = None
    tg.manual_seed(0)
    for gc, gr in got:
        f(c, r).backward()
        np.testing.assert_allclose(gc, c.grad.numpy(), rtol=1e-6)
        np.testing.assert_allclose(gr, r.grad.numpy(), rtol=1e-6)
        c.grad = r.grad = None
