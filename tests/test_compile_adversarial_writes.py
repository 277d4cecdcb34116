"""Adversarial first-law tests of the mechanisms that write a compiled call's results into
Python state (Notes [Numbers written to Python state] in compiler/place_writes.py,
[Appends to the caller's lists] in compiler/append_replay.py, [Tensors written to Python
state] in compiler/tensor_places.py): programs written the way users write them, run for
several calls eagerly and compiled (numpy and JAX backends), with the state compared by
value, type and object identity."""
import pytest

import tracegrad as tg
import tracegrad.nn as nn
from _differential import compare

BACKENDS = ["numpy", pytest.param("jax", marks=pytest.mark.slow)]


def _backend(backend):
    if backend == "jax":
        pytest.importorskip("jax")


class _Seen:
    """What a caller can observe of a value: tensors by bytes, dtype and flags, numbers
    by type and repr, containers item by item (compared by equality in `compare`)."""

    def __init__(self, get):
        self.get = get

    def __eq__(self, other):
        return _view(self.get()) == _view(other.get())

    def __repr__(self):
        return repr(_view(self.get()))


class _Log:
    """A training log the step appends to (compared through `_Seen`, never by itself)."""

    def __init__(self):
        self.hist = []

    def __eq__(self, other):
        return True


def _view(v):
    if isinstance(v, tg.Tensor):
        return ("T", v.detach().numpy().round(5).tobytes(), str(v.dtype), v.requires_grad)
    if isinstance(v, dict):
        return {k: _view(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v).__name__, [_view(x) for x in v]
    if isinstance(v, float):
        return "float", f"{v:.6g}"
    return type(v).__name__, repr(v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_detached_loss_appended_twice_is_one_object_as_eagerly(backend):
    # `v = loss.detach()` is a view of the returned loss: a cached call made a fresh
    # view for each repeat of it, so the list held two objects where eager holds one
    _backend(backend)

    def make(comp):
        m = nn.Linear(2, 1)
        log = _Log()

        def step(x):
            loss = m(x).pow(2).mean()
            v = loss.detach()
            log.hist.append(v)
            log.hist.append(v)
            return loss

        return comp(step), {"m": m, "hist": _Seen(lambda: log.hist), "log": log}

    def calls(step, objs, i):
        out = step(tg.randn(3, 2))
        hist = objs["log"].hist
        return _Seen(lambda: out), len(hist), hist[-1] is hist[-2]

    stats = compare(make, calls, n=6, backend=backend)
    assert stats.cache_hits == 5, stats


def test_a_view_returned_twice_is_one_object():
    w = tg.ones(3, requires_grad=True)

    def f(x):
        y = x * w
        v = y[1:]
        return y, v, v

    g = tg.compile(f)
    for _ in range(4):
        y, a, b = g(tg.ones(3))
        assert a is b
    assert g.stats.cache_hits == 3, g.stats
