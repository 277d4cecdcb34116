"""tracegrad.optim against PyTorch: SGD and Adam trajectories, groups, state and errors.

Trajectory tests train the same float64 model (weights copied through state_dict) with the
same optimizer settings in both libraries for 20 steps and compare every parameter after
every step; PyTorch runs its single-tensor path (`foreach=False`), the one tracegrad mirrors.
"""
import copy

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn, optim


def _torch():
    return pytest.importorskip("torch")


def _np(t):
    return np.array(t.detach().numpy())


def _models(dtype="float64"):
    torch = _torch()
    tg.manual_seed(0)
    gd = getattr(tg, dtype)
    g = nn.Sequential(nn.Linear(4, 5, dtype=gd), nn.Tanh(), nn.Linear(5, 2, dtype=gd))
    t = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(),
                            torch.nn.Linear(5, 2)).to(getattr(torch, dtype))
    t.load_state_dict({k: torch.from_numpy(_np(v)) for k, v in g.state_dict().items()})
    return g, t


def _data(dtype="float64"):
    rng = np.random.default_rng(0)
    return rng.standard_normal((16, 4)).astype(dtype), rng.standard_normal((16, 2)).astype(dtype)


def _train(lib, model, opt, x, y, steps, record):
    """`steps` updates of mean squared error; `record()` after each one."""
    x, y = lib.tensor(x), lib.tensor(y)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        out.append(record())
    return out


def _params(model):
    return [_np(p) for p in model.parameters()]


def _run_both(g_opt_fn, t_opt_fn, steps=20, dtype="float64"):
    torch = _torch()
    g, t = _models(dtype)
    x, y = _data(dtype)
    gs = _train(tg, g, g_opt_fn(g), x, y, steps, lambda: _params(g))
    ts = _train(torch, t, t_opt_fn(t), x, y, steps, lambda: _params(t))
    return gs, ts


def _assert_same_trajectory(gs, ts, rtol, atol):
    for step, (ga, ta) in enumerate(zip(gs, ts)):
        for a, b in zip(ga, ta):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"step {step}")


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3),
    dict(lr=0.05, momentum=0.9, nesterov=True),
    dict(lr=0.1, weight_decay=0.01),
    dict(lr=0.05, momentum=0.5, weight_decay=0.1, nesterov=True),
    dict(lr=0.01, momentum=0.9, maximize=True),
]


@pytest.mark.parametrize("kw", SGD_CASES, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_sgd_trajectory_matches_torch(kw):
    torch = _torch()
    gs, ts = _run_both(lambda m: optim.SGD(m.parameters(), **kw),
                       lambda m: torch.optim.SGD(m.parameters(), foreach=False, **kw))
    _assert_same_trajectory(gs, ts, 1e-9, 1e-12)
    assert not np.allclose(gs[0][0], gs[-1][0])        # the parameters really moved


ADAM_CASES = [
    dict(),
    dict(lr=0.01, betas=(0.8, 0.99)),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, weight_decay=0.1, amsgrad=True, eps=1e-6),
    dict(lr=0.01, maximize=True),
    dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
]


@pytest.mark.parametrize("kw", ADAM_CASES, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items())
                         or "defaults")
def test_adam_trajectory_matches_torch(kw):
    torch = _torch()
    gs, ts = _run_both(lambda m: optim.Adam(m.parameters(), **kw),
                       lambda m: torch.optim.Adam(m.parameters(), foreach=False, **kw))
    _assert_same_trajectory(gs, ts, 1e-8, 1e-11)


def test_adamw_matches_torch():
    torch = _torch()
    gs, ts = _run_both(lambda m: optim.AdamW(m.parameters(), lr=0.01),
                       lambda m: torch.optim.AdamW(m.parameters(), lr=0.01, foreach=False))
    _assert_same_trajectory(gs, ts, 1e-8, 1e-11)


def test_adam_float32_matches_torch():
    torch = _torch()
    gs, ts = _run_both(lambda m: optim.Adam(m.parameters(), lr=0.01),
                       lambda m: torch.optim.Adam(m.parameters(), lr=0.01, foreach=False),
                       steps=10, dtype="float32")
    _assert_same_trajectory(gs, ts, 1e-4, 1e-5)
    assert gs[-1][0].dtype == np.float32


def test_param_groups_with_own_options_match_torch():
    torch = _torch()

    def groups(m, lib_opt):
        return lib_opt([{"params": m[0].parameters(), "lr": 0.2, "momentum": 0.5},
                        {"params": m[2].parameters()}], lr=0.05, momentum=0.9, nesterov=True)
    gs, ts = _run_both(lambda m: groups(m, optim.SGD),
                       lambda m: groups(m, lambda p, **k: torch.optim.SGD(p, foreach=False, **k)))
    _assert_same_trajectory(gs, ts, 1e-9, 1e-12)


def test_state_and_state_dict_layout_match_torch():
    torch = _torch()
    g, t = _models()
    x, y = _data()
    go, to = optim.Adam(g.parameters(), amsgrad=True), torch.optim.Adam(t.parameters(),
                                                                         amsgrad=True)
    _train(tg, g, go, x, y, 3, lambda: None)
    _train(torch, t, to, x, y, 3, lambda: None)
    gsd, tsd = go.state_dict(), to.state_dict()
    assert list(gsd) == ["state", "param_groups"]
    assert sorted(gsd["state"]) == sorted(tsd["state"]) == [0, 1, 2, 3]
    assert set(gsd["param_groups"][0]) == set(tsd["param_groups"][0])
    assert gsd["param_groups"][0]["params"] == tsd["param_groups"][0]["params"]
    for i in range(4):
        assert list(gsd["state"][i]) == list(tsd["state"][i])
        step = gsd["state"][i]["step"]
        assert step.dtype is tg.float32 and step.item() == 3.0
        for k in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            np.testing.assert_allclose(_np(gsd["state"][i][k]), tsd["state"][i][k].numpy(),
                                       rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: optim.Adam(ps, lr=0.01)], ids=["sgd", "adam"])
def test_state_dict_round_trip_resumes_exactly(make):
    g, _ = _models()
    x, y = _data()
    opt = make(g.parameters())
    _train(tg, g, opt, x, y, 5, lambda: None)
    g2, _ = _models()
    g2.load_state_dict(g.state_dict())
    opt2 = make(g2.parameters())
    # deepcopy, as saving to disk would: like torch, loading aliases same-dtype state tensors
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    a = _train(tg, g, opt, x, y, 5, lambda: _params(g))
    b = _train(tg, g2, opt2, x, y, 5, lambda: _params(g2))
    _assert_same_trajectory(a, b, 0, 0)


def test_load_state_dict_aliases_same_dtype_state_like_torch():
    p, q = nn.Parameter(tg.ones(2)), nn.Parameter(tg.ones(2))
    a, b = optim.SGD([p], lr=0.1, momentum=0.9), optim.SGD([q], lr=0.1, momentum=0.9)
    p.grad = tg.ones(2)
    a.step()
    b.load_state_dict(a.state_dict())
    assert b.state[q]["momentum_buffer"] is a.state[p]["momentum_buffer"]


def test_load_state_dict_checks_structure_and_casts():
    p, q = nn.Parameter(tg.zeros(2)), nn.Parameter(tg.zeros(3))
    opt = optim.SGD([p, q], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}]})
    sd = {"state": {0: {"momentum_buffer": tg.ones(2, dtype=tg.float64)}},
          "param_groups": [dict(opt.state_dict()["param_groups"][0], lr=0.5)]}
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[0]["params"] == [p, q]
    assert opt.state[p]["momentum_buffer"].dtype is tg.float32


def test_zero_grad_semantics():
    p = nn.Parameter(tg.ones(3))
    opt = optim.SGD([p], lr=0.1)
    (p * 2).sum().backward()
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and float(g.abs().sum()) == 0.0
    opt.zero_grad()
    assert p.grad is None


def test_step_updates_in_place_and_skips_params_without_grad():
    p, q = nn.Parameter(tg.ones(2)), nn.Parameter(tg.ones(2))
    opt = optim.Adam([p, q], lr=0.1)
    v0 = p._version
    (p * 3).sum().backward()
    opt.step()
    assert p._version > v0 and p.is_leaf and p.requires_grad and p.grad_fn is None
    np.testing.assert_allclose(_np(p), [0.9, 0.9], rtol=1e-6)   # first Adam step: lr * sign
    np.testing.assert_array_equal(_np(q), [1.0, 1.0])
    assert q not in opt.state or not opt.state[q]


def test_closure_runs_with_grad_enabled():
    p = nn.Parameter(tg.tensor([2.0]))
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p ** 2).sum()
        assert tg.is_grad_enabled()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 4.0 and _np(p)[0] == 1.0        # 2 - 0.25 * 4


def test_named_parameters_give_param_names():
    m = nn.Linear(2, 1)
    opt = optim.SGD(m.named_parameters(), lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["weight", "bias"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]


def test_constructor_errors():
    p = nn.Parameter(tg.ones(1))
    cases = [
        (lambda: optim.SGD([p], lr=-1), ValueError, "Invalid learning rate: -1"),
        (lambda: optim.SGD([p], momentum=-0.1), ValueError, "Invalid momentum value"),
        (lambda: optim.SGD([p], weight_decay=-1), ValueError, "Invalid weight_decay value"),
        (lambda: optim.SGD([p], nesterov=True), ValueError, "Nesterov momentum requires"),
        (lambda: optim.Adam([p], betas=(1.0, 0.9)), ValueError, "beta parameter at index 0"),
        (lambda: optim.Adam([p], betas=(0.9, -0.1)), ValueError, "beta parameter at index 1"),
        (lambda: optim.Adam([p], eps=-1), ValueError, "Invalid epsilon value"),
        (lambda: optim.SGD(p, lr=0.1), TypeError, "should be an iterable of Tensors"),
        (lambda: optim.SGD([], lr=0.1), ValueError, "empty parameter list"),
        (lambda: optim.SGD([p * 2], lr=0.1), ValueError, "non-leaf"),
        (lambda: optim.SGD([{"params": [p]}, {"params": [p]}]), ValueError,
         "more than one parameter group"),
        (lambda: optim.SGD([{"params": {p}}]), TypeError, "ordered collections"),
        (lambda: optim.SGD([1.0]), TypeError, "can only optimize Tensors"),
    ]
    for make, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            make()


def test_repr_matches_torch():
    torch = _torch()
    g = optim.SGD([nn.Parameter(tg.ones(1))], lr=0.1, momentum=0.9)
    t = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1, momentum=0.9)
    assert repr(g) == repr(t)
