"""`tg.optim.lr_scheduler` against PyTorch: the learning rates (and OneCycle's momentum or
betas) must be *exactly* PyTorch's, step by step, for 40 steps and two parameter groups."""
import warnings

import numpy as np
import pytest

import tracegrad as tg

STEPS = 40


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _opts(torch, kind="sgd"):
    """The same two-group optimizer in both libraries."""
    def groups(lib, make):
        return [{"params": [make(lib)]}, {"params": [make(lib)], "lr": 0.05}]
    pa = groups(tg, lambda lib: lib.zeros(2, requires_grad=True))
    pb = groups(torch, lambda lib: lib.zeros(2, requires_grad=True))
    if kind == "sgd":
        return tg.optim.SGD(pa, lr=0.1, momentum=0.9), torch.optim.SGD(pb, lr=0.1, momentum=0.9)
    return tg.optim.Adam(pa, lr=0.1), torch.optim.Adam(pb, lr=0.1)


CASES = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 11], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
    "CosineAnnealingLR0": lambda m, o: m.CosineAnnealingLR(o, T_max=10),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lambda e: 0.95 ** e + 0.1),
    "LambdaLRs": lambda m, o: m.LambdaLR(o, [lambda e: 1 / (e + 1), lambda e: 0.9 ** e]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.97),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=9),
    "LinearLRdown": lambda m, o: m.LinearLR(o, start_factor=1.0, end_factor=0.1,
                                            total_iters=13),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.3, total_iters=4),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=12, power=2.0),
    "OneCycleCos": lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.3], total_steps=STEPS),
    "OneCycleLinear": lambda m, o: m.OneCycleLR(o, max_lr=0.5, total_steps=STEPS,
                                                anneal_strategy="linear", pct_start=0.25),
    "OneCycle3": lambda m, o: m.OneCycleLR(o, max_lr=0.5, epochs=4, steps_per_epoch=10,
                                           three_phase=True, div_factor=10.0),
    "OneCycleNoMom": lambda m, o: m.OneCycleLR(o, max_lr=0.5, total_steps=STEPS,
                                               cycle_momentum=False),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=5), m.ExponentialLR(o, 0.9),
            m.CosineAnnealingLR(o, T_max=8)], milestones=[5, 17]),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.5, total_iters=6), m.ExponentialLR(o, 0.93)]),
}


def _run(lib, opt, sched, steps):
    seen = []
    for _ in range(steps):
        opt.step()
        sched.step()
        g = opt.param_groups
        seen.append((list(sched.get_last_lr()), [x["lr"] for x in g],
                     [x.get("momentum") for x in g], [x.get("betas") for x in g]))
    return seen


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_sequence_equals_torch(torch, name, kind):
    a, b = _opts(torch, kind)
    sa = CASES[name](tg.optim.lr_scheduler, a)
    sb = CASES[name](torch.optim.lr_scheduler, b)
    assert sa.get_last_lr() == sb.get_last_lr()
    assert getattr(sa, "last_epoch", None) == getattr(sb, "last_epoch", None)
    ra, rb = _run(tg, a, sa, STEPS), _run(torch, b, sb, STEPS)
    for i, (x, y) in enumerate(zip(ra, rb)):
        assert x == y, f"step {i}: {x} != {y}"      # exact, not approximate


def _resumed(lib, torch, name, before, after):
    """Run `before` steps, save optimizer and scheduler state, rebuild both and resume."""
    opt = _opts(torch)[0 if lib is tg else 1]
    sched = CASES[name](lib.optim.lr_scheduler, opt)
    first = _run(lib, opt, sched, before)
    osd, ssd = opt.state_dict(), sched.state_dict()
    opt2 = _opts(torch)[0 if lib is tg else 1]
    opt2.load_state_dict(osd)
    sched2 = CASES[name](lib.optim.lr_scheduler, opt2)
    sched2.load_state_dict(ssd)
    return first + _run(lib, opt2, sched2, after)


@pytest.mark.parametrize("name", sorted(CASES))
def test_state_dict_resume_equals_torch(torch, name):
    assert _resumed(tg, torch, name, 10, 15) == _resumed(torch, torch, name, 10, 15)


@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "CosineAnnealingLR", "OneCycleCos",
                                  "ExponentialLR", "LambdaLR"])
def test_state_dict_resumes_exactly(torch, name):
    a, _ = _opts(torch)
    straight = _run(tg, a, CASES[name](tg.optim.lr_scheduler, a), 25)
    assert _resumed(tg, torch, name, 10, 15) == straight


def test_state_dict_keys_match_torch(torch):
    a, b = _opts(torch)
    for name in ("StepLR", "OneCycleCos", "LambdaLR", "MultiStepLR"):
        sa = CASES[name](tg.optim.lr_scheduler, a)
        sb = CASES[name](torch.optim.lr_scheduler, b)
        assert set(sa.state_dict()) <= set(sb.state_dict()) | {"_is_initial",
                                                                "_get_lr_called_within_step"}


def test_closed_form_with_epoch_argument(torch):
    a, b = _opts(torch)
    sa = tg.optim.lr_scheduler.StepLR(a, 3, 0.5)
    sb = torch.optim.lr_scheduler.StepLR(b, 3, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for e in (4, 9, 2):
            sa.step(e)
            sb.step(e)
            assert sa.get_last_lr() == sb.get_last_lr()


def test_base_scheduler_errors_and_warnings():
    p = tg.zeros(1, requires_grad=True)
    opt = tg.optim.SGD([p], lr=0.1)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        tg.optim.lr_scheduler.StepLR(object(), 2)
    with pytest.raises(KeyError, match="initial_lr"):
        tg.optim.lr_scheduler.StepLR(opt, 2, last_epoch=3)
    s = tg.optim.lr_scheduler.StepLR(opt, 2)
    with pytest.warns(UserWarning, match="before `optimizer.step"):
        s.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        s.get_lr()
    with pytest.raises(ValueError, match="Tried to step"):
        o = tg.optim.lr_scheduler.OneCycleLR(opt, 1.0, total_steps=2)
        for _ in range(3):
            opt.step()
            o.step()
    with pytest.raises(ValueError, match="momentum or beta1"):
        class Plain(tg.optim.Optimizer):
            pass
        tg.optim.lr_scheduler.OneCycleLR(Plain([p], {"lr": 0.1}), 1.0, total_steps=5)


def test_custom_subclass_overriding_get_lr():
    class Halve(tg.optim.lr_scheduler.LRScheduler):
        def get_lr(self):
            return [b * 0.5 ** self.last_epoch for b in self.base_lrs]

    p = tg.zeros(1, requires_grad=True)
    opt = tg.optim.SGD([p], lr=1.0)
    s = Halve(opt)
    opt.step()
    s.step()
    s.step()
    assert s.get_last_lr() == [0.25] and s.last_epoch == 2


def test_scheduler_drives_training_numbers(torch):
    """The lr a scheduler sets is the one the optimizer uses (same parameters as torch)."""
    w0 = np.linspace(-1, 1, 6).astype(np.float32)
    a = tg.tensor(w0, requires_grad=True)
    b = torch.tensor(w0, requires_grad=True)
    oa = tg.optim.SGD([a], lr=0.1, momentum=0.9)
    ob = torch.optim.SGD([b], lr=0.1, momentum=0.9)
    sa = tg.optim.lr_scheduler.OneCycleLR(oa, 0.5, total_steps=12)
    sb = torch.optim.lr_scheduler.OneCycleLR(ob, 0.5, total_steps=12)
    for _ in range(12):
        for x, o, s in ((a, oa, sa), (b, ob, sb)):
            o.zero_grad()
            (x * x).sum().backward()
            o.step()
            s.step()
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("kw", [dict(), dict(mode="max", factor=0.5, patience=2),
                                dict(patience=1, cooldown=2, min_lr=[0.01, 0.002]),
                                dict(threshold_mode="abs", threshold=0.05, patience=0),
                                dict(mode="max", threshold_mode="abs", patience=3, eps=0.1)])
def test_reduce_lr_on_plateau_equals_torch(torch, kw):
    a, b = _opts(torch)
    sa = tg.optim.lr_scheduler.ReduceLROnPlateau(a, **kw)
    sb = torch.optim.lr_scheduler.ReduceLROnPlateau(b, **kw)
    metrics = [1.0, 0.9, 0.95, 0.95, 0.96, 0.7, 0.7, 0.71, 0.72, 0.8, 0.69, 0.7] * 4
    for i, m in enumerate(metrics):
        sa.step(tg.tensor(m) if i % 2 else m)
        sb.step(torch.tensor(m) if i % 2 else m)
        assert sa.get_last_lr() == sb.get_last_lr() and _lrs_of(a) == _lrs_of(b)
        assert (sa.num_bad_epochs, sa.cooldown_counter, sa.best) == (
            sb.num_bad_epochs, sb.cooldown_counter, sb.best)
    sd = sa.state_dict()
    assert set(sd) <= set(sb.state_dict())
    s2 = tg.optim.lr_scheduler.ReduceLROnPlateau(a, **kw)
    s2.load_state_dict(sd)
    assert s2.best == sa.best and s2.num_bad_epochs == sa.num_bad_epochs


def _lrs_of(opt):
    return [g["lr"] for g in opt.param_groups]


def test_reduce_lr_on_plateau_errors():
    opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        tg.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode foo is unknown"):
        tg.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="foo")
    with pytest.raises(ValueError, match="expected 1 min_lrs"):
        tg.optim.lr_scheduler.ReduceLROnPlateau(opt, min_lr=[0, 0])


@pytest.mark.parametrize("name", sorted(CASES))
def test_scheduler_state_survives_tg_save(torch, name, tmp_path):
    """Scheduler and optimizer state through a checkpoint file resume like in memory."""
    import io
    a, _ = _opts(torch)
    s = CASES[name](tg.optim.lr_scheduler, a)
    _run(tg, a, s, 7)
    buf = io.BytesIO()
    tg.save({"opt": a.state_dict(), "sched": s.state_dict()}, buf)
    buf.seek(0)
    ck = tg.load(buf)
    a2, _ = _opts(torch)
    a2.load_state_dict(ck["opt"])
    s2 = CASES[name](tg.optim.lr_scheduler, a2)
    s2.load_state_dict(ck["sched"])
    a3, _ = _opts(torch)
    a3.load_state_dict(a.state_dict())
    s3 = CASES[name](tg.optim.lr_scheduler, a3)
    s3.load_state_dict(s.state_dict())
    assert _run(tg, a2, s2, 12) == _run(tg, a3, s3, 12)


# ---------------- inside tg.compile ----------------
_COMPILED = {
    "StepLR": lambda L, o: L.StepLR(o, 2, 0.5),
    "CosineAnnealingLR": lambda L, o: L.CosineAnnealingLR(o, 5),
    "OneCycleLR": lambda L, o: L.OneCycleLR(o, 0.5, total_steps=12),
    "MultiStepLR": lambda L, o: L.MultiStepLR(o, [2, 5]),
    "LambdaLR": lambda L, o: L.LambdaLR(o, lambda e: 0.9 ** e),
    "SequentialLR": lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, 0.1, total_iters=3), L.ExponentialLR(o, 0.8)], [3]),
}


def _train(compiled, opt_name, sched_name, inside, steps=9):
    tg.manual_seed(0)
    m = tg.nn.Linear(3, 2)
    opt = (tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) if opt_name == "sgd"
           else tg.optim.Adam(m.parameters(), lr=0.1))
    sched = _COMPILED[sched_name](tg.optim.lr_scheduler, opt)
    x, y = tg.randn(8, 3), tg.randn(8, 2)

    def train_step(x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        tg.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
        return loss

    def train_step_and_schedule(x, y):
        loss = train_step(x, y)
        sched.step()
        return loss

    step = train_step_and_schedule if inside else train_step
    f = tg.compile(step) if compiled else step
    losses = []
    for _ in range(steps):
        losses.append(f(x, y).item())
        if not inside:
            sched.step()
    params = [p.detach().numpy().copy() for p in m.parameters()]
    return losses, params, sched.get_last_lr(), getattr(f, "stats", None)


@pytest.mark.filterwarnings("ignore:tracegrad.compile")
@pytest.mark.parametrize("inside", [True, False])
@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
@pytest.mark.parametrize("sched_name", sorted(_COMPILED))
def test_compiled_training_step_with_scheduler_equals_eager(sched_name, opt_name, inside):
    """A scheduler stepped inside (replayed after each call) or outside the compiled step:
    compiled results equal eager ones exactly, and a changing lr (or SGD momentum) is a
    runtime value, not a reason to re-trace."""
    eager = _train(False, opt_name, sched_name, inside)
    comp = _train(True, opt_name, sched_name, inside)
    assert eager[0] == comp[0] and eager[2] == comp[2]
    for a, b in zip(eager[1], comp[1]):
        np.testing.assert_array_equal(a, b)
    stats = comp[3]
    # (OneCycleLR rebinds Adam's betas tuple every step: its items are runtime values too)
    # one trace, one re-trace once .grad exists, one more at SequentialLR's milestone
    assert stats.traces <= (3 if sched_name == "SequentialLR" else 2), str(stats)
    assert stats.eager_calls == 0, str(stats)


@pytest.mark.filterwarnings("ignore:tracegrad.compile")
@pytest.mark.parametrize("key", ["weight_decay", "momentum", "dampening"])
def test_replayed_scheduler_changing_any_group_option_stays_exact(key):
    """A scheduler (stepped inside the compiled function) that rewrites an optimizer option
    the compiled step reads: never a stale constant in the trace (found in review: guards
    on the optimizer's param groups were dropped as if the scheduler owned them)."""
    class Ramp(tg.optim.lr_scheduler.LRScheduler):
        def get_lr(self):
            for g in self.optimizer.param_groups:
                g[key] = 0.05 * self.last_epoch if key != "momentum" else 0.9 - 0.05 * self.last_epoch
            return [g["lr"] for g in self.optimizer.param_groups]

    def body(loss, sched):
        sched.step()
        return (loss,)

    (la, pa, _), (lb, pb, _) = (_sched_run(c, body, Ramp, steps=6) for c in (False, True))
    assert la == lb
    for a, b in zip(pa, pb):
        np.testing.assert_array_equal(a, b)


def _step_lr(opt):
    return tg.optim.lr_scheduler.StepLR(opt, 2, 0.5)


def _sched_run(compiled, body, make_sched=_step_lr, steps=5):
    """A compiled (or eager) SGD step on a Linear ending in `body(loss, sched)`: the
    outputs of each call, the parameters after them, and the compiled function's stats."""
    tg.manual_seed(0)
    m = tg.nn.Linear(3, 2)
    opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    sched = make_sched(opt)
    x, y = tg.randn(8, 3), tg.randn(8, 2)

    def step(x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return body(loss, sched)
    f = tg.compile(step) if compiled else step
    outs = []
    for _ in range(steps):
        out = f(x, y)
        outs.append([o.item() if isinstance(o, tg.Tensor) else o for o in out])
    return outs, [p.detach().numpy() for p in m.parameters()], getattr(f, "stats", None)


@pytest.mark.parametrize("body", [
    lambda loss, s: (s.step(), loss, s.get_last_lr()[0])[1:],        # logged after the step
    lambda loss, s: (loss, s.get_last_lr()[0], s.step())[:2],        # read before it
    lambda loss, s: (s.step(), loss * s.get_last_lr()[0])[1:],       # computed with
    lambda loss, s: (s.step(), loss, s.last_epoch)[1:],              # an attribute it rewrites
    lambda loss, s: (s.step(), loss, getattr(s, "last_epoch"))[1:],  # spelled as a string
], ids=["get_last_lr-after", "get_last_lr-before", "computed-with", "last_epoch", "getattr"])
def test_reading_state_a_replayed_step_rewrites_runs_eagerly(body):
    """Note [Reads of replayed state] (found in review: `return loss, sched.get_last_lr()[0]`
    kept returning the lr of the traced call): such calls run eagerly, with a warning, and
    return what eager returns."""
    eager = _sched_run(False, body)
    with pytest.warns(UserWarning, match="rewrites on every call"):
        comp = _sched_run(True, body)
    assert eager[0] == comp[0]
    for a, b in zip(eager[1], comp[1]):
        np.testing.assert_array_equal(a, b)
    assert comp[2].eager_calls >= 4


def test_user_scheduler_reading_its_own_state_inside_its_step_still_compiles():
    """The reads a scheduler's own `get_lr` makes run inside the replayed step (replayed
    too): they neither stale nor stop compiling; nor does an attribute of the same name on
    the user's own objects that the step does not rewrite."""
    class Halving(tg.optim.lr_scheduler.LRScheduler):
        def __init__(self, opt):
            self.gamma = 0.5                    # read here, never rewritten by step()
            super().__init__(opt)

        def get_lr(self):
            return [0.1 * self.gamma ** (self.last_epoch // 2)
                    for _ in self.optimizer.param_groups]

    class Cfg:
        gamma = 2.0
    cfg = Cfg()

    def body(loss, sched):
        sched.step()
        return (loss * cfg.gamma,)

    (la, pa, _), (lb, pb, stats) = (_sched_run(c, body, Halving, steps=6) for c in (False, True))
    assert la == lb
    for a, b in zip(pa, pb):
        np.testing.assert_array_equal(a, b)
    assert stats.eager_calls == 0 and stats.cache_hits >= 3, str(stats)
