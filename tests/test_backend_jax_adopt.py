"""Large XLA results handed over without a copy on the JAX backend (Note [Adopted results],
backends/jax/adopt.py): gradients and the new values of mutated inputs become numpy arrays
over XLA's memory, writable and independent of everything else; a result that is an argument
passed through is copied, never shared (the jax here copies such results itself; the tests
hold whatever a jax version does); a mutated tensor whose array
something else holds keeps its array and gets the new values copied in. Also the private
synchronous client (Note [Synchronous client], client.py): programs run on its device and
leave JAX's own default device and arrays alone.
"""
import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg
from tracegrad.backends.jax.adopt import _Held

N = 128 * 256              # float32: 128 KB, above adopt.MIN_BYTES


def _big(seed):
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


def test_gradient_equal_to_an_argument_is_not_its_memory():
    # d/dw sum(x * w) is x: XLA may return the argument x itself as the gradient
    x = tg.tensor(_big(0))
    w = tg.tensor(_big(1), requires_grad=True)
    f = tg.compile(lambda x, w: (x * w).sum(), backend="jax")
    for _ in range(3):
        w.grad = None
        f(x, w).backward()
        np.testing.assert_allclose(w.grad.numpy(), x.numpy())
        assert not np.shares_memory(w.grad.numpy(), x.numpy())
        w.grad.add_(1.0)                         # writable, and only w.grad changes
        np.testing.assert_allclose(w.grad.numpy(), x.numpy() + 1.0)
    before = w.grad.numpy().copy()
    with tg.no_grad():
        x.mul_(2.0)
    np.testing.assert_array_equal(w.grad.numpy(), before)


def test_mutation_to_an_argument_does_not_share_its_memory():
    p = tg.tensor(np.zeros(N, np.float32))

    def assign(x):
        with tg.no_grad():
            p.copy_(x)
        return p.sum()
    f = tg.compile(assign, backend="jax")
    for k in range(3):
        x = tg.tensor(_big(k))
        f(x)
        np.testing.assert_array_equal(p.numpy(), x.numpy())
        assert not np.shares_memory(p.numpy(), x.numpy())
        with tg.no_grad():
            x.add_(1.0)
        np.testing.assert_array_equal(p.numpy(), _big(k))


def test_mutated_tensor_held_elsewhere_keeps_its_array():
    p = tg.tensor(_big(3))

    def bump(s):
        with tg.no_grad():
            p.mul_(s)
        return p.sum()
    f = tg.compile(bump, backend="jax")
    view = p.numpy()                             # shares p's array: it must see every step
    s = tg.tensor(np.float32(0.5))
    for k in range(1, 4):
        f(s)
        np.testing.assert_allclose(view, _big(3) * 0.5 ** k, rtol=1e-6)
        assert np.shares_memory(view, p.numpy())
    assert p._version == 3


def test_adopted_parameters_match_eager_steps():
    def run(compiled):
        tg.manual_seed(0)
        model = tg.nn.Linear(256, 128)
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x):
            opt.zero_grad()
            loss = (model(x).tanh() ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        fn = tg.compile(step, backend="jax") if compiled else step
        losses = [fn(tg.tensor(_big(k).reshape(128, 256))).item() for k in range(5)]
        return losses, model, opt
    l0, m0, o0 = run(False)
    l1, m1, o1 = run(True)
    np.testing.assert_allclose(l1, l0, rtol=1e-5)
    for a, b in zip(m0.parameters(), m1.parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-4, atol=1e-6)
        assert b.detach().numpy().flags.writeable and b.grad.numpy().flags.writeable
    assert m1.weight._version == m0.weight._version
    # the mechanism was exercised
    assert type(m1.weight._data.base) is _Held and type(m1.weight.grad._data.base) is _Held
    buf0 = o0.state[m0.weight]["momentum_buffer"]
    buf1 = o1.state[m1.weight]["momentum_buffer"]
    np.testing.assert_allclose(buf1.numpy(), buf0.numpy(), rtol=1e-4, atol=1e-6)


def test_programs_leave_jax_default_device_alone():
    from tracegrad.backends.jax.client import device
    f = tg.compile(lambda x: (x * 2).sum(), backend="jax")
    x = tg.tensor(np.arange(4, dtype=np.float32), requires_grad=True)
    f(x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 2, np.float32))
    path = next(iter(f.entries.values())).paths[0]
    assert path.forward_program.executable.input_shardings[0][0].device_set == {device()}
    a = jax.numpy.ones(3)                        # the user's JAX: its own default device
    assert a.devices() == {jax.devices()[0]}


def test_without_a_synchronous_client_programs_use_jax_default_device(monkeypatch):
    """The synchronous client is a private JAX API: when this JAX cannot make one, the
    backend compiles for JAX's own device and still computes the same numbers."""
    from jax._src.lib import xla_client

    from tracegrad.backends.jax import client

    def unavailable(*a, **k):
        raise AttributeError("no make_cpu_client in this JAX")
    monkeypatch.setattr(xla_client, "make_cpu_client", unavailable)
    monkeypatch.setattr(client, "_device", None)
    assert client.device() == jax.devices()[0]
    f = tg.compile(lambda x, w: (x * w).tanh().sum(), backend="jax")
    x = tg.tensor(np.linspace(-1, 1, 6, dtype=np.float32))
    w = tg.tensor(np.full(6, 0.5, np.float32), requires_grad=True)
    f(x, w).backward()
    want = (1 - np.tanh(x.numpy() * 0.5) ** 2) * x.numpy()
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-6)
