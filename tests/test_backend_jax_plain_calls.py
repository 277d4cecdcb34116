"""The JAX backend's plain calls (Note [Plain calls] in backends/jax/program.py): a program
with nothing to do around its executable is called through a closure that skips
`JaxProgram.__call__`'s per-call questions. Its results must be `__call__`'s: fresh writable
numpy arrays for what users receive, the same values, the x64 mode of the graph (a call made
inside a `jax.enable_x64` context of the other mode goes through `__call__`), and programs
that are not plain (runtime checks, host draws, adopted results) keep `__call__`.
"""
import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg  # noqa: E402
from tracegrad.backends.jax.program import JaxProgram  # noqa: E402


def loss_fn(x, w):
    return ((x * w).sin() * 1.5 + w).tanh().sum()


def _leaves(dtype=np.float32):
    x = tg.tensor(np.linspace(-1, 1, 5).astype(dtype), requires_grad=True)
    w = tg.tensor(np.linspace(0.2, 0.7, 5).astype(dtype), requires_grad=True)
    return x, w


def _path(comp):
    (entry,) = [e for e in comp.entries.values() if e.paths]
    (path,) = entry.paths
    return path


def _is_fast(prog):
    return getattr(prog.fn, "__name__", "") in ("fast", "reordered")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plain_programs_use_the_fast_call_and_equal_eager(dtype):
    comp = tg.compile(loss_fn, backend="jax")
    ref_x, ref_w = _leaves(dtype)
    for it in range(4):
        x, w = _leaves(dtype)
        loss = comp(x, w)
        loss.backward()
        ex, ew = _leaves(dtype)
        eloss = loss_fn(ex, ew)
        eloss.backward()
        rtol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(loss.item(), eloss.item(), rtol=rtol)
        np.testing.assert_allclose(x.grad.numpy(), ex.grad.numpy(), rtol=rtol, atol=1e-7)
        np.testing.assert_allclose(w.grad.numpy(), ew.grad.numpy(), rtol=rtol, atol=1e-7)
        assert x.grad.dtype == ex.grad.dtype and loss.dtype == eloss.dtype
        for t in (loss, x.grad, w.grad):     # fresh, writable, not shared
            a = t._data
            assert a.flags.writeable and a.flags.owndata
        assert not np.shares_memory(x.grad.numpy(), w.grad.numpy())
    path = _path(comp)
    assert _is_fast(path.forward_program) and _is_fast(path.backward_program)
    assert path.speculation.program is not None and _is_fast(path.speculation.program)


def test_fast_call_results_equal_the_general_call():
    comp = tg.compile(loss_fn, backend="jax")
    x, w = _leaves()
    for _ in range(3):
        comp(x, w).backward()
    path = _path(comp)
    arrays = [x._data, w._data]
    for prog in (path.forward_program, path.speculation.program):
        fast, general = prog.fn(*arrays), prog(*arrays)
        assert len(fast) == len(general)
        for a, b in zip(fast, general):
            assert type(a) is type(b)
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("mode", [True, False])
def test_call_inside_an_x64_context_of_the_other_mode(mode):
    """A float32 program called inside `jax.enable_x64(True)` (and a float64 one inside
    `enable_x64(False)`) still runs under its own mode."""
    dtype = np.float32 if mode else np.float64
    comp = tg.compile(loss_fn, backend="jax")
    for _ in range(3):
        x, w = _leaves(dtype)
        comp(x, w).backward()
    x, w = _leaves(dtype)
    with jax.enable_x64(mode):
        loss = comp(x, w)
        loss.backward()
    ex, ew = _leaves(dtype)
    eloss = loss_fn(ex, ew)
    eloss.backward()
    assert loss.dtype == eloss.dtype and x.grad.dtype == ex.grad.dtype
    np.testing.assert_allclose(x.grad.numpy(), ex.grad.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(loss.item(), eloss.item(), rtol=1e-5)


def test_programs_with_runtime_checks_or_draws_are_not_plain():
    def checked(x, idx):
        return (x[idx] * 2).sum()        # an index out of range is a runtime check

    comp = tg.compile(checked, backend="jax")
    x = tg.tensor(np.arange(6, dtype=np.float32), requires_grad=True)
    idx = tg.tensor(np.array([0, 2, 5]))
    comp(x, idx).backward()
    prog = _path(comp).forward_program
    assert isinstance(prog, JaxProgram)
    assert prog.lowered.n_checks and not _is_fast(prog)
    with pytest.raises(IndexError):
        comp(x, tg.tensor(np.array([0, 9])))

    def dropped(x):
        return tg.nn.functional.dropout(x, 0.5, training=True).sum()

    comp = tg.compile(dropped, backend="jax")
    x = tg.tensor(np.ones(8, np.float32), requires_grad=True)
    comp(x)
    prog = _path(comp).forward_program
    assert prog.lowered.host_nodes and not _is_fast(prog)


def test_large_gradients_are_adopted_not_fast():
    n = 128 * 256                         # 128 KB float32: adopted (adopt.py)
    x = tg.tensor(np.random.default_rng(0).standard_normal(n).astype(np.float32))
    w = tg.tensor(np.random.default_rng(1).standard_normal(n).astype(np.float32),
                  requires_grad=True)
    comp = tg.compile(lambda x, w: (x * w).sum(), backend="jax")
    for _ in range(3):
        w.grad = None
        comp(x, w).backward()
        np.testing.assert_allclose(w.grad.numpy(), x.numpy())
    assert not _is_fast(_path(comp).backward_program)


# ---- Note [Small inputs] (backends/jax/small_inputs.py) ----

def _small(prog):
    """The SmallInputs of a plain program's closure."""
    fn = prog.fn
    if fn.__name__ == "reordered":
        fn = next(c.cell_contents for c in fn.__closure__ if callable(c.cell_contents)
                  and getattr(c.cell_contents, "__name__", "") == "fast")
    swap = next(c.cell_contents for c in fn.__closure__
                if getattr(c.cell_contents, "__name__", "") == "swap")
    return swap.__self__


@pytest.mark.parametrize("how", ["inplace", "data", "numpy_view", "rebind", "same_values"])
def test_eager_writes_to_small_inputs_between_calls_are_seen(how):
    comp = tg.compile(loss_fn, backend="jax")
    x, w = _leaves()
    for _ in range(6):                   # repeated values: served from device copies
        x.grad = w.grad = None
        comp(x, w).backward()
    small = _small(_path(comp).speculation.program)
    assert sum(small.puts) >= 1 and sum(small.hits) >= 1
    if how == "inplace":
        with tg.no_grad():
            w.mul_(2.0)
    elif how == "data":
        w.data[1] = 5.0
    elif how == "numpy_view":            # no version counter moves
        w.detach().numpy()[2] = -3.0
    elif how == "rebind":
        w.data = tg.tensor(np.full(5, 0.25, np.float32))
    for _ in range(3):
        x.grad = w.grad = None
        loss = comp(x, w)
        loss.backward()
        ex = tg.tensor(x.detach().numpy().copy(), requires_grad=True)
        ew = tg.tensor(w.detach().numpy().copy(), requires_grad=True)
        eloss = loss_fn(ex, ew)
        eloss.backward()
        np.testing.assert_allclose(loss.item(), eloss.item(), rtol=1e-5)
        np.testing.assert_allclose(w.grad.numpy(), ew.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), ex.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_alternating_small_inputs_and_the_put_limit():
    from tracegrad.backends.jax import small_inputs as S
    f = tg.compile(lambda x, k: x * 2.0 + k, backend="jax")
    x = tg.tensor(np.arange(4, dtype=np.float32))
    ks = [np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])]
    outs = []
    for i in range(4 * S.PUT_LIMIT + 8):      # A A B B A A ...: a put every other call
        k = ks[(i // 2) % 2]
        out = f(x, tg.tensor(k)).numpy()
        np.testing.assert_array_equal(out, x.numpy() * 2.0 + k)
        outs.append(out)
    small = _small(_path(f).forward_program)
    assert small.puts[0] == 1 and small.hits[0] > S.PUT_LIMIT     # x: one copy, reused
    assert small.puts[1] == S.PUT_LIMIT          # k: then no more copies are made
    assert f(x, tg.tensor(ks[0])).dtype == tg.float32


def test_integer_small_inputs_keep_their_values():
    f = tg.compile(lambda x, idx: x[idx].sum() * 1.0, backend="jax")
    x = tg.tensor(np.arange(10, dtype=np.float32))
    idx = tg.tensor(np.array([1, 3, 5]))
    for _ in range(4):
        assert f(x, idx).item() == 9.0
    idx.data[0] = 7                        # through .data: no version bump on idx
    assert f(x, idx).item() == 15.0
    x.data[7] = 100.0
    assert f(x, idx).item() == 108.0


def test_a_small_input_in_aligned_memory_is_copied_not_aliased():
    """jax reads a 64-byte aligned numpy array in place: the kept device value must be a
    copy of its own, or a later write into the array would change it unseen."""
    from tracegrad.backends.jax.aligned import aligned
    f = tg.compile(lambda x, k: x * 2.0 + k, backend="jax")
    x = tg.tensor(np.arange(4, dtype=np.float32))
    k = tg.tensor(np.ones(4, np.float32))
    k._data = aligned(k._data)
    for _ in range(4):
        np.testing.assert_array_equal(f(x, k).numpy(), x.numpy() * 2.0 + 1.0)
    view = k.numpy()
    view[0] = 100.0                          # the same bytes were seen at the last check
    np.testing.assert_array_equal(f(x, k).numpy(), x.numpy() * 2.0 + view)
    view[1] = -5.0
    np.testing.assert_array_equal(f(x, k).numpy(), x.numpy() * 2.0 + view)
    for _ in range(3):
        f(x, k)
    before = view.copy()
    k.data = tg.tensor(before.copy())        # k's new array holds the same bytes, and
    view[2] = 42.0                           # the old one (a copy was made of) changes
    np.testing.assert_array_equal(f(x, k).numpy(), x.numpy() * 2.0 + before)


def test_backward_program_without_speculation_uses_the_fast_call():
    """A gradient other than one runs the backward program (not the speculative one)."""
    comp = tg.compile(loss_fn, backend="jax")
    for seed in (2.0, -0.5, 2.0, 3.0):
        x, w = _leaves()
        comp(x, w).backward(tg.tensor(seed))
        ex, ew = _leaves()
        loss_fn(ex, ew).backward(tg.tensor(seed))
        np.testing.assert_allclose(x.grad.numpy(), ex.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w.grad.numpy(), ew.grad.numpy(), rtol=1e-5, atol=1e-6)
    prog = _path(comp).backward_program
    assert _is_fast(prog) and sum(_small(prog).hits) >= 1
