"""First-law review of every optimizer (harness: tests/_optim_review.py): each optimizer's
standard step run eagerly and compiled (numpy and JAX backends) and eager against PyTorch,
tensor hyper-parameters, LBFGS closures, the implementation flags (`fused`, `foreach`,
`capturable`, `differentiable`) and tensor-valued options.

The tests of defects this review found (each fails without its fix) come first in each
section; the parametrised programs are probes that passed, kept as regression guards (their
JAX sweeps are marked slow: `-m slow`)."""
import numpy as np
import pytest

import tracegrad as tg
from _optim_review import Program, _closure_step, _data, _fb, _model, _opt, _std, _train

nn, F = tg.nn, tg.nn.functional


OPTIMIZERS = {
    "RMSprop": _opt("RMSprop", lr=0.01),
    "RMSprop centered momentum": _opt("RMSprop", lr=0.01, centered=True, momentum=0.9),
    "RMSprop centered wd maximize": _opt("RMSprop", lr=0.01, centered=True,
                                         weight_decay=0.1, maximize=True),
    "Adagrad lr_decay init_acc": _opt("Adagrad", lr=0.1, lr_decay=0.01,
                                      initial_accumulator_value=0.1),
    "Adagrad wd maximize": _opt("Adagrad", lr=0.1, weight_decay=0.1, maximize=True),
    "Adadelta": _opt("Adadelta", lr=0.5, weight_decay=0.01),
    "Adamax": _opt("Adamax", lr=0.01, weight_decay=0.1),
    "NAdam decoupled": _opt("NAdam", lr=0.01, weight_decay=0.1,
                            decoupled_weight_decay=True, momentum_decay=0.01),
    "RAdam decoupled": _opt("RAdam", lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
    "ASGD": _opt("ASGD", lr=0.05, t0=2, lambd=0.01, weight_decay=0.1),
    "Rprop maximize": _opt("Rprop", lr=0.01, maximize=True),
    "SGD nesterov": _opt("SGD", lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "SGD dampening maximize": _opt("SGD", lr=0.1, momentum=0.9, dampening=0.5,
                                   maximize=True),
    "Adam amsgrad maximize wd": _opt("Adam", lr=0.01, amsgrad=True, maximize=True,
                                     weight_decay=0.1),
    "AdamW amsgrad": _opt("AdamW", lr=0.01, amsgrad=True),
    "SGD foreach": _opt("SGD", lr=0.1, momentum=0.9, foreach=True),
    "Adam foreach=False": _opt("Adam", lr=0.01, foreach=False),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_compiled_equals_eager(name):
    Program.compare(_train(OPTIMIZERS[name]))


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_compiled_float32_equals_eager(name):
    Program.compare(_train(OPTIMIZERS[name]), dtype="float32")


@pytest.mark.slow            # the JAX sweep: the defects' JAX tests above run by default
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_on_jax_equals_eager(name):
    pytest.importorskip("jax")
    Program.compare(_train(OPTIMIZERS[name]), backend="jax")


@pytest.mark.parametrize("dtype", ["float64", pytest.param("float32", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_eager_equals_torch(name, dtype):
    _train(OPTIMIZERS[name]).against_torch(dtype)


# -- defect found: a tensor hyper-parameter (Note [Tensor hyper-parameters] in _effects.py) --

def _tensor_hypers(name, betas=False):
    """A learning rate (and betas) given as float32 tensors to a float64 model, the rate
    changed in place and then replaced between calls."""
    def build(lib, dtype):
        m = _model(lib, dtype)
        kw = dict(lr=lib.tensor(0.01))
        if betas:
            kw["betas"] = (lib.tensor(0.9), lib.tensor(0.99))
        opt = getattr(lib.optim, name)(m.parameters(), **kw)

        def step(x, y):
            opt.zero_grad()
            loss = _fb(lib, m, x, y)
            opt.step()
            return loss
        return step, dict(m=m, opt=opt)

    def call(lib, step, objs, i, dtype):
        if i == 2:
            objs["opt"].param_groups[0]["lr"].fill_(0.03)
        if i == 4:
            objs["opt"].param_groups[0]["lr"] = lib.tensor(0.02)
        return step(*_data(lib, i, dtype))
    return Program(build, call)


TENSOR_HYPERS = {"AdamW lr": _tensor_hypers("AdamW"),
                 "AdamW lr betas": _tensor_hypers("AdamW", True),
                 "Adam lr betas": _tensor_hypers("Adam", True),
                 "NAdam lr": _tensor_hypers("NAdam"), "RMSprop lr": _tensor_hypers("RMSprop"),
                 "SGD lr": _tensor_hypers("SGD"), "Adamax lr": _tensor_hypers("Adamax")}


@pytest.mark.parametrize("name", list(TENSOR_HYPERS))
def test_a_tensor_learning_rate_or_beta_gives_eagers_update(name):
    # AdamW's `1 - lr * weight_decay` was a float32 product eagerly and a float64 one
    # compiled (the weight decay a float64 runtime value); Adam's `beta1 ** step` likewise
    TENSOR_HYPERS[name].compare()


def _tensor_lr_scheduled(first):
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = lib.optim.Adam(m.parameters(), lr=lib.tensor(0.01))
        sched = lib.optim.lr_scheduler.ExponentialLR(opt, 0.5)

        def step(x, y):
            opt.zero_grad()
            loss = _fb(lib, m, x, y)
            if first:
                sched.step()
            opt.step()
            if not first:
                sched.step()
            return loss
        return step, dict(m=m, opt=opt, sched=sched)
    return Program(build)


@pytest.mark.parametrize("first", [True, False], ids=["scheduler first", "optimizer first"])
def test_a_scheduler_over_a_tensor_learning_rate_inside_the_step_runs_eagerly(first):
    # the scheduler's replayed step computed the new rate with tensors: a cached call
    # stepped with the previous rate and left group["lr"] at the trace's tensor (silent)
    _tensor_lr_scheduled(first).compare(loud="must")


TENSOR_LR_SCHEDULES = {
    "ExponentialLR": lambda lib, o: lib.optim.lr_scheduler.ExponentialLR(o, 0.5),
    "CyclicLR": lambda lib, o: lib.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, step_size_up=2),
    "ReduceLROnPlateau": lambda lib, o: lib.optim.lr_scheduler.ReduceLROnPlateau(o,
                                                                                 patience=0),
    "SequentialLR": lambda lib, o: lib.optim.lr_scheduler.SequentialLR(
        o, [lib.optim.lr_scheduler.ConstantLR(o, 0.5, 2),
            lib.optim.lr_scheduler.ExponentialLR(o, 0.9)], [2]),
    "OneCycleLR": lambda lib, o: lib.optim.lr_scheduler.OneCycleLR(o, 0.5, total_steps=10),
}


def _tensor_lr_outside(sched):
    def build(lib, dtype):
        m = _model(lib, dtype)
        lr = lib.tensor(0.1)
        opt = lib.optim.SGD(m.parameters(), lr=lr, momentum=0.9)
        return (lambda x, y: _std(lib, m, opt, x, y)), dict(m=m, opt=opt, s=sched(lib, opt),
                                                            lr=lr)

    def call(lib, step, objs, i, dtype):
        loss = step(*_data(lib, i, dtype))
        s = objs["s"]
        s.step(loss.item()) if hasattr(s, "patience") else s.step()
        g = objs["opt"].param_groups[0]
        # PyTorch fills the group's tensor in place and keeps copies as the last rates
        return loss, g["lr"] is objs["lr"], s.get_last_lr()[0] is g["lr"]
    return Program(build, call)


@pytest.mark.parametrize("name", list(TENSOR_LR_SCHEDULES))
def test_a_scheduler_fills_a_tensor_learning_rate_in_place(name):
    # schedulers rebound group["lr"] to a new tensor each step: the caller's tensor went
    # stale (PyTorch fills it), and a compiled step re-traced on every call
    p = _tensor_lr_outside(TENSOR_LR_SCHEDULES[name])
    p.against_torch()
    stats = p.compare()
    assert stats.traces <= 2 and stats.eager_calls == 0, str(stats)


@pytest.mark.parametrize("name", ["AdamW lr betas", "SGD lr"])
def test_a_tensor_learning_rate_on_jax_gives_eagers_update(name):
    pytest.importorskip("jax")
    TENSOR_HYPERS[name].compare(backend="jax")

# -- defect found: an LBFGS closure compiled, stepped outside (Note [Optimizer state unread]
# in compiler/state_unread.py) --

def _lbfgs_outside(line_search=None, read_state=False):
    """`opt.step(lambda: closure(x, y))` with the closure (zero_grad, forward, backward)
    compiled; `read_state`: the closure reads the optimizer's iteration count itself."""
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = lib.optim.LBFGS(m.parameters(), lr=0.5, max_iter=3, history_size=3,
                              line_search_fn=line_search)
        w = m[0].weight

        def closure(x, y):
            opt.zero_grad()
            scale = 1.0
            if read_state and opt.state[w].get("n_iter", 0) > 4:
                scale = 0.5
            return _fb(lib, m, x, y, scale)
        return closure, dict(m=m, opt=opt)

    def call(lib, closure, objs, i, dtype):
        x, y = _data(lib, i, dtype)
        return objs["opt"].step(lambda: closure(x, y))
    return Program(build, call)


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_a_compiled_lbfgs_closure_stays_compiled(line_search):
    # every step rewrote the numbers in LBFGS's state (func_evals, t, prev_loss, ...), which
    # the closure's zero_grad() reaches but never reads: a re-trace per step, then eager
    p = _lbfgs_outside(line_search)
    stats = p.compare()
    assert stats.eager_calls == 0 and stats.traces <= 4, str(stats)
    p.against_torch()


def test_a_compiled_lbfgs_closure_reading_the_state_stays_guarded():
    stats = _lbfgs_outside(read_state=True).compare()
    assert any("n_iter" in str(r) for r in stats.retraces), str(stats)


def test_a_compiled_lbfgs_closure_on_jax():
    pytest.importorskip("jax")
    finals = []
    for backend in (None, "jax"):
        p = _lbfgs_outside()
        tg.manual_seed(0)
        step, objs = p.build(tg, "float64")
        f = tg.compile(step, backend=backend) if backend else step
        losses = [float(p.call(tg, f, objs, i, "float64")) for i in range(p.n)]
        finals.append((losses, [q.detach().numpy() for q in objs["m"].parameters()]))
    np.testing.assert_allclose(finals[1][0], finals[0][0], rtol=1e-9)
    for a, b in zip(finals[1][1], finals[0][1]):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    assert f.stats.eager_calls == 0, str(f.stats)


def test_an_lbfgs_step_inside_the_compiled_function_runs_eagerly_with_a_warning():
    program = _closure_step("LBFGS", lr=0.5, max_iter=3, line_search_fn="strong_wolfe")
    program.compare(loud="must")
    program.against_torch()

# -- defect found: the implementation flags PyTorch users pass (`check_flags`,
# `check_step_flags`, `grad_mode_of_step` in optim/optimizer.py) --

FLAG_OPTIMIZERS = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
                   "RAdam", "ASGD", "Rprop"]
FLAGS = [dict(fused=True), dict(fused=True, foreach=True), dict(fused=True, differentiable=True),
         dict(fused=True, capturable=True), dict(foreach=True), dict(foreach=False),
         dict(capturable=True), dict(capturable=True, foreach=True), dict(differentiable=True),
         dict(differentiable=True, foreach=True)]


def _flag_outcome(lib, name, kw):
    """What one step of a fresh optimizer with `kw` does: the builtin type of the error and
    its message (tracegrad's in-place error names the op first), or the update."""
    p = lib.tensor(np.ones(3), requires_grad=True)
    try:
        opt = getattr(lib.optim, name)([p], lr=0.1, **kw)
        p.grad = lib.tensor(np.linspace(-1, 1, 3))
        opt.step()
    except Exception as e:                       # noqa: BLE001 -- compared with torch's
        base = next(c for c in type(e).__mro__ if c.__module__ == "builtins")
        msg = str(e).split("\n")[0]
        msg = msg.split(": ", 1)[1] if type(e).__name__ == "InplaceError" else msg
        return base.__name__, msg[:70], sorted(opt.state[p]) if "opt" in locals() else None
    return "ok", p.detach().numpy().round(6).tolist(), sorted(opt.state[p])


@pytest.mark.parametrize("name", FLAG_OPTIMIZERS)
def test_implementation_flags_are_accepted_or_refused_as_pytorch_does_on_cpu(name):
    # fused=True (SGD, Adam, AdamW, Adagrad run fused kernels on CPU) was refused with
    # NotImplementedError; capturable=True was refused at construction, where PyTorch's
    # CPU step asserts; differentiable=True was refused, where PyTorch records the step
    torch = pytest.importorskip("torch")
    import inspect
    accepted = inspect.signature(getattr(torch.optim, name)).parameters
    for kw in FLAGS:
        if all(k in accepted for k in kw):
            assert _flag_outcome(tg, name, kw) == _flag_outcome(torch, name, kw), kw


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad"])
def test_a_fused_optimizer_trains_as_the_unfused_one(name):
    kw = dict(lr=0.01, weight_decay=0.01)
    p = _train(_opt(name, fused=True, **kw))
    p.compare()
    p.against_torch("float32")


def _differentiable_sgd(lib, dtype):
    """Meta-learning: the weights are a non-leaf function of `w`; the SGD step is
    differentiated through (`differentiable=True`), the loss after it differentiated
    with respect to `w`."""
    w = lib.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    p = w * 1.0
    p.retain_grad()
    opt = lib.optim.SGD([p], lr=0.1, momentum=0.9, differentiable=True)

    def step(x):
        opt.zero_grad()
        ((p * x) ** 2).sum().backward(create_graph=True)
        opt.step()
        after = (p ** 3).sum()
        return after, lib.autograd.grad(after, w, retain_graph=True)[0]
    return step, dict(opt=opt)


def _times(lib, step, objs, i, dtype):
    return step(lib.tensor(np.array([1.0, 2.0, 0.5]) * (i + 1)))


def test_a_differentiable_sgd_step_is_differentiated_as_in_pytorch():
    p = Program(_differentiable_sgd, _times, n=3)
    p.against_torch()
    p.compare(loud=True)


def test_a_differentiable_step_of_another_optimizer_is_refused_not_differentiated_otherwise():
    w = tg.tensor([0.5, -1.0], requires_grad=True)
    p = w * 1.0
    p.retain_grad()
    opt = tg.optim.Adam([p], lr=0.1, differentiable=True)
    (p ** 2).sum().backward(create_graph=True)
    with pytest.raises(NotImplementedError, match="Adam does not differentiate"):
        opt.step()

def _tensor_option_outcome(lib, name, kw):
    p = lib.ones(2, requires_grad=True)
    kw = {k: (tuple(lib.tensor(x) if isinstance(x, list) else x for x in v)
              if isinstance(v, tuple) else lib.tensor(v) if isinstance(v, list) else v)
          for k, v in kw.items()}
    try:
        opt = getattr(lib.optim, name)([p], **kw)
        p.grad = lib.ones(2)
        opt.step()
    except Exception as e:                       # noqa: BLE001 -- compared with torch's
        base = next(c for c in type(e).__mro__ if c.__module__ == "builtins")
        return base.__name__, str(e)
    return "ok", p.detach().numpy().tolist()


@pytest.mark.parametrize("name", ["Adam", "AdamW", "SGD", "RMSprop", "NAdam", "Rprop"])
@pytest.mark.parametrize("kw", [dict(betas=(0, 0.99)), dict(betas=(0.9, [0.99])),
                                dict(lr=[0.1, 0.2]), dict(lr=[0.1]), dict(lr=[0.1], foreach=True),
                                dict(betas=([0.9], [0.99]), foreach=True)], ids=str)
def test_tensor_options_are_checked_as_in_pytorch(name, kw):
    # a 2-element tensor lr failed on bool(); int or mixed betas, tensor options with
    # foreach=True were accepted where PyTorch refuses them (lists here: 1-d tensors)
    torch = pytest.importorskip("torch")
    if "betas" in kw and name in ("SGD", "RMSprop", "Rprop"):
        pytest.skip("no betas")
    if name == "NAdam" and ("betas" in kw or "foreach" in kw):
        pytest.skip("PyTorch's NAdam fails inside on 1-d tensor betas, rounds otherwise "
                    "with foreach")
    assert _tensor_option_outcome(tg, name, kw) == _tensor_option_outcome(torch, name, kw)
