"""Fused primitives: linear/addmm, cross_entropy (log_softmax + nll_loss and their fused
gradients), softmax/log_softmax/gelu gradients, dropout.

Checked against PyTorch (values, first and second gradients, grad_fn names including the
nodes a `create_graph=True` backward records), by finite differences in float64 to second
order (gradcheck / gradgradcheck), and compiled == eager (`tracegrad.compile`).
"""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad.autograd import gradcheck, gradgradcheck


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _chain(fn, depth=4):
    """grad_fn class names following the first non-leaf edge: [Out, In, ...]."""
    names = []
    while fn is not None and depth:
        names.append(type(fn).__name__)
        nxt = [f for f, _ in fn.next_functions
               if f is not None and type(f).__name__ != "AccumulateGrad"]
        fn = nxt[0] if nxt else None
        depth -= 1
    return names


def _leaves(lib, arrays):
    return [None if a is None else lib.tensor(a, requires_grad=True) for a in arrays]


def _first_and_second(lib, f, arrays):
    """f(*leaves), its gradients (create_graph) and the gradients of sum(g * g)."""
    xs = _leaves(lib, arrays)
    live = [x for x in xs if x is not None]
    y = f(lib, *xs)
    gs = lib.autograd.grad((y * y).sum(), live, create_graph=True)
    ggs = lib.autograd.grad(sum((g * g).sum() for g in gs), live, allow_unused=True)
    return y, gs, ggs


def _compare(f, arrays, torch, rtol=1e-7, atol=1e-9, names=True):
    ours = _first_and_second(tg, f, arrays)
    theirs = _first_and_second(torch, f, arrays)
    np.testing.assert_allclose(ours[0].detach().numpy(), theirs[0].detach().numpy(),
                               rtol=rtol, atol=atol)
    for a, b in zip(ours[1] + ours[2], theirs[1] + theirs[2]):
        if b is None:
            continue
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol,
                                   atol=atol)
    if names:
        assert _chain(ours[0].grad_fn, 3) == _chain(theirs[0].grad_fn, 3)
    return ours, theirs


# ---------------- linear / addmm ----------------
LINEAR_CASES = [  # input shape, bias shape (None: no bias), transpose input (non-contiguous)
    ((4, 3), (5,), False), ((4, 3), None, False), ((2, 4, 3), (5,), False),
    ((2, 4, 3), None, False), ((2, 2, 4, 3), (5,), False), ((3,), (5,), False),
    ((3,), None, False), ((4, 2, 3), (5,), True), ((4, 2, 3), None, True),
    ((4, 3), (4, 5), False), ((4, 3), (), False), ((2, 4, 3), (), False), ((2, 0, 3), (5,), False),
]


@pytest.mark.parametrize("xs,bs,transposed", LINEAR_CASES, ids=str)
def test_linear_matches_torch_values_grads_and_nodes(xs, bs, transposed, torch):
    rng = np.random.default_rng(len(xs) * 10 + (0 if bs is None else len(bs)))
    x0 = rng.standard_normal(xs)
    w0 = rng.standard_normal((5, 3))
    b0 = None if bs is None else rng.standard_normal(bs)

    def f(lib, x, w, b=None):
        if transposed:
            x = x.transpose(0, 1)
        return lib.nn.functional.linear(x, w, b)

    ours, theirs = _compare(f, [x0, w0, b0], torch, names=False)
    # the nodes PyTorch records for the output and what it folds (its input side may go
    # through a clone/view of a non-contiguous input that tracegrad names differently);
    # tracegrad's addmm takes the weight untransposed: no TBackward0 before its leaf
    depth = 2 if transposed else 3
    theirs_names = [n for n in _chain(theirs[0].grad_fn, depth) if n != "TBackward0"]
    assert _chain(ours[0].grad_fn, depth) == theirs_names


def test_linear_module_prints_addmm():
    lin = tg.nn.Linear(3, 2)
    y = lin(tg.randn(4, 3))
    assert "grad_fn=<AddmmBackward0>" in repr(y)
    assert type(tg.nn.Linear(3, 2, bias=False)(tg.randn(4, 3)).grad_fn).__name__ == "MmBackward0"
    assert [type(f).__name__ for f, _ in y.grad_fn.next_functions] == [
        "AccumulateGrad", "NoneType", "AccumulateGrad"]


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1), (2, 0)])
@pytest.mark.parametrize("cs", [(4, 5), (5,), (1, 5), (4, 1), ()])
def test_addmm_matches_torch(beta, alpha, cs, torch):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(cs), rng.standard_normal((4, 3)), rng.standard_normal((3, 5))]

    def f(lib, c, a, b):
        return lib.addmm(c, a, b, beta=beta, alpha=alpha)

    ours, _ = _compare(f, arrays, torch)
    assert type(ours[0].grad_fn).__name__ == "AddmmBackward0"
    c, a, b = (tg.tensor(x) for x in arrays)
    np.testing.assert_allclose(c.addmm(a, b, beta=beta, alpha=alpha).numpy(),
                               ours[0].detach().numpy())


def test_addmm_beta_zero_ignores_nan_input(torch):
    c = np.full((2, 2), np.nan)
    a, b = np.ones((2, 3)), np.ones((3, 2))
    ours = tg.addmm(tg.tensor(c), tg.tensor(a), tg.tensor(b), beta=0).numpy()
    theirs = torch.addmm(torch.tensor(c), torch.tensor(a), torch.tensor(b), beta=0).numpy()
    np.testing.assert_array_equal(ours, theirs)


ERROR_CASES = [
    lambda m: m.nn.functional.linear(m.ones(()), m.ones(5, 3), m.ones(5)),
    lambda m: m.nn.functional.linear(m.ones(4, 2), m.ones(5, 3), m.ones(5)),
    lambda m: m.nn.functional.linear(m.ones(4, 3), m.ones(5, 3), m.ones(4)),
    lambda m: m.nn.functional.linear(m.ones(4, 3).double(), m.ones(5, 3), m.ones(5)),
    lambda m: m.nn.functional.linear(m.ones(4, 3), m.ones(5, 3), m.ones(5).double()),
    lambda m: m.nn.functional.linear(m.ones(4, 3), m.ones(5, 3).double()),
    lambda m: m.nn.functional.linear(m.ones(2, 4, 2), m.ones(5, 3)),
    lambda m: m.addmm(m.ones(5), m.ones(4, 3), m.ones(2, 5)),
    lambda m: m.addmm(m.ones(5), m.ones(4, 3, 1), m.ones(3, 5)),
    lambda m: m.addmm(m.ones(1, 4, 5), m.ones(4, 3), m.ones(3, 5)),
    lambda m: m.addmm(m.ones(4).double(), m.ones(4, 3), m.ones(3, 5)),
]


@pytest.mark.parametrize("k", range(len(ERROR_CASES)))
def test_linear_addmm_errors_match_torch(k, torch):
    with pytest.raises(Exception) as theirs:
        ERROR_CASES[k](torch)
    with pytest.raises(Exception) as ours:
        ERROR_CASES[k](tg)
    assert isinstance(ours.value, type(theirs.value))
    assert str(theirs.value).split("\n")[0] in str(ours.value)


def test_linear_addmm_gradcheck_order_two():
    rng = np.random.default_rng(5)

    def leaf(*s):
        return tg.tensor(rng.standard_normal(s), requires_grad=True)
    x, w, b = leaf(4, 3), leaf(5, 3), leaf(5)
    for f, args in [(tg.nn.functional.linear, (x, w, b)), (tg.nn.functional.linear, (x, w)),
                    (lambda c, a, m: tg.addmm(c, a, m, beta=0.5, alpha=1.5),
                     (leaf(4, 1), leaf(4, 3), leaf(3, 2))),
                    (tg.nn.functional.linear, (leaf(2, 4, 3), w, b))]:
        assert gradcheck(f, args)
        assert gradgradcheck(f, args)


# ---------------- softmax / log_softmax / gelu gradients ----------------
ACTIVATIONS = {
    "softmax": lambda m, x: m.softmax(x, 1),
    "softmax_dim0": lambda m, x: m.softmax(x, 0),
    "log_softmax": lambda m, x: m.log_softmax(x, 1),
    "log_softmax_dim0": lambda m, x: m.nn.functional.log_softmax(x, dim=0),
    "gelu": lambda m, x: m.nn.functional.gelu(x),
    "gelu_tanh": lambda m, x: m.nn.functional.gelu(x, approximate="tanh"),
}
GRAD_NODES = {"softmax": "SoftmaxBackwardDataBackward0",
              "log_softmax": "LogSoftmaxBackwardDataBackward0",
              "gelu": "GeluBackwardBackward0"}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_gradients_match_torch(name, torch):
    x0 = np.random.default_rng(7).standard_normal((4, 5)) * 2
    f = ACTIVATIONS[name]
    ours, theirs = _compare(lambda m, x: f(m, x), [x0], torch)
    g_ours, g_theirs = ours[1][0], theirs[1][0]
    assert type(g_ours.grad_fn).__name__ == type(g_theirs.grad_fn).__name__
    assert type(g_ours.grad_fn).__name__ == GRAD_NODES[name.split("_dim")[0].replace(
        "_tanh", "")]


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_gradcheck_order_two(name):
    x = tg.tensor(np.random.default_rng(8).standard_normal((3, 4)), requires_grad=True)
    f = lambda x: ACTIVATIONS[name](tg, x)       # noqa: E731
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


def test_fused_gradients_third_order(torch):
    """The fused gradients' own VJPs differentiate again (create_graph twice)."""
    x0 = np.random.default_rng(2).standard_normal((3, 4))
    out = []
    for lib in (tg, torch):
        x = lib.tensor(x0, requires_grad=True)
        y = lib.nn.functional.gelu(lib.log_softmax(x, 1) * lib.softmax(x, 0))
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), x, create_graph=True)
        (ggg,) = lib.autograd.grad((gg * gg).sum(), x)
        out.append((g.detach().numpy(), gg.detach().numpy(), ggg.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


# ---------------- cross_entropy / nll_loss ----------------
W3 = np.array([1.0, 2.0, 0.5])
CE_CASES = [
    ((6, 3), "index", {}), ((6, 3), "index", dict(reduction="sum")),
    ((6, 3), "index", dict(reduction="none")), ((6, 3), "index", dict(weight=W3)),
    ((6, 3), "index", dict(weight=W3, reduction="none")),
    ((6, 3), "index", dict(ignore_index=1)),
    ((6, 3), "index", dict(ignore_index=1, weight=W3, reduction="sum")),
    ((6, 3), "index", dict(label_smoothing=0.2)),
    ((6, 3), "index", dict(label_smoothing=0.2, weight=W3, ignore_index=0)),
    ((6, 3), "index", dict(label_smoothing=0.3, reduction="none")),
    ((6, 3), "prob", {}), ((6, 3), "prob", dict(label_smoothing=0.1, weight=W3)),
    ((6, 3), "prob", dict(reduction="none")), ((3,), "index", {}),
    ((2, 3, 5), "index", {}), ((2, 3, 5), "index", dict(reduction="none")),
    ((2, 3, 2, 2), "index", dict(weight=W3)), ((2, 3, 2, 2), "index", dict(reduction="none")),
    ((2, 3, 2, 2), "index", dict(ignore_index=0, reduction="sum")),
    ((2, 3, 2, 1, 2), "index", dict(reduction="none")), ((2, 3, 2, 1, 2), "index", {}),
    ((2, 3, 4), "index", dict(label_smoothing=0.1)),
]


def _ce_inputs(xs, kind, seed):
    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal(xs)
    c = xs[0] if len(xs) == 1 else xs[1]
    if kind == "prob":
        t0 = np.abs(rng.standard_normal(xs))
        t0 /= t0.sum(1, keepdims=True)
    else:
        t0 = rng.integers(0, c, () if len(xs) == 1 else (xs[0],) + xs[2:])
        if t0.ndim:
            t0.reshape(-1)[:c] = np.arange(c)          # every class, the ignored one too
    return x0, t0


@pytest.mark.parametrize("xs,kind,kw", CE_CASES, ids=str)
def test_cross_entropy_matches_torch(xs, kind, kw, torch):
    x0, t0 = _ce_inputs(xs, kind, len(xs) + len(kw))

    def f(lib, x):
        kws = dict(kw)
        if "weight" in kws:
            kws["weight"] = lib.tensor(kws["weight"])
        return lib.nn.functional.cross_entropy(x, lib.tensor(t0), **kws)

    ours, theirs = _compare(f, [x0], torch, names=False)
    # the nodes PyTorch records: loss, (views), nll, log_softmax, and for the gradient
    # (create_graph) the fused backward nodes
    assert _chain(ours[0].grad_fn, 4) == _chain(theirs[0].grad_fn, 4)
    if kind == "index" and "label_smoothing" not in kw:
        assert _chain(ours[1][0].grad_fn, 3) == _chain(theirs[1][0].grad_fn, 3)
    if len(xs) == 2 and kind == "index" and "label_smoothing" not in kw:
        assert _chain(ours[0].grad_fn, 2) == ["NllLossBackward0", "LogSoftmaxBackward0"]
        assert _chain(ours[1][0].grad_fn, 2) == ["LogSoftmaxBackwardDataBackward0",
                                                 "NllLossBackwardBackward0"]


@pytest.mark.parametrize("xs", [(5, 3), (2, 3, 2, 2), (2, 3, 3)], ids=str)
@pytest.mark.parametrize("kw", [{}, dict(reduction="sum"), dict(reduction="none"),
                                dict(weight=W3, ignore_index=2), dict(label_smoothing=0.2)],
                         ids=str)
def test_cross_entropy_gradcheck_order_two(kw, xs):
    x0, t0 = _ce_inputs(xs, "index", 11)
    x = tg.tensor(x0, requires_grad=True)
    kws = dict(kw)
    if "weight" in kws:
        kws["weight"] = tg.tensor(kws["weight"])
    f = lambda x: tg.nn.functional.cross_entropy(x, tg.tensor(t0), **kws)   # noqa: E731
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


def test_nll_loss_all_ignored_mean_is_nan_with_zero_gradient(torch):
    out = []
    for lib in (tg, torch):
        x = lib.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
        loss = lib.nn.functional.cross_entropy(x, lib.tensor([1, 1, 1]), ignore_index=1)
        loss.backward()
        out.append((loss.item(), x.grad.numpy()))
    assert np.isnan(out[0][0]) and np.isnan(out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])


@pytest.mark.parametrize("bad", [3, -1])
def test_out_of_bounds_target_raises_eager_and_compiled(bad):
    x = tg.randn(4, 3, requires_grad=True)

    def f(x, t):
        return tg.nn.functional.cross_entropy(x, t)
    cf = tg.compile(f)
    cf(x, tg.tensor([0, 1, 2, 0])).backward()            # compiled once with valid targets
    for fn in (f, cf):
        with pytest.raises(IndexError, match=f"Target {bad} is out of bounds"):
            fn(x, tg.tensor([0, bad, 2, 0]))


# ---------------- dropout ----------------
def test_dropout_train_mode_nodes_match_torch(torch):
    for lib in (tg, torch):
        x = lib.ones(4, 3, requires_grad=True)
        F = lib.nn.functional
        assert type(F.dropout(x, 0.5).grad_fn).__name__ == "MulBackward0"
        assert type(F.dropout(x * 1, 0.5, inplace=True).grad_fn).__name__ == "MulBackward0"
        assert F.dropout(x, 0.0) is x and F.dropout(x, 0.5, training=False) is x


def test_dropout_mask_and_gradient():
    tg.manual_seed(3)
    x = tg.ones(200, 50, requires_grad=True)
    y = tg.nn.functional.dropout(x, 0.3)
    y.sum().backward()
    kept = y.detach().numpy() != 0
    np.testing.assert_allclose(y.detach().numpy()[kept], 1 / 0.7, rtol=1e-6)
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())
    assert abs(kept.mean() - 0.7) < 0.02


# ---------------- compiled == eager ----------------
def test_compiled_training_step_matches_eager():
    """An MLP step using every fused primitive, compiled and eager: same loss and grads."""
    rng = np.random.default_rng(4)
    x0 = rng.standard_normal((8, 6))
    t0 = rng.integers(0, 4, 8)
    w1, b1 = rng.standard_normal((5, 6)), rng.standard_normal(5)
    w2, b2 = rng.standard_normal((4, 5)), rng.standard_normal(4)
    F = tg.nn.functional

    def f(x, t, w1, b1, w2, b2):
        h = F.gelu(F.linear(x, w1, b1), approximate="tanh")
        h = F.linear(h, w2) + tg.addmm(b2, h, w2.t(), beta=0.5, alpha=2.0)
        p = F.softmax(h, 1)
        return (F.cross_entropy(h, t, label_smoothing=0.1) + F.cross_entropy(h, t)
                + (p * p).sum() + F.log_softmax(h, 0).mean())

    results = []
    for fn in (f, tg.compile(f)):
        for _ in range(2):                               # trace, then a cached call
            ps = [tg.tensor(a, requires_grad=True) for a in (w1, b1, w2, b2)]
            loss = fn(tg.tensor(x0), tg.tensor(t0), *ps)
            loss.backward()
            results.append([loss.detach().numpy()] + [p.grad.numpy() for p in ps])
    for r in results[1:]:
        for a, b in zip(results[0], r):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_compiled_second_order_matches_eager():
    rng = np.random.default_rng(6)
    x0, w0, b0 = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal(5)
    t0 = rng.integers(0, 5, 4)

    def f(x, w, b, t):
        loss = tg.nn.functional.cross_entropy(tg.nn.functional.linear(x, w, b), t)
        (gw,) = tg.autograd.grad(loss, w, create_graph=True)
        return (gw * gw).sum()

    out = []
    for fn in (f, tg.compile(f)):
        w = tg.tensor(w0, requires_grad=True)
        fn(tg.tensor(x0), w, tg.tensor(b0), tg.tensor(t0)).backward()
        out.append(w.grad.numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-12, atol=1e-12)


def test_dropout_compiled_draws_the_eager_stream():
    def f(x):
        return tg.nn.functional.dropout(x, 0.4).sum(1)
    cf = tg.compile(f)
    x = tg.randn(6, 5, requires_grad=True)
    runs = []
    for fn in (f, cf):
        tg.manual_seed(1)
        runs.append([fn(x).detach().numpy() for _ in range(3)])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(runs[0][0], runs[0][1])     # a fresh mask per call


@pytest.mark.parametrize("xs", [(2, 3, 2, 2), (2, 3, 4), (3,)], ids=str)
def test_compiled_nd_cross_entropy_matches_eager(xs):
    x0, t0 = _ce_inputs(xs, "index", 21)

    def f(x, t):
        per = tg.nn.functional.cross_entropy(x, t, reduction="none", ignore_index=1)
        return (per * per).sum() + tg.nn.functional.nll_loss(x.log_softmax(
            0 if x.ndim == 1 else 1), t)

    out = []
    for fn in (f, tg.compile(f)):
        x = tg.tensor(x0, requires_grad=True)
        (g,) = tg.autograd.grad(fn(x, tg.tensor(t0)), x)
        out.append(g.numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-12, atol=1e-12)
