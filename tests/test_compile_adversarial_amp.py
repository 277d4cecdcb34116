"""First-law review of mixed precision and checkpointing in compiled training steps, written
the way PyTorch's tutorials write them ("Automatic Mixed Precision", "Saving and loading a
general checkpoint", gradient checkpointing): autocast (as a context manager, a decorator,
nested, its flag toggled), GradScaler inside and outside compiled steps, models moved to
float16/float64 between calls, checkpoints saved and loaded mid-training into the same or
fresh objects, deep copies, `utils.checkpoint` and freezing a submodule. Each program runs
eagerly and compiled (numpy and JAX backends) and compiled must equal eager, or run eagerly
with a warning; eager tracegrad is also compared with PyTorch 2.13 where the programs
differ in more than rounding.

The tests of defects this review found (each fails without its fix) come first; the
parametrised programs after them are probes that passed, kept as regression guards (their
JAX sweeps are marked slow)."""
import copy
import io
import warnings

import numpy as np
import pytest

import tracegrad as tg
from _differential import compare

nn, F = tg.nn, tg.nn.functional


def _mlp(lib, dtype="float32", dropout=0.0):
    rs = np.random.RandomState(0)
    layers = [lib.nn.Linear(4, 6), lib.nn.Tanh()]
    layers += [lib.nn.Dropout(dropout)] if dropout else []
    m = lib.nn.Sequential(*layers, lib.nn.Linear(6, 3))
    with lib.no_grad():
        for p in m.parameters():
            p.copy_(lib.tensor(rs.randn(*p.shape).astype(np.float32) * 0.5))
    return m.to(getattr(lib, dtype))


def _data(lib, i, dtype="float32"):
    g = np.random.RandomState(100 + i)
    return lib.tensor(g.randn(5, 4)).to(getattr(lib, dtype)), lib.tensor(g.randint(0, 3, 5))


def _step(lib, m, opt):
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


# --- Adam's lerp_ after the model changed dtype (optim/adam.py `_lerp_`) ---

LERP_OPTIMIZERS = {
    "Adam": dict(lr=0.01), "AdamW": dict(lr=0.01, amsgrad=True), "NAdam": dict(lr=0.01),
    "RAdam": dict(lr=0.01), "Adamax": dict(lr=0.01),
    "RMSprop": dict(lr=0.01, centered=True),
}
NO_LERP = {"SGD": dict(lr=0.1, momentum=0.9), "RMSprop": dict(lr=0.01),
           "Adagrad": dict(lr=0.1)}


def _switch_dtype_run(lib, name, kw, dtypes, comp=lambda f: f):
    """Train with optimizer `name`, moving the model to dtypes[i] before call i; per call
    the loss or the error (type, message), then the parameters."""
    m = _mlp(lib)
    f = comp(_step(lib, m, getattr(lib.optim, name)(m.parameters(), **kw)))
    out = []
    for i, dt in enumerate(dtypes):
        m.to(getattr(lib, dt))
        try:
            out.append(f(*_data(lib, i, dt)).item())
        except RuntimeError as e:
            out.append(str(e).split("\n")[0].removeprefix("lerp: "))
    return out, [p.detach().double().numpy() for p in m.parameters()]


@pytest.mark.parametrize("name,dtype", [(n, "float64") for n in LERP_OPTIMIZERS]
                         + [("Adam", "float16")])
def test_an_optimizer_updating_state_by_lerp_raises_when_the_model_changed_dtype(name, dtype):
    """`model.double()` (or `.half()`) after Adam made float32 state: PyTorch's
    `exp_avg.lerp_(grad, 1 - beta1)` raises "expected dtype float for `end` but got dtype
    double"; tracegrad stepped on silently in a precision PyTorch never computes in. Eager
    and compiled now raise PyTorch's message and leave PyTorch's state (the step count and
    decoupled weight decay come before the lerp, there as here)."""
    torch = pytest.importorskip("torch")
    dtypes = ["float32", dtype, dtype]
    kw = LERP_OPTIMIZERS[name]
    want = _switch_dtype_run(torch, name, kw, dtypes)
    for comp in (lambda f: f, tg.compile):
        tg.manual_seed(0)
        got = _switch_dtype_run(tg, name, kw, dtypes, comp)
        assert got[0][1:] == want[0][1:]
        assert "expected dtype float for `end` but got dtype" in want[0][1]
        np.testing.assert_allclose(got[0][0], want[0][0], rtol=1e-6)
        for a, b in zip(got[1], want[1]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(NO_LERP))
def test_optimizers_without_lerp_step_on_after_the_model_changed_dtype_like_torch(name):
    torch = pytest.importorskip("torch")
    dtypes = ["float32", "float64", "float64", "float32"]
    want = _switch_dtype_run(torch, name, NO_LERP[name], dtypes)
    for comp in (lambda f: f, tg.compile):
        got = _switch_dtype_run(tg, name, NO_LERP[name], dtypes, comp)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
        for a, b in zip(got[1], want[1]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# --- a GradScaler read inside a compiled function (compiler/state_kinds.py
#     `_WALKED_LIBRARY`, amp/grad_scaler.py `get_scale`) ---

def _scaler_read_program(load_at=None):
    """A compiled forward returning the loss with `scaler.get_scale()` and
    `scaler.state_dict()` (for logging); scale, step and update run outside it, the
    scale growing every call. `load_at`: the scaler is reloaded from a state dict there."""
    scalers = []

    def make(comp):
        m = _mlp(tg)
        opt = tg.optim.SGD(m.parameters(), lr=0.1)
        sc = tg.amp.GradScaler("cpu", init_scale=4.0, growth_interval=1)
        scalers[:] = [sc]

        def forward(x, y):
            loss = F.cross_entropy(m(x), y)
            return loss, sc.get_scale(), sc.state_dict()
        return comp(forward), dict(m=m, opt=opt)

    def calls(f, objs, i):
        sc, opt = scalers[0], objs["opt"]
        if i == load_at:
            sc.load_state_dict({**sc.state_dict(), "scale": 2.0 ** 10})
        opt.zero_grad()
        loss, scale, sd = f(*_data(tg, i))
        sc.scale(loss).backward()
        sc.step(opt)
        sc.update()
        return loss, scale, type(scale).__name__, sd, sc.state_dict()
    return make, calls


@pytest.mark.parametrize("load_at", [None, 0, 3])
def test_get_scale_inside_a_compiled_function_reads_the_scalers_current_scale(load_at):
    """The scaler makes its scale tensor lazily, at the first `scale()`: a compiled
    function traced before that returned `init_scale` from `get_scale()` on every later
    call (the scaler's attributes were not guarded: `tracegrad.amp` objects were not
    walked as optimizers are), while eager returned the grown scale. Now its attributes
    are guarded, and `get_scale()` (and the state dict's scale and growth tracker) is a
    value read per call, as the user's own `.item()` is: the scale changing every call
    re-traces nothing (nor does `update()`, which clears its per-optimizer dict in place
    rather than rebinding it; a `load_state_dict` after the first `scale()` re-traces
    once, for the `init_scale` it rewrites)."""
    stats = compare(*_scaler_read_program(load_at), n=6)
    assert stats.traces <= 2 + (load_at == 3) and stats.eager_calls == 0, stats


# --- probes that passed: compiled equals eager (regression guards) ---------------------

def _dt(backend):
    """float32 on numpy (bitwise); float64 on JAX (its float32 rounding differs)."""
    return "float64" if backend == "jax" else "float32"


def _resume(opt, mode, backend):
    """Save at call 2 (`torch.save`, a deep copy, or references to the live state dicts),
    load at call 4 into the same objects or fresh ones, keep calling the compiled step."""
    make_opt = RESUME_OPTIMIZERS[opt]
    side = {}

    def make(comp):
        side.clear()
        objs = {}

        def build():
            objs["m"] = _mlp(tg, _dt(backend))
            objs["o"] = make_opt(objs["m"].parameters())

        def step(x, y):
            return _step(tg, objs["m"], objs["o"])(x, y)
        build()
        side["build"] = build
        return comp(step), objs

    def calls(f, objs, i):
        if i == 2:
            sd = {"model": objs["m"].state_dict(), "opt": objs["o"].state_dict(), "epoch": i}
            if mode == "save":
                side["ck"] = io.BytesIO()
                tg.save(sd, side["ck"])
            else:
                side["ck"] = copy.deepcopy(sd) if mode == "deepcopy" else sd
        if i == 4:
            ck = side["ck"]
            if mode == "save":
                ck.seek(0)
                ck = tg.load(ck)
            if mode in ("save", "fresh"):
                side["build"]()
            objs["m"].load_state_dict(ck["model"])
            objs["o"].load_state_dict(ck["opt"])
        return f(*_data(tg, i, _dt(backend))), objs["o"].state_dict()
    return make, calls


RESUME_OPTIMIZERS = {
    "SGD momentum": lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    "Adam amsgrad": lambda ps: tg.optim.AdamW(ps, lr=0.01, amsgrad=True),
    "RMSprop centered": lambda ps: tg.optim.RMSprop(ps, lr=0.01, momentum=0.5,
                                                    centered=True),
    "Adagrad": lambda ps: tg.optim.Adagrad(ps, lr=0.1),
}
RESUME_MODES = ["save", "fresh", "deepcopy", "references"]


def _between(backend, what):
    """What tutorials do to a model between compiled steps."""
    def make(comp):
        m = _mlp(tg, _dt(backend), dropout=0.2)
        opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        return comp(_step(tg, m, opt)), dict(m=m, opt=opt)

    def calls(f, objs, i):
        m, dt = objs["m"], _dt(backend)
        if what == "double" and i >= 2:
            m.double()
            dt = "float64"
        if what == "half" and i >= 2:
            m.half()
            dt = "float16"
        if what == "freeze" and i in (1, 3):
            m[0].requires_grad_(i == 3)
        if what == "eval" and i == 3:
            m.eval()
        return f(*_data(tg, i, dt))
    return make, calls


def _copies(backend, compiled_module):
    """`copy.deepcopy(model)` after compiled calls, trained on by its own step (or, for a
    compiled module, a deep copy of the compiled module, scaled and called)."""
    side = {}

    def make(comp):
        side.clear()
        m = _mlp(tg, _dt(backend))
        opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        side.update(comp=comp, m=m, opt=opt)
        return (comp(m) if compiled_module else comp(_step(tg, m, opt))), dict(m=m, opt=opt)

    def calls(f, objs, i):
        x, y = _data(tg, i, _dt(backend))
        if compiled_module:
            out = f(x)
            out.sum().backward()
            if i == 2:
                side["copy"] = copy.deepcopy(f)
                with tg.no_grad():
                    for p in side["copy"].parameters():
                        p.mul_(1.5)
            if "copy" not in side:
                return out
            c = side["copy"]
            o2 = c(x)
            o2.sum().backward()
            return out, o2, [p.grad for p in c.parameters()]
        out = f(x, y)
        if i == 2:
            m2 = copy.deepcopy(side["m"])
            o2 = tg.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
            o2.load_state_dict(side["opt"].state_dict())
            side["copy"] = (side["comp"](_step(tg, m2, o2)), m2)
        if "copy" not in side:
            return out
        f2, m2 = side["copy"]
        return out, f2(*_data(tg, i + 10, _dt(backend))), m2.state_dict()
    return make, calls


def _autocast(backend, kind):
    """autocast as PyTorch programs on a CPU machine write it: 'cuda' (disables itself
    with a warning, every call), a disabled CPU region, nested with the flag toggled per
    call, as a decorator, `torch.amp.autocast`."""
    def make(comp):
        m = _mlp(tg, _dt(backend))
        opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fwd = tg.autocast("cuda", dtype=tg.float16)(lambda x: m(x))

        def step(x, y, flag):
            opt.zero_grad()
            if kind == "cuda":
                with tg.autocast("cuda", dtype=tg.float16):
                    out = m(x)
            elif kind == "cpu disabled":
                with tg.autocast("cpu", dtype=tg.bfloat16, enabled=False):
                    out = m(x)
            elif kind == "nested":
                with tg.autocast("cuda", dtype=tg.float16, enabled=flag):
                    with tg.autocast("cpu", enabled=False):
                        out = m(x)
            elif kind == "decorator":
                out = fwd(x)
            else:
                with tg.amp.autocast("cuda", enabled=flag):
                    out = m(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            return loss
        return comp(step), dict(m=m, opt=opt)
    return make, lambda f, objs, i: f(*_data(tg, i, _dt(backend)), i % 2 == 0)


def _scaler(backend, where, inf_at=()):
    """GradScaler('cpu'): inside the compiled step (runs eagerly, with a warning), around
    a compiled model, or disabled inside the step (stays compiled); inf/NaN batches make
    it skip steps and back off."""
    scalers = []

    def make(comp):
        m = _mlp(tg, _dt(backend))
        opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        sc = tg.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2,
                               enabled=where != "disabled")
        scalers[:] = [sc]
        model = comp(m) if where == "around" else m

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            sc.scale(loss).backward()
            sc.unscale_(opt)
            nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            sc.step(opt)
            sc.update()
            return loss, sc.get_scale()
        return (step if where == "around" else comp(step)), dict(m=m, opt=opt)

    def calls(f, objs, i):
        x, y = _data(tg, i, _dt(backend))
        return f(x * float("inf") if i in inf_at else x, y), scalers[0].state_dict()
    return make, calls


def _checkpointed(backend, how, reentrant):
    """`utils.checkpoint` over a block with dropout: in a compiled step, in a compiled
    module's forward (both run eagerly, with a warning), or of a compiled block."""
    from tracegrad.utils.checkpoint import checkpoint

    def make(comp):
        m = _mlp(tg, _dt(backend), dropout=0.3)
        opt = tg.optim.SGD(m.parameters(), lr=0.1)
        block = comp(m[:3]) if how == "of compiled" else m[:3]

        def forward(x):
            return m[3](checkpoint(block, x, use_reentrant=reentrant))

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(forward(x), y)
            loss.backward()
            opt.step()
            return loss
        if how == "in module":
            return comp(forward), dict(m=m)
        return (step if how == "of compiled" else comp(step)), dict(m=m, opt=opt)

    def calls(f, objs, i):
        x, y = _data(tg, i, _dt(backend))
        x.requires_grad_(True)
        if how == "in module":
            out = f(x)
            out.pow(2).sum().backward()
            return out, x.grad
        return f(x, y), x.grad
    return make, calls


PROGRAMS = {
    **{f"resume {o}, {mode}": (lambda b, o=o, mode=mode: _resume(o, mode, b), False)
       for o in RESUME_OPTIMIZERS for mode in RESUME_MODES},
    **{f"between calls: {w}": (lambda b, w=w: _between(b, w), False)
       for w in ("double", "half", "freeze", "eval")},
    "deepcopy(model), its own compiled step": (lambda b: _copies(b, False), False),
    "deepcopy(compiled module)": (lambda b: _copies(b, True), False),
    **{f"autocast {k}": (lambda b, k=k: _autocast(b, k), False)
       for k in ("cuda", "cpu disabled", "nested", "decorator", "amp flag")},
    "GradScaler in the step": (lambda b: _scaler(b, "inside", (1, 2)), "must"),
    "GradScaler around a compiled model": (lambda b: _scaler(b, "around", (1, 3)), False),
    "GradScaler disabled in the step": (lambda b: _scaler(b, "disabled"), False),
    **{f"checkpoint {h}, reentrant={r}": (lambda b, h=h, r=r: _checkpointed(b, h, r),
                                          "must" if h != "of compiled" else False)
       for h in ("in step", "in module", "of compiled") for r in (True, False)},
}
FAST = {"resume SGD momentum, save", "resume Adam amsgrad, fresh",
        "resume Adam amsgrad, references", "between calls: double", "between calls: freeze",
        "deepcopy(model), its own compiled step", "deepcopy(compiled module)",
        "autocast nested", "autocast decorator",
        "GradScaler in the step", "GradScaler around a compiled model",
        "GradScaler disabled in the step", "checkpoint in step, reentrant=True",
        "checkpoint in module, reentrant=False", "checkpoint of compiled, reentrant=True"}


def _params(backend):
    return [pytest.param(n, marks=() if backend == "numpy" and n in FAST
                         else pytest.mark.slow) for n in PROGRAMS]


def _compare(name, backend):
    build, loud = PROGRAMS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare(*build(backend), n=6, backend=backend, loud=loud)


@pytest.mark.parametrize("name", _params("numpy"))
def test_program_compiled_equals_eager(name):
    stats = _compare(name, "numpy")
    if PROGRAMS[name][1] != "must" and stats is not None:
        # bounded: a fresh model's first call (no .grad yet), a freeze and an unfreeze
        # (requires_grad, then .grad None) are each a path once
        assert stats.traces <= 5 and stats.eager_calls == 0, stats


@pytest.mark.parametrize("name", _params("jax"))
def test_program_compiled_equals_eager_jax(name):
    pytest.importorskip("jax")
    _compare(name, "jax")
