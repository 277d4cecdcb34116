"""The backward engine: no recursion on deep graphs, freeing saved values, summing
contributions in diamond graphs, one call per node, and leaf-dtype gradients.
"""
import gc
import sys
import time
import tracemalloc
import weakref

import numpy as np
import pytest

import tracegrad as tg


def _np(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- deep graphs

def _low_recursion_limit(extra=150):
    """A recursion limit just above the current stack depth: recursion would fail fast."""
    depth, f = 0, sys._getframe()
    while f is not None:
        depth, f = depth + 1, f.f_back
    return depth + extra


def test_ten_thousand_op_chain_backward_without_recursion():
    x = tg.tensor(1.0, dtype=tg.float64, requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_low_recursion_limit())
    try:
        start = time.perf_counter()
        y.backward()
        elapsed = time.perf_counter() - start
    finally:
        sys.setrecursionlimit(old)
    assert float(x.grad) == pytest.approx(1.0001 ** 10_000, rel=1e-9)
    assert elapsed < 3.0


def test_deep_chain_of_mixed_ops_and_views():
    x = tg.tensor([0.1, 0.2], dtype=tg.float64, requires_grad=True)
    y = x
    for i in range(3_000):
        y = (y.tanh() + 0.01)[[1, 0]] if i % 3 == 0 else y.reshape(2, 1).reshape(2) * 1.0
    y.sum().backward()
    assert np.all(np.isfinite(_np(x.grad)))


def test_deep_chain_grad_matches_torch():
    torch = pytest.importorskip("torch")
    out = []
    for lib in (tg, torch):
        x = lib.tensor([0.3, -0.4], dtype=lib.float64, requires_grad=True)
        y = x
        for _ in range(2_000):
            y = y.sin() * 1.01 + 0.001
        y.sum().backward()
        out.append(_np(x.grad))
    np.testing.assert_allclose(out[0], out[1], rtol=1e-12)


def test_deep_graph_can_be_dropped_without_recursion():
    x = tg.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(20_000):
        y = y + 1.0
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_low_recursion_limit())
    try:
        del y
        gc.collect()
    finally:
        sys.setrecursionlimit(old)


# ---------------------------------------------------------------- freeing saved values

def test_saved_values_released_after_backward():
    x = tg.ones(10, requires_grad=True)
    h = x * 2
    y = h.sin()                    # SinBackward0 saves h
    ref = weakref.ref(h)
    del h
    gc.collect()
    assert ref() is not None       # kept alive by the graph
    y.sum().backward()
    gc.collect()
    assert ref() is None           # released by backward


def test_saved_values_kept_with_retain_graph():
    x = tg.ones(10, requires_grad=True)
    h = x * 2
    y = h.sin()
    ref = weakref.ref(h)
    del h
    loss = y.sum()
    loss.backward(retain_graph=True)
    gc.collect()
    assert ref() is not None
    loss.backward()
    gc.collect()
    assert ref() is None


def test_saved_values_released_after_autograd_grad():
    x = tg.ones(10, requires_grad=True)
    h = x * 2
    y = h.sin().sum()
    ref = weakref.ref(h)
    del h
    tg.autograd.grad(y, x)
    gc.collect()
    assert ref() is None


def test_graph_freed_when_output_dropped():
    x = tg.ones(10, requires_grad=True)
    h = x * 2
    y = h.sin()
    ref = weakref.ref(h)
    del h, y
    gc.collect()
    assert ref() is None


def test_backward_releases_memory_of_saved_intermediates():
    x = tg.ones(250_000, dtype=tg.float64, requires_grad=True)      # 2 MB per tensor
    tracemalloc.start()
    try:
        y = x
        for _ in range(8):
            y = y.sin()            # each saves its 2 MB input
        loss = y.sum()
        held, _ = tracemalloc.get_traced_memory()
        loss.backward()
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 7 saved intermediates (the 8th input is x itself) go away, minus x.grad (2 MB)
    assert held - after > 4 * 2_000_000


def test_second_backward_error_names_retain_graph(lib):
    x = lib.ones(3, requires_grad=True)
    y = x.sin().sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


# ---------------------------------------------------------------- graph shapes

def test_diamond_sums_contributions(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    a, b = x * 2, x * 3
    (a * b).sum().backward()
    np.testing.assert_allclose(_np(x.grad), 12 * np.array([1.0, 2.0]))


def test_diamond_with_unequal_path_lengths(lib):
    x = lib.tensor([0.5, -1.0], requires_grad=True)
    long = x
    for _ in range(5):
        long = long * 2
    (long + x.exp() + x).sum().backward()
    np.testing.assert_allclose(_np(x.grad), 32 + np.exp([0.5, -1.0]) + 1, rtol=1e-6)


def test_tensor_used_twice_in_one_op(lib):
    x = lib.tensor([3.0], requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [6.0])


def test_leaf_hook_called_once_with_summed_gradient(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    calls = []
    x.register_hook(lambda g: calls.append(_np(g).copy()))
    (x * 2 + x * 3).sum().backward()
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], [5.0, 5.0])


def test_non_leaf_hook_called_once_with_summed_gradient(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    calls = []
    h.register_hook(lambda g: calls.append(_np(g).copy()))
    (h * 2 + h * 3).sum().backward()
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], [5.0, 5.0])


def test_each_node_runs_once_per_backward():
    # a node reached through 50 paths must still be applied once
    F = tg.autograd.Function
    runs = []

    class Count(F):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            runs.append(1)
            return g
    x = tg.ones(2, requires_grad=True)
    h = Count.apply(x)
    sum(h * float(i) for i in range(50)).sum().backward()
    assert runs == [1]
    np.testing.assert_allclose(_np(x.grad), [sum(range(50))] * 2)


def test_multiple_roots_share_a_subgraph(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    h = x.exp()
    lib.autograd.backward([h.sum(), (h * 2).sum()])
    np.testing.assert_allclose(_np(x.grad), 3 * np.exp([1.0, 2.0]), rtol=1e-6)


def test_unreachable_leaves_untouched(lib):
    x = lib.tensor([1.0], requires_grad=True)
    unused = lib.tensor([1.0], requires_grad=True)
    _ = unused * 2
    (x * 2).sum().backward()
    assert unused.grad is None


# ---------------------------------------------------------------- dtypes

def test_leaf_grad_dtype_with_float64_zero_dim_operand(lib):
    a = lib.ones(2, requires_grad=True)
    s = lib.tensor(2.0, dtype=lib.float64, requires_grad=True)
    y = a * s
    assert y.dtype == lib.float32                # zero-dim tensors do not promote
    y.sum().backward()
    assert a.grad.dtype == lib.float32
    assert s.grad.dtype == lib.float64
    assert float(s.grad) == 2.0


def test_leaf_grad_dtype_with_float64_operand(lib):
    a = lib.ones(2, requires_grad=True)
    b = lib.ones(2, dtype=lib.float64, requires_grad=True)
    y = a * b
    assert y.dtype == lib.float64
    y.sum().backward()
    assert a.grad.dtype == lib.float32 and b.grad.dtype == lib.float64


def test_grad_dtype_of_float64_root_into_float32_graph(lib):
    a = lib.ones(2, requires_grad=True)
    y = (a.double() * 3).sum()
    y.backward()
    assert a.grad.dtype == lib.float32
    np.testing.assert_allclose(_np(a.grad), [3.0, 3.0])


def test_gradient_argument_cast_to_output_dtype(lib):
    a = lib.ones(2, dtype=lib.float64, requires_grad=True)
    (a * 2).backward(lib.ones(2))                 # float32 gradient for a float64 output
    assert a.grad.dtype == lib.float64
