"""A compiled call whose backward would read a value overwritten in place (with grad mode
on) behaves as eager: the call returns eager's values, and the error comes only when a
backward reaches the saving node, with eager's type and message, leaving no `.grad`
(Note [Inplace errors wait for backward] in tracegrad/passes/check_inplace.py).
PyTorch is the oracle where installed."""
import numpy as np
import pytest

import tracegrad as tg


def _model(m, seed=0):
    m.manual_seed(seed)
    net = m.nn.Sequential(m.nn.Linear(4, 4), m.nn.ReLU(inplace=True),
                          m.nn.Dropout(0.5, inplace=True))
    net.train()
    return net


def _x(m):
    return m.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))


def _eager_backward_error(m):
    net = _model(m)
    out = net(_x(m))
    with pytest.raises(RuntimeError) as ei:
        out.sum().backward()
    return ei.value


def test_inplace_relu_dropout_forward_only_runs_like_eager():
    """The reported case: a forward-only call (logging the output) must not raise."""
    net, ref = _model(tg), _model(tg)
    cm = tg.compile(net)
    for k in range(3):
        tg.manual_seed(k)
        out = cm(_x(tg))
        tg.manual_seed(k)
        want = ref(_x(tg))                   # eager, the same dropout draws
        assert out.requires_grad and want.requires_grad
        np.testing.assert_array_equal(out.detach().numpy(), want.detach().numpy())
        assert isinstance(out.sum().item(), float)


def test_inplace_relu_dropout_backward_raises_eager_error_at_backward():
    eager = _eager_backward_error(tg)
    net = _model(tg)
    cm = tg.compile(net)
    for _ in range(3):
        out = cm(_x(tg))                     # no error here
        with pytest.raises(RuntimeError) as ei:
            out.sum().backward()
        assert type(ei.value) is type(eager) and isinstance(ei.value, tg.InplaceError)
        assert str(ei.value) == str(eager)
        assert all(p.grad is None for p in net.parameters())


def test_inplace_relu_dropout_error_starts_like_pytorch():
    torch = pytest.importorskip("torch")
    theirs = str(_eager_backward_error(torch)).split(" Hint")[0]
    cm = tg.compile(_model(tg))
    for _ in range(2):
        out = cm(_x(tg))
        with pytest.raises(RuntimeError) as ei:
            out.sum().backward()
        assert str(ei.value).startswith(theirs), (str(ei.value), theirs)


def exp_then_add(x):
    y = x.exp()
    y.add_(1)
    return y


def test_autograd_grad_raises_eager_error():
    x0 = tg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError) as eager:
        tg.autograd.grad(exp_then_add(x0).sum(), x0)
    cf = tg.compile(exp_then_add)
    for _ in range(3):
        x = tg.ones(3, requires_grad=True)
        y = cf(x)
        np.testing.assert_allclose(y.detach().numpy(), np.e + 1, rtol=1e-6)
        with pytest.raises(type(eager.value)) as ei:
            tg.autograd.grad(y.sum(), x)
        assert str(ei.value) == str(eager.value)
        with pytest.raises(type(eager.value)):  # again (nothing was freed by the refusal)
            y.sum().backward()
        assert x.grad is None


def test_error_keeps_source_sites_in_a_note():
    cf = tg.compile(exp_then_add)
    for _ in range(2):
        y = cf(tg.ones(3, requires_grad=True))
    with pytest.raises(tg.InplaceError) as ei:
        y.sum().backward()
    note = "\n".join(getattr(ei.value, "__notes__", ()))
    assert "saved for ExpBackward0 at" in note and "overwritten in place at" in note
    assert "saved for" not in str(ei.value).split("Hint")[0]


def two_outputs(x, w):
    y = x.sigmoid()
    y.mul_(2)                               # sigmoid's saved result is now stale
    return y, x * w


def test_backward_through_a_clean_output_still_works():
    """Eager refuses only a backward that reaches the saving node; the other output's
    gradient flows."""
    def run(f):
        x, w = tg.ones(3, requires_grad=True), tg.full((3,), 2.0, requires_grad=True)
        y, z = f(x, w)
        # retained: a compiled call is one node for both outputs (Note [Second backward])
        z.sum().backward(retain_graph=True)
        got = (x.grad.numpy().copy(), w.grad.numpy().copy())
        with pytest.raises(tg.InplaceError) as ei:
            y.sum().backward()
        return got, str(ei.value), x.grad.numpy().copy()
    want = run(two_outputs)
    cf = tg.compile(two_outputs)
    for _ in range(3):
        got = run(cf)
        np.testing.assert_array_equal(got[0][0], want[0][0])
        np.testing.assert_array_equal(got[0][1], want[0][1])
        assert got[1] == want[1]
        np.testing.assert_array_equal(got[2], want[2])


def test_backward_inside_compiled_function_raises_from_the_call():
    seen = []

    def step(x):
        y = exp_then_add(x)
        seen.append(1)
        y.sum().backward()
        return y.detach()
    x0 = tg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError) as eager:
        step(x0)
    cf = tg.compile(step)
    for _ in range(3):
        x = tg.ones(3, requires_grad=True)
        with pytest.raises(type(eager.value)) as ei:
            cf(x)
        assert str(ei.value) == str(eager.value)
        assert x.grad is None


def test_no_grad_overwrite_error_has_eager_message():
    def f(x, w):
        y = x.exp()
        loss = (y * w).sum()
        with tg.no_grad():
            y.mul_(0.5)
        return loss
    x, w = tg.ones(3, requires_grad=True), tg.ones(3, requires_grad=True)
    with pytest.raises(tg.InplaceError) as eager:
        f(x, w).backward()
    cf = tg.compile(f)
    for _ in range(3):
        x, w = tg.ones(3, requires_grad=True), tg.ones(3, requires_grad=True)
        loss = cf(x, w)
        with pytest.raises(tg.InplaceError) as ei:
            loss.backward()
        assert str(ei.value) == str(eager.value)
        assert x.grad is None and w.grad is None


def _two_backwards(out):
    errs = []
    for _ in range(2):
        with pytest.raises(RuntimeError) as ei:
            out.backward()
        errs.append((type(ei.value), str(ei.value)))
    return errs


def test_second_backward_after_the_error_fails_as_eager():
    """Eager frees the saved values of the nodes it ran before the failing one: a second
    backward then reports a freed graph (dropout's mask was saved) or, when none held
    any, the same in-place error again."""
    want = _two_backwards(exp_then_add(tg.ones(3, requires_grad=True)).sum())
    cf = tg.compile(exp_then_add)
    for _ in range(2):
        got = _two_backwards(cf(tg.ones(3, requires_grad=True)).sum())
    assert got == want and want[1][0] is tg.InplaceError
    tg.manual_seed(0)
    want = _two_backwards(_model(tg)(_x(tg)).sum())
    cm = tg.compile(_model(tg))
    for _ in range(2):
        tg.manual_seed(0)
        got = _two_backwards(cm(_x(tg)).sum())
    assert got == want and "second time" in want[1][1]


def tanh_scaled_by_w(m, x, w):
    y = x.tanh()
    y.mul_(2)                                # TanhBackward0's saved result is now stale
    return (y * w).sum()                     # MulBackward0 runs first: w.grad is filled


def test_leaf_gradient_eager_fills_before_the_error_runs_eagerly():
    """PyTorch (and eager tracegrad, with its PyTorch leaf order) accumulates w.grad before
    TanhBackward0 raises; a compiled backward cannot stop half way, so the call runs
    eagerly, with a warning, and leaves the same .grad."""
    torch = pytest.importorskip("torch")
    tg.ones(1, requires_grad=True).register_hook(lambda g: g)   # PyTorch's leaf order
    def state(m, f):
        x, w = m.ones(3, requires_grad=True), m.full((3,), 2.0, requires_grad=True)
        out = f(x, w)
        with pytest.raises(RuntimeError) as ei:
            out.backward()
        return (str(ei.value).split(" Hint")[0], x.grad,
                None if w.grad is None else w.grad.detach().numpy().tolist())
    theirs = state(torch, lambda x, w: tanh_scaled_by_w(torch, x, w))
    eager = state(tg, lambda x, w: tanh_scaled_by_w(tg, x, w))
    assert eager[1:] == theirs[1:] and eager[0].startswith(theirs[0])
    cf = tg.compile(lambda x, w: tanh_scaled_by_w(tg, x, w))
    with pytest.warns(UserWarning, match="accumulate the gradient of 'w'"):
        for _ in range(3):
            assert state(tg, cf) == eager
