"""The check of the last entry's key (Note [Checking the last key] in compiler/keys.py): a
call like the last one skips keying and lookup, and every change the entry key covers,
made after calls that took that shortcut, still keys the call anew, as eager would run it.
"""
import numpy as np
import pytest

import tracegrad as tg

RNG = np.random.default_rng(5)


def _x(*shape, dtype=np.float32, **kw):
    return tg.tensor(RNG.standard_normal(shape).astype(dtype), **kw)


W = _x(3, 3)


def _f(x, y):
    s = (x.tanh() * W[0]).sum() + y.sum()
    y.add_(1)                    # which arguments share memory matters: x may change here
    s = s + (x.tanh() * W[0]).sum()
    return s, x.reshape(2, -1).sum(0), x.dtype, x.requires_grad


CHANGES = {
    "shape": lambda x, y: (_x(6, 3), _x(6, 3)),
    "dtype": lambda x, y: (x.double(), y.double()),
    "requires_grad": lambda x, y: (x.detach().requires_grad_(), y),
    "non-leaf": lambda x, y: (x.detach().requires_grad_() * 1, y),
    "layout": lambda x, y: (_x(3, 4).t(), y),
    "a Parameter": lambda x, y: (tg.nn.Parameter(x.detach().clone()), y),
    "same tensor twice": lambda x, y: (y, y),
    "views of one storage": lambda x, y: (lambda z: (z[:, :3], z[:, 1:4]))(_x(4, 5)),
}


def _calls(change, seed):
    """The argument tuples of one run: three like the first, then the changed ones."""
    global RNG
    RNG = np.random.default_rng(seed)
    base = [(_x(4, 3), _x(4, 3)) for _ in range(3)]
    x, y = _x(4, 3), _x(4, 3)
    changed = [CHANGES[change](x, y)]
    return base + changed + [CHANGES[change](_x(4, 3), _x(4, 3))] + [(_x(4, 3), _x(4, 3))]


@pytest.mark.parametrize("change", list(CHANGES))
def test_each_key_change_after_shortcut_calls_is_seen(change):
    c = tg.compile(_f)
    got = [c(*args) for args in _calls(change, 1)]
    want = [_f(*args) for args in _calls(change, 1)]
    for (a, a2, da, ra), (b, b2, db, rb) in zip(got, want):
        assert (da, ra) == (db, rb)
        assert a.dtype == b.dtype and a.requires_grad == b.requires_grad
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        np.testing.assert_array_equal(a2.detach().numpy(), b2.detach().numpy())


def test_grad_and_inference_mode_and_default_dtype_after_shortcut_calls():
    x, y = _x(4, 3), _x(4, 3)
    c = tg.compile(lambda x, y: (x * y * 2.5).sum())
    w = _x(4, 3, requires_grad=True)
    for _ in range(3):
        assert c(w, y).requires_grad
    with tg.no_grad():
        assert not c(w, y).requires_grad
    assert c(w, y).requires_grad
    with tg.inference_mode():
        assert c(w, y).is_inference()
    assert not c(w, y).is_inference()
    try:
        tg.set_default_dtype(tg.float64)
        # the constant 2.5 is made in the default dtype eagerly: the key holds it
        assert c(x, y).dtype == (lambda x, y: (x * y * 2.5).sum())(x, y).dtype
    finally:
        tg.set_default_dtype(tg.float32)
    assert c.stats.traces == 4


def test_a_compiled_method_checks_its_self_on_the_shortcut():
    class Scaler:
        def __init__(self, k):
            self.k = k

        @tg.compile
        def apply(self, x):
            return (x * self.k).sum()

    a, b = Scaler(2.0), Scaler(3.0)
    x = _x(4)
    outs = [a.apply(x), a.apply(x), b.apply(x), b.apply(x), a.apply(x)]
    want = [(x * s.k).sum() for s in (a, a, b, b, a)]
    for o, w in zip(outs, want):
        np.testing.assert_array_equal(o.numpy(), w.numpy())


def test_a_module_argument_keys_its_training_flags_not_the_shortcut():
    lin = tg.nn.Sequential(tg.nn.Linear(3, 3), tg.nn.Dropout(0.5))

    def f(m, x):
        return m(x).sum()
    c = tg.compile(f)
    x = _x(4, 3)
    lin.eval()
    outs = [c(lin, x), c(lin, x)]
    lin.train()
    tg.manual_seed(0)
    got = c(lin, x)
    tg.manual_seed(0)
    want = f(lin, x)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    lin.eval()
    np.testing.assert_array_equal(c(lin, x).detach().numpy(), outs[0].detach().numpy())


def test_a_non_leaf_argument_after_shortcut_calls_with_leaves():
    def f(x):
        return (x * 2).sum(), x.is_leaf

    c = tg.compile(f)
    leaves = [_x(3, requires_grad=True) for _ in range(3)]
    for x in leaves:
        assert c(x)[1] is True
    x = _x(3, requires_grad=True)
    out, leaf = c(x * 1)
    assert leaf is False
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 2, np.float32))
