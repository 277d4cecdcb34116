"""`loss.backward()` straight from a speculating call's stash (Note [Backward from the
stash] in compiler/stash_backward.py): taken only when every question of the general route
has the answer leading to the stash, and then with the general route's results (gradients,
`.grad` accumulation, leaf hooks, the node released, speculation kept on); every other case
leaves it to the general route, having changed nothing.
"""
import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg  # noqa: E402
import tracegrad._tensor_methods as TM  # noqa: E402
from tracegrad.compiler import stash_backward as SB  # noqa: E402


def loss_fn(x, w):
    h = (x * w).sin()
    return ((h * 1.5 + w).tanh() * x).sum()


X0 = np.linspace(-1, 1, 5).astype(np.float32)
W0 = np.linspace(0.2, 0.7, 5).astype(np.float32)


def _leaves():
    return tg.tensor(X0, requires_grad=True), tg.tensor(W0, requires_grad=True)


def _path(comp):
    (entry,) = [e for e in comp.entries.values() if e.paths]
    (path,) = entry.paths
    return path


@pytest.fixture
def spy(monkeypatch):
    """The answers of `backward_from_stash` in order (True: the short route was taken)."""
    seen = []
    TM.backward(tg.tensor(1.0, requires_grad=True).sum())   # binds the module's globals

    def wrapped(t):
        r = SB.backward_from_stash(t)
        seen.append(r)
        return r
    monkeypatch.setattr(TM, "_from_stash", wrapped)
    return seen


def _speculating(spy):
    comp = tg.compile(loss_fn, backend="jax")
    x, w = _leaves()
    for _ in range(3):
        comp(x, w).backward()
    assert _path(comp).speculation.on
    spy.clear()
    return comp


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_training_loop_takes_the_short_route_and_accumulates_as_eager(spy):
    comp = _speculating(spy)
    x, w = _leaves()
    ex, ew = _leaves()
    for it in range(5):
        if it == 3:                      # .grad kept from before: accumulated into
            x.grad = w.grad = None
            ex.grad = ew.grad = None
        loss, eloss = comp(x, w), loss_fn(ex, ew)
        assert loss.grad_fn.stash is not None
        loss.backward()
        eloss.backward()
        _close(x.grad.numpy(), ex.grad.numpy())
        _close(w.grad.numpy(), ew.grad.numpy())
        assert loss.grad_fn.stash is None and loss.grad_fn.spec_box[0] is True
    assert spy == [True] * 5
    assert _path(comp).speculation.on
    assert x.grad.numpy().flags.writeable and not np.shares_memory(x.grad.numpy(),
                                                                   w.grad.numpy())


def test_second_backward_raises_as_eager(spy):
    comp = _speculating(spy)
    msgs = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        loss = fn(x, w)
        loss.backward()
        with pytest.raises(RuntimeError) as e:
            loss.backward()
        msgs.append(str(e.value).splitlines()[0])
    assert spy[:1] == [True]
    assert "backward through the graph a second time" in msgs[1]


def test_leaf_post_accumulate_hook_and_one_input_without_grad(spy):
    comp = _speculating(spy)
    res = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        w.requires_grad_(False)
        seen = []
        x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
        fn(x, w).backward()
        fn(x, w).backward()
        res.append((seen, x.grad.numpy().copy(), w.grad))
    (s0, g0, n0), (s1, g1, n1) = res
    assert len(s0) == len(s1) == 2 and n0 is None and n1 is None
    for a, b in zip(s0, s1):
        _close(a, b)
    _close(g0, g1)


def _cases():
    """(name, what to do between the call and backward(), backward's keyword arguments)."""
    def write_saved(x, w, loss):
        with tg.no_grad():
            x.add_(1.0)

    def compiled_write(x, w, loss):      # a compiled call's write bumps the version alone
        with tg.no_grad():
            _bump(x)

    def write_data(x, w, loss):
        x.data.mul_(2.0)

    def retain(x, w, loss):
        loss.retain_grad()

    def hook(x, w, loss):
        loss.register_hook(lambda g: g * 3.0)

    def leaf_hook(x, w, loss):
        w.register_hook(lambda g: g * 0.5)

    def nothing(x, w, loss):
        pass
    return [("write_saved", write_saved, {}), ("compiled_write", compiled_write, {}),
            ("write_data", write_data, {}),
            ("retain_grad", retain, {}), ("loss_hook", hook, {}),
            ("leaf_hook", leaf_hook, {}),
            ("retain_graph", nothing, {"retain_graph": True}),
            ("gradient", nothing, {"gradient": tg.tensor(2.0)}),
            ("inputs", nothing, {"inputs": [w_of]}),
            ("anomaly", nothing, "anomaly")]


def _bump_fn(t):
    t.add_(1.0)


_bump = tg.compile(_bump_fn)
w_of = object()          # (stands for the call's own `w` in `inputs=`)


@pytest.mark.parametrize("name,between,kw", _cases(), ids=[c[0] for c in _cases()])
def test_other_cases_take_the_general_route_with_eagers_results(spy, name, between, kw):
    comp = _speculating(spy)
    res = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        loss = fn(x, w)
        between(x, w, loss)
        err = None
        try:
            if kw == "anomaly":
                with pytest.warns(UserWarning) if fn is comp else _nothing():
                    with tg.autograd.detect_anomaly():
                        loss.backward()
            else:
                args = {k: ([w] if v == [w_of] else v) for k, v in kw.items()}
                loss.backward(**args)
        except RuntimeError as e:
            err = str(e).splitlines()[0]
        res.append((err, None if x.grad is None else x.grad.numpy().copy(),
                    None if w.grad is None else w.grad.numpy().copy(),
                    None if name != "retain_grad" else loss.grad.item()))
    assert all(r is False for r in spy), spy
    if name == "write_data":
        # (the general route's gradients after a `.data` write between forward and
        # backward differ from eager's on the JAX backend, on main too: not this route's)
        return
    (e0, x0, w0, l0), (e1, x1, w1, l1) = res
    assert (e0 is None) == (e1 is None), (e0, e1)
    for a, b in ((x0, x1), (w0, w1)):
        assert (a is None) == (b is None)
        if a is not None:
            _close(a, b)
    assert l0 == l1


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_a_loop_with_changes_between_calls_equals_eager(spy):
    """Between calls of a speculating loop: an eager in-place write to an input, a changed
    requires_grad, a backward under no_grad, a retained graph: each call and its gradients
    stay eager's, whichever route the backward takes."""
    comp = _speculating(spy)
    runs = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        got = []
        for it in range(8):
            x.grad = w.grad = None
            if it == 2:
                with tg.no_grad():
                    x.mul_(0.5)              # seen by the next call and its gradients
            if it == 4:
                w.requires_grad_(False)
            if it == 6:
                w.requires_grad_(True)
            loss = fn(x, w)
            if it == 3:
                with tg.no_grad():
                    loss.backward()
            elif it == 5:
                loss.backward(retain_graph=True)
            else:
                loss.backward()
            got.append((loss.item(), x.grad.numpy().copy(),
                        None if w.grad is None else w.grad.numpy().copy()))
        runs.append(got)
    for (l0, x0, w0), (l1, x1, w1) in zip(*runs):
        _close(l0, l1)
        _close(x0, x1)
        assert (w0 is None) == (w1 is None)
        if w0 is not None:
            _close(w0, w1)
    assert True in spy                       # the short route served some of them
