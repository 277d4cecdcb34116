"""Float arguments that change between calls are read per call, not re-traced (Note [Float
arguments that change] in compiler/dynamic_numbers.py, Note [Numbers read per call] in
tracing/numbers.py), and compiled calls stay eager's: values, dtypes, errors, the Python
state the function stores the float into, and the branches it takes on it."""
import copy
import json
import math
import threading
import warnings

import numpy as np
import pytest

import tracegrad as tg

F = tg.nn.functional
VALUES = [0.1, 0.05, 0.07, 0.02, 0.2, 0.01, 0.0, -0.0, 0.05, 1.5, -2.0]


def _snapshot(r):
    r = r if isinstance(r, tuple) else (r,)
    return [(type(a).__name__, np.array(a.detach().numpy()) if isinstance(a, tg.Tensor) else a,
             str(a.dtype) if isinstance(a, tg.Tensor) else None) for a in r]


def _run(make, values, compiled, backend="numpy", kw=False):
    tg.manual_seed(0)
    fn, state = make()
    if compiled:
        fn = tg.compile(fn, backend=backend)
    out = []
    for v in values:
        try:
            out.append(_snapshot(fn(state["x"], lr=v) if kw else fn(state["x"], v)))
        except Exception as e:              # eager's error, type and text
            out.append(("error", type(e).__name__, str(e)))
    kept = {k: (v.detach().numpy().copy() if isinstance(v, tg.Tensor) else copy.deepcopy(v))
            for k, v in state.items() if k not in ("x", "opt")}
    return out, kept, getattr(fn, "stats", None)


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and np.array_equal(a, b, equal_nan=True)
                and np.array_equal(np.signbit(a), np.signbit(b)))
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(b) is dict and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float):                # the very type and sign: state holds floats
        return type(a) is type(b) and (a == b or a != a and b != b) and \
            math.copysign(1, a) == math.copysign(1, b)
    if hasattr(a, "__dict__") and not callable(a):
        return type(a).__name__ == type(b).__name__ and _same(vars(a), vars(b))
    return type(a) is type(b) and a == b


def check(make, values=VALUES, backend="numpy", kw=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = _run(make, values, False, backend, kw)
        compiled = _run(make, values, True, backend, kw)
    for k, (a, b) in enumerate(zip(eager[0], compiled[0])):
        assert _same(a, b), f"call {k} (value {values[k]}): eager {a}, compiled {b}"
    assert _same(eager[1], compiled[1]), f"state: eager {eager[1]}, compiled {compiled[1]}"
    return compiled[2]


CASES = {}


def case(traces):
    """A program `make() -> (fn(x, lr), state)`; `traces`: how many traces the compiled
    function may take over VALUES (None: any; the program needs the float's value)."""
    def deco(f):
        CASES[f.__name__] = (f, traces)
        return f
    return deco


@case(2)
def scaled():
    return (lambda x, lr: x * lr - lr / 3 + (1 - lr) * x / 2), {"x": tg.randn(3)}


@case(3)
def branch_on_value():
    return (lambda x, lr: x * 2 if lr > 0.06 else x - lr), {"x": tg.randn(3)}


@case(2)
def integer_tensor():
    return (lambda x, lr: x * lr + lr), {"x": tg.arange(5)}


@case(2)
def half_precision():
    return (lambda x, lr: x * lr + (1 - lr)), {"x": tg.randn(4).half()}


@case(2)
def double_precision():
    return (lambda x, lr: x * lr + 1e-3 * lr), {"x": tg.randn(4, dtype=tg.float64)}


@case(2)
def sgd_by_hand_zero_dim():
    s = {"x": tg.randn(()), "w": tg.tensor(1.5, requires_grad=True)}

    def f(x, lr):
        loss = (s["w"] * x).pow(2)
        g, = tg.autograd.grad(loss, [s["w"]])
        with tg.no_grad():
            s["w"].sub_(lr * g)
        return loss
    return f, s


@case(None)
def add_alpha():
    s = {"x": tg.randn(3), "p": tg.zeros(3)}

    def f(x, lr):
        s["p"].add_(x, alpha=lr)
        return s["p"] * 1
    return f, s


@case(None)
def python_arithmetic():
    return (lambda x, lr: x * sum([lr, lr, 0.5]) * max(lr, 0.05) * min(lr, 0.05)
            * abs(-lr) * (+lr) * (lr or 1.0)), {"x": tg.randn(3)}


@case(None)
def reflected_and_division():
    return (lambda x, lr: (1 / (lr + 3)) * x + x / (lr + 3) - lr / 2 + (lr - x)),\
        {"x": tg.randn(3)}


@case(None)
def division_by_zero():
    return (lambda x, lr: x * (1.0 / (lr - 0.05))), {"x": tg.randn(3)}


@case(None)
def exact_value_uses():
    s = {"x": tg.randn(30), "log": []}

    def f(x, lr):
        s["log"].append(f"{lr:.3f} {round(lr, 2)} {math.exp(lr):.4f} {lr.is_integer()}")
        return x[: int(abs(lr) * 10)].sum() + tg.full((30,), lr) + tg.tensor(lr) \
            + x.clamp(max=lr) + x ** lr + np.float32(lr) + np.sqrt(abs(lr))
    return f, s


@case(None)
def dropout_probability():
    return (lambda x, lr: F.dropout(x, p=min(abs(lr), 0.9))), {"x": tg.randn(50)}


@case(None)
def returned_floats():
    return (lambda x, lr: (x * lr, lr * 2, -lr, lr)), {"x": tg.randn(3)}


@case(None)
def stored_in_state():
    s = {"x": tg.randn(3), "hist": [], "cell": {}}

    class Box:
        pass
    box = Box()
    s["box"] = box

    def f(x, lr):
        s["hist"].append(lr * 2)
        s["cell"]["lr"] = lr
        box.last = -lr
        return x * lr
    return f, s


@case(None)
def type_is_float():
    return (lambda x, lr: x * lr if type(lr) is float else x), {"x": tg.randn(3)}


@case(2)
def isinstance_float():
    return (lambda x, lr: x * lr if isinstance(lr, float) else x), {"x": tg.randn(3)}


@case(None)
def hashed():
    s = {"x": tg.randn(3), "seen": {}}

    def f(x, lr):
        s["seen"].setdefault(lr, len(s["seen"]))
        return x * lr
    return f, s


@case(None)
def custom_function():
    class Scaled(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x.clamp(max=k) * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None
    s = {"x": tg.randn(3, requires_grad=True)}
    return (lambda x, lr: Scaled.apply(x, lr)), s


@case(None)
def optimizer_group_written():
    m = tg.nn.Linear(3, 2)
    opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    s = {"x": tg.randn(4, 3), "w": m.weight, "b": m.bias, "opt": opt}

    def f(x, lr):
        for g in opt.param_groups:
            g["lr"] = abs(lr)
        opt.zero_grad()
        loss = m(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss, opt.param_groups[0]["lr"]
    return f, s


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_equals_eager_over_changing_floats(name):
    make, traces = CASES[name]
    stats = check(make)
    if traces is not None:
        assert stats.traces == traces, stats


def test_keyword_and_default_floats():
    def make():
        tg.manual_seed(3)
        w = tg.randn(3, requires_grad=True)

        def step(x, lr=0.1, *, scale=1.0):
            loss = (w * x).sum() * scale
            g, = tg.autograd.grad(loss, [w])
            with tg.no_grad():
                w.sub_(lr * g)
            return loss
        return step, {"x": tg.randn(3), "w": w}
    stats = check(make, kw=True)
    assert stats.traces == 2


def test_a_learning_rate_argument_never_retraces_a_training_step():
    """The hand-written training step with `lr` from a schedule: two traces in 20 steps
    (the first value, then the change), parameters bit-equal to eager's."""
    def make():
        tg.manual_seed(0)
        model = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Tanh(), tg.nn.Linear(8, 3))
        params = list(model.parameters())

        def step(x, y, lr):
            loss = F.cross_entropy(model(x), y)
            grads = tg.autograd.grad(loss, params)
            with tg.no_grad():
                for p, g in zip(params, grads):
                    p -= lr * g
            return loss
        return model, step
    x, y = tg.randn(6, 4), tg.tensor([0, 1, 2, 0, 1, 2])
    m1, s1 = make()
    m2, s2 = make()
    s2 = tg.compile(s2)
    for i in range(20):
        lr = 0.5 * math.cos(i / 20)
        a, b = s1(x, y, lr), s2(x, y, lr)
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    for p, q in zip(m1.parameters(), m2.parameters()):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy())
    assert s2.stats.traces == 2 and s2.stats.cache_hits == 18
    assert "float argument 'lr' changed value" in s2.stats.retraces[0]
    text = s2.explain()
    assert "%lr = argument 'lr'  (a runtime number" in text


def test_a_float_stored_by_the_function_is_a_float_afterwards():
    hist = []

    def f(x, lr):
        hist.append(lr)
        return x * lr
    cf = tg.compile(f)
    x = tg.randn(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for v in (0.1, 0.2, 0.3):
            cf(x, v)
    assert hist == [0.1, 0.2, 0.3] and all(type(h) is float for h in hist)
    json.dumps(hist)


def test_a_method_of_a_module_with_a_float_keyword():
    class M(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tg.nn.Linear(3, 3)

        def forward(self, x, temperature=1.0):
            return tg.softmax(self.lin(x) / temperature, -1)
    tg.manual_seed(0)
    m = M()
    cm = tg.compile(m)
    x = tg.randn(2, 3)
    for t in (1.0, 0.5, 0.7, 2.0, 3.0):
        a, b = cm(x, temperature=t), m(x, temperature=t)
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
        ga, = tg.autograd.grad(a.sum() * 3 + (a * a).sum(), [m.lin.weight])
        gb, = tg.autograd.grad(b.sum() * 3 + (b * b).sum(), [m.lin.weight])
        assert np.array_equal(ga.numpy(), gb.numpy())


def test_threads_read_their_own_numbers():
    x = tg.randn(4)
    cf = tg.compile(lambda x, s: x * s + s)
    cf(x, 1.0)
    cf(x, 2.0)
    errors = []

    def worker(k):
        for i in range(200):
            s = float(k * 1000 + i)
            if not np.array_equal(cf(x, s).numpy(), (x * s + s).numpy()):
                errors.append((k, i))
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and cf.stats.traces == 2


def test_jax_backend_reads_floats_per_call():
    pytest.importorskip("jax")
    stats = check(CASES["sgd_by_hand_zero_dim"][0], backend="jax")
    assert stats.traces == 2


def test_a_scheduler_stepped_with_a_float_argument():
    def make():
        tg.manual_seed(0)
        m = tg.nn.Linear(3, 2)
        opt = tg.optim.SGD(m.parameters(), lr=0.1)
        sched = tg.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0) if hasattr(
            tg.optim.lr_scheduler, "ReduceLROnPlateau") else None

        def f(x, metric):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step(metric)
            return loss, opt.param_groups[0]["lr"]
        return f, {"x": tg.randn(4, 3), "w": m.weight, "opt": opt}
    check(make, values=[1.0, 0.9, 0.95, 0.97, 0.5, 0.6, 0.7])


def test_python_errors_name_the_float():
    def make():
        def f(x, lr):
            if lr > 0.5:
                return x[[1, 2][lr]]        # TypeError: list indices ... not float
            return x * lr
        return f, {"x": tg.randn(3)}
    check(make, values=[0.1, 0.2, 0.7, 0.3, 0.8])


# -- Note [Float attributes that change] (compiler/dynamic_numbers.py) --
KL_SCHEDULE = 0.5                       # a global the step reads, changed between steps


class Annealed(tg.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = tg.nn.Linear(4, 4)
        self.drop = tg.nn.Dropout(0.1)
        self.kl_weight, self.tau = 0.0, 1.0
        self.seen = []

    def forward(self, x):
        h = self.drop(self.enc(x))
        return tg.softmax(h / self.tau, -1), (h ** 2).mean() * self.kl_weight


def _annealing_run(compiled, body, schedule):
    tg.manual_seed(0)
    m = Annealed()
    opt = tg.optim.Adam(m.parameters(), lr=1e-2)
    cfg = {"w": 0.5, "ws": [0.1, 0.2]}

    def step(x):
        opt.zero_grad()
        p, kl = m(x)
        loss = body(m, cfg, p, kl)
        loss.backward()
        opt.step()
        return loss
    fn = tg.compile(step) if compiled else step
    x = tg.randn(3, 4)
    out = []
    global KL_SCHEDULE
    for i in range(16):
        schedule(m, cfg, i)
        KL_SCHEDULE = 0.5 - i / 64
        out.append(fn(x).detach().numpy())
    state = [p.detach().numpy() for p in m.parameters()] + [
        dict(vars(m)).get("kl_weight"), m.tau, list(m.seen), cfg, m.drop.p]
    return out, state, getattr(fn, "stats", None)


def _anneal(m, cfg, i):
    m.kl_weight = min(1.0, i / 8)
    m.tau = max(0.5, math.exp(-i / 8))
    cfg["w"] = 0.5 + i * 0.01
    cfg["ws"][1] = 0.2 + i / 100


def _check_annealing(body, schedule=_anneal):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = _annealing_run(False, body, schedule)
        compiled = _annealing_run(True, body, schedule)
    for k, (a, b) in enumerate(zip(eager[0], compiled[0])):
        assert np.array_equal(a, b), f"step {k}: eager {a}, compiled {b}"
    assert _same(eager[1], compiled[1])
    return compiled[2]


def test_annealed_attributes_dict_entries_and_globals_are_read_per_call():
    stats = _check_annealing(lambda m, cfg, p, kl: (p * p).sum() + kl * KL_SCHEDULE
                             + cfg["w"] * p.mean() + cfg["ws"][1] * p.std())
    # the first call, Adam creating its state (not cached), the change: no more
    assert stats.traces == 3, stats
    assert "m.kl_weight changed: 0.125 -> 0.25" in stats.retraces[0]
    assert "read per call" in stats.retraces[0]


def test_an_attribute_needing_its_value_keeps_a_path_per_value():
    def schedule(m, cfg, i):
        _anneal(m, cfg, i)
        m.drop.p = 0.1 + (i % 3) / 10   # dropout's probability: an attribute of a primitive
    stats = _check_annealing(lambda m, cfg, p, kl: (p * p).sum() + kl, schedule)
    assert stats.traces <= 8


def test_a_step_storing_or_rewriting_an_annealed_attribute():
    def body(m, cfg, p, kl):
        m.seen.append(m.tau * 2)        # stores a value computed from the place
        cfg["w"] = cfg["w"] * 0.9       # rewrites a place it reads
        return (p * p).sum() + kl + cfg["w"] * p.sum()
    _check_annealing(body)


def test_probing_an_attribute_does_not_take_the_value():
    """Library code probes operands (`getattr(x, "_data", None)`): a missing attribute
    raises AttributeError as on a float, without keying the argument by value."""
    def make():
        def f(x, lr):
            return x * lr + (getattr(lr, "_data", None) is None) + hasattr(lr, "shape")
        return f, {"x": tg.randn(3)}
    stats = check(make)
    assert stats.traces == 2, stats
