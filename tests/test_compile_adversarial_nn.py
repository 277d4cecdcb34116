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


# --- the model changed by the caller between calls: a table of scenarios ---

def _mlp():
    return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))


class _AE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4, bias=False)
        self.dec = nn.Linear(4, 4)

    def forward(self, x):
        return self.dec(self.enc(x).tanh())


class _Sym(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


class _Buf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.register_buffer("shift", tg.ones(3))

    def forward(self, x):
        y = self.fc(x)
        return y + self.shift if getattr(self, "shift", None) is not None else y


class _Hooked(nn.Module):
    """Its hooks record into `self.log`, which each call returns."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 5), nn.Dropout(0.3), nn.Linear(5, 3))

    def forward(self, x):
        return self.net(x)


def _hook(kind):
    def add(m):
        lin = m.net[2]
        if kind == "pre with kwargs":
            h = lin.register_forward_pre_hook(
                lambda mod, a, k: (m.log.append("pre"), ((a[0] * 2,), k))[1],
                with_kwargs=True)
        elif kind == "forward":
            h = m.net[0].register_forward_hook(lambda mod, a, o: (m.log.append("f"), o + 1)[1])
        elif kind == "forward with kwargs":
            h = m.net[0].register_forward_hook(lambda mod, a, k, o: o * 3, with_kwargs=True)
        elif kind == "full backward":
            h = lin.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0.5,))
        elif kind == "full backward pre":
            h = lin.register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
        elif kind == "parameter tensor":
            h = m.net[0].weight.register_hook(lambda g: (m.log.append("g"), g * 10)[1])
        else:                                               # removes itself when it runs
            box = []

            def once(mod, a, o):
                box[0].remove()
                return o * 2
            h = m.net[0].register_forward_hook(once)
            box.append(h)
        _HANDLES["h"] = h
    return add


def _unhook(m):
    if "h" in _HANDLES:
        _HANDLES.pop("h").remove()


def _no_grad_fill(m):
    with tg.no_grad():
        m[0].bias.fill_(3.0)


def _load(assign=False, strict=True):
    def load(m):
        sd = {k: (v * 0.5).clone() for k, v in m.state_dict().items()}
        if not strict:
            sd = {"0.weight": tg.ones(5, 4)}
        m.load_state_dict(sd, strict=strict, assign=assign)
    return load


def _untie(m):
    m.dec.weight = nn.Parameter(m.enc.weight.detach().clone() + 0.1)


def _bn():
    return nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))


def _tbptt():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(4, 3)
            self.h = None

        def forward(self, x):
            out, h = self.rnn(x, self.h)
            self.h = h.detach()
            return out
    return Net()


P = nn.utils.parametrize
SCENARIOS = {
    "freeze a submodule": dict(build=_mlp, mutate=lambda m: m[0].requires_grad_(False),
                               revert=lambda m: m[0].requires_grad_(True)),
    "freeze one parameter": dict(build=_mlp, mutate=lambda m: m[2].bias.requires_grad_(False),
                                 revert=lambda m: m[2].bias.requires_grad_(True)),
    "requires_grad attribute": dict(
        build=_mlp, mutate=lambda m: setattr(m[0].weight, "requires_grad", False),
        revert=lambda m: setattr(m[0].weight, "requires_grad", True)),
    "replace a Linear": dict(build=_mlp, mutate=lambda m: m.__setitem__(2, nn.Linear(5, 3))),
    "replace the activation": dict(build=_mlp, mutate=lambda m: m.__setitem__(1, nn.GELU()),
                                   revert=lambda m: m.__setitem__(1, nn.Tanh())),
    "set_submodule by name": dict(
        build=_mlp, mutate=lambda m: m.set_submodule("2", nn.Linear(5, 3)),
        revert=lambda m: m.set_submodule("1", nn.ReLU(), strict=True)),
    "replace with a wrong shape": dict(build=_mlp,
                                       mutate=lambda m: m.__setitem__(2, nn.Linear(6, 3)),
                                       revert=lambda m: m.__setitem__(2, nn.Linear(5, 3))),
    "load_state_dict": dict(build=_mlp, mutate=_load()),
    "load_state_dict assign": dict(build=_mlp, mutate=_load(assign=True)),
    "load_state_dict not strict": dict(build=_mlp, mutate=_load(strict=False)),
    "double then float": dict(build=_mlp, mutate=lambda m: m.double(),
                              revert=lambda m: m.float()),
    "eval of one submodule": dict(build=_bn, mutate=lambda m: m[1].eval(),
                                  revert=lambda m: m[1].train()),
    "tie weights then untie": dict(build=_AE, mutate=lambda m: setattr(
        m.dec, "weight", m.enc.weight), revert=_untie),
    "parametrize then remove": dict(
        build=_AE, mutate=lambda m: P.register_parametrization(m.enc, "weight", _Sym()),
        revert=lambda m: P.remove_parametrizations(m.enc, "weight")),
    "weight_norm then remove": dict(build=_mlp, mutate=lambda m: nn.utils.weight_norm(m[0]),
                                    revert=lambda m: nn.utils.remove_weight_norm(m[0])),
    "spectral_norm then remove": dict(
        build=_mlp, mutate=lambda m: nn.utils.spectral_norm(m[0]),
        revert=lambda m: nn.utils.remove_spectral_norm(m[0])),
    "spectral_norm parametrization, eval": dict(
        build=lambda: (lambda m: (nn.utils.parametrizations.spectral_norm(m[0]), m)[1])(_mlp()),
        mutate=lambda m: m.eval(), revert=lambda m: m.train()),
    "p.data = ...": dict(build=_mlp, mutate=lambda m: setattr(m[0].weight, "data",
                                                              tg.ones(5, 4))),
    "p.data.copy_(...)": dict(build=_mlp, mutate=lambda m: m[0].weight.data.copy_(
        tg.ones(5, 4))),
    "fill_ under no_grad": dict(build=_mlp, mutate=_no_grad_fill),
    "del a buffer, register it non-persistent": dict(
        build=_Buf, mutate=lambda m: delattr(m, "shift"),
        revert=lambda m: m.register_buffer("shift", tg.full((3,), 2.0), persistent=False)),
    "BatchNorm momentum=None": dict(
        build=lambda: nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3, momentum=None)),
        mutate=lambda m: m.eval(), revert=lambda m: m.train()),
    "BatchNorm momentum changed": dict(build=_bn,
                                       mutate=lambda m: setattr(m[1], "momentum", None),
                                       revert=lambda m: setattr(m[1], "momentum", 0.5)),
    "BatchNorm stats tracking switched off": dict(
        build=_bn, mutate=lambda m: setattr(m[1], "track_running_stats", False),
        revert=lambda m: setattr(m[1], "track_running_stats", True)),
    "BatchNorm running stats rebound": dict(
        build=_bn, mutate=lambda m: setattr(m[1], "running_mean", tg.full((3,), 0.5))),
    "InstanceNorm with running stats": dict(
        build=lambda: nn.Sequential(nn.Conv1d(2, 3, 3),
                                    nn.InstanceNorm1d(3, track_running_stats=True, affine=True)),
        batch=lambda i: _x(i, (2, 2, 7)), mutate=lambda m: m.eval(),
        revert=lambda m: m.train()),
    "Embedding max_norm changed": dict(
        build=lambda: nn.Embedding(10, 4, max_norm=2.0), batch=_idx,
        mutate=lambda m: setattr(m, "max_norm", 0.5),
        revert=lambda m: setattr(m, "max_norm", None)),
    "Embedding padding_idx": dict(build=lambda: nn.Embedding(10, 4, padding_idx=0),
                                  batch=_idx, mutate=lambda m: setattr(m, "padding_idx", 3)),
    "EmbeddingBag max, mode changed": dict(
        build=lambda: nn.EmbeddingBag(10, 4, mode="max", max_norm=1.0), batch=_idx,
        mutate=lambda m: setattr(m, "mode", "sum"), revert=lambda m: setattr(m, "mode", "mean")),
    "LSTM bidirectional 2 layers dropout": dict(
        build=lambda: nn.LSTM(4, 3, num_layers=2, batch_first=True, bidirectional=True,
                              dropout=0.3),
        batch=lambda i: _x(i, (2, 5, 4)), mutate=lambda m: m.eval(),
        revert=lambda m: m.train()),
    "GRU state carried with detach": dict(build=_tbptt, batch=lambda i: _x(i, (3, 2, 4)),
                                          mutate=lambda m: setattr(m, "h", None)),
    "TransformerEncoderLayer norm_first gelu dropout": dict(
        build=lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, activation="gelu",
                                                 norm_first=True, batch_first=True),
        batch=lambda i: _x(i, (2, 3, 8)), mutate=lambda m: m.eval(),
        revert=lambda m: m.train()),
    "Conv2d padding_mode changed": dict(
        build=lambda: nn.Conv2d(2, 4, 3, padding="same", dilation=2, groups=2,
                                padding_mode="reflect"),
        batch=lambda i: _x(i, (2, 2, 6, 6)),
        mutate=lambda m: setattr(m, "padding_mode", "circular"),
        revert=lambda m: setattr(m, "padding_mode", "zeros")),
    "Upsample mode changed": dict(
        build=lambda: nn.Sequential(nn.Conv2d(2, 2, 1), nn.Upsample(scale_factor=2)),
        batch=lambda i: _x(i, (1, 2, 3, 3)), mutate=lambda m: setattr(m[1], "mode", "bilinear"),
        revert=lambda m: setattr(m[1], "scale_factor", 1.5)),
    "dropout variants train/eval": dict(
        build=lambda: nn.Sequential(nn.Conv2d(2, 4, 1), nn.Dropout2d(0.5), nn.Flatten(),
                                    nn.AlphaDropout(0.3), nn.Unflatten(1, (4, -1))),
        batch=lambda i: _x(i, (2, 2, 3, 3)), mutate=lambda m: m[1].eval(),
        revert=lambda m: (m.train(), m[3].eval())),
}
class _MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(4, 2, batch_first=True, dropout=0.2)
        self.mask, self.kw = None, {}

    def forward(self, q, k):
        o, w = self.mha(q, k, k, key_padding_mask=self.mask, **self.kw)
        return o.mean() + (w.mean() if w is not None else 0)


def _bool_mask(m):
    m.mask = tg.tensor([[False, True, False, False, True], [False] * 5])


def _float_mask(m):
    m.mask = tg.tensor([[0., -1e9, 0., 0., -2.], [0.] * 5])
    m.kw = {"need_weights": False}


class _Packed(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 3, batch_first=True, bidirectional=True, num_layers=2,
                           dropout=0.3)

    def forward(self, x, lengths, h0=None):
        u = nn.utils.rnn
        p = u.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, h = self.rnn(p, h0)
        o, _ = u.pad_packed_sequence(out, batch_first=True, total_length=6)
        return o.sum() + h[0].sum() + h[1].mean()


def _packed_batch(i):
    lengths = [[2, 5, 3], [5, 1, 4], [3, 3, 3], [6, 2, 1], [2, 5, 3], [1, 1, 1]][i]
    h0 = (_x(i, (4, 3, 3)), _x(i + 1, (4, 3, 3))) if i % 2 else None
    return ((_x(i, (3, 6, 4)), tg.tensor(lengths), h0), {})


class _SDPA(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(4, 12)
        self.p, self.causal = 0.3, True

    def forward(self, x):
        q, k, v = self.q(x).chunk(3, -1)
        return F.scaled_dot_product_attention(
            q, k, v, is_causal=self.causal, dropout_p=self.p if self.training else 0.0)


class _PoolUnpool(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(1, 2, 3, padding=1)
        self.p = nn.MaxPool2d(2, return_indices=True)
        self.u = nn.MaxUnpool2d(2)

    def forward(self, x):
        y, idx = self.p(self.c(x))
        return self.u(y, idx, output_size=x.shape[-2:])


_qk = lambda i: ((_x(i, (2, 3, 4)), _x(i + 10, (2, 5, 4))), {})     # noqa: E731
SCENARIOS.update({
    "MultiheadAttention bool then float key_padding_mask": dict(
        build=_MHA, batch=_qk, mutate=_bool_mask, revert=_float_mask),
    "MultiheadAttention average_attn_weights and attn_mask": dict(
        build=_MHA, batch=_qk, mutate=lambda m: setattr(m, "kw", {"average_attn_weights": False}),
        revert=lambda m: setattr(m, "kw", {"attn_mask": tg.tensor(np.triu(np.ones((3, 5), bool),
                                                                          1))})),
    "packed LSTM enforce_sorted=False": dict(build=_Packed, batch=_packed_batch,
                                             mutate=lambda m: m.eval(),
                                             revert=lambda m: m.train()),
    "scaled_dot_product_attention causal dropout": dict(
        build=_SDPA, batch=lambda i: _x(i, (2, 5, 4)), mutate=lambda m: setattr(m, "p", 0.6),
        revert=lambda m: setattr(m, "causal", False)),
    "MaxPool2d indices and MaxUnpool2d": dict(
        build=_PoolUnpool, batch=lambda i: _x(i, (2, 1, 4 + i % 2, 4)),
        mutate=lambda m: m.eval()),
    "ConvTranspose2d output_padding": dict(
        build=lambda: nn.ConvTranspose2d(2, 3, 3, stride=2, output_padding=1),
        batch=lambda i: _x(i, (2, 2, 4, 4)), mutate=lambda m: setattr(m, "output_padding",
                                                                      (0, 1))),
    "Embedding scale_grad_by_freq": dict(
        build=lambda: nn.Embedding(10, 4, scale_grad_by_freq=True, max_norm=1.0),
        batch=_idx, mutate=lambda m: setattr(m, "scale_grad_by_freq", False),
        revert=lambda m: setattr(m, "scale_grad_by_freq", True)),
})


for _kind in ("pre with kwargs", "forward", "forward with kwargs", "full backward",
              "full backward pre", "parameter tensor", "one-shot"):
    SCENARIOS[f"{_kind} hook added then removed"] = dict(build=_Hooked, mutate=_hook(_kind),
                                                         revert=_unhook)
# the hooks that compiled code cannot replay run eagerly, with a warning
_LOUD = {"full backward hook added then removed", "full backward pre hook added then removed"}
FAST = ["freeze a submodule", "replace a Linear", "load_state_dict assign",
        "tie weights then untie", "spectral_norm then remove", "p.data = ...",
        "BatchNorm momentum=None", "Embedding max_norm changed", "GRU state carried with detach",
        "forward hook added then removed", "one-shot hook added then removed",
        "del a buffer, register it non-persistent", "set_submodule by name"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in SCENARIOS])
def test_a_model_changed_between_calls_compiled_equals_eager(name, mode):
    _check(SCENARIOS[name], mode, loud="must" if name in _LOUD else False)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_model_changed_between_calls_compiled_equals_eager_on_jax(name):
    pytest.importorskip("jax")
    old = tg.get_default_dtype()
    tg.set_default_dtype(tg.float64)
    try:
        _check(SCENARIOS[name], "step", backend="jax",
               loud="must" if name in _LOUD else False)
    finally:
        tg.set_default_dtype(old)


def test_embedding_bag_max_mode_with_scale_grad_by_freq_is_pytorchs_value_error():
    """PyTorch raises ValueError for this combination; it raised NotImplementedError."""
    bag = nn.EmbeddingBag(4, 2, mode="max", scale_grad_by_freq=True)
    with pytest.raises(ValueError, match="max mode does not support scaling the gradient"):
        bag(tg.tensor([[1, 2]]))


# --- Note [Registering through the wrapper] in compiler/module.py ---

@pytest.mark.parametrize("how", ["register_buffer", "register_parameter", "add_module"])
def test_registering_through_a_compiled_module_reaches_the_original(how):
    """`compiled.register_buffer(...)` kept the tensor on the wrapper: the forward (the
    original's) never saw it and `state_dict()` did not list it, unlike `compiled.x = t`."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            y = self.fc(x)
            extra = getattr(self, "extra", None)
            if isinstance(extra, nn.Module):
                return extra(y)
            return y if extra is None else y + extra

    def add(m):
        if how == "register_buffer":
            m.register_buffer("extra", tg.full((3,), 2.0), persistent=False)
        elif how == "register_parameter":
            m.register_parameter("extra", nn.Parameter(tg.full((3,), 2.0)))
        else:
            m.add_module("extra", nn.Tanh())

    def make(comp):
        model = Net()
        cm = comp(model)

        def step(i):
            if i == 2:
                add(cm)
            model.zero_grad()
            loss = cm(_x(i)).pow(2).mean()
            loss.backward()
            return loss, sorted(cm.state_dict()), [n for n, _ in cm.named_parameters()]
        return step, {"model": model}

    compare(make, lambda step, objs, i: step(i), n=4)


# --- Module.get_parameter / get_buffer / set_submodule (nn/_module_paths.py) ---

def _paths(lib):
    nn_ = lib.nn
    m = nn_.Sequential(nn_.Linear(3, 2), nn_.BatchNorm1d(2))
    calls = [lambda: tuple(m.get_parameter("0.weight").shape),
             lambda: tuple(m.get_buffer("1.running_mean").shape),
             lambda: m.get_parameter("1.running_mean"), lambda: m.get_buffer("0.weight"),
             lambda: m.get_parameter("0.nope"), lambda: m.get_parameter("2.weight"),
             lambda: m.get_buffer("1.training"), lambda: m.set_submodule("", nn_.Tanh()),
             lambda: m.set_submodule("0", 3), lambda: m.set_submodule("0.weight", nn_.Tanh()),
             lambda: m.set_submodule("0.x", nn_.Tanh(), strict=True),
             lambda: (m.set_submodule("1", nn_.Tanh()), type(m[1]).__name__)[1],
             lambda: (m.set_submodule("0.sub", nn_.ReLU()), type(m[0].sub).__name__)[1]]
    out = []
    for f in calls:
        try:
            out.append(("ok", f()))
        except (AttributeError, ValueError) as e:
            kind = AttributeError if isinstance(e, AttributeError) else ValueError
            out.append((kind.__name__, str(e).split("\n")[0]))
    return out


def test_module_paths_follow_pytorch():
    """`get_parameter`, `get_buffer` and `set_submodule` did not exist (fine-tuning code
    swaps layers by name): values, error types and messages are PyTorch's."""
    torch = pytest.importorskip("torch")
    assert _paths(tg) == _paths(torch)



# --- class hierarchy seen by `isinstance` (nn/layers.py `_DropoutNd`) ---

@pytest.mark.parametrize("name", ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
                                  "AlphaDropout", "FeatureAlphaDropout", "CELU", "ELU"])
def test_isinstance_of_dropout_and_elu_layers_follows_pytorch(name):
    """`Dropout2d`, `AlphaDropout`... were subclasses of `Dropout` (and `CELU` of `ELU`):
    code that turns dropout off between calls (`if isinstance(m, nn.Dropout): m.p = 0`)
    also changed channel and alpha dropout, which PyTorch leaves alone."""
    torch = pytest.importorskip("torch")
    ours, theirs = getattr(nn, name)(), getattr(torch.nn, name)()
    assert isinstance(ours, nn.Dropout) == isinstance(theirs, torch.nn.Dropout)
    assert isinstance(ours, nn.ELU) == isinstance(theirs, torch.nn.ELU)
    assert repr(ours) == repr(theirs)


# --- load_state_dict(assign=True): nn/_module_helpers.py `_assign_entry` ---

def _assign(lib):
    nn_ = lib.nn
    m = nn_.Sequential(nn_.Linear(3, 2), nn_.BatchNorm1d(2))
    m[0].bias.requires_grad_(False)
    old = m[0].weight
    sd = {k: v.double() * 2 for k, v in m.state_dict().items()}
    sd["1.num_batches_tracked"] = m.state_dict()["1.num_batches_tracked"]
    kept = nn_.Parameter(lib.ones(2, dtype=lib.float64), requires_grad=False)
    sd["1.weight"] = kept
    r = m.load_state_dict(sd, assign=True)
    sd["0.weight"].mul_(10)               # the module holds that very storage
    with lib.no_grad():
        sd["1.running_mean"].add_(1)
    return [str(r), m[0].weight is old, type(m[0].weight).__name__, str(m[0].weight.dtype),
            m[0].weight.requires_grad, m[0].bias.requires_grad, m[1].weight is kept,
            m[1].weight.requires_grad, m[1].running_mean is sd["1.running_mean"],
            m[0].weight.detach().numpy().tolist() == sd["0.weight"].numpy().tolist(),
            [str(v.dtype) for v in m.state_dict().values()]]


def test_load_state_dict_assign_puts_the_checkpoint_tensors_in_the_module():
    """`assign=True` was ignored (an in-place copy): PyTorch puts the state dict's tensors
    themselves in the module (their dtype and storage; parameters keep the module's
    requires_grad), which changes what later calls train and in which dtype."""
    torch = pytest.importorskip("torch")
    ours = [x.replace("tracegrad.", "torch.") if isinstance(x, str) else x
            for x in _assign(tg)]
    ours[-1] = [x.replace("tracegrad.", "torch.") for x in _assign(tg)[-1]]
    assert ours == _assign(torch)


def _assign_f64(m):
    m.load_state_dict({k: v.double() for k, v in m.state_dict().items()}, assign=True)


def _assign_f32(m):
    m.load_state_dict({k: v.float() for k, v in m.state_dict().items()}, assign=True)


SCENARIOS_ASSIGN = {"assign a float64 checkpoint": dict(
    build=_mlp, mutate=_assign_f64, revert=_assign_f32,
    batch=lambda i: _x(i).double() if 2 <= i < 4 else _x(i))}


@pytest.mark.parametrize("mode", MODES)
def test_a_float64_checkpoint_assigned_between_calls_compiled_equals_eager(mode):
    _check(SCENARIOS_ASSIGN["assign a float64 checkpoint"], mode)
