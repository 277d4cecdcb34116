"""More PyTorch names training scripts reach for: log2, expm1, hstack, vstack, roll, diag,
nan_to_num, F.kl_div / nn.KLDivLoss, F.group_norm / nn.GroupNorm, optim.Adagrad.

Each is checked against torch (the oracle; skipped without it) in values, dtypes, shapes,
gradients and error types; by finite differences in float64; compiled == eager (values and
gradients); and on the JAX backend (skipped without jax)."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn as tnn
import tracegrad.nn.functional as TF


def _torch():
    return pytest.importorskip("torch")


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _arrays(shapes, dtype, seed=0, domain="real"):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        a = rng.standard_normal(s)
        if domain == "pos":
            a = np.abs(a) + 0.3
        out.append(a.astype(dtype))
    return out


def _run(m, fn, arrays, grad=True):
    """(inputs, output) of `fn(m, *tensors)`; backward of a weighted sum when `grad`."""
    xs = [m.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    out = fn(m, *xs)
    if grad and out.requires_grad:
        w = np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)).astype(
            _np(out).dtype)
        (out * m.tensor(w)).sum().backward()
    return xs, out


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)


def check_like_torch(fn, shapes, dtypes=("float32", "float64"), domain="real", grad=True,
                     gradcheck=True, compiled=True, jax=True, arrays=None):
    torch = _torch()
    for dtype in dtypes:
        arrs = arrays(dtype) if arrays else _arrays(shapes, dtype, domain=domain)
        txs, tout = _run(torch, fn, arrs, grad)
        gxs, gout = _run(tg, fn, arrs, grad)
        assert str(gout.dtype) == str(tout.dtype), (gout.dtype, tout.dtype)
        assert tuple(gout.shape) == tuple(tout.shape)
        np.testing.assert_allclose(_np(gout), _np(tout), **_tol(dtype))
        assert gout.requires_grad == tout.requires_grad
        for gx, tx in zip(gxs, txs):
            assert (gx.grad is None) == (tx.grad is None)
            if tx.grad is not None:
                np.testing.assert_allclose(_np(gx.grad), _np(tx.grad), **_tol(dtype))
    arrs64 = arrays("float64") if arrays else _arrays(shapes, "float64", domain=domain)
    if grad and gradcheck:
        xs = [tg.tensor(a, requires_grad=True) for a in arrs64]
        assert tg.autograd.gradcheck(lambda *t: fn(tg, *t), xs)
    if compiled:
        check_compiled(fn, arrs64, grad=grad)
    if jax:
        check_compiled(fn, arrs64, grad=grad, backend="jax")


def check_compiled(fn, arrays, grad=True, backend="numpy"):
    if backend == "jax":
        pytest.importorskip("jax")
    ex, eout = _run(tg, fn, arrays, grad)
    cf = tg.compile(lambda *t: fn(tg, *t), backend=backend)
    for _ in range(2):
        cx = [tg.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
        cout = cf(*cx)
        if grad and cout.requires_grad:
            w = np.linspace(0.5, 1.5, cout.numel()).reshape(tuple(cout.shape)).astype(
                _np(cout).dtype)
            (cout * tg.tensor(w)).sum().backward()
        np.testing.assert_allclose(_np(cout), _np(eout), rtol=1e-12, atol=1e-12)
        assert cout.dtype == eout.dtype and cout.shape == eout.shape
        for a, b in zip(cx, ex):
            assert (a.grad is None) == (b.grad is None)
            if a.grad is not None:
                np.testing.assert_allclose(_np(a.grad), _np(b.grad), rtol=1e-12, atol=1e-12)
    assert cf.stats.traces == 1 and cf.stats.eager_calls == 0


def raises_like(fn):
    """`fn(m)` raises for torch and tracegrad with the same builtin exception type."""
    torch = _torch()
    with pytest.raises(Exception) as te:
        fn(torch)
    with pytest.raises(type(te.value)) as ge:
        fn(tg)
    return te.value, ge.value


# ---------------- log2, expm1 ----------------

def test_log2_like_torch():
    check_like_torch(lambda m, x: m.log2(x), [(3, 4)], domain="pos")
    check_like_torch(lambda m, x: x.log2(), [(5,)], domain="pos")


def test_expm1_like_torch():
    check_like_torch(lambda m, x: m.expm1(x), [(3, 4)])
    check_like_torch(lambda m, x: x.expm1() * 2, [(5,)])


def test_log1p_like_torch():
    check_like_torch(lambda m, x: m.log1p(x), [(3, 4)], domain="pos")


@pytest.mark.parametrize("name", ["log2", "expm1"])
def test_log2_expm1_integer_inputs_and_grad_fn(name):
    torch = _torch()
    t = getattr(torch, name)(torch.tensor([1, 2, 4]))
    g = getattr(tg, name)(tg.tensor([1, 2, 4]))
    assert str(g.dtype) == str(t.dtype)
    np.testing.assert_allclose(_np(g), _np(t), rtol=1e-6)
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    assert type(getattr(tg, name)(x).grad_fn).__name__ == \
        type(getattr(torch, name)(tx).grad_fn).__name__


# ---------------- hstack, vstack ----------------

@pytest.mark.parametrize("shapes", [[(3,), (2,)], [(2, 3), (2, 1)], [(), (2,)],
                                    [(2, 2, 1), (2, 3, 1)]])
def test_hstack_like_torch(shapes):
    check_like_torch(lambda m, *xs: m.hstack(list(xs)), shapes)


@pytest.mark.parametrize("shapes", [[(3,), (3,)], [(2, 3), (3,)], [(), ()],
                                    [(1, 2, 2), (3, 2, 2)]])
def test_vstack_like_torch(shapes):
    check_like_torch(lambda m, *xs: m.vstack(tuple(xs)), shapes)


def test_stack_dtype_promotion_and_errors():
    torch = _torch()
    for fn in ("hstack", "vstack"):
        t = getattr(torch, fn)([torch.ones(2, 2), torch.zeros(2, 2, dtype=torch.int64)])
        g = getattr(tg, fn)([tg.ones(2, 2), tg.zeros(2, 2, dtype=tg.int64)])
        assert str(g.dtype) == str(t.dtype) and tuple(g.shape) == tuple(t.shape)
        _, e = raises_like(lambda m: getattr(m, fn)([]))
        assert "expects a non-empty TensorList" in str(e)
        raises_like(lambda m: getattr(m, fn)(m.ones(2, 2)))
    raises_like(lambda m: m.vstack([m.ones(2, 2), m.ones(3)]))
    raises_like(lambda m: m.hstack([m.ones(2, 2), m.ones(3, 2)]))


# ---------------- roll ----------------

@pytest.mark.parametrize("args", [(1,), (-7,), (2, 0), ((1, -2), (0, 1)), ((3, 1), (1, 1)),
                                  (5, -1), ((1,), ()), (0, 1)])
def test_roll_like_torch(args):
    check_like_torch(lambda m, x: m.roll(x, *args), [(3, 4)])
    check_like_torch(lambda m, x: x.roll(*args) * 1.5, [(2, 5)], dtypes=("float64",),
                     gradcheck=False, compiled=False, jax=False)


def test_roll_ints_empty_and_errors():
    torch = _torch()
    for x in (lambda m: m.arange(12).reshape(3, 4), lambda m: m.ones(0, 3)):
        np.testing.assert_array_equal(_np(tg.roll(x(tg), 2, 0)), _np(torch.roll(x(torch), 2, 0)))
    assert tg.roll(tg.tensor(3.0), 1).shape == torch.roll(torch.tensor(3.0), 1).shape
    for bad in (lambda m: m.roll(m.ones(2, 3), (1, 2)),
                lambda m: m.roll(m.ones(2, 3), (1, 2), (0,)),
                lambda m: m.roll(m.ones(2, 3), 1, 2),
                lambda m: m.roll(m.ones(2, 3), ()),
                lambda m: m.roll(m.ones(2, 3), 1.5),
                lambda m: m.roll(m.tensor(3.0), 1, 0)):
        t, g = raises_like(bad)
        assert str(t).splitlines()[0] in str(g)


def test_roll_result_is_a_copy():
    x = tg.arange(4.0)
    y = tg.roll(x, 0)
    y.add_(1)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


# ---------------- diag ----------------

@pytest.mark.parametrize("k", [0, 1, 2, -1, -3])
def test_diag_vector_to_matrix_like_torch(k):
    check_like_torch(lambda m, v: m.diag(v, k), [(3,)])
    check_like_torch(lambda m, v: v.diag(diagonal=k), [(2,)], dtypes=("float64",),
                     gradcheck=False, compiled=False, jax=False)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (4, 2)])
@pytest.mark.parametrize("k", [0, 1, -1, 3, -5])
def test_diag_matrix_to_vector_like_torch(shape, k):
    check_like_torch(lambda m, x: m.diag(x, k), [shape], gradcheck=k in (0, 1))


def test_diag_ints_inf_empty_and_errors():
    torch = _torch()
    for x in (lambda m: m.tensor([1, 2]), lambda m: m.tensor([float("inf"), 1.0]),
              lambda m: m.ones(0), lambda m: m.arange(6).reshape(2, 3)):
        for k in (0, 1, -1):
            t, g = torch.diag(x(torch), k), tg.diag(x(tg), k)
            assert str(g.dtype) == str(t.dtype)
            np.testing.assert_array_equal(_np(g), _np(t))
    for bad in (lambda m: m.diag(m.ones(2, 2, 2)), lambda m: m.diag(m.tensor(1.0)),
                lambda m: m.diag(m.ones(2), 1.0)):
        t, g = raises_like(bad)
        assert str(t).splitlines()[0] in str(g)


def test_diag_of_matrix_is_a_copy():
    x = tg.ones(2, 2)
    tg.diag(x).mul_(3)
    assert x.tolist() == [[1.0, 1.0], [1.0, 1.0]]


# ---------------- nan_to_num ----------------

def _special(dtype):
    a = np.array([[np.nan, np.inf, -np.inf, 1.5], [-2.0, 0.25, np.nan, 3.0]], dtype=dtype)
    return [a]


@pytest.mark.parametrize("kw", [{}, {"nan": 1.0}, {"posinf": 5.0, "neginf": -7},
                                {"nan": -1, "posinf": 2.0, "neginf": 3.0}])
def test_nan_to_num_like_torch(kw):
    check_like_torch(lambda m, x: m.nan_to_num(x, **kw), None, arrays=_special,
                     gradcheck=False)
    check_like_torch(lambda m, x: x.nan_to_num(**kw), None, arrays=_special,
                     gradcheck=False, compiled=False, jax=False)
    check_like_torch(lambda m, x: m.nan_to_num(x, **kw), [(3, 4)])  # finite: fd check


def test_nan_to_num_dtypes_inplace_and_errors():
    torch = _torch()
    vals = [float("nan"), float("inf"), -float("inf"), 1.0]
    for dt in ("float16", "float32", "float64"):
        t = torch.nan_to_num(torch.tensor(vals, dtype=getattr(torch, dt)))
        g = tg.nan_to_num(tg.tensor(vals, dtype=getattr(tg, dt)))
        assert str(g.dtype) == str(t.dtype)
        np.testing.assert_array_equal(_np(g), _np(t))
    for x in (lambda m: m.tensor([1, 2]), lambda m: m.tensor([True, False])):
        t, g = torch.nan_to_num(x(torch), nan=1.0), tg.nan_to_num(x(tg), nan=1.0)
        assert str(g.dtype) == str(t.dtype) and g.tolist() == t.tolist()
    y = tg.tensor(vals)
    assert y.nan_to_num_(posinf=2.0) is y
    assert y.tolist() == torch.tensor(vals).nan_to_num_(posinf=2.0).tolist()
    raises_like(lambda m: m.nan_to_num(m.ones(2), nan="a"))
    raises_like(lambda m: m.ones(2, requires_grad=True).nan_to_num_())


# ---------------- xlogy (the primitive kl_div is built on) ----------------

def test_xlogy_like_torch():
    def arrays(dtype):
        x = np.array([[0.0, 1.5, -2.0], [0.5, 0.0, 3.0]], dtype=dtype)
        return [x, np.array([0.7, 2.0, 1.3], dtype=dtype)]
    check_like_torch(lambda m, x, y: m.xlogy(x, y), None, arrays=arrays)
    check_like_torch(lambda m, x, y: x.xlogy(y), None, arrays=arrays, compiled=False,
                     jax=False)
    torch = _torch()
    for a, b in ((lambda m: m.tensor([0, 1, 2]), lambda m: m.tensor([0.0, 3.0, float("nan")])),
                 (lambda m: 2.0, lambda m: m.tensor([3, 4])),
                 (lambda m: m.tensor([0.0, 2.0]), lambda m: 0)):
        t, g = torch.xlogy(a(torch), b(torch)), tg.xlogy(a(tg), b(tg))
        assert str(g.dtype) == str(t.dtype)
        np.testing.assert_array_equal(_np(g), _np(t))


# ---------------- kl_div, KLDivLoss ----------------

def _kl_arrays(dtype, log_target=False):
    rng = np.random.default_rng(1)
    x = np.log(rng.dirichlet(np.ones(5), size=4)).astype(dtype)
    t = rng.dirichlet(np.ones(5), size=4).astype(dtype)
    t[0, 1] = 0.0                       # a zero target: xlogy's 0, never 0 * log 0 = nan
    return [x, np.log(t + 0.1).astype(dtype) if log_target else t]


@pytest.mark.parametrize("reduction", ["none", "sum", "batchmean", "mean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_like_torch(reduction, log_target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # 'mean' warns, as PyTorch's

        def fn(m, x, t):
            return m.nn.functional.kl_div(x, t.detach() if not log_target else t,
                                          reduction=reduction, log_target=log_target)
        check_like_torch(fn, None, arrays=lambda d: _kl_arrays(d, log_target),
                         gradcheck=log_target)

        def mod(m, x, t):
            return m.nn.KLDivLoss(reduction=reduction, log_target=log_target)(x, t)
        check_like_torch(mod, None, arrays=lambda d: _kl_arrays(d, log_target),
                         gradcheck=False, jax=False)


def test_kl_div_gradient_wrt_target_is_torchs_even_at_zero():
    torch = _torch()
    grads = []
    for m in (torch, tg):
        x = m.tensor([-1.0, -2.0, -0.5], requires_grad=True)
        t = m.tensor([0.0, 0.5, 0.3], requires_grad=True)
        m.nn.functional.kl_div(x, t, reduction="sum").backward()
        grads.append((_np(x.grad), _np(t.grad)))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-6)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-6)   # nan at 0, as torch
    xs = [tg.tensor(a, requires_grad=True) for a in _arrays([(3, 4), (3, 4)], "float64",
                                                             domain="pos")]
    assert tg.autograd.gradcheck(lambda x, t: TF.kl_div(x, t, reduction="sum"), xs)


def test_kl_div_warnings_legacy_args_and_errors():
    torch = _torch()
    x, t = [-1.0, -2.0], [0.0, 0.5]
    for m in (torch, tg):
        with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
            m.nn.functional.kl_div(m.tensor(x), m.tensor(t))
        with warnings.catch_warnings():
            warnings.simplefilter("error")           # no numpy warning for 0 * log(0)
            m.nn.functional.kl_div(m.tensor(x), m.tensor(t), reduction="batchmean")
        with pytest.warns(UserWarning, match="size_average and reduce args"):
            r = m.nn.functional.kl_div(m.tensor(x), m.tensor(t), size_average=False)
        assert r.item() == pytest.approx(0.5 * np.log(0.5) + 1.0, rel=1e-6)
    with pytest.warns(UserWarning, match="size_average and reduce args"):
        reductions = [m.nn.KLDivLoss(reduce=False).reduction for m in (tg, torch)]
    assert reductions == ["none", "none"]
    assert repr(tg.nn.KLDivLoss(reduction="batchmean")) == "KLDivLoss()"
    # batchmean of a 0-d input: no division (as PyTorch)
    assert TF.kl_div(tg.tensor(-1.0), tg.tensor(0.5), reduction="batchmean").item() == \
        pytest.approx(torch.nn.functional.kl_div(torch.tensor(-1.0), torch.tensor(0.5),
                                                 reduction="batchmean").item())
    for bad in (lambda m: m.nn.functional.kl_div(m.ones(2), m.ones(2), reduction="foo"),
                lambda m: m.nn.KLDivLoss(reduction="foo")(m.ones(2), m.ones(2)),
                lambda m: m.nn.functional.kl_div(m.ones(2), m.tensor([0, 1]),
                                                 reduction="none"),
                lambda m: m.nn.functional.kl_div(m.tensor([0, 1]), m.ones(2),
                                                 reduction="sum")):
        te, ge = raises_like(bad)
        assert str(te).splitlines()[0] in str(ge)


# ---------------- group_norm, GroupNorm ----------------

@pytest.mark.parametrize("shape,groups", [((2, 4, 3), 2), ((3, 6, 2, 2), 3), ((2, 8), 2),
                                          ((2, 4, 5), 1)])
@pytest.mark.parametrize("affine", [False, True])
def test_group_norm_like_torch(shape, groups, affine):
    c = shape[1]
    if affine:
        def fn(m, x, w, b):
            return m.nn.functional.group_norm(x, groups, w, b, eps=1e-3)
        shapes = [shape, (c,), (c,)]
    else:
        def fn(m, x):
            return m.nn.functional.group_norm(x, groups)
        shapes = [shape]
    check_like_torch(fn, shapes)


def test_group_norm_weight_only_and_module():
    torch = _torch()
    check_like_torch(lambda m, x, w: m.nn.functional.group_norm(x, 2, w), [(2, 4, 3), (4,)])
    for m in (tg, torch):
        m.manual_seed(0)
    for kw in ({}, {"affine": False}, {"bias": False}, {"eps": 1e-3}):
        t, g = torch.nn.GroupNorm(2, 4, **kw), tg.nn.GroupNorm(2, 4, **kw)
        assert repr(g) == repr(t)
        assert list(g.state_dict()) == list(t.state_dict())
        for k, v in t.state_dict().items():
            np.testing.assert_array_equal(_np(g.state_dict()[k]), _np(v))
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    t, g = torch.nn.GroupNorm(2, 4), tg.nn.GroupNorm(2, 4)
    yt, yg = t(torch.tensor(x)), g(tg.tensor(x))
    np.testing.assert_allclose(_np(yg), _np(yt), rtol=1e-5, atol=1e-5)
    (yt * yt).sum().backward()
    (yg * yg).sum().backward()
    for (n, pt), (_, pg) in zip(t.named_parameters(), g.named_parameters()):
        np.testing.assert_allclose(_np(pg.grad), _np(pt.grad), rtol=1e-4, atol=1e-5)
    assert tg.nn.GroupNorm(2, 4, dtype=tg.float64).weight.dtype == tg.float64


def test_group_norm_errors_like_torch():
    x = lambda m: m.ones(2, 4, 3)       # noqa: E731
    for bad in (lambda m: m.nn.functional.group_norm(x(m), 3),
                lambda m: m.nn.functional.group_norm(x(m), 2, m.ones(3)),
                lambda m: m.nn.functional.group_norm(x(m), 2, m.ones(4), m.ones(3)),
                lambda m: m.nn.functional.group_norm(m.ones(4), 2),
                lambda m: m.nn.functional.group_norm(m.ones(1, 2), 2),
                lambda m: m.nn.functional.group_norm(m.ones(1, 2, 1), 2),
                lambda m: m.nn.functional.group_norm(m.ones(2, 4, dtype=m.int64), 2),
                lambda m: m.nn.functional.group_norm(x(m), 2, m.ones(4, dtype=m.float64)),
                lambda m: m.nn.GroupNorm(3, 4)):
        raises_like(bad)


def test_group_norm_in_a_compiled_training_step():
    def make():
        tg.manual_seed(0)
        model = tnn.Sequential(tnn.Conv2d(2, 4, 3, padding=1), tnn.GroupNorm(2, 4),
                               tnn.ReLU(), tnn.Flatten(), tnn.Linear(4 * 5 * 5, 3))
        return model, tg.optim.SGD(model.parameters(), lr=0.1)
    x = tg.randn(2, 2, 5, 5)
    target = tg.tensor([[-1.0, 0.5, -2.0], [-0.3, -1.2, -0.7]]).log_softmax(1)

    def step(model, opt, x):
        opt.zero_grad()
        loss = TF.kl_div(model(x).log_softmax(1), target, reduction="batchmean",
                         log_target=True)
        loss.backward()
        opt.step()
        return loss
    me, oe = make()
    mc, oc = make()
    cstep = tg.compile(lambda x: step(mc, oc, x))
    for _ in range(3):
        le, lc = step(me, oe, x), cstep(x)
        assert lc.item() == pytest.approx(le.item(), rel=1e-6)
    for pe, pc in zip(me.parameters(), mc.parameters()):
        np.testing.assert_allclose(_np(pc), _np(pe), rtol=1e-6, atol=1e-7)


# ---------------- optim.Adagrad ----------------
ADAGRAD_OPTIONS = [dict(), dict(lr=0.1, lr_decay=0.05), dict(weight_decay=0.1, lr=0.05),
                   dict(initial_accumulator_value=0.5, eps=1e-3, lr=0.2),
                   dict(lr=0.1, lr_decay=0.01, weight_decay=0.01,
                        initial_accumulator_value=0.1, eps=1e-6),
                   dict(maximize=True)]


def _adagrad_run(m, dtype="float32", **kw):
    w = m.nn.Parameter(m.tensor(np.linspace(-1, 1, 6, dtype=dtype).reshape(2, 3)))
    opt = m.optim.Adagrad([w], **kw)
    sd0 = opt.state_dict()
    first = (sorted(sd0["state"]), sorted(sd0["state"][0]), sd0["state"][0]["sum"].tolist())
    out = []
    for i in range(10):
        w.grad = m.tensor(np.cos(np.arange(6, dtype=dtype).reshape(2, 3) * (i + 1)))
        opt.step()
        out.append(w.detach().numpy().copy())
    sd = opt.state_dict()
    st = sd["state"][0]
    return (np.array(out), np.array(st["sum"].tolist()), first, list(st), sd["param_groups"][0],
            st["step"].item(), str(st["step"].dtype))


@pytest.mark.parametrize("kw", ADAGRAD_OPTIONS, ids=[str(k) for k in ADAGRAD_OPTIONS])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adagrad_matches_torch(kw, dtype):
    got, want = _adagrad_run(tg, dtype, **kw), _adagrad_run(_torch(), dtype, **kw)
    # float32: PyTorch's addcmul_ fuses a multiply-add (one ulp per step at most)
    tol = dict(rtol=1e-6, atol=1e-7) if dtype == "float32" else dict(rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(got[0], want[0], **tol)
    np.testing.assert_allclose(got[1], want[1], **tol)
    assert got[2:] == want[2:]      # state made at construction, layout, groups, step count


@pytest.mark.parametrize("bad", ["lr", "lr_decay", "weight_decay", "initial_accumulator_value",
                                 "eps"])
def test_adagrad_rejects_bad_options_like_torch(bad):
    te, ge = raises_like(lambda m: m.optim.Adagrad([m.nn.Parameter(m.ones(2))], **{bad: -0.5}))
    assert str(te) == str(ge)


def test_adagrad_state_dict_round_trip_and_skips_params_without_grad():
    torch = _torch()
    res = []
    for m in (tg, torch):
        a, b = m.nn.Parameter(m.ones(3)), m.nn.Parameter(m.ones(2))
        opt = m.optim.Adagrad([a, b], lr=0.5)
        a.grad = m.tensor([1.0, -2.0, 0.5])
        opt.step()
        opt2 = m.optim.Adagrad([a, b], lr=0.5)
        opt2.load_state_dict(opt.state_dict())
        a.grad = m.tensor([0.5, 0.5, 0.5])
        opt2.step()
        res.append((a.tolist(), b.tolist(), opt2.state_dict()["state"][1]["step"].item(),
                    opt2.state_dict()["state"][0]["step"].item()))
    assert res[0][1:] == res[1][1:]
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_adagrad_compiled_step_equals_eager_and_never_retraces_for_lr(backend):
    if backend == "jax":
        pytest.importorskip("jax")

    def train(compiled):
        tg.manual_seed(0)
        model = tnn.Sequential(tnn.Linear(3, 4), tnn.Tanh(), tnn.Linear(4, 1))
        opt = tg.optim.Adagrad(model.parameters(), lr=0.1, lr_decay=0.01, weight_decay=0.01,
                               initial_accumulator_value=0.1)
        sched = tg.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)

        def step(x, y):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        fn = tg.compile(step, backend=backend) if compiled else step
        losses = []
        for i in range(6):
            x = tg.tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3) * (i + 1))
            losses.append(fn(x, x.sum(1, keepdim=True)).item())
            sched.step()
            opt.param_groups[0]["lr_decay"] = 0.01 * (i + 2)      # a runtime value too
        return losses, [p.detach().clone() for p in model.parameters()], opt, fn
    (le, pe, oe, _), (lc, pc, oc, fn) = train(False), train(True)
    if backend == "numpy":
        assert le == lc and all(tg.equal(a, b) for a, b in zip(pe, pc))
    else:
        np.testing.assert_allclose(lc, le, rtol=1e-5)
        for a, b in zip(pc, pe):
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=1e-6)
    # one retrace only, when the first call's None gradients exist; never for lr/lr_decay
    assert fn.stats.eager_calls == 0 and fn.stats.traces == 2, fn.stats
    assert fn.stats.retraces == ["a .grad that was None when traced is set now"], fn.stats
    assert oe.state_dict()["state"][0]["step"].item() == oc.state_dict()["state"][0]["step"].item()


@pytest.mark.parametrize("name", ["log1p_", "log2_", "expm1_"])
def test_inplace_log_variants_like_torch(name):
    def fn(m, x):
        y = x.exp() * 1.0
        out = getattr(y, name)()
        assert out is y
        return y
    check_like_torch(fn, [(3, 4)])
    raises_like(lambda m: getattr(m.ones(2, requires_grad=True), name)())
    raises_like(lambda m: getattr(m.tensor([1, 2]), name)())
