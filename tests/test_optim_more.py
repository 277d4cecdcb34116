"""NAdam, RAdam, Adamax, Adadelta, Rprop and ASGD against PyTorch, and compiled against eager.

Against torch: 10 steps in float64 with the same gradients set by hand, parameters and every
state tensor within 1e-12 (PyTorch's fused multiply-adds round once where tracegrad rounds
twice: a few ulps); `state_dict()` in torch's exact structure, crossing libraries both ways
and resuming; constructor errors with torch's type and text. Compiled: the whole training
step (`zero_grad / backward / step / scheduler.step`) inside `tracegrad.compile` equals eager
bit for bit while the scheduler changes lr every call, without a re-trace per step.
"""
import warnings

import numpy as np
import pytest

import tracegrad as tg

nn, F = tg.nn, tg.nn.functional
STEPS = 10

CASES = [
    ("NAdam", {}), ("NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", {}), ("RAdam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1)),
    ("RAdam", dict(weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("Adamax", {}), ("Adamax", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, maximize=True)),
    ("Adadelta", {}), ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1,
                                        maximize=True)),
    ("Rprop", {}), ("Rprop", dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2),
                                  maximize=True)),
    ("ASGD", {}), ("ASGD", dict(lr=0.1, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1,
                                maximize=True)),
]
IDS = [f"{n}-{i}" for i, (n, _) in enumerate(CASES)]


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _data(seed=0, dtype="float64", steps=STEPS):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(dtype) for s in [(4, 3), (3,), ()]]
    grads = [[rng.standard_normal(a.shape).astype(dtype) for a in init] for _ in range(steps)]
    return init, grads


def _run(lib, name, kw, init, grads, groups=False, opt=None, ps=None):
    if ps is None:
        ps = [lib.tensor(a.copy(), requires_grad=True) for a in init]
    if opt is None:
        params = [{"params": ps[:2]}, {"params": ps[2:], "lr": 0.003}] if groups else ps
        opt = getattr(lib.optim, name)(params, **kw)
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = lib.tensor(g.copy())
        opt.step()
    return ps, opt


def _close_states(sa, sb, tol):
    assert list(sa) == list(sb) == ["state", "param_groups"]
    assert sa["param_groups"] == sb["param_groups"]
    assert list(sa["state"]) == list(sb["state"])
    for k in sa["state"]:
        ea, eb = sa["state"][k], sb["state"][k]
        assert list(ea) == list(eb), k                      # same keys in the same order
        for key in ea:
            a, b = ea[key], eb[key]
            assert tuple(a.shape) == tuple(b.shape) and str(a.dtype) == str(b.dtype), key
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=tol, err_msg=key)


@pytest.mark.parametrize("name,kw", CASES, ids=IDS)
def test_ten_steps_match_torch_in_float64(torch, name, kw):
    init, grads = _data()
    pa, oa = _run(tg, name, kw, init, grads)
    pb, ob = _run(torch, name, kw, init, grads)
    for a, b in zip(pa, pb):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=0, atol=1e-12)
    _close_states(oa.state_dict(), ob.state_dict(), 1e-12)


@pytest.mark.parametrize("name,kw", CASES[::2], ids=IDS[::2])
def test_two_groups_in_float32_match_torch(torch, name, kw):
    init, grads = _data(1, "float32")
    pa, oa = _run(tg, name, kw, init, grads, groups=True)
    pb, ob = _run(torch, name, kw, init, grads, groups=True)
    for a, b in zip(pa, pb):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    _close_states(oa.state_dict(), ob.state_dict(), 1e-5)


def _to(lib, sd):
    """`sd` with its tensors rebuilt in `lib` (same values and dtypes)."""
    if hasattr(sd, "numpy") and hasattr(sd, "dtype"):
        return lib.tensor(sd.detach().numpy().copy())
    if isinstance(sd, dict):
        return {k: _to(lib, v) for k, v in sd.items()}
    if isinstance(sd, list):
        return [_to(lib, v) for v in sd]
    return sd


@pytest.mark.parametrize("name,kw", CASES[1::2], ids=IDS[1::2])
def test_state_dict_crosses_to_torch_and_back_and_resumes(torch, name, kw):
    init, grads = _data(2)
    pa, oa = _run(tg, name, kw, init, grads[:4], groups=True)
    # torch continues from tracegrad's state, and a fresh tracegrad from torch's
    pb = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in pa]
    ob = getattr(torch.optim, name)([{"params": pb[:2]}, {"params": pb[2:]}], **kw)
    ob.load_state_dict(_to(torch, oa.state_dict()))
    pc = [tg.tensor(p.detach().numpy(), requires_grad=True) for p in pa]
    oc = getattr(tg.optim, name)([{"params": pc[:2]}, {"params": pc[2:]}], **kw)
    oc.load_state_dict(_to(tg, ob.state_dict()))
    # lossless; loading casts 0-d state but `step` to the parameters' dtype, as torch does
    _close_states(oc.state_dict(), ob.state_dict(), 0)
    _run(tg, name, kw, None, grads[4:], opt=oa, ps=pa)
    _run(torch, name, kw, None, grads[4:], opt=ob, ps=pb)
    _run(tg, name, kw, None, grads[4:], opt=oc, ps=pc)
    for a, b, c in zip(pa, pb, pc):
        # (a kept NAdam's mu_product, ASGD's eta and mu in float32: not bit-close to b)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=0, atol=1e-9)
        np.testing.assert_allclose(c.detach().numpy(), b.detach().numpy(), rtol=0, atol=1e-12)
    assert oc.param_groups[1]["lr"] == 0.003


@pytest.mark.parametrize("name", ["NAdam", "Rprop", "ASGD"])
def test_add_param_group_mid_run_matches_torch(torch, name):
    init, grads = _data(3)
    runs = []
    for lib in (tg, torch):
        ps = [lib.tensor(a.copy(), requires_grad=True) for a in init]
        opt = getattr(lib.optim, name)(ps[:2], lr=0.01)
        for t, gs in enumerate(grads):
            if t == 4:
                opt.add_param_group({"params": ps[2:], "lr": 0.05})
            for p, g in zip(ps, gs):
                p.grad = lib.tensor(g.copy())
            opt.step()
        runs.append((ps, opt))
    (pa, oa), (pb, ob) = runs
    for a, b in zip(pa, pb):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=0, atol=1e-12)
    _close_states(oa.state_dict(), ob.state_dict(), 1e-12)


BAD = [
    ("NAdam", dict(lr=-1)), ("NAdam", dict(eps=-1)), ("NAdam", dict(betas=(1.0, 0.9))),
    ("NAdam", dict(betas=(0.9, -0.1))), ("NAdam", dict(weight_decay=-1)),
    ("NAdam", dict(momentum_decay=-1)), ("RAdam", dict(lr=-0.5)), ("RAdam", dict(eps=-1e-8)),
    ("RAdam", dict(betas=(0.5, 1.5))), ("Adamax", dict(weight_decay=-0.1)),
    ("Adamax", dict(betas=(-0.1, 0.9))), ("Adadelta", dict(lr=-1)),
    ("Adadelta", dict(rho=1.5)), ("Adadelta", dict(eps=-1)),
    ("Adadelta", dict(weight_decay=-1)), ("Rprop", dict(lr=-1)),
    ("Rprop", dict(etas=(1.2, 0.5))), ("Rprop", dict(etas=(0.0, 1.2))),
    ("ASGD", dict(lr=-1)), ("ASGD", dict(weight_decay=-1)),
]


@pytest.mark.parametrize("name,kw", BAD)
def test_invalid_hyper_parameters_raise_torchs_errors(torch, name, kw):
    with pytest.raises(Exception) as want:
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kw)
    with pytest.raises(type(want.value)) as got:
        getattr(tg.optim, name)([tg.zeros(2, requires_grad=True)], **kw)
    assert str(got.value).splitlines()[0] == str(want.value)


@pytest.mark.parametrize("name", ["NAdam", "RAdam", "Adamax", "Adadelta", "Rprop", "ASGD"])
def test_defaults_and_repr_match_torch(torch, name):
    a = getattr(tg.optim, name)([tg.zeros(2, requires_grad=True)])
    b = getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)])
    assert a.defaults == b.defaults
    assert repr(a) == repr(b)


# --- compiled == eager, bit for bit, with a scheduler changing lr every call ---

COMPILED = [
    ("NAdam", dict(lr=0.01)), ("NAdam", dict(lr=0.01, weight_decay=0.1)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01)), ("RAdam", dict(lr=0.01, betas=(0.9, 0.9), weight_decay=0.1)),
    ("Adamax", dict(lr=0.01, weight_decay=0.1, maximize=True)),
    ("Adadelta", dict(weight_decay=0.1)), ("Rprop", dict()),
    ("ASGD", dict(lr=0.05, t0=2, lambd=0.01, weight_decay=0.1)),
    ("Adam", dict(lr=0.01)),
]


def _eager_and_compiled(name, kw, dtype, steps=6):
    out = []
    for compiled in (False, True):
        tg.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).to(dtype)
        opt = getattr(tg.optim, name)(model.parameters(), **kw)
        sched = tg.optim.lr_scheduler.ExponentialLR(opt, 0.8)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            return loss
        f = tg.compile(step) if compiled else step
        seen = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(steps):
                seen.append(f(tg.randn(6, 4, dtype=dtype), tg.randint(0, 3, (6,))).item())
                seen += [p.detach().numpy().tobytes() for p in model.parameters()]
                seen += [v.numpy().tobytes() for s in opt.state.values() for v in s.values()]
                seen.append(opt.param_groups[0]["lr"])
        out.append((seen, getattr(f, "stats", None)))
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", COMPILED, ids=[f"{n}-{i}" for i, (n, _) in
                                                    enumerate(COMPILED)])
def test_compiled_training_step_equals_eager_bitwise(name, kw, dtype):
    (eager, _), (compiled, stats) = _eager_and_compiled(name, kw, getattr(tg, dtype))
    assert compiled == eager
    # the first call makes the optimizer's state (not cached); then one path for good
    assert stats.traces <= 2 and stats.eager_calls == 0, str(stats)


def test_radam_warm_up_ending_mid_run_is_no_guard():
    """RAdam's rho_t > 5 flips at step 6 with beta2=0.999: a `where`, no re-trace."""
    (eager, _), (compiled, stats) = _eager_and_compiled("RAdam", dict(lr=0.01), tg.float64,
                                                        steps=9)
    assert compiled == eager
    assert stats.traces <= 2, str(stats)


def test_zero_dim_float64_pow_rounds_like_python():
    """Note [Scalar powers]: a compiled step's bias correction is a 0-d float64 pow."""
    rng = np.random.default_rng(0)
    for a, b in zip(rng.uniform(0.5, 1, 300), rng.uniform(0, 40, 300)):
        got = (tg.tensor(a, dtype=tg.float64) ** tg.tensor(b, dtype=tg.float64)).item()
        assert got == a ** b


@pytest.mark.parametrize("name,kw", [
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01, betas=(0.9, 0.5), weight_decay=0.1)),      # never rectified
    ("Adamax", dict(lr=0.01, weight_decay=0.1)), ("Adadelta", dict(weight_decay=0.1)),
    ("Rprop", dict(maximize=True)), ("ASGD", dict(lr=0.3, t0=2, lambd=0.7, weight_decay=0.1))])
def test_compiled_update_of_a_zero_dim_float32_parameter_equals_eager(name, kw):
    """Note [Hyper-parameters meet zero-dim tensors] in _effects.py: a 0-d float32 parameter
    (a temperature) meets runtime hyper-parameters in its own precision, as eager's."""
    out = []
    for compiled in (False, True):
        tg.manual_seed(0)
        t = tg.tensor(0.7, requires_grad=True)
        w = tg.randn(3, requires_grad=True)
        opt = getattr(tg.optim, name)([{"params": [t]}, {"params": [w], "lr": 0.02}], **kw)
        sched = tg.optim.lr_scheduler.ExponentialLR(opt, 0.9)

        def step(x):
            opt.zero_grad()
            loss = ((x * w).sum() / t).sin() + t * t
            loss.backward()
            opt.step()
            sched.step()
            return loss
        f = tg.compile(step) if compiled else step
        seen = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(6):
                seen.append(f(tg.randn(3)).item())
                seen += [p.detach().numpy().tobytes() for p in (t, w)]
                seen += [v.numpy().tobytes() for s in opt.state.values() for v in s.values()]
        out.append((seen, getattr(f, "stats", None)))
    (eager, _), (comp, stats) = out
    assert comp == eager
    assert stats.traces <= 2 and stats.eager_calls == 0, str(stats)


@pytest.mark.parametrize("name,kw,key,values", [
    ("NAdam", dict(lr=0.01), "momentum_decay", lambda k: 0.004 * (k + 1)),
    ("NAdam", dict(lr=0.01), "betas", lambda k: (0.9 - 0.02 * k, 0.999)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1), "weight_decay", lambda k: 0.1 + 0.05 * k),
    ("Adadelta", dict(), "rho", lambda k: 0.9 - 0.05 * k),
    ("Rprop", dict(), "etas", lambda k: (0.5 - 0.05 * k, 1.2 + 0.1 * k)),
    ("Rprop", dict(), "step_sizes", lambda k: (1e-6, 0.05 * (k + 1))),
    ("ASGD", dict(lr=0.05, t0=3), "lambd", lambda k: 1e-4 * (k + 1)),
    ("ASGD", dict(lr=0.05), "t0", lambda k: float(5 - k)),
])
def test_hyper_parameters_set_by_hand_take_effect_without_retracing(name, kw, key, values):
    out = []
    for compiled in (False, True):
        tg.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
        opt = getattr(tg.optim, name)(model.parameters(), **kw)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        f = tg.compile(step) if compiled else step
        seen = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for k in range(6):
                opt.param_groups[0][key] = values(k)
                seen.append(f(tg.randn(6, 4), tg.randint(0, 3, (6,))).item())
                seen += [p.detach().numpy().tobytes() for p in model.parameters()]
                seen += [v.numpy().tobytes() for s in opt.state.values() for v in s.values()]
        out.append((seen, getattr(f, "stats", None)))
    (eager, _), (comp, stats) = out
    assert comp == eager
    assert stats.traces <= 2 and stats.eager_calls == 0, str(stats)


@pytest.mark.parametrize("name,key,values", [
    ("NAdam", "momentum_decay", lambda k: 0.004 * (k + 1)),
    ("Adadelta", "rho", lambda k: 0.9 - 0.05 * k),
    ("Rprop", "etas", lambda k: (0.5 - 0.05 * k, 1.2 + 0.1 * k)),
    ("ASGD", "t0", lambda k: float(5 - k)),
])
def test_a_path_that_does_not_step_never_retraces_on_hyper_parameters(name, key, values):
    """Note [Hyper-parameters unread] in compiler/state_unread.py: `_runtime_keys`."""
    model = nn.Linear(4, 2)
    opt = getattr(tg.optim, name)(model.parameters())

    @tg.compile
    def evaluate(x):
        opt.zero_grad()
        return model(x).sum()
    for k in range(4):
        opt.param_groups[0][key] = values(k)
        evaluate(tg.randn(3, 4))
    assert evaluate.stats.traces == 1, str(evaluate.stats)
