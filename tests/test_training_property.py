"""Whole training steps written the PyTorch way, drawn at random, compiled == eager.

Each example draws a model (MLP with tanh/relu, optional dropout and batch norm), an
optimizer (SGD with momentum/nesterov/weight decay, Adam, AdamW, amsgrad, maximize), a loss,
optional gradient clipping, a scheduler stepped inside or outside, `zero_grad`'s
`set_to_none`, a step that starts with `model.train()` or not, and what the user does between steps: change the learning rate (Python or
numpy number), toggle `eval()`/`train()`, freeze or unfreeze a layer, register or remove a
gradient hook, round-trip `load_state_dict`, rebind a loss attribute. The same program runs
eagerly and compiled, from the same seed; losses, parameters, gradients and optimizer state
must be bitwise equal after every step. A few examples run by default; `-m slow` runs many.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracegrad as tg

EVENTS = ["lr", "lr_numpy", "eval", "train", "freeze", "unfreeze", "hook", "unhook",
          "reload", "reduction", "momentum", "weight_decay", "dropout_p", "clear_state",
          "weight_data", "forward_hook", "forward_unhook", None]


def _program(draw):
    return dict(
        act=draw(st.sampled_from(["tanh", "relu"])),
        dropout=draw(st.booleans()),
        batchnorm=draw(st.booleans()),
        opt=draw(st.sampled_from(["sgd", "nesterov", "sgd_wd", "adam", "adamw", "amsgrad",
                                  "adam_max"])),
        loss=draw(st.sampled_from(["ce", "mse"])),
        clip=draw(st.sampled_from([None, "norm", "value"])),
        sched=draw(st.sampled_from([None, "step_inside", "cosine_outside"])),
        set_to_none=draw(st.booleans()),
        train_inside=draw(st.booleans()),          # the step starts with model.train()
        compiled=draw(st.sampled_from(["step", "model"])),   # what tg.compile wraps
        # mostly plain steps (cache hits), now and then a change between two steps
        events=draw(st.lists(st.sampled_from(EVENTS + [None] * 14), min_size=12,
                             max_size=12)),
    )


def _build(p, compile_model=False):
    tg.manual_seed(0)
    act = tg.nn.Tanh if p["act"] == "tanh" else tg.nn.ReLU
    layers = [tg.nn.Linear(5, 8), act()]
    if p["batchnorm"]:
        layers.append(tg.nn.BatchNorm1d(8))
    if p["dropout"]:
        layers.append(tg.nn.Dropout(0.3))
    layers.append(tg.nn.Linear(8, 3))
    model = tg.nn.Sequential(*layers)
    params = model.parameters()
    o = p["opt"]
    if o in ("sgd", "nesterov", "sgd_wd"):
        opt = tg.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=o == "nesterov",
                           weight_decay=0.01 if o == "sgd_wd" else 0)
    elif o == "adamw":
        opt = tg.optim.AdamW(params, lr=0.01)
    else:
        opt = tg.optim.Adam(params, lr=0.01, amsgrad=o == "amsgrad", maximize=o == "adam_max")
    sched = None
    if p["sched"] == "step_inside":
        sched = tg.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    elif p["sched"] == "cosine_outside":
        sched = tg.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    loss_fn = tg.nn.CrossEntropyLoss() if p["loss"] == "ce" else tg.nn.MSELoss()
    after = [sched.step] if p["sched"] == "step_inside" else []

    forward = tg.compile(model) if compile_model else model

    def step(x, y):
        if p["train_inside"]:
            model.train()
        opt.zero_grad(set_to_none=p["set_to_none"])
        out = forward(x)
        target = y if p["loss"] == "ce" else tg.nn.functional.one_hot(y, 3).float()
        loss = loss_fn(out, target)
        loss.backward()
        if p["clip"] == "norm":
            tg.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        elif p["clip"] == "value":
            tg.nn.utils.clip_grad_value_(model.parameters(), 0.1)
        opt.step()
        for f in after:                          # a scheduler stepped inside, replayed
            f()
        return loss
    return model, opt, sched, loss_fn, step


def _event(e, k, model, opt, loss_fn, hooks):
    first = model[0].weight
    if e == "lr":
        opt.param_groups[0]["lr"] = 0.02 + 0.01 * k
    elif e == "lr_numpy":
        opt.param_groups[0]["lr"] = np.float64(0.03 + 0.005 * k)
    elif e in ("eval", "train"):
        getattr(model, e)()
    elif e in ("freeze", "unfreeze"):
        first.requires_grad_(e == "unfreeze")
        if e == "freeze":
            first.grad = None
    elif e == "hook" and first.requires_grad:
        hooks.append(first.register_hook(lambda g: g * 0.5))
    elif e == "unhook" and hooks:
        hooks.pop().remove()
    elif e == "reload":
        opt.load_state_dict(opt.state_dict())
    elif e == "reduction" and isinstance(loss_fn, tg.nn.MSELoss):
        loss_fn.reduction = "sum" if loss_fn.reduction == "mean" else "mean"
    elif e == "momentum":
        g = opt.param_groups[0]
        if "betas" in g:
            g["betas"] = (0.8 + 0.01 * k, g["betas"][1])
        else:
            g["momentum"] = 0.5 + 0.03 * k
    elif e == "weight_decay":
        opt.param_groups[0]["weight_decay"] = 0.001 * k
    elif e == "dropout_p":
        for m in model.modules():
            if isinstance(m, tg.nn.Dropout):
                m.p = 0.1 + 0.05 * k
    elif e == "clear_state":
        opt.state.clear()
    elif e == "weight_data":
        with tg.no_grad():
            model[-1].weight.data = model[-1].weight.data * 0.5
    elif e == "forward_hook":
        hooks.append(model[0].register_forward_hook(lambda m, i, o: o * 1.5))
    elif e == "forward_unhook" and hooks:
        hooks.pop().remove()


def _run(p, compiled):
    model, opt, sched, loss_fn, step = _build(p, compiled and p["compiled"] == "model")
    f = tg.compile(step) if compiled and p["compiled"] == "step" else step
    rng = np.random.default_rng(1)
    hooks, record = [], []
    for k, e in enumerate(p["events"]):
        _event(e, k, model, opt, loss_fn, hooks)
        x = tg.tensor(rng.standard_normal((6, 5)).astype(np.float32))
        y = tg.tensor(rng.integers(0, 3, 6))
        tg.manual_seed(100 + k)                  # the same dropout masks both ways
        loss = f(x, y)
        if p["sched"] == "cosine_outside":
            sched.step()
        record.append(loss.item())
        for q in model.parameters():
            record.append(q.detach().numpy().copy())
            record.append(None if q.grad is None else q.grad.numpy().copy())
        for s in opt.state.values():
            for v in s.values():
                record.append(v.numpy().copy() if isinstance(v, tg.Tensor) else v)
        record += [b.numpy().copy() for b in model.buffers()]
    return record, getattr(f, "stats", None)


def _check(p):
    eager, _ = _run(p, False)
    comp, stats = _run(p, True)
    assert len(eager) == len(comp)
    for i, (a, b) in enumerate(zip(eager, comp)):
        if isinstance(a, np.ndarray):
            assert isinstance(b, np.ndarray) and a.dtype == b.dtype, (i, p)
            np.testing.assert_array_equal(a, b, err_msg=f"entry {i} of {p} ({stats})")
        else:
            assert a == b or (a != a and b != b), (i, a, b, p, str(stats))


@st.composite
def programs(draw):
    return _program(draw)


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(programs())
def test_random_training_steps_compiled_equal_eager(p):
    _check(p)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_random_training_steps_compiled_equal_eager_many(p):
    _check(p)
