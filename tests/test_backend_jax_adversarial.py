"""Adversarial checks of the JAX backend against eager tracegrad and the numpy backend:
things specific to running a path as one XLA program (it cannot stop half-way, it runs
Python through host callbacks, it hands results over without copies)."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg


class _Counted(tg.autograd.Function):
    calls = []

    @staticmethod
    def forward(ctx, x):
        _Counted.calls.append(tuple(x.shape))
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _branchy(x):
    if x.sum().item() > 0:                   # decided before the custom forward runs
        return _Counted.apply(x)
    return _Counted.apply(x) + 1


@pytest.mark.parametrize("backend", [None, "numpy", "jax"])
def test_custom_forward_behind_a_failing_guard_runs_once_per_call(backend):
    # Note [Callbacks behind guards]: the jitted program computes past the `.item()` guard
    # of a cached path it then leaves; the custom forward there must not run its Python
    f = _branchy if backend is None else tg.compile(_branchy, backend=backend)
    _Counted.calls.clear()
    outs = []
    for v in (1.0, 1.0, -1.0, 1.0, -1.0, -1.0):
        x = tg.full((4,), v, requires_grad=True)
        y = f(x)
        y.sum().backward()
        outs.append((y.detach().numpy().tolist(), x.grad.numpy().tolist()))
    assert len(_Counted.calls) == 6              # eager: one forward per call
    assert outs == [([2.0] * 4, [2.0] * 4)] * 2 + [([-1.0] * 4, [2.0] * 4)] + \
        [([2.0] * 4, [2.0] * 4)] + [([-1.0] * 4, [2.0] * 4)] * 2


def _masked(x):
    m = x[x > 0]                             # a shape guard: the count of positives
    return _Counted.apply(x * 1).sum() + m.sum()


def test_custom_forward_behind_a_failing_shape_guard_runs_once_per_call():
    f = tg.compile(_masked, backend="jax")
    _Counted.calls.clear()
    got = []
    for v in ([1., 2., -1., 3.], [1., 2., -1., 3.], [1., -2., -1., 3.], [1., 2., -1., 3.],
              [1., -2., -1., 3.]):
        x = tg.tensor(np.array(v, np.float32), requires_grad=True)
        loss = f(x)
        loss.backward()
        got.append((loss.item(), x.grad.numpy().tolist()))
    assert len(_Counted.calls) == 5
    for (loss, grad), v in zip(got, ([1., 2., -1., 3.],) * 2 + ([1., -2., -1., 3.],
                                [1., 2., -1., 3.], [1., -2., -1., 3.])):
        v = np.array(v)
        assert loss == 2 * v.sum() + v[v > 0].sum()
        assert grad == (2 + (v > 0)).tolist()


_SHARDED_GUARD = r"""
import numpy as np
import tracegrad as tg
calls = []
class Counted(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        calls.append(1)
        return x * 2
    @staticmethod
    def backward(ctx, g):
        return g * 3
def fn(x):
    if x.sum().item() > 0:
        return Counted.apply(x * 1)
    return Counted.apply(x * 1) - 1
f = tg.compile(fn, backend="jax", data_parallel=True)
for v in (1., 1., -1., 1., -1.):
    x = tg.full((8, 2), v, requires_grad=True)
    y = f(x)
    y.sum().backward()
    assert y.detach().numpy().tolist() == [[2 * v - (v < 0)] * 2] * 8, y
    assert x.grad.numpy().tolist() == [[3.0] * 2] * 8
assert len(calls) == 5, calls
print("OK")
"""


def test_sharded_custom_forward_behind_a_failing_guard_runs_once_per_call():
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _SHARDED_GUARD], env=env, capture_output=True,
                       text=True, timeout=600, cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("OK")


def _trunc(x, y):
    return tg.div(x, y, rounding_mode="trunc"), tg.div(x, 3, rounding_mode="trunc")


@pytest.mark.parametrize("backend", [None, "numpy", "jax"])
def test_integer_trunc_division_is_exact_beyond_float32(backend):
    # it divided in float32: 2**30 // 3 came out 357913952, torch gives 357913941
    f = _trunc if backend is None else tg.compile(_trunc, backend=backend)
    a = [2 ** 30, 2 ** 31 - 1, -(2 ** 40) + 1, -7, 7, -6, 1, -1, 0]
    b = [3, -3, 3, -3, -3, 3, -3, 3, 5]
    q, q3 = f(tg.tensor(a), tg.tensor(b))
    assert q.dtype == q3.dtype == tg.int64
    assert q.tolist() == [int(x / y) if abs(x) < 2 ** 52 else -(-x // y) for x, y in zip(a, b)]
    assert q3.tolist() == [357913941, 715827882, -366503875925, -2, 2, -2, 0, 0, 0]
    small = f(tg.tensor([7, -7], dtype=tg.int32), tg.tensor([2, 2], dtype=tg.int32))[0]
    assert small.dtype == tg.int32 and small.tolist() == [3, -3]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        f(tg.tensor([1, 2]), tg.tensor([1, 0]))
