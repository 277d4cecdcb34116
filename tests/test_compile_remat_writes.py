"""A compiled backward that recomputes values from the call's inputs refuses to run after
one of those inputs was overwritten through an alias with its own version counter (Note
[Inputs written before a recomputing backward], compiler/remat_writes.py): eager would mix
saved values from before the write with the new contents, which recomputation cannot
reproduce, so the compiled call says so instead of returning other gradients. Writes
elsewhere, writes after backward, and writes through the tensor itself (eager's version
error) behave as in eager."""
import numpy as np
import pytest

import tracegrad as tg

BACKENDS = [pytest.param({"backend": "numpy", "memory": "min"}, id="numpy-min")]
try:
    import jax  # noqa: F401
    BACKENDS.append(pytest.param({"backend": "jax"}, id="jax"))
except ImportError:              # (the numpy case still runs)
    pass


def fn(x, w):
    return (x * w).sin().sum()


def _leaves():
    return (tg.tensor(np.float32([0.1, 0.2, 0.3]), requires_grad=True),
            tg.tensor(np.float32([1.0, 2.0, 3.0]), requires_grad=True))


def _grads(f, write=None, after=None):
    x, w = _leaves()
    loss = f(x, w)
    if write is not None:
        write(x, w)
    loss.backward()
    if after is not None:
        after(x, w)
    return x.grad.numpy(), w.grad.numpy()


def _warm(f, n=3):
    for _ in range(n):          # cached calls, speculation turned on where it applies
        _grads(f)


@pytest.mark.parametrize("opts", BACKENDS)
def test_data_write_to_a_recomputed_input_raises(opts):
    f = tg.compile(fn, **opts)
    _warm(f)
    assert f.programs[0].remat_saved, "nothing recomputed from inputs: the test proves nothing"
    with pytest.raises(RuntimeError, match=r"input 1 of the compiled function fn was "
                                           r"modified in place through an alias"):
        _grads(f, write=lambda x, w: w.data.mul_(2))
    np.testing.assert_allclose(_grads(f)[1], _grads(fn)[1], rtol=1e-6)   # the next call works


@pytest.mark.parametrize("opts", BACKENDS)
def test_other_writes_keep_eager_gradients(opts):
    f = tg.compile(fn, **opts)
    _warm(f)
    other = tg.zeros(3)

    def elsewhere(x, w):
        other.add_(1.0)               # an unrelated tensor: counted, not an input's memory
        other.data.mul_(2.0)

    for write in (None, elsewhere):
        for got, want in zip(_grads(f, write), _grads(fn, write)):
            np.testing.assert_allclose(got, want, rtol=1e-6)
    after = lambda x, w: w.data.mul_(2)      # noqa: E731 (after backward: nothing to mix)
    for got, want in zip(_grads(f, after=after), _grads(fn, after=after)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("opts", BACKENDS)
def test_write_through_the_tensor_is_eagers_version_error(opts):
    f = tg.compile(fn, **opts)
    _warm(f)

    def inplace(x, w):
        with tg.no_grad():
            w.mul_(2)

    with pytest.raises(RuntimeError, match="modified by an inplace operation") as e:
        _grads(fn, inplace)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as c:
        _grads(f, inplace)
    assert type(c.value) is type(e.value)


def test_data_write_to_an_input_read_directly_keeps_eager_gradients():
    """Only inputs the recomputation reads are refused: `w` read as itself by the backward
    gives eager's mix of old saved values and new contents."""
    def g(x, w):
        return (x.exp() * w).sum()          # backward reads w itself and exp(x)
    f = tg.compile(g, backend="numpy", memory="min")
    _warm(f)
    write = lambda x, w: w.data.mul_(2)      # noqa: E731
    for got, want in zip(_grads(f, write), _grads(g, write)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
