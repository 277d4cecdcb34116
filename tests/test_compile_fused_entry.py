"""The fused cache hit (compiler/fused_entry.py, Note [Fused entry]): the entry's key check
and its only path's runner in one generated function. Each way it can stop fitting (the
key, the path's checks, a guard in the program, a runner that is not generated) must send
the call where the separate calls would, and every result must be eager's. Also the
pieces made cheaper with it: outputs made inline (Note [Outputs made inline] in
runner.py), the state checker inlined into the runner, and 0-d constants made once
(Note [Memoized scalars] in codegen.py)."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad._tensor import Tensor
from tracegrad.compiler.path import CompiledPath
from training import sgd_step

RNG = np.random.default_rng(5)
X = tg.tensor(RNG.standard_normal((5, 4)).astype(np.float32))
Y = tg.tensor([0, 2, 1, 1, 0])


def _snapshot(model, opt):
    return ([p.detach().numpy().copy() for p in model.parameters()],
            [None if p.grad is None else p.grad.numpy().copy() for p in model.parameters()],
            [s["momentum_buffer"].numpy().copy() for s in opt.state.values()])


def _same(a, b):
    for u, v in zip(a, b):
        for s, t in zip(u, v):
            assert (s is None) == (t is None)
            if s is not None:
                np.testing.assert_array_equal(s, t)


def _run(changes, compiled):
    """Losses and final state of 8 steps, `changes[k]()` run before step k."""
    model, opt, step = sgd_step()
    fn = tg.compile(step) if compiled else step
    losses = []
    for k in range(8):
        if k in changes:
            changes[k](model, opt)
        losses.append(fn(X, Y).item())
    return fn, losses, _snapshot(model, opt)


def test_the_training_step_takes_the_fused_hit_and_equals_eager():
    c, losses, state = _run({}, True)
    entry = c._hit
    assert entry.fast is not None and entry.fast.code.startswith("def fast(args):")
    # (the first call finds the .grads None, the second set: two traces, one path kept)
    assert c.stats.traces <= 2 and c.stats.cache_hits == 8 - c.stats.traces
    _, eager, eager_state = _run({}, False)
    assert losses == eager
    _same(state, eager_state)


def _lr(model, opt):
    opt.param_groups[0]["lr"] = 0.05         # a runtime number: no re-trace


def _nesterov(model, opt):
    opt.param_groups[0]["nesterov"] = True   # guarded Python state: the path's check fails


def _grads_cleared(model, opt):
    for p in model.parameters():             # a .grad the path found set is None now
        p.grad = None


def _eval(model, opt):
    model.eval()                             # a module flag read through the closure


def _data(model, opt):
    w = next(iter(model.parameters()))       # another array, same shape (kept array missed)
    w.data = w.detach().clone() * 0.5


_HOOKS = {}


def _hook(model, opt):
    w = next(iter(model.parameters()))       # a gradient hook appears, then is removed
    handle = _HOOKS.pop(id(model), None)
    if handle is None:
        _HOOKS[id(model)] = w.register_hook(lambda g: g * 3)
    else:
        handle.remove()                      # (an empty hook list: the path fits again)


@pytest.mark.parametrize("change", [_lr, _nesterov, _grads_cleared, _eval, _data, _hook],
                         ids=lambda f: f.__name__)
def test_a_change_between_fused_hits_is_seen(change):
    c, losses, state = _run({3: change, 5: change}, True)
    _, eager, eager_state = _run({3: change, 5: change}, False)
    np.testing.assert_allclose(losses, eager, rtol=1e-6)
    _same(state, eager_state)
    if change is _lr:
        assert c.stats.traces <= 2 and len(c.programs) == 1


def test_a_key_miss_on_the_fused_hit_keys_the_call_and_comes_back():
    model, opt, step = sgd_step()
    e_model, e_opt, e_step = sgd_step()
    c = tg.compile(step)
    x6 = tg.tensor(RNG.standard_normal((6, 4)).astype(np.float32))
    y6 = tg.tensor([0, 1, 2, 0, 1, 2])
    for x, y in [(X, Y), (X, Y), (X, Y), (x6, y6), (X, Y), (x6, y6), (X, Y)]:
        assert c(x, y).item() == e_step(x, y).item()
    assert len(c.programs) == 2
    _same(_snapshot(model, opt), _snapshot(e_model, e_opt))


def test_a_runner_that_is_not_generated_is_not_fused():
    model, opt, step = sgd_step()
    c = tg.compile(step)
    c(X, Y), c(X, Y)
    for p in c.programs:
        p.call = CompiledPath.call.__get__(p)    # the generic resolve + run
    c(X, Y)
    assert c._hit is not None and c._hit.fast is None
    _, e_opt, e_step = sgd_step()
    e_step(X, Y), e_step(X, Y), e_step(X, Y)
    assert c(X, Y).item() == e_step(X, Y).item()


def _branchy(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def test_a_guard_failing_in_the_fused_hit_takes_another_path_and_drops_the_fusion():
    c = tg.compile(_branchy)
    pos, neg = tg.tensor([1.0, 2.0]), tg.tensor([-1.0, -2.0])
    c(pos), c(pos)
    assert c._hit.fast is not None
    np.testing.assert_array_equal(c(neg).numpy(), [-2.0, -3.0])
    assert c._hit is None or c._hit.fast is None          # two paths: no fused hit
    for x in (pos, neg, pos):
        np.testing.assert_array_equal(c(x).numpy(), _branchy(x).numpy())


def test_outputs_made_inline_have_the_slots_wrap_gives():
    def f(x):
        y = x * 2
        y.add_(1)                            # returned at version 1
        with tg.inference_mode():
            z = x + 1
        return y, z, x.sum()
    c = tg.compile(f)
    x = tg.tensor([1.0, 2.0])
    c(x)
    outs = c(x)
    assert "t = _new(_T)" in c.programs[0].call.code
    ref = Tensor._wrap(np.zeros(2, np.float32))
    eager = f(x)
    for o, e in zip(outs, eager):
        for name in ("_rg", "_grad_fn", "_base", "_output_nr"):
            assert getattr(o, name) == getattr(ref, name)
        assert o._inference == e._inference and o._version == e._version
        assert type(o) is Tensor and o._vc is not ref._vc
    assert outs[1]._inference and outs[0]._version == 1


def test_a_constant_made_once_is_never_handed_out_or_written():
    def f(x):
        c = tg.tensor(3.0)
        return (x * c).sum(), c
    c = tg.compile(f)
    x = tg.tensor([1.0, 2.0])
    c(x)                                     # (the trace: eager's own tensors)
    first = c(x)
    first[1].add_(1)                         # the caller's copy: the next call is fresh
    for _ in range(3):
        s, k = c(x)
        assert s.item() == 9.0 and k.item() == 3.0 and k is not first[1]


def test_backward_seeded_by_a_kept_constant_matches_eager():
    def f(w, x):
        loss = tg.nn.functional.cross_entropy(x @ w, Y)
        loss.backward()
        return loss
    w = tg.tensor(RNG.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    we = tg.tensor(w.detach().numpy().copy(), requires_grad=True)
    c = tg.compile(f)
    for _ in range(3):
        w.grad = None
        we.grad = None
        np.testing.assert_array_equal(c(w, X).detach().numpy(), f(we, X).detach().numpy())
        np.testing.assert_array_equal(w.grad.numpy(), we.grad.numpy())
    assert "_memo" in c.programs[0].forward_program.code


SIGN = [0.0]


def _signed(x):
    return x * SIGN[0]


def test_a_guarded_zero_changing_sign_is_seen_by_the_inlined_state_check():
    c = tg.compile(_signed)
    x = tg.tensor([1.0, 2.0])
    try:
        c(x), c(x)
        SIGN[0] = -0.0
        out = c(x).numpy()
        assert np.signbit(out).all()
    finally:
        SIGN[0] = 0.0
    assert not np.signbit(c(x).numpy()).any()


def _rowsum(x, w):
    return (x @ w).sum(1) + x.sum(1)


def test_the_fused_key_check_keeps_the_layout_bit():
    """Unusual strides may still be C-contiguous (a dimension of size 1): the same entry;
    a transposed view is not: keyed anew. (Each argument's owner id, computed once by
    the key check, is reused by the fused runner.)"""
    c = tg.compile(_rowsum)
    w = tg.tensor(RNG.standard_normal((5, 3)).astype(np.float32))
    big = tg.tensor(RNG.standard_normal((4, 5)).astype(np.float32))
    sq = tg.tensor(RNG.standard_normal((4, 4)).astype(np.float32))
    x = tg.tensor(RNG.standard_normal((1, 5)).astype(np.float32))
    odd = big[::2][:1]                       # (1, 5), strides (40, 4): C-contiguous too
    assert odd._data.strides != x._data.strides and odd._data.flags.c_contiguous
    for arg in (x, x, odd, x, odd):
        np.testing.assert_array_equal(c(arg, w).numpy(), _rowsum(arg, w).numpy())
    assert len(c.programs) == 1
    w4 = tg.tensor(RNG.standard_normal((4, 3)).astype(np.float32))
    for arg in (sq, sq, sq.t(), sq, sq.t()):   # a transposed view: another layout
        np.testing.assert_array_equal(c(arg, w4).numpy(), _rowsum(arg, w4).numpy())
    assert len(c.programs) == 3


def test_a_consumed_node_made_fast_has_every_slot_of_one_made_normally():
    from tracegrad.compiler.backward_node import ConsumedBackward, consumed_node
    t = tg.tensor([1.0], requires_grad=True)
    a = ConsumedBackward(None, None, (), (), (), ())
    a.eager_name, a.released = "NllLossBackward0", True
    a.leaves = [t]
    b = consumed_node("NllLossBackward0", [t])
    slots = {s for cls in type(a).__mro__ for s in getattr(cls, "__slots__", ())
             if s not in ("__weakref__", "__dict__", "edges")}
    for s in sorted(slots):
        if s == "seq":
            assert b.seq > a.seq             # (the next sequence number)
            continue
        assert getattr(b, s) == getattr(a, s), s
    assert b.name() == a.name() and b.next_functions == a.next_functions
    with pytest.raises(RuntimeError, match="second time"):
        b.apply((None,))
