"""tracegrad.nn against PyTorch: modules, layers, losses, functional and init.

Differential tests copy identical weights into a torch model and a tracegrad model (through
`state_dict`), then compare forward values, gradients and buffers. Tests that need torch
skip without it; the rest check against numpy references and documented semantics.
"""
import copy
import math
from collections import OrderedDict

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn
from tracegrad.nn import functional as F
from tracegrad.nn import init


def _torch():
    return pytest.importorskip("torch")


def _np(t):
    return np.array(t.detach().numpy())


def sync_to_torch(g_mod, t_mod):
    """Load tracegrad module `g_mod`'s state into torch module `t_mod`."""
    torch = _torch()
    t_mod.load_state_dict({k: torch.from_numpy(_np(v)) for k, v in g_mod.state_dict().items()})


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol)


def grads_match(g_mod, t_mod, rtol=1e-5, atol=1e-6):
    gp, tp = dict(g_mod.named_parameters()), dict(t_mod.named_parameters())
    assert list(gp) == list(tp)
    for name in gp:
        if tp[name].grad is None:
            assert gp[name].grad is None, name
        else:
            close(gp[name].grad, tp[name].grad, rtol, atol)


# ---------------- Parameter ----------------
class TestParameter:
    def test_is_leaf_tensor_requiring_grad(self):
        p = nn.Parameter(tg.ones(2, 3))
        assert isinstance(p, tg.Tensor) and isinstance(p, nn.Parameter)
        assert p.is_leaf and p.requires_grad and p.grad_fn is None
        assert not nn.Parameter(tg.ones(2), requires_grad=False).requires_grad

    def test_ops_return_plain_tensors_and_grads_accumulate(self):
        p = nn.Parameter(tg.tensor([1.0, 2.0]))
        y = (p * p).sum()
        assert type(p * 2) is tg.Tensor
        y.backward()
        np.testing.assert_allclose(p.grad.numpy(), [2.0, 4.0])

    def test_shares_storage_with_source(self):
        t = tg.zeros(3)
        p = nn.Parameter(t)
        with tg.no_grad():
            p.add_(1.0)
        np.testing.assert_allclose(t.numpy(), [1.0, 1.0, 1.0])

    def test_integer_parameter_refused(self):
        with pytest.raises(RuntimeError):
            nn.Parameter(tg.tensor([1, 2]))

    def test_repr_matches_torch(self):
        torch = _torch()
        data = [[1.5, -2.0], [0.25, 3.0]]
        assert repr(nn.Parameter(tg.tensor(data))) == repr(torch.nn.Parameter(torch.tensor(data)))
        assert repr(nn.Parameter(tg.tensor(data), requires_grad=False)) == \
            repr(torch.nn.Parameter(torch.tensor(data), requires_grad=False))

    def test_deepcopy_is_independent(self):
        p = nn.Parameter(tg.tensor([1.0, 2.0]))
        q = copy.deepcopy(p)
        assert isinstance(q, nn.Parameter) and q.requires_grad
        with tg.no_grad():
            q.mul_(3.0)
        np.testing.assert_allclose(p.detach().numpy(), [1.0, 2.0])


# ---------------- Module mechanics ----------------
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.act = nn.Tanh()
        self.register_buffer("scale", tg.ones(4))
        self.register_buffer("cache", tg.zeros(1), persistent=False)

    def forward(self, x):
        return self.act(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Sequential(nn.Linear(4, 2), nn.ReLU())
        self.alpha = nn.Parameter(tg.tensor(0.5))

    def forward(self, x):
        return self.head(self.block(x)) * self.alpha


class TestModule:
    def test_registration_and_names(self):
        net = Net()
        assert [n for n, _ in net.named_parameters()] == [
            "alpha", "block.fc.weight", "block.fc.bias", "head.0.weight", "head.0.bias"]
        assert [n for n, _ in net.named_buffers()] == ["block.scale", "block.cache"]
        assert [n for n, _ in net.named_children()] == ["block", "head"]
        assert [n for n, _ in net.named_modules()] == [
            "", "block", "block.fc", "block.act", "head", "head.0", "head.1"]
        assert len(list(net.modules())) == 7
        assert [n for n, _ in net.named_parameters(prefix="m", recurse=False)] == ["m.alpha"]
        assert list(net.parameters(recurse=False)) == [net.alpha]

    def test_names_match_torch(self):
        torch = _torch()
        t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                                torch.nn.Sequential(torch.nn.Linear(4, 2)))
        g = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Sequential(nn.Linear(4, 2)))
        assert [n for n, _ in g.named_parameters()] == [n for n, _ in t.named_parameters()]
        assert [n for n, _ in g.named_buffers()] == [n for n, _ in t.named_buffers()]
        assert list(g.state_dict()) == list(t.state_dict())
        assert [n for n, _ in g.named_modules()] == [n for n, _ in t.named_modules()]

    def test_shared_parameters_listed_once(self):
        lin = nn.Linear(2, 2)
        seq = nn.Sequential(lin, nn.ReLU(), lin)
        assert len(list(seq.parameters())) == 2
        assert len(list(seq.named_parameters(remove_duplicate=False))) == 4

    def test_attribute_lookup_and_reassignment(self):
        net = Net()
        assert isinstance(net.block.fc, nn.Linear)
        net.alpha = None
        assert "alpha" in net._parameters and net.alpha is None
        with pytest.raises(TypeError, match="cannot assign"):
            net.block.fc.weight = tg.ones(4, 3)          # a plain tensor is not a Parameter
        with pytest.raises(AttributeError, match="has no attribute 'nope'"):
            net.nope
        net.extra = nn.Parameter(tg.zeros(1))
        assert "extra" in dict(net.named_parameters())
        del net.extra
        assert "extra" not in dict(net.named_parameters())

    def test_registration_errors(self):
        m = nn.Module()
        with pytest.raises(KeyError):
            m.register_buffer("a.b", tg.zeros(1))
        with pytest.raises(TypeError):
            m.register_buffer("b", [1, 2])
        with pytest.raises(TypeError):
            m.register_parameter("p", tg.zeros(1))
        with pytest.raises(ValueError, match="non-leaf"):
            m.register_parameter("p", _non_leaf())
        with pytest.raises(TypeError):
            m.add_module("c", 3)

        class Early(nn.Module):
            def __init__(self):
                self.w = nn.Parameter(tg.zeros(1))
        with pytest.raises(AttributeError, match="before Module.__init__"):
            Early()

    def test_train_eval_propagate(self):
        net = Net()
        assert all(m.training for m in net.modules())
        assert net.eval() is net
        assert not any(m.training for m in net.modules())
        net.train()
        assert all(m.training for m in net.modules())
        net.head.train(False)
        assert net.training and not net.head[0].training
        with pytest.raises(ValueError):
            net.train("yes")

    def test_requires_grad_(self):
        net = Net()
        assert net.requires_grad_(False) is net
        assert not any(p.requires_grad for p in net.parameters())
        net.requires_grad_()
        assert all(p.requires_grad for p in net.parameters())

    def test_zero_grad(self):
        net = Net()
        net(tg.randn(5, 3)).sum().backward()
        assert all(p.grad is not None for p in net.parameters())
        net.zero_grad(set_to_none=False)
        for p in net.parameters():
            assert p.grad is not None and not p.grad.requires_grad
            assert float(p.grad.abs().sum()) == 0.0
        net.zero_grad()
        assert all(p.grad is None for p in net.parameters())

    def test_apply_visits_children_first(self):
        net = Net()
        seen = []
        assert net.apply(lambda m: seen.append(type(m).__name__)) is net
        assert seen == ["Linear", "Tanh", "Block", "Linear", "ReLU", "Sequential", "Net"]

    def test_call_runs_forward_and_hooks(self):
        lin = nn.Linear(2, 2)
        calls = []
        h = lin.register_forward_hook(lambda m, args, out: calls.append(out.shape))
        lin(tg.ones(3, 2))
        h.remove()
        lin(tg.ones(3, 2))
        assert calls == [(3, 2)]
        with pytest.raises(NotImplementedError):
            nn.Module()(1)

    def test_deepcopy_gives_independent_module(self):
        net = Net()
        twin = copy.deepcopy(net)
        x = tg.randn(2, 3)
        close(net(x), twin(x), 0, 0)
        assert twin.block.fc.weight is not net.block.fc.weight
        assert isinstance(twin.block.fc.weight, nn.Parameter)
        with tg.no_grad():
            twin.block.fc.weight.add_(1.0)
        assert not np.allclose(_np(net.block.fc.weight), _np(twin.block.fc.weight))

    def test_double_converts_params_and_buffers_in_place(self):
        net = Net()
        w = net.block.fc.weight
        net.double()
        assert net.block.fc.weight is w and w.dtype is tg.float64
        assert net.block.scale.dtype is tg.float64
        assert net(tg.randn(2, 3, dtype=tg.float64)).dtype is tg.float64


def _non_leaf():
    p = nn.Parameter(tg.ones(1))
    q = p * 2
    q.__class__ = nn.Parameter           # a Parameter-typed tensor that has a grad_fn
    return q


# ---------------- state_dict ----------------
class TestStateDict:
    def test_contents_are_detached_aliases(self):
        net = Net()
        sd = net.state_dict()
        # own parameters, then own persistent buffers, then children; `cache` is omitted
        assert list(sd) == ["alpha", "block.scale", "block.fc.weight", "block.fc.bias",
                            "head.0.weight", "head.0.bias"]
        w = sd["block.fc.weight"]
        assert not w.requires_grad and type(w) is tg.Tensor
        with tg.no_grad():
            net.block.fc.weight.add_(1.0)
        close(w, net.block.fc.weight)                    # shares storage
        assert net.state_dict(keep_vars=True)["alpha"] is net.alpha

    def test_round_trip(self):
        a, b = Net(), Net()
        x = tg.randn(4, 3)
        assert not np.allclose(_np(a(x)), _np(b(x)))
        w_before = b.block.fc.weight
        v0 = w_before._version
        res = b.load_state_dict(a.state_dict())
        assert repr(res) == "<All keys matched successfully>"
        assert b.block.fc.weight is w_before and w_before._version > v0   # copied in place
        close(a(x), b(x), 0, 0)

    def test_strict_errors_match_torch(self):
        torch = _torch()
        g, t = nn.Linear(3, 2), torch.nn.Linear(3, 2)
        bad = {"weight": np.zeros((2, 3), np.float32), "extra": np.zeros(1, np.float32)}
        with pytest.raises(RuntimeError) as eg:
            g.load_state_dict({k: tg.tensor(v) for k, v in bad.items()})
        with pytest.raises(RuntimeError) as et:
            t.load_state_dict({k: torch.tensor(v) for k, v in bad.items()})
        assert str(eg.value) == str(et.value)
        assert 'Missing key(s) in state_dict: "bias"' in str(eg.value)
        assert 'Unexpected key(s) in state_dict: "extra"' in str(eg.value)

    def test_size_mismatch_matches_torch(self):
        torch = _torch()
        g, t = nn.Linear(3, 2), torch.nn.Linear(3, 2)
        with pytest.raises(RuntimeError) as eg:
            g.load_state_dict({"weight": tg.zeros(3, 3), "bias": tg.zeros(2)})
        with pytest.raises(RuntimeError) as et:
            t.load_state_dict({"weight": torch.zeros(3, 3), "bias": torch.zeros(2)})
        assert str(eg.value) == str(et.value)

    def test_non_strict_reports_keys(self):
        net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
        sd = net.state_dict()
        del sd["1.bias"]
        sd["2.weight"] = tg.zeros(1)
        res = net.load_state_dict(sd, strict=False)
        assert res.missing_keys == ["1.bias"] and res.unexpected_keys == ["2.weight"]

    def test_load_from_torch_and_batchnorm_buffers(self):
        torch = _torch()
        t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
        t(torch.randn(8, 3))                               # move running stats
        g = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
        g.load_state_dict(t.state_dict())
        for (k, v), (k2, v2) in zip(g.state_dict().items(), t.state_dict().items()):
            assert k == k2
            np.testing.assert_array_equal(_np(v), v2.numpy())
        assert g[1].num_batches_tracked.dtype is tg.int64 and int(g[1].num_batches_tracked) == 1


# ---------------- repr ----------------
def test_repr_matches_torch():
    torch = _torch()
    tn = torch.nn
    pairs = [
        (nn.Sequential(nn.Linear(3, 4), nn.ReLU()), tn.Sequential(tn.Linear(3, 4), tn.ReLU())),
        (nn.Sequential(nn.Linear(3, 4, bias=False), nn.Dropout(0.2), nn.BatchNorm1d(4),
                       nn.Sequential(nn.Tanh(), nn.Sigmoid()), nn.Embedding(5, 2, padding_idx=-1)),
         tn.Sequential(tn.Linear(3, 4, bias=False), tn.Dropout(0.2), tn.BatchNorm1d(4),
                       tn.Sequential(tn.Tanh(), tn.Sigmoid()), tn.Embedding(5, 2, padding_idx=-1))),
        (nn.BatchNorm1d(3, momentum=None, affine=False), tn.BatchNorm1d(3, momentum=None,
                                                                       affine=False)),
        (nn.CrossEntropyLoss(label_smoothing=0.1), tn.CrossEntropyLoss(label_smoothing=0.1)),
        (nn.MSELoss(), tn.MSELoss()),
        (nn.ModuleList([nn.GELU(), nn.LeakyReLU(0.2)]),
         tn.ModuleList([tn.GELU(), tn.LeakyReLU(0.2)])),
    ]
    for g, t in pairs:
        assert repr(g) == repr(t)
    assert repr(nn.Sequential(nn.Linear(3, 4), nn.ReLU())) == (
        "Sequential(\n  (0): Linear(in_features=3, out_features=4, bias=True)\n  (1): ReLU()\n)")


# ---------------- Sequential ----------------
def test_sequential_container_protocol():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b)
    assert len(seq) == 2 and seq[0] is a and seq[-1] is b and list(seq) == [a, b]
    seq.append(c)
    assert seq[2] is c and list(seq.state_dict())[-1] == "2.bias"
    sub = seq[1:]
    assert isinstance(sub, nn.Sequential) and list(sub._modules) == ["1", "2"]
    with pytest.raises(IndexError):
        seq[3]
    named = nn.Sequential(OrderedDict([("enc", a), ("act", b)]))
    assert [n for n, _ in named.named_parameters()] == ["enc.weight", "enc.bias"]
    assert seq(tg.ones(4, 2)).shape == (4, 1)


# ---------------- Linear / MLP ----------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mlp_forward_backward_matches_torch(dtype):
    torch = _torch()
    tn = torch.nn
    gd, td = getattr(tg, dtype), getattr(torch, dtype)
    g = nn.Sequential(nn.Linear(5, 8, dtype=gd), nn.Tanh(), nn.Linear(8, 8, dtype=gd),
                      nn.ReLU(), nn.Linear(8, 3, dtype=gd), nn.Sigmoid())
    t = tn.Sequential(tn.Linear(5, 8), tn.Tanh(), tn.Linear(8, 8), tn.ReLU(),
                      tn.Linear(8, 3), tn.Sigmoid()).to(td)
    sync_to_torch(g, t)
    x = np.random.default_rng(0).standard_normal((7, 5)).astype(dtype)
    yg, yt = g(tg.tensor(x)), t(torch.tensor(x))
    tol = 1e-5 if dtype == "float32" else 1e-12
    close(yg, yt, tol, tol)
    (yg * yg).sum().backward()
    (yt * yt).sum().backward()
    grads_match(g, t, tol, tol)


def test_linear_init_distribution():
    tg.manual_seed(0)
    lin = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)          # kaiming_uniform(a=sqrt(5)) gives 1/sqrt(fan_in)
    w, b = _np(lin.weight), _np(lin.bias)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound
    assert np.abs(b).max() <= bound and w.dtype == np.float32
    tg.manual_seed(0)
    np.testing.assert_array_equal(_np(nn.Linear(400, 300).weight), w)     # reproducible


def test_linear_batched_and_1d_inputs():
    lin = nn.Linear(3, 2)
    x = tg.randn(4, 5, 3)
    ref = _np(x) @ _np(lin.weight).T + _np(lin.bias)
    np.testing.assert_allclose(_np(lin(x)), ref, rtol=1e-5)
    assert lin(tg.randn(3)).shape == (2,)


# ---------------- BatchNorm1d ----------------
@pytest.mark.parametrize("shape", [(8, 4), (6, 4, 5)])
@pytest.mark.parametrize("kw", [{}, {"momentum": None}, {"affine": False},
                                {"track_running_stats": False}, {"momentum": 0.3, "eps": 1e-3}])
def test_batchnorm_train_and_eval_match_torch(shape, kw):
    torch = _torch()
    g = nn.BatchNorm1d(4, dtype=tg.float64, **kw)
    t = torch.nn.BatchNorm1d(4, dtype=torch.float64, **kw)
    rng = np.random.default_rng(1)
    if g.weight is not None:
        with tg.no_grad():
            g.weight.copy_(tg.tensor(rng.uniform(0.5, 2, 4)))
            g.bias.copy_(tg.tensor(rng.standard_normal(4)))
    sync_to_torch(g, t)
    for _ in range(4):
        x = rng.standard_normal(shape) * 3 + 1
        xg, xt = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        yg, yt = g(xg), t(xt)
        close(yg, yt, 1e-10, 1e-10)
        up = rng.standard_normal(shape)
        (yg * tg.tensor(up)).sum().backward()
        (yt * torch.tensor(up)).sum().backward()
        close(xg.grad, xt.grad, 1e-9, 1e-10)
        grads_match(g, t, 1e-9, 1e-10)
    for (k, v), (k2, v2) in zip(g.state_dict().items(), t.state_dict().items()):
        assert k == k2
        np.testing.assert_allclose(_np(v), v2.numpy(), rtol=1e-12)
    g.eval()
    t.eval()
    x = rng.standard_normal(shape)
    close(g(tg.tensor(x)), t(torch.tensor(x)), 1e-10, 1e-10)


def test_batchnorm_running_stats_use_unbiased_variance():
    bn = nn.BatchNorm1d(2, momentum=0.5)
    x = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 7.0]], np.float32)
    bn(tg.tensor(x))
    np.testing.assert_allclose(_np(bn.running_mean), 0.5 * x.mean(0), rtol=1e-6)
    np.testing.assert_allclose(_np(bn.running_var), 0.5 + 0.5 * x.var(0, ddof=1), rtol=1e-6)
    assert int(bn.num_batches_tracked) == 1 and not bn.running_mean.requires_grad


def test_batchnorm_errors_and_eval_identity_at_init():
    bn = nn.BatchNorm1d(3)
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        bn(tg.randn(2, 3, 4, 5))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        bn(tg.randn(1, 3))
    bn.eval()
    x = tg.randn(1, 3)
    np.testing.assert_allclose(_np(bn(x)), _np(x) / math.sqrt(1 + 1e-5), rtol=1e-6)


# ---------------- Dropout ----------------
class TestDropout:
    def test_statistics_and_scaling(self):
        tg.manual_seed(0)
        p = 0.3
        x = tg.ones(200, 500)
        y = _np(nn.Dropout(p)(x))
        kept = y != 0
        assert abs(kept.mean() - (1 - p)) < 0.01
        np.testing.assert_allclose(y[kept], 1 / (1 - p), rtol=1e-6)
        assert abs(y.mean() - 1.0) < 0.02           # unbiased in expectation

    def test_gradient_is_the_mask_scaled(self):
        x = tg.randn(50, 40, requires_grad=True)
        y = F.dropout(x, 0.5)
        y.sum().backward()
        mask = _np(y) != 0
        np.testing.assert_allclose(x.grad.numpy(), mask * 2.0)

    def test_eval_identity_and_edge_probabilities(self):
        x = tg.randn(10, 10)
        d = nn.Dropout(0.5).eval()
        assert d(x) is x
        assert F.dropout(x, 0.5, training=False) is x
        assert F.dropout(x, 0.0) is x
        assert float(F.dropout(x, 1.0).abs().sum()) == 0.0
        for bad in (-0.1, 1.5):
            with pytest.raises(ValueError, match="dropout probability"):
                nn.Dropout(bad)
            with pytest.raises(ValueError):
                F.dropout(x, bad)

    def test_reproducible_with_manual_seed(self):
        x = tg.ones(100)
        tg.manual_seed(7)
        a = _np(F.dropout(x, 0.5))
        tg.manual_seed(7)
        np.testing.assert_array_equal(a, _np(F.dropout(x, 0.5)))


# ---------------- Embedding ----------------
class TestEmbedding:
    def test_lookup_and_grad_accumulation_match_torch(self):
        torch = _torch()
        g = nn.Embedding(6, 3)
        t = torch.nn.Embedding(6, 3)
        sync_to_torch(g, t)
        idx = [[1, 2, 1], [5, 1, 0]]
        yg, yt = g(tg.tensor(idx)), t(torch.tensor(idx))
        close(yg, yt, 0, 0)
        up = np.random.default_rng(0).standard_normal((2, 3, 3)).astype(np.float32)
        (yg * tg.tensor(up)).sum().backward()
        (yt * torch.tensor(up)).sum().backward()
        close(g.weight.grad, t.weight.grad)
        np.testing.assert_allclose(g.weight.grad.numpy()[1], up[0, 0] + up[0, 2] + up[1, 1],
                                   rtol=1e-6)

    def test_padding_idx_zero_row_and_no_grad(self):
        torch = _torch()
        g = nn.Embedding(5, 2, padding_idx=-2)
        assert g.padding_idx == 3 and np.all(_np(g.weight)[3] == 0)
        with tg.no_grad():
            g.weight[3] = tg.tensor([1.0, 1.0])          # padding row may hold a value
        t = torch.nn.Embedding(5, 2, padding_idx=3)
        sync_to_torch(g, t)
        idx = [3, 0, 3, 4]
        yg, yt = g(tg.tensor(idx)), t(torch.tensor(idx))
        close(yg, yt, 0, 0)
        (yg ** 2).sum().backward()
        (yt ** 2).sum().backward()
        close(g.weight.grad, t.weight.grad)
        assert np.all(g.weight.grad.numpy()[3] == 0)

    def test_errors_and_from_pretrained(self):
        with pytest.raises(AssertionError, match="Padding_idx"):
            nn.Embedding(3, 2, padding_idx=3)
        with pytest.raises(IndexError):
            nn.Embedding(3, 2)(tg.tensor([3]))
        w = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
        e = nn.Embedding.from_pretrained(w)
        assert not e.weight.requires_grad
        np.testing.assert_array_equal(_np(e(tg.tensor([1]))), [[3.0, 4.0]])


# ---------------- Losses ----------------
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_matches_torch(reduction):
    torch = _torch()
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    ag, at = tg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    lg = nn.MSELoss(reduction=reduction)(ag, tg.tensor(b))
    lt = torch.nn.MSELoss(reduction=reduction)(at, torch.tensor(b))
    close(lg, lt, 1e-12, 1e-14)
    lg.sum().backward()
    lt.sum().backward()
    close(ag.grad, at.grad, 1e-12, 1e-14)


def test_mse_loss_warns_on_broadcast_and_rejects_bad_reduction():
    with pytest.warns(UserWarning, match="target size"):
        F.mse_loss(tg.zeros(3, 2), tg.zeros(3, 1))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.mse_loss(tg.zeros(2), tg.zeros(2), reduction="avg")


CE_CASES = [dict(reduction=r, weight=w, ignore_index=ii, label_smoothing=ls)
            for r in ("mean", "sum", "none") for w in (False, True)
            for ii in (-100, 2) for ls in (0.0, 0.25)]


@pytest.mark.parametrize("case", CE_CASES, ids=lambda c: "-".join(map(str, c.values())))
@pytest.mark.parametrize("shape", [(6, 5), (3, 5, 4)])
def test_cross_entropy_matches_torch(case, shape):
    torch = _torch()
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    tshape = (shape[0],) + shape[2:]
    y = rng.integers(0, shape[1], tshape)
    y.flat[0] = 2                                    # make sure ignore_index=2 occurs
    w = rng.uniform(0.2, 2.0, shape[1])
    kw = dict(case)
    kg = dict(kw, weight=tg.tensor(w) if kw["weight"] else None)
    kt = dict(kw, weight=torch.tensor(w) if kw["weight"] else None)
    xg, xt = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    lg = nn.CrossEntropyLoss(**kg)(xg, tg.tensor(y))
    lt = torch.nn.CrossEntropyLoss(**kt)(xt, torch.tensor(y))
    close(lg, lt, 1e-10, 1e-12)
    up = rng.standard_normal(tuple(lt.shape))
    (lg * tg.tensor(up)).sum().backward()
    (lt * torch.tensor(up)).sum().backward()
    close(xg.grad, xt.grad, 1e-10, 1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_cross_entropy_probability_targets_and_unbatched(reduction, ls):
    torch = _torch()
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3))
    p = rng.dirichlet(np.ones(3), 4)
    w = rng.uniform(0.5, 1.5, 3)
    xg, xt = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    lg = F.cross_entropy(xg, tg.tensor(p), weight=tg.tensor(w), reduction=reduction,
                         label_smoothing=ls)
    lt = torch.nn.functional.cross_entropy(xt, torch.tensor(p), weight=torch.tensor(w),
                                           reduction=reduction, label_smoothing=ls)
    close(lg, lt, 1e-10, 1e-12)
    lg.sum().backward()
    lt.sum().backward()
    close(xg.grad, xt.grad, 1e-10, 1e-12)
    one = F.cross_entropy(tg.tensor(x[0]), tg.tensor(2), reduction=reduction,
                          label_smoothing=ls)
    ref = torch.nn.functional.cross_entropy(torch.tensor(x[0]), torch.tensor(2),
                                            reduction=reduction, label_smoothing=ls)
    close(one, ref, 1e-10, 1e-12)


def test_cross_entropy_all_ignored_is_nan_and_errors():
    x = tg.randn(3, 4)
    assert math.isnan(F.cross_entropy(x, tg.tensor([-100, -100, -100])).item())
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        F.cross_entropy(x, tg.tensor([0, 7, 1]))
    with pytest.raises(ValueError, match="batch_size"):
        F.cross_entropy(x, tg.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="label_smoothing"):
        F.cross_entropy(x, tg.tensor([0, 1, 2]), label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="weight tensor"):
        F.cross_entropy(x, tg.tensor([0, 1, 2]), weight=tg.ones(3))


def test_ignored_rows_do_not_poison_with_inf():
    x = tg.tensor([[0.0, -math.inf], [1.0, 2.0]], requires_grad=True)
    loss = F.nll_loss(x, tg.tensor([1, 0]), ignore_index=1)
    assert loss.item() == -1.0
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.0], [-1.0, 0.0]])


def test_nll_loss_matches_torch():
    torch = _torch()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 4))
    y = rng.integers(0, 4, 5)
    w = rng.uniform(0.5, 2, 4)
    for red in ("mean", "sum", "none"):
        close(nn.NLLLoss(weight=tg.tensor(w), reduction=red)(tg.tensor(x), tg.tensor(y)),
              torch.nn.NLLLoss(weight=torch.tensor(w), reduction=red)(torch.tensor(x),
                                                                       torch.tensor(y)),
              1e-12, 1e-14)


@pytest.mark.parametrize("make", [
    lambda m: m.nn.functional.cross_entropy(m.ones(3, 4, requires_grad=True),
                                            m.tensor([0, 3, 1])),
    lambda m: m.nn.functional.cross_entropy(m.ones(3, 4, 2, requires_grad=True),
                                            m.zeros(3, 2, dtype=m.int64), reduction="none"),
    lambda m: m.nn.functional.nll_loss(m.ones(3, 4, requires_grad=True), m.tensor([0, 3, 1]),
                                       reduction="sum"),
    lambda m: m.nn.functional.cross_entropy(m.ones(3, 4, requires_grad=True),
                                            m.tensor([0, 3, 1]), reduction="none"),
    lambda m: m.nn.functional.nll_loss(m.ones(3, 4, requires_grad=True), m.tensor([0, 3, 1]),
                                       reduction="none"),
    lambda m: m.nn.functional.mse_loss(m.ones(3, requires_grad=True), m.zeros(3)),
    lambda m: m.nn.functional.mse_loss(m.ones(3, requires_grad=True), m.zeros(3),
                                       reduction="none"),
])
def test_loss_node_and_printed_loss_match_torch(make):
    """`print(loss)` in a training loop shows the loss node, as PyTorch's does."""
    torch = _torch()
    lg, lt = make(tg), make(torch)
    assert lg.grad_fn.name() == lt.grad_fn.name()
    assert repr(lg) == repr(lt)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_and_mse_second_order_gradients(reduction, weighted):
    rng = np.random.default_rng(8)
    y = tg.tensor([0, 3, 2, 2])
    w = tg.tensor(rng.uniform(0.5, 2, 4)) if weighted else None

    def ce(x):                  # log_softmax makes the Hessian non-zero
        return F.cross_entropy(x, y, weight=w, ignore_index=2, reduction=reduction)

    def mse(x, t):
        return F.mse_loss(x, t.expand(4, 3), reduction=reduction)
    x = tg.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    t = tg.tensor(rng.standard_normal((1, 3)), requires_grad=True)
    assert tg.autograd.gradcheck(ce, (x,))
    assert tg.autograd.gradgradcheck(ce, (x,))
    x3 = tg.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    assert tg.autograd.gradcheck(mse, (x3, t))
    assert tg.autograd.gradgradcheck(mse, (x3, t))


def test_compiled_cross_entropy_equals_eager():
    rng = np.random.default_rng(9)
    w1 = tg.tensor(rng.standard_normal((5, 4)), requires_grad=True)

    def loss(x, y):
        return F.cross_entropy(x @ w1, y, ignore_index=1) + F.mse_loss(x @ w1, x[:, :4])
    cl = tg.compile(loss)
    for _ in range(2):
        x, y = tg.tensor(rng.standard_normal((6, 5))), tg.tensor(rng.integers(0, 4, 6))
        w1.grad = None
        lc = cl(x, y)
        lc.backward()
        gc = w1.grad.numpy().copy()
        w1.grad = None
        le = loss(x, y)
        le.backward()
        # (cse merges the two `x @ w1`, so the gradient sums in another order: ulps apart)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-13)
        np.testing.assert_allclose(gc, w1.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_loss_weight_is_a_buffer():
    ce = nn.CrossEntropyLoss(weight=tg.ones(3))
    assert list(ce.state_dict()) == ["weight"]


# ---------------- functional ----------------
@pytest.mark.parametrize("name,kw", [("gelu", {}), ("gelu", {"approximate": "tanh"}),
                                      ("leaky_relu", {}), ("leaky_relu", {"negative_slope": 0.2}),
                                      ("relu", {}), ("tanh", {}), ("sigmoid", {}),
                                      ("softmax", {"dim": 1}), ("log_softmax", {"dim": 0})])
def test_activation_values_and_grads_match_torch(name, kw):
    torch = _torch()
    x = np.random.default_rng(6).standard_normal((4, 5)) * 3
    x[0, 0] = 0.0
    xg, xt = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yg = getattr(F, name)(xg, **kw)
    yt = getattr(torch.nn.functional, name)(xt, **kw)
    close(yg, yt, 1e-12, 1e-14)
    up = np.random.default_rng(7).standard_normal((4, 5))
    (yg * tg.tensor(up)).sum().backward()
    (yt * torch.tensor(up)).sum().backward()
    close(xg.grad, xt.grad, 1e-12, 1e-14)


def test_gelu_second_order_gradcheck():
    x = tg.tensor(np.random.default_rng(8).standard_normal(5), dtype=tg.float64,
                  requires_grad=True)
    assert tg.autograd.gradcheck(lambda t: F.gelu(t), (x,))
    (g,) = tg.autograd.grad(F.gelu(x).sum(), x, create_graph=True)
    assert tg.autograd.gradcheck(lambda t: tg.autograd.grad(F.gelu(t).sum(), t,
                                                            create_graph=True)[0], (x,))
    assert g.requires_grad


def test_one_hot():
    t = tg.tensor([[0, 2], [1, 0]])
    oh = F.one_hot(t)
    assert oh.dtype is tg.int64 and oh.shape == (2, 2, 3)
    np.testing.assert_array_equal(oh.numpy(), np.eye(3, dtype=np.int64)[t.numpy()])
    assert F.one_hot(t, 5).shape == (2, 2, 5)
    with pytest.raises(RuntimeError, match="non-negative"):
        F.one_hot(tg.tensor([-1, 0]))
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(tg.tensor([3]), 3)
    with pytest.raises(RuntimeError, match="LongTensor"):
        F.one_hot(tg.tensor([1.0]))


def test_functional_linear_and_embedding():
    x, w, b = tg.randn(4, 3), tg.randn(2, 3), tg.randn(2)
    np.testing.assert_allclose(_np(F.linear(x, w, b)), _np(x) @ _np(w).T + _np(b), rtol=1e-5)
    np.testing.assert_allclose(_np(F.linear(x, w)), _np(x) @ _np(w).T, rtol=1e-5)
    table = tg.randn(4, 2)
    np.testing.assert_array_equal(_np(F.embedding(tg.tensor([3, 0]), table)),
                                  _np(table)[[3, 0]])


# ---------------- init ----------------
def test_calculate_gain_and_fans_match_torch():
    torch = _torch()
    ti = torch.nn.init
    for nl, param in [("linear", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                      ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None),
                      ("conv2d", None)]:
        assert init.calculate_gain(nl, param) == ti.calculate_gain(nl, param)
    for shape in [(3, 4), (8, 3, 5, 5)]:
        assert init._calculate_fan_in_and_fan_out(tg.empty(*shape)) == \
            ti._calculate_fan_in_and_fan_out(torch.empty(*shape))
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(tg.empty(3))


@pytest.mark.parametrize("fn,kw,bound_or_std", [
    (init.kaiming_uniform_, {}, ("u", math.sqrt(6 / 400))),    # a=0: gain sqrt(2)
    (init.kaiming_uniform_, {"a": math.sqrt(5)}, ("u", 1 / 20)),
    (init.kaiming_uniform_, {"mode": "fan_out", "nonlinearity": "relu"},
     ("u", math.sqrt(6 / 300))),
    (init.kaiming_normal_, {"nonlinearity": "relu"}, ("n", math.sqrt(2 / 400))),
    (init.xavier_uniform_, {"gain": 2.0}, ("u", 2 * math.sqrt(6 / 700))),
    (init.xavier_normal_, {}, ("n", math.sqrt(2 / 700))),
])
def test_random_initializers_follow_formulas(fn, kw, bound_or_std):
    w = nn.Parameter(tg.empty(300, 400))
    v0 = w._version
    assert fn(w, **kw) is w
    assert w.requires_grad and w.is_leaf and w._version > v0
    a = _np(w)
    kind, s = bound_or_std
    if kind == "u":
        assert np.abs(a).max() <= s and np.abs(a).max() > 0.99 * s
        assert abs(a.std() - s / math.sqrt(3)) < 0.02 * s
    else:
        assert abs(a.std() - s) < 0.02 * s and abs(a.mean()) < 0.02 * s


def test_simple_initializers():
    w = nn.Parameter(tg.empty(3, 3))
    assert init.constant_(w, 0.5) is w and np.all(_np(w) == 0.5)
    assert np.all(_np(init.zeros_(w)) == 0) and np.all(_np(init.ones_(w)) == 1)
    np.testing.assert_array_equal(_np(init.eye_(w)), np.eye(3))
    tg.manual_seed(3)
    u = _np(init.uniform_(tg.empty(1000), -2.0, 5.0))
    assert u.min() >= -2.0 and u.max() < 5.0 and abs(u.mean() - 1.5) < 0.3
    n = _np(init.normal_(tg.empty(4000), 3.0, 0.5))
    assert abs(n.mean() - 3.0) < 0.05 and abs(n.std() - 0.5) < 0.05
    with pytest.raises(ValueError, match="Mode"):
        init.kaiming_uniform_(tg.empty(2, 2), mode="fan_avg")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_is_one_node_with_exact_second_order(approximate):
    x = tg.tensor(np.linspace(-4, 4, 9), requires_grad=True)
    y = F.gelu(x, approximate=approximate)
    assert y.grad_fn.name() == "GeluBackward0"
    assert tg.autograd.gradcheck(lambda t: F.gelu(t, approximate=approximate), (x,))
    assert tg.autograd.gradgradcheck(lambda t: F.gelu(t, approximate=approximate), (x,))
    cg = tg.compile(lambda t: F.gelu(t, approximate=approximate).sum())
    g1, = tg.autograd.grad(cg(x), x)
    g2, = tg.autograd.grad(F.gelu(x, approximate=approximate).sum(), x)
    np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-14)


# ---------------- BatchNorm2d / BatchNorm3d ----------------
@pytest.mark.parametrize("dims", [2, 3])
def test_batchnorm_nd_trains_and_evaluates_like_torch(dims):
    """BatchNorm2d after a Conv2d (and BatchNorm3d): outputs, gradients and the running
    statistics through train and eval steps equal PyTorch's, compiled too."""
    torch = _torch()
    shape = (4, 3, 5, 6) if dims == 2 else (2, 3, 2, 4, 3)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(shape) * (k + 1) + k for k in range(3)]
    tcls, gcls = ((torch.nn.BatchNorm2d, nn.BatchNorm2d) if dims == 2
                  else (torch.nn.BatchNorm3d, nn.BatchNorm3d))
    t = tcls(3, momentum=0.2).double()
    for compiled in (False, True):
        g = gcls(3, momentum=0.2).to(tg.float64)
        run = tg.compile(g) if compiled else g
        t.load_state_dict(t.state_dict())
        tt = tcls(3, momentum=0.2).double()
        for k, x in enumerate(xs):
            training = k < 2
            g.train(training), tt.train(training)
            gx = tg.tensor(x, requires_grad=True)
            tx = torch.tensor(x, requires_grad=True)
            go, to = run(gx), tt(tx)
            (go * go).sum().backward()
            (to * to).sum().backward()
            np.testing.assert_allclose(_np(go), to.detach().numpy(), rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(_np(gx.grad), tx.grad.numpy(), rtol=1e-8, atol=1e-10)
            np.testing.assert_allclose(_np(g.weight.grad), tt.weight.grad.numpy(), rtol=1e-8)
            for name in ("running_mean", "running_var"):
                np.testing.assert_allclose(_np(getattr(g, name)),
                                           getattr(tt, name).numpy(), rtol=1e-12)
        assert int(g.num_batches_tracked) == 2


def test_batchnorm_nd_rejects_the_wrong_rank_like_torch():
    torch = _torch()
    for tcls, gcls, x in ((torch.nn.BatchNorm2d, nn.BatchNorm2d, np.zeros((2, 3, 4))),
                          (torch.nn.BatchNorm3d, nn.BatchNorm3d, np.zeros((2, 3, 4, 4)))):
        with pytest.raises(ValueError) as et:
            tcls(3)(torch.tensor(x))
        with pytest.raises(ValueError) as eg:
            gcls(3)(tg.tensor(x))
        assert str(eg.value) == str(et.value)
