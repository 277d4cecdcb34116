"""`tg.compile(module)` is itself an `nn.Module` (compiler/module.py), as in PyTorch."""
import numpy as np
import pytest

import tracegrad as tg

nn = tg.nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)
        self.register_buffer("shift", tg.full((3,), 0.5))
        self.note = "plain attribute"

    def forward(self, x):
        return self.fc2(tg.tanh(self.fc1(x))) + self.shift


def _pair():
    tg.manual_seed(0)
    a = Net()
    b = Net()
    b.load_state_dict(a.state_dict())
    return a, b


def _run(m, x):
    out = m(x)
    out.pow(2).sum().backward()
    return out.detach().numpy(), [p.grad.numpy().copy() for p in m.parameters()]


def test_is_a_module_with_passthrough_surface():
    eager, orig = _pair()
    c = tg.compile(orig)
    assert isinstance(c, nn.Module) and c._orig_mod is orig
    assert [n for n, _ in c.named_parameters()] == [n for n, _ in orig.named_parameters()]
    assert all(p is q for p, q in zip(c.parameters(), orig.parameters()))
    assert list(c.state_dict()) == list(orig.state_dict()) == [
        "shift", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert c.note == "plain attribute" and c.fc1 is orig.fc1 and c.shift is orig.shift
    c.note = "changed"                       # public attributes are written to the original
    assert orig.note == "changed"
    assert [type(m).__name__ for m in c.children()] == ["Net"]
    assert "Linear(in_features=4" in repr(c)


def test_compiled_equals_eager_values_and_grads_over_calls():
    eager, orig = _pair()
    c = tg.compile(orig)
    rng = np.random.default_rng(1)
    for _ in range(4):
        x = tg.tensor(rng.standard_normal((5, 4)).astype(np.float32))
        eager.zero_grad()
        c.zero_grad()
        oe, ge = _run(eager, x)
        oc, gc = _run(c, x)
        np.testing.assert_allclose(oc, oe, rtol=1e-5, atol=1e-6)
        for a, b in zip(gc, ge):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert c.stats.traces == 1 and c.stats.cache_hits == 3
    assert len(c.programs) == 1
    assert "guard" in c.explain().lower() or "graph" in c.explain()


def test_state_dict_roundtrip_and_load_state_dict():
    eager, orig = _pair()
    c = tg.compile(orig)
    x = tg.ones(2, 4)
    before = c(x).detach().numpy()
    sd = {k: v.clone() for k, v in c.state_dict().items()}
    with tg.no_grad():
        for p in orig.parameters():
            p.mul_(0.0)
    assert not np.allclose(c(x).detach().numpy(), before)
    res = c.load_state_dict(sd)
    assert list(res.missing_keys) == [] and list(res.unexpected_keys) == []
    np.testing.assert_allclose(c(x).detach().numpy(), before, rtol=1e-6)
    plain = Net()
    plain.load_state_dict(c.state_dict())    # a compiled checkpoint loads into a plain module
    np.testing.assert_allclose(plain(x).detach().numpy(), before, rtol=1e-6)
    with pytest.raises(RuntimeError, match="Missing key"):
        c.load_state_dict({"fc1.weight": sd["fc1.weight"]})


def test_train_eval_flip_the_original_and_select_paths():
    tg.manual_seed(0)
    orig = nn.Sequential(nn.Linear(4, 6), nn.Dropout(0.5), nn.Linear(6, 2))
    c = tg.compile(orig)
    x = tg.ones(3, 4)
    assert c.training and orig[1].training
    assert c.eval() is c
    assert not c.training and not orig.training and not orig[1].training
    e1 = c(x).detach().numpy()
    np.testing.assert_allclose(e1, orig(x).detach().numpy(), rtol=1e-6)
    c.train()
    assert orig[1].training and c.training
    tg.manual_seed(5)
    t1 = c(x).detach().numpy()
    tg.manual_seed(5)
    np.testing.assert_allclose(t1, orig(x).detach().numpy(), rtol=1e-6)
    orig.eval()                              # flipping the original shows through
    assert not c.training
    np.testing.assert_allclose(c(x).detach().numpy(), e1, rtol=1e-6)
    assert c.stats.traces == 2


def test_sequential_containing_a_compiled_layer():
    tg.manual_seed(0)
    layer = nn.Linear(3, 4)
    seq_c = nn.Sequential(tg.compile(layer), nn.ReLU(), nn.Linear(4, 1))
    tg.manual_seed(0)
    seq_e = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    seq_e.load_state_dict(seq_c.state_dict())
    assert list(seq_c.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert [n for n, _ in seq_c.named_parameters()] == list(seq_c.state_dict())
    rng = np.random.default_rng(2)
    opt_c = tg.optim.SGD(seq_c.parameters(), lr=0.1)
    opt_e = tg.optim.SGD(seq_e.parameters(), lr=0.1)
    for _ in range(4):
        x = tg.tensor(rng.standard_normal((6, 3)).astype(np.float32))
        outs = []
        for seq, opt in ((seq_e, opt_e), (seq_c, opt_c)):
            opt.zero_grad()
            loss = seq(x).pow(2).mean()
            loss.backward()
            opt.step()
            outs.append((loss.item(), [p.detach().numpy().copy() for p in seq.parameters()]))
        assert outs[0][0] == pytest.approx(outs[1][0], rel=1e-6)
        for a, b in zip(outs[0][1], outs[1][1]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert seq_c[0].stats.cache_hits == 3
    seq_c.load_state_dict(seq_e.state_dict())
    seq_c.double()
    assert layer.weight.dtype == tg.float64


def test_hooks_on_the_wrapper_run_on_every_call():
    eager, orig = _pair()
    c = tg.compile(orig)
    seen = []
    c.register_forward_pre_hook(lambda m, args: seen.append(("pre", m is c)))
    h = c.register_forward_hook(lambda m, args, out: out * 2)
    x = tg.ones(2, 4)
    for _ in range(3):
        np.testing.assert_allclose(c(x).detach().numpy(), 2 * eager(x).detach().numpy(),
                                   rtol=1e-6)
    assert seen == [("pre", True)] * 3
    h.remove()
    np.testing.assert_allclose(c(x).detach().numpy(), eager(x).detach().numpy(), rtol=1e-6)


def test_hooks_on_the_original_run_including_ones_added_later():
    eager, orig = _pair()
    c = tg.compile(orig)
    x = tg.ones(2, 4)
    c(x)
    h1 = orig.register_forward_hook(lambda m, args, out: out + 1)
    h2 = orig.fc1.register_forward_pre_hook(lambda m, args: (args[0] * 3,))
    eager.register_forward_hook(lambda m, args, out: out + 1)
    eager.fc1.register_forward_pre_hook(lambda m, args: (args[0] * 3,))
    for _ in range(3):
        np.testing.assert_allclose(c(x).detach().numpy(), eager(x).detach().numpy(),
                                   rtol=1e-6)
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(c(x).detach().numpy(), orig.forward(x).detach().numpy(),
                               rtol=1e-6)
    assert c.stats.traces == 2      # without the hooks, the first path fits again


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torch_compiled_modules_are_modules_too():
    torch = pytest.importorskip("torch")
    assert isinstance(torch.compile(torch.nn.Linear(2, 2)), torch.nn.Module)


def test_to_dot_of_a_compiled_module():
    graphviz = pytest.importorskip("graphviz")
    c = tg.compile(nn.Linear(2, 2))
    c(tg.ones(1, 2))
    assert isinstance(c.to_dot(), graphviz.Digraph)
    assert tg.viz.to_dot(c).source == c.to_dot().source


def test_hooks_of_the_original_run_eagerly_on_every_call_in_order():
    eager, orig = _pair()
    c = tg.compile(orig)
    order, acts = [], []
    c.register_forward_pre_hook(lambda m, a: order.append("wrapper pre"))
    orig.register_forward_pre_hook(lambda m, a: order.append("orig pre"))
    orig.register_forward_hook(lambda m, a, out: acts.append(out.detach().clone()))
    c.register_forward_hook(lambda m, a, out: order.append("wrapper post"))
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = tg.tensor(rng.standard_normal((2, 4)).astype(np.float32))
        c(x)
        np.testing.assert_allclose(acts[-1].numpy(), eager(x).detach().numpy(), rtol=1e-6)
    assert len(acts) == 3 and c.stats.traces == 1
    assert order == ["wrapper pre", "orig pre", "wrapper post"] * 3
