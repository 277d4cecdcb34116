"""`opt.load_state_dict(best)` between calls of a compiled training step ("restore the best
checkpoint"): the load replaces the optimizer's state and groups with objects of the same
structure, and the step keeps running its compiled path, re-bound to them (Note
[Optimizer state reloaded] in compiler/state_rebind.py), with eager's results bit for bit.
A load with a different structure (a missing `momentum_buffer`, another dtype, a new key)
re-traces or runs eagerly, never reading the old state."""
import copy

import pytest

import tracegrad as tg
from _differential import compare

OPTIMIZERS = {
    "sgd_momentum": lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9),
    "adam": lambda ps: tg.optim.Adam(ps, lr=0.01),
    "adamw_amsgrad": lambda ps: tg.optim.AdamW(ps, lr=0.01, amsgrad=True),
}


def _program(opt_name, edit=None, model_too=False, every=2, dtype=tg.float32, copies=False):
    """A training step; call i takes a batch, then every `every` calls the optimizer (and
    the model, `model_too`) load the state saved after call 2, or, with `edit`, that
    state and a copy `edit` changed, in turn; `copies`: a deep copy of it each time (new
    state tensors; otherwise the load keeps the saved tensors, which the steps update)."""
    def make(comp):
        model = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 1)).to(dtype)
        opt = OPTIMIZERS[opt_name](model.parameters())

        def step(x, y):
            opt.zero_grad()
            loss = (model(x) - y).square().mean()
            loss.backward()
            opt.step()
            return loss
        return comp(step), {"model": model, "opt": opt, "saved": {}}

    def calls(step, objs, i):
        loss = step(tg.randn(5, 3, dtype=dtype), tg.randn(5, 1, dtype=dtype))
        saved, opt, model = objs["saved"], objs["opt"], objs["model"]
        for g in opt.param_groups:       # a decay: the loaded rate is not the current one
            g["lr"] *= 0.9
        if i == 2:
            saved["opt"] = copy.deepcopy(opt.state_dict())
            saved["model"] = copy.deepcopy(model.state_dict())
            if edit is not None:
                saved["edited"] = copy.deepcopy(saved["opt"])
                edit(saved["edited"])
        if saved and i % every == every - 1:
            which = "edited" if edit is not None and i % (2 * every) == 2 * every - 1 else "opt"
            opt.load_state_dict(copy.deepcopy(saved[which]) if copies else saved[which])
            if model_too:
                model.load_state_dict(saved["model"])
        return loss
    return make, calls


def _reload_every_other(step, objs, i):
    """Call i of a step on a (5, 3) batch: the optimizer state saved after call 2 is loaded
    (a deep copy) after every odd call."""
    loss = step(tg.randn(5, 3), tg.randn(5, 1))
    saved, opt = objs["saved"], objs["opt"]
    if i == 2:
        saved["opt"] = copy.deepcopy(opt.state_dict())
    if saved and i % 2 == 1:
        opt.load_state_dict(copy.deepcopy(saved["opt"]))
    return loss


@pytest.mark.parametrize("backend, copies", [
    ("numpy", False), ("numpy", True), ("jax", False),
    pytest.param("jax", True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_reloads_keep_the_step_compiled(opt_name, backend, copies):
    if backend == "jax":
        pytest.importorskip("jax")
    # (float64 on JAX: the harness compares its results to 1e-9)
    dtype = tg.float64 if backend == "jax" else tg.float32
    make, calls = _program(opt_name, model_too=True, dtype=dtype, copies=copies)
    stats = compare(make, calls, n=24, backend=backend)
    # the first trace creates the state (not kept), the second is the path; the first load
    # re-traces once (it reorders the group dicts' keys, as PyTorch's does); every later
    # load followed by a call (9 of them) runs the path re-bound to the loaded state
    assert stats.traces <= 3 and stats.eager_calls == 0, str(stats)
    assert stats.cache_hits >= 21 and stats.rebinds == 9, str(stats)


def test_reloads_every_call():
    make, calls = _program("adam", every=1)
    stats = compare(make, calls, n=12)
    assert stats.traces <= 3 and stats.eager_calls == 0, str(stats)
    assert stats.rebinds == 8, str(stats)


def _drop_momentum(sd):
    del sd["state"][0]["momentum_buffer"]


def _step_dtype(sd):
    for st in sd["state"].values():
        st["step"] = st["step"].double()


def _new_key(sd):
    sd["state"][1]["extra"] = tg.zeros(4)


def _drop_state(sd):
    del sd["state"][3]


@pytest.mark.parametrize("opt_name, edit", [
    ("sgd_momentum", _drop_momentum), ("adam", _step_dtype), ("adam", _new_key),
    ("adamw_amsgrad", _drop_state)])
def test_a_reload_of_another_structure_is_not_rebound(opt_name, edit):
    """The saved state and an edited copy loaded in turn: the path of one structure is
    never re-bound to the other (each is traced, or runs eagerly), and each later load of
    one runs its path re-bound."""
    make, calls = _program(opt_name, edit=edit)
    stats = compare(make, calls, n=16, loud=True)
    assert stats.traces + stats.eager_calls >= 4, str(stats)
    assert stats.traces <= 6, str(stats)


def test_state_loaded_as_shared_tensors_is_not_rebound():
    """Two moments loaded as one tensor: the path's program reads them as two inputs, so
    it must not run on them (eager updates the one tensor twice)."""
    def edit(sd):
        st = sd["state"][0]
        st["max_exp_avg_sq"] = st["exp_avg_sq"]
    make, calls = _program("adamw_amsgrad", edit=edit)
    stats = compare(make, calls, n=16, loud=True)
    assert stats.traces + stats.eager_calls >= 4, str(stats)


@pytest.mark.parametrize("write", ["lr", "buffer"])
def test_a_step_writing_to_the_state_loads_replace(write):
    """A step that stores into a group or a per-parameter state dict writes, on each cached
    call, to the dict it was traced with: a path is not re-bound away from it (the call
    re-traces), so the write lands in the loaded dict as eagerly."""
    def make(comp):
        model = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 1))
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = (model(x) - y).square().mean()
            loss.backward()
            opt.step()
            if write == "lr":
                opt.param_groups[0]["lr"] = opt.param_groups[0]["lr"] * 0.99
            else:
                st = opt.state[model[0].bias]
                st["momentum_buffer"] = st["momentum_buffer"] * 0.5
            return loss
        return comp(step), {"model": model, "opt": opt, "saved": {}}

    compare(make, _reload_every_other, n=14, loud=True)


def test_a_state_tensor_also_held_elsewhere_is_not_moved():
    """The step also reads a momentum buffer through a global the user set after a load:
    the next load replaces the optimizer's buffer but not the global's, which eager keeps
    reading, so that path is not re-bound (the global's guard expects the old tensor)."""
    held = {}

    def make(comp):
        model = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 1))
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        held.clear()

        def step(x, y):
            opt.zero_grad()
            loss = (model(x) - y).square().mean()
            loss.backward()
            opt.step()
            b = held.get("buf")
            return loss if b is None else loss + b.sum()
        return comp(step), {"model": model, "opt": opt, "saved": {}}

    def calls(step, objs, i):
        loss = _reload_every_other(step, objs, i)
        if i == 5:
            held["buf"] = objs["opt"].state[objs["model"][0].bias]["momentum_buffer"]
        return loss
    compare(make, calls, n=14, loud=True)
