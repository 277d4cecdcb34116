"""tracegrad.func.functional_call / jvp / jacfwd / hessian / vmap and tracegrad.autograd.functional,
against torch.func and torch.autograd.functional in float64 (values, nesting, requires_grad,
errors), against finite differences, and compiled against eager."""
import numpy as np
import pytest

import tracegrad as tg
import tracegrad.autograd.functional as AF
from tracegrad import func as F
from tracegrad.tracing import flatten

MODES = [pytest.param(True, id="compiled"), pytest.param(False, id="eager")]


def _t(a):
    return tg.tensor(np.asarray(a, dtype=np.float64), dtype=tg.float64)


def _torch(a):
    torch = pytest.importorskip("torch")
    return torch.tensor(np.asarray(a, dtype=np.float64))


def _np(t):
    return t.detach().numpy()


def assert_tree_close(ours, ref, rtol=1e-10, atol=1e-12, grad_flags=False, path="out"):
    """Same nesting (tuple/list/dict types and lengths), shapes and values."""
    if isinstance(ref, (tuple, list)):
        assert type(ours) is type(ref) and len(ours) == len(ref), (path, type(ours), type(ref))
        for i, (a, b) in enumerate(zip(ours, ref)):
            assert_tree_close(a, b, rtol, atol, grad_flags, f"{path}[{i}]")
    elif isinstance(ref, dict):
        assert isinstance(ours, dict) and list(ours) == list(ref), path
        for k in ref:
            assert_tree_close(ours[k], ref[k], rtol, atol, grad_flags, f"{path}[{k!r}]")
    else:
        assert tuple(ours.shape) == tuple(ref.shape), (path, ours.shape, ref.shape)
        if grad_flags:
            assert ours.requires_grad == ref.requires_grad, path
        np.testing.assert_allclose(_np(ours), ref.detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=path)


def assert_same_error(ours, theirs, upto=None):
    """Both calls raise; ours is an instance of torch's exception type and its message starts
    with torch's (up to `upto`, for messages that print pytree specs)."""
    with pytest.raises(Exception) as te:
        theirs()
    with pytest.raises(type(te.value)) as oe:
        ours()
    want = str(te.value)
    if upto is not None:
        want = want[:want.index(upto)]
    assert str(oe.value).startswith(want), (str(oe.value), want)


RNG = np.random.default_rng(7)
X3 = RNG.standard_normal(3)
Y2 = RNG.standard_normal(2)


# ---------------------------------------------------------------- functional_call

def _mlp_pair():
    """The same 2-layer MLP in tracegrad and torch (float64, equal weights)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                             torch.nn.Linear(4, 2)).double()
    m = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 2)).double()
    with tg.no_grad():
        for (_, p), (_, q) in zip(m.named_parameters(), tm.named_parameters()):
            p.copy_(_t(q.detach().numpy()))
    return m, tm


def _snapshot(module):
    return {k: (id(v), _np(v).copy(), v.requires_grad) for k, v in
            list(module.named_parameters()) + list(module.named_buffers())}


def _assert_untouched(module, snap):
    now = _snapshot(module)
    assert set(now) == set(snap)
    for k, (i, val, rg) in snap.items():
        assert now[k][0] == i and now[k][2] == rg, k
        np.testing.assert_array_equal(now[k][1], val)


@pytest.mark.parametrize("compile", MODES)
def test_functional_call_matches_torch_and_restores(compile):
    torch = pytest.importorskip("torch")
    m, tm = _mlp_pair()
    snap = _snapshot(m)
    new = {k: RNG.standard_normal(tuple(v.shape)) for k, v in m.named_parameters()}
    x = RNG.standard_normal((5, 3))

    def run(params, x):
        return F.functional_call(m, params, (x,))
    call = tg.compile(run) if compile else run
    for _ in range(2):
        ours = call({k: _t(v) for k, v in new.items()}, _t(x))
        ref = torch.func.functional_call(tm, {k: _torch(v) for k, v in new.items()},
                                         (_torch(x),))
        assert_tree_close(ours, ref)
    _assert_untouched(m, snap)
    if compile:
        assert call.stats.traces == 1
    # a non-tuple args is the one positional argument; kwargs pass through
    np.testing.assert_allclose(_np(F.functional_call(m, {k: _t(v) for k, v in new.items()},
                                                     _t(x))), _np(ours))
    # a list of dicts, each with part of the names; the rest keep the module's values
    half = [{"0.weight": _t(new["0.weight"])}, {"2.bias": _t(new["2.bias"])}]
    ref = torch.func.functional_call(tm, [{"0.weight": _torch(new["0.weight"])},
                                          {"2.bias": _torch(new["2.bias"])}], (_torch(x),))
    assert_tree_close(F.functional_call(m, half, (_t(x),)), ref)
    _assert_untouched(m, snap)


def test_functional_call_on_a_compiled_module_equals_plain():
    m = tg.nn.Sequential(tg.nn.Linear(3, 2), tg.nn.Tanh()).double()
    cm = tg.compile(m)
    snap = _snapshot(m)
    x = _t(X43)
    for k in range(2):
        p = {n: v.detach() * (k + 2) for n, v in m.named_parameters()}
        np.testing.assert_array_equal(_np(F.functional_call(cm, p, (x,))),
                                      _np(F.functional_call(m, p, (x,))))
    _assert_untouched(m, snap)
    np.testing.assert_array_equal(_np(cm(x)), _np(m(x)))


def test_functional_call_restores_after_forward_raises():
    class Boom(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tg.nn.Linear(2, 2)
            self.register_buffer("scale", tg.ones(2))

        def forward(self, x):
            y = self.lin(x) * self.scale
            if y.shape[0] > 1:
                raise KeyError("boom")
            return y
    m = Boom()
    snap = _snapshot(m)
    params = {"lin.weight": tg.zeros(2, 2), "lin.bias": tg.zeros(2), "scale": tg.zeros(2)}
    with pytest.raises(KeyError, match="boom"):
        F.functional_call(m, params, (tg.ones(3, 2),))
    _assert_untouched(m, snap)
    compiled = tg.compile(lambda p, x: F.functional_call(m, p, (x,)))
    with pytest.raises(KeyError, match="boom"):
        compiled(params, tg.ones(3, 2))
    _assert_untouched(m, snap)
    np.testing.assert_array_equal(_np(compiled(params, tg.ones(1, 2))), np.zeros((1, 2)))
    _assert_untouched(m, snap)


@pytest.mark.parametrize("compile", MODES)
def test_grad_and_jacrev_over_functional_call_match_torch(compile):
    torch = pytest.importorskip("torch")
    m, tm = _mlp_pair()
    snap = _snapshot(m)
    x, y = RNG.standard_normal((6, 3)), RNG.standard_normal((6, 2))
    params = {k: v.detach() for k, v in m.named_parameters()}
    tparams = {k: v.detach() for k, v in tm.named_parameters()}

    def loss(p, x, y):
        return ((F.functional_call(m, p, (x,)) - y) ** 2).mean()

    def tloss(p, x, y):
        return ((torch.func.functional_call(tm, p, (x,)) - y) ** 2).mean()
    g = F.grad(loss, compile=compile)
    for _ in range(2):
        assert_tree_close(g(params, _t(x), _t(y)),
                          torch.func.grad(tloss)(tparams, _torch(x), _torch(y)))
    jac = F.jacrev(lambda p, x: F.functional_call(m, p, (x,)), compile=compile)(params, _t(x))
    tjac = torch.func.jacrev(lambda p, x: torch.func.functional_call(tm, p, (x,)))(
        tparams, _torch(x))
    assert_tree_close(jac, tjac)
    # the standard per-sample gradient idiom
    ps = F.vmap(F.grad(loss, compile=compile), in_dims=(None, 0, 0), compile=compile)(
        params, _t(x[:, None]), _t(y[:, None]))
    tps = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(
        tparams, _torch(x[:, None]), _torch(y[:, None]))
    assert_tree_close(ps, tps)
    _assert_untouched(m, snap)
    assert all(p.grad is None for p in m.parameters())


def test_functional_call_tied_weights_strict_and_errors():
    torch = pytest.importorskip("torch")

    def build(nn):
        class Tied(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(2, 2, bias=False)
                self.b = nn.Linear(2, 2, bias=False)
                self.b.weight = self.a.weight

            def forward(self, x):
                return self.b(self.a(x))
        return Tied().double()
    m, tm = build(tg.nn), build(torch.nn)
    w = RNG.standard_normal((2, 2))
    x = RNG.standard_normal((3, 2))
    for tie in (True, False):
        ours = F.functional_call(m, {"a.weight": _t(w)}, (_t(x),), tie_weights=tie)
        with torch.no_grad():
            tm.a.weight.copy_(_torch(_np(m.a.weight)))
        ref = torch.func.functional_call(tm, {"a.weight": _torch(w)}, (_torch(x),),
                                         tie_weights=tie)
        assert_tree_close(ours, ref)
    assert m.b.weight is m.a.weight
    assert_same_error(
        lambda: F.functional_call(m, {"a.weight": _t(w), "b.weight": _t(w)}, (_t(x),)),
        lambda: torch.func.functional_call(tm, {"a.weight": _torch(w), "b.weight": _torch(w)},
                                           (_torch(x),)))
    assert_same_error(
        lambda: F.functional_call(m, {"a.weight": _t(w), "c": _t(w)}, (_t(x),),
                                  tie_weights=False, strict=True),
        lambda: torch.func.functional_call(tm, {"a.weight": _torch(w), "c": _torch(w)},
                                           (_torch(x),), tie_weights=False, strict=True))
    assert_same_error(
        lambda: F.functional_call(m, [{"a.weight": _t(w)}, {"a.weight": _t(w)}], (_t(x),)),
        lambda: torch.func.functional_call(tm, [{"a.weight": _torch(w)},
                                                {"a.weight": _torch(w)}], (_torch(x),)))
    assert_same_error(lambda: F.functional_call(m, 3, (_t(x),)),
                      lambda: torch.func.functional_call(tm, 3, (_torch(x),)))


def test_functional_call_buffers_and_reassignment_like_torch():
    torch = pytest.importorskip("torch")
    m, tm = tg.nn.BatchNorm1d(3).double(), torch.nn.BatchNorm1d(3).double()
    x = RNG.standard_normal((8, 3))
    mean, tmean = _t(np.zeros(3)), _torch(np.zeros(3))
    out = F.functional_call(m, {"running_mean": mean}, (_t(x),))
    tout = torch.func.functional_call(tm, {"running_mean": tmean}, (_torch(x),))
    assert_tree_close(out, tout)
    np.testing.assert_allclose(_np(mean), tmean.numpy())       # updated in place, as torch
    np.testing.assert_array_equal(_np(m.running_mean), np.zeros(3))

    class Counter(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", tg.zeros(()))

        def forward(self, x):
            self.count = self.count + 1
            return x * self.count
    c = Counter()
    given = {"count": tg.zeros(())}
    F.functional_call(c, given, (tg.ones(2),))
    assert given["count"].item() == 1.0 and c.count.item() == 0.0   # written back, as torch


# ---------------------------------------------------------------- jvp / jacfwd / hessian

def f_two(x, w):
    return (w @ x).tanh() * x[0], (x ** 2).sum()


@pytest.mark.parametrize("compile", MODES)
def test_jvp_matches_torch_and_finite_differences(compile):
    torch = pytest.importorskip("torch")
    w = RNG.standard_normal((2, 3))
    tx, tw = RNG.standard_normal(3), RNG.standard_normal((2, 3))
    ours = F.jvp(f_two, (_t(X3), _t(w)), (_t(tx), _t(tw)), compile=compile)
    ref = torch.func.jvp(f_two, (_torch(X3), _torch(w)), (_torch(tx), _torch(tw)))
    assert_tree_close(ours, ref, grad_flags=True)
    eps = 1e-6
    fd = [(_np(a) - _np(b)) / (2 * eps) for a, b in zip(
        f_two(_t(X3 + eps * tx), _t(w + eps * tw)), f_two(_t(X3 - eps * tx), _t(w - eps * tw)))]
    for a, b in zip(ours[1], fd):
        np.testing.assert_allclose(_np(a), b, rtol=1e-6, atol=1e-8)
    # dict primals, list output, has_aux
    f = lambda d: ([d["a"].exp() * d["b"]], d["a"].sum())       # noqa: E731
    p = {"a": X3, "b": X3[::-1].copy()}
    t = {"a": np.ones(3), "b": np.arange(3.0)}
    ours = F.jvp(f, ({k: _t(v) for k, v in p.items()},), ({k: _t(v) for k, v in t.items()},),
                 has_aux=True, compile=compile)
    ref = torch.func.jvp(f, ({k: _torch(v) for k, v in p.items()},),
                         ({k: _torch(v) for k, v in t.items()},), has_aux=True)
    assert_tree_close(ours, ref)


def test_jvp_compiled_reuses_program_and_inside_compile():
    def f(x):
        return x.sin() * x
    for k in range(3):
        F.jvp(f, (_t(X3 + k),), (_t(np.ones(3)),))
    from tracegrad.func._transforms import _compiled
    cf = _compiled("jvp_fwd", f, None, (False,))
    assert cf.stats.traces == 1 and cf.stats.cache_hits == 2
    x = _t(X3)
    _, jv = F.jvp(f, (x,), (x,))               # the tangent is the primal: still compiled
    assert cf.stats.eager_calls == 0 and cf.stats.cache_hits == 3
    np.testing.assert_allclose(_np(jv), (np.cos(X3) * X3 + np.sin(X3)) * X3, rtol=1e-14)

    @tg.compile
    def outer(x):
        _, jv = F.jvp(f, (x,), (tg.ones_like(x),))
        return jv
    eager = F.jvp(f, (_t(X3),), (_t(np.ones(3)),), compile=False)[1]
    for _ in range(2):
        np.testing.assert_allclose(_np(outer(_t(X3))), _np(eager), rtol=1e-14)
    assert outer.stats.traces == 1


def test_jvp_stays_connected_like_torch():
    torch = pytest.importorskip("torch")
    x = _t(X3).requires_grad_()
    tx = _torch(X3).requires_grad_()
    _, jv = F.jvp(lambda a: a.sin() * a, (x,), (_t(np.ones(3)),))
    _, tjv = torch.func.jvp(lambda a: a.sin() * a, (tx,), (_torch(np.ones(3)),))
    assert jv.requires_grad and tjv.requires_grad
    jv.sum().backward()
    tjv.sum().backward()
    np.testing.assert_allclose(_np(x.grad), tx.grad.numpy(), rtol=1e-12)


def test_jvp_errors_match_torch():
    torch = pytest.importorskip("torch")
    x, tx = _t(X3), _torch(X3)
    f = lambda a: a * 2                                          # noqa: E731
    cases = [
        (lambda: F.jvp(f, x, x), lambda: torch.func.jvp(f, tx, tx), None),
        (lambda: F.jvp(f, (x,), (x, x)), lambda: torch.func.jvp(f, (tx,), (tx, tx)),
         "Got primals"),
        (lambda: F.jvp(f, (x,), (_t(Y2),)), lambda: torch.func.jvp(f, (tx,), (_torch(Y2),)),
         None),
        (lambda: F.jvp(f, (3.0,), (x,)), lambda: torch.func.jvp(f, (3.0,), (tx,)), None),
        (lambda: F.jvp(lambda a: 3, (x,), (x,)), lambda: torch.func.jvp(lambda a: 3, (tx,), (tx,)),
         None),
        (lambda: F.jvp(f, (x,), (x,), has_aux=True),
         lambda: torch.func.jvp(f, (tx,), (tx,), has_aux=True), None),
        (lambda: F.jvp(f, (), ()), lambda: torch.func.jvp(f, (), ()), None),
        (lambda: F.jvp(lambda a: a.sum(), (tg.ones(3, dtype=tg.int64),),
                       (tg.ones(3, dtype=tg.int64),)),
         lambda: torch.func.jvp(lambda a: a.sum(), (torch.ones(3, dtype=torch.long),),
                                (torch.ones(3, dtype=torch.long),)), None),
    ]
    for ours, theirs, upto in cases:
        assert_same_error(ours, theirs, upto)


@pytest.mark.parametrize("compile", MODES)
def test_jacfwd_matches_torch_and_jacrev(compile):
    torch = pytest.importorskip("torch")
    w = RNG.standard_normal((2, 3))
    for argnums in (0, 1, (0, 1), (-1,)):
        ours = F.jacfwd(f_two, argnums=argnums, compile=compile)(_t(X3), _t(w))
        # torch 2.13's jacfwd returns zeros for a negative argnum; its jacrev is right
        positive = tuple(a % 2 for a in argnums) if isinstance(argnums, tuple) else argnums
        ref = torch.func.jacfwd(f_two, argnums=positive)(_torch(X3), _torch(w))
        assert_tree_close(ours, ref)
        assert_tree_close(ours, torch.func.jacrev(f_two, argnums=argnums)(_torch(X3), _torch(w)))
        rev = F.jacrev(f_two, argnums=argnums, compile=compile)(_t(X3), _t(w))
        for a, b in zip(flatten(ours)[0], flatten(rev)[0]):
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12, atol=1e-14)
    jac, aux = F.jacfwd(lambda a: (a.sin(), {"s": a.sum()}), has_aux=True,
                        compile=compile)(_t(X3))
    tjac, taux = torch.func.jacfwd(lambda a: (a.sin(), {"s": a.sum()}), has_aux=True)(
        _torch(X3))
    assert_tree_close((jac, aux), (tjac, taux))


def test_jacfwd_randomness_and_errors_match_torch():
    torch = pytest.importorskip("torch")
    x, tx = _t(X3), _torch(X3)
    for ours, theirs in [
        (lambda: F.jacfwd(lambda a: a * tg.rand(3))(x),
         lambda: torch.func.jacfwd(lambda a: a * torch.rand(3))(tx)),
        (lambda: F.jacfwd(lambda a: a, randomness="bogus")(x),
         lambda: torch.func.jacfwd(lambda a: a, randomness="bogus")(tx)),
        (lambda: F.jacfwd(lambda a: 3)(x), lambda: torch.func.jacfwd(lambda a: 3)(tx)),
        (lambda: F.jacfwd(lambda a: a, has_aux=True)(x),
         lambda: torch.func.jacfwd(lambda a: a, has_aux=True)(tx)),
        (lambda: F.jacfwd(lambda a: a.sum(), argnums=3)(x),
         lambda: torch.func.jacfwd(lambda a: a.sum(), argnums=3)(tx)),
        (lambda: F.jacfwd(lambda a: a.sum())(tg.ones(3, dtype=tg.int64)),
         lambda: torch.func.jacfwd(lambda a: a.sum())(torch.ones(3, dtype=torch.long))),
    ]:
        assert_same_error(ours, theirs)
    tg.manual_seed(3)
    jac = F.jacfwd(lambda a: a * tg.rand(3), randomness="same")(x)
    tg.manual_seed(3)
    np.testing.assert_allclose(_np(jac), np.diag(_np(tg.rand(3))))


@pytest.mark.parametrize("compile", MODES)
def test_hessian_matches_torch_and_finite_differences(compile):
    torch = pytest.importorskip("torch")

    def f(x, y):
        return (x.sin() * x[0] * y.sum() + (x ** 3).sum()).sum()
    for argnums in (0, 1, (0, 1)):
        ours = F.hessian(f, argnums=argnums, compile=compile)(_t(X3), _t(Y2))
        ref = torch.func.hessian(f, argnums=argnums)(_torch(X3), _torch(Y2))
        assert_tree_close(ours, ref)
    h = F.hessian(f, compile=compile)(_t(X3), _t(Y2))
    eps, fd = 1e-5, np.zeros((3, 3))
    g = F.grad(f, compile=False)
    for j in range(3):
        e = np.zeros(3)
        e[j] = eps
        fd[:, j] = (_np(g(_t(X3 + e), _t(Y2))) - _np(g(_t(X3 - e), _t(Y2)))) / (2 * eps)
    np.testing.assert_allclose(_np(h), fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(_np(h), _np(h).T, rtol=1e-12)


# ---------------------------------------------------------------- autograd.functional

def af1(a):
    return a.sin() * a[0]


def af2(a, b):
    return (a.sin() * b.sum(), (a ** 2).sum() * b)


def as1(a):
    return (a.sin() * a ** 2).sum()


def as2(a, b):
    return (a.exp() * b.sum() ** 2).sum()


@pytest.mark.parametrize("create_graph", [False, True])
def test_autograd_functional_matches_torch(create_graph):
    torch = pytest.importorskip("torch")
    TAF = torch.autograd.functional
    x, tx, y, ty = _t(X3), _torch(X3), _t(Y2), _torch(Y2)
    cg = dict(create_graph=create_graph)
    pairs = [
        (AF.jacobian(af1, x, **cg), TAF.jacobian(af1, tx, **cg)),
        (AF.jacobian(af2, (x, y), **cg), TAF.jacobian(af2, (tx, ty), **cg)),
        (AF.jacobian(lambda a: (af1(a),), x, **cg), TAF.jacobian(lambda a: (af1(a),), tx, **cg)),
        (AF.jacobian(af1, (x,), **cg), TAF.jacobian(af1, (tx,), **cg)),
        (AF.jacobian(lambda a, b: a * 2, (x, y), **cg),
         TAF.jacobian(lambda a, b: a * 2, (tx, ty), **cg)),
        (AF.jacobian(af1, x, vectorize=True, strategy="forward-mode"),
         TAF.jacobian(af1, tx, vectorize=True, strategy="forward-mode")),
        (AF.hessian(as1, x, **cg), TAF.hessian(as1, tx, **cg)),
        (AF.hessian(as2, (x, y), **cg), TAF.hessian(as2, (tx, ty), **cg)),
        (AF.hessian(lambda a: a.sum().reshape(1), x, **cg),
         TAF.hessian(lambda a: a.sum().reshape(1), tx, **cg)),
        (AF.vjp(af1, x, x, **cg), TAF.vjp(af1, tx, tx, **cg)),
        (AF.vjp(as1, x, **cg), TAF.vjp(as1, tx, **cg)),
        (AF.vjp(af2, (x, y), (x, y * 2), **cg), TAF.vjp(af2, (tx, ty), (tx, ty * 2), **cg)),
        (AF.jvp(af2, (x, y), (x, y), **cg), TAF.jvp(af2, (tx, ty), (tx, ty), **cg)),
        (AF.jvp(af1, x, x, **cg), TAF.jvp(af1, tx, tx, **cg)),
        (AF.hvp(as1, x, x, **cg), TAF.hvp(as1, tx, tx, **cg)),
        (AF.hvp(as2, (x, y), (x, y), **cg), TAF.hvp(as2, (tx, ty), (tx, ty), **cg)),
        (AF.vhp(as2, (x, y), (x, y), **cg), TAF.vhp(as2, (tx, ty), (tx, ty), **cg)),
    ]
    for ours, ref in pairs:
        assert_tree_close(ours, ref, grad_flags=True)


def test_autograd_functional_inside_compile_equals_eager():
    @tg.compile
    def both(x):
        return AF.jacobian(af1, x), AF.hessian(as1, x), AF.hvp(as1, x, x)[1]
    eager = (AF.jacobian(af1, _t(X3)), AF.hessian(as1, _t(X3)), AF.hvp(as1, _t(X3), _t(X3))[1])
    for k in (0, 1):
        got = both(_t(X3 + k))
        if k == 0:
            for a, b in zip(got, eager):
                np.testing.assert_allclose(_np(a), _np(b), rtol=1e-14)
    assert both.stats.traces == 1


def test_autograd_functional_errors_match_torch():
    torch = pytest.importorskip("torch")
    TAF = torch.autograd.functional
    x, tx, y, ty = _t(X3), _torch(X3), _t(Y2), _torch(Y2)
    cases = [
        (lambda: AF.jacobian(lambda a: [a], x), lambda: TAF.jacobian(lambda a: [a], tx)),
        (lambda: AF.jacobian(lambda a: a, 3.0), lambda: TAF.jacobian(lambda a: a, 3.0)),
        (lambda: AF.jacobian(lambda a: a, (x, 3.0)), lambda: TAF.jacobian(lambda a: a, (tx, 3.0))),
        (lambda: AF.jacobian(lambda a, b: a * 2, (x, y), strict=True),
         lambda: TAF.jacobian(lambda a, b: a * 2, (tx, ty), strict=True)),
        (lambda: AF.jacobian(lambda a: tg.ones(2), x, strict=True),
         lambda: TAF.jacobian(lambda a: torch.ones(2), tx, strict=True)),
        (lambda: AF.jacobian(af1, x, strategy="forward-mode"),
         lambda: TAF.jacobian(af1, tx, strategy="forward-mode")),
        (lambda: AF.jacobian(af1, x, strategy="bad"),
         lambda: TAF.jacobian(af1, tx, strategy="bad")),
        (lambda: AF.hessian(lambda a: a ** 3, x), lambda: TAF.hessian(lambda a: a ** 3, tx)),
        (lambda: AF.hessian(lambda a: (a.sum(),), x),
         lambda: TAF.hessian(lambda a: (a.sum(),), tx)),
        (lambda: AF.hessian(lambda a: a.sum(), x, strict=True),
         lambda: TAF.hessian(lambda a: a.sum(), tx, strict=True)),
        (lambda: AF.vjp(af1, x), lambda: TAF.vjp(af1, tx)),
        (lambda: AF.vjp(af1, x, y), lambda: TAF.vjp(af1, tx, ty)),
        (lambda: AF.vjp(af2, (x, y), (x,)), lambda: TAF.vjp(af2, (tx, ty), (tx,))),
        (lambda: AF.vjp(lambda a: tg.ones(3), x, x, strict=True),
         lambda: TAF.vjp(lambda a: torch.ones(3), tx, tx, strict=True)),
        (lambda: AF.jvp(af1, x), lambda: TAF.jvp(af1, tx)),
        (lambda: AF.jvp(af2, (x, y), (x, x)), lambda: TAF.jvp(af2, (tx, ty), (tx, tx))),
        (lambda: AF.hvp(lambda a: a ** 3, x, x), lambda: TAF.hvp(lambda a: a ** 3, tx, tx)),
        (lambda: AF.hvp(lambda a: a.sum(), x, x, strict=True),
         lambda: TAF.hvp(lambda a: a.sum(), tx, tx, strict=True)),
        (lambda: AF.vhp(as1, x), lambda: TAF.vhp(as1, tx)),
    ]
    for ours, theirs in cases:
        assert_same_error(ours, theirs)


def test_autograd_functional_leaves_caller_tensors_alone():
    x = _t(X3)
    AF.jacobian(af1, x)
    AF.hessian(as1, x, create_graph=True)
    assert not x.requires_grad and x.grad is None
    w = _t(X3).requires_grad_()
    jac = AF.jacobian(lambda a: a * w, x, create_graph=True)
    assert jac.requires_grad                  # connected to the captured w, like torch
    (g,) = tg.autograd.grad(jac.sum(), [w])
    np.testing.assert_allclose(_np(g), np.ones(3))


# ---------------------------------------------------------------- vmap

X43 = RNG.standard_normal((4, 3))
Y34 = RNG.standard_normal((3, 4))


@pytest.mark.parametrize("compile", MODES)
def test_vmap_in_dims_out_dims_nesting_match_torch(compile):
    torch = pytest.importorskip("torch")
    V, TV = (lambda *a, **k: F.vmap(*a, compile=compile, **k)), torch.func.vmap
    x, tx, y, ty = _t(X43), _torch(X43), _t(Y34), _torch(Y34)
    cases = [
        (lambda a, b: (a * b).sum() + a.sin(), dict(in_dims=(0, 1)), (x, y), (tx, ty)),
        (lambda a, b: a + b, dict(in_dims=(0, None)), (x, y[:, 0]), (tx, ty[:, 0])),
        (lambda a: a.T * 2, dict(out_dims=1), (x.reshape(2, 2, 3),), (tx.reshape(2, 2, 3),)),
        (lambda a: (a, a.sum()), dict(out_dims=(1, 0), in_dims=-1), (x,), (tx,)),
        (lambda a: [a.exp(), {"s": a.sum()}], {}, (x,), (tx,)),
        (lambda d: d["a"] * d["b"][:, 0], dict(in_dims=({"a": 0, "b": None},)),
         ({"a": x, "b": y},), ({"a": tx, "b": ty},)),
        (lambda p: p[0] @ p[1], dict(in_dims=((0, 1),)), ((x, y),), ((tx, ty),)),
        (lambda a: a, dict(out_dims=(0,)), (x,), (tx,)),
        (lambda a: a.sum(), dict(in_dims=0), (tg.ones(0, 2),), (torch.ones(0, 2),)),
    ]
    for f, kw, args, targs in cases:
        assert_tree_close(V(f, **kw)(*args), TV(f, **kw)(*targs))
    # kwargs are not batched; an unbatched captured output is broadcast or returned as is
    assert_tree_close(V(lambda a, k=1: a * k)(x, k=_t(X43[0])),
                      TV(lambda a, k=1: a * k)(tx, k=_torch(X43[0])))
    z, tz = _t(Y34[0]), _torch(Y34[0])
    assert_tree_close(V(lambda a: z)(x), TV(lambda a: tz)(tx))
    assert V(lambda a: z, out_dims=None)(x) is z
    # nested vmap: an outer product table
    g = lambda a, b: (a * b).sum()                              # noqa: E731
    assert_tree_close(V(V(g, in_dims=(None, 1)), in_dims=(0, None))(x, y),
                      TV(TV(g, in_dims=(None, 1)), in_dims=(0, None))(tx, ty))


def test_vmap_per_element_program_is_reused_and_inside_compile():
    def f(a, b):
        return (a.tanh() * b).sum()
    v = F.vmap(f)
    v(_t(X43), _t(X43[::-1].copy()))
    v(_t(X43 * 2), _t(X43))
    assert v.compiled.stats.traces == 1 and v.compiled.stats.cache_hits == 7
    eager = F.vmap(f, compile=False)(_t(X43), _t(X43 * 3))

    @tg.compile
    def outer(x, y):
        return F.vmap(f)(x, y) * 2
    for _ in range(2):
        np.testing.assert_allclose(_np(outer(_t(X43), _t(X43 * 3))), 2 * _np(eager), rtol=1e-14)
    assert outer.stats.traces == 1


@pytest.mark.parametrize("compile", MODES)
def test_per_sample_gradients_match_loop_and_torch(compile):
    torch = pytest.importorskip("torch")

    def loss(w, xi, yi):
        return ((xi @ w["w"] + w["b"]).tanh() - yi).pow(2).sum()
    w = {"w": RNG.standard_normal((3, 2)), "b": RNG.standard_normal(2)}
    xs, ys = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 2))
    tw = {k: _t(v) for k, v in w.items()}
    ps = F.vmap(F.grad(loss, compile=compile), in_dims=(None, 0, 0), compile=compile)(
        tw, _t(xs), _t(ys))
    for i in range(5):
        gi = F.grad(loss, compile=False)(tw, _t(xs[i]), _t(ys[i]))
        for k in w:
            np.testing.assert_allclose(_np(ps[k][i]), _np(gi[k]), rtol=1e-13)
    ref = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(
        {k: _torch(v) for k, v in w.items()}, _torch(xs), _torch(ys))
    assert_tree_close(ps, ref)


def test_vmap_backward_through_matches_torch():
    torch = pytest.importorskip("torch")
    x = _t(X43).requires_grad_()
    tx = _torch(X43).requires_grad_()
    F.vmap(lambda a: (a.sin() * a).sum())(x).pow(2).sum().backward()
    torch.func.vmap(lambda a: (a.sin() * a).sum())(tx).pow(2).sum().backward()
    np.testing.assert_allclose(_np(x.grad), tx.grad.numpy(), rtol=1e-12)


def test_vmap_errors_match_torch():
    torch = pytest.importorskip("torch")
    V, TV = F.vmap, torch.func.vmap
    x, tx, y, ty = _t(X43), _torch(X43), _t(Y34), _torch(Y34)
    add = lambda a, b: a + b                                  # noqa: E731
    cases = [
        (lambda: V(add)(x, y), lambda: TV(add)(tx, ty), None),
        (lambda: V(add, in_dims=(0, 1))(x, _t(np.ones((3, 3)))),
         lambda: TV(add, in_dims=(0, 1))(tx, _torch(np.ones((3, 3)))), None),
        (lambda: V(add, in_dims=(0,))(x, y), lambda: TV(add, in_dims=(0,))(tx, ty),
         "in_dims has structure"),
        (lambda: V(add, in_dims=(None, None))(x, y), lambda: TV(add, in_dims=(None, None))(tx, ty),
         None),
        (lambda: V(add, in_dims="a")(x, y), lambda: TV(add, in_dims="a")(tx, ty), None),
        (lambda: V(add, in_dims=[0, 0])(x, y), lambda: TV(add, in_dims=[0, 0])(tx, ty), None),
        (lambda: V(add, in_dims=(0, 5))(x, y), lambda: TV(add, in_dims=(0, 5))(tx, ty), None),
        (lambda: V(add, in_dims=(0, "a"))(x, y), lambda: TV(add, in_dims=(0, "a"))(tx, ty), None),
        (lambda: V(add, in_dims=(0, 0))(x, 3.0), lambda: TV(add, in_dims=(0, 0))(tx, 3.0), None),
        (lambda: V(add)(x, _t(1.0)), lambda: TV(add)(tx, _torch(1.0)), None),
        (lambda: V(add)(), lambda: TV(add)(), None),
        (lambda: V(lambda a: 3)(x), lambda: TV(lambda a: 3)(tx), None),
        (lambda: V(lambda a: a, out_dims=None)(x), lambda: TV(lambda a: a, out_dims=None)(tx),
         None),
        (lambda: V(lambda a: a, out_dims="x")(x), lambda: TV(lambda a: a, out_dims="x")(tx),
         None),
        (lambda: V(lambda a: a, out_dims=(0, 1))(x), lambda: TV(lambda a: a, out_dims=(0, 1))(tx),
         "out_dims has structure"),
        (lambda: V(lambda a: a, out_dims=2)(x), lambda: TV(lambda a: a, out_dims=2)(tx), None),
        (lambda: V(lambda a: a, chunk_size=0), lambda: TV(lambda a: a, chunk_size=0), None),
        (lambda: V(lambda a: a, randomness="bad"), lambda: TV(lambda a: a, randomness="bad"),
         None),
        (lambda: V(lambda a: a * tg.rand(()))(x), lambda: TV(lambda a: a * torch.rand(()))(tx),
         None),
        (lambda: V(lambda a: tg.nn.functional.dropout(a, 0.5))(x),
         lambda: TV(lambda a: torch.nn.functional.dropout(a, 0.5))(tx), None),
    ]
    for ours, theirs, upto in cases:
        assert_same_error(ours, theirs, upto)


def test_vmap_randomness_same_and_different():
    x = _t(X43)
    tg.manual_seed(0)
    same = F.vmap(lambda a: a * 0 + tg.rand(3, dtype=tg.float64), randomness="same")(x)
    assert all(np.array_equal(_np(same[0]), _np(r)) for r in same)
    tg.manual_seed(0)
    np.testing.assert_array_equal(_np(same[0]), _np(tg.rand(3, dtype=tg.float64)))
    diff = F.vmap(lambda a: a * 0 + tg.rand(3, dtype=tg.float64), randomness="different")(x)
    assert len({tuple(_np(r)) for r in diff}) == 4


@pytest.mark.parametrize("compile", MODES)
def test_vmap_inplace_on_unbatched_raises_batched_writes_through(compile):
    torch = pytest.importorskip("torch")
    z = tg.zeros(3, dtype=tg.float64)
    with pytest.raises(RuntimeError, match="updated in place a tensor that is not batched"):
        F.vmap(lambda a: z.add_(1) * a, compile=compile)(_t(X43))
    w = tg.zeros(3, dtype=tg.float64)
    with pytest.raises(RuntimeError, match="not batched"):
        F.vmap(lambda a, b: b.mul_(a), in_dims=(0, None), compile=compile)(_t(X43), w)
    bn = tg.nn.BatchNorm1d(3).double()              # running stats: module buffers
    with pytest.raises(RuntimeError, match="not batched"):
        F.vmap(lambda a: bn(a), compile=compile)(_t(X43.reshape(2, 2, 3)))
    x, tx = _t(X43), _torch(X43)
    out = F.vmap(lambda a: a.add_(1), compile=compile)(x)
    tout = torch.func.vmap(lambda a: a.add_(1))(tx)
    assert_tree_close((out, x), (tout, tx))


def test_transforms_compose_like_torch():
    torch = pytest.importorskip("torch")
    f = lambda x: x.sin() * x.exp()                            # noqa: E731
    v, tv = _t(np.ones(3)), _torch(np.ones(3))
    g = F.grad(lambda x: F.jvp(f, (x,), (v,))[1].sum())(_t(X3))
    tgr = torch.func.grad(lambda x: torch.func.jvp(f, (x,), (tv,))[1].sum())(_torch(X3))
    assert_tree_close(g, tgr)
    j = F.vmap(F.jacrev(lambda x: x.sin() * x.sum()))(_t(X43))
    tj = torch.func.vmap(torch.func.jacrev(lambda x: x.sin() * x.sum()))(_torch(X43))
    assert_tree_close(j, tj)
    h = F.jacfwd(F.jacfwd(lambda x: (x ** 3).sum()))(_t(X3))
    assert_tree_close(h, torch.func.jacfwd(torch.func.jacfwd(lambda x: (x ** 3).sum()))(
        _torch(X3)))


def test_per_sample_gradients_jax_backend():
    pytest.importorskip("jax")

    def loss(w, xi, yi):
        return ((xi @ w).tanh() - yi).pow(2).sum()
    w, xs, ys = _t(RNG.standard_normal((3, 2))), _t(X43), _t(RNG.standard_normal((4, 2)))
    c = tg.compile(lambda w, xs, ys: F.vmap(F.grad(loss), in_dims=(None, 0, 0))(w, xs, ys),
                   backend="jax")
    eager = F.vmap(F.grad(loss, compile=False), in_dims=(None, 0, 0), compile=False)(w, xs, ys)
    np.testing.assert_allclose(_np(c(w, xs, ys)), _np(eager), rtol=1e-12, atol=1e-14)
