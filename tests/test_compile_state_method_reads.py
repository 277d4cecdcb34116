"""Guards dropped on optimizer attributes that no method a trace ran reads (Note [Attributes
only some methods read] in compiler/state_method_reads.py): `defaults` but its
`differentiable` flag under `step()`, the state-dict and load hook registries. For each
dropped guard, the program that would notice runs eagerly and compiled, side by side, with
the attribute changed between calls: results, parameters and `.grad` must agree, and the
paths that do read it must re-trace."""
import numpy as np
import pytest

import tracegrad as tg

nn = tg.nn


def _setup(opt_cls=tg.optim.SGD, **kw):
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3)).double()
    kw = kw or {"lr": 0.1, "momentum": 0.9}
    return model, opt_cls(model.parameters(), **kw)


def _data(i):
    g = np.random.RandomState(i)
    return tg.tensor(g.randn(6, 4)), tg.tensor(g.randint(0, 3, 6))


def _twins(make_step, between=None, n=5, **kw):
    """Run `make_step(model, opt)` eagerly and compiled from the same state, `between(i,
    model, opt)` before call i; compare every result, parameter and `.grad`. Returns the
    compiled function."""
    runs = []
    for compiled in (False, True):
        model, opt = _setup(**kw)
        f = make_step(model, opt)
        if compiled:
            f = tg.compile(f)
        outs = []
        for i in range(n):
            if between is not None:
                between(i, model, opt)
            try:
                out = f(*_data(i))
                outs.append(("ok", np.asarray(out.detach().numpy() if hasattr(out, "numpy")
                                              else out)))
            except Exception as e:          # noqa: BLE001 -- compared below
                outs.append(("raised", type(e).__name__))
            outs.append([p.detach().numpy().copy() for p in model.parameters()])
            outs.append([None if p.grad is None else p.grad.numpy().copy()
                         for p in model.parameters()])
        runs.append((outs, f))
    (eager, _), (comp, f) = runs
    assert len(eager) == len(comp)
    for a, b in zip(eager, comp):
        if isinstance(a, tuple):
            assert a[0] == b[0] and np.array_equal(a[1], b[1]) if a[0] == "ok" else a == b
        else:
            for x, y in zip(a, b):
                assert (x is None) == (y is None)
                if x is not None:
                    np.testing.assert_array_equal(x, y)
    return f


def _train(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _guards(f):
    return [g.describe() for e in f.entries.values() for p in e.paths
            for g in p.state_guards]


def test_step_is_not_guarded_on_defaults_nor_state_dict_hooks():
    f = _twins(_train)
    guards = _guards(f)
    text = "\n".join(guards)
    assert [g.split("defaults")[1][:18] for g in guards if "defaults" in g] == [
        " is {'lr': 0.1, 'm", "['differentiable']"], text
    assert "_optimizer_state_dict_pre_hooks" not in text
    assert "_optimizer_load_state_dict_post_hooks" not in text
    # what step() does read stays guarded
    assert "defaults['differentiable'] == False" in text
    assert "_optimizer_step_pre_hooks" in text


def test_defaults_changed_between_calls_changes_nothing():
    def between(i, model, opt):
        opt.defaults["lr"] = 0.5 + i
        opt.defaults["momentum"] = 0.1 * i
    f = _twins(_train, between)
    assert f.stats.retraces == [] or not any("defaults" in str(r) for r in f.stats.retraces)
    assert f.stats.traces <= 2 and f.stats.eager_calls == 0, str(f.stats)


def test_a_step_reading_defaults_retraces_on_a_change():
    def make(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y) * opt.defaults["lr"]
            loss.backward()
            opt.step()
            return loss
        return step

    def between(i, model, opt):
        opt.defaults["lr"] = 1.0 + i
    f = _twins(make, between)
    assert any("defaults" in str(r) for r in f.stats.retraces), str(f.stats)


@pytest.mark.parametrize("route", ["dict", "tuple"])
def test_defaults_read_through_another_name_stay_guarded(route):
    # the walk reaches `opt` first (closure variables go by name), then the same dict again
    zz = {}

    def make(model, opt):
        zz["cfg"] = opt.defaults if route == "dict" else (opt.defaults,)

        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            cfg = zz["cfg"] if route == "dict" else zz["cfg"][0]
            loss = loss * cfg["momentum"] + cfg["dampening"]
            loss.backward()
            opt.step()
            return loss
        return step

    def between(i, model, opt):
        if i == 2:
            opt.defaults["momentum"] = 3.0
        if i == 4:
            opt.defaults["dampening"] = 0.25
    _twins(make, between)


def test_defaults_read_by_a_computed_name_stay_guarded():
    name = ["defaults"]

    def make(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y) * getattr(opt, name[0])["lr"]
            loss.backward()
            opt.step()
            return loss
        return step

    def between(i, model, opt):
        opt.defaults["lr"] = 1.0 + i
    _twins(make, between)


def test_differentiable_flag_set_between_calls_is_seen():
    # eager: a differentiable step updates leaves that require grad in place, which raises
    def between(i, model, opt):
        if i == 3:
            opt.defaults["differentiable"] = True
    _twins(_train, between)


def test_differentiable_flag_added_between_calls_is_seen():
    def between(i, model, opt):
        if i == 0:
            del opt.defaults["differentiable"]     # step reads .get(..., False)
        if i == 3:
            opt.defaults["differentiable"] = True
    _twins(_train, between)


def _with_state_dict(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sd = opt.state_dict()
        return loss * sd["param_groups"][0]["lr"]
    return step


def test_state_dict_hooks_registered_between_calls_are_seen():
    def post(opt, sd):
        sd["param_groups"][0]["lr"] = 7.0

    def between(i, model, opt):
        if i == 2:
            opt.register_state_dict_post_hook(post)
    f = _twins(_with_state_dict, between)
    assert "_optimizer_state_dict_post_hooks" in "\n".join(_guards(f))


def test_state_dict_pre_hook_registered_between_calls_is_seen():
    def pre(opt):
        opt.param_groups[0]["lr"] = 0.5

    def between(i, model, opt):
        if i == 3:
            opt.register_state_dict_pre_hook(pre)
    _twins(_with_state_dict, between)


def test_eval_path_drops_step_hook_registries_but_a_later_step_sees_them():
    # a path that only zeroes gradients runs no step hook: not guarded on their registries;
    # one registered later still runs in the path that steps
    def make(model, opt):
        def step(x, y, train):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            if train:
                loss.backward()
                opt.step()
            return loss
        return step

    def hook(opt, args, kwargs):
        with tg.no_grad():
            for p in opt.param_groups[0]["params"]:
                p.mul_(0.5)

    results = []
    for compiled in (False, True):
        model, opt = _setup()
        f = make(model, opt)
        f = tg.compile(f) if compiled else f
        out = []
        for i in range(8):
            if i == 4:
                opt.register_step_pre_hook(hook)
            out.append(f(*_data(i), train=i % 2 == 1).item())
            out += [p.detach().numpy().copy() for p in model.parameters()]
        results.append(out)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    assert any("_optimizer_step_pre_hooks" in str(r) for r in f.stats.retraces), str(f.stats)
    model, opt = _setup()
    f = tg.compile(make(model, opt))
    for i in range(3):
        f(*_data(i), train=False)
    text = "\n".join(_guards(f))
    assert "_optimizer_step_pre_hooks" not in text and "defaults" not in text, text
    opt.register_step_pre_hook(hook)
    f(*_data(5), train=False)
    assert f.stats.traces == 1, str(f.stats)


def test_adam_step_drops_defaults_and_matches_eager():
    def between(i, model, opt):
        opt.defaults["betas"] = (0.5, 0.5)
        opt.defaults["eps"] = 1.0 * i
    f = _twins(_train, between, opt_cls=tg.optim.Adam, lr=0.01)
    text = "\n".join(_guards(f))
    assert "defaults['eps']" not in text and "defaults['differentiable']" in text
    assert f.stats.eager_calls == 0


@pytest.mark.parametrize("backend", ["jax"])
def test_defaults_changed_between_calls_jax(backend):
    pytest.importorskip("jax")
    model, opt = _setup()
    f = tg.compile(_train(model, opt), backend=backend)
    for i in range(4):
        opt.defaults["lr"] = 1.0 + i
        f(*_data(i))
    assert f.stats.traces <= 2, str(f.stats)


def test_declared_step_reads_hold_for_every_optimizer():
    # `step` is declared to read only defaults["differentiable"]: no optimizer's step code
    # (its wrappers included) may name `defaults` but the grad-mode wrapper, which reads it
    from tracegrad.compiler.state_method_reads import _codes_of, _names_word
    from tracegrad.optim.optimizer import Optimizer, grad_mode_of_step
    wrapper = grad_mode_of_step(lambda self: None).__code__
    classes = [c for c in vars(tg.optim).values()
               if isinstance(c, type) and issubclass(c, Optimizer) and c is not Optimizer]
    assert len(classes) >= 10
    for cls in classes:
        for c in _codes_of(cls, "step"):
            assert c is wrapper or not _names_word(c, "defaults"), (cls, c)


# -- modules: `training` where no code that ran names it, Linear's sizes ---------------------

def _module_twins(make_model, fn, between, n=5):
    """`fn(model, x)` eagerly and compiled on twin models, `between(i, model)` before call
    i; results, parameters and `.grad` compared. Returns the compiled function."""
    runs = []
    for compiled in (False, True):
        tg.manual_seed(0)
        model = make_model().double()
        f = (lambda x: fn(model, x))
        f = tg.compile(f) if compiled else f
        outs = []
        for i in range(n):
            between(i, model)
            tg.manual_seed(10 + i)
            x = tg.tensor(np.random.RandomState(i).randn(6, 4))
            out = f(x)
            outs.append(out.detach().numpy().copy())
            out.sum().backward()
            outs += [p.grad.numpy().copy() for p in model.parameters()]
            model.zero_grad()
        runs.append((outs, f))
    for a, b in zip(runs[0][0], runs[1][0]):
        np.testing.assert_array_equal(a, b)
    return runs[1][1]


def _mlp():
    return nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3))


def test_linear_relu_not_guarded_on_training_or_sizes():
    def between(i, model):
        model.train(i % 2 == 0)
        model[0].in_features = 40 + i
        model[2].out_features = 7 * i
    f = _module_twins(_mlp, lambda m, x: m(x), between)
    text = "\n".join(_guards(f))
    assert ".training" not in text and "_features" not in text, text
    assert f.stats.traces == 1, str(f.stats)


def test_dropout_and_batchnorm_read_training():
    def make():
        return nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.Dropout(0.5),
                             nn.Linear(5, 3))

    def between(i, model):
        model.train(i in (0, 1, 4))
    f = _module_twins(make, lambda m, x: m(x), between)
    assert any("training" in str(r) for r in f.stats.retraces), str(f.stats)


def test_training_read_by_user_code_retraces():
    def fn(m, x):
        y = m(x)
        return y * 2.0 if m.training else y

    def between(i, model):
        model.train(i < 2)
    f = _module_twins(_mlp, fn, between)
    assert any("training" in str(r) for r in f.stats.retraces), str(f.stats)


def test_sizes_read_by_user_code_are_seen():
    def between(i, model):
        if i == 2:
            model[0].in_features = 40
    _module_twins(_mlp, lambda m, x: m(x) * m[0].in_features, between)


def test_sizes_read_by_repr_are_seen():
    def between(i, model):
        if i == 3:
            model[2].out_features = 300
    f = _module_twins(_mlp, lambda m, x: m(x) * len(repr(m[2])), between)
    assert len(f.stats.retraces) == 1, str(f.stats)


def test_sizes_read_by_a_computed_name_stay_guarded():
    name = ["in_features"]

    def fn(m, x):
        return m(x) * getattr(m[0], name[0])

    def between(i, model):
        model[0].in_features = 40 + i
    _module_twins(_mlp, fn, between)


# -- Note [Guard lines]: value guards on True/False/None are identity lines -------------------

@pytest.mark.parametrize("first,then", [(False, 0), (True, 1), (None, False), (False, 0.0),
                                        (True, np.True_)])
def test_singleton_value_guards_still_see_equal_values_of_other_types(first, then):
    from tracegrad.compiler.state_guards import checker
    cfg = {"flag": first}

    def f(x):
        return x * 2.0 if cfg["flag"] else x * 3.0
    g = tg.compile(f)
    x = tg.tensor([1.0, 2.0])
    g(x)
    g(x)
    guards = [s for e in g.entries.values() for p in e.paths for s in p.state_guards]
    check = checker(guards)
    assert check()
    cfg["flag"] = then
    assert not check()
    np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())
    assert len(g.stats.retraces) == 1, str(g.stats)


def test_a_user_step_patched_onto_the_library_class_is_user_code(monkeypatch):
    orig = tg.optim.SGD.step

    def my_step(self, closure=None):
        with tg.no_grad():
            for p in self.param_groups[0]["params"]:
                p.sub_(p.grad * self.defaults["lr"])

    monkeypatch.setattr(tg.optim.SGD, "step", my_step)

    def between(i, model, opt):
        opt.defaults["lr"] = 0.5 * i
    f = _twins(_train, between)
    assert any("defaults" in str(r) for r in f.stats.retraces), str(f.stats)
    assert tg.optim.SGD.step is my_step and orig is not my_step
