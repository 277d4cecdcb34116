"""Multithreaded autograd ("Autograd mechanics", Multithreaded Autograd): Hogwild training,
thread-safe accumulation into a shared leaf, concurrent backward on separate graphs, and the
retain_graph rule for a graph shared between threads.
"""
import sys
import threading

import numpy as np
import pytest

import tracegrad as tg


def _run_threads(n, target, *args):
    """Start `n` threads on `target(i, *args)`, join them, re-raise the first error."""
    errors = []

    def wrap(i):
        try:
            target(i, *args)
        except BaseException as e:       # noqa: BLE001 -- reported to the test thread
            errors.append(e)
    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_mechanics_note_train_fn_in_ten_threads(lib):
    results = []

    def train_fn(i):
        x = lib.ones(5, 5, requires_grad=True)
        y = (x + 3) * (x + 4) * 0.5
        y.sum().backward()
        results.append(x.grad.numpy().copy())
    assert _run_threads(10, train_fn) == []
    assert len(results) == 10
    for g in results:
        # d/dx 0.5 (x+3)(x+4) = x + 3.5 at x = 1
        np.testing.assert_allclose(g, np.full((5, 5), 4.5))


def test_hogwild_threads_train_shared_parameters(lib):
    # each thread fits its own data slice to the same shared parameters; updates go through
    # `.data` (no version bump) so another thread's saved `w` stays valid, as in Hogwild
    rng = np.random.default_rng(0)
    true_w = np.array([[2.0], [-3.0]])
    xs = rng.standard_normal((4, 64, 2))
    ys = xs @ true_w
    w = lib.zeros(2, 1, dtype=lib.float64, requires_grad=True)

    def train(i):
        x, y = lib.tensor(xs[i]), lib.tensor(ys[i])
        for _ in range(150):
            loss = ((x @ w - y) ** 2).mean()
            (g,) = lib.autograd.grad(loss, w)   # per-thread gradient, no shared .grad race
            w.data.sub_(0.05 * g)
    assert _run_threads(4, train) == []
    np.testing.assert_allclose(w.detach().numpy(), true_w, atol=1e-3)


def test_shared_leaf_accumulation_is_exact(lib):
    # 8 threads x 50 backward calls; integer-valued gradients make the float sum exact
    w = lib.zeros(3, requires_grad=True)
    coef = lib.tensor([1.0, 2.0, 3.0])

    def work(i):
        for _ in range(50):
            (w * coef * float(i + 1)).sum().backward()
    assert _run_threads(8, work) == []
    total = 50 * sum(range(1, 9))
    np.testing.assert_array_equal(w.grad.numpy(), [total * 1.0, total * 2.0, total * 3.0])


def test_concurrent_backward_on_separate_graphs_is_correct(lib):
    out = {}

    def work(i):
        for k in range(20):
            x = lib.tensor([float(i), float(k)], dtype=lib.float64, requires_grad=True)
            y = (x.sin() * x).sum()
            y.backward()
            ref = np.sin([i, k]) + np.array([i, k]) * np.cos([i, k])
            assert np.allclose(x.grad.numpy(), ref)
        out[i] = True
    assert _run_threads(6, work) == []
    assert len(out) == 6


def test_concurrent_autograd_grad_calls(lib):
    x = lib.tensor([0.5, 1.5], dtype=lib.float64, requires_grad=True)
    got = [None] * 6

    def work(i):
        y = (x ** (i + 2)).sum()
        (g,) = lib.autograd.grad(y, x)
        got[i] = g.numpy()
    assert _run_threads(6, work) == []
    for i, g in enumerate(got):
        np.testing.assert_allclose(g, (i + 2) * np.array([0.5, 1.5]) ** (i + 1))
    assert x.grad is None


def test_shared_graph_with_retain_graph_in_every_thread(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    shared = x.exp()                     # first part built once, in the main thread

    def work(i):
        (shared * float(i + 1)).sum().backward(retain_graph=True)
    assert _run_threads(2, work) == []
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp([1.0, 2.0]), rtol=1e-6)


def test_shared_graph_without_retain_graph_errors_in_the_later_thread(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    shared = x.exp()
    first_done = threading.Event()

    def work(i):
        if i == 1:
            first_done.wait()
        try:
            (shared * 1.0).sum().backward()
        finally:
            first_done.set()
    errors = _run_threads(2, work)
    assert len(errors) == 1
    assert isinstance(errors[0], RuntimeError)
    assert "retain_graph=True" in str(errors[0])
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)


def test_shared_graph_racing_threads_follow_retain_graph_rule():
    # no ordering enforced: every run either errors with the documented message or (if
    # both engines unpacked before either released) succeeds; gradients stay consistent
    for _ in range(20):
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        shared = x.exp()
        barrier = threading.Barrier(2)

        def work(i):
            barrier.wait()
            (shared * 1.0).sum().backward()
        errors = _run_threads(2, work)
        assert all("retain_graph=True" in str(e) for e in errors)
        ok = 2 - len(errors)
        assert ok >= 1
        np.testing.assert_allclose(x.grad.numpy(), ok * np.exp([1.0, 2.0]), rtol=1e-6)


def test_grad_mode_in_worker_does_not_affect_other_workers():
    seen = {}
    barrier = threading.Barrier(2)

    def work(i):
        ctx = tg.no_grad() if i == 0 else tg.enable_grad()
        with ctx:
            barrier.wait()
            seen[i] = (tg.ones(1, requires_grad=True) * 2).requires_grad
    assert _run_threads(2, work) == []
    assert seen == {0: False, 1: True}


def test_first_accumulation_into_a_shared_leaf_is_not_lost(lib):
    # The race that matters is the first write of `.grad` (None -> tensor): 8 threads,
    # released together by a barrier, each backpropagate once into a fresh leaf, with a tiny
    # switch interval so threads interleave inside the engine. Without the accumulation lock
    # some of these 300 rounds lose a contribution (the 8 x 50 test above rarely can).
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        lost = 0
        for _ in range(300):
            w = lib.zeros(3, requires_grad=True)
            coef = lib.tensor([1.0, 2.0, 3.0])
            barrier = threading.Barrier(8)

            def work(i):
                y = (w * coef * float(i + 1)).sum()
                barrier.wait()
                y.backward()
            assert _run_threads(8, work) == []
            lost += not np.array_equal(w.grad.numpy(), [36.0, 72.0, 108.0])
    finally:
        sys.setswitchinterval(old)
    assert lost == 0, f"{lost} of 300 rounds lost a gradient contribution"
