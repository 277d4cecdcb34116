"""The JAX backend's rules of backends/jax/rules_more.py and callback.py where exactness is
the point, against the numpy backend: sort/argsort/topk and max-pool indices with ties and
NaNs, scatter with repeated indices, integer average pooling, multinomial samples (host-drawn
randomness, so equal to numpy's for a seed), the runtime checks that make out-of-range indices,
BCE inputs outside [0, 1] and invalid multinomial weights raise eager's error, and custom
autograd.Functions lowered as host callbacks.
"""
import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg  # noqa: E402
import tracegrad.nn.functional as F  # noqa: E402

NAN = float("nan")


def _on_jax(cf):
    from tracegrad.backends.jax.program import JaxProgram
    return [isinstance(p.forward_program, JaxProgram) for p in cf.programs]


def _both(f, *args):
    """f's results on the numpy and the JAX backend (second call: the XLA program runs)."""
    cn, cj = tg.compile(f), tg.compile(f, backend="jax")
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # no fallback warning
        cj(*args)
        outs = cj(*args)
    assert all(_on_jax(cj))
    return cn(*args), outs


def _exact(a, b):
    a, b = (a if isinstance(a, (tuple, list)) else (a,)), (b if isinstance(b, (tuple, list))
                                                           else (b,))
    for x, y in zip(a, b):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x.numpy(), y.numpy())      # NaNs in the same places


_ROWS = tg.tensor([[3., NAN, 1., 3., -0., 0., NAN, 1.], [2., 2., 2., 1., 1., 1., 0., NAN]])


@pytest.mark.parametrize("f", [
    lambda x: tuple(tg.sort(x, 1)), lambda x: tuple(tg.sort(x, 1, descending=True)),
    lambda x: tuple(tg.sort(x, 0, descending=True, stable=True)),
    lambda x: tg.argsort(x, 1, descending=True), lambda x: tuple(tg.topk(x, 3, 1)),
    lambda x: tuple(tg.topk(x, 5, 1, largest=False))],
    ids=["sort", "sort_desc", "sort_stable_dim0", "argsort_desc", "topk", "topk_smallest"])
def test_ordering_with_ties_and_nans_is_numpys(f):
    _exact(*_both(f, _ROWS))


def test_max_pool_indices_first_maximum_and_last_nan():
    x = tg.tensor([[[[1., 5, 5, 2], [NAN, 0, 5, NAN], [4, 4, 4, 4], [1, 1, 9, 9]]]])
    _exact(*_both(lambda x: tuple(F.max_pool2d(x, 2, 1, return_indices=True)), x))
    _exact(*_both(lambda x: tuple(F.max_pool2d(x, 3, 2, 1, ceil_mode=True,
                                               return_indices=True)), x))


def test_scatter_with_repeated_indices_keeps_the_last_write():
    idx = tg.tensor([[0, 0, 1, 0], [1, 1, 1, 0], [2, 0, 2, 2]])
    src = tg.arange(12.).reshape(3, 4)
    _exact(*_both(lambda x, s: x.scatter(1, idx, s), tg.zeros(3, 3), src))
    _exact(*_both(lambda x: x.scatter(0, idx[:, :3], 7.0), tg.zeros(3, 3)))
    _exact(*_both(lambda x, s: x.scatter_add(1, idx, s), tg.zeros(3, 3), src))


def test_integer_average_pooling_truncates_like_numpy():
    x = tg.tensor(np.arange(-20, 29).reshape(1, 7, 7))
    _exact(*_both(lambda x: F.avg_pool2d(x, 3, 2, 1), x))


@pytest.mark.parametrize("replacement", [True, False])
def test_multinomial_samples_equal_numpy_backend_for_a_seed(replacement):
    def f(w):
        return tg.multinomial(w.softmax(-1), 3, replacement=replacement)
    w = tg.tensor(np.random.default_rng(0).standard_normal((4, 6)))
    w0 = tg.tensor([[0.1, 0.0, 0.5, 0.4]] * 3)          # a zero weight is never drawn
    cn, cj = tg.compile(f), tg.compile(f, backend="jax")
    for x in (w, w0.log()):
        tg.manual_seed(7)
        a = [cn(x).numpy() for _ in range(4)]
        tg.manual_seed(7)
        b = [cj(x).numpy() for _ in range(4)]
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)
    assert not (np.stack(b) == 1).any()
    assert all(_on_jax(cj))


@pytest.mark.parametrize("f,good,bad", [
    (lambda x, i: x.gather(1, i), [[0, 1], [2, 0]], [[0, 3], [2, 0]]),
    (lambda x, i: x.index_select(1, i), [0, 2], [-1, 2]),
    (lambda x, i: x.scatter_add(1, i, x), [[0, 1, 1], [2, 0, 0]], [[0, 1, 1], [5, 0, 0]]),
    (lambda x, i: x.scatter(1, i, 2.0), [[0, 1, 1], [2, 0, 0]], [[0, -1, 1], [2, 0, 0]]),
], ids=["gather", "index_select", "scatter_add", "scatter_value"])
def test_index_out_of_range_raises_eagers_error(f, good, bad):
    x = tg.ones(2, 3)
    cf = tg.compile(f, backend="jax")
    cf(x, tg.tensor(good))
    cf(x, tg.tensor(good))
    _same_error(lambda: cf(x, tg.tensor(bad)), lambda: f(x, tg.tensor(bad)))
    assert cf.stats.traces == 1 and all(_on_jax(cf))


def _same_error(compiled, eager):
    with pytest.raises(Exception) as ec:
        compiled()
    with pytest.raises(Exception) as ee:
        eager()
    assert type(ec.value) is type(ee.value)
    assert str(ec.value).split("\n")[0] == str(ee.value).split("\n")[0]


def test_bce_input_outside_0_1_and_bad_multinomial_weights_raise_eagers_error():
    t = tg.tensor([0., 1.])
    bce = tg.compile(lambda x: F.binary_cross_entropy(x, t), backend="jax")
    bce(tg.tensor([0.2, 0.7]))
    for bad in ([1.5, 0.5], [NAN, 0.5]):
        _same_error(lambda: bce(tg.tensor(bad)),
                    lambda: F.binary_cross_entropy(tg.tensor(bad), t))
    mult = tg.compile(lambda p: tg.multinomial(p, 2), backend="jax")
    mult(tg.tensor([0.2, 0.7, 0.1]))
    for bad in ([0.2, -0.7, 0.1], [0.0, 0.0, 0.0], [float("inf"), 1.0, 1.0]):
        _same_error(lambda: mult(tg.tensor(bad)), lambda: tg.multinomial(tg.tensor(bad), 2))
    assert all(_on_jax(bce)) and all(_on_jax(mult))


def _custom_function(calls, state):
    class Cube(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            calls.append(1)
            if state["fail"]:
                raise ValueError("asked to fail")
            ctx.save_for_backward(x)
            return x * x * x * k

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2 * x, None           # not the true derivative: the user's backward
    return Cube


def test_custom_function_lowers_as_a_host_callback():
    results, counts = {}, {}
    for backend in ("numpy", "jax"):
        calls, state = [], {"fail": False}
        cube = _custom_function(calls, state)
        cf = tg.compile(lambda x: (cube.apply(x + 1, 2.0) * x).sum(), backend=backend)
        res = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # no fallback warning
            for i in range(3):
                x = tg.tensor([1.0, -2.0 + i, 0.5], requires_grad=True)
                y = cf(x)
                y.backward()
                res.append((y.item(), x.grad.numpy()))
        state["fail"] = True                    # the forward raises: eager's error
        with pytest.raises(Exception, match="asked to fail") as ei:
            cf(tg.tensor([1.0, 2.0, 3.0], requires_grad=True))
        results[backend], counts[backend] = (res, type(ei.value)), len(calls)
        assert cf.stats.traces == 1
        if backend == "jax":
            assert all(_on_jax(cf))
    (rn, en), (rj, ej) = results["numpy"], results["jax"]
    assert en is ej
    for (yn, gn), (yj, gj) in zip(rn, rj):
        np.testing.assert_allclose(yj, yn, rtol=1e-6)
        np.testing.assert_allclose(gj, gn, rtol=1e-6)
    # once per call as eagerly, the failing call too, though it re-ran on numpy and then
    # eagerly (Note [Forwards run once per call] in tracing/forward_memo.py)
    assert counts["jax"] == counts["numpy"] == 4


def _grads_match(f, arrays, rg):
    res = []
    for backend in ("numpy", "jax"):
        cf = tg.compile(f, backend=backend)
        for _ in range(2):
            ts = [tg.tensor(a, requires_grad=r) for a, r in zip(arrays, rg)]
            y = cf(*ts)
            y.backward()
        res.append((y.item(), [t.grad.numpy() for t, r in zip(ts, rg) if r]))
    assert all(_on_jax(cf))
    (a, ga), (b, gb) = res
    np.testing.assert_allclose(b, a, rtol=1e-5)
    for u, v in zip(ga, gb):
        np.testing.assert_allclose(v, u, rtol=1e-5, atol=1e-6)


def test_nll_loss_layouts_ignore_index_and_bad_targets():
    rng = np.random.default_rng(0)
    s4 = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    t4 = rng.integers(0, 3, (2, 4, 5))
    t4[0, 0, 0] = -100
    w = tg.tensor([1., 2., 3.])
    _grads_match(lambda s, t: F.cross_entropy(s, t), [s4, t4], [True, False])
    _grads_match(lambda s, t: F.cross_entropy(s, t, weight=w, reduction="none").pow(2).sum(),
                 [s4, t4], [True, False])
    _grads_match(lambda s, t: F.nll_loss(s.log_softmax(0), t), [rng.standard_normal(5),
                                                                np.array(3)], [True, False])
    s2, t2 = rng.standard_normal((6, 5)), np.array([0, 1, 1, 4, 2, 3])
    _grads_match(lambda s, t: F.nll_loss(s.log_softmax(1), t, ignore_index=1, reduction="sum"),
                 [s2, t2], [True, False])
    cf = tg.compile(F.cross_entropy, backend="jax")
    cf(tg.tensor(s2), tg.tensor(t2))
    for bad in ([0, 1, 2, 3, 4, 5], [0, -1, 2, 3, 4, 0]):
        _same_error(lambda: cf(tg.tensor(s2), tg.tensor(bad)),
                    lambda: F.cross_entropy(tg.tensor(s2), tg.tensor(bad)))


def test_linear_addmm_fused_backwards_and_dropout_match_numpy_backend():
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s) for s in ((5, 4), (3, 4), (3,)))
    _grads_match(lambda x, w, b: (F.gelu(F.linear(x, w, b), approximate="tanh").softmax(1)
                                  * F.linear(x, w).log_softmax(0) * F.gelu(x @ w.T)).sum(),
                 [x, w, b], [True, True, True])
    _grads_match(lambda x, w, b: tg.addmm(b, x, w.T, beta=0.5, alpha=2.0).pow(2).sum(),
                 [x, w, b], [True, True, True])
    m = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Dropout(0.3), tg.nn.Linear(8, 2))
    xs = tg.tensor(x.astype(np.float32))
    cn, cj = tg.compile(lambda x: m(x).sum()), tg.compile(lambda x: m(x).sum(), backend="jax")
    tg.manual_seed(3)
    a = [cn(xs).item() for _ in range(3)]
    tg.manual_seed(3)
    b = [cj(xs).item() for _ in range(3)]
    np.testing.assert_allclose(b, a, rtol=1e-5)
    assert all(_on_jax(cj))
