"""First-law review of the training-loop idioms around optimizers (harness:
tests/_optim_review.py): gradient accumulation inside and outside, freezing, clipping,
two optimizers, hand edits of param groups and state, resuming from state dicts, deep
copies, optimizer hooks, SWA, the gradient scaler, and more; compiled (numpy and JAX
backends) against eager, and eager against PyTorch.

The tests of defects this review found (each fails without its fix) come first in each
section; the parametrised programs are probes that passed, kept as regression guards (their
JAX sweeps are marked slow: `-m slow`)."""
import copy

import numpy as np
import pytest

import tracegrad as tg
from _optim_review import Program, _closure_step, _data, _fb, _model, _std

nn, F = tg.nn, tg.nn.functional


# -- training-loop idioms ------------------------------------------------------------------

def _accumulate_outside(k=3):
    """The compiled function computes loss / k and backward; the loop steps every k."""
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = lib.optim.Adam(m.parameters(), lr=0.01)
        return (lambda x, y: _fb(lib, m, x, y, 1 / k)), dict(m=m, opt=opt)

    def call(lib, step, objs, i, dtype):
        out = step(*_data(lib, i, dtype))
        if (i + 1) % k == 0:
            objs["opt"].step()
            objs["opt"].zero_grad()
        return out
    return Program(build, call, n=7)


def _accumulate_inside(k=2, set_to_none=True):
    """The whole loop body compiled, the batch index a Python int argument."""
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y, i):
            loss = _fb(lib, m, x, y, 1 / k)
            if (i + 1) % k == 0:
                opt.step()
                opt.zero_grad(set_to_none=set_to_none)
            return loss
        return step, dict(m=m, opt=opt)

    def call(lib, step, objs, i, dtype):
        return step(*_data(lib, i, dtype), i % k)
    return Program(build, call, n=7)


def _freeze(how):
    """Freeze the first layer between calls 2 and 4, by hand."""
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)

        def step(x, y):
            opt.zero_grad(set_to_none=how != "zeros")
            loss = _fb(lib, m, x, y)
            opt.step()
            return loss
        return step, dict(m=m, opt=opt)

    def call(lib, step, objs, i, dtype):
        first = objs["m"][0]
        if how in ("requires_grad", "zeros"):
            first.requires_grad_(i not in (2, 3))
        if how == "grad None" and i in (2, 3, 4):
            out = step(*_data(lib, i, dtype))
            objs["m"][0].weight.grad = None
            return out
        return step(*_data(lib, i, dtype))
    return Program(build, call)


def _grad_none_inside(lib, dtype):
    m = _model(lib, dtype)
    opt = lib.optim.Adam(m.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = _fb(lib, m, x, y)
        m[2].bias.grad = None                 # the bias keeps its value this step
        opt.step()
        return loss
    return step, dict(m=m, opt=opt)


def _clip(kind, **kw):
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = _fb(lib, m, x, y, 3.0)
            if kind == "norm":
                n = lib.nn.utils.clip_grad_norm_(m.parameters(), 0.3, **kw)
            else:
                n = lib.nn.utils.clip_grad_value_(m.parameters(), 0.05)
            opt.step()
            return loss, n
        return step, dict(m=m, opt=opt)
    return Program(build)


def _clip_nonfinite(lib, step, objs, i, dtype):
    x, y = _data(lib, i, dtype)
    if i in (2, 4):
        x[0, 0] = float("nan")
    return step(x, y)


def _two_optimizers(lib, dtype):
    """GAN style: two models, two optimizers over disjoint parameters, two backward."""
    g, d = _model(lib, dtype, 1), _model(lib, dtype, 2)
    og = lib.optim.Adam(g.parameters(), lr=0.01, betas=(0.5, 0.999))
    od = lib.optim.RMSprop(d.parameters(), lr=0.01)

    def step(x, y):
        od.zero_grad()
        fake = g(x).detach()
        ld = d(fake.tanh().repeat(1, 2)[:, :4]).pow(2).mean() - d(x).pow(2).mean() * 0.1
        ld.backward()
        od.step()
        og.zero_grad()
        lg = -d(g(x).tanh().repeat(1, 2)[:, :4]).pow(2).mean()
        lg.backward()
        og.step()
        return ld, lg
    return step, dict(g=g, d=d, og=og, od=od)


def _shared_optimizer(lib, dtype):
    """One optimizer (and scheduler) used by two compiled functions."""
    m = _model(lib, dtype)
    opt = lib.optim.Adam(m.parameters(), lr=0.01, weight_decay=0.01)
    sched = lib.optim.lr_scheduler.StepLR(opt, 2, 0.5)

    def step_a(x, y):
        opt.zero_grad()
        loss = _fb(lib, m, x, y)
        opt.step()
        return loss

    def step_b(x, y):
        opt.zero_grad()
        loss = _fb(lib, m, x * 2, y)
        opt.step()
        sched.step()
        return loss
    return [step_a, step_b], dict(m=m, opt=opt, sched=sched)


def _call_alternately(lib, steps, objs, i, dtype):
    return steps[i % 2](*_data(lib, i, dtype))


def _hand_edits(key):
    """Hyper-parameters changed by hand between calls, and a group added."""
    def build(lib, dtype):
        m = _model(lib, dtype)
        extra = _model(lib, dtype, 3)[2:]
        ps = list(m.parameters())
        opt = lib.optim.SGD([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.05}], lr=0.1,
                            momentum=0.9) if key != "betas" else \
            lib.optim.Adam([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.02}], lr=0.01)

        def step(x, y):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(m(x) + extra(m[:2](x)), y)
            loss.backward()
            opt.step()
            return loss
        return step, dict(m=m, extra=extra, opt=opt)

    def call(lib, step, objs, i, dtype):
        opt = objs["opt"]
        if key == "lr":
            for g in opt.param_groups:
                g["lr"] = g["lr"] * 0.7
        elif key == "momentum":
            opt.param_groups[i % 2]["momentum"] = 0.5 + 0.1 * i
        elif key == "betas":
            opt.param_groups[0]["betas"] = (0.9 - 0.05 * i, 0.99)
        elif key == "add_param_group" and i == 3:
            opt.add_param_group({"params": list(objs["extra"].parameters()), "lr": 0.2})
        return step(*_data(lib, i, dtype))
    return Program(build, call)


def _resume(source):
    """state_dict() of the optimizer and the scheduler after call 2, loaded into fresh
    ones (and a fresh model) after call 3: training resumes as if continuous."""
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = lib.optim.AdamW(m.parameters(), lr=0.01, amsgrad=True)
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, 5)
        holder = dict(m=m, opt=opt, sched=sched)

        def step(x, y):
            o, s = holder["opt"], holder["sched"]
            o.zero_grad()
            loss = _fb(lib, holder["m"], x, y)
            o.step()
            s.step()
            return loss
        return step, holder

    def call(lib, step, objs, i, dtype):
        if i == 2:
            objs["saved"] = (copy.deepcopy(objs["m"].state_dict()),
                             copy.deepcopy(objs["opt"].state_dict()),
                             objs["sched"].state_dict())
        if i == 3:
            ms, os_, ss = objs.pop("saved")
            m = _model(lib, dtype, 7)
            m.load_state_dict(ms)
            opt = lib.optim.AdamW(m.parameters(), lr=0.5)
            opt.load_state_dict(os_)
            sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, 5)
            sched.load_state_dict(ss)
            objs.update(m=m, opt=opt, sched=sched)
        return step(*_data(lib, i if i != 3 else 2, dtype))
    return Program(build, call)


def _deepcopy_opt(lib, dtype):
    m = _model(lib, dtype)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    holder = dict(m=m, opt=opt)

    def step(x, y):
        holder["opt"].zero_grad()
        loss = _fb(lib, m, x, y)
        holder["opt"].step()
        return loss
    return step, holder


def _deepcopy_call(lib, step, objs, i, dtype):
    if i == 3:
        objs["copy"] = copy.deepcopy(objs["opt"])
    return step(*_data(lib, i, dtype))


def _hooks(lib, dtype):
    m = _model(lib, dtype)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    log = []
    opt.register_step_pre_hook(lambda o, a, k: log.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: log.append("post"))
    opt.register_state_dict_pre_hook(lambda o: log.append("sd"))

    def step(x, y):
        opt.zero_grad()
        loss = _fb(lib, m, x, y)
        opt.step()
        return loss, len(log)
    return step, dict(m=m, opt=opt, log=log)


def _swa(lib, dtype):
    m = _model(lib, dtype)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    swa = lib.optim.swa_utils.AveragedModel(m)
    ema = lib.optim.swa_utils.AveragedModel(
        m, multi_avg_fn=lib.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    sched = lib.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=3)

    def step(x, y):
        opt.zero_grad()
        loss = _fb(lib, m, x, y)
        opt.step()
        swa.update_parameters(m)
        ema.update_parameters(m)
        sched.step()
        return loss, swa(x), ema(x)
    return step, dict(m=m, opt=opt, swa=swa, ema=ema, sched=sched)


def _scaler(lib, dtype):
    m = _model(lib, dtype)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    scaler = (lib.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
              if lib is tg else lib.amp.GradScaler("cpu", init_scale=2.0 ** 8,
                                                     growth_interval=2))

    def step(x, y):
        opt.zero_grad()
        with lib.autocast("cpu", dtype=lib.bfloat16, enabled=False):
            loss = lib.nn.functional.cross_entropy(m(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        return loss, scaler.get_scale()
    return step, dict(m=m, opt=opt, scaler=scaler.state_dict)


IDIOMS = {
    "accumulate, step outside": _accumulate_outside(),
    "accumulate inside, i an argument": _accumulate_inside(),
    "accumulate inside, zero_grad(set_to_none=False)": _accumulate_inside(3, False),
    "freeze by requires_grad_": _freeze("requires_grad"),
    "freeze, zero_grad(set_to_none=False)": _freeze("zeros"),
    "p.grad = None between calls": _freeze("grad None"),
    "p.grad = None inside": Program(_grad_none_inside),
    "clip_grad_norm_": _clip("norm"),
    "clip_grad_norm_ inf": _clip("norm", norm_type=float("inf")),
    "clip_grad_norm_ 1": _clip("norm", norm_type=1),
    "clip_grad_value_": _clip("value"),
    "two optimizers (GAN)": Program(_two_optimizers),
    "one optimizer, two compiled functions": Program(_shared_optimizer, _call_alternately),
    "lr by hand": _hand_edits("lr"),
    "momentum by hand": _hand_edits("momentum"),
    "betas by hand": _hand_edits("betas"),
    "add_param_group between calls": _hand_edits("add_param_group"),
    "state_dict resume": _resume("self"),
    "deepcopy(opt)": Program(_deepcopy_opt, _deepcopy_call),
    "optimizer hooks": Program(_hooks),
    "SWA and EMA": Program(_swa),
    "GradScaler": Program(_scaler),
}
NONFINITE = {
    "clip_grad_norm_ error_if_nonfinite": Program(_clip("norm", error_if_nonfinite=True).build,
                                                  _clip_nonfinite),
    "clip_grad_norm_ nan": Program(_clip("norm").build, _clip_nonfinite),
}
LOUD = {"accumulate inside, i an argument", "accumulate inside, zero_grad(set_to_none=False)",
        "GradScaler", "optimizer hooks"}


@pytest.mark.parametrize("name", list(IDIOMS) + list(NONFINITE))
def test_idiom_compiled_equals_eager(name):
    p = {**IDIOMS, **NONFINITE}[name]
    p.compare(loud=name in LOUD)


@pytest.mark.slow            # the JAX sweep: the defects' JAX tests above run by default
@pytest.mark.parametrize("name", list(IDIOMS) + list(NONFINITE))
def test_idiom_on_jax_equals_eager(name):
    pytest.importorskip("jax")
    p = {**IDIOMS, **NONFINITE}[name]
    p.compare(backend="jax", loud=name in LOUD)


@pytest.mark.parametrize("name", list(IDIOMS))
def test_idiom_eager_equals_torch(name):
    IDIOMS[name].against_torch()


# -- more probes that passed: state crossing modes and libraries, rarer options ---------------

def _eager_then_compiled(name, kw, sched=None):
    """Three eager calls, then fresh model, optimizer (and scheduler) loading their state
    dicts continue compiled: the same as eager all along."""
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = getattr(lib.optim, name)(m.parameters(), **kw)
        objs = dict(m=m, opt=opt)
        if sched:
            objs["s"] = sched(lib, opt)

        def body(x, y):
            loss = _std(lib, objs["m"], objs["opt"], x, y)
            if "s" in objs:
                objs["s"].step()
            return loss
        objs["eager"] = body
        return body, objs

    def call(lib, step, objs, i, dtype):
        if i < 3:
            return objs["eager"](*_data(lib, i, dtype))
        if i == 3:
            m = _model(lib, dtype, 5)
            m.load_state_dict(objs["m"].state_dict())
            opt = getattr(lib.optim, name)(m.parameters(), **kw)
            opt.load_state_dict(copy.deepcopy(objs["opt"].state_dict()))
            objs.update(m=m, opt=opt)
            if sched:
                s = sched(lib, opt)
                s.load_state_dict(objs["s"].state_dict())
                objs["s"] = s
        return step(*_data(lib, i, dtype))
    return Program(build, call)


def _from_torch(name, kw):
    """An optimizer state saved by torch after 3 steps, loaded into the compiled run."""
    def build(lib, dtype):
        torch = pytest.importorskip("torch")
        m = _model(lib, dtype)
        opt = getattr(lib.optim, name)(m.parameters(), **kw)
        tm = _model(torch, dtype)
        topt = getattr(torch.optim, name)(tm.parameters(), **kw)
        for i in range(3):
            _std(torch, tm, topt, *_data(torch, i, dtype))

        def conv(v):
            if isinstance(v, torch.Tensor):
                return lib.tensor(v.detach().numpy().copy()) if lib is tg else v.clone()
            if isinstance(v, dict):
                return {k: conv(x) for k, x in v.items()}
            return [conv(x) for x in v] if isinstance(v, list) else v
        opt.load_state_dict(conv(topt.state_dict()))
        with lib.no_grad():
            for p, q in zip(m.parameters(), tm.parameters()):
                p.copy_(lib.tensor(q.detach().numpy().copy()))
        return (lambda x, y: _std(lib, m, opt, x, y)), dict(m=m, opt=opt)
    return Program(build)


def _named(lib, dtype):
    m = _model(lib, dtype)
    opt = lib.optim.AdamW(m.named_parameters(), lr=0.01)
    return (lambda x, y: _std(lib, m, opt, x, y)), dict(m=m, opt=opt)


def _idle_group(lib, dtype):
    """A second group that never gets gradients, and its own OneCycleLR peak."""
    m, extra = _model(lib, dtype), _model(lib, dtype, 3)
    opt = lib.optim.Adam([{"params": m.parameters()},
                          {"params": extra.parameters(), "lr": 0.1}], lr=0.01)
    sched = lib.optim.lr_scheduler.OneCycleLR(opt, [0.05, 0.2], total_steps=10)

    def step(x, y):
        loss = _std(lib, m, opt, x, y)
        sched.step()
        return loss
    return step, dict(m=m, extra=extra, opt=opt, sched=sched)


def _total_norm(lib, dtype):
    m = _model(lib, dtype)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = _fb(lib, m, x, y)
        n = lib.nn.utils.get_total_norm([p.grad for p in m.parameters()], norm_type=3.0)
        lib.nn.utils.clip_grads_with_norm_(m.parameters(), 0.2, n)
        opt.step()
        return loss, n
    return step, dict(m=m, opt=opt)


def _plateau_outside(**kw):
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
        return (lambda x, y: _std(lib, m, opt, x, y)), dict(m=m, opt=opt, sched=sched)

    def call(lib, step, objs, i, dtype):
        loss = step(*_data(lib, i, dtype))
        objs["sched"].step(loss.item() * (1 if i % 3 else 2))
        return loss
    return Program(build, call, n=10)


def _resumed_schedules(lib, dtype):
    """Schedulers constructed with last_epoch=3 (resuming, `initial_lr` set by hand)."""
    m = _model(lib, dtype)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    for g in opt.param_groups:
        g["initial_lr"] = 0.2
    s1 = lib.optim.lr_scheduler.CosineAnnealingLR(opt, 10, last_epoch=3)
    s2 = lib.optim.lr_scheduler.MultiStepLR(opt, [5, 7], last_epoch=3)

    def step(x, y):
        loss = _std(lib, m, opt, x, y)
        s1.step()
        s2.step()
        return loss
    return step, dict(m=m, opt=opt, s1=s1, s2=s2)


def _cyclic_scale_fn(lib, dtype):
    m = _model(lib, dtype)
    opt = lib.optim.RMSprop(m.parameters(), lr=0.01, momentum=0.9)
    sched = lib.optim.lr_scheduler.CyclicLR(
        opt, 0.001, 0.01, step_size_up=2, scale_fn=lambda x: 0.5 ** x, scale_mode="iterations",
        base_momentum=0.7, max_momentum=0.9)

    def step(x, y):
        loss = _std(lib, m, opt, x, y)
        sched.step()
        return loss
    return step, dict(m=m, opt=opt, sched=sched)


def _module_zero_grad(lib, dtype):
    m = _model(lib, dtype)
    opt = lib.optim.NAdam(m.parameters(), lr=0.01)

    def step(x, y):
        m.zero_grad(set_to_none=False)
        loss = _fb(lib, m, x, y)
        opt.step()
        return loss
    return step, dict(m=m, opt=opt)


def _swa_batchnorm(lib, dtype):
    m = lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.BatchNorm1d(6), lib.nn.Tanh(),
                          lib.nn.Linear(6, 3)).to(getattr(lib, dtype))
    rs = np.random.RandomState(0)
    with lib.no_grad():
        for p in m.parameters():
            p.copy_(lib.tensor(rs.randn(*p.shape) * 0.5))
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    swa = lib.optim.swa_utils.AveragedModel(m, use_buffers=True)

    def step(x, y):
        loss = _std(lib, m, opt, x, y)
        swa.update_parameters(m)
        return loss, swa(x)
    return step, dict(m=m, opt=opt, swa=swa)


MORE = {
    "eager, then resumed compiled: Adam amsgrad + StepLR": _eager_then_compiled(
        "Adam", dict(lr=0.01, amsgrad=True), lambda lib, o: lib.optim.lr_scheduler.StepLR(o, 2)),
    "eager, then resumed compiled: NAdam": _eager_then_compiled("NAdam", dict(lr=0.01)),
    "eager, then resumed compiled: ASGD": _eager_then_compiled("ASGD", dict(lr=0.05, t0=1)),
    "eager, then resumed compiled: RMSprop centered": _eager_then_compiled(
        "RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
    "eager, then resumed compiled: SGD + OneCycleLR": _eager_then_compiled(
        "SGD", dict(lr=0.1, momentum=0.9),
        lambda lib, o: lib.optim.lr_scheduler.OneCycleLR(o, 0.5, total_steps=10)),
    "torch's state: Adam": _from_torch("Adam", dict(lr=0.01)),
    "torch's state: NAdam": _from_torch("NAdam", dict(lr=0.01)),
    "torch's state: ASGD": _from_torch("ASGD", dict(lr=0.05, t0=1)),
    "torch's state: Adadelta": _from_torch("Adadelta", dict()),
    "step(closure): SGD": _closure_step("SGD", lr=0.1, momentum=0.9),
    "step(closure): Rprop": _closure_step("Rprop", lr=0.01),
    "named parameters": Program(_named),
    "a group without gradients, OneCycleLR per group": Program(_idle_group),
    "get_total_norm and clip_grads_with_norm_": Program(_total_norm),
    "ReduceLROnPlateau max, cooldown, min_lr": _plateau_outside(
        mode="max", factor=0.3, patience=1, cooldown=1, min_lr=0.01),
    "ReduceLROnPlateau abs threshold, eps": _plateau_outside(
        threshold_mode="abs", threshold=0.1, patience=0, eps=1e-3),
    "schedulers resumed by last_epoch": Program(_resumed_schedules),
    "CyclicLR scale_fn, RMSprop momentum": Program(_cyclic_scale_fn),
    "model.zero_grad(set_to_none=False)": Program(_module_zero_grad),
    "AveragedModel use_buffers with BatchNorm": Program(_swa_batchnorm),
}
# (a Python float in the state, compared exactly, takes JAX's last-bit rounding of the loss)
NOT_ON_JAX = {"ReduceLROnPlateau max, cooldown, min_lr"}


@pytest.mark.parametrize("name", list(MORE))
def test_more_compiled_equals_eager(name):
    MORE[name].compare()


@pytest.mark.slow            # the JAX sweep: the defects' JAX tests above run by default
@pytest.mark.parametrize("name", [n for n in MORE if n not in NOT_ON_JAX])
def test_more_on_jax_equals_eager(name):
    pytest.importorskip("jax")
    MORE[name].compare(backend="jax")


@pytest.mark.parametrize("name", list(MORE))
def test_more_eager_equals_torch(name):
    MORE[name].against_torch()
