"""In-place operations under `tracegrad.compile`: a program whose backward would read a
value overwritten in place runs its forward as eager does, and its backward fails with the
error eager autograd raises there (same type, eager's message; both source lines in a note,
Note [Inplace errors wait for backward]); programs PyTorch accepts compile and give eager's
gradients; overwrites under no_grad defer the error to backward, as in eager mode."""
import inspect

import numpy as np
import pytest

import tracegrad as tg


def _line(fn, k):
    return f"{__file__}:{inspect.getsourcelines(fn)[1] + k}"


# ---- programs eager autograd refuses at backward (m: tracegrad or torch) ----

def exp_then_add(m, x, w):
    y = x.exp()
    y.add_(1)
    return y.sum()


def sigmoid_then_mul(m, x, w):
    y = x.sigmoid()
    y.mul_(2)
    return y.sum()


def tanh_then_setitem(m, x, w):
    y = x.tanh()
    y[0] = 0.0
    return (y * w).sum()


def saved_operand_overwritten(m, x, w):
    a = x * 2
    b = a * w                 # saves a (for w's gradient)
    a.add_(1)
    return b.sum()


def write_through_view(m, x, w):
    y = x.exp()
    v = y[1:]
    v.mul_(2)
    return y.sum()


def two_writes(m, x, w):
    y = x.sigmoid()
    y.add_(1)
    y.mul_(w)
    return y.sum()


BAD = [exp_then_add, sigmoid_then_mul, tanh_then_setitem, saved_operand_overwritten,
       write_through_view, two_writes]
# (line of the op that saved the value, line of the first overwrite), within each function
SITES = {exp_then_add: (1, 2), sigmoid_then_mul: (1, 2), tanh_then_setitem: (1, 2),
         saved_operand_overwritten: (2, 3), write_through_view: (1, 3), two_writes: (1, 2)}


def _inputs(m):
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    w = m.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    return x, w


def _eager_error(fn, m):
    x, w = _inputs(m)
    out = fn(m, x, w)                      # eager: the forward runs ...
    with pytest.raises(RuntimeError) as ei:
        out.backward()                     # ... and backward refuses
    return ei.value


# eager's engine fills w.grad before it meets the error: these run eagerly, with a warning
RUN_EAGERLY = {tanh_then_setitem, two_writes}


def _compiled_error(fn):
    """The error a backward through a compiled call's result raises (the call itself must
    not raise: eager's forward does not); the second call runs the compiled program."""
    cf = tg.compile(lambda x, w: fn(tg, x, w))
    for _ in range(2):
        x, w = _inputs(tg)
        out = cf(x, w)
        ex, ew = _inputs(tg)
        eout = fn(tg, ex, ew)
        np.testing.assert_allclose(out.item(), eout.item(), rtol=1e-6)
        with pytest.raises(RuntimeError) as ei:
            out.backward()
        with pytest.raises(RuntimeError):
            eout.backward()
        for t, e in ((x, ex), (w, ew)):          # what eager filled before raising
            assert (t.grad is None) == (e.grad is None)
            if e.grad is not None:
                np.testing.assert_array_equal(t.grad.numpy(), e.grad.numpy())
    # compiled, or run eagerly with a warning where eager fills a .grad before raising
    assert cf.stats.cache_hits + cf.stats.eager_calls == 1
    return ei.value


@pytest.mark.parametrize("fn", BAD, ids=[f.__name__ for f in BAD])
def test_backward_error_matches_eager_backward_error(fn):
    eager = _eager_error(fn, tg)
    err = _compiled_error(fn)
    assert type(err) is type(eager) and isinstance(err, tg.InplaceError)
    assert str(err) == str(eager)
    saved, written = SITES[fn]
    note = "\n".join(getattr(err, "__notes__", ()))
    if fn in RUN_EAGERLY:                    # eager's error, raised by eager code
        return
    assert "saved for" in note and _line(fn, saved) in note
    assert f"overwritten in place at {_line(fn, written)}" in note


@pytest.mark.parametrize("fn", BAD, ids=[f.__name__ for f in BAD])
def test_backward_error_message_starts_like_pytorch(fn):
    torch = pytest.importorskip("torch")
    theirs = _eager_error(fn, torch)
    # the same sentence up to PyTorch's hint, node name included ("output 0 of Exp")
    ours, theirs = str(_compiled_error(fn)), str(theirs)
    assert ours.startswith(theirs.split(" Hint")[0])


def test_cache_usable_after_backward_error():
    cf = tg.compile(lambda x, w: exp_then_add(tg, x, w))
    for _ in range(2):
        out = cf(*_inputs(tg))
        with pytest.raises(tg.InplaceError):
            out.backward()
    x, w = tg.ones(3), tg.ones(3)              # nothing requires grad: nothing is saved
    for _ in range(3):
        assert cf(x, w).item() == pytest.approx(3 * (np.e + 1), rel=1e-6)
    assert cf.stats.cache_hits == 3
    with tg.no_grad():
        assert cf(*_inputs(tg)).requires_grad is False


# ---- programs PyTorch accepts ----

def snapshot_only(m, x, w):
    y = x * 2
    y.mul_(w)                 # mul_ saves the old y (a snapshot) and w: nothing stale
    return y.sum()


def unsaved_value(m, x, w):
    y = x + 1                 # add saves nothing
    y.mul_(3)
    z = x.sin()               # sin saves its input, not its output
    z.add_(w)
    return (y * z).sum()


def clone_before_write(m, x, w):
    y = x.exp()
    y2 = y.clone()
    y2.add_(1)
    return (y * y2).sum()


def inplace_chain_on_views(m, x, w):
    y = x * w
    y[0].mul_(2)
    y[1:].exp_()              # exp_ saves its own output: fine
    return (y * y).sum()


def relu_inplace_after_linear(m, x, w):
    h = (x * w + 1).relu_()
    return (h * x).sum()


def no_grad_write_not_needed(m, x, w):
    y = x * 3                 # mul saves x and 3, not y
    with m.no_grad():
        y.add_(1)
    return (y * w).sum()


GOOD = [snapshot_only, unsaved_value, clone_before_write, inplace_chain_on_views,
        relu_inplace_after_linear, no_grad_write_not_needed]


def _grads(fn, m, x0, w0):
    x = m.tensor(x0, requires_grad=True)
    w = m.tensor(w0, requires_grad=True)
    out = fn(x, w)
    out.backward()
    return out.item(), x.grad.numpy(), (w.grad.numpy() if w.grad is not None else 0.0)


@pytest.mark.parametrize("fn", GOOD, ids=[f.__name__ for f in GOOD])
def test_accepted_programs_compile_with_eager_gradients(fn):
    cf = tg.compile(lambda x, w: fn(tg, x, w))
    rng = np.random.default_rng(4)
    for _ in range(3):
        x0, w0 = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(
            np.float32)
        e = _grads(lambda x, w: fn(tg, x, w), tg, x0, w0)
        c = _grads(cf, tg, x0, w0)
        np.testing.assert_allclose(c[0], e[0], rtol=1e-6)
        np.testing.assert_allclose(c[1], e[1], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(c[2], e[2], rtol=1e-6, atol=1e-7)
    assert cf.stats.cache_hits == 2


@pytest.mark.parametrize("fn", GOOD, ids=[f.__name__ for f in GOOD])
def test_accepted_programs_match_torch(fn):
    torch = pytest.importorskip("torch")
    cf = tg.compile(lambda x, w: fn(tg, x, w))
    rng = np.random.default_rng(5)
    x0, w0 = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(
        np.float32)
    for _ in range(2):
        ours = _grads(cf, tg, x0, w0)
    theirs = _grads(lambda x, w: fn(torch, x, w), torch, x0, w0)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# ---- overwrites under no_grad: the error waits for backward, as in eager ----

def no_grad_overwrite_of_saved(m, x, w):
    y = x.exp()
    loss = (y * w).sum()      # mul saved y
    with m.no_grad():
        y.mul_(0.5)
    return loss, y


def test_no_grad_overwrite_defers_error_to_backward():
    cf = tg.compile(lambda x, w: no_grad_overwrite_of_saved(tg, x, w))
    for k in range(3):
        x, w = _inputs(tg)
        loss, y = cf(x, w)
        ex, ew = _inputs(tg)
        eloss, ey = no_grad_overwrite_of_saved(tg, ex, ew)
        np.testing.assert_allclose(loss.item(), eloss.item(), rtol=1e-6)
        np.testing.assert_allclose(y.detach().numpy(), ey.detach().numpy(), rtol=1e-6)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as ei:
            eloss.backward()
        with pytest.raises(type(ei.value), match="modified by an inplace operation"):
            loss.backward()
    assert cf.stats.cache_hits == 2
