"""The generated per-path runner (compiler/runner.py, Note [Runner]) does exactly what the
generic `CompiledPath.run` does: same outputs, same input mutations and version bumps, same
backward node (gradients), inference tensors under inference_mode, and the same errors."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad.compiler.path import CompiledPath

RNG = np.random.default_rng(11)
bias = tg.tensor(RNG.standard_normal(3).astype(np.float32))


def _step(w, x, buf):
    loss = ((x @ w).tanh() + bias).pow(2).mean()
    (g,) = tg.autograd.grad(loss, [w])
    with tg.no_grad():
        w -= 0.1 * g
        buf.add_(1)
    return loss.detach(), (x * 2).sum(0)


def _loss(w, x):
    return ((x @ w).sigmoid() * bias).sum(), (x * w.sum()).mean()


def _index(x, i):
    return x[i] * 2


def _args(fn):
    w = tg.tensor(RNG.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    x = tg.tensor(RNG.standard_normal((5, 4)).astype(np.float32))
    if fn is _step:
        return [w, x, tg.zeros(3)]
    if fn is _loss:
        return [w, x]
    return [x, tg.tensor([0, 4, 1])]


def _clone(args):
    return [tg.tensor(a.detach().numpy().copy(), requires_grad=a.requires_grad) for a in args]


def _state(args, outs):
    return ([o.detach().numpy().copy() for o in outs], [a.detach().numpy().copy() for a in args],
            [a._version for a in args])


@pytest.mark.parametrize("fn", [_step, _loss, _index], ids=lambda f: f.__name__)
def test_generated_runner_equals_generic_run(fn):
    c = tg.compile(fn)
    c(*_args(fn))
    path = c.programs[0]
    assert getattr(path.run, "code", "").startswith("def run(args")   # the generated one
    a1 = _args(fn)
    a2 = _clone(a1)
    o1, o2 = path.run(a1), CompiledPath.run(path, a2)
    assert all(o.requires_grad == p.requires_grad for o, p in zip(o1, o2))
    s1, s2 = _state(a1, o1), _state(a2, o2)
    for x, y in zip(s1[0] + s1[1], s2[0] + s2[1]):
        np.testing.assert_array_equal(x, y)
    assert s1[2] == s2[2]
    if fn is _loss:
        for outs, args in ((o1, a1), (o2, a2)):
            (outs[0] + outs[1]).backward()
        np.testing.assert_array_equal(a1[0].grad.numpy(), a2[0].grad.numpy())
    with tg.inference_mode():
        assert all(o.is_inference() for o in path.run(_args(fn)))


def test_generated_runner_raises_the_eager_error():
    c = tg.compile(_index)
    x, i = _args(_index)
    c(x, i)
    bad = tg.tensor([0, 9, 1])
    with pytest.raises(IndexError) as eager:
        _index(x, bad)
    with pytest.raises(IndexError) as compiled:
        c(x, bad)                           # same entry key: the generated runner runs
    assert type(compiled.value) is type(eager.value)
    assert str(compiled.value) == str(eager.value)
    assert c.stats.traces == 1
