"""Issue 10, family 9: Python state that flips between two values selects among cached
paths. After many alternating calls a compiled function has traced exactly twice, ran no
call eagerly, and every result (value and gradient) equals eager's."""
import math
import types

import numpy as np

import tracegrad as tg

FLAG = True
ACT = tg.relu
W = tg.ones(3)
cfg = types.ModuleType("soundness_thrash_cfg")
cfg.SCALE = 1.0


def _alternate(fn, flip, calls=12, args=None, expect_traces=2):
    """Call `fn` compiled and eagerly `calls` times, `flip(i)` before each call."""
    c = tg.compile(fn)
    for i in range(calls):
        flip(i)
        a = args(i) if args else (tg.tensor(np.linspace(-1, 1, 3) + i, requires_grad=True),)
        b = tuple(t.detach().clone().requires_grad_(t.requires_grad)
                  if isinstance(t, tg.Tensor) else t for t in a)
        got, want = c(*a), fn(*b)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6,
                                   err_msg=f"call {i}")
        if want.requires_grad:
            got.sum().backward()
            want.sum().backward()
            np.testing.assert_allclose(a[0].grad.numpy(), b[0].grad.numpy(), rtol=1e-6,
                                       err_msg=f"grad, call {i}")
    assert c.stats.eager_calls == 0, c.stats
    if expect_traces is None:        # read per call through its source, or two paths
        assert 1 <= c.stats.traces <= 2, c.stats
    else:
        assert c.stats.traces == expect_traces, c.stats
    return c


def _by_flag(x):
    return x * 2 if FLAG else x.exp()


def test_global_bool_flipping():
    def flip(i):
        global FLAG
        FLAG = i % 2 == 0
    try:
        _alternate(_by_flag, flip)
    finally:
        globals()["FLAG"] = True


def _by_act(x):
    return ACT(x * 3)


def test_global_function_flipping_between_relu_and_tanh():
    def flip(i):
        global ACT
        ACT = tg.relu if i % 2 else tg.tanh
    try:
        _alternate(_by_act, flip)
    finally:
        globals()["ACT"] = tg.relu


def _by_tensor(x):
    return x * W


def test_global_tensor_rebound_between_two_tensors():
    a, b = tg.full((3,), 2.0), tg.full((3,), -1.0)

    def flip(i):
        global W
        W = a if i % 2 else b
    try:
        _alternate(_by_tensor, flip, expect_traces=None)
    finally:
        globals()["W"] = tg.ones(3)


def _by_cfg(x):
    return x * cfg.SCALE


def test_config_module_attribute_flipping():
    def flip(i):
        cfg.SCALE = 0.5 if i % 2 else 4.0
    try:
        _alternate(_by_cfg, flip)
    finally:
        cfg.SCALE = 1.0


def test_object_attribute_flipping_on_a_compiled_method():
    class Net:
        def __init__(self):
            self.use_exp = True

        def forward(self, x):
            return x.exp() if self.use_exp else x * 5

    net = Net()

    def flip(i):
        net.use_exp = i % 2 == 0
    _alternate(net.forward, flip)


def test_module_training_flag_flipping():
    layer = tg.nn.Sequential(tg.nn.Linear(3, 3), tg.nn.BatchNorm1d(3))
    x = tg.tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    c = tg.compile(layer)
    for i in range(10):
        (layer.train() if i % 2 else layer.eval())
        with tg.no_grad():
            c(x)
    assert c.stats.traces == 2 and c.stats.eager_calls == 0, c.stats


def test_scalar_argument_alternating():
    c = _alternate(lambda x, k: x * k, lambda i: None,
                   args=lambda i: (tg.ones(3, requires_grad=True), 2.0 if i % 2 else 3.0))
    assert c.stats.cache_hits == 10


def test_nan_scalar_argument_alternating_does_not_retrace():
    _alternate(lambda x, k: x + k, lambda i: None,
               args=lambda i: (tg.ones(3, requires_grad=True), math.nan if i % 2 else 1.0))


def test_negative_zero_alternating_keeps_two_paths():
    _alternate(lambda x, k: 1 / (x * k), lambda i: None,
               args=lambda i: (tg.ones(3, requires_grad=True), -0.0 if i % 2 else 0.0))


def test_grad_mode_alternating():
    c = tg.compile(lambda x: (x * 2).exp())
    x = tg.ones(3, requires_grad=True)
    for i in range(10):
        if i % 2:
            with tg.no_grad():
                y = c(x)
            assert not y.requires_grad
        else:
            y = c(x)
            assert y.requires_grad
    assert c.stats.traces == 2 and c.stats.eager_calls == 0, c.stats


def test_a_data_dependent_branch_alternating():
    def f(x):
        return x * 2 if x.sum() > 0 else -x
    _alternate(f, lambda i: None,
               args=lambda i: (tg.tensor([1.0, 2.0, 3.0]) * (1 if i % 2 else -1),))
