"""The surface of `tracegrad.compile` and what it meets: compiled modules used as modules
(copied, pickled, placed in other modules), compiled methods, check mode on programs with
Python effects, the consumed graph of a step that ran backward itself. Each test is a
divergence found by an adversarial review of the API, minimized."""
import collections
import copy
import pickle
import warnings

import numpy as np
import pytest

import tracegrad as tg

nn = tg.nn


def _x(seed, *shape, requires_grad=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return tg.tensor(a, requires_grad=requires_grad)


def _same(a, b):
    assert np.array_equal(a.detach().numpy(), b.detach().numpy()), (a, b)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x):
        return self.bn(self.fc(x)).relu()


@tg.compile
def double_plus_one(x):
    return x * 2 + 1


# -- modules: order of registration, copies --

def test_replacing_a_submodule_or_parameter_keeps_its_place_in_the_order():
    # PyTorch re-assigns in place: parameters(), state_dict() and an optimizer built from
    # them keep their order (a layer swapped for its compiled self must not move last)
    m = Net()
    m.fc = tg.compile(m.fc)
    m.bn.weight = nn.Parameter(tg.ones(3))
    assert list(m.state_dict()) == list(Net().state_dict())
    assert [n for n, _ in m.named_parameters()] == ["fc.weight", "fc.bias", "bn.weight",
                                                    "bn.bias"]


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_compiled_module_copies_like_a_module(how):
    tg.manual_seed(0)
    c = tg.compile(Net())
    c(_x(0, 5, 4))                             # a cached path must not stop the copy
    d = copy.deepcopy(c) if how == "deepcopy" else pickle.loads(pickle.dumps(c))
    assert isinstance(d, nn.Module) and d._orig_mod is not c._orig_mod
    assert list(d.state_dict()) == list(c.state_dict())
    with tg.no_grad():
        d.fc.weight.add_(1.0)                  # the copy's own parameters, not the original's
    plain = copy.deepcopy(c._orig_mod)
    with tg.no_grad():
        plain.fc.weight.add_(1.0)
    for i in range(3):
        _same(d(_x(i, 5, 4)), plain(_x(i, 5, 4)))
        _same(c(_x(i, 5, 4)), c._orig_mod(_x(i, 5, 4)))


def test_a_module_holding_a_compiled_layer_deep_copies_after_calls():
    tg.manual_seed(0)
    m = nn.Sequential(tg.compile(nn.Linear(3, 3)), nn.Tanh())
    m(_x(0, 2, 3))
    d = copy.deepcopy(m)
    with tg.no_grad():
        d[0].weight.mul_(2.0)
    _same(d(_x(1, 2, 3)), tg.tanh(_x(1, 2, 3) @ d[0].weight.T + d[0].bias))


def test_a_compiled_function_pickles_by_name_and_deep_copies_afresh():
    double_plus_one(_x(0, 3))
    assert pickle.loads(pickle.dumps(double_plus_one)) is double_plus_one
    c = copy.deepcopy(double_plus_one)
    assert c is not double_plus_one and not c.programs
    _same(c(_x(1, 3)), _x(1, 3) * 2 + 1)


# -- a step that ran backward itself returns a consumed graph --

def test_backward_again_through_a_loss_a_compiled_step_already_backpropagated_raises():
    def run(compiled):
        w = tg.ones(3, requires_grad=True)
        opt = tg.optim.SGD([w], lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = (w * x).sum()           # SumBackward0 saves nothing; MulBackward0 does
            loss.backward()
            opt.step()
            return loss

        f = tg.compile(step) if compiled else step
        seen = []
        for _ in range(4):
            loss = f(tg.arange(3.0))
            try:
                seen.append(tg.autograd.grad(loss, [w])[0].tolist())
            except RuntimeError as e:
                seen.append(str(e).split(".")[0])
        return seen

    eager = run(False)
    assert eager[0].startswith("Trying to backward through the graph a second time")
    assert run(True) == eager


# -- check mode --

def test_check_mode_assigns_into_a_callers_dict_and_list_once():
    def f(batch, log):
        batch["y"] = batch["x"] * 2
        batch["n"] = batch.get("n", 0) + 1
        log.append(len(log))
        return batch["y"].sum()

    cf = tg.compile(f, check=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(3):
            batch, log = {"x": _x(i, 3, requires_grad=True)}, []
            cf(batch, log)
            assert batch["n"] == 1 and log == [0]


def test_check_mode_rewinds_a_closure_deque_and_compares_dicts_of_tensors():
    q = collections.deque(maxlen=2)
    acts = {}

    def f(x):
        q.append(x * 1)
        acts["h"] = x * 3                     # a dict holding tensors: no `==` on them
        return sum(q)

    cf = tg.compile(f, check=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = [cf(_x(i, 2)) for i in range(4)]
    _same(outs[-1], _x(2, 2) + _x(3, 2))
    assert len(q) == 2


def test_check_mode_on_a_fresh_seed_inside_compares_equal():
    def f(x):
        tg.seed()
        return x + tg.randn(2)

    cf = tg.compile(f, check=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        draws = [cf(tg.zeros(2)).tolist() for _ in range(3)]
    assert draws[0] != draws[1] != draws[2]


def test_check_mode_on_a_step_taking_the_next_batch_runs_it_once_with_a_warning():
    it = iter([_x(i, 2) for i in range(6)])

    def step(w):
        return (next(it) * w).sum()

    cf = tg.compile(step, check=True)
    with pytest.warns(UserWarning, match="not checked.*iterator"):
        got = [cf(_x(9, 2)).item() for _ in range(3)]
    want = [(_x(i, 2) * _x(9, 2)).sum().item() for i in range(3)]
    assert got == want and next(it).tolist() == _x(3, 2).tolist()


def test_a_private_attribute_written_through_the_compiled_module_reaches_the_forward():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)
            self._scale = 1.0

        def forward(self, x):
            return self.fc(x) * self._scale

    tg.manual_seed(0)
    m = Scaled()
    c = tg.compile(m)
    x = _x(0, 2, 3)
    c(x)
    c._scale = 2.0                             # PyTorch's OptimizedModule sets it on m
    assert m._scale == 2.0
    _same(c(x), m(x))
    del c._scale
    assert not hasattr(m, "_scale")


# -- compiled functions: what they are given --

def test_defaults_replaced_after_compiling_are_the_ones_used():
    def f(x, d=tg.ones(3), *, k=2.0):
        return x * k + d

    c = tg.compile(f)
    for step in range(4):
        if step == 2:
            f.__defaults__ = (tg.zeros(3),)
            f.__kwdefaults__ = {"k": 5.0}
        _same(c(_x(step, 3)), f(_x(step, 3)))


def test_compiling_a_module_class_is_not_mistaken_for_a_module():
    c = tg.compile(nn.Linear, check=False)     # a class has `forward` and `parameters` too
    assert not isinstance(c, nn.Module)
    with pytest.warns(UserWarning, match="returns a Linear object"):
        m = c(3, 2)                            # what eager returns, built eagerly
    assert isinstance(m, nn.Linear) and m.weight.shape == (2, 3)


def test_check_mode_on_the_jax_backend_accepts_a_gradient_that_cancels_to_zero():
    pytest.importorskip("jax")

    class Net(nn.Module):                      # fc.bias before BatchNorm: gradient ~ 0
        def __init__(self):
            super().__init__()
            self.fc, self.bn, self.dp = nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.2)
            self.out = nn.Linear(8, 2)

        def forward(self, x):
            return self.out(self.dp(self.bn(self.fc(x)).relu()))

    tg.manual_seed(0)
    m = Net()
    opt = tg.optim.Adam(m.parameters(), lr=1e-2)
    c = tg.compile(m, backend="jax", check=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(4):
            opt.zero_grad()
            out = c(_x(i, 5, 4))
            nn.functional.cross_entropy(out, tg.tensor([0, 1, 0, 1, 1])).backward()
            opt.step()


def test_a_compiled_method_read_from_an_instance_is_a_bound_method():
    class Scaler:
        def __init__(self, k):
            self.k = k

        @tg.compile
        def apply(self, x):
            return x * self.k

    a, b = Scaler(2.0), Scaler(3.0)
    m = a.apply
    assert m.__self__ is a and m.__name__ == "apply"
    _same(m(_x(0, 3)), _x(0, 3) * 2.0)
    _same(b.apply(_x(0, 3)), _x(0, 3) * 3.0)     # another instance: its own state
    assert a.apply.stats.calls == 2 and "apply" in a.apply.explain()
