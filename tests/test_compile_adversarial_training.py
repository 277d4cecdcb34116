"""Adversarial review of compiled PyTorch-style training code: each test is a defect found
by running whole training steps (and `tg.compile(model)`) eagerly and compiled side by side,
written the way a user writes it. Compiled must equal eager (bitwise on numpy), or run
eagerly with a warning."""
import warnings

import numpy as np
import pytest

import tracegrad as tg

nn, F = tg.nn, tg.nn.functional


def _eager_and_compiled(make, calls):
    """Run `calls(f, objects)` on a fresh `make()` eagerly and compiled; both results."""
    out = []
    for compiled in (False, True):
        tg.manual_seed(0)
        f, objects = make(compiled)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append(calls(f, objects))
    return out


# --- attributes a traced call creates (Note [New attributes] in compiler/state.py) ---

class _Stash(nn.Module):
    """A forward that keeps an activation for later inspection, and counts its calls."""

    def __init__(self, count):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.count = count

    def forward(self, x):
        h = self.fc(x)
        self.feat = h.detach()
        if self.count:
            self.calls = getattr(self, "calls", 0) + 1
        return h.relu()


@pytest.mark.parametrize("count", [False, True])
def test_a_forward_stashing_an_activation_in_a_new_attribute_is_never_stale(count):
    def make(compiled):
        m = _Stash(count)
        return (tg.compile(m) if compiled else m), m

    def calls(f, m):
        seen = []
        for k in range(4):
            y = f(tg.randn(2, 3))
            seen.append((y.detach().numpy().tobytes(), m.feat.numpy().tobytes(),
                         getattr(m, "calls", None)))
        return seen
    eager, compiled = _eager_and_compiled(make, calls)
    assert compiled == eager


def test_a_step_recording_its_loss_on_a_plain_object_is_never_stale():
    class Log:
        pass

    def make(compiled):
        model = nn.Linear(3, 1)
        opt = tg.optim.SGD(model.parameters(), lr=0.1)
        log = Log()

        def step(x):
            opt.zero_grad(set_to_none=False)
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            log.last = loss.detach()
            return loss
        model(tg.randn(1, 3)).sum().backward()       # .grad set: no retrace for them
        return (tg.compile(step) if compiled else step), log

    def calls(f, log):
        return [(f(tg.randn(4, 3)).item(), log.last.item()) for _ in range(4)]
    eager, compiled = _eager_and_compiled(make, calls)
    assert compiled == eager


# --- zero_grad() clearing the .grad of a parameter the step does not use ---

def test_zero_grad_clearing_an_unused_heads_gradient_compiles_and_matches_eager():
    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(4, 4)
            self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)})
            self.task = "a"

        def forward(self, x):
            return self.heads[self.task](tg.tanh(self.body(x)))

    def make(compiled):
        model = TwoHeads()
        opt = tg.optim.Adam(model.parameters(), lr=0.01)

        def step(x, y):
            opt.zero_grad()                       # set_to_none: clears head b's .grad too
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return (tg.compile(step) if compiled else step), (model, opt)

    def calls(f, objects):
        model, opt = objects
        seen = []
        for k, task in enumerate("abaaabaa"):
            model.task = task
            loss = f(tg.randn(5, 4), tg.randint(0, 2, (5,)))
            seen.append(loss.item())
            for p in model.parameters():
                seen += [p.detach().numpy().tobytes(),
                         None if p.grad is None else p.grad.numpy().tobytes()]
            for s in opt.state.values():
                seen += [v.numpy().tobytes() for v in s.values()]
        return seen, getattr(f, "stats", None)
    (eager, _), (compiled, stats) = _eager_and_compiled(make, calls)
    assert compiled == eager
    assert stats.eager_calls == 0, str(stats)
    assert stats.cache_hits >= 3, str(stats)


def test_zero_grad_clearing_the_gradient_of_a_layer_the_step_skips_stays_compiled():
    a, b = nn.Linear(3, 1), nn.Linear(3, 1)
    opt = tg.optim.SGD(list(a.parameters()) + list(b.parameters()), lr=0.1)
    use = {"b": False}

    @tg.compile
    def step(x):
        opt.zero_grad()
        loss = (b if use["b"] else a)(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    for k in range(6):
        use["b"] = k == 2
        step(tg.randn(4, 3))
        assert (b.weight.grad is None) == (k != 2)
        assert (a.weight.grad is None) == (k == 2)
    assert step.stats.eager_calls == 0, str(step.stats)
    assert step.stats.cache_hits >= 2, str(step.stats)


def test_a_grad_the_step_found_none_on_an_idle_layer_is_checked_on_every_call():
    """The step never computes with `b`; `zero_grad()` found its .grad None when traced.
    After an eager backward into `b` between steps, eager's zero_grad clears it again."""
    a, b = nn.Linear(3, 1), nn.Linear(3, 1)
    opt = tg.optim.SGD(list(a.parameters()) + list(b.parameters()), lr=0.1, momentum=0.9)

    @tg.compile
    def step(x):
        opt.zero_grad()
        loss = a(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    for k in range(5):
        step(tg.randn(4, 3))
        assert b.weight.grad is None, k
        if k == 2:
            b(tg.randn(2, 3)).sum().backward()       # an eager probe of the other layer


def test_opt_step_updates_an_idle_layer_whose_grad_was_set_between_calls():
    """`opt.step()` found `b.grad` None when traced (so it skipped `b`); a gradient put
    there between calls must be applied, as eagerly."""
    def make(compiled):
        a, b = nn.Linear(3, 1), nn.Linear(3, 1)
        opt = tg.optim.Adam(list(a.parameters()) + list(b.parameters()), lr=0.1)

        def step(x):
            loss = a(x).pow(2).mean()
            loss.backward()
            opt.step()
            for p in a.parameters():
                p.grad = None
            return loss
        return (tg.compile(step) if compiled else step), (a, b, opt)

    def calls(f, objects):
        a, b, opt = objects
        seen = []
        for k in range(5):
            if k == 3:
                b(tg.randn(2, 3)).sum().backward()
            seen.append(f(tg.randn(4, 3)).item())
            seen += [p.detach().numpy().tobytes() for p in (*a.parameters(), *b.parameters())]
            seen.append(len(opt.state))
        return seen
    eager, compiled = _eager_and_compiled(make, calls)
    assert compiled == eager


# --- hyper-parameters rewritten between steps are runtime values, never re-traces ---

@pytest.mark.parametrize("make_opt,key", [
    (lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1), "weight_decay"),
    (lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1), "dampening"),
    (lambda ps: tg.optim.Adam(ps, lr=0.01, weight_decay=0.1), "weight_decay"),
    (lambda ps: tg.optim.AdamW(ps, lr=0.01, amsgrad=True), "weight_decay"),
    (lambda ps: tg.optim.Adam(ps, lr=0.01), "eps"),
], ids=["sgd_wd", "sgd_dampening", "adam_wd", "adamw_wd", "adam_eps"])
def test_a_hyper_parameter_schedule_set_by_hand_takes_effect_without_retracing(make_opt, key):
    def make(compiled):
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
        opt = make_opt(model.parameters())

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return (tg.compile(step) if compiled else step), (model, opt)

    def calls(f, objects):
        model, opt = objects
        seen = []
        for k in range(7):
            opt.param_groups[0][key] = 0.05 + 0.1 * k if key != "eps" else 10.0 ** -(k + 1)
            seen.append(f(tg.randn(6, 4), tg.randint(0, 3, (6,))).item())
            seen += [p.detach().numpy().tobytes() for p in model.parameters()]
            seen += [v.numpy().tobytes() for s in opt.state.values() for v in s.values()]
        return seen, getattr(f, "stats", None)
    (eager, _), (compiled, stats) = _eager_and_compiled(make, calls)
    assert compiled == eager
    assert stats.traces <= 2 and stats.eager_calls == 0, str(stats)


# --- BatchNorm with momentum=None (cumulative average): its factor is data ---

@pytest.mark.parametrize("what", ["step", "model"])
def test_batchnorm_cumulative_average_compiles_once(what):
    def make(compiled):
        model = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5, momentum=None), nn.ReLU(),
                              nn.Linear(5, 3))
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        fwd = tg.compile(model) if compiled and what == "model" else model

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(fwd(x), y)
            loss.backward()
            opt.step()
            return loss
        f = tg.compile(step) if compiled and what == "step" else step
        return f, (model, f if what == "step" else fwd)

    def calls(f, objects):
        model, compiled = objects
        seen = []
        for k in range(6):
            seen.append(f(tg.randn(6, 4), tg.randint(0, 3, (6,))).item())
            seen += [t.detach().numpy().tobytes()
                     for t in (*model.parameters(), *model.buffers())]
        return seen, getattr(compiled, "stats", None)
    (eager, _), (compiled, stats) = _eager_and_compiled(make, calls)
    assert compiled == eager
    assert stats.traces <= 2 and stats.eager_calls == 0, str(stats)


# --- a trainer object's state the compiled step never reads (Note [Unread attributes]) ---

class _Trainer:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
        self.opt = tg.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        self.sched = tg.optim.lr_scheduler.StepLR(self.opt, 1, gamma=0.8)
        self.losses, self.global_step, self.history = [], 0, {"epoch": 0}

    def train_step(self, x, y):
        self.opt.zero_grad()
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss


def test_a_trainers_bookkeeping_and_scheduler_outside_never_retrace_its_step():
    def make(compiled):
        t = _Trainer()
        return (tg.compile(t.train_step) if compiled else t.train_step), t

    def calls(f, t):
        seen = []
        for epoch in range(4):
            for _ in range(3):
                loss = f(tg.randn(6, 5), tg.randint(0, 3, (6,)))
                t.losses.append(loss.item())         # logging, outside the step
                t.global_step += 1
            t.sched.step()                           # once an epoch, outside the step
            t.history["epoch"] = epoch
            seen += [p.detach().numpy().tobytes() for p in t.model.parameters()]
        return seen + t.losses, getattr(f, "stats", None)
    (eager, _), (compiled, stats) = _eager_and_compiled(make, calls)
    assert compiled == eager
    assert stats.traces == 2 and stats.eager_calls == 0, str(stats)


class _Reader:
    """A step that reads its object's state (`how` picks how Python does it); each way
    lives in its own function, whose code alone names what it names."""

    def __init__(self, how):
        self.scale, self.cfg = 1.0, {"scale": 1.0}
        self.w = tg.ones(3, requires_grad=True)
        opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=0.5)
        self.plateau = tg.optim.lr_scheduler.ReduceLROnPlateau(opt, cooldown=3)
        self.step = getattr(self, "step_" + how)

    def helper(self):
        return self.scale

    def step_attribute(self, x):
        return (x * self.w).sum() * self.scale

    def step_getattr(self, x):
        return (x * self.w).sum() * getattr(self, "".join(["sc", "ale"]))

    def step_format(self, x):
        return (x * self.w).sum() * float("{0.scale}".format(self))

    def step_format_computed(self, x):
        return (x * self.w).sum() * float("".join(["{0.sc", "ale}"]).format(self))

    def step_other_library(self, x):
        import string
        fmt = "".join(["{0.sc", "ale}"])
        return (x * self.w).sum() * float(string.Formatter().vformat(fmt, (self,), {}))

    def step_helper(self, x):
        return (x * self.w).sum() * self.helper()

    def step_scheduler_property(self, x):
        return (x * self.w).sum() * (2.0 if self.plateau.in_cooldown else 1.0)

    def step_dict(self, x):
        return (x * self.w).sum() * self.cfg["scale"]


@pytest.mark.parametrize("how", ["attribute", "getattr", "format", "format_computed",
                                 "other_library", "helper", "scheduler_property", "dict"])
def test_state_a_compiled_step_reads_stays_guarded(how):
    def make(compiled):
        r = _Reader(how)
        return (tg.compile(r.step) if compiled else r.step), r

    def calls(f, r):
        seen = []
        for k in range(4):
            seen.append(f(tg.ones(3)).item())
            r.scale = r.cfg["scale"] = 2.0 + k
            r.plateau.cooldown_counter = k % 2
        return seen
    eager, compiled = _eager_and_compiled(make, calls)
    assert compiled == eager


def test_an_attribute_only_a_custom_functions_backward_reads_stays_guarded():
    """The backward of a custom Function is traced when the backward program is built,
    after the forward's trace: what it names counts as read (Note [Unread attributes])."""
    class Cfg:
        pass
    cfg = Cfg()
    cfg.scale, cfg.shift = 1.0, 0.0

    class Scale(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g * cfg.scale

    def make(compiled):
        m = nn.Linear(3, 1)

        def fwd(x):
            return Scale.apply(m(x)) + cfg.shift
        return (tg.compile(fwd) if compiled else fwd), m

    def calls(f, m):
        seen = []
        for k in range(3):
            cfg.scale = 1.0 + k
            m.zero_grad()
            f(tg.ones(2, 3)).sum().backward()
            seen.append(m.weight.grad.numpy().tobytes())
        return seen
    eager, compiled = _eager_and_compiled(make, calls)
    assert compiled == eager


_PACKAGE = '''
import tracegrad as tg


class Config:
    def __init__(self):
        self.scale = 1.0


class Model(tg.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Config()
        self.fc = tg.nn.Linear(3, 1)

    def forward(self, x):
        return self.fc(x) * self.config.scale


class Trainer:
    def __init__(self):
        self.scale = 1.0
        self.w = tg.ones(3, requires_grad=True)

    def step(self, x):
        return (x * self.w).sum() * self.scale
'''


@pytest.mark.parametrize("what", ["module", "method"])
def test_state_read_by_code_of_an_installed_package_stays_guarded(what, tmp_path,
                                                                   monkeypatch):
    """Code from site-packages is not the user's; a model class or a trainer from a package
    still reads its objects' attributes (Note [Unread attributes])."""
    import importlib
    import sys
    import tracegrad._effects as E
    (tmp_path / "tg_fake_pkg.py").write_text(_PACKAGE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(E, "_LIBS", E._LIBS + (str(tmp_path) + "/",))
    sys.modules.pop("tg_fake_pkg", None)
    pkg = importlib.import_module("tg_fake_pkg")

    def make(compiled):
        if what == "module":
            m = pkg.Model()
            return (tg.compile(m) if compiled else m), m.config
        t = pkg.Trainer()
        return (tg.compile(t.step) if compiled else t.step), t

    def calls(f, holder):
        seen = []
        for k in range(4):
            seen.append(f(tg.ones(2, 3)).sum().item())
            holder.scale = 2.0 + k
        return seen
    eager, compiled = _eager_and_compiled(make, calls)
    assert compiled == eager


def test_a_finalizer_the_garbage_collector_runs_mid_trace_is_not_the_steps_doing():
    """Note [No collection while watching] in _effects.py: another library's `__del__`, run
    by a collection that an allocation in the step happened to trigger, once counted as a
    call the step made, so the optimizer's hyper-parameters were guarded by value and
    each new weight decay re-traced (a test-order-dependent failure of the test above)."""
    import gc
    import os
    import sysconfig
    lib_file = os.path.join(sysconfig.get_paths()["purelib"], "some_library", "objects.py")
    ns = {}
    exec(compile("class Resource:\n    def __del__(self):\n        self.closed = True\n",
                 lib_file, "exec"), ns)
    resource = ns["Resource"]
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)

    def step(x, y):
        opt.zero_grad()
        r = resource()
        r.me = r
        del r                              # garbage in a cycle: freed by a collection
        pad = [[i] for i in range(10)]     # allocations in the step: a collection runs here
        loss = F.cross_entropy(model(x), y) + 0 * len(pad)
        loss.backward()
        opt.step()
        return loss

    c = tg.compile(step)
    old = gc.get_threshold()
    for k in range(7):
        opt.param_groups[0]["weight_decay"] = 0.05 + 0.1 * k
        gc.set_threshold(1, 1, 1)
        try:
            c(tg.randn(6, 4), tg.randint(0, 3, (6,)))
        finally:
            gc.set_threshold(*old)
    assert c.stats.traces == 2 and c.stats.eager_calls == 0, str(c.stats)
    assert gc.isenabled()
