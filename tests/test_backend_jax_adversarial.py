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
