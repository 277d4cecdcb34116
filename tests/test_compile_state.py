"""Python state a compiled function reads besides its arguments (compiler/state.py, Note
[Captured state]): a change that eager execution would see is seen by the next compiled call
(through a re-trace whose reason names the place), and a state that does not change never
causes a re-trace."""
import logging
import warnings

import numpy as np
import pytest

import tracegrad as tg

params = [tg.ones(3)]
cfg = {"w": tg.ones(3), "s": 2.0}
scale = 2.0


class _Holder:
    pass


holder = _Holder()
holder.w = tg.ones(3)
holder.k = 1


def _helper(x):
    return x + 1


def _check(compiled, eager, *args):
    got, want = compiled(*args), eager(*args)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())


def _by_list(x):
    return x * params[0]


def _by_dict(x):
    return x * cfg["w"] * cfg["s"]


def _by_object(x):
    return x * holder.w * holder.k


def _by_global_scalar(x):
    return x * scale


def _by_global_function(x):
    return _helper(x)


def test_tensor_rebound_in_a_list_dict_or_object_attribute_retraces():
    global params
    x = tg.ones(3)
    for fn in (_by_list, _by_dict, _by_object):
        c = tg.compile(fn)
        _check(c, fn, x)
    c_list, c_dict, c_obj = (tg.compile(f) for f in (_by_list, _by_dict, _by_object))
    for c in (c_list, c_dict, c_obj):
        c(x)
    params[0] = tg.full((3,), 5.0)
    cfg["w"] = tg.full((3,), 2.0)
    holder.w = tg.full((3,), 7.0)
    try:
        for c, fn in ((c_list, _by_list), (c_dict, _by_dict), (c_obj, _by_object)):
            _check(c, fn, x)
            assert c.stats.traces == 2 and "rebound" in c.stats.retraces[0]
        assert c_list.stats.retraces == ["global 'params'[0] was rebound to another object "
                                         "(tensor of shape (3,))"]
        params = [tg.full((3,), 9.0)]           # the list itself rebound
        _check(c_list, _by_list, x)
        assert "global 'params' was rebound" in c_list.stats.retraces[-1]
    finally:
        params = [tg.ones(3)]
        cfg["w"], holder.w = tg.ones(3), tg.ones(3)


def test_python_scalars_in_globals_containers_and_objects_retrace_when_changed(caplog):
    global scale
    x = tg.ones(3)
    cs = {f: tg.compile(f) for f in (_by_global_scalar, _by_dict, _by_object)}
    for c in cs.values():
        c(x)
    scale, cfg["s"], holder.k = 5.0, 3.0, 4
    try:
        with caplog.at_level(logging.INFO, logger="tracegrad"):
            for f, c in cs.items():
                _check(c, f, x)
                _check(c, f, x)                    # the new path is cached
                assert c.stats.traces == 2
        assert cs[_by_global_scalar].stats.retraces == [
            "global 'scale' changed: 2.0 -> 5.0 (float: read per call from now on, no "
            "re-trace for new values)"]
        assert "global 'cfg'['s'] changed: 2.0 -> 3.0" in caplog.text
        assert "holder'.k changed: 1 -> 4" in caplog.text
        holder.k = 4.0                             # equal value, other type: eager differs
        _check(cs[_by_object], _by_object, x)
        assert cs[_by_object].stats.traces == 3
    finally:
        scale, cfg["s"], holder.k = 2.0, 2.0, 1


def test_closure_scalar_and_rebound_function_retrace():
    k = 2

    def f(x):
        return x * k
    c = tg.compile(f)
    c(tg.ones(2))
    k = 4                                          # noqa: F841 (read through the closure)
    _check(c, f, tg.ones(2))
    assert c.stats.retraces == ["closure variable 'k' changed: 2 -> 4"]

    global _helper
    old = _helper
    g = tg.compile(_by_global_function)
    g(tg.ones(1))
    _helper = lambda x: x + 10                     # noqa: E731
    try:
        _check(g, _by_global_function, tg.ones(1))
        assert "global '_helper' was rebound" in g.stats.retraces[0]
    finally:
        _helper = old


class _Scaled(tg.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = tg.nn.Linear(2, 2)
        self.alpha = 2.0

    def forward(self, x):
        return self.fc(x) * self.alpha


def test_module_attributes_and_rebound_submodules_retrace():
    m = _Scaled()
    c = tg.compile(m)
    x = tg.ones(1, 2)
    c(x)
    m.alpha = 3.0
    _check(c, m.forward, x)
    assert c.stats.retraces == [
        "_Scaled.alpha changed: 2.0 -> 3.0 (float: read per call from now on, no re-trace "
        "for new values)"]
    m.fc = tg.nn.Linear(2, 2)
    _check(c, m.forward, x)
    assert c.stats.retraces[-1].startswith("_Scaled.fc was rebound to another object")
    with tg.no_grad():
        m.fc.weight.mul_(2)                        # in place: read by reference, no retrace
    _check(c, m.forward, x)
    assert c.stats.traces == 3


def test_unchanged_state_never_retraces_a_training_loop():
    model = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.ReLU(), tg.nn.Dropout(0.1),
                             tg.nn.Linear(8, 2))
    opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    lr = 0.05

    @tg.compile
    def step(x, y):
        loss = tg.nn.functional.mse_loss(model(x), y)
        grads = tg.autograd.grad(loss, list(model.parameters()))
        with tg.no_grad():
            for p, g in zip(model.parameters(), grads):
                p -= lr * g
        return loss.detach()
    x, y = tg.randn(5, 4), tg.randn(5, 2)
    for _ in range(20):
        step(x, y)
    assert step.stats.traces == 1 and step.stats.cache_hits == 19
    del opt


class Counter(tg.nn.Module):
    """A module counting its calls, then computing with the count (`times`) or using it as
    a loop bound (`loop`)."""

    def __init__(self, use="times"):
        super().__init__()
        self.calls, self.use = 0, use

    def forward(self, x):
        self.calls += 1
        if self.use == "times":
            return x * self.calls
        for _ in range(self.calls):          # the exact value: a path per value
            x = x * 2
        return x


def test_function_changing_a_counter_it_reads_compiles_and_writes_it_back():
    # Note [Numbers written to Python state]: the counter is read per call and written
    # back by each cached call
    m = Counter()
    c = tg.compile(m, cache_limit=3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        outs = [c(tg.ones(2)).tolist() for _ in range(6)]
    assert outs == [[float(k)] * 2 for k in range(1, 7)]     # what eager computes
    assert m.calls == 6 and type(m.calls) is int
    assert not [x for x in w if "tracegrad.compile" in str(x.message)]
    assert c.stats.traces == 2 and c.stats.cache_hits == 4 and c.stats.eager_calls == 0


def test_function_changing_state_it_needs_the_value_of_falls_back_to_eager_with_eager_results():
    m = Counter("loop")
    c = tg.compile(m, cache_limit=3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        outs = [c(tg.ones(2)).tolist() for _ in range(6)]
    assert outs == [[2.0 ** k] * 2 for k in range(1, 7)]     # what eager computes
    assert m.calls == 6
    # a trace that changes state it reads is never cached; twice in a row, such calls run
    # eagerly and say why, once
    assert sum("it changes Counter.calls" in str(x.message) for x in w) == 1
    assert c.stats.cache_hits == 0


def test_explain_lists_the_guarded_state():
    c = tg.compile(_by_dict)
    c(tg.ones(3))
    text = c.explain()
    assert "on Python state" in text and "global 'cfg'['s'] == 2.0" in text


@pytest.mark.parametrize("n", [3, 200])
def test_large_containers_are_not_walked_but_small_ones_are(n):
    from tracegrad.compiler.state import MAX_ITEMS
    big = [float(i) for i in range(n)]

    def f(x):
        return x * big[0]
    c = tg.compile(f)
    c(tg.ones(1))
    walked = [g.where for g in c.programs[0].state_guards if "'big'[" in g.where]
    assert (len(walked) == n) == (n <= MAX_ITEMS)


_SHARED = {}


def test_a_tensor_held_in_two_places_is_guarded_in_both():
    """Found in review: a tensor a closure cell and a global dict both held was guarded
    only where the scan met it first, so rebinding the dict's entry kept the old tensor."""
    _SHARED["t"] = tg.ones(3)
    t = _SHARED["t"]

    def f(x):
        return x * t + _SHARED["t"]

    cf = tg.compile(f)
    x = tg.tensor([1.0, 2.0, 3.0])
    for change in (None, lambda: _SHARED["t"].mul_(2),
                   lambda: _SHARED.__setitem__("t", tg.zeros(3)),
                   lambda: setattr(_SHARED["t"], "data", tg.ones(3) * 5)):
        if change is not None:
            change()
        np.testing.assert_array_equal(cf(x).numpy(), f(x).numpy())


def _mode_setup():
    tg.manual_seed(0)
    m = tg.nn.Sequential(tg.nn.Linear(3, 8), tg.nn.BatchNorm1d(8), tg.nn.ReLU(),
                         tg.nn.Dropout(0.3), tg.nn.Linear(8, 2))
    opt = tg.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    return m, opt


def _mode_steps(step_body, entry_modes, compiled):
    """Run `step_body(m, opt)(x, y)` once per entry mode (the flags set outside before the
    call, as a validation pass would): the outputs, the flags after each call, the final
    parameters and buffers, and the compiled function's stats."""
    m, opt = _mode_setup()
    step = step_body(m, opt)
    f = tg.compile(step) if compiled else step
    x, y = tg.randn(6, 3), tg.randint(0, 2, (6,))
    outs, flags = [], []
    for mode in entry_modes:
        m.train(mode)
        with tg.no_grad():
            m(x)                          # eager use in between (validation)
        out = f(x, y)
        outs.append([o.item() if isinstance(o, tg.Tensor) else o for o in out])
        flags.append([mod.training for mod in m.modules()])
    state = [t.detach().numpy().copy() for t in list(m.parameters()) + list(m.buffers())]
    return outs, flags, state, getattr(f, "stats", None)


def _train_inside(m, opt):
    def train_step(x, y):
        m.train()
        opt.zero_grad()
        loss = tg.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss, m[3].training
    return train_step


def _restore_mode_and_eval_after(m, opt):
    def train_step(x, y):
        was = m.training                  # read before the train() call: a guard
        m[3].eval()                       # dropout off, batch norm in training
        m[1].train()
        opt.zero_grad()
        loss = tg.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        m.train(was)
        with tg.no_grad():
            v = m(x).sum()
        return loss, v
    return train_step


@pytest.mark.parametrize("body", [_train_inside, _restore_mode_and_eval_after])
def test_a_step_setting_training_mode_itself_compiles_and_matches_eager(body):
    """Note [Mode set while tracing]: `model.train()` at the top of a step (eval mode
    outside for validation) compiles, with eager's outputs, flags and state after every
    call, instead of running eagerly because the trace changed a flag it reads."""
    modes = [False, False, True, False, True, True, False]
    eager = _mode_steps(body, modes, False)
    comp = _mode_steps(body, modes, True)
    assert eager[0] == comp[0] and eager[1] == comp[1]
    for a, b in zip(eager[2], comp[2]):
        np.testing.assert_array_equal(a, b)
    assert comp[3].eager_calls == 0 and comp[3].traces <= 4, str(comp[3])
