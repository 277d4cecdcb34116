"""PyTorch API gaps that ordinary training code hits first: each behaves eagerly exactly as
PyTorch does (torch as the oracle, skipped without it), and inside `tracegrad.compile` either
compiles to the same values, gradients and effects or falls back loudly."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn as tnn
import tracegrad.nn.functional as TF


def _torch():
    return pytest.importorskip("torch")


def _raises_like(tg_fn, torch_fn):
    """Both raise; same builtin type; tracegrad's message contains torch's."""
    torch = _torch()
    with pytest.raises(Exception) as te:
        torch_fn(torch)
    with pytest.raises(type(te.value)) as ge:
        tg_fn(tg)
    assert str(te.value).splitlines()[0] in str(ge.value)
    return ge.value


# ---------------- class-index targets must be int64 ----------------
LOSSES = {
    "cross_entropy": lambda m, x, t: m.nn.functional.cross_entropy(x, t),
    "nll_loss": lambda m, x, t: m.nn.functional.nll_loss(x.log_softmax(1), t),
    "CrossEntropyLoss": lambda m, x, t: m.nn.CrossEntropyLoss()(x, t),
    "NLLLoss": lambda m, x, t: m.nn.NLLLoss()(x.log_softmax(1), t),
    "cross_entropy_2d": lambda m, x, t: m.nn.functional.cross_entropy(
        x.reshape(3, 4, 1, 1).expand(3, 4, 2, 2), t.reshape(3, 1, 1).expand(3, 2, 2)),
}


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("dtype", ["int32", "bool", "float32"])
def test_class_index_targets_must_be_int64(loss, dtype):
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    t = np.array([0, 1, 2])

    def run(m):
        return LOSSES[loss](m, m.tensor(x), m.tensor(t).to(getattr(m, dtype)))
    err = _raises_like(run, run)
    assert "nll_loss" in str(err)


def test_class_index_int32_target_compiled_raises_like_eager():
    x = tg.randn(3, 4, requires_grad=True)

    @tg.compile
    def step(x, t):
        return TF.cross_entropy(x, t)
    assert step(x, tg.tensor([0, 1, 2])).item() == pytest.approx(
        TF.cross_entropy(x, tg.tensor([0, 1, 2])).item(), rel=1e-6)
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Int"):
        step(x, tg.tensor([0, 1, 2], dtype=tg.int32))


def test_cross_entropy_integer_target_of_input_shape_is_probabilities_error():
    def run(m):
        return m.nn.functional.cross_entropy(m.ones(2, 2), m.tensor([[0, 1], [1, 0]]))
    err = _raises_like(run, run)
    assert "cross_entropy" in str(err)


# ---------------- RNG state: get_rng_state / set_rng_state / fork_rng ----------------
def test_torch_random_module_names_exist():
    torch = _torch()
    for name in torch.random.__all__:
        if name != "thread_safe_generator":
            assert callable(getattr(tg.random, name)), name
    for name in ("get_rng_state", "set_rng_state", "manual_seed", "seed", "initial_seed"):
        assert callable(getattr(tg, name)), name


@pytest.mark.parametrize("lib", ["tracegrad", "torch"])
def test_rng_state_round_trip_repeats_draws_and_seed(lib):
    m = tg if lib == "tracegrad" else _torch()
    m.manual_seed(5)
    m.rand(3)                                   # odd float32 count: half a 64-bit word cached
    s = m.get_rng_state()
    a = (m.rand(5), m.randn(3), m.randint(0, 10, (4,)), m.randperm(6),
         m.nn.functional.dropout(m.ones(8), 0.5))
    m.manual_seed(7)
    m.set_rng_state(s)
    assert m.initial_seed() == 5                # PyTorch restores the seed too
    b = (m.rand(5), m.randn(3), m.randint(0, 10, (4,)), m.randperm(6),
         m.nn.functional.dropout(m.ones(8), 0.5))
    assert all(m.equal(x, y) for x, y in zip(a, b))
    assert s.ndim == 1 and not s.requires_grad and not m.is_floating_point(s)
    s2 = m.get_rng_state()
    s2.zero_()                                  # a copy: the generator is unaffected
    assert m.equal(m.get_rng_state(), m.get_rng_state())
    assert not m.equal(m.get_rng_state(), s2)


def test_generator_state_is_a_tensor_and_survives_save_load(tmp_path):
    g = tg.Generator().manual_seed(3)
    s = g.get_state()
    assert isinstance(s, tg.Tensor)
    a = tg.rand(4, generator=g)
    tg.save({"gen": s}, tmp_path / "ck.pt")
    assert g.set_state(tg.load(tmp_path / "ck.pt")["gen"]) is g
    assert tg.equal(tg.rand(4, generator=g), a)
    assert g.initial_seed() == 3


@pytest.mark.parametrize("bad", ["list", "float", "short"])
def test_set_rng_state_rejects_non_states_like_torch(bad):
    def run(m):
        state = {"list": lambda: [1, 2], "float": lambda: m.get_rng_state().float(),
                 "short": lambda: m.get_rng_state()[:10]}[bad]()
        m.set_rng_state(state)
    before = tg.get_rng_state()
    _raises_like(run, run) if bad != "short" else None
    if bad == "short":                          # sizes differ: the type and wording agree
        with pytest.raises(RuntimeError, match="Expected a CPUGeneratorImplState of size"):
            run(tg)
    assert tg.equal(tg.get_rng_state(), before)


@pytest.mark.parametrize("lib", ["tracegrad", "torch"])
def test_fork_rng_restores_on_exit_and_on_error(lib):
    m = tg if lib == "tracegrad" else _torch()
    m.manual_seed(0)
    s = m.get_rng_state()
    with m.random.fork_rng():
        m.rand(3)
    assert m.equal(m.get_rng_state(), s)
    with pytest.raises(ZeroDivisionError):
        with m.random.fork_rng():
            m.rand(3)
            1 / 0
    assert m.equal(m.get_rng_state(), s)
    with m.random.fork_rng(enabled=False):
        m.rand(3)
    assert not m.equal(m.get_rng_state(), s)


def _noisy_step(x, w):
    h = TF.dropout(x @ w, 0.3, training=True) + 0.1 * tg.randn(x.shape[0], w.shape[1])
    return (h * h).mean()


def _run_calls(fn, restore_every):
    tg.manual_seed(11)
    w = tg.ones(4, 3, requires_grad=True)
    x = tg.arange(8.).reshape(2, 4)
    s = tg.get_rng_state()
    out = []
    for i in range(5):
        if i in restore_every:
            tg.set_rng_state(s)                 # replay the same noise
        loss = fn(x, w)
        loss.backward()
        out.append((loss.item(), w.grad.clone()))
        w.grad = None
    return out


def test_compiled_draws_follow_set_rng_state_between_calls():
    eager = _run_calls(_noisy_step, {2, 3})
    compiled_fn = tg.compile(_noisy_step)
    compiled = _run_calls(compiled_fn, {2, 3})
    assert compiled_fn.stats.traces == 1 and compiled_fn.stats.eager_calls == 0
    for (le, ge), (lc, gc) in zip(eager, compiled):
        assert le == lc and tg.equal(ge, gc)
    assert eager[2][0] == eager[0][0] and eager[3][0] == eager[0][0]   # replayed
    assert eager[1][0] != eager[0][0]


def test_rng_state_read_or_set_inside_compiled_runs_eagerly_loudly():
    def f(x):
        s = tg.get_rng_state()
        a = x + tg.randn(3)
        tg.set_rng_state(s)
        return a, x + tg.randn(3), s

    def g(x):                                   # a read alone would be frozen at trace time
        return x + tg.rand(3), tg.get_rng_state()

    for fn in (f, g):
        cf = tg.compile(fn)
        tg.manual_seed(1)
        eager = [fn(tg.zeros(3)) for _ in range(3)]
        tg.manual_seed(1)
        with pytest.warns(UserWarning, match="generator state"):
            compiled = [cf(tg.zeros(3)) for _ in range(3)]
        for e, c in zip(eager, compiled):
            assert all(tg.equal(a, b) for a, b in zip(e, c))


# ---------------- equal / allclose / isclose / isinf / isfinite ----------------
CMP_CASES = [
    ("equal", lambda m: m.equal(m.tensor([1.0, 2.0]), m.tensor([1.0, 2.0]))),
    ("equal_shape", lambda m: m.equal(m.ones(2, 1), m.ones(2))),
    ("equal_nan", lambda m: m.equal(m.tensor([float("nan")]), m.tensor([float("nan")]))),
    ("equal_int_float", lambda m: m.equal(m.tensor([1]), m.tensor([1.0]))),
    ("equal_method", lambda m: m.ones(3).equal(m.ones(3))),
    ("allclose", lambda m: m.allclose(m.tensor([1.0, 2.0]), m.tensor([1.0, 2.00001]))),
    ("allclose_far", lambda m: m.allclose(m.tensor([1.0, 2.0]), m.tensor([1.0, 2.1]))),
    ("allclose_bcast", lambda m: m.allclose(m.ones(2, 3), m.ones(3))),
    ("allclose_method", lambda m: m.ones(3).allclose(m.ones(3) + 1e-9, atol=0.0)),
    ("isclose", lambda m: m.isclose(
        m.tensor([1.0, float("inf"), float("nan"), float("-inf"), 2.0, 0.0]),
        m.tensor([1 + 1e-9, float("inf"), float("nan"), float("inf"), 2.1, 1e-9]))),
    ("isclose_nan", lambda m: m.isclose(m.tensor([float("nan"), 1.0]),
                                        m.tensor([float("nan"), 1.1]), equal_nan=True,
                                        rtol=0.2)),
    ("isclose_int", lambda m: m.isclose(m.tensor([1, 2]), m.tensor([1, 3]))),
    ("isinf", lambda m: m.isinf(m.tensor([1.0, float("inf"), -float("inf"), float("nan")]))),
    ("isfinite", lambda m: m.tensor([1.0, float("inf"), float("nan")]).isfinite()),
    ("isfinite_int", lambda m: m.isfinite(m.tensor([1, 2]))),
    ("isposinf", lambda m: m.isposinf(m.tensor([1.0, float("inf"), -float("inf")]))),
    ("isneginf", lambda m: m.isneginf(m.tensor([1.0, float("inf"), -float("inf")]))),
]


@pytest.mark.parametrize("name,fn", CMP_CASES, ids=[c[0] for c in CMP_CASES])
def test_comparison_helpers_match_torch(name, fn):
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no numpy RuntimeWarning on inf - inf
        got = fn(tg)
    want = fn(torch)
    if isinstance(want, bool):
        assert type(got) is bool and got == want
    else:
        assert got.dtype is tg.bool and got.tolist() == want.tolist()


@pytest.mark.parametrize("bad", [
    lambda m: m.allclose(m.ones(2), m.ones(2, dtype=m.float64)),
    lambda m: m.isclose(m.ones(2), m.ones(2), rtol=-1),
    lambda m: m.equal(m.ones(2), [1.0, 1.0]),
])
def test_comparison_helpers_raise_like_torch(bad):
    _raises_like(bad, bad)


def test_allclose_in_compiled_function_is_a_guard():
    def f(x, y):
        return x * 2 if tg.allclose(x, y) else x - y

    cf = tg.compile(f)
    for y in (tg.ones(3), tg.zeros(3), tg.ones(3)):
        assert tg.equal(cf(tg.ones(3), y), f(tg.ones(3), y))
    assert cf.stats.traces == 2


# ---------------- Tensor.register_post_accumulate_grad_hook ----------------
def _post_hook_script(m):
    """What the hook sees and when, in PyTorch's order, on one library `m`."""
    w = m.ones(3, requires_grad=True)
    log = []
    h = w.register_post_accumulate_grad_hook(lambda t: log.append(("post", t.grad.tolist())))
    w.register_hook(lambda g: log.append(("pre", g.tolist())) or g * 10)
    (w * 2).sum().backward()
    (w * 3).sum().backward()                      # accumulates: the hook sees the sum
    m.autograd.grad((w * 2).sum(), w)             # accumulates nothing: no post hook
    (w * 2).sum().backward(inputs=[w])
    h.remove()
    (w * 2).sum().backward()
    w.register_post_accumulate_grad_hook(lambda t: log.append(("mode", m.is_grad_enabled())))
    w2 = m.ones(2, requires_grad=True)
    w2.register_post_accumulate_grad_hook(lambda t: log.append(("once", t.grad.tolist())))
    (w2 * 2 + w2 * 3).sum().backward()            # two uses, one accumulation, one call
    (w * w).sum().backward()
    return log


def test_post_accumulate_grad_hook_matches_torch():
    assert _post_hook_script(tg) == _post_hook_script(_torch())


@pytest.mark.parametrize("bad", ["non_leaf", "no_grad", "returns"])
def test_post_accumulate_grad_hook_errors_like_torch(bad):
    def run(m):
        w = m.ones(2, requires_grad=bad != "no_grad")
        if bad == "returns":
            w.register_post_accumulate_grad_hook(lambda t: 5)
            (w * 2).sum().backward()
        else:
            (w * 2 if bad == "non_leaf" else w).register_post_accumulate_grad_hook(
                lambda t: None)
    _raises_like(run, run)


def test_post_accumulate_grad_hook_per_parameter_optimizer_matches_torch():
    """The PyTorch tutorial's optimizer-in-backward: one optimizer per parameter, stepped
    from the parameter's post-accumulate hook."""
    torch = _torch()

    def train(m):
        m.manual_seed(0)
        model = m.nn.Sequential(m.nn.Linear(4, 8), m.nn.ReLU(), m.nn.Linear(8, 2))
        with m.no_grad():
            for k, p in enumerate(model.parameters()):
                p.copy_(m.tensor(np.random.default_rng(k).standard_normal(tuple(p.shape))
                                 .astype(np.float32)) * 0.3)
        opts = {p: m.optim.SGD([p], lr=0.1, momentum=0.9) for p in model.parameters()}

        def hook(p):
            opts[p].step()
            opts[p].zero_grad()
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(hook)
        x = m.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4))
        y = m.tensor([0, 1, 1, 0, 1, 0])
        losses = []
        for _ in range(5):
            loss = m.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            losses.append(loss.item())
        return losses, [p.detach().numpy().copy() for p in model.parameters()], \
            [p.grad for p in model.parameters()]
    (lt, pt, gt), (lg, pg, gg) = train(torch), train(tg)
    np.testing.assert_allclose(lg, lt, rtol=1e-5)
    for a, b in zip(pg, pt):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert all(g is None for g in gg) and all(g is None for g in gt)


def _step_with_backward(w, x):
    loss = (x @ w).tanh().sum()
    loss.backward()
    return loss


def _calls_with_post_hook(fn, register_at):
    log = []

    def hook(t):
        log.append(t.grad.sum().item())
        t.grad.mul_(0.5)
    tg.manual_seed(0)
    w = tg.randn(4, 3, requires_grad=True)
    out = []
    for i in range(4):
        if i == register_at:
            w.register_post_accumulate_grad_hook(hook)
        loss = fn(w, tg.ones(2, 4))
        out.append((loss.item(), w.grad.clone()))
        w.grad = None
    return out, log


@pytest.mark.parametrize("register_at", [0, 2])
def test_post_accumulate_grad_hook_with_backward_inside_compiled(register_at):
    eager, elog = _calls_with_post_hook(_step_with_backward, register_at)
    cf = tg.compile(_step_with_backward)
    with pytest.warns(UserWarning, match="post-accumulate-grad hook"):
        compiled, clog = _calls_with_post_hook(cf, register_at)
    assert clog == elog and len(elog) == 4 - register_at
    for (le, ge), (lc, gc) in zip(eager, compiled):
        assert le == lc and tg.equal(ge, gc)


def test_post_accumulate_grad_hook_after_compiled_forward_runs_in_backward():
    def run(f):
        seen = []
        w = tg.ones(4, 3, requires_grad=True)
        w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.sum().item()))
        for _ in range(3):
            f(w, tg.ones(2, 4)).backward()
        return seen
    fn = lambda w, x: (x @ w).tanh().sum()      # noqa: E731
    cf = tg.compile(fn)
    assert run(cf) == run(fn) and len(run(fn)) == 3
    assert cf.stats.eager_calls == 0


# ---------------- custom Function returning an input marked non-differentiable ----------
def _identity_function_flags(m):
    class Id(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.mark_non_differentiable(y)
            return x, y

        @staticmethod
        def backward(ctx, ga, gb):
            return ga, gb
    x, y = m.ones(2, requires_grad=True), m.ones(2)
    a, b = Id.apply(x, y)
    a.sum().backward()
    return (a is x, b is y, a.requires_grad, a.grad_fn is None, b.requires_grad,
            b.grad_fn is None, x.grad.tolist())


def test_function_returning_non_differentiable_input_matches_torch():
    assert _identity_function_flags(tg) == _identity_function_flags(_torch())


# ---------------- nn.Module hooks: kwargs, prepend, always_call, full backward ----------
def _r(t):
    return None if t is None else [round(v, 4) for v in t.flatten().tolist()]


def _module_hook_script(m):
    """Every kind of module hook, in one run; returns what the hooks saw, in order."""
    nn, log = m.nn, []

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)
            with m.no_grad():
                self.fc.weight.copy_(m.tensor([[0.1, 0.2, 0.3], [-0.1, 0.5, 0.2]]))
                self.fc.bias.fill_(0.1)

        def forward(self, x, scale=1.0):
            return self.fc(x).tanh() * scale
    net = Net()
    hs = [
        net.register_forward_pre_hook(
            lambda mod, a, k: log.append(("pre_kw", sorted(k))) or ((a[0] * 2,),
                                                                     dict(k, scale=3.0)),
            with_kwargs=True),
        net.register_forward_pre_hook(lambda mod, a: log.append("pre_first"), prepend=True),
        net.register_forward_hook(lambda mod, a, k, o: log.append(("fwd_kw", sorted(k), _r(o))),
                                  with_kwargs=True),
        net.register_forward_hook(lambda mod, a, o: log.append("fwd_first"), prepend=True),
        net.register_full_backward_hook(
            lambda mod, gi, go: log.append(("bw", [_r(g) for g in gi], [_r(g) for g in go]))),
        net.register_full_backward_pre_hook(
            lambda mod, go: log.append(("bwpre", [_r(g) for g in go])) or (go[0] * 10,)),
        net.fc.register_full_backward_hook(
            lambda mod, gi, go: log.append(("fc_bw", [_r(g) for g in gi])) or (gi[0] * 0.5,)),
    ]
    x = m.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    out = net(x, scale=2.0)
    log.append(("out", _r(out), type(out.grad_fn).__name__))
    out.sum().backward()
    log += [("xgrad", _r(x.grad)), ("wgrad", _r(net.fc.weight.grad))]
    for h in hs:
        h.remove()
    net.zero_grad()
    net(x).sum().backward()                      # all removed: no hook runs
    net.register_full_backward_hook(
        lambda mod, gi, go: log.append(("bw_no_input_grad", gi, [_r(g) for g in go])))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        net(m.ones(1, 3)).sum().backward()
    log.append(("warned", [str(x.message)[:40] for x in w]))

    class Bad(nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    bad = Bad()
    bad.register_forward_hook(lambda mod, a, o: log.append(("always", o)), always_call=True)
    bad.register_forward_hook(lambda mod, a, o: log.append("never"))
    with pytest.raises(ValueError, match="boom"):
        bad(m.ones(2))
    lin = nn.Linear(2, 2)
    with lin.register_forward_hook(lambda *a: log.append("in_with")):
        lin(m.ones(2))
    lin(m.ones(2))
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    for i, mod in enumerate(seq):
        mod.register_full_backward_hook(lambda mod, gi, go, i=i: log.append(
            ("seq", i, [None if g is None else list(g.shape) for g in gi],
             [list(g.shape) for g in go])))
    seq(m.ones(4, 2)).sum().backward()
    return log


def test_module_hooks_match_torch():
    assert _module_hook_script(tg) == _module_hook_script(_torch())


@pytest.mark.parametrize("bad", ["pre_kw_return", "bw_count", "bw_pre_count"])
def test_module_hook_errors_like_torch(bad):
    def run(m):
        lin = m.nn.Linear(2, 2)
        if bad == "pre_kw_return":
            lin.register_forward_pre_hook(lambda mod, a, k: 5, with_kwargs=True)
        elif bad == "bw_count":
            lin.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
        else:
            lin.register_full_backward_pre_hook(lambda mod, go: (go[0], go[0]))
        lin(m.ones(2, requires_grad=True)).sum().backward()
    _raises_like(run, run)


def _hooked_training(compile_mode, register_at, where):
    tg.manual_seed(0)
    model = tnn.Sequential(tnn.Linear(3, 4), tnn.Tanh(), tnn.Linear(4, 2))
    fwd = tg.compile(model) if compile_mode == "module" else model
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    target = model if where == "top" else model[2]

    def step(x):
        opt.zero_grad()
        loss = fwd(x).pow(2).sum()
        loss.backward()
        opt.step()
        return loss
    if compile_mode == "step":
        step = tg.compile(step)
    losses = []
    for i in range(4):
        if i == register_at:
            target.register_full_backward_hook(
                lambda mod, gi, go: None if gi[0] is None else (gi[0] * 0.5,))
            target.register_full_backward_pre_hook(lambda mod, go: (go[0] * 3,))
            target.register_forward_hook(lambda mod, a, k, o: o * k.get("s", 1.0),
                                         with_kwargs=True)
        losses.append(step(tg.ones(2, 3) * (i + 1)).item())
    return losses, [p.detach().clone() for p in model.parameters()], step, fwd


@pytest.mark.parametrize("compile_mode", ["module", "step"])
@pytest.mark.parametrize("register_at", [0, 2])
def test_backward_hooks_inside_compiled_run_eagerly_loudly(compile_mode, register_at):
    el, ep, _, _ = _hooked_training(None, register_at, "sub")
    with pytest.warns(UserWarning, match="full backward hook"):
        cl, cp, _, _ = _hooked_training(compile_mode, register_at, "sub")
    assert el == cl and all(tg.equal(a, b) for a, b in zip(ep, cp))


@pytest.mark.parametrize("register_at", [0, 2])
def test_compiled_module_own_backward_hooks_stay_compiled(register_at):
    el, ep, _, _ = _hooked_training(None, register_at, "top")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # PyTorch's "no input requires grad" warning
        cl, cp, _, fwd = _hooked_training("module", register_at, "top")
    assert el == cl and all(tg.equal(a, b) for a, b in zip(ep, cp))
    assert fwd._compiled.stats.eager_calls == 0


# ---------------- regression losses, softplus, cosine_similarity, pad ----------------
def _pair(m, seed=0, shape=(4, 5)):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(np.float32) * 2
    b = rng.standard_normal(shape).astype(np.float32)
    a.flat[0] = b.flat[0]                        # a zero difference: the kink
    a.flat[1] = b.flat[1] + 1.0                  # exactly at beta/delta = 1
    return m.tensor(a, requires_grad=True), m.tensor(b)


FUNCS = {
    "l1": lambda m, x, y: m.nn.functional.l1_loss(x, y),
    "l1_sum": lambda m, x, y: m.nn.functional.l1_loss(x, y, reduction="sum"),
    "l1_weight": lambda m, x, y: m.nn.functional.l1_loss(x, y, weight=y.abs() + 0.5),
    "L1Loss_none": lambda m, x, y: m.nn.L1Loss(reduction="none")(x, y).sum(),
    "smooth_l1": lambda m, x, y: m.nn.functional.smooth_l1_loss(x, y),
    "smooth_l1_beta": lambda m, x, y: m.nn.functional.smooth_l1_loss(x, y, beta=0.5),
    "smooth_l1_beta0": lambda m, x, y: m.nn.functional.smooth_l1_loss(x, y, beta=0.0),
    "SmoothL1Loss": lambda m, x, y: m.nn.SmoothL1Loss(beta=2.0, reduction="sum")(x, y),
    "huber": lambda m, x, y: m.nn.functional.huber_loss(x, y),
    "huber_delta": lambda m, x, y: m.nn.functional.huber_loss(x, y, delta=0.3),
    "huber_weight": lambda m, x, y: m.nn.functional.huber_loss(x, y, weight=y.abs()),
    "HuberLoss": lambda m, x, y: m.nn.HuberLoss(delta=1.5)(x, y),
    "softplus": lambda m, x, y: m.nn.functional.softplus(x * 15).sum(),
    "softplus_beta": lambda m, x, y: m.nn.functional.softplus(x, beta=3, threshold=2).sum(),
    "Softplus": lambda m, x, y: m.nn.Softplus(beta=0.5)(x * 100).sum(),
    "cosine": lambda m, x, y: m.nn.functional.cosine_similarity(x, y).sum(),
    "cosine_dim0": lambda m, x, y: (m.nn.functional.cosine_similarity(x, y, dim=0) ** 2).sum(),
    "cosine_bcast": lambda m, x, y: m.nn.functional.cosine_similarity(x, y[:1], dim=-1).sum(),
    "cosine_zero": lambda m, x, y: m.nn.functional.cosine_similarity(x, y * 0).sum(),
    "pad": lambda m, x, y: (m.nn.functional.pad(x, (1, 2)) * 3).sum(),
    "pad_2d_value": lambda m, x, y: m.nn.functional.pad(x, (0, 1, 2, 0), value=-1.5).exp().sum(),
    "pad_crop": lambda m, x, y: (m.nn.functional.pad(x, (-1, 1, 1, -2)) ** 2).sum(),
}


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_more_functional_matches_torch_values_and_grads(name):
    torch = _torch()
    got, want = [], []
    for m, out in ((tg, got), (torch, want)):
        x, y = _pair(m)
        v = FUNCS[name](m, x, y)
        v.backward()
        out += [v.detach().numpy(), x.grad.numpy()]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["smooth_l1", "huber_delta", "softplus", "cosine", "pad"])
def test_more_functional_compiled_equals_eager(name):
    def step(x, y):
        v = FUNCS[name](tg, x, y)
        v.backward()
        return v
    cf = tg.compile(step)
    for seed in range(3):
        x, y = _pair(tg, seed)
        xe, ye = _pair(tg, seed)
        assert tg.equal(cf(x, y), step(xe, ye)) and tg.equal(x.grad, xe.grad)
    assert cf.stats.eager_calls == 0


@pytest.mark.parametrize("bad", [
    lambda m: m.nn.functional.smooth_l1_loss(m.ones(2), m.zeros(2), beta=-1.0),
    lambda m: m.nn.functional.huber_loss(m.ones(2), m.zeros(2), delta=0.0),
    lambda m: m.nn.functional.l1_loss(m.ones(2), m.zeros(2), weight=m.ones(3)),
    lambda m: m.nn.functional.pad(m.ones(2), (1, 1, 1)),
    lambda m: m.nn.functional.pad(m.ones(2), (1, 1, 1, 1)),
    lambda m: m.nn.functional.pad(m.ones(2), (-2, -1)),
    lambda m: m.nn.functional.l1_loss(m.ones(2), m.zeros(2), reduction="avg"),
])
def test_more_functional_errors_like_torch(bad):
    _raises_like(bad, bad)


# ---------------- preamble settings and dtype limits ----------------
def test_finfo_iinfo_match_torch():
    torch = _torch()
    for name in ("float16", "float32", "float64"):
        a, b = tg.finfo(getattr(tg, name)), torch.finfo(getattr(torch, name))
        assert repr(a) == repr(b)
        for k in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
            assert getattr(a, k) == getattr(b, k), (name, k)
            assert type(getattr(a, k)) is type(getattr(b, k))
    assert repr(tg.finfo()) == repr(torch.finfo())
    for name in ("int32", "int64"):
        a, b = tg.iinfo(getattr(tg, name)), torch.iinfo(getattr(torch, name))
        assert (repr(a), a.bits, a.min, a.max, a.dtype) == (repr(b), b.bits, b.min, b.max,
                                                            b.dtype)
    _raises_like(lambda m: m.finfo(m.int64), lambda m: m.finfo(m.int64))
    _raises_like(lambda m: m.iinfo(m.float32), lambda m: m.iinfo(m.float32))


def test_preamble_settings_are_accepted_and_read_back():
    torch = _torch()
    for m in (tg, torch):
        before = m.get_float32_matmul_precision()
        m.set_float32_matmul_precision("high")
        assert m.get_float32_matmul_precision() == "high"
        with pytest.warns(UserWarning, match="is not one of"):
            m.set_float32_matmul_precision("fast")
        assert m.get_float32_matmul_precision() == "high"
        m.set_float32_matmul_precision(before)
        m.use_deterministic_algorithms(True, warn_only=True)
        assert m.are_deterministic_algorithms_enabled()
        assert m.is_deterministic_algorithms_warn_only_enabled()
        m.use_deterministic_algorithms(False)
        assert not m.are_deterministic_algorithms_enabled()
        n = m.get_num_threads()
        m.set_num_threads(1)
        assert m.get_num_threads() == 1
        m.set_num_threads(n)


# ---------------- Generator coverage ----------------
@pytest.mark.parametrize("lib", ["tracegrad", "torch"])
def test_generator_api_like_torch(lib):
    m = tg if lib == "tracegrad" else _torch()
    a, b = m.Generator(), m.Generator()
    assert a.initial_seed() == b.initial_seed() == 67280421310721
    assert m.equal(m.rand(3, generator=a), m.rand(3, generator=b))   # fresh: same start
    s = a.seed()
    assert isinstance(s, int) and a.initial_seed() == s
    assert str(a.device) == "cpu"
    assert m.manual_seed(-1).initial_seed() == 2 ** 64 - 1
    assert m.manual_seed(-2 ** 63).initial_seed() == 2 ** 63
    with pytest.raises(ValueError):
        m.manual_seed(2 ** 64)
    m.manual_seed(0)


def test_generator_made_inside_compiled_function_repeats_like_eager():
    def f(x):
        return x + tg.rand(3, generator=tg.Generator())
    cf = tg.compile(f)
    eager = [f(tg.zeros(3)) for _ in range(3)]
    compiled = [cf(tg.zeros(3)) for _ in range(3)]
    assert all(tg.equal(e, c) for e, c in zip(eager, compiled))
    assert tg.equal(compiled[0], compiled[2])
    assert cf.stats.eager_calls == 0


# ---------------- automatic mixed precision: autocast, GradScaler ----------------
def _amp_run(m, device, inf_at=(), backoff=0.5, clip=True):
    w = m.nn.Parameter(m.tensor([1.0, -2.0, 0.5]))
    opt = m.optim.SGD([w], lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # CUDA unavailable: disabled, as PyTorch
        scaler = m.amp.GradScaler(device, init_scale=1024.0, growth_interval=3,
                                  backoff_factor=backoff)
    out = []
    for i in range(8):
        opt.zero_grad()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with m.autocast(device_type="cuda", dtype=m.float16):
                loss = (w * w).sum() * (float("inf") if i in inf_at else 1.0)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        if clip:
            m.nn.utils.clip_grad_norm_([w], 1.0)
        scaler.step(opt)
        scaler.update()
        out.append((scaler.get_scale(), w.grad.tolist(), w.tolist()))
    return out, scaler.state_dict(), scaler.is_enabled()


@pytest.mark.parametrize("device,inf_at,backoff", [
    ("cpu", (), 0.5), ("cpu", (2, 3), 0.5), ("cpu", (1,), 0.3), ("cuda", (), 0.5)])
def test_grad_scaler_matches_torch(device, inf_at, backoff):
    torch = _torch()
    got, want = _amp_run(tg, device, inf_at, backoff), _amp_run(torch, device, inf_at, backoff)
    assert got[1:] == want[1:]                   # state_dict, enabled
    for (gs, gg, gw), (ws, wg, ww) in zip(got[0], want[0]):
        assert gs == ws                          # the same scale, step for step
        np.testing.assert_allclose(gg, wg, rtol=1e-6)     # same skipped steps
        np.testing.assert_allclose(gw, ww, rtol=1e-6)


@pytest.mark.parametrize("case", ["unscale_twice", "unscale_after_step", "step_twice",
                                  "update_without_scale", "load_empty"])
def test_grad_scaler_errors_like_torch(case):
    def run(m):
        w = m.nn.Parameter(m.ones(2))
        opt = m.optim.SGD([w], lr=0.1)
        s = m.amp.GradScaler("cpu")
        if case == "update_without_scale":
            s.update()
        if case == "load_empty":
            s.load_state_dict({})
        s.scale((w * 2).sum()).backward()
        if case == "unscale_twice":
            s.unscale_(opt)
            s.unscale_(opt)
        s.step(opt)
        if case == "unscale_after_step":
            s.unscale_(opt)
        s.step(opt)
    _raises_like(run, run)


def test_amp_on_a_cpu_machine_warns_and_disables_like_torch():
    torch = _torch()
    for m in (tg, torch):
        with pytest.warns(UserWarning, match="CUDA is not available"):
            s = m.amp.GradScaler()
        assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
        with pytest.warns(FutureWarning, match="deprecated"):
            m.cuda.amp.GradScaler(enabled=False)
        with pytest.warns(UserWarning, match="Disabling autocast"):
            with m.autocast(device_type="cuda"):
                pass
        with m.amp.autocast("cpu", enabled=False):
            assert (m.ones(2, 2) @ m.ones(2, 2)).dtype is m.float32
    with pytest.raises(NotImplementedError, match="autocast"):
        tg.autocast(device_type="cpu")


def _scaled_calls(compiled, enabled):
    w = tg.nn.Parameter(tg.tensor([1.0, -2.0, 0.5]))
    opt = tg.optim.SGD([w], lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scaler = tg.amp.GradScaler("cpu" if enabled else "cuda", init_scale=1024.0,
                                   growth_interval=2)

    def fwd_bwd(x):                              # step and update stay outside
        opt.zero_grad()
        loss = (w * w * x).sum()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        return loss
    fn = tg.compile(fwd_bwd) if compiled else fwd_bwd
    out = []
    for i in range(5):
        loss = fn(tg.ones(3) * (float("inf") if i == 1 else 1.0))
        scaler.step(opt)
        scaler.update()
        out.append([loss.item(), scaler.get_scale()] + w.tolist())
    return np.array(out), fn


def test_enabled_grad_scaler_inside_compiled_runs_eagerly_loudly():
    eager, _ = _scaled_calls(False, True)
    with pytest.warns(UserWarning, match="GradScaler"):
        compiled, _ = _scaled_calls(True, True)
    np.testing.assert_array_equal(compiled, eager)


def test_disabled_grad_scaler_inside_compiled_stays_compiled():
    eager, _ = _scaled_calls(False, False)
    compiled, fn = _scaled_calls(True, False)
    np.testing.assert_array_equal(compiled, eager)      # NaN where eager has NaN
    assert fn.stats.eager_calls == 0


# ---------------- anomaly detection ----------------
def _anomaly_script(m):
    log = []
    x = m.tensor([0.0, 1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        ctx = m.autograd.detect_anomaly()
    with ctx:
        log.append(m.is_anomaly_enabled())
        with pytest.raises(RuntimeError) as e:
            (x / x).sum().backward()
        log.append(str(e.value).splitlines()[0][-60:])
    log.append(m.is_anomaly_enabled())
    with m.autograd.set_detect_anomaly(True):
        log.append((m.is_anomaly_enabled(), m.is_anomaly_check_nan_enabled()))
        with pytest.raises(RuntimeError) as e:
            m.sqrt(x - 1).sum().backward()
        log.append(str(e.value).splitlines()[0][-60:])
        w = m.tensor([float("nan")], requires_grad=True)
        (w * 2).sum().backward()                 # a NaN input, finite gradients: fine
        log.append(w.grad.tolist())
    m.autograd.set_detect_anomaly(True, check_nan=False)
    x.grad = None
    (x / x).sum().backward()                     # not checked
    log.append(np.isnan(x.grad.numpy()).tolist())
    m.autograd.set_detect_anomaly(False)
    log.append(m.is_anomaly_enabled())
    return log


def test_anomaly_detection_matches_torch():
    assert _anomaly_script(tg) == _anomaly_script(_torch())


def test_anomaly_detection_runs_compiled_functions_eagerly():
    def f(x):
        y = tg.where(x > 0, tg.sqrt(x), tg.zeros_like(x))   # NaN gradient dropped by where
        y.sum().backward()
        return y
    cf = tg.compile(f)
    cf(tg.tensor([1.0, 4.0], requires_grad=True))            # compiled while the mode is off
    with tg.autograd.set_detect_anomaly(True):
        with pytest.raises(RuntimeError, match="SqrtBackward0' returned nan"):
            f(tg.tensor([-1.0, 4.0], requires_grad=True))
        with pytest.warns(UserWarning, match="anomaly detection"):
            with pytest.raises(RuntimeError, match="SqrtBackward0' returned nan"):
                cf(tg.tensor([-1.0, 4.0], requires_grad=True))
    x, xe = (tg.tensor([-1.0, 4.0], requires_grad=True) for _ in range(2))
    cf(x)                                        # off again: compiled, no error
    f(xe)
    np.testing.assert_array_equal(x.grad.numpy(), xe.grad.numpy())   # 0 * nan, as eager
    assert cf.stats.eager_calls == 1


# ---------------- nn.init.trunc_normal_ / orthogonal_ ----------------
def test_trunc_normal_has_the_truncated_distribution():
    from statistics import NormalDist
    tg.manual_seed(0)
    w = tg.nn.Parameter(tg.empty(200_000))
    out = tg.nn.init.trunc_normal_(w, mean=0.5, std=2.0, a=-1.0, b=3.0)
    assert out is w and w.requires_grad and w.grad_fn is None
    x = w.detach().numpy()
    assert x.min() >= -1.0 and x.max() <= 3.0
    nd = NormalDist()
    al, be = (-1.0 - 0.5) / 2.0, (3.0 - 0.5) / 2.0
    z = nd.cdf(be) - nd.cdf(al)
    mean = 0.5 + 2.0 * (nd.pdf(al) - nd.pdf(be)) / z
    assert abs(x.mean() - mean) < 0.01
    for q in (0.1, 0.5, 0.9):                   # quantiles of the truncated law
        want = 0.5 + 2.0 * nd.inv_cdf(nd.cdf(al) + q * z)
        assert abs(np.quantile(x, q) - want) < 0.02
    tg.manual_seed(0)
    again = tg.nn.init.trunc_normal_(tg.empty(200_000), mean=0.5, std=2.0, a=-1.0, b=3.0)
    assert tg.equal(again, w.detach())
    with pytest.warns(UserWarning, match="more than 2 std"):
        tg.nn.init.trunc_normal_(tg.empty(3), mean=5.0)


@pytest.mark.parametrize("shape,gain", [((3, 5), 2.0), ((5, 3), 1.0), ((6, 2, 2), 0.5)])
def test_orthogonal_is_orthogonal(shape, gain):
    w = tg.nn.init.orthogonal_(tg.empty(*shape), gain=gain)
    m = w.reshape(shape[0], -1).numpy().astype(np.float64) / gain
    small = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(small, np.eye(small.shape[0]), atol=1e-5)
    _raises_like(lambda m: m.nn.init.orthogonal_(m.empty(3)),
                 lambda m: m.nn.init.orthogonal_(m.empty(3)))


def test_init_inside_compiled_runs_eagerly_loudly():
    def f(w):
        with tg.no_grad():
            tg.nn.init.trunc_normal_(w, std=0.02)
        return w * 2
    cf = tg.compile(f)
    tg.manual_seed(3)
    eager = [f(tg.empty(4)).clone() for _ in range(3)]
    tg.manual_seed(3)
    with pytest.warns(UserWarning, match="trunc_normal_"):
        compiled = [cf(tg.empty(4)).clone() for _ in range(3)]
    assert all(tg.equal(a, b) for a, b in zip(eager, compiled))


# ---------------- utils.checkpoint ----------------
def _checkpoint_script(m, reentrant):
    import importlib
    checkpoint = importlib.import_module(m.__name__ + ".utils.checkpoint").checkpoint
    bn, lin = m.nn.BatchNorm1d(2), m.nn.Linear(2, 2)
    with m.no_grad():
        lin.weight.copy_(m.tensor([[0.5, -0.3], [0.2, 0.8]]))
        lin.bias.fill_(0.1)
    x = m.tensor(np.arange(8, dtype=np.float32).reshape(4, 2) / 3, requires_grad=True)
    calls = []

    def f(a):
        calls.append(m.is_grad_enabled())
        return m.nn.functional.dropout(bn(lin(a)).tanh(), 0.3)
    m.manual_seed(0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = checkpoint(f, x, use_reentrant=reentrant)
        y_noin = checkpoint(lin, m.ones(1, 2), use_reentrant=reentrant)
    after_forward = (list(calls), bn.running_mean.numpy().copy(), y.requires_grad)
    mask = y.detach().numpy() != 0
    (y * y).sum().backward()
    return dict(after_forward=after_forward, calls=calls, mask=mask,
                running=bn.running_mean.numpy().copy(), tracked=bn.num_batches_tracked.item(),
                xgrad=x.grad.numpy().copy(), wgrad=lin.weight.grad.numpy().copy(),
                noin=y_noin.requires_grad,
                warned=sorted({str(x.message)[:30] for x in w}),
                consistent=bool(((x.grad.numpy() != 0).any(1) | ~mask.any(1)).all()))


@pytest.mark.parametrize("reentrant", [True, False, None])
def test_checkpoint_matches_torch(reentrant):
    torch = _torch()
    got, want = _checkpoint_script(tg, reentrant), _checkpoint_script(torch, reentrant)
    for k in ("calls", "tracked", "noin", "warned", "consistent"):
        assert got[k] == want[k], k
    assert got["after_forward"][0] == want["after_forward"][0]
    assert got["after_forward"][2] == want["after_forward"][2]
    np.testing.assert_allclose(got["after_forward"][1], want["after_forward"][1], rtol=1e-6)
    np.testing.assert_allclose(got["running"], want["running"], rtol=1e-6)   # updated twice
    plain = _checkpoint_free_grads(got["mask"])
    np.testing.assert_allclose(got["xgrad"], plain[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got["wgrad"], plain[1], rtol=1e-5, atol=1e-7)


def _checkpoint_free_grads(mask):
    """The same computation without checkpointing, with the same dropout mask."""
    bn, lin = tnn.BatchNorm1d(2), tnn.Linear(2, 2)
    with tg.no_grad():
        lin.weight.copy_(tg.tensor([[0.5, -0.3], [0.2, 0.8]]))
        lin.bias.fill_(0.1)
    x = tg.tensor(np.arange(8, dtype=np.float32).reshape(4, 2) / 3, requires_grad=True)
    y = bn(lin(x)).tanh() * tg.tensor(mask.astype(np.float32) / 0.7)
    (y * y).sum().backward()
    return x.grad.numpy(), lin.weight.grad.numpy()


def test_checkpoint_keyword_arguments_like_torch():
    def run(m):
        import importlib
        ck = importlib.import_module(m.__name__ + ".utils.checkpoint").checkpoint
        x = m.ones(2, requires_grad=True)
        assert ck(lambda a, b=1: a * b, x, b=3, use_reentrant=False).tolist() == [3.0, 3.0]
        ck(lambda a, b=1: a * b, x, b=3, use_reentrant=True)
    _raises_like(run, run)


def test_checkpoint_inside_compiled_runs_eagerly_loudly():
    from tracegrad.utils.checkpoint import checkpoint
    lin = tnn.Linear(3, 3)
    counter = {"n": 0}

    def block(a):
        counter["n"] += 1
        return lin(a).tanh()

    def step(x):
        y = checkpoint(block, x, use_reentrant=False)
        y.sum().backward()
        return y
    cf = tg.compile(step)
    x1, x2 = tg.ones(2, 3, requires_grad=True), tg.ones(2, 3, requires_grad=True)
    step(x1)
    n_eager = counter["n"]
    lin.zero_grad()
    with pytest.warns(UserWarning, match="checkpoint"):
        cf(x2)
    assert counter["n"] == 2 * n_eager == 4 and tg.equal(x1.grad, x2.grad)


# ---------------- optim.RMSprop ----------------
RMS_OPTIONS = [dict(), dict(lr=0.05, momentum=0.9), dict(centered=True, lr=0.03),
               dict(centered=True, momentum=0.5, weight_decay=0.1, alpha=0.9, eps=1e-3),
               dict(maximize=True)]


def _rms_run(m, **kw):
    w = m.nn.Parameter(m.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)))
    opt = m.optim.RMSprop([w], **kw)
    out = []
    for i in range(8):
        w.grad = m.tensor(np.cos(np.arange(6, dtype=np.float32).reshape(2, 3) * (i + 1)))
        opt.step()
        out.append(w.detach().numpy().copy())
    sd = opt.state_dict()
    st = sd["state"][0]
    return (np.array(out), list(st), sd["param_groups"][0], st["step"].item(),
            st["step"].dtype is getattr(m, "float32"))


@pytest.mark.parametrize("kw", RMS_OPTIONS, ids=[str(k) for k in RMS_OPTIONS])
def test_rmsprop_matches_torch(kw):
    got, want = _rms_run(tg, **kw), _rms_run(_torch(), **kw)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    assert got[1:] == want[1:]                   # state layout, groups, step count


@pytest.mark.parametrize("bad", ["lr", "eps", "momentum", "weight_decay", "alpha"])
def test_rmsprop_rejects_bad_options_like_torch(bad):
    def run(m):
        m.optim.RMSprop([m.nn.Parameter(m.ones(2))], **{bad: -0.5})
    _raises_like(run, run)


def test_rmsprop_compiled_step_equals_eager_and_follows_the_scheduler():
    def train(compiled):
        tg.manual_seed(0)
        model = tnn.Sequential(tnn.Linear(3, 4), tnn.Tanh(), tnn.Linear(4, 1))
        opt = tg.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.9, centered=True)
        sched = tg.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)

        def step(x, y):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        fn = tg.compile(step) if compiled else step
        losses = []
        for i in range(6):
            x = tg.tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3) * (i + 1))
            losses.append(fn(x, x.sum(1, keepdim=True)).item())
            sched.step()
        return losses, [p.detach().clone() for p in model.parameters()], fn
    (le, pe, _), (lc, pc, fn) = train(False), train(True)
    assert le == lc and all(tg.equal(a, b) for a, b in zip(pe, pc))
    assert fn.stats.eager_calls == 0 and fn.stats.traces <= 2


# ---------------- linalg norms ----------------
NORMS = {
    "vector": lambda m, x: m.linalg.vector_norm(x),
    "vector_0": lambda m, x: m.linalg.vector_norm(x, 0).detach() + x.sum() * 0,
    "vector_inf_dim": lambda m, x: m.linalg.vector_norm(x, float("inf"), dim=1).sum(),
    "vector_ninf": lambda m, x: m.linalg.vector_norm(x, -float("inf")),
    "vector_1_keep": lambda m, x: m.linalg.vector_norm(x, 1, dim=(0, 1), keepdim=True).sum(),
    "vector_3": lambda m, x: m.linalg.vector_norm(x, 3, dim=0).sum(),
    "vector_f64": lambda m, x: m.linalg.vector_norm(x, dtype=m.float64),
    "norm": lambda m, x: m.linalg.norm(x),
    "norm_fro": lambda m, x: m.linalg.norm(x, "fro"),
    "norm_dim": lambda m, x: m.linalg.norm(x, dim=1).sum(),
    "norm_1": lambda m, x: m.linalg.norm(x, 1),
    "norm_inf": lambda m, x: m.linalg.norm(x, float("inf")),
    "norm_vec": lambda m, x: m.linalg.norm(x[0], 1),
    "matrix": lambda m, x: m.linalg.matrix_norm(x),
    "matrix_m1_keep": lambda m, x: m.linalg.matrix_norm(x, -1, keepdim=True).sum(),
    "matrix_ninf_batch": lambda m, x: m.linalg.matrix_norm(
        x.reshape(1, 3, 2).expand(2, 3, 2) * 1.5, -float("inf")).sum(),
}


@pytest.mark.parametrize("name", sorted(NORMS))
def test_linalg_norms_match_torch(name):
    torch = _torch()
    res = []
    for m in (tg, torch):
        x = m.tensor([[3.0, -4.0], [0.5, 1.0], [2.0, -0.25]], requires_grad=True)
        v = NORMS[name](m, x)
        v.sum().backward()
        res.append((v.detach().numpy(), x.grad.numpy(), str(v.dtype), type(v.grad_fn).__name__))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-6)
    assert res[0][2:] == res[1][2:]


def test_linalg_norm_errors_like_torch():
    _raises_like(lambda m: m.linalg.vector_norm(m.tensor([1, 2])),
                 lambda m: m.linalg.vector_norm(m.tensor([1, 2])))
    _raises_like(lambda m: m.linalg.norm(m.ones(2, 2, 2), 1),
                 lambda m: m.linalg.norm(m.ones(2, 2, 2), 1))


def test_linalg_grad_norm_logging_compiled_equals_eager():
    def step(w, x):
        loss = (x @ w).tanh().sum()
        loss.backward()
        return tg.linalg.vector_norm(w.grad)
    cf = tg.compile(step)
    for i in range(3):
        w1, w2 = (tg.full((3, 2), 0.1 * (i + 1), requires_grad=True) for _ in range(2))
        x = tg.ones(4, 3)
        assert tg.equal(cf(w1, x), step(w2, x)) and tg.equal(w1.grad, w2.grad)
    assert cf.stats.eager_calls == 0


def test_module_without_init_call_raises_like_torch():
    def run(m):
        class M(m.nn.Module):
            def __init__(self):
                pass

            def forward(self, x):
                return x
        M()(1)
    _raises_like(run, run)
