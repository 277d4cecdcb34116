"""Host arrays XLA reads in place on the JAX backend (Note [Aligned host arrays],
backends/jax/aligned.py): a compiled training step written the PyTorch way (nn.Sequential,
SGD with momentum, zero_grad / backward / step inside the compiled function) moves its large
parameters and momentum buffers to 64-byte aligned memory once, unobservably (same values,
versions, storage offsets; never while a view, `.data` tensor or `numpy()` result shares the
array), and every eager write between calls is seen by the next call: in-place ops under
no_grad, writes through `.data` (a version counter of its own), through `numpy()` views (no
counter at all), `load_state_dict`, rebinding `.data`, optimizer state. Each case runs the
same sequence eagerly and compiled and compares parameters, buffers, losses and `.grad`
after every step.
"""
import gc

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg  # noqa: E402
import tracegrad.nn.functional as F  # noqa: E402
from tracegrad import nn, optim  # noqa: E402

B, SIZES = 64, (256, 128, 10)      # weights of 128 KB: above aligned.MIN_BYTES


def _setup(compiled):
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(SIZES[0], SIZES[1]), nn.Tanh(),
                          nn.Linear(SIZES[1], SIZES[2]))
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return model, opt, (tg.compile(step, backend="jax") if compiled else step)


def _data(k):
    rng = np.random.default_rng(k)
    return (tg.tensor(rng.standard_normal((B, SIZES[0])).astype(np.float32)),
            tg.tensor(rng.integers(0, SIZES[-1], B)))


def _write_no_grad(model, opt):
    with tg.no_grad():
        model[0].weight.mul_(0.5)


def _write_data(model, opt):
    model[0].weight.data.copy_(tg.ones(SIZES[1], SIZES[0]) * 0.01)


def _write_numpy(model, opt):
    model[0].weight.detach().numpy()[3, :] = 0.25


def _rebind_data(model, opt):
    model[0].weight.data = tg.full((SIZES[1], SIZES[0]), 0.02)


def _load_state(model, opt):
    sd = {k: v.clone() * 0.9 for k, v in model.state_dict().items()}
    model.load_state_dict(sd)


def _write_momentum(model, opt):
    buf = opt.state[model[0].weight]["momentum_buffer"]
    buf.data.mul_(-1.0)


def _write_momentum_numpy(model, opt):
    opt.state[model[0].weight]["momentum_buffer"].numpy()[:] = 0.0


WRITES = [_write_no_grad, _write_data, _write_numpy, _rebind_data, _load_state,
          _write_momentum, _write_momentum_numpy]


def _run(compiled, write, same_batch):
    model, opt, step = _setup(compiled)
    trace = []
    fixed = _data(0)
    for k in range(6):
        x, y = fixed if same_batch else _data(k)
        if k == 3:
            write(model, opt)
        loss = step(x, y)
        trace.append([float(loss)] + [p.detach().numpy().copy() for p in model.parameters()]
                     + [p.grad.numpy().copy() for p in model.parameters()]
                     + [opt.state[p]["momentum_buffer"].numpy().copy()
                        for p in model.parameters()])
    return trace, step


@pytest.mark.parametrize("same_batch", [True, False])
@pytest.mark.parametrize("write", WRITES, ids=lambda w: w.__name__.strip("_"))
def test_eager_write_between_calls_is_seen(write, same_batch):
    eager, _ = _run(False, write, same_batch)
    comp, step = _run(True, write, same_batch)
    assert step.stats.cache_hits >= 2
    for k, (e, c) in enumerate(zip(eager, comp)):
        for j, (a, b) in enumerate(zip(e, c)):
            np.testing.assert_allclose(b, a, rtol=2e-5, atol=2e-6, err_msg=f"step {k} #{j}")


def _aligned(t):
    return t._data.__array_interface__["data"][0] % 64 == 0


def test_large_captured_arrays_move_unobservably():
    model, opt, step = _setup(True)
    x, y = _data(0)
    step(x, y)
    step(x, y)
    step(x, y)                                # moved on a cached call, before the program
    w = model[0].weight
    bufs = [opt.state[p]["momentum_buffer"] for p in model.parameters()]
    large = [t for t in list(model.parameters()) + bufs if t._data.nbytes >= 1 << 16]
    assert large and all(_aligned(t) for t in large)
    eager_model, _, eager_step = _setup(False)
    for _ in range(3):
        eager_step(x, y)
    e = eager_model[0].weight
    assert (w.storage_offset(), w.is_contiguous(), w._version, w.stride()) == (
        e.storage_offset(), e.is_contiguous(), e._version, e.stride())
    np.testing.assert_allclose(w.detach().numpy(), e.detach().numpy(), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("holder", ["data", "detach", "numpy", "view"])
def test_shared_array_is_not_moved(holder):
    """While anything else refers to the array, moving it would be seen: it stays."""
    p = tg.tensor(np.ones((128, 256), np.float32))
    f = tg.compile(lambda x: (x * p).sum(), backend="jax")
    held = {"data": lambda: p.data, "detach": lambda: p.detach(),
            "numpy": lambda: p.numpy(), "view": lambda: p[1:]}[holder]()
    x = tg.tensor(np.full((128, 256), 2.0, np.float32))
    ptr = p.data_ptr()
    for _ in range(4):
        assert float(f(x)) == 2.0 * 128 * 256
    assert p.data_ptr() == ptr
    (held.numpy() if holder in ("data", "detach", "view") else held)[...] = 3.0
    assert float(f(x)) == (2.0 * 3.0 * 127 * 256 + 2.0 * 256 if holder == "view"
                           else 2.0 * 3.0 * 128 * 256)
    del held
    gc.collect()              # jax's call machinery leaves cycles holding its numpy arguments
    f(x)
    assert _aligned(p) and float(f(x)) == (2.0 * 3.0 * 127 * 256 + 2.0 * 256 if holder == "view"
                                           else 2.0 * 3.0 * 128 * 256)


def test_input_written_behind_its_counter():
    """Writes through a numpy view and through `.data` (no version bump on the tensor) to
    an argument and to a moved captured tensor are read by the next call."""
    w = tg.tensor(np.random.default_rng(1).standard_normal((128, 256)).astype(np.float32))
    f = tg.compile(lambda x: (x * w).sum(), backend="jax")
    x = tg.tensor(np.ones((128, 256), np.float32))
    for _ in range(3):
        np.testing.assert_allclose(float(f(x)), float(w.numpy().sum()), rtol=1e-4)
    x.numpy()[:64] = 2.0
    expect = float((x.numpy() * w.numpy()).sum())
    np.testing.assert_allclose(float(f(x)), expect, rtol=1e-4)
    assert _aligned(w)
    w.numpy()[:, :128] = 0.5
    expect = float((x.numpy() * w.numpy()).sum())
    np.testing.assert_allclose(float(f(x)), expect, rtol=1e-4)
    x.data.copy_(tg.zeros(128, 256))
    assert float(f(x)) == 0.0


def test_failed_guard_keeps_parameters():
    """A call that fails a guard after XLA ran re-traces; the parameter is eager's."""
    p = tg.tensor(np.ones((128, 256), np.float32))
    s = tg.tensor(1.0)

    def upd(s):
        with tg.no_grad():
            p.add_(1.0)
        if (p.sum() * s) > 0:
            return p.sum()
        return -p.sum()
    f = tg.compile(upd, backend="jax")
    ref = np.ones((128, 256), np.float32)
    for k in range(4):
        out = f(s)
        ref += 1.0
        np.testing.assert_array_equal(p.numpy(), ref)
        np.testing.assert_allclose(float(out), ref.sum(), rtol=1e-6)
    out = f(tg.tensor(-1.0))                  # the guard fails: re-trace, eager's result
    ref += 1.0
    np.testing.assert_array_equal(p.numpy(), ref)
    np.testing.assert_allclose(float(out), -ref.sum(), rtol=1e-6)
    out = f(s)
    ref += 1.0
    np.testing.assert_array_equal(p.numpy(), ref)


def test_runtime_check_rerun_reads_moved_array():
    """A failing runtime check (an index out of range) re-runs the call on numpy, reading
    the moved array of `p`: the error and every later value are eager's."""
    def run(compiled):
        p = tg.tensor(np.ones((128, 256), np.float32))

        def upd(i):
            r = p[i].sum()
            with tg.no_grad():
                p.mul_(1.5)
            return r
        f = tg.compile(upd, backend="jax") if compiled else upd
        seen = []
        for i in [0, 1, 2, 500, 3, 4]:
            try:
                seen.append(float(f(tg.tensor([i]))))
            except IndexError as e:
                seen.append(type(e).__name__)
            seen.append(p.numpy().copy())
        if compiled:
            assert f.stats.traces == 1 and f.stats.cache_hits >= 4
        return seen
    for a, b in zip(run(False), run(True)):
        if isinstance(a, str):
            assert a == b
        else:
            np.testing.assert_allclose(b, a, rtol=1e-6)


def _unaligned_tensor(shape, value):
    """A tensor owning an array that is not 64-byte aligned (most are not; retry if so)."""
    tried = []                      # (held, so the allocator cannot hand the same one back)
    for _ in range(64):
        t = tg.tensor(np.full(shape, value, np.float32))
        if not _aligned(t):
            return t
        tried.append(t)
    pytest.skip("the allocator kept returning 64-byte aligned arrays")


def test_large_argument_moves_unobservably():
    """An argument tensor used again on later calls (a fixed batch) is moved once, like the
    parameters: XLA then reads it in place instead of copying it on every call. Values,
    version and layout stay; a numpy view of it taken later sees what the program reads."""
    f = tg.compile(lambda x, w: (x * w).sum(), backend="jax")
    w = tg.tensor(np.ones((128, 256), np.float32), requires_grad=True)
    x = _unaligned_tensor((128, 256), 2.0)
    v = x._version
    for _ in range(3):
        assert float(f(x, w)) == 2.0 * 128 * 256
    assert _aligned(x) and x._version == v and x.is_contiguous() and x.storage_offset() == 0
    x.numpy()[0, :] = 5.0                  # a write behind every counter: the next call sees it
    assert float(f(x, w)) == 2.0 * 127 * 256 + 5.0 * 256


def test_argument_with_a_view_held_is_not_moved():
    f = tg.compile(lambda x: (x * 3).sum(), backend="jax")
    x = _unaligned_tensor((128, 256), 1.0)
    view = x.numpy()
    ptr = x.data_ptr()
    for _ in range(3):
        assert float(f(x)) == 3.0 * 128 * 256
    assert x.data_ptr() == ptr
    view[...] = 2.0
    assert float(f(x)) == 6.0 * 128 * 256
