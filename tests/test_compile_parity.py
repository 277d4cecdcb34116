"""Parity edges of compiled functions a PyTorch user hits (issue 4, item 6).

Each test runs a function compiled and eagerly (and on PyTorch when installed) and compares:
double and triple backward through a compiled call (`create_graph=True`), Hessian-vector
products, captured tensors that require grad, and calls that draw random numbers, modify an
input in place or detach (the recomputation must see the call's own values and draw
nothing); hooks and `retain_grad` on compiled outputs;
results and saved-for-backward values never overwritten by a later call (small outputs and
ones larger than the planner's arena threshold); concurrent calls from 8 threads; and the
retain_graph rule on the compiled backward node.

Every comparison uses calls after the first (the first call traces eagerly), and checks the
result really came from the compiled node, so these tests exercise compiled code.
"""
import threading

import numpy as np
import pytest

import tracegrad as tg

COMPILED_NODE = "CompiledFunctionBackward"


def _t(lib, a, rg=False):
    """A float64 tensor of `lib` (tracegrad or torch) holding a copy of numpy array `a`."""
    return lib.tensor(np.array(a, dtype=np.float64), requires_grad=rg)


def _np(t):
    return None if t is None else t.detach().numpy().copy()


def _compiled(fn, *warmup):
    """`fn` compiled and called once on `warmup` (the trace), so later calls run compiled code."""
    cf = tg.compile(fn)
    if warmup:
        cf(*warmup)
    return cf


def _assert_compiled(out):
    assert type(out.grad_fn).__name__ == COMPILED_NODE, out.grad_fn


# ---------------------------------------------------------------------------------------------
# Double (and triple) backward through a compiled function
# ---------------------------------------------------------------------------------------------

def poly(x):
    return (x ** 3 - 2 * x ** 2 + 0.5 * x).sum()


def exp_sin(x):
    return x.exp().sin().sum()


def tanh_mlp(w1, b1, w2, x, y):
    h = (x @ w1 + b1).tanh()
    return (h @ w2 - y).pow(2).mean()


def reduce_broadcast(x, w):
    # broadcasting (x[:, None] - w), a reduction per row, a max and a mean over rows
    d = (x.unsqueeze(1) - w).pow(2).sum(1)
    return (d.sqrt() * x.sigmoid()).mean() + d.max() * 0.1 + (x * w.mean(1)).sum()


def softmax_loss(x, w):
    return ((x @ w).log_softmax(-1) * (x @ w).softmax(-1)).sum(-1).mean()


def _inputs(rng, name):
    """(function, numpy inputs, which of them require grad)."""
    if name == "poly":
        return poly, [rng.standard_normal(5)], [0]
    if name == "exp_sin":
        return exp_sin, [rng.standard_normal((3, 4))], [0]
    if name == "tanh_mlp":
        shapes = [(4, 6), (6,), (6, 2), (8, 4), (8, 2)]
        return tanh_mlp, [rng.standard_normal(s) * 0.7 for s in shapes], [0, 1, 2]
    if name == "reduce_broadcast":
        return reduce_broadcast, [rng.standard_normal(4), rng.standard_normal((4, 3)) + 3], [0, 1]
    if name == "softmax_loss":
        return softmax_loss, [rng.standard_normal((5, 3)), rng.standard_normal((3, 4))], [0, 1]
    raise KeyError(name)


FUNCS = ["poly", "exp_sin", "tanh_mlp", "reduce_broadcast", "softmax_loss"]


def _hvp(lib, fn, arrays, wrt, vs, compiled=None):
    """(first derivatives, Hessian-vector product) via grad(create_graph) + backward."""
    ts = [_t(lib, a, k in wrt) for k, a in enumerate(arrays)]
    out = (compiled or fn)(*ts)
    if compiled is not None:
        _assert_compiled(out)
    xs = [ts[k] for k in wrt]
    gs = lib.autograd.grad(out, xs, create_graph=True)
    assert all(g.requires_grad for g in gs)
    s = sum((g * _t(lib, v)).sum() for g, v in zip(gs, vs))
    s.backward()
    return [_np(g) for g in gs], [_np(x.grad) for x in xs]


def _compiled_with(fn, memory, *warmup):
    cf = tg.compile(fn, memory=memory)
    cf(*warmup)
    return cf


@pytest.mark.parametrize("memory", ["balanced", "min"])
@pytest.mark.parametrize("name", FUNCS)
def test_double_backward_equals_eager(name, memory):
    # memory="min" recomputes some saved values in backward: the double backward must too
    rng = np.random.default_rng(FUNCS.index(name))
    fn, arrays, wrt = _inputs(rng, name)
    cf = _compiled_with(fn, memory, *[_t(tg, a, k in wrt) for k, a in enumerate(arrays)])
    for _ in range(2):                                 # two compiled calls, fresh inputs
        arrays = [a + 0.1 * rng.standard_normal(a.shape) for a in arrays]
        ones = [np.ones(arrays[k].shape) for k in wrt]       # g.sum().backward()
        vs = [rng.standard_normal(arrays[k].shape) for k in wrt]   # a general HVP
        for v in (ones, vs):
            got = _hvp(tg, fn, arrays, wrt, v, compiled=cf)
            ref = _hvp(tg, fn, arrays, wrt, v)
            for a, b in zip(got[0] + got[1], ref[0] + ref[1]):
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert cf.stats.traces == 1


@pytest.mark.parametrize("name", FUNCS)
def test_double_backward_matches_torch(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10 + FUNCS.index(name))
    fn, arrays, wrt = _inputs(rng, name)
    cf = _compiled(fn, *[_t(tg, a, k in wrt) for k, a in enumerate(arrays)])
    vs = [rng.standard_normal(arrays[k].shape) for k in wrt]
    got = _hvp(tg, fn, arrays, wrt, vs, compiled=cf)
    ref = _hvp(torch, fn, arrays, wrt, vs)
    for a, b in zip(got[0] + got[1], ref[0] + ref[1]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_polynomial_second_derivative_is_exact():
    xs = np.array([-2.0, -0.5, 0.0, 1.0, 3.0])
    cf = _compiled(poly, _t(tg, np.ones(5), True))
    x = _t(tg, xs, True)
    out = cf(x)
    _assert_compiled(out)
    g, = tg.autograd.grad(out, x, create_graph=True)
    h, = tg.autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(_np(g), 3 * xs ** 2 - 4 * xs + 0.5)
    np.testing.assert_array_equal(_np(h), 6 * xs - 4)


def test_third_order_derivative_of_x4():
    def f(x):
        return (x ** 4).sum()
    xs = np.array([-1.5, 0.5, 2.0, 3.0])
    cf = _compiled(f, _t(tg, np.ones(4), True))
    results = {}
    for label, lib, fn in [("compiled", tg, cf), ("eager", tg, f)] + (
            [("torch", _torch(), f)] if _torch() is not None else []):
        x = _t(lib, xs, True)
        out = fn(x)
        if label == "compiled":
            _assert_compiled(out)
        g, = lib.autograd.grad(out, x, create_graph=True)
        h, = lib.autograd.grad(g.sum(), x, create_graph=True)
        t3, = lib.autograd.grad(h.sum(), x, create_graph=True)
        t3.sum().backward()                                   # 4th: d/dx 24x = 24
        results[label] = [_np(g), _np(h), _np(t3), _np(x.grad)]
    exact = [4 * xs ** 3, 12 * xs ** 2, 24 * xs, np.full(4, 24.0)]
    for label, res in results.items():
        for a, b in zip(res, exact):
            np.testing.assert_array_equal(a, b, err_msg=label)


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def test_hessian_vector_product_of_mlp_loss_against_full_hessian():
    # H v from the compiled double backward equals the explicit Hessian (rows by grad of
    # each gradient entry, eagerly) times v
    rng = np.random.default_rng(3)
    fn, arrays, _ = _inputs(rng, "tanh_mlp")

    def loss_w1(w1, b1, w2, x, y):
        return fn(w1, b1, w2, x, y)
    cf = _compiled(loss_w1, *[_t(tg, a, k == 0) for k, a in enumerate(arrays)])
    v = rng.standard_normal(arrays[0].shape)
    _, (hv,) = _hvp(tg, loss_w1, arrays, [0], [v], compiled=cf)
    ts = [_t(tg, a, k == 0) for k, a in enumerate(arrays)]
    g, = tg.autograd.grad(fn(*ts), ts[0], create_graph=True)
    flat = g.reshape(-1)
    rows = [_np(tg.autograd.grad(flat[i], ts[0], retain_graph=True)[0]).reshape(-1)
            for i in range(flat.shape[0])]
    hessian = np.stack(rows)
    np.testing.assert_allclose(hv.reshape(-1), hessian @ v.reshape(-1), rtol=1e-10, atol=1e-12)


def test_double_backward_with_captured_tensors_that_require_grad():
    rng = np.random.default_rng(4)
    w = _t(tg, rng.standard_normal((3, 3)), True)
    b = _t(tg, rng.standard_normal(3), True)

    def f(x):
        return ((x @ w + b).tanh() ** 2).sum() + (w * w).sum() * x.sum()
    cf = _compiled(f, _t(tg, rng.standard_normal((2, 3)), True))
    for _ in range(2):
        xs = rng.standard_normal((2, 3))
        res = {}
        for label, fn in (("compiled", cf), ("eager", f)):
            w.grad = b.grad = None
            x = _t(tg, xs, True)
            out = fn(x)
            if label == "compiled":
                _assert_compiled(out)
            gx, gw, gb = tg.autograd.grad(out, (x, w, b), create_graph=True)
            (gx.pow(2).sum() + (gw * gw).sum() + gb.sum()).backward()
            res[label] = [_np(gx), _np(gw), _np(gb), _np(x.grad), _np(w.grad), _np(b.grad)]
        for a, c in zip(res["compiled"], res["eager"]):
            np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-12)
    assert cf.stats.traces == 1


def test_double_backward_only_through_captured_weight():
    # the argument does not require grad; only the closure's weight does
    rng = np.random.default_rng(5)
    w = _t(tg, rng.standard_normal(4), True)

    def f(x):
        return (x * w).exp().sum()
    cf = _compiled(f, _t(tg, rng.standard_normal(4)))
    xs = rng.standard_normal(4)
    out = cf(_t(tg, xs))
    _assert_compiled(out)
    g, = tg.autograd.grad(out, w, create_graph=True)
    h, = tg.autograd.grad(g.sum(), w)
    np.testing.assert_allclose(_np(g), xs * np.exp(xs * _np(w)), rtol=1e-12)
    np.testing.assert_allclose(_np(h), xs ** 2 * np.exp(xs * _np(w)), rtol=1e-12)


def test_double_backward_twice_from_the_same_compiled_call():
    cf = _compiled(exp_sin, _t(tg, np.ones(3), True))
    xs = np.array([0.1, -0.4, 0.9])
    x = _t(tg, xs, True)
    out = cf(x)
    g, = tg.autograd.grad(out, x, create_graph=True)
    h1, = tg.autograd.grad(g.sum(), x, retain_graph=True)
    h2, = tg.autograd.grad(g.sum(), x)
    e = np.exp(xs)
    exact = e * np.cos(e) - e * e * np.sin(e)
    np.testing.assert_allclose(_np(h1), exact, rtol=1e-12)
    np.testing.assert_allclose(_np(h2), exact, rtol=1e-12)


def _second_derivatives_vs_eager(fn, make, seed=None, calls=3):
    """Per compiled call: (grad, grad of grad.sum(), a random draw afterwards) equal eager's."""
    cf = tg.compile(fn)
    for k in range(calls):
        res = []
        for f in (cf, fn):
            if seed is not None:
                tg.manual_seed(seed + k)
            args = make()
            out = f(*args)
            if f is cf and k:
                _assert_compiled(out)
            g, = tg.autograd.grad(out, args[0], create_graph=True)
            h, = tg.autograd.grad(g.sum(), args[0])
            after = _np(tg.rand(3)) if seed is not None else None   # the generator's state
            res.append([_np(out), _np(g), _np(h), after] + [_np(a) for a in args[1:]])
        for a, b in zip(*res):
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_double_backward_keeps_the_calls_dropout_mask():
    # the recomputation must use the mask this call drew (and draw nothing new)
    def f(x):
        return tg.nn.functional.dropout(x, 0.5, training=True).pow(2).sum() * x.sum()
    _second_derivatives_vs_eager(f, lambda: (_t(tg, np.linspace(0.5, 2, 16), True),), seed=7)


def test_double_backward_with_random_noise_not_saved_for_backward():
    def f(x):
        return (x + tg.randn(x.shape, dtype=x.dtype)).tanh().sum()
    _second_derivatives_vs_eager(f, lambda: (_t(tg, [0.1, 0.2, -0.3], True),), seed=3)


def test_double_backward_when_the_call_modifies_an_input_in_place():
    def after(x, buf):
        buf.add_(1.0)                         # the product reads the new value
        return (x * x * buf).sum()

    def before(x, buf):
        y = (x + buf).tanh()                  # reads the old value, saved nowhere
        buf.mul_(2.0)
        return (y * buf).sum()
    for fn in (after, before):
        _second_derivatives_vs_eager(fn, lambda: (_t(tg, [0.1, 0.2, -0.3], True),
                                                  _t(tg, [0.5, -1.0, 2.0])))


def test_double_backward_respects_detach():
    def f(x):
        return (x ** 2 * x.detach()).sum() + (x.exp() * x.detach().sin()).sum()
    _second_derivatives_vs_eager(f, lambda: (_t(tg, [0.5, -1.0, 2.0], True),))


# ---------------------------------------------------------------------------------------------
# Hooks and retain_grad on compiled outputs
# ---------------------------------------------------------------------------------------------

def two_outputs(x, w):
    return (x * w).exp(), (x - w).tanh()


def _hooks_run(fn, x_np, w_np, scale, compiled):
    x, w = _t(tg, x_np, True), _t(tg, w_np, True)
    a, b = fn(x, w)
    if compiled:
        _assert_compiled(a)
    seen = {"a": [], "b": [], "x": []}

    def on_a(g):
        seen["a"].append(_np(g))
        return g * scale                       # changes what reaches x and w
    a.register_hook(on_a)
    b.register_hook(lambda g: seen["b"].append(_np(g)))
    x.register_hook(lambda g: seen["x"].append(_np(g)))
    a.retain_grad()
    b.retain_grad()
    (a * b).sum().backward()
    return seen, _np(a.grad), _np(b.grad), _np(x.grad), _np(w.grad), _np(a), _np(b)


def test_hooks_and_retain_grad_on_compiled_outputs_match_eager():
    rng = np.random.default_rng(6)
    xs, ws = rng.standard_normal(5), rng.standard_normal(5)
    cf = _compiled(two_outputs, _t(tg, xs, True), _t(tg, ws, True))
    got = _hooks_run(cf, xs, ws, 3.0, True)
    ref = _hooks_run(two_outputs, xs, ws, 3.0, False)
    seen, seen_ref = got[0], ref[0]
    for k in ("a", "b", "x"):
        assert len(seen[k]) == len(seen_ref[k]) == 1, k
        np.testing.assert_allclose(seen[k][0], seen_ref[k][0], rtol=1e-12)
    np.testing.assert_allclose(seen["a"][0], got[6], rtol=1e-12)     # dL/da = b
    for a, b in zip(got[1:], ref[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    # the hook's factor 3 reached the inputs: d/dx of 3 * a * b-part + a * d b
    a_, b_ = np.exp(xs * ws), np.tanh(xs - ws)
    np.testing.assert_allclose(got[3], 3 * b_ * a_ * ws + a_ * (1 - b_ ** 2), rtol=1e-12)


def test_hooks_and_retain_grad_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    xs, ws = rng.standard_normal(4), rng.standard_normal(4)
    cf = _compiled(two_outputs, _t(tg, xs, True), _t(tg, ws, True))
    got = _hooks_run(cf, xs, ws, -2.0, True)
    x, w = _t(torch, xs, True), _t(torch, ws, True)
    a, b = two_outputs(x, w)
    a.register_hook(lambda g: g * -2.0)
    a.retain_grad()
    (a * b).sum().backward()
    np.testing.assert_allclose(got[1], _np(a.grad), rtol=1e-12)
    np.testing.assert_allclose(got[3], _np(x.grad), rtol=1e-12)
    np.testing.assert_allclose(got[4], _np(w.grad), rtol=1e-12)


def test_hook_and_retain_grad_on_unused_compiled_output():
    # only `a` reaches the loss: like eager, b's hook never fires and b.grad stays None
    rng = np.random.default_rng(8)
    xs, ws = rng.standard_normal(3), rng.standard_normal(3)
    cf = _compiled(two_outputs, _t(tg, xs, True), _t(tg, ws, True))
    for fn in (cf, two_outputs):
        x, w = _t(tg, xs, True), _t(tg, ws, True)
        a, b = fn(x, w)
        fired = []
        b.register_hook(lambda g: fired.append(g))
        b.retain_grad()
        a.retain_grad()
        a.sum().backward()
        assert fired == []
        assert b.grad is None
        np.testing.assert_array_equal(_np(a.grad), np.ones(3))
        np.testing.assert_allclose(_np(x.grad), ws * np.exp(xs * ws), rtol=1e-12)


def test_retain_grad_with_explicit_gradient_and_scalar_output():
    cf = _compiled(lambda x: (x * 2).exp(), _t(tg, np.zeros(3), True))
    x = _t(tg, [0.0, 0.5, -1.0], True)
    out = cf(x)
    _assert_compiled(out)
    out.retain_grad()
    v = _t(tg, [1.0, -2.0, 0.25])
    out.backward(v)
    np.testing.assert_array_equal(_np(out.grad), _np(v))
    np.testing.assert_allclose(_np(x.grad), _np(v) * 2 * np.exp(2 * _np(x)), rtol=1e-12)
    assert out.is_leaf is False and out.retains_grad


def test_grad_accumulates_over_compiled_calls_and_input_hooks_fire():
    rng = np.random.default_rng(9)
    w_np = rng.standard_normal((3, 2))
    xs = [rng.standard_normal((4, 3)) for _ in range(4)]

    def f(x, w):
        return (x @ w).tanh().pow(2).sum()
    cf = _compiled(f, _t(tg, xs[0]), _t(tg, w_np, True))
    w_c, w_e = _t(tg, w_np, True), _t(tg, w_np, True)
    seen_c, seen_e = [], []
    w_c.register_hook(lambda g: seen_c.append(_np(g)))
    w_e.register_hook(lambda g: seen_e.append(_np(g)))
    for x in xs:
        out = cf(_t(tg, x), w_c)
        _assert_compiled(out)
        out.backward()
        f(_t(tg, x), w_e).backward()
        np.testing.assert_allclose(_np(w_c.grad), _np(w_e.grad), rtol=1e-12)
    assert len(seen_c) == len(seen_e) == 4
    for a, b in zip(seen_c, seen_e):
        np.testing.assert_allclose(a, b, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# Results and saved values are never overwritten by a later call
# ---------------------------------------------------------------------------------------------

def small_outs(x, w):
    h = (x * w + 1).tanh()
    return h * 2, h.sum(), (h + w).exp()


def large_outs(x, w):
    # 256x512 float32 intermediates (512 KiB) live in the planner's arena
    h = (x @ w).tanh()
    z = (h * h + 1).log()
    return z * 0.5, z.sum(), h.t(), (z + h)[3:7].reshape(-1)


def _arrays(rng, large, k):
    if large:
        return (rng.standard_normal((256, 64)).astype(np.float32) * 0.1 * (k + 1),
                rng.standard_normal((64, 512)).astype(np.float32) * 0.2)
    return rng.standard_normal(6) * (k + 1), rng.standard_normal(6)


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_earlier_results_survive_later_calls(large):
    fn = large_outs if large else small_outs
    rng = np.random.default_rng(11)
    x0, w0 = _arrays(rng, large, 0)
    cf = _compiled(fn, tg.tensor(x0), tg.tensor(w0, requires_grad=True))
    if large:
        assert cf.programs[0].forward_plan.arena_bytes > 64 * 1024   # the arena is in play
    calls = []
    for k in range(3):
        x, w = _arrays(rng, large, k)
        outs = cf(tg.tensor(x), tg.tensor(w, requires_grad=True))
        calls.append((x, w, outs, [_np(o) for o in outs]))
    for x, w, outs, copies in calls:
        ref = fn(tg.tensor(x), tg.tensor(w))
        for o, c, r in zip(outs, copies, ref):
            np.testing.assert_array_equal(_np(o), c)                  # not overwritten
            np.testing.assert_allclose(c, _np(r), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_saved_values_survive_later_calls(large):
    fn = large_outs if large else small_outs
    rng = np.random.default_rng(12)
    x0, w0 = _arrays(rng, large, 0)
    cf = _compiled(fn, tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True))
    runs = []
    for k in range(3):
        x, w = _arrays(rng, large, k)
        xt, wt = tg.tensor(x, requires_grad=True), tg.tensor(w, requires_grad=True)
        runs.append((x, w, xt, wt, cf(xt, wt)))
    grads_kept = []
    for x, w, xt, wt, outs in runs:                  # backward on call 1 after calls 2 and 3
        _assert_compiled(outs[0])
        sum(o.sum() for o in outs).backward()
        grads_kept.append((xt.grad, _np(xt.grad), wt.grad, _np(wt.grad)))
        xe, we = tg.tensor(x, requires_grad=True), tg.tensor(w, requires_grad=True)
        sum(o.sum() for o in fn(xe, we)).backward()
        np.testing.assert_allclose(_np(xt.grad), _np(xe.grad), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(_np(wt.grad), _np(we.grad), rtol=1e-4, atol=1e-5)
    for gx, gx_copy, gw, gw_copy in grads_kept:      # backward results not reused either
        np.testing.assert_array_equal(_np(gx), gx_copy)
        np.testing.assert_array_equal(_np(gw), gw_copy)


def test_results_of_autograd_grad_survive_later_backward():
    rng = np.random.default_rng(13)
    x0, w0 = _arrays(rng, True, 0)
    cf = _compiled(large_outs, tg.tensor(x0), tg.tensor(w0, requires_grad=True))
    kept = []
    for k in range(3):
        x, w = _arrays(rng, True, k)
        wt = tg.tensor(w, requires_grad=True)
        g, = tg.autograd.grad(cf(tg.tensor(x), wt)[0].sum(), wt)
        kept.append((g, _np(g), x, w))
    for g, copy, x, w in kept:
        np.testing.assert_array_equal(_np(g), copy)
        we = tg.tensor(w, requires_grad=True)
        large_outs(tg.tensor(x), we)[0].sum().backward()
        np.testing.assert_allclose(copy, _np(we.grad), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Concurrent calls from 8 threads
# ---------------------------------------------------------------------------------------------

def big_mlp(x, w1, w2):
    h = (x @ w1).tanh()                       # 256x512 float32: arena-sized intermediates
    return ((h @ w2).sigmoid() * h.mean()).sum()


def branchy(x, w):
    if x.sum() > 0:
        return ((x * w).exp() + x).pow(2).sum()
    return (x - w).tanh().sum() * 3


def _thread_inputs(name, rng):
    if name == "big_mlp":
        return [rng.standard_normal((256, 16)).astype(np.float32) * 0.3,
                rng.standard_normal((16, 512)).astype(np.float32) * 0.3,
                rng.standard_normal((512, 4)).astype(np.float32) * 0.1], [1, 2]
    sign = 1.0 if rng.random() < 0.5 else -1.0
    return [sign * np.abs(rng.standard_normal(8)) * 0.5, rng.standard_normal(8) * 0.5], [0, 1]


def _forward_backward(fn, arrays, wrt):
    ts = [tg.tensor(a, requires_grad=k in wrt) for k, a in enumerate(arrays)]
    out = fn(*ts)
    node = type(out.grad_fn).__name__
    out.backward()
    return _np(out), [_np(ts[k].grad) for k in wrt], node


@pytest.mark.parametrize("name,warm", [("big_mlp", True), ("branchy", True), ("branchy", False)],
                         ids=["big_mlp", "branchy", "branchy_cold"])
def test_eight_threads_calling_one_compiled_function(name, warm):
    fn = {"big_mlp": big_mlp, "branchy": branchy}[name]
    n_threads, n_calls = 8, 20
    rng = np.random.default_rng(14)
    work = [[_thread_inputs(name, rng) for _ in range(n_calls)] for _ in range(n_threads)]
    expected = [[_forward_backward(fn, a, wrt) for a, wrt in calls] for calls in work]
    cf = tg.compile(fn)
    if warm:                                   # every path traced before the threads start
        for calls in work:
            for a, wrt in calls[:2]:
                _forward_backward(cf, a, wrt)
    results = [[None] * n_calls for _ in range(n_threads)]
    errors = []
    start = threading.Barrier(n_threads)

    def worker(i):
        try:
            start.wait()
            for j, (a, wrt) in enumerate(work[i]):
                results[i][j] = _forward_backward(cf, a, wrt)
        except BaseException as e:             # noqa: BLE001 -- reported to the test thread
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    tol = dict(rtol=1e-4, atol=1e-6) if name == "big_mlp" else dict(rtol=1e-12, atol=1e-14)
    for i in range(n_threads):
        for j in range(n_calls):
            (out, grads, node), (eout, egrads, _) = results[i][j], expected[i][j]
            if warm:
                assert node == COMPILED_NODE
            np.testing.assert_allclose(out, eout, **tol)
            for g, e in zip(grads, egrads):
                np.testing.assert_allclose(g, e, **tol)
    if name == "branchy":
        assert len(cf.programs) == cf.stats.traces == 2     # each branch traced once
    else:                                      # both programs use the per-thread arena
        plans = cf.programs[0].forward_plan, cf.programs[0].backward_plan
        assert all(p.arena_bytes > 64 * 1024 for p in plans)


# ---------------------------------------------------------------------------------------------
# retain_graph rule on the compiled node
# ---------------------------------------------------------------------------------------------

def _second_backward_message(lib, fn):
    x = _t(lib, [0.5, -1.0], True)
    out = fn(x)
    if lib is tg:
        _assert_compiled(out)
    out.backward()
    with pytest.raises(RuntimeError) as info:
        out.backward()
    return str(info.value)


def test_second_backward_without_retain_graph_raises_torch_error():
    def f(x):
        return (x.exp() * x).sum()
    cf = _compiled(f, _t(tg, [1.0, 2.0], True))
    msg = _second_backward_message(tg, cf)
    assert "Trying to backward through the graph a second time" in msg
    assert "retain_graph=True" in msg
    torch = _torch()
    if torch is not None:
        ref = _second_backward_message(torch, f)
        assert ref.split(".")[0] in msg        # PyTorch's first sentence, verbatim


def test_retain_graph_allows_second_backward_and_accumulates():
    def f(x):
        return (x.exp() * x).sum()
    xs = np.array([0.5, -1.0, 2.0])
    cf = _compiled(f, _t(tg, np.ones(3), True))
    x = _t(tg, xs, True)
    out = cf(x)
    _assert_compiled(out)
    out.backward(retain_graph=True)
    once = _np(x.grad)
    np.testing.assert_allclose(once, np.exp(xs) * (1 + xs), rtol=1e-12)
    out.backward(retain_graph=True)
    out.backward()
    np.testing.assert_allclose(_np(x.grad), 3 * once, rtol=1e-12)
    with pytest.raises(RuntimeError, match="second time"):
        out.backward()


def test_autograd_grad_frees_compiled_graph_unless_retained():
    cf = _compiled(exp_sin, _t(tg, np.ones(2), True))
    x = _t(tg, [0.3, 0.7], True)
    out = cf(x)
    g1, = tg.autograd.grad(out, x, retain_graph=True)
    g2, = tg.autograd.grad(out, x)
    np.testing.assert_array_equal(_np(g1), _np(g2))
    with pytest.raises(RuntimeError, match="second time"):
        tg.autograd.grad(out, x)
