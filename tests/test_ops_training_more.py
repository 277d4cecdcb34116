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
