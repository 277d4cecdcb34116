"""Issue 10, family 6: `tg.compile(module)` is itself an `nn.Module` (as `torch.compile`'s
result is): it nests in containers, its forward hooks run, and `state_dict`, `train()`/
`eval()`, `parameters()` pass through to the original; a model with a compiled submodule
trains like the eager model (tests/soundness_harness.py)."""
import numpy as np
import pytest

import tracegrad as tg
from soundness_harness import State, check_same, init_params


def _layer(env, seed=1):
    return init_params(env, env.lib.nn.Linear(3, 2), seed)


def test_compiled_module_is_a_module():
    layer = tg.nn.Linear(3, 2)
    assert isinstance(tg.compile(layer), tg.nn.Module)


def test_sequential_of_a_compiled_layer():
    def make(env):
        s = State()
        s.call = env.lib.nn.Sequential(env.compile(_layer(env)), env.lib.nn.Tanh())
        s.args = lambda i: ((env.randn(4, 3, seed=i),), {})
        return s
    check_same(None, make, torch=True)


def test_compiled_submodule_is_registered_and_trained():
    """A compiled submodule assigned as an attribute must be registered: its parameters are
    in `model.parameters()`, so the optimizer trains them (else compiled training silently
    leaves that layer untouched)."""
    def make(env):
        lib = env.lib

        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = env.compile(_layer(env))
                self.head = _layer(env, seed=2)

            def forward(self, x):
                return self.head(self.enc(x).tanh().repeat(1, 2)[:, :3])
        s = State(net=Net())
        s.opt = lib.optim.SGD(s.net.parameters(), lr=0.3)
        s.call = s.net
        s.args = lambda i: ((env.randn(4, 3, seed=i),), {})

        def backward(i, out):
            s.opt.zero_grad()
            (out ** 2).mean().backward()
            s.opt.step()
        s.backward = backward
        s.observe = lambda: sorted(n for n, _ in s.net.named_parameters())
        return s
    check_same(None, make, torch=True)


def test_forward_hook_registered_on_the_compiled_module():
    def make(env):
        s = State(log=[])
        s.call = env.compile(_layer(env))
        s.call.register_forward_hook(lambda m, a, out: out * 2)
        s.call.register_forward_pre_hook(lambda m, a: s.log.append(len(a)))
        s.args = lambda i: ((env.randn(4, 3, seed=i),), {})
        s.observe = lambda: list(s.log)
        return s
    check_same(None, make, torch=True)


def test_hooks_registered_on_the_original_module_before_compiling():
    def make(env):
        layer = _layer(env)
        layer.register_forward_hook(lambda m, a, out: out + 1)
        s = State(layer=layer)
        s.call = env.compile(layer)
        s.args = lambda i: ((env.randn(4, 3, seed=i),), {})
        return s
    check_same(None, make, torch=True)


def test_state_dict_and_load_state_dict_pass_through():
    layer = tg.nn.Linear(3, 2)
    c = tg.compile(layer)
    x = tg.ones(1, 3)
    c(x)
    sd = c.state_dict()
    keys = [k[len("_orig_mod."):] if k.startswith("_orig_mod.") else k for k in sd]
    assert keys == ["weight", "bias"]
    new = {k: tg.full(tuple(v.shape), 0.5) for k, v in sd.items()}
    c.load_state_dict(new)
    np.testing.assert_allclose(layer.weight.detach().numpy(), 0.5)
    np.testing.assert_allclose(c(x).detach().numpy(), layer(x).detach().numpy())
    np.testing.assert_allclose(c(x).detach().numpy(), np.full((1, 2), 2.0))


def test_train_and_eval_pass_through():
    def make(env):
        lib = env.lib
        net = lib.nn.Sequential(_layer(env), lib.nn.Dropout(0.5))
        s = State(net=net, modes=[])
        s.call = env.compile(net)
        s.args = lambda i: ((env.randn(4, 3, seed=i),), {})

        def before(i):
            (s.call.eval() if i % 2 == 0 else s.call.train())
            s.modes.append((s.call.training, net.training, net[1].training))
        s.before = before
        s.observe = lambda: list(s.modes)
        return s
    # eval-mode calls are deterministic; train-mode calls draw dropout masks from the RNG,
    # which compiled and eager must draw alike (tracegrad's own RNG: no PyTorch oracle)
    check_same(None, make, calls=4)


def test_parameters_of_the_compiled_module_are_the_originals():
    layer = tg.nn.Linear(3, 2)
    c = tg.compile(layer)
    assert [id(p) for p in c.parameters()] == [id(p) for p in layer.parameters()]
    assert [n for n, _ in c.named_parameters()] in (["weight", "bias"],
                                                    ["_orig_mod.weight", "_orig_mod.bias"])
    c.requires_grad_(False)
    assert not layer.weight.requires_grad
    c.zero_grad()


def test_optimizer_over_compiled_module_parameters_trains_it():
    def make(env):
        s = State(layer=_layer(env))
        s.call = env.compile(s.layer)
        s.opt = env.lib.optim.Adam(s.call.parameters(), lr=0.1)
        s.args = lambda i: ((env.randn(4, 3, seed=i),), {})

        def backward(i, out):
            s.opt.zero_grad()
            (out ** 2).mean().backward()
            s.opt.step()
        s.backward = backward
        return s
    check_same(None, make, torch=True)


def test_compiled_module_repr_and_children():
    torch = pytest.importorskip("torch")
    c = tg.compile(tg.nn.Sequential(tg.nn.Linear(3, 2), tg.nn.ReLU()))
    ref = torch.compile(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()))
    assert isinstance(ref, torch.nn.Module)
    assert len(list(c.modules())) >= 3
    assert "Linear(in_features=3, out_features=2, bias=True)" in repr(c)


def test_train_eval_of_a_module_a_compiled_function_closes_over():
    """`model.eval()` between calls of a compiled function that reads the model from its
    closure (not compiled as a module, so not in the entry key): the training flags are
    guarded state (found in review: dropout stayed on after eval(), silently)."""
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Dropout(0.5), tg.nn.BatchNorm1d(8),
                             tg.nn.Linear(8, 2))

    def f(x):
        return model(x).sum()
    c = tg.compile(f)
    x = tg.randn(6, 4)
    for mode in ["train", "eval", "train", "eval", "eval", "train"]:
        getattr(model, mode)()
        state = [b.detach().numpy().copy() for b in model.buffers()]
        tg.manual_seed(7)
        want = f(x).item()
        for b, s in zip(model.buffers(), state):     # undo eager's running-stat update
            with tg.no_grad():
                b.copy_(tg.tensor(s))
        tg.manual_seed(7)
        assert c(x).item() == want, mode
    assert c.stats.traces == 2          # one path per mode; flipping back re-uses it


def test_private_attributes_of_modules_are_guarded_state():
    """`self._scale` (an underscore attribute a forward reads) is state like `self.scale`,
    for a function closing over the module and for the compiled module alike (found in
    review: underscore attributes of modules were skipped, silently stale)."""
    class Scaled(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tg.nn.Linear(3, 2)
            self._scale = 2.0
            self._mask = tg.ones(2)

        def forward(self, x):
            return self.lin(x) * self._scale * self._mask

    m = Scaled()
    f = tg.compile(lambda x: m(x).sum())
    cm = tg.compile(m)
    x = tg.randn(4, 3)
    for scale, mask in [(2.0, None), (5.0, None), (5.0, tg.tensor([1.0, 0.0])), (2.0, None)]:
        m._scale = scale
        if mask is not None:
            m._mask = mask
        want = m(x).sum().item()
        assert f(x).item() == want and cm(x).sum().item() == want
