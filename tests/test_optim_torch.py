"""Optimizers against PyTorch in float32: 10 steps of SGD/Adam/AdamW over every option,
two parameter groups with their own options, `add_param_group` mid-run, and
`state_dict()` in PyTorch's exact structure (loadable by torch, and back).

Known last-bit difference: PyTorch's CPU kernels for `add(..., alpha=)`, `addcmul`, `lerp`
round once (fused multiply-add), tracegrad's `mul` then `add` round twice, so single
values may differ by one ulp per step; rtol 1e-6 over 10 steps holds for converging runs.
"""
import numpy as np
import pytest

import tracegrad as tg

STEPS = 10


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _init(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in [(4, 3), (3,), (2, 2), (5,)]]


def _loss(lib, ps, t, sign=1):
    # a smooth, step-dependent loss so gradients change over time; `sign=-1` for
    # maximize=True, so maximizing converges instead of blowing up (a diverging run
    # amplifies the last-bit differences noted in the module docstring)
    total = 0
    for i, p in enumerate(ps):
        total = total + ((p * p * (1 + 0.1 * i)).sum() * (1 + 0.05 * t) + (p ** 3).mean())
    return total * sign


def _make(lib, init, groups_of):
    ps = [lib.tensor(w, requires_grad=True) for w in init]
    return ps, groups_of(ps)


def _run(lib, opt_cls, init, groups_of, kw, steps=STEPS, extra=None):
    ps, groups = _make(lib, init, groups_of)
    opt = opt_cls(groups, **kw)
    for t in range(steps):
        if extra is not None and t == steps // 2:
            q = lib.tensor(extra, requires_grad=True)
            ps.append(q)
            opt.add_param_group({"params": [q], "lr": 0.02, "weight_decay": 0.1})
        opt.zero_grad()
        _loss(lib, ps, t, -1 if kw.get("maximize") else 1).backward()
        opt.step()
    return ps, opt


ONE = lambda ps: ps                                              # noqa: E731
TWO = lambda ps: [{"params": ps[:2]},                            # noqa: E731
                  {"params": ps[2:], "lr": 0.003, "weight_decay": 0.05}]

SGD = [dict(lr=0.05), dict(lr=0.05, momentum=0.9), dict(lr=0.05, momentum=0.9, dampening=0.3),
       dict(lr=0.05, momentum=0.9, nesterov=True), dict(lr=0.05, weight_decay=0.1),
       dict(lr=0.05, momentum=0.8, weight_decay=0.01, maximize=True),
       dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.02, maximize=True)]
ADAM = [dict(), dict(lr=0.01), dict(lr=0.01, amsgrad=True), dict(lr=0.01, weight_decay=0.1),
        dict(lr=0.01, maximize=True), dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6),
        dict(lr=0.01, amsgrad=True, weight_decay=0.05, maximize=True)]


def _cases():
    for kw in SGD:
        yield "SGD", kw
    for kw in ADAM:
        yield "Adam", kw
        yield "AdamW", kw


@pytest.mark.parametrize("groups", ["one", "two"])
@pytest.mark.parametrize("name,kw", list(_cases()))
def test_trajectory_matches_torch(torch, name, kw, groups):
    g = ONE if groups == "one" else TWO
    init = _init()
    pa, _ = _run(tg, getattr(tg.optim, name), init, g, kw)
    pb, _ = _run(torch, getattr(torch.optim, name), init, g, kw)
    for a, b in zip(pa, pb):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6,
                                   atol=1e-7)


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.05, momentum=0.9)),
                                     ("Adam", dict(lr=0.01, amsgrad=True)),
                                     ("AdamW", dict(lr=0.01))])
def test_add_param_group_mid_run_matches_torch(torch, name, kw):
    init, extra = _init(), np.linspace(-1, 1, 6).astype(np.float32)
    pa, oa = _run(tg, getattr(tg.optim, name), init, TWO, kw, extra=extra)
    pb, ob = _run(torch, getattr(torch.optim, name), init, TWO, kw, extra=extra)
    for a, b in zip(pa, pb):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6,
                                   atol=1e-7)
    _same_state_dict(oa.state_dict(), ob.state_dict())


def _same_state_dict(sa, sb):
    assert list(sa) == list(sb) == ["state", "param_groups"]
    assert sa["param_groups"] == sb["param_groups"]          # ints for params, same options
    assert list(sa["state"]) == list(sb["state"])            # keyed by int index
    for k in sa["state"]:
        ea, eb = sa["state"][k], sb["state"][k]
        assert list(ea) == list(eb)
        for key in ea:
            a, b = ea[key], eb[key]
            if b is None:
                assert a is None
                continue
            assert tuple(a.shape) == tuple(b.shape) and str(a.dtype) == str(b.dtype), key
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name,kw", list(_cases()))
def test_state_dict_structure_matches_torch(torch, name, kw):
    init = _init()
    _, oa = _run(tg, getattr(tg.optim, name), init, TWO, kw, steps=3)
    _, ob = _run(torch, getattr(torch.optim, name), init, TWO, kw, steps=3)
    _same_state_dict(oa.state_dict(), ob.state_dict())


def _to(lib, sd):
    """A state_dict with its tensors moved to the other library (same values)."""
    def conv(v):
        if hasattr(v, "numpy") and hasattr(v, "dtype"):
            return lib.tensor(v.detach().numpy().copy())
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v
    return conv(sd)


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
                                     ("Adam", dict(lr=0.01, amsgrad=True)),
                                     ("AdamW", dict(lr=0.01, weight_decay=0.1))])
def test_state_dict_crosses_libraries_and_resumes(torch, name, kw):
    """tracegrad's state_dict loads into torch's optimizer (and back) and both continue
    exactly like an uninterrupted run."""
    init = _init()
    pa, oa = _run(tg, getattr(tg.optim, name), init, TWO, kw, steps=4)
    # continue in torch from tracegrad's parameters and optimizer state
    pb = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in pa]
    ob = getattr(torch.optim, name)(TWO(pb), **kw)
    ob.load_state_dict(_to(torch, oa.state_dict()))
    # and back into a fresh tracegrad optimizer
    pc = [tg.tensor(p.detach().numpy(), requires_grad=True) for p in pa]
    oc = getattr(tg.optim, name)(TWO(pc), **kw)
    oc.load_state_dict(_to(tg, ob.state_dict()))
    for t in range(4, STEPS):
        for lib, ps, opt in ((tg, pa, oa), (torch, pb, ob), (tg, pc, oc)):
            opt.zero_grad()
            _loss(lib, ps, t).backward()
            opt.step()
    for a, b, c in zip(pa, pb, pc):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6,
                                   atol=1e-7)
        np.testing.assert_array_equal(a.detach().numpy(), c.detach().numpy())


def test_per_group_hyperparameters_can_change_between_steps(torch):
    init = _init()
    runs = []
    for lib in (tg, torch):
        ps, groups = _make(lib, init, TWO)
        opt = lib.optim.AdamW(groups, lr=0.01)
        for t in range(STEPS):
            opt.param_groups[t % 2]["lr"] *= 0.9
            opt.param_groups[1]["weight_decay"] = 0.01 * t
            opt.zero_grad()
            _loss(lib, ps, t).backward()
            opt.step()
        runs.append([p.detach().numpy() for p in ps])
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_zero_grad_defaults_to_none(torch):
    for lib in (tg, torch):
        p = lib.ones(2, requires_grad=True)
        opt = lib.optim.SGD([p], lr=0.1)
        p.sum().backward()
        opt.zero_grad()
        assert p.grad is None
        p.sum().backward()
        opt.zero_grad(set_to_none=False)
        assert p.grad is not None and p.grad.tolist() == [0.0, 0.0]


def test_add_param_group_errors_match_torch(torch):
    for lib in (tg, torch):
        p = lib.ones(2, requires_grad=True)
        opt = lib.optim.SGD([p], lr=0.1)
        with pytest.raises(ValueError, match="more than one parameter group"):
            opt.add_param_group({"params": [p]})
        with pytest.raises(TypeError, match="ordered collections"):
            opt.add_param_group({"params": {lib.ones(1, requires_grad=True)}})
        opt.add_param_group({"params": lib.ones(1, requires_grad=True), "momentum": 0.5})
        assert opt.param_groups[1]["lr"] == 0.1 and opt.param_groups[1]["momentum"] == 0.5
