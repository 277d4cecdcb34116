"""Adversarial first-law review of nn layers and models that the caller changes between
compiled calls, as fine-tuning and research code does (freeze/unfreeze, replaced
submodules, hooks added and removed, load_state_dict, dtype moves, train/eval of one
submodule, weight tying, parametrizations, weight/spectral norm, `.data` writes, buffers
deleted or added), and of layers with state or unusual autograd (batch/instance norm
statistics, Embedding max_norm, RNNs with carried state, packed sequences, attention masks,
dropout variants). Each scenario runs 6 calls with the change made before call 2 and
reverted before call 4, eagerly and compiled (the whole training step, the model with an
eager backward, and `model.compile()`), comparing results, warnings, parameters, `.grad`,
buffers and the hooks' side effects (tests/_differential.py). What cannot be compiled runs
eagerly with a warning. Eager itself is checked against PyTorch where a layer's state is
involved."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from _differential import compare

nn, F = tg.nn, tg.nn.functional
MODES = ["step", "module", "inplace"]


def _x(i, shape=(6, 4)):
    return tg.tensor(np.random.default_rng(i).standard_normal(shape)).to(tg.get_default_dtype())


def _idx(i, shape=(3, 4), hi=10):
    return tg.tensor(np.random.default_rng(i).integers(0, hi, shape))


def _sgd(model, lr=0.1):
    with tg.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= lr * p.grad


def _scenario(build, mutate=None, revert=None, batch=_x, mode="step", backend="numpy"):
    """(make, calls) for `compare`: a training step over `build()` (whole step compiled,
    the model compiled with eager backward, or `model.compile()`), `mutate(model)` before
    call 2 and `revert(model)` before call 4; each call returns the loss and what the
    model's hooks recorded (`model.log`)."""
    def run(f, x):
        out = f(*x[0], **x[1]) if isinstance(x, tuple) else f(x)
        out = out[0] if isinstance(out, tuple) else out
        return out.to(tg.get_default_dtype()).pow(2).mean()

    def make(comp):
        model = build()
        model.log = []
        if mode == "step":
            def step(x):
                model.zero_grad()
                loss = run(model, x)
                loss.backward()
                _sgd(model)
                return loss
            return comp(step), {"model": model}
        probe = (lambda: None)
        compiled = comp(probe) is not probe
        if mode == "inplace":
            if compiled:
                model.compile(backend=backend)
            fwd = model
        else:
            fwd = comp(model)

        def step(x):
            model.zero_grad()
            loss = run(fwd, x)
            loss.backward()
            _sgd(model)
            return loss
        return step, {"model": model}

    def calls(step, objs, i):
        m = objs["model"]
        if i == 2 and mutate:
            mutate(m)
        if i == 4 and revert:
            revert(m)
        loss = step(batch(i))
        return loss, list(m.log)
    return make, calls


def _check(scn, mode, loud=False, backend="numpy"):
    make, calls = _scenario(mode=mode, backend=backend, **scn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare(make, calls, n=6, backend=backend, loud=loud)


# --- Note [Global module hooks] in nn/_global_hooks.py ---

G = nn.modules.module


def _global_log(lib):
    """What global and module hooks see, in order, for one forward and backward."""
    nn_ = lib.nn
    M = nn_.modules.module
    log = []
    m = nn_.Sequential(nn_.Linear(3, 2), nn_.Tanh())
    hs = [M.register_module_forward_pre_hook(
              lambda mod, a: log.append(("gpre", type(mod).__name__))),
          M.register_module_forward_hook(
              lambda mod, a, k, o: log.append(("gfwd", type(mod).__name__, sorted(k))),
              with_kwargs=True),
          M.register_module_full_backward_pre_hook(
              lambda mod, go: log.append(("gbpre", type(mod).__name__, len(go)))),
          M.register_module_full_backward_hook(
              lambda mod, gi, go: log.append(("gbwd", type(mod).__name__,
                                              [g is None for g in gi]))),
          m[0].register_forward_pre_hook(lambda mod, a: log.append(("pre0",))),
          m[0].register_forward_hook(lambda mod, a, o: log.append(("fwd0",))),
          m[0].register_full_backward_hook(lambda mod, gi, go: log.append(("bwd0",))),
          M.register_module_forward_hook(
              lambda mod, a, o: o * 2 if isinstance(mod, nn_.Tanh) else None)]
    x = lib.tensor(np.arange(6.).reshape(2, 3), dtype=lib.float32, requires_grad=True)
    y = m(x)
    y.sum().backward()
    doubled = bool((y.detach().abs() > 1).any())
    for h in hs:
        h.remove()
    m(x)
    return log, doubled


def test_global_module_hooks_run_in_pytorch_order():
    """`nn.modules.module.register_module_*_hook` did not exist: code using them (profilers,
    activation statistics) failed. They run before each module's own hooks, as PyTorch's."""
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _global_log(tg) == _global_log(torch)


class _Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))

    def forward(self, x):
        return self.net(x)


_HANDLES = {}          # kept off the model: a new attribute there re-traces by itself


def _add_global(kind):
    def add(m):
        def log(mod, *a):
            m.log.append((kind, type(mod).__name__))
        if kind == "forward":
            _HANDLES["h"] = G.register_module_forward_hook(
                lambda mod, a, o: (log(mod), o * 1.5 if isinstance(mod, nn.Linear) else None)[1])
        elif kind == "forward pre":
            _HANDLES["h"] = G.register_module_forward_pre_hook(
                lambda mod, a: (log(mod), (a[0] * 2,) if isinstance(mod, nn.Tanh) else None)[1])
        elif kind == "backward":
            _HANDLES["h"] = G.register_module_full_backward_hook(
                lambda mod, gi, go: (log(mod), None)[1])
        else:
            _HANDLES["h"] = G.register_module_full_backward_pre_hook(
                lambda mod, go: (log(mod), tuple(g * 0.5 for g in go))[1])
    return add


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["forward", "forward pre", "backward", "backward pre"])
def test_a_global_module_hook_added_between_compiled_calls_runs_like_eager(kind, mode):
    """A global hook registered after a path was cached must run around every module call
    (a cached path would skip it, silently): such calls run eagerly with a warning, and
    compile again once it is removed. A compiled module's wrapper is not a module of the
    user's model: the hooks see the same modules as eagerly."""
    stats = _check({"build": _Counted, "mutate": _add_global(kind),
                    "revert": lambda m: _HANDLES.pop("h").remove()}, mode, loud="must")
    if mode == "step":
        assert stats.eager_calls == 2


def test_a_global_hook_registered_inside_a_compiled_function_is_not_replayed_silently():
    """A hook registered (and removed) by the traced function itself runs during the trace:
    the path is an effect no cached call replays, so calls run eagerly with a warning."""
    m = nn.Linear(4, 2)

    def f(x):
        seen = []
        h = G.register_module_forward_hook(lambda mod, a, o: seen.append(1))
        y = m(x)
        h.remove()
        return y.sum() + len(seen)

    cf = tg.compile(f)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        outs = [cf(_x(i)).item() for i in range(3)]
    assert outs == [f(_x(i)).item() for i in range(3)]
    assert any("tracegrad.compile" in str(x.message) for x in w)
    from tracegrad.nn import _global_hooks
    assert not _global_hooks.FORWARD and _global_hooks.ACTIVE[0] == 0


# --- Embedding(scale_grad_by_freq=True): ops/grad_scale.py ---

def _freq_case(lib, dtype, padding_idx=None, max_norm=None):
    lib.manual_seed(0)
    e = lib.nn.Embedding(6, 3, scale_grad_by_freq=True, padding_idx=padding_idx,
                         max_norm=max_norm).to(dtype)
    with lib.no_grad():
        e.weight.copy_(lib.tensor(np.linspace(-2, 2, 18).reshape(6, 3), dtype=dtype))
    i = lib.tensor([[0, 0, 1, 3], [0, 2, 2, 1]])
    w = lib.tensor(np.arange(24.).reshape(2, 4, 3), dtype=dtype)
    out = e(i)
    (out * w).sum().backward()
    return out.detach().numpy(), e.weight.grad.numpy(), e.weight.detach().numpy()


@pytest.mark.parametrize("kw", [{}, {"padding_idx": 2}, {"max_norm": 1.0}])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_embedding_scale_grad_by_freq_matches_pytorch(kw, dtype):
    """`scale_grad_by_freq=True` raised NotImplementedError: each row's gradient is divided
    by how often its index occurs in the batch, the forward unchanged."""
    torch = pytest.importorskip("torch")
    ours = _freq_case(tg, getattr(tg, dtype), **kw)
    theirs = _freq_case(torch, getattr(torch, dtype), **kw)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def _second_order(lib):
    idx = lib.tensor([[0, 0, 1], [2, 0, 1]])
    w = lib.tensor(np.random.default_rng(0).standard_normal((4, 3)), requires_grad=True)
    loss = (lib.nn.functional.embedding(idx, w, scale_grad_by_freq=True) ** 3).sum()
    g, = lib.autograd.grad(loss, w, create_graph=True)
    (g ** 2).sum().backward()
    return g.detach().numpy(), w.grad.numpy()


def test_embedding_scale_grad_by_freq_second_order_gradients():
    """Its VJP is written in tracegrad ops: gradients of its gradients are PyTorch's (not
    finite differences': the scaled gradient is not the derivative, by design)."""
    torch = pytest.importorskip("torch")
    for a, b in zip(_second_order(tg), _second_order(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_embedding_scale_grad_by_freq_compiled_equals_eager(mode):
    """Compiled (whole step, module, model.compile()) equals eager, while `padding_idx`
    changes between calls."""
    _check({"build": lambda: nn.Embedding(10, 4, scale_grad_by_freq=True), "batch": _idx,
            "mutate": lambda m: setattr(m, "padding_idx", 3),
            "revert": lambda m: setattr(m, "padding_idx", None)}, mode)


@pytest.mark.slow
def test_embedding_scale_grad_by_freq_compiled_equals_eager_on_jax():
    pytest.importorskip("jax")
    old = tg.get_default_dtype()
    tg.set_default_dtype(tg.float64)
    try:
        _check({"build": lambda: nn.Embedding(10, 4, scale_grad_by_freq=True),
                "batch": _idx}, "step", backend="jax")
    finally:
        tg.set_default_dtype(old)
