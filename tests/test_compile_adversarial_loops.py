"""Adversarial review of whole training loops as PyTorch users write them, compiled with
`tg.compile` and run side by side with the same loop eager: every test is a defect found
that way. Compiled must equal eager (bitwise on numpy), or run eagerly with a warning."""
import random
import warnings

import numpy as np
import pytest

import tracegrad as tg

nn, F = tg.nn, tg.nn.functional


def _batches(n=6):
    tg.manual_seed(1)
    return [(tg.randn(4, 3), tg.randint(0, 2, (4,))) for _ in range(n)]


def _loop(compiled, body, make_env=dict, between=None, n=6, backend="numpy"):
    """Train a small classifier for `n` steps whose loss is `body(env, model, x, y)`,
    eagerly or compiled; `between(env, i)` runs after step i. Returns the losses, the
    parameters and the momentum buffers, as bytes, and the warnings the calls raised."""
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    env = make_env()

    def step(x, y):
        opt.zero_grad()
        loss = body(env, model, x, y)
        loss.backward()
        opt.step()
        return loss
    f = tg.compile(step, backend=backend) if compiled else step
    losses = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, (x, y) in enumerate(_batches(n)):
            losses.append(f(x, y).detach().numpy().tobytes())
            if between is not None:
                between(env, i)
    state = [p.detach().numpy().tobytes() for p in model.parameters()] + [
        s["momentum_buffer"].numpy().tobytes() for s in opt.state.values()]
    return losses, state, [str(w.message) for w in caught]


def _assert_compiled_is_eager(body, make_env=dict, between=None, backend="numpy"):
    eager = _loop(False, body, make_env, between)
    compiled = _loop(True, body, make_env, between, backend=backend)
    if backend == "numpy":
        assert compiled[:2] == eager[:2]
    else:
        for a, b in zip(eager[0] + eager[1], compiled[0] + compiled[1]):
            np.testing.assert_allclose(np.frombuffer(b, np.float32),
                                       np.frombuffer(a, np.float32), rtol=1e-4, atol=1e-5)
    return compiled[2]


# --- numpy generator objects held by the step (Note [Foreign generators]) ---

def _numpy_generator(kind):
    return {"RandomState": lambda: np.random.RandomState(1),
            "Generator": lambda: np.random.default_rng(1)}[kind]()


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("kind", ["RandomState", "Generator"])
def test_augmentation_drawn_from_a_numpy_generator_object_is_never_frozen(kind, backend):
    """`rng = np.random.default_rng(seed)` made once and drawn from inside the step (random
    scaling or noise as augmentation): eager draws anew on every call, and a cached path
    replayed the first call's draw. Such calls run eagerly, with a warning."""
    if backend == "jax":
        pytest.importorskip("jax")

    def body(env, model, x, y):
        scale = float(env["rng"].uniform(0.5, 1.5))
        noise = tg.from_numpy(env["rng"].normal(size=(4, 3)).astype(np.float32))
        return F.cross_entropy(model(x * scale + 0.1 * noise), y)
    caught = _assert_compiled_is_eager(body, lambda: {"rng": _numpy_generator(kind)},
                                       backend=backend)
    assert any("random" in w and "runs eagerly" in w for w in caught)


def test_a_numpy_generator_passed_as_an_argument_is_never_frozen():
    def run(compiled):
        tg.manual_seed(0)
        w = tg.randn(3, requires_grad=True)

        def step(x, rng):
            return (x * w).sum() * float(rng.random())
        f = tg.compile(step) if compiled else step
        rng = np.random.default_rng(3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [f(tg.ones(3), rng).item() for _ in range(4)]
    assert run(True) == run(False)


def test_a_numpy_generator_the_step_never_draws_from_keeps_it_compiled():
    """Holding a generator (used outside the step, to shuffle) is no reason to run eagerly."""
    rng = np.random.default_rng(0)

    def body(env, model, x, y):
        return F.cross_entropy(model(x), y)
    caught = _assert_compiled_is_eager(body, lambda: {"rng": rng},
                                       between=lambda env, i: env["rng"].permutation(4))
    assert not any("runs eagerly" in w for w in caught)


class _Rng(random.Random):
    """A user's generator class (seeded per worker, say): its `random()` is the C method
    of _random.Random, called on an object of a user class."""


def test_draws_from_a_subclass_of_random_random_are_never_frozen():
    """The profile hook recognised Python's generators by their class's module, so a draw
    from a subclass's instance was not an effect, and a cached path replayed the first
    call's random scale."""
    def body(env, model, x, y):
        return F.cross_entropy(model(x * (0.5 + env["rng"].random())), y)
    caught = _assert_compiled_is_eager(body, lambda: {"rng": _Rng(3)})
    assert any("random" in w and "runs eagerly" in w for w in caught)


# --- objects with __slots__ (Note [Slots]) ---

class _SlotsConfig:
    __slots__ = ("scale", "smoothing")

    def __init__(self):
        self.scale = 1.0
        self.smoothing = 0.0


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_a_setting_on_a_slots_object_changed_between_calls_is_never_stale(backend):
    """A config object with `__slots__` (or `@dataclass(slots=True)`) read by the step: its
    attributes live in slots, not in a `__dict__`, and the scan guarded none of them, so a
    changed `cfg.scale` left a cached path computing with the first value."""
    if backend == "jax":
        pytest.importorskip("jax")

    def body(env, model, x, y):
        cfg = env["cfg"]
        return F.cross_entropy(model(x * cfg.scale), y, label_smoothing=cfg.smoothing)

    def between(env, i):
        env["cfg"].scale = 1.0 + i
        env["cfg"].smoothing = 0.05 * i
    _assert_compiled_is_eager(body, lambda: {"cfg": _SlotsConfig()}, between,
                              backend=backend)


def test_a_tensor_held_in_a_slot_and_rebound_between_calls_is_never_stale():
    class Holder:
        __slots__ = ("w",)

    def body(env, model, x, y):
        return F.cross_entropy(model(x) * env["h"].w, y)

    def make():
        h = Holder()
        h.w = tg.ones(2)
        return {"h": h}

    def between(env, i):
        env["h"].w = tg.full((2,), 1.0 + i)
    _assert_compiled_is_eager(body, make, between)


def test_a_step_counting_its_calls_on_a_slots_object_runs_eagerly_and_counts():
    class Counter:
        __slots__ = ("n", "last")

        def __init__(self):
            self.n = 0

    def run(compiled):
        tg.manual_seed(0)
        w = tg.randn(3, requires_grad=True)
        c = Counter()

        def step(x):
            c.n += 1
            loss = (x * w).sum()
            c.last = loss.detach()
            return loss
        f = tg.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = [f(tg.full((3,), float(i))).item() for i in range(5)]
        return out, c.n, c.last.item()
    assert run(True) == run(False)


# --- class-level data read through self (Note [Class attributes] in compiler/state.py) ---

class _Augment:
    """A callable augmentation whose settings are class-level, shared by its instances."""
    settings = {"scale": 1.0}
    shifts = [0.0]

    def __call__(self, x):
        return x * self.settings["scale"] + self.shifts[0]


class _SharedConfig:
    def __init__(self):
        self.bias = 0.0


class _BaseHead(nn.Module):
    temperature = 1.0
    shared = _SharedConfig()


class _Head(_BaseHead):
    CLASS_WEIGHTS = [1.0, 1.0]

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x) * tg.tensor(self.CLASS_WEIGHTS) / self.temperature + self.shared.bias


@pytest.mark.parametrize("what", ["dict", "list", "module list", "base class scalar",
                                  "base class object"])
def test_class_level_settings_changed_between_calls_are_never_stale(what):
    """`Augment.settings["scale"] = 2.0`, `Head.CLASS_WEIGHTS[0] = 3.0` or a base class's
    `temperature` changed between steps: eager reads them through `self` on every call; a
    cached path kept the first values (only scalars of the object's own class were
    guarded)."""
    def run(compiled):
        _Augment.settings["scale"], _Augment.shifts[0] = 1.0, 0.0
        _Head.CLASS_WEIGHTS[:] = [1.0, 1.0]
        _BaseHead.temperature, _BaseHead.shared.bias = 1.0, 0.0
        tg.manual_seed(0)
        head, aug = _Head(), _Augment()
        opt = tg.optim.SGD(head.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(head(aug(x)), y)
            loss.backward()
            opt.step()
            return loss
        f = tg.compile(step) if compiled else step
        out = []
        for i, (x, y) in enumerate(_batches(5)):
            out.append(f(x, y).item())
            if what == "dict":
                _Augment.settings["scale"] = 2.0 + i
            elif what == "list":
                _Augment.shifts[0] = 0.5 * i
            elif what == "module list":
                _Head.CLASS_WEIGHTS[0] = 2.0 + i
            elif what == "base class object":
                _BaseHead.shared.bias = 0.5 * (i + 1)
            else:
                _BaseHead.temperature = 2.0 + i
        return out, [p.detach().numpy().tobytes() for p in head.parameters()]
    try:
        assert run(True) == run(False)
    finally:
        _Augment.settings["scale"], _Augment.shifts[0] = 1.0, 0.0
        _Head.CLASS_WEIGHTS[:] = [1.0, 1.0]
        _BaseHead.temperature, _BaseHead.shared.bias = 1.0, 0.0


# --- numpy float32 learning rates (Note [Narrow numpy hyper-parameters] in _effects.py) ---

def _cosine(i, base, kind):
    lr = base * (0.5 + 0.5 * np.cos(np.pi * i / 8))
    return {"float32": np.float32(lr), "float64": np.float64(lr), "float": float(lr)}[kind]


_OPTIMIZERS = {   # (make, whether float32 hyper-parameters stay runtime values)
    "Adam": (lambda ps: tg.optim.Adam(ps, lr=0.01, weight_decay=0.01), False),
    "AdamW": (lambda ps: tg.optim.AdamW(ps, lr=0.01), False),
    "Adagrad": (lambda ps: tg.optim.Adagrad(ps, lr=0.1, lr_decay=0.01), False),
    "SGD": (lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1), True),
    "RMSprop": (lambda ps: tg.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True), True),
}


@pytest.mark.parametrize("name, when, backend", [
    (name, when, "numpy") for name in _OPTIMIZERS for when in ("first", "later", "inside")
] + [("Adam", "later", "jax"), ("SGD", "later", "jax")])
def test_a_float32_numpy_learning_rate_schedule_gives_eagers_update(name, when, backend):
    """A cosine schedule computed in numpy float32 and written to `g["lr"]`: eager Adam
    divides the float32 rate by a Python float in float32, and a trace reading the rate
    as a float64 0-d tensor (or meeting betas read so) rounded the step size otherwise:
    parameters off by an ulp after a step. Compiled must give eager's bits, or run eagerly
    saying why; SGD and RMSprop, whose math gives eager's bits, stay compiled. `later`:
    traced with Python floats, float32 set afterwards."""
    if backend == "jax":
        pytest.importorskip("jax")
    make_opt, exact = _OPTIMIZERS[name]

    def run(compiled):
        tg.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
        opt = make_opt(list(model.parameters()))
        base = opt.param_groups[0]["lr"]

        def lr_at(i):
            return _cosine(i, base, "float" if when == "later" and i < 3 else "float32")

        def step(i, x, y):
            if when == "inside":
                for g in opt.param_groups:
                    g["lr"] = lr_at(i)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        f = tg.compile(step, backend=backend) if compiled else step
        out = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i, (x, y) in enumerate(_batches(6)):
                if when != "inside":
                    for g in opt.param_groups:
                        g["lr"] = lr_at(i)
                out.append(f(i, x, y).item())
        state = [p.detach().numpy().tobytes() for p in model.parameters()]
        return out, state, [str(w.message) for w in caught]
    eager, compiled = run(False), run(True)
    if backend == "numpy":
        assert compiled[:2] == eager[:2]
    else:
        np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    assert any("float32" in w and "runs eagerly" in w for w in compiled[2]) != exact


def test_a_float64_numpy_learning_rate_stays_a_runtime_value():
    """np.float64 computes as a Python float: read per call, never a reason to re-trace."""
    def run(compiled):
        tg.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
        opt = tg.optim.Adam(model.parameters(), lr=0.01)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        f = tg.compile(step) if compiled else step
        out = []
        for i, (x, y) in enumerate(_batches(6)):
            opt.param_groups[0]["lr"] = _cosine(i, 0.01, "float64")
            out.append(f(x, y).item())
        return out, [p.detach().numpy().tobytes() for p in model.parameters()], f
    eager, compiled = run(False), run(True)
    assert compiled[:2] == eager[:2]
    assert compiled[2].stats.retraces == [] and compiled[2].stats.eager_calls == 0


# --- plain data deeper or larger than the scan walks (Note [Data beyond the walk]) ---

def test_a_setting_deep_in_a_nested_config_changed_between_calls_is_never_stale():
    """`cfg["train"]["aug"]["noise"]["scale"]`, a config nested past the scan's depth,
    edited between steps (a sweep, a curriculum): only the outer containers were
    guarded, so a cached path kept the first value."""
    def make():
        return {"cfg": {"train": {"aug": {"noise": {"scale": 1.0}}}}}

    def body(env, model, x, y):
        return F.cross_entropy(model(x * env["cfg"]["train"]["aug"]["noise"]["scale"]), y)

    def between(env, i):
        env["cfg"]["train"]["aug"]["noise"]["scale"] = 2.0 + i
    _assert_compiled_is_eager(body, make, between)


class _DeepTrainer:
    def __init__(self):
        tg.manual_seed(0)
        self.model = nn.Linear(3, 2)
        self.opt = tg.optim.SGD(self.model.parameters(), lr=0.1)
        self.cfg = {"loss": {"ce": {"smoothing": {"value": 0.0}}}}

    def step(self, x, y):
        self.opt.zero_grad()
        ls = self.cfg["loss"]["ce"]["smoothing"]["value"]
        loss = F.cross_entropy(self.model(x), y, label_smoothing=ls)
        loss.backward()
        self.opt.step()
        return loss


def test_a_trainers_deep_config_read_through_self_is_never_stale():
    def run(compiled):
        t = _DeepTrainer()
        f = tg.compile(t.step) if compiled else t.step
        out = []
        for i, (x, y) in enumerate(_batches(5)):
            out.append(f(x, y).item())
            t.cfg["loss"]["ce"]["smoothing"]["value"] = 0.05 * (i + 1)
        return out, t.model.weight.detach().numpy().tobytes()
    assert run(True) == run(False)


def test_an_item_of_a_long_list_changed_between_calls_is_never_stale():
    """A per-class weight table longer than the scan walks item by item (MAX_ITEMS)."""
    from tracegrad.compiler.state import MAX_ITEMS

    def make():
        return {"weights": [1.0] * (MAX_ITEMS + 10)}

    def body(env, model, x, y):
        return F.cross_entropy(model(x), y, weight=tg.tensor(env["weights"][:2]))

    def between(env, i):
        env["weights"][1] = 2.0 + i
    _assert_compiled_is_eager(body, make, between)


# --- environment variables (Note [Environment variables] in compiler/state.py) ---

@pytest.mark.parametrize("how", ["environ", "getenv", "from os import environ"])
def test_an_environment_variable_changed_between_calls_is_never_stale(how, monkeypatch):
    """`float(os.environ.get("AUG_SCALE", 1))` read inside the step: eager reads the
    environment on every call; a cached path kept the value it had when traced."""
    import os
    environ = os.environ
    read = {"environ": lambda: os.environ.get("TG_TEST_SCALE", "1"),
            "getenv": lambda: os.getenv("TG_TEST_SCALE", "1"),
            "from os import environ": lambda: environ.get("TG_TEST_SCALE", "1")}[how]
    monkeypatch.setenv("TG_TEST_SCALE", "1")

    def body(env, model, x, y):
        return F.cross_entropy(model(x * float(read())), y)

    def make():
        os.environ["TG_TEST_SCALE"] = "1"
        return {}

    def between(env, i):
        os.environ["TG_TEST_SCALE"] = str(2.0 + i)
    _assert_compiled_is_eager(body, make, between)
