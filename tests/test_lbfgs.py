"""LBFGS against PyTorch (fixed step and strong-Wolfe line search, a short history), its
state and state_dict crossing to torch and back, its errors, and a compiled step using it
(which runs eagerly with a warning: Note [LBFGS under compile] in optim/lbfgs.py)."""
import warnings

import numpy as np
import pytest

import tracegrad as tg

nn, F = tg.nn, tg.nn.functional


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _problem(lib):
    x = lib.tensor([-1.5, 2.0, 0.5, -0.7], dtype=lib.float64, requires_grad=True)
    w = lib.tensor(np.linspace(-1, 1, 6).reshape(3, 2), requires_grad=True)
    return [x, w]


def _closure(lib, opt, ps, trace=None):
    x, w = ps

    def closure():
        opt.zero_grad()
        loss = ((100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
                + ((w ** 2 - 0.3) ** 2).sum())
        loss.backward()
        if trace is not None:
            trace.append(float(loss.detach()))
        return loss
    return closure


def _run(lib, kw, steps, ps=None, opt=None):
    ps = _problem(lib) if ps is None else ps
    opt = lib.optim.LBFGS(ps, **kw) if opt is None else opt
    trace = []
    closure = _closure(lib, opt, ps, trace)
    for _ in range(steps):
        opt.step(closure)
    return ps, opt, trace


KW = [dict(max_iter=4), dict(max_iter=4, line_search_fn="strong_wolfe"),
      dict(max_iter=6, history_size=2, lr=0.5),
      dict(max_iter=6, history_size=2, line_search_fn="strong_wolfe", max_eval=9)]


@pytest.mark.parametrize("kw", KW)
def test_matches_torch(torch, kw):
    pa, oa, ta = _run(tg, kw, 3)
    pb, ob, tb = _run(torch, kw, 3)
    assert len(ta) == len(tb)                       # the same closure evaluations
    np.testing.assert_allclose(ta, tb, rtol=1e-10)
    for a, b in zip(pa, pb):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-10)
    sa, sb = oa.state_dict(), ob.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    ea, eb = sa["state"][0], sb["state"][0]
    assert sorted(ea) == sorted(eb)
    for key in ("func_evals", "n_iter"):
        assert ea[key] == eb[key]
    assert len(ea["old_dirs"]) == len(eb["old_dirs"]) <= kw.get("history_size", 100)
    np.testing.assert_allclose(ea["d"].numpy(), eb["d"].numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(float(ea["H_diag"]), float(eb["H_diag"]), rtol=1e-8)


def _to(lib, v):
    if hasattr(v, "numpy") and hasattr(v, "dtype"):
        return lib.tensor(v.detach().numpy().copy())
    if isinstance(v, dict):
        return {k: _to(lib, x) for k, x in v.items()}
    if isinstance(v, list):
        return [_to(lib, x) for x in v]
    return v


def test_state_dict_crosses_to_torch_and_back(torch):
    kw = dict(max_iter=3, history_size=3, line_search_fn="strong_wolfe")
    pa, oa, _ = _run(tg, kw, 2)
    pb = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in pa]
    ob = torch.optim.LBFGS(pb, **kw)
    ob.load_state_dict(_to(torch, oa.state_dict()))
    pc = [tg.tensor(p.detach().numpy(), requires_grad=True) for p in pa]
    oc = tg.optim.LBFGS(pc, **kw)
    oc.load_state_dict(_to(tg, ob.state_dict()))
    _run(tg, kw, 2, pa, oa)
    _run(torch, kw, 2, pb, ob)
    _run(tg, kw, 2, pc, oc)
    for a, b, c in zip(pa, pb, pc):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-10)
        np.testing.assert_array_equal(a.detach().numpy(), c.detach().numpy())


@pytest.mark.parametrize("make", [
    lambda lib, p: lib.optim.LBFGS([p], lr=-1),
    lambda lib, p: lib.optim.LBFGS([{"params": [p]}, {"params": [p * 1]}]),
])
def test_constructor_errors_match_torch(torch, make):
    errs = []
    for lib in (torch, tg):
        p = lib.zeros(2, requires_grad=True)
        with pytest.raises(Exception) as e:
            make(lib, p)
        errs.append(e.value)
    assert isinstance(errs[1], type(errs[0]))
    assert str(errs[1]).splitlines()[0] == str(errs[0])


def test_unknown_line_search_raises_like_torch(torch):
    for lib in (torch, tg):
        ps = _problem(lib)
        opt = lib.optim.LBFGS(ps, line_search_fn="backtracking")
        with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
            opt.step(_closure(lib, opt, ps))


def test_converged_gradient_returns_after_one_evaluation():
    p = tg.zeros(3, dtype=tg.float64, requires_grad=True)
    opt = tg.optim.LBFGS([p])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = (p ** 2).sum()
        loss.backward()
        return loss
    assert opt.step(closure).item() == 0.0
    assert len(calls) == 1 and opt.state[p] == {"func_evals": 1, "n_iter": 0}


def test_compiled_step_runs_eagerly_with_a_warning_and_equals_eager():
    out = []
    for compiled in (False, True):
        tg.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1)).double()
        opt = tg.optim.LBFGS(model.parameters(), max_iter=5, line_search_fn="strong_wolfe")
        x, y = tg.randn(8, 3, dtype=tg.float64), tg.randn(8, 1, dtype=tg.float64)

        def train(x, y):
            def closure():
                opt.zero_grad()
                loss = F.mse_loss(model(x), y)
                loss.backward()
                return loss
            return opt.step(closure)
        f = tg.compile(train) if compiled else train
        seen = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(4):
                seen.append(f(x, y).item())
                seen += [p.detach().numpy().tobytes() for p in model.parameters()]
        out.append((seen, getattr(f, "stats", None), [str(w.message) for w in caught]))
    (eager, _, _), (comp, stats, msgs) = out
    assert comp == eager
    assert stats.traces == 1 and stats.eager_calls == 3, str(stats)
    assert any("LBFGS.step()" in m for m in msgs)
