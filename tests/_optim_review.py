"""The harness of the optimizer, scheduler and training-idiom reviews
(test_compile_adversarial_optim.py, test_compile_adversarial_sched.py,
test_compile_adversarial_optim_idioms.py): a training program is written once against a
library (`lib` is tracegrad or torch), run N calls eagerly and compiled (numpy and JAX
backends) from the same state, and compared with `_differential.compare` (results,
warnings, parameters, `.grad` None vs zeros, state dicts), plus the *types* of everything in
the optimizer's state and param groups (a tensor `step` against a float one compares equal
as a number); `Program.against_torch` runs eager tracegrad against PyTorch 2.13 on the same
weights and data."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from _differential import compare

N = 6


def _types(v):
    """The types of a (nested) value: tensors by dtype and shape, numbers by type."""
    if hasattr(v, "dtype") and hasattr(v, "shape") and not isinstance(v, np.ndarray):
        return ("T", str(v.dtype).split(".")[-1], tuple(v.shape))
    if isinstance(v, dict):
        return tuple((k, _types(x)) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return (type(v).__name__,) + tuple(_types(x) for x in v)
    return type(v).__name__


def _model(lib, dtype, seed=0):
    rs = np.random.RandomState(seed)
    m = lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.Tanh(), lib.nn.Linear(6, 3))
    m = m.to(getattr(lib, dtype))
    with lib.no_grad():
        for p in m.parameters():
            p.copy_(lib.tensor(rs.randn(*p.shape) * 0.5))
    return m


def _data(lib, i, dtype="float64", n=5):
    g = np.random.RandomState(100 + i)
    return lib.tensor(g.randn(n, 4).astype(dtype)), lib.tensor(g.randint(0, 3, n))


def _observe(objs, out):
    """What a call returns plus the types of the optimizer's and scheduler's state."""
    seen = [out]
    for k in sorted(objs):
        o = objs[k]
        if hasattr(o, "param_groups"):
            sd = o.state_dict()
            seen.append(("types", k, _types(sd["state"]),
                         _types([{a: b for a, b in g.items() if a != "params"}
                                 for g in o.param_groups])))
        elif hasattr(o, "get_last_lr"):
            seen.append(("sched", k, getattr(o, "last_epoch", None), _types(o.get_last_lr()),
                         _types(o.state_dict())))
    return seen


class Program:
    """A training program written once for `lib`: `build(lib, dtype) -> (step, objs)`,
    `call(lib, step, objs, i, dtype)` makes call i (outside the step: hand edits,
    scheduler steps, ...)."""

    def __init__(self, build, call=None, n=N):
        self.build, self.n = build, n
        self.call = call or (lambda lib, step, objs, i, dtype: step(*_data(lib, i, dtype)))

    def make(self, dtype):
        def make(comp):
            step, objs = self.build(tg, dtype)
            steps = [comp(s) for s in step] if isinstance(step, list) else comp(step)
            return steps, objs
        return make

    def calls(self, dtype):
        return lambda step, objs, i: _observe(objs, self.call(tg, step, objs, i, dtype))

    def compare(self, backend="numpy", dtype="float64", loud=False):
        return compare(self.make(dtype), self.calls(dtype), self.n, backend, loud)

    def against_torch(self, dtype="float64"):
        """Eager tracegrad against torch: returns, parameters, optimizer and scheduler
        state, and the types of their entries."""
        torch = pytest.importorskip("torch")
        runs = []
        for lib in (tg, torch):
            lib.manual_seed(0)
            step, objs = self.build(lib, dtype)
            outs = []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for i in range(self.n):
                    outs.append(_plain(self.call(lib, step, objs, i, dtype)))
                    outs.append(_state(objs))
                    outs.append(_observe(objs, None)[1:])     # types of the state
            runs.append(outs)
        tol = 1e-9 if dtype == "float64" else 2e-4
        _close(runs[0], runs[1], tol)


def _plain(v):
    if hasattr(v, "detach"):
        return v.detach().numpy().astype(np.float64)
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _state(objs):
    out = []
    for k in sorted(objs):
        o = objs[k]
        if hasattr(o, "param_groups"):
            sd = o.state_dict()
            out.append((_plain(sd["state"]), [_plain({a: b for a, b in g.items() if a != "params"})
                                              for g in sd["param_groups"]]))
        elif hasattr(o, "parameters"):
            out.append([(_plain(p), _plain(p.grad)) for p in o.parameters()])
        elif hasattr(o, "get_last_lr"):
            out.append((getattr(o, "last_epoch", None), _plain(o.get_last_lr())))
    return out


def _close(a, b, tol, where="run"):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=where)
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _close(a[k], b[k], tol, f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, tol, f"{where}/{i}")
    elif isinstance(a, float):
        assert abs(a - b) <= tol * (1 + abs(b)), (where, a, b)
    else:
        assert a == b, (where, a, b)


def _train(opt_fn, sched_fn=None, sched_inside=True, dtype_call=None):
    """The standard step: zero_grad, cross entropy, backward, step (and the scheduler)."""
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = opt_fn(lib, m)
        sched = sched_fn(lib, opt) if sched_fn else None
        objs = dict(m=m, opt=opt)
        if sched is not None:
            objs["sched"] = sched

        def step(x, y):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            if sched is not None and sched_inside:
                sched.step()
            return loss
        return step, objs

    def call(lib, step, objs, i, dtype):
        out = step(*_data(lib, i, dtype))
        if "sched" in objs and not sched_inside:
            objs["sched"].step()
        return out
    return Program(build, call)


def _opt(name, **kw):
    return lambda lib, m: getattr(lib.optim, name)(m.parameters(), **kw)


def _fb(lib, m, x, y, scale=1.0):
    loss = lib.nn.functional.cross_entropy(m(x), y) * scale
    loss.backward()
    return loss


def _std(lib, m, opt, x, y):
    opt.zero_grad()
    loss = _fb(lib, m, x, y)
    opt.step()
    return loss


def _closure_step(name, **kw):
    """The program `opt.step(closure)` with optimizer `name` (keyword arguments `kw`)."""
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = getattr(lib.optim, name)(m.parameters(), **kw)

        def step(x, y):
            def closure():
                opt.zero_grad()
                return _fb(lib, m, x, y)
            return opt.step(closure)
        return step, dict(m=m, opt=opt)
    return Program(build)
