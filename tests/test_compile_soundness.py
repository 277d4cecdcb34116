"""Issue 10: compiled == eager on whole, realistic programs that mix the families tested one
by one in tests/test_soundness_*.py (effects, attributes, binding, state, outputs, modules),
and check mode (`tg.compile(fn, check=True)`) never letting a divergence pass silently.
Harness: tests/soundness_harness.py."""
import dataclasses

import numpy as np
import pytest

import tracegrad as tg
from soundness_harness import State, check_same, init_params


@dataclasses.dataclass
class StepOut:
    loss: object
    grad_norm: object


def _ste(env):
    class RoundSTE(env.lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, g):
            return g
    return RoundSTE


def _quant_net(env):
    lib, ste = env.lib, _ste(env)

    class QuantNet(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = lib.nn.Linear(4, 8)
            self.fc2 = lib.nn.Linear(8, 1)
            self.levels = 4.0

        def forward(self, x):
            h = self.fc1(x).tanh()
            h = ste.apply(h * self.levels) / self.levels
            return self.fc2(h)
    return init_params(env, QuantNet())


def test_quantization_aware_training_step():
    """A training step written as users write it: keyword arguments, a straight-through
    estimator, backward and a hand-written SGD update reading `.grad`, a dataclass result,
    and a plain attribute (`levels`) changed between steps."""
    def make(env):
        lib = env.lib
        s = State(net=_quant_net(env))

        def train_step(batch, target, *, lr):
            for p in s.net.parameters():
                p.grad = None
            loss = ((s.net(batch) - target) ** 2).mean()
            loss.backward()
            norm = sum((p.grad ** 2).sum() for p in s.net.parameters()).sqrt()
            with lib.no_grad():
                for p in s.net.parameters():
                    p -= lr * p.grad
            return StepOut(loss.detach(), norm)
        s.fn = train_step

        def args(i):
            b, t = env.randn(6, 4, seed=i), env.randn(6, 1, seed=20 + i)
            return ((), {"target": t, "batch": b, "lr": 0.1}) if i % 2 else ((b, t), {"lr": 0.1})
        s.args = args
        s.before = lambda i: setattr(s.net, "levels", 4.0 if i < 3 else 8.0)
        return s
    check_same(None, make, calls=5, torch=True)


def test_compiled_model_with_hooks_temperature_and_eval():
    """`tg.compile(model)` used as the model: a forward hook that logs and rescales, a
    temperature attribute set between calls, eval()/train() through the compiled module, and
    an optimizer built from the compiled module's parameters."""
    def make(env):
        lib = env.lib

        class Classifier(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.body = lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.ReLU(),
                                              lib.nn.Linear(6, 3))
                self.temperature = 1.0

            def forward(self, x):
                return (self.body(x) / self.temperature).log_softmax(dim=-1)

        s = State(model=init_params(env, Classifier()), log=[])
        s.call = env.compile(s.model)
        s.call.register_forward_hook(lambda m, a, out: s.log.append(tuple(out.shape)))
        s.opt = lib.optim.SGD(s.call.parameters(), lr=0.2)
        s.args = lambda i: ((env.randn(5, 4, seed=i),), {})

        def before(i):
            s.model.temperature = [1.0, 2.0, 2.0, 0.5, 1.0][i]
            (s.call.eval() if i == 3 else s.call.train())

        def backward(i, out):
            s.opt.zero_grad()
            (-out[:, 0]).mean().backward()
            s.opt.step()
        s.before, s.backward = before, backward
        s.observe = lambda: list(s.log)
        return s
    check_same(None, make, calls=5, torch=True)


def test_gradient_penalty_with_hooks_and_retain_grad():
    """WGAN-GP style: autograd.grad with create_graph inside, a hook clipping the critic's
    input gradient, retain_grad on the interpolate; `.grad` of everything compared."""
    def make(env):
        lib = env.lib
        s = State(critic=init_params(env, lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(),
                                                           lib.nn.Linear(4, 1))))

        def gp(real, fake, alpha):
            mix = alpha * real + (1 - alpha) * fake
            mix.retain_grad()
            mix.register_hook(lambda g: g.clamp(-1.0, 1.0))
            score = s.critic(mix).sum()
            g, = lib.autograd.grad(score, mix, create_graph=True)
            penalty = ((g.norm(dim=1) - 1) ** 2).mean()
            return score + 10 * penalty, mix
        s.fn = gp
        s.args = lambda i: ((env.randn(2, 3, seed=i), env.randn(2, 3, seed=10 + i,
                                                                  requires_grad=True),
                             0.3), {})
        return s
    check_same(None, make, calls=4, torch=True)


ACTIVATION = tg.relu


def _global_act(x):
    return ACTIVATION(x) * 2


def test_check_mode_turns_a_divergence_into_an_error_or_agrees():
    """`check=True` runs every call compiled and eagerly: a stale global is either seen
    (results equal eager) or raises `tg.CompileMismatchError`, never a silent difference."""
    global ACTIVATION
    c = tg.compile(_global_act, check=True)
    x = tg.tensor([-1.0, 0.5, 2.0])
    try:
        c(x)
        ACTIVATION = tg.tanh
        try:
            got = c(x)
        except tg.CompileMismatchError as e:
            assert "output" in str(e).lower()
            return
        np.testing.assert_allclose(got.numpy(), _global_act(x).numpy(), rtol=1e-6)
    finally:
        ACTIVATION = tg.relu


def test_check_mode_by_environment_variable(monkeypatch):
    """Under TRACEGRAD_CHECK=1 a hook registered inside must run on every call (check mode
    may run it once more on its eager clone) and gradients stay right, or the mismatch is
    reported."""
    monkeypatch.setenv("TRACEGRAD_CHECK", "1")
    log = []

    def f(x):
        h = x * 2
        h.register_hook(lambda g: log.append(1) or g * 3)
        return h.sum()
    c = tg.compile(f)
    for k in range(3):
        x = tg.ones(3, requires_grad=True)
        try:
            c(x).backward()
        except tg.CompileMismatchError:
            return
        np.testing.assert_allclose(x.grad.numpy(), np.full(3, 6.0))
        assert len(log) >= k + 1


def test_compile_mismatch_error_is_a_runtime_error():
    err = getattr(tg, "CompileMismatchError", None)
    if err is None:
        pytest.fail("tg.CompileMismatchError is missing")
    assert issubclass(err, RuntimeError)
