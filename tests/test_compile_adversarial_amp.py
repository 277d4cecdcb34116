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


@pytest.mark.parametrize("dtype", ["float64", "float16"])
@pytest.mark.parametrize("name", list(LERP_OPTIMIZERS))
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
