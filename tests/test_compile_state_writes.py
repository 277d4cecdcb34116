"""Numbers a compiled function writes into Python state (Note [Numbers written to Python
state] in compiler/place_writes.py): counters, last losses and running averages kept on
objects compile, read per call and written back by every cached call, equal to eager."""
import warnings

import pytest

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F
from _differential import compare


class Trainer:
    """A training loop object as users write them: the step method keeps a step count, a
    running loss, the best loss and a count of correct predictions on `self`."""

    def __init__(self, comp):
        self.model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
        self.opt = tg.optim.Adam(self.model.parameters(), lr=1e-2)
        self.global_step, self.running, self.best, self.n_correct = 0, 0.0, float("inf"), 0
        self.step = comp(self.step)

    def step(self, x, y):
        out = self.model(x)
        loss = F.binary_cross_entropy_with_logits(out, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.global_step += 1
        value = loss.item()
        self.running = 0.98 * self.running + 0.02 * value
        self.best = min(self.best, value)
        self.n_correct += ((out > 0).float() == y).sum().item()
        return {"loss": value, "acc": self.n_correct / (self.global_step * x.shape[0]),
                "step": self.global_step}


def _trainer(comp):
    t = Trainer(comp)
    return t.step, {"model": t.model, "opt": t.opt, "counts": _Counts(t)}


class _Counts:
    """What the trainer keeps, compared by value and type (the harness compares a plain
    object by equality)."""

    def __init__(self, t):
        self.t = t

    def __eq__(self, other):
        a = [(type(v), v) for v in (self.t.global_step, self.t.running, self.t.best,
                                    self.t.n_correct)]
        b = [(type(v), v) for v in (other.t.global_step, other.t.running, other.t.best,
                                    other.t.n_correct)]
        return a == b


def _trainer_calls(step, objs, i):
    return step(tg.randn(4, 3), (tg.rand(4, 1) > 0.5).float())


def test_trainer_counters_compile_and_equal_eager():
    stats = compare(_trainer, _trainer_calls, n=8)
    # the first trace makes optimizer state, the second finds the written places, the
    # third is cached: every later call is a cache hit
    assert stats.eager_calls == 0 and stats.cache_hits == 5, stats


def test_trainer_counters_on_the_jax_backend():
    pytest.importorskip("jax")
    out = []
    for comp in (lambda f: f, lambda f: tg.compile(f, backend="jax")):
        tg.manual_seed(0)
        t = Trainer(comp)
        rs = [t.step(tg.randn(4, 3), (tg.rand(4, 1) > 0.5).float()) for _ in range(6)]
        out.append((rs, t))
    (re_, te), (rc, tc) = out
    for e, c in zip(re_, rc):
        assert c["step"] == e["step"] and type(c["step"]) is int
        assert c["loss"] == pytest.approx(e["loss"], rel=1e-5)
        assert c["acc"] == pytest.approx(e["acc"], rel=1e-5)
    assert (tc.global_step, tc.n_correct) == (te.global_step, te.n_correct) == (6, tc.n_correct)
    assert type(tc.n_correct) is int and type(tc.running) is float
    assert tc.running == pytest.approx(te.running, rel=1e-5)
    assert tc.step.stats.eager_calls == 0 and tc.step.stats.cache_hits == 3, tc.step.stats


def test_counter_on_a_compiled_module_and_in_its_forward_hook():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.calls, self.scale = 0, 1.0
            self.lin.register_forward_hook(self.hook)

        def hook(self, mod, inp, out):
            self.calls += 1
            self.scale = self.scale * 0.5
            return out * self.scale

        def forward(self, x):
            return self.lin(x).sum() * self.calls

    def make(comp):
        m = Net()
        return comp(m), {"m": m}

    def calls(step, objs, i):
        m = objs["m"]
        return step(tg.ones(2, 3) * i), m.calls, m.scale

    stats = compare(make, calls, n=6)
    assert stats.eager_calls == 0 and stats.cache_hits == 4, stats


def test_last_loss_written_only_compiles():
    def make(comp):
        m = nn.Linear(3, 1)
        box = {"last": None, "history_len": 0}

        def step(x):
            loss = m(x).pow(2).mean()
            box["last"] = loss.item()
            box["history_len"] += 1
            return loss

        return comp(step), {"m": m, "box": box}

    stats = compare(make, lambda step, objs, i: step(tg.randn(2, 3)), n=6)
    assert stats.eager_calls == 0 and stats.cache_hits >= 3, stats


def test_global_counter_with_a_global_statement():
    import types
    g = types.SimpleNamespace(step=0)

    def make(comp):
        g.step = 0
        m = nn.Linear(2, 2)
        ns = {"m": m, "F": F, "tg": tg, "g": g}
        exec("def step(x):\n"
             "    g.step += 1\n"
             "    warm = min(1.0, g.step / 3)\n"
             "    return F.mse_loss(m(x) * warm, x)\n", ns)
        return comp(ns["step"]), {"m": m, "g": g}

    stats = compare(make, lambda step, objs, i: (step(tg.ones(3, 2) * i), g.step), n=6)
    assert stats.eager_calls == 0 and stats.cache_hits >= 3, stats


def test_a_constant_written_on_one_path_to_a_place_read_per_call():
    # the place became read per call while another path only read it; the path that
    # writes a constant there must write it on every call (a cached call used to skip it)
    class Cfg:
        t = 1.0
    cfg = Cfg()

    def f(x, reset):
        y = x * cfg.t
        if reset:
            cfg.t = 0.5
        return y

    def make(comp):
        cfg.t = 1.0
        return comp(f), {}

    def calls(step, objs, i):
        if i < 4:
            cfg.t = 1.0 + i
        out = step(tg.ones(2), i >= 4)
        seen = cfg.t
        if i >= 4:
            cfg.t = 7.0 + i
        return out, seen

    compare(make, calls, n=8)


def test_a_counter_whose_value_shapes_the_program_runs_eagerly_with_eager_results():
    def make(comp):
        box = {"n": 0}

        def f(x):
            box["n"] += 1
            return x.repeat(box["n"])    # the exact value: a path per value

        return comp(f), {"box": box}

    stats = compare(make, lambda step, objs, i: step(tg.ones(2)), n=6, loud="must")
    assert stats.cache_hits == 0, stats


def test_a_written_number_that_also_escapes_is_not_cached():
    def make(comp):
        state = {"n": 0, "seen": []}

        def f(x):
            state["n"] += 1
            state["seen"].append(state["n"])  # the caller's list keeps every value
            return x * state["n"]

        return comp(f), {"state": state}

    compare(make, lambda step, objs, i: step(tg.ones(2)), n=5, loud=True)


def test_an_int_counter_that_becomes_a_float():
    def make(comp):
        box = {"v": 8}

        def f(x):
            box["v"] = box["v"] / 2 if box["v"] > 1 else box["v"] * 3
            return x * box["v"]

        return comp(f), {"box": box}

    compare(make, lambda step, objs, i: step(tg.ones(2)), n=7, loud=True)


def test_a_written_place_changed_between_calls_is_read_per_call():
    def make(comp):
        m = nn.Module()
        m.count = 0

        def f(x):
            m.count += 2
            return x + m.count

        return comp(f), {"c": m.__dict__}

    def calls(step, objs, i):
        out = step(tg.zeros(1))
        if i == 3:
            objs["c"]["count"] = -100        # the caller resets it
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no warning: nothing runs eagerly
        stats = compare(make, calls, n=7)
    assert stats.eager_calls == 0 and stats.cache_hits == 5, stats


def test_a_path_writing_an_object_into_a_number_place_is_not_cached():
    def make(comp):
        box = {"n": 0}

        def f(x, reset):
            if reset:
                box["n"] = [x.shape[0]]      # no cached call could write a fresh list
            else:
                box["n"] += 1
            return x * 2

        return comp(f), {"box": box}

    def calls(step, objs, i):
        box = objs["box"]
        if not isinstance(box["n"], int):
            box["n"] = 0
        out = step(tg.ones(2), i in (3, 4, 5))
        return out, box["n"]

    compare(make, calls, n=8, loud=True)


def test_a_counter_increment_needs_no_guard_in_the_program():
    # Note [Headroom of ints read per call]: an overflow guard after the parameter updates
    # kept them from being made in place
    m = nn.Linear(3, 1)
    opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    box = {"step": 0}

    def step(x):
        loss = m(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        box["step"] += 1
        return loss
    c = tg.compile(step)
    for _ in range(4):
        c(tg.ones(2, 3))
    assert box["step"] == 4 and c.stats.cache_hits == 1
    line = f":{step.__code__.co_firstlineno + 5} "          # box["step"] += 1
    sites = [g.site for g in c.programs[-1].guards]
    assert sites and not [s for s in sites if line in s], sites   # (SGD's own guards only)


def test_the_retrace_reason_names_an_int_place_an_int():
    box = {"k": 1}
    c = tg.compile(lambda x: x * box["k"])
    for i in range(4):
        box["k"] = i + 1
        assert c(tg.ones(2)).tolist() == [float(i + 1)] * 2
    assert c.stats.retraces and all("(int: read per call" in r for r in c.stats.retraces), \
        c.stats.retraces
