"""`detach_()` on an argument before the function reads it (d2l's RNN training:
`for s in state: s.detach_()` on the state the last call returned) is replayed before
the program (Note [detach_ of an argument] in compiler/trace_plan.py): the call compiles,
the caller's tensor ends detached, and backward stops there, as eagerly. After a read, or
on a tensor that is not an argument, it still runs eagerly with a warning."""
import pytest

import tracegrad as tg
from _differential import Arr, compare, run


def _carried(comp, branch=False):
    cell = tg.nn.RNNCell(3, 4)
    opt = tg.optim.SGD(cell.parameters(), lr=0.1)
    box = {"state": None}

    def step(x, state):
        if state is None:
            state = (tg.zeros(2, 4),)
        else:
            for s in state:
                s.detach_()
        h = cell(x, state[0])
        if branch and h.sum() > 0:       # a guard that fails now and then
            h = h * 2
        loss = h.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, (h,)
    return comp(step), {"cell": cell, "opt": opt, "box": box}


def _calls(step, objs, i):
    box = objs["box"]
    loss, box["state"] = step(tg.randn(2, 3), box["state"])
    h = box["state"][0]
    return loss, h, h.requires_grad, h.grad_fn is None


@pytest.mark.parametrize("branch", [False, True])
def test_detach_of_the_carried_state_compiles(branch):
    stats = compare(lambda comp: _carried(comp, branch=branch), _calls, n=6)
    assert stats.eager_calls == 0 and stats.cache_hits >= 2, str(stats)


def test_detach_of_the_carried_state_compiles_on_jax():
    pytest.importorskip("jax")
    eager, _ = run(_carried, _calls, 4, False, "jax")
    compiled, stats = run(_carried, _calls, 4, True, "jax")
    assert not [m for c in compiled for m in c[3]]
    Arr.tol = 1e-5                       # JAX's float32 rounding
    try:
        assert [c[:3] for c in compiled] == [e[:3] for e in eager]
    finally:
        Arr.tol = 0.0
    assert stats.eager_calls == 0 and stats.cache_hits >= 1, str(stats)


def test_the_argument_is_detached_and_backward_stops_there():
    w = tg.ones(3, requires_grad=True)

    @tg.compile
    def f(s):
        s.detach_()
        return (s * w).sum()
    for _ in range(3):
        s = w * 2                        # a non-leaf argument with a graph to w
        out = f(s)
        assert s.grad_fn is None and not s.requires_grad and s.is_leaf
        w.grad = None
        out.backward()
        assert w.grad.tolist() == [2.0, 2.0, 2.0]    # through `* w` only, not through s
    assert f.stats.eager_calls == 0 and f.stats.cache_hits == 2
    assert "detach_() before the program" in f.explain()


def test_detach_after_a_read_stays_eager():
    def make(comp):
        w = tg.nn.Parameter(tg.ones(3))

        def f(s):
            y = s * 3                    # read before the detach_: y keeps s's graph
            s.detach_()
            return (y + s * w).sum()
        return comp(f), {"w": w}

    def calls(f, objs, i):
        w = objs["w"]
        out = f(w * 2)
        w.grad = None
        out.backward()
        return out, w.grad
    stats = compare(make, calls, n=4, loud="must")
    assert stats.eager_calls > 0
