"""Path caching and guards of `tracegrad.compile`: one trace per control-flow path, reuse on
matching guards, a retrace (logged with the guard's source line, expected and actual value)
for every kind of guard and entry-key change, the cache limit, closures read by reference,
input mutations replayed, randomness, output structures, hooks and retain_graph semantics,
exceptions, and a whole compiled training step equal to eager (and PyTorch)."""
import inspect
import logging
import warnings

import numpy as np
import pytest

import tracegrad as tg


def _line(fn, k):
    return f"{__file__}:{inspect.getsourcelines(fn)[1] + k}"


# ---- control flow and guards ----

def sign_branch(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def test_alternating_branch_traces_exactly_twice():
    f = tg.compile(sign_branch)
    rng = np.random.default_rng(0)
    for i in range(20):
        x = tg.tensor(rng.standard_normal(4).astype(np.float32) + (3 if i % 2 else -3))
        np.testing.assert_allclose(f(x).numpy(), sign_branch(x).numpy())
    assert f.stats.traces == 2 and f.stats.cache_hits == 18 and f.stats.calls == 20
    assert len(f.programs) == 2


def tutorial(x):
    y = x * 2
    while y.data.norm() < 1000:
        y = y * 2
    return y


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_tutorial_loop_gives_exact_gradients(compiled):
    f = tg.compile(tutorial) if compiled else tutorial
    v = tg.tensor([0.1, 1.0, 0.0001])
    for scale in [1.0, 0.1, 1.0, 0.01, 0.1, 0.001]:
        x = tg.full((3,), scale, requires_grad=True)
        y = f(x)
        k = 1
        while 2.0 ** k * scale * np.sqrt(3) < 1000:
            k += 1
        np.testing.assert_allclose(y.detach().numpy(), 2.0 ** k * scale, rtol=1e-6)
        y.backward(v)
        np.testing.assert_array_equal(x.grad.numpy(), (2.0 ** k * v).numpy())
    if compiled:
        assert f.stats.traces == 4 and f.stats.cache_hits == 2


def test_tutorial_loop_matches_torch():
    torch = pytest.importorskip("torch")
    f = tg.compile(tutorial)
    for scale in [0.5, 0.02, 0.5]:
        x = tg.full((3,), scale, requires_grad=True)
        xt = torch.full((3,), scale, requires_grad=True)
        f(x).backward(tg.tensor([0.1, 1.0, 0.0001]))
        tutorial(xt).backward(torch.tensor([0.1, 1.0, 0.0001]))
        np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def _by_item(x):
    # (a float's or an integer's `.item()` meeting a tensor is read per call, no guard: Note
    # [Numbers taken from tensors], Note [Integers read per call]; a bool tensor's stays a
    # guard on its value)
    return x * (x.sum() > 3.5).item()


def _by_float(x):
    return x * float(x.max())


def _by_int(x):
    return x[: int(x.sum())]


def _by_tolist(x):
    return x * sum(1 for v in x.tolist() if v > 0)


def _by_mask(x):
    return x[x > 0].exp().sum()


def _by_index(x):
    return x * x[tg.tensor(0).long() + (x[0] > 0).long()]


GUARDED = [  # fn, inputs (calls 0 and 2 share a path, call 1 differs), guard kind
    (sign_branch, [[1.0, 2.0], [-1.0, -2.0], [2.0, 3.0]], "bool"),
    (_by_item, [[1.0, 2.0], [1.0, 3.0], [1.0, 2.0]], "item"),
    (_by_float, [[1.0, 2.0], [1.0, 3.0], [1.5, 2.0]], "float"),
    (_by_int, [[1.0, 1.0], [1.0, 0.0], [0.5, 1.5]], "int"),
    (_by_tolist, [[1.0, 2.0], [1.0, -2.0], [1.0, 2.0]], "tolist"),
    (_by_mask, [[1.0, -2.0], [1.0, 2.0], [3.0, -1.0]], "shape"),
]


@pytest.mark.parametrize("fn,inputs,kind", GUARDED, ids=[g[2] for g in GUARDED])
def test_each_guard_kind_triggers_retrace(fn, inputs, kind, caplog):
    f = tg.compile(fn)
    with caplog.at_level(logging.INFO, logger="tracegrad"):
        for data in inputs:
            x = tg.tensor(data, requires_grad=True)
            out = f(x)
            ref = fn(tg.tensor(data, requires_grad=True))
            np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy())
            (out.sum() if out.ndim else out).backward()
    assert f.stats.traces == 2 and f.stats.cache_hits == 1
    assert [g.kind for g in f.programs[0].guards] == [kind]
    msgs = [r.getMessage() for r in caplog.records if r.name == "tracegrad"]
    assert len(msgs) == 1 and kind in msgs[0] and fn.__name__ in msgs[0]
    assert f"{__file__}:" in msgs[0]
    assert len(f.stats.retraces) == 1


def test_retrace_log_names_guard_line_expected_and_actual(caplog):
    f = tg.compile(sign_branch)
    with caplog.at_level(logging.INFO, logger="tracegrad"):
        f(tg.ones(2))
        f(-tg.ones(2))
    (msg,) = [r.getMessage() for r in caplog.records if r.name == "tracegrad"]
    assert _line(sign_branch, 1) in msg
    assert "expected True" in msg and "got False" in msg


def test_entry_key_changes_retrace_with_reasons(caplog):
    @tg.compile
    def f(x, scale, flag=True):
        return (x * scale if flag else x - scale).sum()
    x = tg.ones(3)
    with caplog.at_level(logging.INFO, logger="tracegrad"):
        f(x, 2)
        f(x, 2)                                   # hit
        f(x, 3)                                   # Python scalar value
        f(x, 3.0)                                 # Python scalar type
        f(tg.ones(4), 3.0)                        # shape
        f(tg.ones(4, dtype=tg.float64), 3.0)      # dtype
        f(tg.ones(4, dtype=tg.float64, requires_grad=True), 3.0)   # requires_grad
        f(x, 2, flag=False)                       # keyword argument
    assert f.stats.traces == 7 and f.stats.cache_hits == 1
    reasons = f.stats.retraces
    # an int that changes is read per call from then on (Note [Float arguments that change])
    assert "int argument 'scale' changed value" in reasons[0] and "argument 1" in reasons[1]
    assert "shape" in reasons[2] and "dtype" in reasons[3] and "requires_grad" in reasons[4]
    assert len([r for r in caplog.records if r.name == "tracegrad"]) == 6
    assert f(x, 2).item() == 6.0 and f(x, 3).item() == 9.0 and f(x, 2, flag=False).item() == -3
    assert f.stats.traces == 7


def test_grad_mode_is_part_of_the_key():
    @tg.compile
    def f(x):
        return (x * x).sum()
    x = tg.ones(3, requires_grad=True)
    a = f(x)
    with tg.no_grad():
        b = f(x)
        b2 = f(x)
    c = f(x)
    assert a.requires_grad and c.requires_grad
    assert not b.requires_grad and not b2.requires_grad and b.grad_fn is None
    assert f.stats.traces == 2
    c.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_inference_mode_is_part_of_the_key_and_outputs_are_inference_tensors():
    @tg.compile
    def f(x):
        return x * 2
    x = tg.ones(2, requires_grad=True)
    assert not f(x).is_inference()
    with tg.inference_mode():
        for _ in range(3):
            y = f(x)
            assert y.is_inference() and not y.requires_grad
    assert f(x).requires_grad and f.stats.traces == 2


def test_module_training_flags_retrace():
    nn = pytest.importorskip("tracegrad.nn")
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.BatchNorm1d(8), nn.ReLU(),
                          nn.Linear(8, 2))
    cm = tg.compile(model)
    x = tg.randn(5, 4)
    for mode in ["train", "eval", "train", "eval", "eval"]:
        getattr(model, mode)()
        tg.manual_seed(3)
        want = model(x)
        mean_before = model[2].running_mean.clone()
        tg.manual_seed(3)
        model[2].running_mean.copy_(mean_before) if mode == "train" else None
        got = cm(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    assert cm.stats.traces == 2
    assert any("training" in r for r in cm.stats.retraces)


def test_rebinding_a_module_parameter_retraces():
    nn = pytest.importorskip("tracegrad.nn")
    lin = nn.Linear(3, 1)
    cm = tg.compile(lin)
    x = tg.ones(2, 3)
    cm(x)
    lin.weight = nn.Parameter(tg.zeros(1, 3))
    lin.bias = nn.Parameter(tg.full((1,), 4.0))
    assert cm(x).tolist() == [[4.0], [4.0]]
    assert cm.stats.traces == 2


def test_module_buffers_updated_by_compiled_forward():
    nn = pytest.importorskip("tracegrad.nn")
    bn_e, bn_c = nn.BatchNorm1d(3), nn.BatchNorm1d(3)
    cm = tg.compile(bn_c)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = tg.tensor(rng.standard_normal((6, 3)).astype(np.float32))
        np.testing.assert_allclose(cm(x).detach().numpy(), bn_e(x).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bn_c.running_mean.numpy(), bn_e.running_mean.numpy(),
                                   rtol=1e-6)
        np.testing.assert_allclose(bn_c.running_var.numpy(), bn_e.running_var.numpy(),
                                   rtol=1e-6)
    assert cm.stats.cache_hits == 3


def three_way(x):
    if x.sum() > 1:
        return x * 2
    if x.sum() > 0:
        return x * 3
    return x * 4


def test_cache_limit_warns_once_then_runs_eagerly():
    f = tg.compile(three_way, cache_limit=2)
    values = [2.0, 0.5, -1.0, -1.0, 2.0, -2.0, 0.5]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [f(tg.tensor([v])).item() for v in values]
    assert outs == [three_way(tg.tensor([v])).item() for v in values]
    warns = [w for w in caught if issubclass(w.category, UserWarning)]
    assert len(warns) == 1 and "three_way" in str(warns[0].message)
    assert "cache_limit=2" in str(warns[0].message)
    assert f.stats.traces == 2 and f.stats.eager_calls == 3 and f.stats.cache_hits == 2


def test_exception_in_user_function_propagates_and_cache_stays_usable():
    def f(x):
        if x.sum() > 0:
            raise ValueError("positive input")
        return x * 2
    cf = tg.compile(f)
    assert cf(-tg.ones(2)).tolist() == [-2.0, -2.0]
    for _ in range(2):
        with pytest.raises(ValueError, match="positive input"):
            cf(tg.ones(2))
    assert cf(-tg.ones(2) * 3).tolist() == [-6.0, -6.0]
    assert cf.stats.cache_hits >= 1 and len(cf.programs) == 1


def test_a_first_call_that_raises_is_no_retrace_reason_for_the_next():
    cf = tg.compile(lambda x: x.reshape(5))
    with pytest.raises(RuntimeError):
        cf(tg.ones(2))
    cf(tg.ones(5))
    assert cf.stats.traces == 2 and cf.stats.retraces == []
    cf(tg.ones(1, 5))
    assert cf.stats.retraces == ["argument 0 ('x'): shape changed ((5,) -> (1, 5))"]


def test_eager_error_type_from_compiled_path():
    @tg.compile
    def f(x, i):
        return x[i].sum()
    x = tg.ones(3)
    assert f(x, tg.tensor([0, 1])).item() == 2.0
    with pytest.raises(IndexError) as eager:
        f.fn(x, tg.tensor([0, 5]))
    with pytest.raises(IndexError) as compiled:
        f(x, tg.tensor([0, 5]))                 # same shapes: runs the compiled program
    assert type(compiled.value) is type(eager.value)
    assert str(compiled.value) == str(eager.value)
    assert f.stats.traces == 1 and f.stats.calls == 2


# ---- captured tensors ----

W_GLOBAL = tg.ones(3)


def test_closure_and_global_read_by_reference():
    w = tg.ones(3, requires_grad=True)

    @tg.compile
    def f(x):
        return (x * w).sum() + (x * W_GLOBAL).sum()
    x = tg.ones(3)
    for i in range(4):
        w.grad = None
        out = f(x)
        assert out.item() == 3 * (1 + i) + 3 * (1 + i)
        out.backward()
        np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0, 1.0])
        with tg.no_grad():
            w.add_(1)
        W_GLOBAL.add_(1)
    assert f.stats.traces == 1
    W_GLOBAL.fill_(1.0)


def test_rebinding_a_captured_closure_or_global_retraces():
    global W_REBOUND
    w = tg.ones(2)

    @tg.compile
    def f(x):
        return x * w + W_REBOUND
    assert f(tg.ones(2)).tolist() == [2.0, 2.0]
    w = tg.full((2,), 5.0)                    # a new object in the closure cell
    assert f(tg.ones(2)).tolist() == [6.0, 6.0]
    W_REBOUND = tg.full((2,), 10.0)           # a new object bound to the global
    assert f(tg.ones(2)).tolist() == [15.0, 15.0]
    assert f(tg.ones(2)).tolist() == [15.0, 15.0]
    assert f.stats.traces == 3 and f.stats.cache_hits == 1


W_REBOUND = tg.ones(2)


# ---- input mutation replay ----

def test_input_mutations_replayed_with_version_bumps():
    def f(buf, x, p, g):
        buf.add_(x)
        buf[1:].mul_(2)                          # two writes: _version moves by 2
        x[0] = 0
        with tg.no_grad():
            p.sub_(0.1 * g)
        return buf.sum()
    cf = tg.compile(f)
    state = {}
    for name, fn in (("eager", f), ("compiled", cf)):
        buf, p = tg.zeros(3), tg.ones(3, requires_grad=True)
        versions = []
        for i in range(3):
            x, g = tg.full((3,), float(i + 1)), tg.ones(3)
            s = fn(buf, x, p, g)
            versions.append((buf._version, x._version, p._version))
            assert x[0].item() == 0
        state[name] = (buf.numpy().copy(), p.detach().numpy().copy(), versions, s.item())
    e, c = state["eager"], state["compiled"]
    np.testing.assert_array_equal(e[0], c[0])
    np.testing.assert_allclose(e[1], c[1])
    assert e[2] == c[2] and e[3] == c[3]
    assert cf.stats.cache_hits == 2


def test_mutated_input_returned_is_the_same_tensor_and_views_are_views():
    @tg.compile
    def f(x):
        x.add_(1)
        return x, x[0], x.t()
    for _ in range(3):
        x = tg.zeros(2, 3)
        a, b, c = f(x)
        assert a is x
        assert b._base is x and c._base is x
        b.fill_(7)                                   # a real view: writes reach x
        assert x[0, 0].item() == 7 and x._version == b._version


def test_mutating_input_that_requires_grad_keeps_eager_history():
    def f(x, w):
        x.mul_(w)
        return x.sum()
    cf = tg.compile(f)
    grads = []
    with pytest.warns(UserWarning, match="'x' requires grad and is modified in place"):
        for fn in (f, cf, cf, cf):
            a = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
            w = tg.tensor([2.0, 3.0, 4.0], requires_grad=True)
            x = a * 1
            (fn(x, w) + x.sum()).backward()
            grads.append((a.grad.tolist(), w.grad.tolist()))
    assert all(g == grads[0] for g in grads)
    with tg.no_grad():                           # no history to rebase: compiled
        for _ in range(3):
            x = tg.ones(3, requires_grad=True) * 1
            assert cf(x, tg.full((3,), 2.0)).item() == 6.0 and x.tolist() == [2.0] * 3
    assert cf.stats.cache_hits == 2
    assert grads[0] == ([4.0, 6.0, 8.0], [2.0, 4.0, 6.0])


# ---- randomness ----

def dropout_like(x):
    return x * (tg.rand(x.shape) > 0.5)


def test_random_masks_change_each_call_and_follow_the_seed():
    cf = tg.compile(dropout_like)
    x = tg.ones(64)
    tg.manual_seed(123)
    eager = [dropout_like(x).numpy().copy() for _ in range(5)]
    tg.manual_seed(123)
    compiled = [cf(x).numpy().copy() for _ in range(5)]
    for a, b in zip(eager, compiled):
        np.testing.assert_array_equal(a, b)
    assert len({m.tobytes() for m in compiled}) == 5          # a new mask every call
    assert cf.stats.traces == 1 and cf.stats.cache_hits == 4
    tg.manual_seed(7)
    masks = np.stack([cf(tg.ones(1000)).numpy() for _ in range(20)])
    assert abs(masks.mean() - 0.5) < 0.02


def test_manual_seed_inside_compiled_function_is_replayed():
    def f(x, gen):
        gen.manual_seed(11)
        a = tg.rand(x.shape, generator=gen)
        tg.manual_seed(5)
        return x * a + tg.randn(x.shape)
    cf = tg.compile(f)
    gen = tg.Generator()
    want = f(tg.ones(4), gen).numpy()
    for _ in range(3):
        np.testing.assert_array_equal(cf(tg.ones(4), gen).numpy(), want)
    assert cf.stats.cache_hits == 2


def rand_then_branch(x):
    m = tg.rand(3)
    if (x * m).sum() > 0:              # the guard fails only after the draw
        return x * m
    return x - m


def test_failed_guard_after_a_random_draw_does_not_advance_the_generator():
    cf = tg.compile(rand_then_branch)
    signs = [1.0, -1.0, 1.0, 1.0, -1.0, -1.0, 1.0]
    tg.manual_seed(0)
    want = [rand_then_branch(tg.full((3,), v)).numpy() for v in signs]
    tg.manual_seed(0)
    got = [cf(tg.full((3,), v)).numpy() for v in signs]
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)
    assert cf.stats.traces == 2 and cf.stats.cache_hits == 5


def test_random_draw_gradient_uses_the_same_mask():
    cf = tg.compile(dropout_like)
    for _ in range(3):
        x = tg.ones(32, requires_grad=True)
        y = cf(x)
        y.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())


# ---- outputs, hooks, retain_graph ----

def test_output_structures_and_nondifferentiable_outputs():
    @tg.compile
    def f(x, y):
        return {"a": x * 2, "b": (x.argmax(), [x, y.sum()]), "n": 3}
    for _ in range(3):
        x, y = tg.randn(4, requires_grad=True), tg.randn(3, requires_grad=True)
        r = f(x, y)
        assert set(r) == {"a", "b", "n"} and r["n"] == 3
        assert r["b"][1][0] is x
        assert r["b"][0].dtype == tg.int64 and not r["b"][0].requires_grad
        assert r["b"][0].item() == int(np.argmax(x.detach().numpy()))
        (r["a"].sum() + r["b"][1][1]).backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 2.0))
        np.testing.assert_array_equal(y.grad.numpy(), np.ones(3))


def test_grad_accumulates_across_compiled_calls_and_hooks_fire():
    @tg.compile
    def f(x, w):
        return ((x @ w).tanh()).sum()
    x, w = tg.randn(2, 3), tg.randn(3, requires_grad=True)
    seen = []
    w.register_hook(lambda g: seen.append(g.numpy().copy()))
    for _ in range(3):
        f(x, w).backward()
    w_e = w.detach().clone().requires_grad_(True)
    ((x @ w_e).tanh()).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 3 * w_e.grad.numpy(), rtol=1e-6)
    assert len(seen) == 3
    np.testing.assert_allclose(seen[2], w_e.grad.numpy(), rtol=1e-6)


def test_compiled_output_feeds_eager_ops():
    @tg.compile
    def f(x):
        return x.exp(), x * 3
    tg.manual_seed(0)
    for _ in range(3):
        x = tg.randn(3, requires_grad=True)
        a, b = f(x)
        loss = (a * b).sum() + a.pow(2).mean()
        loss.backward()
        xe = x.detach().clone().requires_grad_(True)
        ((xe.exp() * (xe * 3)).sum() + xe.exp().pow(2).mean()).backward()
        # the gradient 3e^x(1+x) + ... passes through zero: compare on its own scale, since
        # eager and compiled may sum the two contributions in a different order
        scale = np.abs(xe.grad.numpy()).max()
        np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-5,
                                   atol=1e-6 * scale)


def test_retain_graph_semantics_on_compiled_node():
    @tg.compile
    def f(x):
        return x.exp().sum()
    for _ in range(3):
        x = tg.randn(3, requires_grad=True)
        out = f(x)
        out.backward()
        with pytest.raises(RuntimeError, match="second time"):
            out.backward()
        out = f(x)
        out.backward(retain_graph=True)
        out.backward()
        np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp(x.detach().numpy()), rtol=1e-6)


def test_create_graph_through_compiled_node():
    @tg.compile
    def f(x):
        return (x ** 3).sum()
    for _ in range(3):
        x = tg.randn(3, requires_grad=True)
        (g,) = tg.autograd.grad(f(x), (x,), create_graph=True)
        (gg,) = tg.autograd.grad(g.sum(), (x,))
        np.testing.assert_allclose(gg.numpy(), 6 * x.detach().numpy(), rtol=1e-5)


# ---- whole training steps ----

def _mlp_step(w1, b1, w2, x, y, lr):
    loss = ((x @ w1 + b1).relu() @ w2 - y).pow(2).mean()
    grads = tg.autograd.grad(loss, (w1, b1, w2))
    with tg.no_grad():
        for p, g in zip((w1, b1, w2), grads):
            p.sub_(lr * g)
    return loss


def _params(seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) * 0.5 for s in ((4, 8), (8,), (8, 1))]


def test_compiled_training_step_follows_eager_trajectory():
    rng = np.random.default_rng(1)
    x = tg.tensor(rng.standard_normal((16, 4)).astype(np.float32))
    y = tg.tensor(rng.standard_normal((16, 1)).astype(np.float32))
    e = [tg.tensor(a, requires_grad=True) for a in _params(0)]
    c = [tg.tensor(a, requires_grad=True) for a in _params(0)]
    step = tg.compile(_mlp_step)
    for _ in range(5):
        le = _mlp_step(*e, x, y, 0.1)
        lc = step(*c, x, y, 0.1)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-6)
        for a, b in zip(e, c):
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6,
                                       atol=1e-7)
    assert step.stats.traces == 1 and step.stats.cache_hits == 4
    assert all(p._version == 5 for p in c)


def test_compiled_training_step_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal((16, 4)).astype(np.float32)
    y0 = rng.standard_normal((16, 1)).astype(np.float32)
    ours = [tg.tensor(a, requires_grad=True) for a in _params(0)]
    theirs = [torch.tensor(a, requires_grad=True) for a in _params(0)]
    step = tg.compile(_mlp_step)
    for _ in range(5):
        lo = step(*ours, tg.tensor(x0), tg.tensor(y0), 0.1)
        loss = ((torch.tensor(x0) @ theirs[0] + theirs[1]).relu() @ theirs[2]
                - torch.tensor(y0)).pow(2).mean()
        grads = torch.autograd.grad(loss, theirs)
        with torch.no_grad():
            for p, g in zip(theirs, grads):
                p.sub_(0.1 * g)
        np.testing.assert_allclose(lo.item(), loss.item(), rtol=1e-5)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4,
                                   atol=1e-6)


def _retaining_step(w1, b1, w2, x, y):
    loss = ((x @ w1 + b1).relu() @ w2 - y).pow(2).mean()
    grads = tg.autograd.grad(loss, (w1, b1, w2), retain_graph=True)
    with tg.no_grad():
        for p, g in zip((w1, b1, w2), grads):
            p.sub_(0.1 * g)
    return loss


def test_returning_loss_after_update_defers_the_inplace_error_to_backward():
    """Eager: the step returns its loss; only loss.backward() fails (w changed since)."""
    cf = tg.compile(_retaining_step)
    rng = np.random.default_rng(1)
    x = tg.tensor(rng.standard_normal((16, 4)).astype(np.float32))
    y = tg.tensor(rng.standard_normal((16, 1)).astype(np.float32))
    for fn in (_retaining_step, cf, cf):
        ps = [tg.tensor(a, requires_grad=True) for a in _params(0)]
        loss = fn(*ps, x, y)
        assert loss.requires_grad and np.isfinite(loss.item())
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_backward_inside_compiled_function_compiles_its_grad_writes():
    """`loss.backward()` inside a compiled function writes `.grad`: the write is a recorded
    effect (Note [Effects]), so every compiled call performs it."""
    def f(w, x):
        loss = (x @ w).sum()
        loss.backward()
        return loss.detach()
    cf = tg.compile(f)
    cf(tg.ones(3, requires_grad=True), tg.ones(2, 3))
    for i in range(3):
        w = tg.ones(3, requires_grad=True)
        x = tg.full((2, 3), float(i + 1))
        cf(w, x)
        np.testing.assert_allclose(w.grad.numpy(), np.full(3, 2.0 * (i + 1)))
    assert cf.stats.eager_calls == 0 and cf.stats.cache_hits == 3


# ---- argument and output forms ----

def test_same_tensor_returned_twice_is_one_object():
    @tg.compile
    def f(x):
        y = x * 2
        return y, y, None, 3.5
    for _ in range(3):
        x = tg.ones(2, requires_grad=True)
        a, b, n, c = f(x)
        assert a is b and n is None and c == 3.5
        (a.sum() + b.sum()).backward()
        assert x.grad.tolist() == [4.0, 4.0]


def test_keyword_and_list_arguments():
    @tg.compile
    def f(xs, *, w):
        return sum((x * w).sum() for x in xs)
    for i in range(3):
        xs = [tg.full((2,), float(i), requires_grad=True) for _ in range(3)]
        w = tg.full((2,), 2.0, requires_grad=True)
        r = f(xs, w=w)
        r.backward()
        assert r.item() == 12 * i and all(x.grad.tolist() == [2.0, 2.0] for x in xs)
        assert w.grad.tolist() == [3.0 * i] * 2
    assert f.stats.cache_hits == 2


def test_nested_compiled_function_is_inlined():
    @tg.compile
    def inner(x):
        return x.exp()

    @tg.compile
    def outer(x):
        return inner(x).sum() * 2
    for _ in range(3):
        x = tg.randn(3, requires_grad=True)
        outer(x).backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(x.detach().numpy()), rtol=1e-6)
    assert outer.stats.cache_hits == 2 and inner.stats.traces == 0


def test_integer_bool_zero_dim_empty_and_half_inputs():
    @tg.compile
    def f(i, b, x, s, e, h):
        return ((i * 2 + 1) * b, x[i % 3], (x * i).sum() + s.exp(), e.sum(),
                (h * 2).float().sum())
    for k in range(3):
        args = (tg.tensor([0, 1, 2 + k]), tg.tensor([True, False, True]),
                tg.randn(3, requires_grad=True), tg.tensor(float(k), requires_grad=True),
                tg.zeros(0), tg.ones(3, dtype=tg.float16))
        got, want = f(*args), f.fn(*args)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.requires_grad == b.requires_grad
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
        got[2].backward()
        assert args[2].grad.tolist() == args[0].float().tolist()
        assert args[3].grad.item() == pytest.approx(np.exp(k))
    assert f.stats.cache_hits == 2


def test_non_contiguous_inputs_and_mutated_strided_buffer():
    @tg.compile
    def f(x, buf):
        buf.add_(x)
        return x.sum(0) * 2, buf.t()
    for _ in range(3):
        x = tg.randn(4, 3).t()
        buf, ref = tg.zeros(4, 3).t(), tg.zeros(4, 3).t()
        s, bt = f(x, buf)
        ref.add_(x)
        np.testing.assert_allclose(s.numpy(), (x.sum(0) * 2).numpy(), rtol=1e-6)
        np.testing.assert_allclose(buf.numpy(), ref.numpy())
        assert bt._base is buf._base and buf._version == 1
    assert f.stats.cache_hits == 2


def test_aliasing_arguments_keep_eager_semantics():
    @tg.compile
    def f(a, b):
        a.add_(1)
        return b * 1
    for _ in range(2):
        x = tg.zeros(2)
        assert f(x, x).tolist() == [1.0, 1.0] and x.tolist() == [1.0, 1.0]
        y = tg.zeros(4)
        assert f(y[:2], y[1:3]).tolist() == [1.0, 0.0]


def test_captured_buffer_mutated_every_call():
    buf = tg.zeros(3)

    @tg.compile
    def f(x):
        buf.add_(x)
        return buf.sum()
    for k in range(3):
        assert f(tg.ones(3)).item() == 3 * (k + 1)
        assert buf.tolist() == [k + 1.0] * 3 and buf._version == k + 1


def test_outputs_retain_grad_and_partial_requires_grad():
    @tg.compile
    def f(x, y):
        return x * 2, y * 3, (x + y).detach(), (x * 3).sum()
    for _ in range(3):
        x, y = tg.ones(2, requires_grad=True), tg.ones(2)
        a, b, c, s = f(x, y)
        assert a.requires_grad and not b.requires_grad and not c.requires_grad
        assert b.grad_fn is None and c.grad_fn is None
        a.retain_grad()
        (a.sum() * 5 + s).backward()
        assert a.grad.tolist() == [5.0, 5.0] and x.grad.tolist() == [13.0, 13.0]


def test_numpy_and_nonzero_guards():
    @tg.compile
    def f(x):
        return x * float(x.numpy().sum()) + x.nonzero().float().sum()
    for v in ([1.0, 0.0], [1.0, 0.0], [2.0, 1.0], [1.0, 0.0]):
        x = tg.tensor(v)
        np.testing.assert_allclose(f(x).numpy(), f.fn(x).numpy())
    assert f.stats.traces == 2 and f.stats.cache_hits == 2


def test_explain_lists_paths_guards_and_programs():
    f = tg.compile(sign_branch)
    f(tg.ones(2, requires_grad=True))
    f(-tg.ones(2, requires_grad=True))
    text = f.explain()
    assert "2 path(s)" in text or text.count("path") >= 2
    assert _line(sign_branch, 1) in text
    assert "backward" in text
    assert len(f.programs) == 2 and all(p.forward is not None for p in f.programs)
    assert "def " in f.programs[0].code


G_SHARED = tg.zeros(4)


def test_argument_aliasing_a_captured_tensor_keeps_eager_semantics():
    def f(a):
        a.add_(1)
        return G_SHARED * 1
    for memory in ("off", "balanced"):
        cf = tg.compile(f, memory=memory)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            G_SHARED.zero_()
            assert cf(tg.zeros(2)).tolist() == [0.0] * 4          # no aliasing: compiled
            for _ in range(2):
                G_SHARED.zero_()
                assert cf(G_SHARED[:2]).tolist() == [1.0, 1.0, 0.0, 0.0]
                assert G_SHARED.tolist() == [1.0, 1.0, 0.0, 0.0]


def test_compiled_module_with_eager_backward_and_adam():
    nn = pytest.importorskip("tracegrad.nn")
    optim = pytest.importorskip("tracegrad.optim")

    def make():
        tg.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
    me, mc = make(), make()
    cm = tg.compile(mc)
    oe = optim.Adam(me.parameters(), lr=0.01)
    oc = optim.Adam(mc.parameters(), lr=0.01)
    rng = np.random.default_rng(0)
    x = tg.tensor(rng.standard_normal((32, 4)).astype(np.float32))
    y = tg.tensor(rng.integers(0, 3, 32))
    lossf = nn.CrossEntropyLoss()
    for step in range(6):
        tg.manual_seed(100 + step)
        le = lossf(me(x), y)
        oe.zero_grad()
        le.backward()
        oe.step()
        tg.manual_seed(100 + step)
        lc = lossf(cm(x), y)
        oc.zero_grad()
        lc.backward()
        oc.step()
        assert lc.item() == pytest.approx(le.item(), rel=1e-6)
        for a, b in zip(me.parameters(), mc.parameters()):
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5,
                                       atol=1e-7)
    assert cm.stats.traces == 1 and cm.stats.cache_hits == 5


def test_distinct_outputs_never_share_memory_and_output_views_are_views():
    @tg.compile
    def f(x):
        y = x * 2
        return x.clone(), x.clone(), y, y[0], y.t(), (x * 3)[0], (x * 3)[1]
    for i in range(3):
        x = tg.ones(2, 2, requires_grad=True)
        a, b, y, y0, yt, d, e = f(x)
        with tg.no_grad():
            a.add_(1)
        assert b.tolist() == [[1.0, 1.0], [1.0, 1.0]]          # cse merged them: copied
        assert y0._base is y and yt._base is y                 # real views of output y
        assert not np.may_share_memory(d.detach().numpy(), e.detach().numpy()) or i == 0
        (y.sum() + y0.sum() * 2 + yt[0].sum() * 3 + d.sum() + e.sum()).backward()
        assert x.grad.tolist() == [[15.0, 9.0], [11.0, 5.0]]
        with tg.no_grad():
            y0.add_(1)
        assert y.tolist() == [[3.0, 3.0], [2.0, 2.0]] and y._version == y0._version


def test_modifying_outputs_in_place_fails_backward_only_where_eager_does():
    def f(x):
        y = x.exp()                    # exp saves its output
        return y, y.t(), x * 2, x.clone()
    cf = tg.compile(f)
    for fn in (f, cf, cf):
        x = tg.ones(2, 2, requires_grad=True)
        y, yt, z, c = fn(x)
        z.add_(1)                      # not read by backward: fine
        with tg.no_grad():
            c.zero_()                  # neither
        (z.sum() + c.sum()).backward(retain_graph=True)
        assert x.grad.tolist() == [[3.0, 3.0], [3.0, 3.0]]
        with tg.no_grad():
            yt.mul_(2)                 # a view of the saved exp output
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_leaf_created_inside_runs_eagerly_with_a_warning():
    def f(x):
        w = tg.ones(3).requires_grad_()
        return (x * w).sum(), w
    cf = tg.compile(f)
    with pytest.warns(UserWarning, match="creates a tensor that requires grad"):
        cf(tg.ones(3))
    for k in range(2):
        out, w = cf(tg.full((3,), float(k)))
        assert out.requires_grad
        out.backward()
        assert w.grad.tolist() == [float(k)] * 3
    with tg.no_grad():                          # the returned leaf still requires grad
        for _ in range(3):
            out, w = cf(tg.ones(3))
            assert not out.requires_grad and w.requires_grad and w.is_leaf
    assert cf.stats.cache_hits == 0


def test_a_changing_int_argument_is_named_and_the_cache_limit_warning_says_what_to_do():
    def step(x, k, *, scale=2.0):
        return x * 2 if len(range(k)) % 2 else x * 3

    # `range(k)` needs k's value: k is keyed by value after the trace that found that out
    cf = tg.compile(step, cache_limit=3)
    with pytest.warns(UserWarning, match=r"argument 1 \('k'\) changed \(2 -> 3\).*as a "
                                          r"tensor \(`tracegrad.tensor\(step\)`\)"):
        outs = [cf(tg.ones(1), k).item() for k in range(5)]
    assert outs == [3.0, 2.0, 3.0, 2.0, 3.0]
    assert cf.stats.retraces[0].startswith("int argument 'k' changed value")
    assert cf.stats.retraces[1] == "argument 1 ('k') changed (an int read per call -> 2)"
    # only computed with, k is read per call: a path per outcome of `k % 2`
    def by_parity(x, k):
        return x * 2 if k % 2 else x * 3
    cf = tg.compile(by_parity)
    assert [cf(tg.ones(1), k).item() for k in range(6)] == [3.0, 2.0] * 3
    assert cf.stats.traces == 3 and cf.stats.eager_calls == 0
    # the advice works: a tensor step counter gives one path per outcome of `k % 2`
    cf = tg.compile(by_parity)
    assert [cf(tg.ones(1), tg.tensor(k)).item() for k in range(6)] == [3.0, 2.0] * 3
    assert cf.stats.traces == 2


def test_retrace_reason_for_another_object_argument_names_it_not_its_id():
    @tg.compile
    def step(model, x):
        return model(x).sum()
    a, b = tg.nn.Linear(2, 1), tg.nn.Linear(2, 1)
    step(a, tg.ones(1, 2))
    step(b, tg.ones(1, 2))
    b.eval()
    step(b, tg.ones(1, 2))
    assert step.stats.retraces[0] == (
        "argument 0 ('model') is another object than when traced (an object argument such "
        "as a module or optimizer keys its own entry)")
    assert step.stats.retraces[1] == (
        "argument 0 ('model'): its modules' training flags changed ((True,) -> (False,))")
