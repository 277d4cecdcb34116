"""`.data` has a version counter of its own; `detach()` shares its source's (PyTorch).

Each scenario runs in tracegrad eagerly, compiled (several calls) and in torch, and compares
the versions of every tensor involved and the values.
"""
import numpy as np
import pytest

import tracegrad as tg


def _scenarios():
    """name -> fn(lib) returning (versions..., values...) for one scenario."""

    def data_mul(x):
        y = x.data
        y.mul_(2)
        return x._version, y._version

    def detach_mul(x):
        y = x.detach()
        y.mul_(2)
        return x._version, y._version

    def data_view_add(x):
        y = x.data[0]
        y.add_(1)
        return x._version, y._version

    def data_of_detach(x):
        d = x.detach()
        d.data.add_(1)
        d.add_(1)
        return x._version, d._version

    def data_twice(x):
        a = x.data
        a.mul_(3)
        a.add_(1)
        return x._version, a._version

    return {"data_mul": data_mul, "detach_mul": detach_mul, "data_view_add": data_view_add,
            "data_of_detach": data_of_detach, "data_twice": data_twice}


@pytest.mark.parametrize("name", sorted(_scenarios()))
def test_eager_versions_match_torch(name):
    torch = pytest.importorskip("torch")
    x = tg.ones(2, 3, requires_grad=True)
    tx = torch.ones(2, 3, requires_grad=True)
    got = _scenarios()[name](x)
    want = _scenarios()[name](tx)
    assert got == tuple(want)
    np.testing.assert_allclose(x.detach().numpy(), tx.detach().numpy())


def _compiled_body(kind):
    def f(x, w):
        if kind == "data":
            x.data.mul_(2)
        else:
            with tg.no_grad():
                x.detach().mul_(2)
        return (x * w).sum()
    return f


@pytest.mark.parametrize("kind,version", [("data", 0), ("detach", 1)])
def test_compiled_versions_match_eager(kind, version):
    torch = pytest.importorskip("torch")
    f = _compiled_body(kind)
    cf = tg.compile(f)
    for step in range(4):
        vals = np.arange(1.0, 7.0).reshape(2, 3) + step
        res = []
        for fn in (f, cf):
            x = tg.tensor(vals, requires_grad=True)
            w = tg.tensor(vals * 0.5, requires_grad=True)
            out = fn(x, w)
            out.backward()
            res.append((x._version, out.item(), w.grad.numpy().copy(), x.grad.numpy().copy()))
        tx = torch.tensor(vals, requires_grad=True)
        tw = torch.tensor(vals * 0.5, requires_grad=True)
        if kind == "data":
            tx.data.mul_(2)
        else:
            with torch.no_grad():
                tx.detach().mul_(2)
        tout = (tx * tw).sum()
        tout.backward()
        for v, o, gw, gx in res:
            assert v == tx._version == version
            assert o == pytest.approx(tout.item())
            np.testing.assert_allclose(gw, tw.grad.numpy())
            np.testing.assert_allclose(gx, tx.grad.numpy())
    assert cf.stats.cache_hits >= 2


def test_sgd_step_through_data_keeps_version():
    """A hand-written update `p.data.add_(...)` leaves `p._version` alone, as in PyTorch."""
    torch = pytest.importorskip("torch")

    def step(p, g, lr):
        p.data.add_(g, alpha=-lr)
        return p._version

    cstep = tg.compile(lambda p, g: p.data.add_(g, alpha=-0.1))
    p = tg.ones(3, requires_grad=True)
    tp = torch.ones(3, requires_grad=True)
    for _ in range(3):
        step(p, tg.ones(3), 0.1)
        step(tp, torch.ones(3), 0.1)
        cstep(p, tg.ones(3))
        tp.data.add_(torch.ones(3), alpha=-0.1)
    assert p._version == tp._version == 0
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-6)


def test_data_shares_memory_not_history():
    x = tg.ones(2, requires_grad=True)
    y = x.data
    assert not y.requires_grad and y.is_leaf
    y[0] = 5.0
    assert x.detach().numpy().tolist() == [5.0, 1.0]
    assert x._version == 0 and y._version == 1
    d = x.detach()
    d[1] = 7.0
    assert x._version == d._version == 1
