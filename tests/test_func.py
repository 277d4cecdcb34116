"""tracegrad.func: grad / value_and_grad / grad_and_value / vjp / jacrev, compiled and eager,
checked against analytic numpy derivatives and against torch.func."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad import func as F

MODES = [pytest.param(True, id="compiled"), pytest.param(False, id="eager")]


def _np(t):
    return t.detach().numpy()


def _t(a, dtype=None):
    return tg.tensor(np.asarray(a, dtype=np.float64), dtype=dtype or tg.float64)


def _torch(a):
    torch = pytest.importorskip("torch")
    return torch.tensor(np.asarray(a, dtype=np.float64))


def cubic(x):
    return (2 * x ** 3 - x ** 2 + 4 * x).sum()


# -- grad against analytic derivatives (no torch needed) --

@pytest.mark.parametrize("compile", MODES)
def test_grad_polynomial_matches_analytic(compile):
    a = np.array([-1.5, 0.0, 0.5, 2.0])
    g = F.grad(cubic, compile=compile)
    for scale in (1.0, -2.0, 0.25):
        got = g(_t(a * scale))
        xs = a * scale
        np.testing.assert_allclose(_np(got), 6 * xs ** 2 - 2 * xs + 4, rtol=1e-12)
        assert not got.requires_grad


@pytest.mark.parametrize("compile", MODES)
def test_caller_tensors_untouched(compile):
    x = _t([1.0, 2.0, 3.0])
    before = x.numpy().copy()
    F.grad(lambda x: (x * x).sum(), compile=compile)(x)
    assert not x.requires_grad and x.grad is None and x.is_leaf
    np.testing.assert_array_equal(x.numpy(), before)


@pytest.mark.parametrize("compile", MODES)
def test_nested_grad_higher_order(compile):
    def f(x):
        return x ** 4
    x = _t(1.5)
    d2 = F.grad(F.grad(f, compile=compile), compile=compile)(x)
    d3 = F.grad(F.grad(F.grad(f, compile=compile), compile=compile), compile=compile)(x)
    np.testing.assert_allclose(_np(d2), 12 * 1.5 ** 2)
    np.testing.assert_allclose(_np(d3), 24 * 1.5)
    assert not d2.requires_grad
    gg = F.grad(F.grad(f, compile=compile), compile=compile)
    for v in (0.5, -2.0, 3.0):                 # the inner transform is not baked in
        np.testing.assert_allclose(_np(gg(_t(v))), 12 * v ** 2)
    if compile:
        assert gg.compiled.stats.traces == 1 and gg.compiled.stats.cache_hits == 2


def test_repeated_calls_do_not_retrace():
    def poly(x):                              # fresh: compiled implementations are cached
        return cubic(x)
    g = F.grad(poly)
    for k in range(4):
        g(_t(np.arange(5.0) + k))
    st = g.compiled.stats
    assert st.traces == 1 and st.cache_hits == 3 and st.retraces == []
    g(_t(np.arange(6.0)))                      # new shape: a second specialization
    assert g.compiled.stats.traces == 2
    # a fresh transform of the same function re-uses the compiled implementation
    g2 = F.grad(poly)
    g2(_t(np.arange(5.0)))
    assert g2.compiled is g.compiled and g.compiled.stats.traces == 2


def test_value_and_grad_compiled_is_one_program():
    vg = F.value_and_grad(lambda x, w: ((x @ w).tanh() ** 2).mean(), argnums=1)
    x, w = _t(np.ones((4, 3))), _t(np.full((3, 2), 0.1))
    vg(x, w)
    v, g = vg(x, w * 2)
    path = vg.compiled.programs[0]
    assert path.backward is None               # value and gradient in one forward program
    h = np.tanh(np.ones((4, 3)) @ np.full((3, 2), 0.2))
    np.testing.assert_allclose(_np(v), (h ** 2).mean())
    np.testing.assert_allclose(_np(g), np.ones((4, 3)).T @ (2 * h * (1 - h ** 2) / 8))


@pytest.mark.parametrize("compile", MODES)
def test_grad_wrt_unused_argument_is_zero(compile):
    gx, gy = F.grad(lambda x, y: (x * 3).sum(), argnums=(0, 1), compile=compile)(
        _t([1.0, 2.0]), _t([[1.0, 2.0]]))
    np.testing.assert_array_equal(_np(gx), [3.0, 3.0])
    np.testing.assert_array_equal(_np(gy), np.zeros((1, 2)))


@pytest.mark.parametrize("compile", MODES)
def test_grad_under_no_grad_and_inside_compile(compile):
    g = F.grad(lambda x: (x.exp()).sum(), compile=compile)
    x = _t([0.0, 1.0])
    with tg.no_grad():
        got = g(x)
    np.testing.assert_allclose(_np(got), np.exp([0.0, 1.0]))

    @tg.compile
    def outer(x):
        return g(x) * 2
    for v in ([0.0, 1.0], [1.0, 2.0]):
        np.testing.assert_allclose(_np(outer(_t(v))), 2 * np.exp(v))
    assert outer.stats.traces == 1


# -- errors (types and texts follow torch.func) --

def test_non_scalar_output_error():
    with pytest.raises(RuntimeError) as ei:
        F.grad(lambda x: x * 2)(_t([1.0, 2.0]))
    msg = str(ei.value)
    assert "Expected f(*args) to return a scalar Tensor, got tensor with 1 dims" in msg
    with pytest.raises(RuntimeError, match="to return a Tensor, got <class 'int'>"):
        F.grad(lambda x: 3, compile=False)(_t([1.0]))
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as te:
        torch.func.grad(lambda x: x * 2)(torch.ones(2))
    assert msg.startswith(str(te.value))       # torch.func's text, then our file:line
    assert f"{__file__}:" in msg


def test_argnums_and_input_errors():
    f = F.grad(lambda x, y: (x * y).sum(), compile=False)
    x = _t([1.0])
    with pytest.raises(RuntimeError, match="Got argnum=2, but only 2 positional inputs"):
        F.grad(lambda x, y: (x * y).sum(), argnums=2)(x, x)
    with pytest.raises(RuntimeError, match="argnums must be non-empty"):
        F.grad(lambda x: x.sum(), argnums=())(x)
    with pytest.raises(RuntimeError, match="must be unique"):
        F.grad(lambda x: x.sum(), argnums=(0, 0))(x)
    with pytest.raises(ValueError, match="must be Tensor"):
        F.grad(lambda x: x * 2, compile=False)(3.0)
    with pytest.raises(RuntimeError, match="should be a tuple: \\(output, aux\\)"):
        F.grad(lambda x: x.sum(), has_aux=True)(x)
    with pytest.raises(RuntimeError, match="floating point"):
        F.grad(lambda x: x.sum())(tg.tensor([1, 2]))
    assert f(x, _t([5.0])).item() == 5.0


# -- against torch.func --

def mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = (x @ w1 + b1).tanh()
    return ((h @ w2 + b2 - y) ** 2).mean()


@pytest.mark.parametrize("compile", MODES)
def test_mlp_loss_grad_wrt_params_tuple_matches_torch(compile):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    shapes = [(3, 5), (5,), (5, 2), (2,)]
    params = [rng.standard_normal(s) for s in shapes]
    x, y = rng.standard_normal((7, 3)), rng.standard_normal((7, 2))
    g = F.grad(mlp_loss, compile=compile)
    ours = g(tuple(_t(p) for p in params), _t(x), _t(y))
    ours = g(tuple(_t(p) for p in params), _t(x), _t(y))      # the cached program
    ref = torch.func.grad(mlp_loss)(tuple(_torch(p) for p in params), _torch(x), _torch(y))
    assert isinstance(ours, tuple) and len(ours) == 4
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(_np(a), b.numpy(), rtol=1e-10, atol=1e-12)
    if compile:
        assert g.compiled.stats.traces == 1


@pytest.mark.parametrize("compile", MODES)
def test_argnums_tuple_negative_and_dict_match_torch(compile):
    torch = pytest.importorskip("torch")

    def f(a, b, c):
        return (a.sin() * b["u"] + c * b["v"] ** 2).sum()
    a, u, v, c = (np.linspace(-1, 1, 4) * k for k in (1, 2, 3, 4))
    ours = F.grad(f, argnums=(0, -2), compile=compile)(_t(a), {"u": _t(u), "v": _t(v)}, _t(c))
    ref = torch.func.grad(f, argnums=(0, 1))(_torch(a), {"u": _torch(u), "v": _torch(v)},
                                             _torch(c))
    np.testing.assert_allclose(_np(ours[0]), ref[0].numpy())
    assert set(ours[1]) == {"u", "v"}
    for k in ("u", "v"):
        np.testing.assert_allclose(_np(ours[1][k]), ref[1][k].numpy())


@pytest.mark.parametrize("compile", MODES)
def test_has_aux_variants_match_torch(compile):
    torch = pytest.importorskip("torch")

    def f(x):
        y = x.exp()
        return y.sum(), {"y": y, "n": 3}
    a = np.array([0.5, -1.0, 2.0])
    g, aux = F.grad(f, has_aux=True, compile=compile)(_t(a))
    tg_ref, taux = torch.func.grad(lambda x: (f(x)[0], f(x)[1]["y"]), has_aux=True)(_torch(a))
    np.testing.assert_allclose(_np(g), tg_ref.numpy())
    np.testing.assert_allclose(_np(aux["y"]), taux.numpy())
    assert aux["n"] == 3 and not aux["y"].requires_grad
    (v, aux2), g2 = F.value_and_grad(f, has_aux=True, compile=compile)(_t(a))
    g3, (v3, _) = F.grad_and_value(f, has_aux=True, compile=compile)(_t(a))
    np.testing.assert_allclose(_np(v), np.exp(a).sum())
    np.testing.assert_allclose(_np(v3), np.exp(a).sum())
    np.testing.assert_allclose(_np(g2), _np(g3))
    tg3, tv3 = torch.func.grad_and_value(lambda x: f(x)[0])(_torch(a))
    np.testing.assert_allclose(_np(g3), tg3.numpy())


@pytest.mark.parametrize("compile", MODES)
def test_jacrev_vector_function_matches_torch(compile):
    torch = pytest.importorskip("torch")

    def f(x, w):
        return (w @ x).tanh() * x[0], (x ** 2).sum()
    x, w = np.array([0.3, -0.7, 1.1]), np.arange(6.0).reshape(2, 3) / 5
    ours = F.jacrev(f, argnums=(0, 1), compile=compile)(_t(x), _t(w))
    ref = torch.func.jacrev(f, argnums=(0, 1))(_torch(x), _torch(w))
    for o_out, r_out in zip(ours, ref):
        for a, b in zip(o_out, r_out):
            assert tuple(a.shape) == tuple(b.shape)
            np.testing.assert_allclose(_np(a), b.numpy(), rtol=1e-10, atol=1e-12)
    jac = F.jacrev(lambda x: x ** 2, compile=compile)(_t(x))
    np.testing.assert_allclose(_np(jac), np.diag(2 * x))
    jac, aux = F.jacrev(lambda x: (x.sin(), x.sum()), has_aux=True, compile=compile)(_t(x))
    tjac, taux = torch.func.jacrev(lambda x: (x.sin(), x.sum()), has_aux=True)(_torch(x))
    np.testing.assert_allclose(_np(jac), tjac.numpy())
    np.testing.assert_allclose(_np(aux), taux.numpy())


@pytest.mark.parametrize("compile", MODES)
def test_vjp_with_cotangent_matches_torch(compile):
    torch = pytest.importorskip("torch")

    def f(x, y):
        return x * y.sin(), (x @ y)
    x, y = np.array([1.0, 2.0, -1.0]), np.array([0.1, 0.2, 0.3])
    ct = (np.array([1.0, -2.0, 0.5]), np.array(3.0))
    out, fn = F.vjp(f, _t(x), _t(y), compile=compile)
    tout, tfn = torch.func.vjp(f, _torch(x), _torch(y))
    for a, b in zip(out, tout):
        np.testing.assert_allclose(_np(a), b.detach().numpy())
        assert not a.requires_grad
    for _ in range(2):                        # vjp_fn may be called again
        gs = fn((_t(ct[0]), _t(ct[1])))
        tgs = tfn((_torch(ct[0]), _torch(ct[1])))
        assert isinstance(gs, tuple) and len(gs) == 2
        for a, b in zip(gs, tgs):
            np.testing.assert_allclose(_np(a), b.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        fn((tg.ones(2, dtype=tg.float64), tg.tensor(1.0, dtype=tg.float64)))
    out, fn, aux = F.vjp(lambda x: (x.exp(), x.sum()), _t(x), has_aux=True, compile=compile)
    np.testing.assert_allclose(_np(fn(tg.ones(3, dtype=tg.float64))[0]), np.exp(x))
    np.testing.assert_allclose(_np(aux), x.sum())


def test_vjp_compiled_reuses_program():
    def f(x):
        return x * x
    for k in range(3):
        out, fn = F.vjp(f, _t(np.arange(3.0) + k))
        np.testing.assert_allclose(_np(fn(tg.ones(3, dtype=tg.float64))[0]),
                                   2 * (np.arange(3.0) + k))
    from tracegrad.func._transforms import _compiled
    cf = _compiled("vjp", f, f, ())
    assert cf.stats.traces == 1 and cf.stats.cache_hits == 2


@pytest.mark.parametrize("compile", MODES)
def test_results_stay_connected_to_outer_tensors_like_torch(compile):
    torch = pytest.importorskip("torch")
    w_np, x_np = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    # a closure over a tensor requiring grad: grad(f)(x) depends on w
    w = _t(w_np).requires_grad_()
    gx = F.grad(lambda x: (x.sin() * w ** 2).sum(), compile=compile)(_t(x_np))
    assert gx.requires_grad
    gx.sum().backward()
    tw = _torch(w_np).requires_grad_()
    tgx = torch.func.grad(lambda x: (x.sin() * tw ** 2).sum())(_torch(x_np))
    tgx.sum().backward()
    np.testing.assert_allclose(_np(gx), tgx.detach().numpy())
    np.testing.assert_allclose(_np(w.grad), tw.grad.numpy())
    # an argument requiring grad: the gradient is differentiable w.r.t. it
    x = _t(x_np).requires_grad_()
    g = F.grad(lambda x: (x ** 3).sum(), compile=compile)(x)
    (second,) = tg.autograd.grad(g.sum(), [x])
    np.testing.assert_allclose(_np(second), 6 * x_np)
