"""How many times user Python runs, and in which order, compiled as eagerly: a custom
Function's `forward` once per call however many attempts the call takes (Note [Forwards
run once per call] in tracing/forward_memo.py), gradient hooks in eager's order."""
import warnings

import numpy as np
import pytest

import tracegrad as tg

BACKENDS = [None, "numpy"]          # None: eager, the reference (JAX: test_backend_jax_adversarial2)


def _run(fn, backend):
    return fn if backend is None else tg.compile(fn, backend=backend)


class Logged(tg.autograd.Function):
    calls = []

    @staticmethod
    def forward(ctx, x):
        Logged.calls.append(x.sum().item())
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 2 + x * 0


def _fails_after(x, idx):
    y = Logged.apply(x)
    return y[idx].sum()                      # IndexError on some calls, after the forward


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_runs_once_when_a_later_op_fails_and_the_call_reruns(backend):
    f = _run(_fails_after, backend)
    x = tg.ones(3, requires_grad=True)
    f(x, tg.tensor([0, 1])).backward()
    f(x, tg.tensor([0, 2])).backward()
    Logged.calls.clear()
    with pytest.raises(IndexError, match="out of bounds"):
        f(x, tg.tensor([0, 7]))
    assert len(Logged.calls) == 1            # it ran 2 (numpy) or 3 (JAX) times
    assert x.grad.tolist() == [4.0, 2.0, 2.0]


def _guard_after(x):
    y = Logged.apply(x)
    if y.sum() > 0:                          # decided by the forward's result
        return y.sum()
    return -(y * 3).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_runs_once_when_a_guard_after_it_fails(backend):
    f = _run(_guard_after, backend)
    got = []
    Logged.calls.clear()
    for v in (1., 1., -1., -1., 1., -1.):    # re-trace, then the other cached path
        x = tg.full((2,), v, requires_grad=True)
        y = f(x)
        y.backward()
        got.append((y.item(), x.grad.tolist()))
    assert Logged.calls == [2., 2., -2., -2., 2., -2.]
    assert got == [(4., [2., 2.])] * 2 + [(12., [-6., -6.])] * 2 + [(4., [2., 2.])] + \
        [(12., [-6., -6.])]


def _saves_own():
    class SavesOwn(tg.autograd.Function):
        """Saves an intermediate and a plain attribute: the ctx has no template."""
        calls = []

        @staticmethod
        def forward(ctx, x, k):
            SavesOwn.calls.append(k)
            e = x.exp()
            ctx.save_for_backward(e)
            ctx.k = k
            return e * k

        @staticmethod
        def backward(ctx, g):
            e, = ctx.saved_tensors
            return g * e * ctx.k, None
    return SavesOwn


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_saving_an_intermediate_runs_once_per_call_and_per_compiled_path(backend):
    # per call as eagerly; compiling the backward runs it once more to record how the saved
    # tensor is computed (Note [Opaque Functions]): warned once per class
    SavesOwn = _saves_own()

    def own_then_guard(x, k):
        y = SavesOwn.apply(x, k)
        if y.sum() > 1:
            return y.sum()
        return y.sum() * 10
    f = _run(own_then_guard, backend)
    vals = (1., 1., -5., -5., 1.)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        grads = []
        for v in vals:
            x = tg.full((2,), v, requires_grad=True)
            f(x, 2.0).backward()
            grads.append(x.grad.numpy())
    msgs = [str(m.message) for m in w if "forward saves for backward" in str(m.message)]
    assert len(SavesOwn.calls) == 5 + (backend is not None) * 2     # two paths
    assert len(msgs) == (backend is not None)
    for v, g in zip(vals, grads):
        want = 2 * np.exp(np.float32(v)) * (1 if v > 0 else 10)
        np.testing.assert_allclose(g, [want] * 2, rtol=1e-6)


class Raises(tg.autograd.Function):
    calls = []

    @staticmethod
    def forward(ctx, x):
        Raises.calls.append(1)
        if (x < 0).any():
            raise ValueError("negative input")
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _raising(x):
    return Raises.apply(x).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_that_raises_runs_once(backend):
    f = _run(_raising, backend)
    f(tg.ones(2, requires_grad=True))
    f(tg.ones(2, requires_grad=True))
    Raises.calls.clear()
    with pytest.raises(ValueError, match="negative input"):
        f(tg.full((2,), -1., requires_grad=True))
    assert Raises.calls == [1]


class KeepsList(tg.autograd.Function):
    """Keeps tensors inside a list and a dict on ctx."""
    calls = []

    @staticmethod
    def forward(ctx, x):
        KeepsList.calls.append(1)
        ctx.keep = [x, {"e": x.exp()}]
        return x * 2

    @staticmethod
    def backward(ctx, g):
        x, d = ctx.keep
        return g * d["e"] + x * 0


class KeepsObject(tg.autograd.Function):
    """Keeps an object holding a tensor on ctx: it could hold a compiled program's buffer,
    so its ctx is not given back and forward runs again (Note [Forwards run once per call]
    leaves this case, with a warning)."""
    calls = []

    @staticmethod
    def forward(ctx, x):
        import types
        KeepsObject.calls.append(1)
        ctx.keep = types.SimpleNamespace(e=x.exp())
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * ctx.keep.e


def _keeps(cls):
    def fn(x):
        y = cls.apply(x)
        if y.sum() > 0:
            return y.sum()
        return -y.sum()
    return fn


@pytest.mark.filterwarnings("ignore:tracegrad.compile. KeepsList.forward saves")
def test_forward_keeping_tensors_in_lists_on_ctx_runs_once_per_call():
    f = tg.compile(_keeps(KeepsList))
    f(tg.ones(2, requires_grad=True))
    KeepsList.calls.clear()
    x = tg.full((2,), -1., requires_grad=True)
    f(x).backward()                          # a guard fails after it: a re-trace
    assert KeepsList.calls == [1, 1]         # the call, compiling its backward
    np.testing.assert_allclose(x.grad.numpy(), [-np.exp(-1)] * 2, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:tracegrad.compile. KeepsObject.forward saves")
def test_forward_keeping_an_object_on_ctx_runs_again_with_a_warning():
    f = tg.compile(_keeps(KeepsObject))
    f(tg.ones(2, requires_grad=True))
    KeepsObject.calls.clear()
    x = tg.full((2,), -1., requires_grad=True)
    with pytest.warns(UserWarning, match="KeepsObject.forward runs again for one call"):
        f(x).backward()
    assert KeepsObject.calls == [1, 1, 1]    # the program, the re-trace, its backward
    np.testing.assert_allclose(x.grad.numpy(), [-np.exp(-1)] * 2, rtol=1e-6)


def test_no_memo_outside_a_failing_call():
    # two equal forwards in one program each run; later eager calls are never served
    def twice(x):
        return Logged.apply(x).sum() + Logged.apply(x).sum()
    f = tg.compile(twice)
    Logged.calls.clear()
    for _ in range(3):
        f(tg.ones(2, requires_grad=True)).backward()
    Logged.apply(tg.ones(2, requires_grad=True))
    assert len(Logged.calls) == 7
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(tg.ones(2, requires_grad=True))


class PerCallScale(tg.autograd.Function):
    """Sets a ctx attribute from the data: the compiled backward, recorded from the traced
    call's ctx, would use the traced call's number (Note [Per-call ctx attributes])."""
    calls = []

    @staticmethod
    def forward(ctx, x):
        PerCallScale.calls.append(1)
        ctx.s = float(x.abs().max())
        return x / ctx.s

    @staticmethod
    def backward(ctx, g):
        return g / ctx.s


def _per_call_scale(x):
    return PerCallScale.apply(x).sum()


@pytest.mark.filterwarnings("ignore:tracegrad.compile. PerCallScale.forward left other")
@pytest.mark.parametrize("backend", BACKENDS)
def test_per_call_ctx_attribute_is_never_the_traced_one(backend):
    # compiled gave [0.5, 0.5] on every call: the traced call's 1 / ctx.s
    f = _run(_per_call_scale, backend)
    PerCallScale.calls.clear()
    for v in ([1., 2.], [1., 4.], [1., 8.], [1., 8.]):
        x = tg.tensor(v, requires_grad=True)
        loss = f(x)
        loss.backward()
        assert loss.item() == 1 + 1 / v[1]
        assert x.grad.tolist() == [1 / v[1]] * 2
    assert len(PerCallScale.calls) == 4


# -- gradient hooks on several leaves fire in PyTorch's order (Note [Leaf accumulation
# order] in autograd/engine.py); eager once ordered leaves by id(), and a compiled call's one
# backward node by its input order

def _three(a, b, c):
    return (a * 2 + b * 3 + c).sum()         # PyTorch: c, b, a


def _pairs(a, b, c):
    return (c * b).sum() + (a * 2).sum()     # a, c, b


def _late_leaf(a, b, c):
    return (b.exp() * a.sin()).sum() + c.sum()   # c, a, b


def _cat(a, b, c, d):
    return tg.cat([a, b, c, d]).sum()        # a, c, b, d: PyTorch's heap order of equals


def _hook_order(fn, n, calls=1, lib=tg):
    leaves = [lib.ones(2, requires_grad=True) for _ in range(n)]
    log = []
    for name, t in zip("abcd", leaves):
        t.register_hook(lambda g, name=name: log.append(name))
    for _ in range(calls):
        log.clear()
        fn(*leaves).backward()
    return "".join(log)


@pytest.mark.parametrize("fn, n, want", [(_three, 3, "cba"), (_pairs, 3, "acb"),
                                         (_late_leaf, 3, "cab"), (_cat, 4, "acbd")])
@pytest.mark.parametrize("backend", BACKENDS)
def test_hooks_on_several_leaves_fire_in_pytorchs_order(fn, n, want, backend):
    f = _run(fn, backend)
    assert _hook_order(f, n, calls=3) == want


@pytest.mark.parametrize("fn, n", [(_three, 3), (_pairs, 3), (_late_leaf, 3)])
def test_hook_orders_are_pytorchs(fn, n):
    torch = pytest.importorskip("torch")
    import types
    lib = types.SimpleNamespace(ones=torch.ones)
    got = _hook_order(fn, n, lib=lib)
    assert got == _hook_order(fn, n)


def test_leaves_made_ready_together_follow_pytorchs_heap():
    from tracegrad.autograd.engine import tie_order
    # torch.cat of k leaves: the order PyTorch 2.x's ready queue runs their hooks
    assert [tie_order(k) for k in range(1, 9)] == [
        [0], [0, 1], [0, 1, 2], [0, 2, 1, 3], [0, 2, 4, 1, 3], [0, 2, 5, 4, 1, 3],
        [0, 2, 5, 6, 4, 1, 3], [0, 2, 6, 5, 7, 4, 1, 3]]
