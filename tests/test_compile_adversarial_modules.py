"""Adversarial review of compiled `nn` programs whose modules change between calls, written
the way PyTorch users write them: each test is a defect found by running the program
eagerly and compiled side by side. Compiled must equal eager (bitwise on numpy), or run
eagerly with a warning."""
import warnings

import numpy as np
import pytest

import tracegrad as tg

nn, F = tg.nn, tg.nn.functional


def _x(i, shape=(6, 4)):
    return tg.tensor(np.random.default_rng(i).standard_normal(shape).astype(np.float32))


def _eager_and_compiled(make, calls):
    """Run `calls(f, objects)` on a fresh `make(compiled)` eagerly and compiled; both
    results."""
    out = []
    for compiled in (False, True):
        tg.manual_seed(0)
        f, objects = make(compiled)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append(calls(f, objects))
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# --- Note [Module registries] in compiler/state.py ---

class _Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 1)})

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).tanh()
        return sum(h(x).sum() for h in self.heads.values())


class _Buffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        y = self.fc(x)
        for b in self.buffers():
            y = y + b
        return y.sum()


def _grow(what, m):
    if what == "append a layer":
        m.layers.append(nn.Linear(4, 4))
    elif what == "add a head":
        m.heads["b"] = nn.Linear(4, 1)
    elif what == "register a buffer":
        m.register_buffer("extra", tg.ones(2))
    elif what == "set a bias that was None":
        m.bias = nn.Parameter(tg.ones(2))
    elif what == "append a parameter":
        m.ps.append(nn.Parameter(tg.full((4,), 2.0)))


class _Params(nn.Module):
    def __init__(self):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(tg.ones(4))])

    def forward(self, x):
        for p in self.ps:
            x = x * p
        return x.sum()


_BUILD = {"append a layer": _Stack, "add a head": _Stack, "register a buffer": _Buffers,
          "set a bias that was None": lambda: nn.Linear(4, 2, bias=False),
          "append a parameter": _Params}


@pytest.mark.parametrize("what", list(_BUILD))
def test_a_module_registry_growing_between_calls_retraces(what):
    """`model.layers.append(...)`, `model.heads["b"] = ...`, `register_buffer` of a new
    name and filling a parameter registered as None change a module's registries, not its
    attribute dict: a cached path kept running the old set of layers."""
    def make(compiled):
        m = _BUILD[what]()
        f = lambda x: m(x).sum()                      # noqa: E731
        return (tg.compile(f) if compiled else f), m

    def calls(f, m):
        out = []
        for i in range(4):
            if i == 2:
                _grow(what, m)
            y = f(_x(i))
            y.backward()
            out.append(y.detach().numpy())
        return out + [p.grad.numpy() for p in m.parameters()]
    eager, compiled = _eager_and_compiled(make, calls)
    _same(eager, compiled)


# --- Note [Files] in _effects.py ---

@pytest.mark.parametrize("how", ["tg.save", "open", "a file handle from outside"])
def test_a_step_writing_a_checkpoint_or_a_log_file_runs_eagerly_with_a_warning(how, tmp_path):
    """`tg.save(model.state_dict(), path)` (or `open(...).write(...)`) inside a compiled
    step wrote the file only while tracing: the checkpoint on disk kept the first step's
    weights, silently."""
    handle = open(tmp_path / "log.txt", "w")

    def make(compiled):
        m = nn.Linear(4, 2)
        opt = tg.optim.SGD(m.parameters(), lr=0.1)
        path = tmp_path / f"ck{compiled}.pt"

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            if how == "tg.save":
                tg.save(m.state_dict(), path)
            elif how == "open":
                with open(path, "w") as f:
                    f.write(f"{m.weight.sum().item()}\n")
            else:
                handle.write("step\n")
            return loss
        return (tg.compile(step) if compiled else step), (m, path)

    def calls(f, objs):
        m, path = objs
        out = []
        for i in range(4):
            f(_x(i))
            if how == "tg.save":
                out.append(tg.load(path)["weight"].numpy())
            elif how == "open":
                out.append(np.array(float(path.read_text())))
        return out
    eager, compiled = _eager_and_compiled(make, calls)
    _same(eager, compiled)
    with pytest.warns(UserWarning, match="runs eagerly"):
        make(True)[0](_x(0))
    handle.close()
    if how == "a file handle from outside":
        assert (tmp_path / "log.txt").read_text() == "step\n" * 9


def test_logging_inside_a_compiled_step_is_reported_like_print():
    import logging
    log = logging.getLogger("tg_user_steps")

    @tg.compile
    def f(x):
        log.info("step")
        return x * 2
    with pytest.warns(UserWarning, match="logging info"):
        f(tg.ones(2))


# --- Note [Forward replaced] in compiler/module.py, Note [Methods of user classes] in
# compiler/state.py ---

def _net_class():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def helper(self, h):
            return h.tanh()

        def forward(self, x):
            return self.helper(self.fc(x))

    class Sub(Net):
        pass
    return Net, Sub


def _patched_forward(self, x):
    return self.fc(x) * 3


def _patched_helper(self, h):
    return h.sigmoid()


_PATCHES = {
    "the instance's forward": lambda m, cls: setattr(
        m, "forward", _patched_forward.__get__(m)),
    "the class's forward": lambda m, cls: setattr(cls, "forward", _patched_forward),
    "a method the forward calls": lambda m, cls: setattr(cls, "helper", _patched_helper),
}


@pytest.mark.parametrize("where", ["compile(model)", "a closure"])
@pytest.mark.parametrize("patch", list(_PATCHES))
def test_a_forward_or_method_patched_between_calls_runs_the_new_code(patch, where):
    """`model.forward = new_forward.__get__(model)`, `Net.forward = ...` or `Net.helper =
    ...` between calls: eager runs the new code; a cached path kept the old one (and
    `compile(model)` re-traced the old bound forward even when it noticed)."""
    def make(compiled):
        _, Sub = _net_class()                 # a fresh class per run: patches stay local
        m = Sub()
        if where == "a closure":
            f = lambda x: m(x).sum()                  # noqa: E731
            return (tg.compile(f) if compiled else f), (m, Sub)
        return (tg.compile(m) if compiled else m), (m, Sub)

    def calls(f, objs):
        m, cls = objs
        out = []
        for i in range(4):
            if i == 2:
                _PATCHES[patch](m, cls)
            y = f(_x(i)).sum()
            y.backward()
            out.append(y.detach().numpy())
        return out + [p.grad.numpy() for p in m.parameters()]
    eager, compiled = _eager_and_compiled(make, calls)
    _same(eager, compiled)


def test_a_compiled_module_whose_forward_is_patched_retraces_with_that_reason():
    _, Sub = _net_class()
    m = Sub()
    cm = tg.compile(m)
    cm(_x(0))
    cm(_x(1))
    m.forward = _patched_forward.__get__(m)
    np.testing.assert_array_equal(cm(_x(2)).detach().numpy(), m(_x(2)).detach().numpy())
    assert cm.stats.retraces == ["the forward of Sub was replaced"]
    cm(_x(3))
    assert cm.stats.cache_hits == 2


# --- adam.py `_lerp_`: Note [Hyper-parameters meet zero-dim tensors] in _effects.py ---

@pytest.mark.parametrize("make_opt", [
    lambda ps: tg.optim.Adam(ps, lr=0.01),
    lambda ps: tg.optim.AdamW(ps, lr=0.01),
    lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
], ids=["Adam", "AdamW", "SGD"])
def test_a_model_moved_to_float64_mid_training_steps_like_eager(make_opt):
    """`model.double()` after the optimizer made float32 state: Adam's `exp_avg` lerp met
    the float64 gradient with its runtime weight cast to float32 (eager's Python weight is
    cast to the float64 operand), so every compiled step drifted from eager by ~1e-10.
    (Since then Adam raises there, as PyTorch's lerp_ does: compiled raises the same error
    and leaves the same state; SGD steps on.)"""
    def make(compiled):
        m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        opt = make_opt(m.parameters())

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        return (tg.compile(step) if compiled else step), (m, opt)

    def calls(f, objs):
        m, opt = objs
        out = []
        for i in range(5):
            if i == 2:
                m.double()
            try:
                out.append(f(_x(i).double() if i >= 2 else _x(i)).detach().numpy())
            except RuntimeError as e:
                out.append(str(e).split("\n")[0])
        return out + [p.detach().numpy() for p in m.parameters()] + [
            t.numpy() for s in opt.state.values() for t in s.values()]
    eager, compiled = _eager_and_compiled(make, calls)
    _same(eager, compiled)


def test_reading_a_class_annotations_in_forward_keeps_the_module_compiled():
    """Reading `cls.__annotations__` adds an entry to the class dict: guarding class dicts
    by length made such a forward 'change state it reads' and run eagerly."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            assert not type(self).__annotations__
            return self.fc(x)
    cm = tg.compile(Net())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(3):
            cm(_x(i))
    assert cm.stats.cache_hits == 2 and cm.stats.eager_calls == 0
