"""Large paths run queued on JAX's default device (Note [Queued dispatch for large programs],
backends/jax/client.py): the estimate that decides it, one device for all of a path's
programs (forward, backward, speculative), and the same numbers as the synchronous client
and as eager, whichever device a path gets.
"""
import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg
from tracegrad.backends.jax import client


def _paths(f):
    return [p for e in f.entries.values() for p in e.paths]


def _devices(path):
    progs = [path.forward_program, path.backward_program]
    spec = getattr(path, "speculation", None)
    if spec is not None and spec.program is not None:
        progs.append(spec.program)
    return {prog.executable.input_shardings[0][0].device_set.pop()
            for prog in progs if prog is not None}


def test_flops_counts_a_matrix_product_exactly():
    x = tg.randn(32, 64)
    w = tg.randn(64, 16)
    f = tg.compile(lambda x, w: x @ w, backend="jax")
    f(x, w)
    (path,) = _paths(f)
    assert client.flops(path.part.forward) == 2 * 32 * 64 * 16
    assert not client.is_large(path.part.forward)
    g = tg.compile(lambda x: (x.sin() * 2).sum(), backend="jax")
    g(tg.randn(8))
    (path,) = _paths(g)
    assert client.flops(path.part.forward) < 100


def test_a_large_training_step_runs_on_jax_default_device():
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(512, 512), tg.nn.ReLU(), tg.nn.Linear(512, 10))
    opt = tg.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = tg.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    f = tg.compile(step, backend="jax")
    x, y = tg.randn(32, 512), tg.randint(0, 10, (32,))
    f(x, y)
    (path,) = _paths(f)
    assert client.is_large(path.part.forward, path.part.backward)
    assert _devices(path) == {jax.devices()[0]}
    assert "queued on JAX's default device" in f.explain()
    small = tg.compile(lambda x: (x * 2).sum(), backend="jax")
    small(tg.randn(4, requires_grad=True)).backward()
    (spath,) = _paths(small)
    assert _devices(spath) == {client.device()}


def _program(x, w, v):
    h = (x @ w).tanh()
    return (h * v).sum() + (h ** 2).mean()


def _run(compiled_fn, seed):
    rng = np.random.default_rng(seed)
    x = tg.tensor(rng.standard_normal((16, 12)).astype(np.float32))
    w = tg.tensor(rng.standard_normal((12, 8)).astype(np.float32), requires_grad=True)
    v = tg.tensor(rng.standard_normal((16, 8)).astype(np.float32), requires_grad=True)
    out = []
    for k in range(4):                      # backward outside the compiled call: saved
        w.grad = v.grad = None              # values pass from forward to backward program
        loss = compiled_fn(x, w, v)
        loss.backward()
        out.append((loss.item(), w.grad.numpy().copy(), v.grad.numpy().copy()))
        with tg.no_grad():
            w.sub_(0.1 * w.grad)
    return out


@pytest.mark.parametrize("large", [True, False])
def test_both_devices_give_eager_numbers(monkeypatch, large):
    monkeypatch.setattr(client, "LARGE_FLOPS", 0 if large else float("inf"))
    f = tg.compile(_program, backend="jax")
    got, want = _run(f, 1), _run(_program, 1)
    for (l1, gw1, gv1), (l0, gw0, gv0) in zip(got, want):
        np.testing.assert_allclose(l1, l0, rtol=1e-5)
        np.testing.assert_allclose(gw1, gw0, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(gv1, gv0, rtol=1e-4, atol=1e-5)
    (path,) = _paths(f)
    assert _devices(path) == {jax.devices()[0] if large else client.device()}


def test_speculative_program_of_a_large_path(monkeypatch):
    monkeypatch.setattr(client, "LARGE_FLOPS", 0)

    def loss_fn(x, w):
        return ((x * w).sin() * 1.5 + w).tanh().exp().mul(x).sum()
    f = tg.compile(loss_fn, backend="jax")
    x = tg.tensor(np.linspace(-1, 1, 5).astype(np.float32))
    grads = {}
    for fn in (f, loss_fn):
        w = tg.tensor(np.linspace(0.2, 0.7, 5).astype(np.float32), requires_grad=True)
        for _ in range(4):                   # the third and fourth calls speculate
            fn(x, w).backward()
        grads[fn] = w.grad.numpy()
    np.testing.assert_allclose(grads[f], grads[loss_fn], rtol=1e-5, atol=1e-6)
    (path,) = _paths(f)
    assert path.speculation.on and path.speculation.program is not None
    assert _devices(path) == {jax.devices()[0]}


def test_double_backward_through_a_large_path(monkeypatch):
    monkeypatch.setattr(client, "LARGE_FLOPS", 0)
    f = tg.compile(lambda x: (x ** 3).sum(), backend="jax")
    x = tg.tensor(np.linspace(-1, 1, 5), requires_grad=True)
    (g,) = tg.autograd.grad(f(x), x, create_graph=True)
    (gg,) = tg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g.detach().numpy(), 3 * x.detach().numpy() ** 2)
    np.testing.assert_allclose(gg.numpy(), 6 * x.detach().numpy())
