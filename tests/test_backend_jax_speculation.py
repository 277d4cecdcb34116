"""Speculative backward on the JAX backend (Note [Speculative backward] in
compiler/speculation.py): a compiled scalar loss whose last call was followed by a default
`backward()` runs forward and backward as one XLA program and stashes the gradients on its
node. Everything a user sees must stay eager's: values and gradients (against eager and the
numpy backend), hooks on the loss, `gradient=` other than one, `retain_graph` and a second
backward, `create_graph` (double backward), `autograd.grad` subsets and `inputs=`, in-place
changes between forward and backward, accumulation into `.grad`, and an evaluation loop
(no backward) that stops speculating.
"""
import gc
import weakref

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg  # noqa: E402


def loss_fn(x, w):
    h = (x * w).sin()
    h = (h * 1.5 + w).tanh().exp()
    return (h * x).sum()


X0 = np.linspace(-1, 1, 5).astype(np.float32)
W0 = np.linspace(0.2, 0.7, 5).astype(np.float32)


def _leaves(dtype=np.float32):
    return (tg.tensor(X0.astype(dtype), requires_grad=True),
            tg.tensor(W0.astype(dtype), requires_grad=True))


def _path(comp):
    (entry,) = [e for e in comp.entries.values() if e.paths]
    (path,) = entry.paths
    return path


def _warm(comp, n=3):
    """Calls followed by a default backward: the next call speculates."""
    x, w = _leaves()
    for _ in range(n):
        comp(x, w).backward()
    spec = _path(comp).speculation
    assert spec is not None and spec.on and spec.program is not None
    return spec


def _spec_comp():
    comp = tg.compile(loss_fn, backend="jax")
    _warm(comp)
    return comp


def _eager(fn, dtype=np.float32):
    x, w = _leaves(dtype)
    return x, w, fn(x, w)


def _close(a, b, rtol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_training_loop_equals_eager_and_numpy_backend_and_speculates(dtype):
    comps = {b: tg.compile(loss_fn, backend=b) for b in ("numpy", "jax")}
    leaves = {k: _leaves(dtype) for k in ("eager", "numpy", "jax")}
    used = 0
    for it in range(5):
        outs = {}
        for k, (x, w) in leaves.items():
            fn = loss_fn if k == "eager" else comps[k]
            loss = fn(x, w)
            if k == "jax" and it >= 2:       # the third call on speculates
                assert loss.grad_fn.stash is not None
                used += 1
            loss.backward()                  # .grad accumulates over the iterations
            outs[k] = (loss.item(), x.grad.numpy().copy(), w.grad.numpy().copy())
        for k in ("numpy", "jax"):
            rtol = 1e-5 if dtype == np.float32 else 1e-12
            for a, b in zip(outs[k], outs["eager"]):
                _close(a, b, rtol)
    assert used == 3
    assert leaves["jax"][0].grad.dtype == tg.float64 if dtype == np.float64 else tg.float32


def test_hook_on_loss_changing_the_gradient_runs_the_backward_program():
    comp = _spec_comp()
    res = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        loss = fn(x, w)
        loss.register_hook(lambda g: g * 3)
        loss.backward()
        res.append((x.grad.numpy(), w.grad.numpy()))
    for a, b in zip(*res):
        _close(a, b)
    assert _path(comp).speculation.on is False   # not seeded with one: stop speculating


@pytest.mark.parametrize("seed", [2.0, -1.0, 0.0])
def test_gradient_other_than_one(seed):
    comp = _spec_comp()
    res = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        fn(x, w).backward(tg.tensor(seed))
        res.append((x.grad.numpy(), w.grad.numpy()))
    for a, b in zip(*res):
        _close(a, b)


def test_explicit_gradient_of_one_gives_the_same_gradients():
    comp = _spec_comp()
    res = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        fn(x, w).backward(tg.tensor(1.0))
        res.append((x.grad.numpy(), w.grad.numpy()))
    for a, b in zip(*res):
        _close(a, b)


def test_retain_graph_twice_with_grad_written_in_between():
    """The first backward adopts the stashed arrays as `.grad`; the second must not hand
    the same arrays out again (the user zeroed `.grad` in place in between)."""
    comp = _spec_comp()
    res = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        loss = fn(x, w)
        loss.backward(retain_graph=True)
        first = x.grad.numpy().copy()
        x.grad.zero_()
        w.grad.mul_(2)
        loss.backward()
        res.append((first, x.grad.numpy().copy(), w.grad.numpy().copy()))
    for a, b in zip(*res):
        _close(a, b)


def test_second_backward_without_retain_graph_behaves_as_eager():
    comp = _spec_comp()
    errors = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        loss = fn(x, w)
        loss.backward()
        with pytest.raises(RuntimeError) as e:
            loss.backward()
        errors.append(str(e.value))
    assert "second time" in errors[1] or "freed" in errors[1]


def test_create_graph_double_backward():
    comp = _spec_comp()
    res = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        loss = fn(x, w)
        (gx,) = tg.autograd.grad(loss, [x], create_graph=True)
        assert gx.requires_grad
        (gx * gx).sum().backward()
        res.append((gx.detach().numpy(), x.grad.numpy(), w.grad.numpy()))
    for a, b in zip(*res):
        _close(a, b, 1e-4)


def test_autograd_grad_subset_and_backward_inputs():
    comp = _spec_comp()
    res = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        (gw,) = tg.autograd.grad(fn(x, w), [w])
        assert x.grad is None and w.grad is None
        fn(x, w).backward(inputs=[x])
        assert w.grad is None
        res.append((gw.numpy(), x.grad.numpy()))
    for a, b in zip(*res):
        _close(a, b)


def test_leaf_hooks_and_retain_grad_see_the_same_gradients():
    comp = _spec_comp()
    res = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        seen = []
        x.register_hook(lambda g: seen.append(g.numpy().copy()))
        w.register_hook(lambda g: g * 0.5)
        fn(x, w).backward()
        res.append((seen[0], x.grad.numpy(), w.grad.numpy()))
    for a, b in zip(*res):
        _close(a, b)


def test_inplace_change_of_a_saved_input_between_forward_and_backward_raises():
    comp = _spec_comp()
    msgs = []
    for fn in (loss_fn, comp):
        x, w = _leaves()
        loss = fn(x, w)
        if fn is comp:
            assert loss.grad_fn.stash is not None
        with tg.no_grad():
            x.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as e:
            loss.backward()
        msgs.append(str(e.value))
        assert x.grad is None and w.grad is None


def test_eval_loop_without_backward_stops_speculating():
    comp = _spec_comp()
    spec = _path(comp).speculation
    x, w = _leaves()
    with_no_bwd = [comp(x, w).item() for _ in range(4)]
    assert spec.on is False and spec.box is None
    ref = loss_fn(*_leaves()).item()
    for v in with_no_bwd:
        _close(v, ref)
    loss = comp(x, w)
    assert loss.grad_fn.stash is None        # not speculating any more
    loss.backward()                          # seeded with one: speculate again next call
    assert spec.on is True
    assert comp(x, w).grad_fn.stash is not None


def test_stash_is_freed_with_the_node():
    comp = _spec_comp()
    x, w = _leaves()
    loss = comp(x, w)
    refs = [weakref.ref(a) for a in loss.grad_fn.stash]
    del loss
    gc.collect()
    assert all(r() is None for r in refs)


def test_paths_that_cannot_fuse_do_not_speculate():
    vec = tg.compile(lambda x, w: (x * w).sin(), backend="jax")
    two = tg.compile(lambda x, w: ((x * w).sum(), (x + w).sum()), backend="jax")
    x, w = _leaves()
    vec(x, w).sum().backward()
    a, b = two(x, w)
    (a + b).backward()
    assert _path(vec).speculation is None and _path(two).speculation is None


def test_other_outputs_and_dtypes_beside_the_loss():
    """Outputs besides the loss (an integer count, a tensor not requiring grad) leave the
    speculative program with the gradients (small ones packed per dtype)."""
    def fn(x, w):
        return loss_fn(x, w), x > 0, x.detach() * 2, (w * 3).detach()

    comp = tg.compile(fn, backend="jax")
    x, w = _leaves()
    ex, ew = _leaves()
    for it in range(4):
        got, ref = comp(x, w), fn(ex, ew)
        if it >= 2:
            assert got[0].grad_fn.stash is not None
        got[0].backward()
        ref[0].backward()
        for a, b in zip(got, ref):
            assert a.dtype == b.dtype and a.requires_grad == b.requires_grad
            _close(a.detach().numpy(), b.detach().numpy())
        got[2].add_(1)                       # fresh writable arrays of their own
        _close(x.grad.numpy(), ex.grad.numpy())
        _close(w.grad.numpy(), ew.grad.numpy())


def test_runtime_check_failing_in_the_speculative_program_raises_eagers_error():
    def fn(x, w, n, d):
        return loss_fn(x, w) * (n // d).float().sum()

    comp = tg.compile(fn, backend="jax")
    x, w = _leaves()
    n, d = tg.tensor([4, 6], dtype=tg.int32), tg.tensor([2, 3], dtype=tg.int32)
    for _ in range(3):
        comp(x, w, n, d).backward()
    assert _path(comp).speculation.on
    zero = tg.tensor([1, 0], dtype=tg.int32)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(x, w, n, zero)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        comp(x, w, n, zero)
    loss = comp(x, w, n, d)                  # and the path still serves
    x.grad = w.grad = None
    loss.backward()
    ex, ew = _leaves()
    fn(ex, ew, n, d).backward()
    _close(x.grad.numpy(), ex.grad.numpy())
    assert comp.stats.traces == 1


def test_classifier_loss_whose_backward_has_runtime_checks_speculates():
    """Advanced indexing's backward checks its indices: the speculative program carries
    those checks out and keeps no gradients when one fails (none does here)."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((8, 6)).astype(np.float32)
    ys = rng.integers(0, 3, 8)

    def fn(w, b, x, y):
        return -(x @ w + b).log_softmax(dim=1)[tg.arange(x.shape[0]), y].mean()

    comp = tg.compile(fn, backend="jax")
    w0 = rng.standard_normal((6, 3)).astype(np.float32)
    b0 = np.zeros(3, np.float32)
    mine = [tg.tensor(w0, requires_grad=True), tg.tensor(b0, requires_grad=True)]
    ref = [tg.tensor(w0, requires_grad=True), tg.tensor(b0, requires_grad=True)]
    x, y = tg.tensor(xs), tg.tensor(ys)
    for it in range(4):
        loss = comp(*mine, x, y)
        if it >= 2:
            assert loss.grad_fn.stash is not None
        loss.backward()
        fn(*ref, x, y).backward()
        for a, b in zip(mine, ref):
            _close(a.grad.numpy(), b.grad.numpy())
    assert _path(comp).speculation.program.lowered_backward.n_checks > 0
