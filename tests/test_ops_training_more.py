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
