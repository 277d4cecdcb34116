"""Guards and runtime checks read back in one transfer on the JAX backend (Note [One status
transfer], backends/jax/status.py): guards on scalars are compared inside the program, and
the host looks at the guards' values only when one may have failed. Paths, re-traces, cache
hits, values and gradients stay those of the numpy backend and of eager, for every kind of
guard: bool (of a bool and of a float tensor), int, float (NaN included), item, and guards
the program cannot compare (tolist)."""
import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg  # noqa: E402
from tracegrad.backends.jax import program as P  # noqa: E402


def _bool_of_bool(x):
    if (x.sum() > 0).item():
        return (x * 2).sum()
    return (x * 3).sum()


def _bool_of_float(x):
    if x.sum():                          # bool() of a float tensor: nonzero
        return (x * 2).sum()
    return (x - 1).sum()


def _int_guard(x, i):
    k = int(i.sum())
    return (x * k).sum()


def _float_guard(x):
    s = float(x.max())
    return (x * s).sum() if s == s else x.sum() * 0.5


def _item_guard(x):
    return (x + x.mean().item()).sum()


def _tolist_guard(x, i):
    n = i.tolist()
    return (x * (n[0] + 1)).sum()


F32 = np.float32
CASES = [
    ("bool", _bool_of_bool, [[F32([1, 2])], [F32([1, 2])], [F32([-3, 1])], [F32([-3, 1])]]),
    ("bool_float", _bool_of_float, [[F32([1, 2])], [F32([2, 2])], [F32([1, -1])],
                                    [F32([1, -1])], [F32([0.5, 0])]]),
    ("int", _int_guard, [[F32([1, 2]), np.int64([1, 2])], [F32([3, 2]), np.int64([2, 1])],
                         [F32([3, 2]), np.int64([2, 2])], [F32([1, 1]), np.int64([3, 1])]]),
    ("float", _float_guard, [[F32([1, 2])], [F32([2, 1])], [F32([1, 3])], [F32([np.nan, 1])],
                             [F32([1, np.nan])], [F32([1, 3])]]),
    ("item", _item_guard, [[F32([1, 2])], [F32([2, 1])], [F32([0, 4])], [F32([0, 4])]]),
    ("tolist", _tolist_guard, [[F32([1, 2]), np.int64([1])], [F32([3, 2]), np.int64([1])],
                               [F32([3, 2]), np.int64([2])]]),
]


def _run(fn, calls, backend):
    f = fn if backend is None else tg.compile(fn, backend=backend)
    got = []
    for arrays in calls:
        ts = [tg.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        out = f(*ts)
        out.backward()
        got.append((out.detach().numpy(), ts[0].grad.numpy()))
    return f, got


@pytest.mark.parametrize("name,fn,calls", CASES, ids=[c[0] for c in CASES])
def test_guard_kinds_match_numpy_backend_and_eager(name, fn, calls):
    _, eager = _run(fn, calls, None)
    on_np, by_np = _run(fn, calls, "numpy")
    on_jax, by_jax = _run(fn, calls, "jax")
    for k, (e, n, j) in enumerate(zip(eager, by_np, by_jax)):
        for a, b, c in zip(e, n, j):
            np.testing.assert_allclose(b, a, rtol=1e-6, err_msg=f"{name} call {k} numpy")
            np.testing.assert_allclose(c, a, rtol=1e-6, err_msg=f"{name} call {k} jax")
    for stat in ("traces", "retraces", "cache_hits", "eager_calls"):
        assert getattr(on_jax.stats, stat) == getattr(on_np.stats, stat), (name, stat)
    assert on_jax.stats.cache_hits >= 1 and on_jax.stats.eager_calls == 0


def test_held_guards_are_not_read_back(monkeypatch):
    """On a call where every guard (all comparable in the program) holds, the host never
    converts a guard's value; when one fails it does, and the path is left."""
    looked = []
    real = P.guard_holds

    def counting(gd, val):
        looked.append(gd.kind)
        return real(gd, val)

    monkeypatch.setattr(P, "guard_holds", counting)
    f = tg.compile(_float_guard, backend="jax")
    x = tg.tensor(F32([1, 2]), requires_grad=True)
    f(x)
    f(x)
    f(x)
    assert looked == [] and f.stats.cache_hits == 2
    f(tg.tensor(F32([1, 5]), requires_grad=True))         # max 5 != 2: leaves the path
    assert looked and len(f.stats.retraces) == 1
    assert math.isclose(float(f(tg.tensor(F32([1, 5])))), 30.0)


def test_runtime_check_and_guard_in_one_program():
    """A runtime check (a target out of range) and a guard in the same program: the check
    still reruns the call eagerly with PyTorch's error, the guard still picks the path."""
    def loss(x, y):
        s = float(x.detach().abs().max())
        return tg.nn.functional.cross_entropy(x * s, y)

    f = tg.compile(loss, backend="jax")
    x = tg.tensor(np.ones((4, 3), F32), requires_grad=True)
    y = tg.tensor(np.int64([0, 1, 2, 0]))
    for _ in range(3):
        assert np.isfinite(float(f(x, y)))
    with pytest.raises(IndexError, match="out of bounds"):
        f(x, tg.tensor(np.int64([0, 1, 5, 0])))
    x2 = tg.tensor(np.full((4, 3), 2.0, F32), requires_grad=True)
    np.testing.assert_allclose(float(f(x2, y)), float(loss(x2, y)), rtol=1e-6)
    assert len(f.stats.retraces) == 1
