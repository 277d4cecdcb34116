"""The quiet Contexts eager dispatch runs quiet kernels in (Note [Quiet kernels] in
tracegrad/_quiet.py): the caller's numpy error state is what the user's code sees
afterwards, other threads and re-entered contexts fall back correctly, the kernel's own
errors come out unchanged, and the caller's numpy buffer size is kept."""
import sys
import threading
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import _quiet


def _overflowing():
    return tg.tensor(np.array([1e38, 2.0, -1e38], np.float32), requires_grad=True)


def test_quiet_op_under_raise_settings_gives_inf_and_keeps_them():
    x = _overflowing()
    with np.errstate(all="raise"):
        y = x * 10.0                  # a quiet primitive: the context, not the caller's state
        z = y.exp()
        assert np.geterr()["over"] == "raise"
        with pytest.raises(FloatingPointError):
            np.float32(1e38) * np.float32(10.0)
    np.testing.assert_array_equal(y.detach().numpy(), np.float32([np.inf, 20.0, -np.inf]))
    assert np.isinf(z.detach().numpy()[0])
    z.sum().backward()
    assert x.grad is not None


def test_kernels_errors_come_out_unchanged():
    """A quiet primitive whose kernel raises (integer division by zero) raises PyTorch's
    error, not a context error, and the next call works."""
    a = tg.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        a // tg.tensor([1, 0, 1])
    np.testing.assert_array_equal((a // tg.tensor([1, 2, 1])).numpy(), [1, 1, 3])


def test_a_context_entered_already_falls_back():
    """Dispatch reached with a quiet context already entered (a kernel calling back into
    tracegrad) gets the same result through the fallback."""
    x = _overflowing()
    state = _quiet._NP_ERRSTATE.get()
    _ = x * 10.0                                   # makes the context of this state
    ctx = _quiet._CONTEXTS[state]

    def inside():
        token = _quiet._NP_ERRSTATE.set(state)     # the caller's state, inside the context
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                return (x * 10.0).detach().numpy()
        finally:
            _quiet._NP_ERRSTATE.reset(token)

    got = ctx.run(inside)
    np.testing.assert_array_equal(got, np.float32([np.inf, 20.0, -np.inf]))
    assert _quiet._NP_ERRSTATE.get() is state


def test_threads_run_quiet_ops_at_once(monkeypatch):
    """Many threads in eager quiet ops at the same time (switching threads every few
    bytecodes, so one often finds the quiet context entered by another): each gets its own
    results, none sees a context error, and none warns."""
    from tracegrad import _dispatch
    errors, results, busy = [], {}, []

    def counting(*a, **kw):
        busy.append(kw.get("busy", False))
        return _quiet.run_quiet(*a, **kw)

    monkeypatch.setattr(_dispatch, "run_quiet", counting)
    old_interval = sys.getswitchinterval()
    start = threading.Barrier(4)

    def work(k):
        try:
            start.wait()
            w = tg.tensor(np.full(4, float(k + 1), np.float32), requires_grad=True)
            for _ in range(300):
                h = (w.detach() * 1e38).exp().clamp(max=1.0) + w.sin() / 2.0
                h.sum().backward()
            results[k] = (h.detach().numpy(), w.grad.numpy())
        except BaseException as e:          # noqa: BLE001 (reported below)
            errors.append(e)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sys.setswitchinterval(1e-6)
        try:
            threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            sys.setswitchinterval(old_interval)
    assert not errors, errors
    assert any(busy), "no thread found the context busy: the fallback went untested"
    for k in range(4):
        w = np.full(4, k + 1, np.float32)
        np.testing.assert_allclose(results[k][0], 1.0 + np.sin(w) / 2.0, rtol=1e-6)
        np.testing.assert_allclose(results[k][1], 300 * np.cos(w) / 2.0, rtol=1e-4)


def test_callers_buffer_size_is_kept():
    """The quiet state is derived from the caller's (only the warnings change): a kernel
    run under `np.setbufsize` sees that buffer size."""
    seen = []
    x = tg.tensor(np.array([1.0, 2.0], np.float32))
    old = np.getbufsize()
    try:
        np.setbufsize(8192 * 2)
        state = _quiet._NP_ERRSTATE.get()
        _ = x * 2.0
        _quiet._CONTEXTS[state].run(lambda: seen.append((np.getbufsize(), np.geterr()["over"])))
    finally:
        np.setbufsize(old)
    assert seen == [(8192 * 2, "ignore")]
    assert np.getbufsize() == old
