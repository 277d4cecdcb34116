"""Whole training steps written as PyTorch users write them, run N calls eagerly and
compiled (`tg.compile`) from the same initial state; everything must match bit for bit:
returned values, every parameter and `.grad` (None vs zeros), `optimizer.state_dict()`,
the scheduler's `state_dict()` and `get_last_lr()`, the RNG state, the warnings each call
issues (category, message, location) and the errors it raises (type, message), and the
next call after an error. A compiled call may instead run eagerly with a warning (loud,
still eager's result); the tests say where that is the expected outcome.

The first tests are defects this review found (each fails without its fix); the
parametrised `PROGRAMS` are the probes that passed, kept as regression guards, and a few
run against PyTorch itself."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from _differential import compare as _compare

nn, F = tg.nn, tg.nn.functional
S = tg.optim.lr_scheduler
D = tg.float64


def _mlp():
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)).to(D)


def _data(i, n=5):
    g = np.random.RandomState(i)
    return tg.tensor(g.randn(n, 4)), tg.tensor(g.randint(0, 3, n))


def _plain(step, objs, i):
    return step(*_data(i))


def _standard(body, opt=lambda ps: tg.optim.SGD(ps, lr=0.1), sched=None):
    """make(comp) for `body(m, opt, sched, *args)` over a fresh model and optimizer."""
    def make(comp):
        m = _mlp()
        o = opt(m.parameters())
        s = sched(o) if sched else None
        objs = dict(m=m, opt=o)
        if s is not None:
            objs["sched"] = s
        return comp(lambda *a: body(m, o, s, *a)), objs
    return make


def _forward_backward(m, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    return loss


# --- defects found: a hyper-parameter written during the call before the step reads it ---
# (Note [Hyper-parameters written in a call] in compiler/hyper_order.py)

def _sched_first(m, opt, sched, x, y):
    loss = _forward_backward(m, opt, x, y)
    sched.step()                     # before opt.step(): PyTorch warns, and trains so
    opt.step()
    return loss


@pytest.mark.parametrize("opt,sched", [
    (lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9), lambda o: S.StepLR(o, 1, 0.5)),
    (lambda ps: tg.optim.Adam(ps, lr=0.01), lambda o: S.LambdaLR(o, lambda e: 1 / (e + 1))),
])
def test_a_scheduler_stepped_before_the_optimizer_gives_eagers_update(opt, sched):
    # cached calls read the learning rate before the scheduler's replayed step changed it
    _compare(_standard(_sched_first, opt, sched), _plain, 5, loud="must")


def _two_steps(m, opt, sched, x, y):
    first = _forward_backward(m, opt, x, y)
    opt.step()
    sched.step()
    second = _forward_backward(m, opt, x, y)
    opt.step()
    sched.step()
    return first, second


def _two_steps_assigned(m, opt, sched, x, y):
    first = _forward_backward(m, opt, x, y)
    opt.step()
    for g in opt.param_groups:
        g["lr"] = 0.01
    second = _forward_backward(m, opt, x, y)
    opt.step()
    for g in opt.param_groups:
        g["lr"] = 0.1
    return first, second


@pytest.mark.parametrize("body", [_two_steps, _two_steps_assigned])
def test_two_optimizer_steps_with_a_new_learning_rate_between_them(body):
    # the second step read the first step's learning rate, in the tracing call too
    _compare(_standard(body, sched=lambda o: S.ExponentialLR(o, 0.5)), _plain, 4,
             loud="must")


# --- defect found: warnings of a step were issued by the tracing call only ---
# (Note [Warnings replayed] in compiler/warning_replay.py)

def _mse_broadcast(m, opt, sched, x, y):
    opt.zero_grad()
    loss = F.mse_loss(m(x)[:, :1], y.double())     # (5, 1) against (5,): PyTorch warns
    loss.backward()
    opt.step()
    return loss


def _softmax_no_dim(m, opt, sched, x, y):
    opt.zero_grad()
    loss = -F.softmax(m(x))[:, 0].log().mean()
    loss.backward()
    opt.step()
    return loss


def _deprecated_clip(m, opt, sched, x, y):
    loss = _forward_backward(m, opt, x, y)
    nn.utils.clip_grad_norm(m.parameters(), 0.5)
    opt.step()
    return loss


def _user_warning(m, opt, sched, x, y):
    loss = _forward_backward(m, opt, x, y)
    if x.shape[0] < 8:
        warnings.warn("small batch", RuntimeWarning)
    opt.step()
    return loss


@pytest.mark.parametrize("body", [_mse_broadcast, _softmax_no_dim, _deprecated_clip,
                                  _user_warning])
def test_every_cached_call_issues_the_steps_warnings(body):
    stats = _compare(_standard(body), _plain, 4)
    assert stats.cache_hits >= 2


@pytest.mark.parametrize("action", ["default", "once", "ignore", "always"])
def test_replayed_warnings_follow_the_warning_filters(action):
    def run(compiled):
        make = _standard(_user_warning)
        step, objs = make(tg.compile if compiled else (lambda f: f))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter(action)
            for i in range(4):
                step(*_data(i))
        return [(x.category, str(x.message), x.filename, x.lineno) for x in w]
    assert run(True) == run(False)


# --- probes that passed: regression guards ---

def _accumulate_tensor_counter(comp):
    m = _mlp()
    opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    count = tg.zeros((), dtype=tg.int64)

    def step(x, y):
        loss = F.cross_entropy(m(x), y) / 2
        loss.backward()
        count.add_(1)
        if count % 2 == 0:
            opt.step()
            opt.zero_grad()
        return loss.detach()
    return comp(step), dict(m=m, opt=opt, count=count)


def _change_groups(step, objs, i):
    g = objs["opt"].param_groups[0]
    changes = {1: {"momentum": 0.9}, 2: {"nesterov": True, "lr": 0.05},
               3: {"weight_decay": 0.01, "dampening": 0.0}, 4: {"maximize": True}}
    g.update(changes.get(i, {}))
    return step(*_data(i))


def _change_adam_groups(step, objs, i):
    g = objs["opt"].param_groups[0]
    changes = {1: {"betas": (0.8, 0.99)}, 2: {"amsgrad": True}, 3: {"weight_decay": 0.1},
               4: {"maximize": True}}
    g.update(changes.get(i, {}))
    return step(*_data(i))


def _std_step(m, opt, sched, x, y):
    loss = _forward_backward(m, opt, x, y)
    opt.step()
    if sched is not None:
        sched.step()
    return loss


def _no_zero_grad(m, opt, sched, x, y):
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    return loss


def _between(step, objs, i):
    """.grad, optimizer state and flags changed eagerly between compiled calls."""
    m, opt = objs["m"], objs["opt"]
    if i == 1:
        m[0].weight.grad = None
    elif i == 2:
        m[2].bias.grad.zero_()
    elif i == 3:
        m[0].requires_grad_(False)
    elif i == 4:
        m[0].requires_grad_(True)
        opt.state.clear()
    elif i == 5:
        m[2].weight.grad = tg.ones_like(m[2].weight)
    return step(*_data(i))


def _load_states(step, objs, i):
    import copy
    if i == 1:
        objs["saved"] = (copy.deepcopy(objs["opt"].state_dict()),
                         {k: v.clone() for k, v in objs["m"].state_dict().items()})
    if i == 3:
        objs["opt"].load_state_dict(objs["saved"][0])
        objs["m"].load_state_dict(objs["saved"][1])
    out = step(*_data(i))
    return out


def _with_saved(make):
    def wrapped(comp):
        step, objs = make(comp)
        objs["saved"] = None
        return step, objs
    return wrapped


def _mid_step_error(m, opt, sched, x, y, w):
    loss = _forward_backward(m, opt, x, y)
    opt.step()
    return loss, m(x).detach() @ w                # a shape error after the update


def _bad_shape(step, objs, i):
    w = tg.ones(3 if i != 2 else 4, 2, dtype=D)
    return step(*_data(i), w)


def _nan_clip(m, opt, sched, x, y):
    loss = _forward_backward(m, opt, x, y)
    n = nn.utils.clip_grad_norm_(m.parameters(), 1.0, error_if_nonfinite=True)
    opt.step()
    return loss, n


def _nan_input(step, objs, i):
    x, y = _data(i)
    if i == 2:
        x[0, 0] = float("nan")
    return step(x, y)


def _bad_target(step, objs, i):
    x, y = _data(i)
    if i == 2:
        y = tg.tensor([0, 1, 7, 2, 0])
    return step(x, y)


def _skip_non_finite(m, opt, sched, x, y):
    loss = _forward_backward(m, opt, x, y)
    if tg.isfinite(loss):
        opt.step()
    return loss.detach()


def _ema(comp):
    m, ema = _mlp(), _mlp()
    ema.load_state_dict(m.state_dict())
    ema.requires_grad_(False)
    opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        loss = _forward_backward(m, opt, x, y)
        opt.step()
        with tg.no_grad():
            for e, p in zip(ema.parameters(), m.parameters()):
                e.mul_(0.9).add_(p, alpha=0.1)
        return loss
    return comp(step), dict(m=m, opt=opt, ema=ema)


def _dropout_bn(comp):
    m = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Dropout(0.3),
                      nn.Linear(6, 3)).to(D)
    opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    return comp(lambda x, y: _std_step(m, opt, None, x, y)), dict(m=m, opt=opt)


def _toggle_mode(step, objs, i):
    if i == 2:
        objs["m"].eval()
    if i == 4:
        objs["m"].train()
    return step(*_data(i))


def _retain_twice(m, opt, sched, x, y):
    opt.zero_grad()
    out = m(x)
    a, b = F.cross_entropy(out, y), out.pow(2).mean()
    a.backward(retain_graph=True)
    b.backward()
    opt.step()
    return a, b


def _last_layer_only(m, opt, sched, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(m(x), y, label_smoothing=0.1)
    loss.backward(inputs=list(m[2].parameters()))
    opt.step()
    return loss


def _grads_returned(m, opt, sched, x, y):
    loss = F.cross_entropy(m(x), y, reduction="sum")
    loss.backward()
    g = m[0].weight.grad
    opt.step()
    opt.zero_grad(set_to_none=False)
    return loss, g


def _group_schedules(comp):
    m = _mlp()
    w = [p for n, p in m.named_parameters() if n.endswith("weight")]
    b = [p for n, p in m.named_parameters() if n.endswith("bias")]
    opt = tg.optim.AdamW([{"params": w, "weight_decay": 0.1},
                          {"params": b, "weight_decay": 0.0, "lr": 0.02}], lr=0.01)
    sched = S.LambdaLR(opt, [lambda e: 0.9 ** e, lambda e: 1.0 / (e + 1)])
    return comp(lambda x, y: _std_step(m, opt, sched, x, y)), dict(m=m, opt=opt, s=sched)


def _sgd(**kw):
    return lambda ps: tg.optim.SGD(ps, lr=0.1, **kw)


_SCHEDULERS = {
    "StepLR": lambda o: S.StepLR(o, 2, 0.5),
    "MultiStepLR": lambda o: S.MultiStepLR(o, [1, 3], 0.3),
    "OneCycleLR": lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=20),
    "CosineAnnealingWarmRestarts": lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2),
    "SequentialLR": lambda o: S.SequentialLR(o, [S.LinearLR(o, 0.1, total_iters=2),
                                                 S.ExponentialLR(o, 0.9)], milestones=[2]),
    "ChainedScheduler": lambda o: S.ChainedScheduler([S.ExponentialLR(o, 0.9),
                                                      S.StepLR(o, 2, 0.5)]),
    "CyclicLR": lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=2),
}

PROGRAMS = {
    "accumulate with a tensor counter": (_accumulate_tensor_counter, _plain, 6),
    "SGD options changed between calls": (_standard(_std_step), _change_groups, 6),
    "Adam options changed between calls": (
        _standard(_std_step, lambda ps: tg.optim.Adam(ps, lr=0.01)), _change_adam_groups, 6),
    "grads, flags and state changed between calls": (
        _standard(_no_zero_grad, _sgd(momentum=0.9)), _between, 7),
    "optimizer and model load_state_dict mid-run": (
        _with_saved(_standard(_std_step, lambda ps: tg.optim.Adam(ps, lr=0.01))),
        _load_states, 5),
    "a shape error after the update": (_standard(_mid_step_error, _sgd(momentum=0.9)),
                                       _bad_shape, 4),
    "clip_grad_norm_ error_if_nonfinite": (_standard(_nan_clip, _sgd(momentum=0.9)),
                                           _nan_input, 4),
    "a target out of range": (_standard(_std_step, _sgd(momentum=0.9)), _bad_target, 4),
    "skip the step on a non-finite loss": (
        _standard(_skip_non_finite, lambda ps: tg.optim.Adam(ps, lr=0.01)), _nan_input, 4),
    "EMA of the weights": (_ema, _plain, 4),
    "dropout and batchnorm, train/eval between calls": (_dropout_bn, _toggle_mode, 6),
    "two backward() with retain_graph": (_standard(_retain_twice), _plain, 4),
    "backward(inputs=...)": (_standard(_last_layer_only), _plain, 4),
    "the .grad returned, zero_grad(set_to_none=False) after": (
        _standard(_grads_returned, _sgd(momentum=0.9, nesterov=True)), _plain, 4),
    "no-decay groups with per-group LambdaLR": (_group_schedules, _plain, 5),
}
PROGRAMS.update({
    f"{name} stepped inside": (
        _standard(_std_step, _sgd(momentum=0.9), mk), _plain, 5)
    for name, mk in _SCHEDULERS.items()})


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_compiled_equals_eager(name):
    make, calls, n = PROGRAMS[name]
    _compare(make, calls, n)


@pytest.mark.parametrize("name", ["SGD options changed between calls",
                                  "a shape error after the update"])
def test_program_on_jax_matches_eager(name):
    pytest.importorskip("jax")
    make, calls, n = PROGRAMS[name]
    finals = []
    for compile_to in (None, "jax"):
        tg.manual_seed(0)
        step, objs = make((lambda f: tg.compile(f, backend=compile_to)) if compile_to
                          else (lambda f: f))
        outcomes = []
        for i in range(n):
            try:
                calls(step, objs, i)
                outcomes.append("ok")
            except Exception as e:
                outcomes.append((type(e).__name__, str(e).split("\n")[0]))
        finals.append((outcomes, [p.detach().numpy().copy() for p in objs["m"].parameters()]))
    (eo, ep), (co, cp) = finals
    assert co == eo
    for a, b in zip(cp, ep):                 # XLA rounds otherwise: close, not bitwise
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


# --- against PyTorch itself ---

def _torch_program(lib, compile_step, opt_name, sched_first=False):
    """A training loop written once for both libraries; its losses and final parameters."""
    rs = np.random.RandomState(0)
    w1, b1 = rs.randn(6, 4) * 0.5, rs.randn(6) * 0.1
    w2, b2 = rs.randn(3, 6) * 0.5, rs.randn(3) * 0.1
    m = lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.Tanh(), lib.nn.Linear(6, 3)).double()
    with lib.no_grad():
        for p, v in zip(m.parameters(), (w1, b1, w2, b2)):
            p.copy_(lib.tensor(v))
    if opt_name == "SGD":
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    else:
        opt = lib.optim.AdamW(m.parameters(), lr=0.01, amsgrad=True)
    sched = lib.optim.lr_scheduler.StepLR(opt, 2, 0.5)

    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y, label_smoothing=0.05)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        if sched_first:
            sched.step()
        opt.step()
        if not sched_first:
            sched.step()
        return loss.detach()
    step = compile_step(step)
    losses = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(6):
            g = np.random.RandomState(i)
            x, y = lib.tensor(g.randn(5, 4)), lib.tensor(g.randint(0, 3, 5))
            losses.append(float(step(x, y)))
    return losses, [p.detach().numpy().copy() for p in m.parameters()]


@pytest.mark.parametrize("opt_name", ["SGD", "AdamW"])
@pytest.mark.parametrize("sched_first", [False, True])
def test_a_compiled_training_loop_matches_pytorch(opt_name, sched_first):
    torch = pytest.importorskip("torch")
    ref_losses, ref_params = _torch_program(torch, lambda f: f, opt_name, sched_first)
    losses, params = _torch_program(tg, tg.compile, opt_name, sched_first)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-12, atol=1e-14)
    for p, q in zip(params, ref_params):
        np.testing.assert_allclose(p, q, rtol=1e-11, atol=1e-13)


def test_a_schedulers_warnings_name_the_line_that_stepped_it():
    # the step is wrapped (`_effects.replayed`): the warning named the wrapper's line, and a
    # different one in a trace (so a compiled call's warning differed from eager's)
    opt = tg.optim.SGD([tg.zeros(2, requires_grad=True)], lr=0.1)
    sched = S.StepLR(opt, 1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sched.step()
        sched.step(3)
    assert [x.filename for x in w] == [__file__] * 2


class _Scaled(tg.autograd.Function):
    """Saves a tensor it computed: compiling its backward runs forward again, which the
    compiler says once per class (a guard: replayed warnings exclude the compiler's and
    the tracer's own)."""

    @staticmethod
    def forward(ctx, x):
        h = x * 3
        ctx.save_for_backward(h)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        h, = ctx.saved_tensors
        return g * 2 + 0 * h


def test_the_compilers_own_warnings_about_a_trace_are_not_replayed():
    m = _mlp()
    opt = tg.optim.SGD(m.parameters(), lr=0.1)

    @tg.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(_Scaled.apply(m(x)), y)
        loss.backward()
        opt.step()
        return loss
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for i in range(5):
            step(*_data(i))
    assert step.stats.cache_hits >= 2
    assert len([x for x in w if "runs forward once more" in str(x.message)]) == 1


def test_betas_set_as_a_list_are_read_per_call_without_retracing():
    # `g["betas"] = [0.8, 0.99]` (Adam unpacks a list as well): the per-call read wanted a
    # tuple, so every later call re-traced until cache_limit, then ran eagerly
    def betas(step, objs, i):
        g = objs["opt"].param_groups[0]
        if i == 2:
            g["betas"] = [0.8, 0.99]
        if i == 4:
            g["betas"][1] = 0.9                  # the list changed in place
        return step(*_data(i))
    stats = _compare(_standard(_std_step, lambda ps: tg.optim.Adam(ps, lr=0.01)), betas, 6)
    assert stats.traces == 2


# --- optimizer hooks (missing before: AttributeError where PyTorch runs them) ---

def _hook_log(lib, register_global_pre):
    """What the step and state-dict hooks of `lib`'s SGD see, in order."""
    log = []
    w = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.1)
    pre = opt.register_step_pre_hook(
        lambda o, a, k: log.append(("pre", o is opt, len(a), a[0] is opt, k)))
    opt.register_step_post_hook(lambda o, a, k: log.append(("post", a[0] is opt, k)))
    glob = register_global_pre(lambda o, a, k: log.append(("global pre", o is opt)))
    try:
        w.grad = lib.ones(2, dtype=lib.float64)
        opt.step()
        pre.remove()
        opt.step()
    finally:
        glob.remove()
    opt.step()
    opt.register_step_pre_hook(lambda o, a, k: 5)
    try:
        opt.step()
    except RuntimeError as e:
        log.append(("error", str(e).split(" must ")[1]))
    opt.register_state_dict_pre_hook(lambda o: log.append("state_dict pre"))
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    sd = opt.state_dict()
    log.append(sorted(sd))
    opt.register_load_state_dict_pre_hook(lambda o, s: log.append(("load pre", s is sd)))
    opt.register_load_state_dict_post_hook(lambda o: log.append("load post"))
    del sd["extra"]
    opt.load_state_dict(sd)
    import copy
    log.append(len(copy.deepcopy(opt)._optimizer_step_post_hooks))
    return log, w.detach().numpy().tolist()


def test_optimizer_hooks_behave_as_pytorchs():
    torch = pytest.importorskip("torch")
    from torch.optim.optimizer import register_optimizer_step_pre_hook as torch_global
    from tracegrad.optim.optimizer import register_optimizer_step_pre_hook as tg_global
    assert _hook_log(tg, tg_global) == _hook_log(torch, torch_global)


def _clamping_post_hook(make_opt):
    def make(comp):
        m = _mlp()
        opt = make_opt(m.parameters())

        def clamp(o, args, kwargs):
            with tg.no_grad():
                for p in m.parameters():
                    p.clamp_(-0.3, 0.3)
        opt.register_step_post_hook(clamp)
        return comp(lambda x, y: _std_step(m, opt, None, x, y)), dict(m=m, opt=opt)
    return make


def test_a_step_hook_updating_weights_compiles_into_the_step():
    stats = _compare(_clamping_post_hook(_sgd(momentum=0.9)), _plain, 5)
    assert stats.cache_hits >= 3


def test_a_global_step_hook_added_between_calls_is_seen_by_the_compiled_step():
    from tracegrad.optim.optimizer import register_optimizer_step_post_hook
    handles = []

    def calls(step, objs, i):
        if i == 2:
            def halve(o, args, kwargs):
                with tg.no_grad():
                    for p in objs["m"].parameters():
                        p.mul_(0.5)
            handles.append(register_optimizer_step_post_hook(halve))
        if i == 4:
            handles.pop().remove()
        return step(*_data(i))
    try:
        _compare(_standard(_std_step, _sgd(momentum=0.9)), calls, 6)
    finally:
        for h in handles:
            h.remove()


def test_a_step_hook_counting_its_calls_compiles_and_counts_every_call():
    # Note [Numbers written to Python state]: the count is read and written back per call
    def make(comp):
        m = _mlp()
        opt = tg.optim.SGD(m.parameters(), lr=0.1)
        seen = {"steps": 0}

        def count(o, args, kwargs):
            seen["steps"] += 1
        opt.register_step_pre_hook(count)
        return comp(lambda x, y: _std_step(m, opt, None, x, y)), dict(m=m, opt=opt, seen=seen)
    stats = _compare(make, _plain, 6)
    assert stats.eager_calls == 0 and stats.cache_hits >= 3, stats


@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
def test_a_clipping_threshold_passed_as_a_changing_float_is_read_per_call(dtype):
    # clip_grad_norm_ took float(max_norm): the exact value, so every new threshold re-traced
    def make(comp):
        m = _mlp().to(dtype)
        opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y, max_norm):
            opt.zero_grad()
            loss = F.cross_entropy(m(x.to(dtype)), y)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(m.parameters(), max_norm)
            opt.step()
            return loss, norm
        return comp(step), dict(m=m, opt=opt)
    stats = _compare(make, lambda step, objs, i: step(*_data(i), 0.5 / (i + 1)), 6)
    assert stats.traces <= 3


def test_a_warning_turned_into_an_error_after_the_trace_raises_before_the_update():
    # a replayed warning comes after the program: under `simplefilter("error")` the cached
    # call raised only after updating the parameters, where eager raises mid-step
    def calls(step, objs, i):
        with warnings.catch_warnings():
            warnings.simplefilter("error" if i == 3 else "ignore")
            return step(*_data(i))
    stats = _compare(_standard(_mse_broadcast, _sgd(momentum=0.9)), calls, 5)
    assert stats.cache_hits >= 1
