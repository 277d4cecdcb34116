"""The nn additions against PyTorch: containers (ModuleDict, ParameterList, ParameterDict),
LayerNorm, SiLU, pooling, binary cross-entropy, scaled_dot_product_attention and
MultiheadAttention; plus GELU/Flatten/Embedding/Dropout spot checks.

Differential tests copy weights from a torch module into the tracegrad one by `state_dict`
and compare values, gradients, repr, state_dict keys, grad_fn names and error types. New
primitives are gradchecked in float64 to second order, and a model using every module is
compiled (`tracegrad.compile(model)`) and compared with eager execution over two calls.
"""
from collections import OrderedDict

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn
from tracegrad.autograd import gradcheck, gradgradcheck
from tracegrad.nn import functional as F


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _np(t):
    return np.array(t.detach().numpy())


def _pair(torch, a, grad=True):
    """The same float64 data as a tracegrad and a torch tensor."""
    return (tg.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad))


def _conv(torch, v):
    if isinstance(v, np.ndarray):
        return tg.tensor(v), torch.tensor(v)
    return v, v


def _copy(tm, m):
    """Load torch module `tm`'s state into tracegrad module `m`."""
    m.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


def _name(t):
    return type(t.grad_fn).__name__


def _same_fn(torch, name, args, kwargs=None, grad_args=(0,), check_grads=True, rng=None):
    """Call F.<name> in both libraries on numpy `args`; compare value, grad_fn, gradients.

    scaled_dot_product_attention is a composition here, one fused kernel in PyTorch: its
    grad_fn name is not compared."""
    rng = rng or np.random.default_rng(0)
    kwargs = kwargs or {}
    gs, ts = [], []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            g, t = _pair(torch, a, grad=i in grad_args)
        else:
            g, t = a, a
        gs.append(g)
        ts.append(t)
    gk = {k: _conv(torch, v)[0] for k, v in kwargs.items()}
    tk = {k: _conv(torch, v)[1] for k, v in kwargs.items()}
    y = getattr(F, name)(*gs, **gk)
    ty = getattr(torch.nn.functional, name)(*ts, **tk)
    np.testing.assert_allclose(_np(y), ty.detach().numpy(), rtol=1e-7, atol=1e-9)
    if name != "scaled_dot_product_attention":
        assert _name(y) == type(ty.grad_fn).__name__
    if check_grads:
        w = rng.standard_normal(tuple(ty.shape))
        (y * tg.tensor(w)).sum().backward()
        (ty * torch.tensor(w)).sum().backward()
        for i in grad_args:
            np.testing.assert_allclose(_np(gs[i].grad), ts[i].grad.numpy(), rtol=1e-7,
                                       atol=1e-9)
    return y


# ---------------- containers ----------------

class TestContainers:
    def test_module_dict_registers_in_order_like_torch(self, torch):
        m = nn.ModuleDict({"b": nn.Linear(2, 3), "a": nn.ReLU()})
        m["c"] = nn.Linear(3, 1)
        tm = torch.nn.ModuleDict({"b": torch.nn.Linear(2, 3), "a": torch.nn.ReLU()})
        tm["c"] = torch.nn.Linear(3, 1)
        assert list(m) == list(tm) == ["b", "a", "c"]
        assert list(m.state_dict()) == list(tm.state_dict())
        assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
        assert repr(m) == repr(tm)
        assert "a" in m and len(m) == 3 and isinstance(m["b"], nn.Linear)
        assert list(m.keys()) == ["b", "a", "c"] and len(list(m.values())) == 3
        assert m.pop("a").__class__ is nn.ReLU and list(m) == ["b", "c"]
        m.update([("d", nn.Tanh())])
        assert list(m) == ["b", "c", "d"]
        with pytest.raises(KeyError):
            m["nope"]
        with pytest.raises(TypeError, match="int is not a Module subclass"):
            m["x"] = 3
        with pytest.raises(ValueError, match="has length 3; 2 is required"):
            m.update([("a", nn.ReLU(), 1)])

    def test_parameter_list_keys_repr_and_wrapping(self, torch):
        pl = nn.ParameterList([nn.Parameter(tg.ones(2, 3)), tg.zeros(3)])
        tpl = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(2, 3)), torch.zeros(3)])
        assert isinstance(pl[1], nn.Parameter) and pl[1].requires_grad
        assert list(pl.state_dict()) == list(tpl.state_dict()) == ["0", "1"]
        assert repr(pl) == repr(tpl)
        assert repr(nn.ParameterList()) == repr(torch.nn.ParameterList()) == "ParameterList()"
        pl.append(tg.ones(1))
        assert len(pl) == 3 and pl[-1].shape == (1,)
        assert [p.shape for p in pl] == [(2, 3), (3,), (1,)]
        assert [p.shape for p in pl[1:]] == [(3,), (1,)]
        assert list(pl.parameters())[2] is pl[2]
        with pytest.raises(IndexError, match="index 5 is out of range"):
            pl[5]

    def test_parameter_dict_sorts_plain_dicts_and_prints_typenames(self, torch):
        src = {"b": np.ones((2, 3), np.float32), "a": np.ones(3)}
        pd = nn.ParameterDict({k: nn.Parameter(tg.tensor(v)) for k, v in src.items()})
        tpd = torch.nn.ParameterDict({k: torch.nn.Parameter(torch.tensor(v))
                                      for k, v in src.items()})
        assert list(pd) == list(tpd) == ["a", "b"]
        assert list(pd.state_dict()) == list(tpd.state_dict())
        assert repr(pd) == repr(tpd)
        pd["c"] = tg.zeros(1)
        assert isinstance(pd["c"], nn.Parameter) and "c" in pd and len(pd) == 3
        ordered = nn.ParameterDict(OrderedDict([("z", tg.ones(1)), ("y", tg.ones(1))]))
        assert list(ordered) == ["z", "y"]
        assert [n for n, _ in pd.named_parameters()] == ["a", "b", "c"]
        with pytest.raises(AttributeError):
            pd["nope"]
        del pd["a"]
        assert list(pd) == ["b", "c"] and "a" not in dict(pd.named_parameters())

    def test_containers_inside_a_model_load_torch_state(self, torch):
        def net(lib, ones):
            m = lib.Module()
            m.blocks = lib.ModuleDict({"fc": lib.Linear(3, 2)})
            m.scales = lib.ParameterList([lib.Parameter(ones(2))])
            m.shifts = lib.ParameterDict({"s": lib.Parameter(ones(2))})
            return m
        m, tm = net(nn, tg.ones), net(torch.nn, torch.ones)
        assert list(m.state_dict()) == list(tm.state_dict())
        _copy(tm, m)
        for (a, p), (b, q) in zip(m.named_parameters(), tm.named_parameters()):
            assert a == b
            np.testing.assert_array_equal(_np(p), q.detach().numpy())


# ---------------- LayerNorm, SiLU and friends ----------------

class TestLayerNorm:
    @pytest.mark.parametrize("shape,norm", [((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((5,), [5])])
    def test_matches_torch_values_and_grads(self, torch, shape, norm):
        rng = np.random.default_rng(1)
        ns = tuple(norm)
        x, w, b = rng.standard_normal(shape), rng.standard_normal(ns), rng.standard_normal(ns)
        _same_fn(torch, "layer_norm", (x, norm, w, b), {"eps": 1e-3}, grad_args=(0, 2, 3))
        _same_fn(torch, "layer_norm", (x, norm), grad_args=(0,))
        _same_fn(torch, "layer_norm", (x, norm, w), grad_args=(0, 2))

    def test_second_order(self):
        rng = np.random.default_rng(2)
        x = tg.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
        w = tg.tensor(rng.standard_normal(4), requires_grad=True)
        b = tg.tensor(rng.standard_normal(4), requires_grad=True)

        def f(x, w, b):
            return F.layer_norm(x, (4,), w, b)
        assert gradcheck(f, (x, w, b)) and gradgradcheck(f, (x, w, b))
        assert gradgradcheck(lambda x: F.layer_norm(x, (3, 4)), (x,))

    def test_module_repr_state_and_init(self, torch):
        for kw in ({}, {"bias": False}, {"elementwise_affine": False}, {"eps": 1e-3}):
            m, tm = nn.LayerNorm((3, 4), **kw), torch.nn.LayerNorm((3, 4), **kw)
            assert repr(m) == repr(tm)
            assert list(m.state_dict()) == list(tm.state_dict())
            for k, v in m.state_dict().items():
                np.testing.assert_array_equal(_np(v), tm.state_dict()[k].numpy())
        assert nn.LayerNorm(4).normalized_shape == (4,)

    def test_module_forward_matches_torch(self, torch):
        tm = torch.nn.LayerNorm(4).double()
        with torch.no_grad():
            tm.weight.normal_()
            tm.bias.normal_()
        m = nn.LayerNorm(4, dtype=tg.float64)
        _copy(tm, m)
        x = np.random.default_rng(3).standard_normal((3, 4))
        g, t = _pair(torch, x)
        y, ty = m(g), tm(t)
        np.testing.assert_allclose(_np(y), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
        assert "NativeLayerNormBackward0" in repr(y)
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(_np(m.weight.grad), tm.weight.grad.numpy(), atol=1e-12)

    def test_errors_like_torch(self, torch):
        x = tg.ones(2, 3, 4)
        with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[3\], expected input "
                           r"with shape \[\*, 3\], but got input of size\[2, 3, 4\]"):
            F.layer_norm(x, (3,))
        with pytest.raises(RuntimeError, match="Expected weight to be of same shape"):
            F.layer_norm(x, (4,), tg.ones(5))
        with pytest.raises(TypeError, match="must be tuple of ints, not int"):
            F.layer_norm(x, 4)
        with pytest.raises(RuntimeError, match="mixed dtype"):
            nn.LayerNorm(4)(tg.ones(2, 4, dtype=tg.float64))


class TestActivations:
    def test_silu_values_grads_and_second_order(self, torch):
        x = np.random.default_rng(4).standard_normal((3, 4)) * 3
        _same_fn(torch, "silu", (x,))
        t = tg.tensor(x, requires_grad=True)
        assert gradcheck(F.silu, (t,)) and gradgradcheck(F.silu, (t,))

    def test_silu_inplace_and_module(self, torch):
        x = tg.tensor([-1.0, 0.0, 2.0], requires_grad=True)
        y = x * 1.0
        v = y._version
        z = F.silu(y, inplace=True)
        assert z is y and y._version > v and _name(z) == "SiluBackward0"
        z.sum().backward()
        tx = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
        torch.nn.functional.silu(tx * 1.0, inplace=True).sum().backward()
        np.testing.assert_allclose(_np(x.grad), tx.grad.numpy(), rtol=1e-6)
        assert repr(nn.SiLU()) == repr(torch.nn.SiLU()) == "SiLU()"
        assert repr(nn.SiLU(inplace=True)) == repr(torch.nn.SiLU(inplace=True))

    @pytest.mark.parametrize("approximate", ["none", "tanh"])
    def test_gelu_matches_torch(self, torch, approximate):
        x = np.random.default_rng(5).standard_normal((3, 4)) * 2
        g, t = _pair(torch, x)
        m, tm = nn.GELU(approximate), torch.nn.GELU(approximate)
        assert repr(m) == repr(tm)
        y, ty = m(g), tm(t)
        np.testing.assert_allclose(_np(y), ty.detach().numpy(), rtol=1e-7, atol=1e-9)
        assert _name(y) == type(ty.grad_fn).__name__
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(_np(g.grad), t.grad.numpy(), rtol=1e-7, atol=1e-9)
        with pytest.raises(RuntimeError, match="approximate argument must be either none or "
                           "tanh"):
            nn.GELU("bad")(g)

    def test_flatten_embedding_dropout_like_torch(self, torch):
        for args in ((), (0,), (1, 2), (0, -2)):
            x = np.arange(24.0).reshape(2, 3, 4)
            m, tm = nn.Flatten(*args), torch.nn.Flatten(*args)
            assert repr(m) == repr(tm)
            assert m(tg.tensor(x)).shape == tuple(tm(torch.tensor(x)).shape)
        e, te = nn.Embedding(5, 3, padding_idx=1), torch.nn.Embedding(5, 3, padding_idx=1)
        assert repr(e) == repr(te) and list(e.state_dict()) == list(te.state_dict())
        _copy(te, e)
        idx = [[0, 1], [4, 1]]
        y, ty = e(tg.tensor(idx)), te(torch.tensor(idx))
        np.testing.assert_allclose(_np(y), ty.detach().numpy(), rtol=1e-6)
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(_np(e.weight.grad), te.weight.grad.numpy())
        d, td = nn.Dropout(0.25), torch.nn.Dropout(0.25)
        assert repr(d) == repr(td)
        d.eval()
        x = tg.ones(1000)
        assert d(x) is x or np.array_equal(_np(d(x)), _np(x))
        d.train()
        out = _np(d(x))
        assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.75)} and 0 < (out == 0).sum() < 1000
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            nn.Dropout(1.5)


# ---------------- pooling ----------------

POOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1)),
    dict(kernel_size=2, stride=3, padding=1, ceil_mode=True),
]


class TestPooling:
    @pytest.mark.parametrize("shape", [(2, 3, 7, 6), (3, 5, 5)])
    @pytest.mark.parametrize("case", range(len(POOL_CASES)))
    def test_max_and_avg_match_torch(self, torch, shape, case):
        x = np.random.default_rng(case).standard_normal(shape)
        kw = POOL_CASES[case]
        _same_fn(torch, "max_pool2d", (x,), kw)
        _same_fn(torch, "max_pool2d", (x,), dict(kw, dilation=2) if case < 2 else kw)
        for extra in ({}, {"count_include_pad": False}, {"divisor_override": 3}):
            _same_fn(torch, "avg_pool2d", (x,), dict(kw, **extra))

    @pytest.mark.parametrize("size", [1, 2, 3, (2, None), (4, 3), (5, 7), (None, None)])
    def test_adaptive_avg_matches_torch(self, torch, size):
        for shape in ((2, 3, 7, 6), (3, 8, 8)):
            x = np.random.default_rng(7).standard_normal(shape)
            _same_fn(torch, "adaptive_avg_pool2d", (x, size))

    def test_return_indices_like_torch(self, torch):
        x = np.random.default_rng(8).standard_normal((2, 3, 6, 6))
        y, i = F.max_pool2d(tg.tensor(x), 3, 2, 1, return_indices=True)
        ty, ti = torch.nn.functional.max_pool2d(torch.tensor(x), 3, 2, 1, return_indices=True)
        assert i.dtype == tg.int64
        np.testing.assert_array_equal(_np(i), ti.numpy())
        np.testing.assert_array_equal(_np(y), ty.numpy())
        m = nn.MaxPool2d(2, return_indices=True)
        assert len(m(tg.tensor(x))) == 2

    def test_ties_and_nan_pick_like_torch(self, torch):
        x = np.array([[[[1.0, 1.0], [0.0, 1.0]], [[np.nan, 2.0], [3.0, np.nan]]]])
        _, i = F.max_pool2d(tg.tensor(x), 2, return_indices=True)
        _, ti = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
        np.testing.assert_array_equal(_np(i), ti.numpy())

    @pytest.mark.parametrize("fn,kw", [
        ("max_pool2d", dict(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True)),
        ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
        ("adaptive_avg_pool2d", dict(output_size=(3, 2)))])
    def test_second_order(self, fn, kw):
        x = tg.tensor(np.random.default_rng(9).standard_normal((1, 2, 5, 6)),
                      requires_grad=True)

        def f(t):
            return getattr(F, fn)(t, **kw)
        assert gradcheck(f, (x,)) and gradgradcheck(f, (x,))

    def test_double_backward_node_names(self, torch):
        x = tg.tensor(np.random.default_rng(10).standard_normal((1, 1, 4, 4)),
                      requires_grad=True)
        g, = tg.autograd.grad(F.max_pool2d(x, 2).pow(2).sum(), x, create_graph=True)
        assert _name(g) == "MaxPool2DWithIndicesBackwardBackward0"
        g, = tg.autograd.grad(F.avg_pool2d(x, 2).pow(2).sum(), x, create_graph=True)
        assert _name(g) == "AvgPool2DBackwardBackward0"

    def test_module_reprs(self, torch):
        cases = [("MaxPool2d", (2,), {}), ("MaxPool2d", ((2, 3),),
                                           dict(stride=1, padding=1, dilation=2, ceil_mode=True)),
                 ("AvgPool2d", (2,), {}), ("AvgPool2d", (3, 2, 1), dict(ceil_mode=True)),
                 ("AdaptiveAvgPool2d", ((2, None),), {}), ("AdaptiveAvgPool2d", (3,), {})]
        for name, args, kw in cases:
            assert repr(getattr(nn, name)(*args, **kw)) == repr(getattr(torch.nn, name)(*args,
                                                                                        **kw))

    def test_integer_inputs_like_torch(self, torch):
        a = np.random.default_rng(19).integers(-50, 50, (2, 2, 5, 6))
        for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1),
                   dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)):
            for fn, extra in (("max_pool2d", {}), ("avg_pool2d", {}),
                              ("avg_pool2d", {"count_include_pad": False}),
                              ("avg_pool2d", {"divisor_override": 4})):
                y = getattr(F, fn)(tg.tensor(a), **kw, **extra)
                ty = getattr(torch.nn.functional, fn)(torch.tensor(a), **kw, **extra)
                assert y.dtype == tg.int64
                np.testing.assert_array_equal(_np(y), ty.numpy())     # truncating division
        y = F.max_pool2d(tg.tensor(a).int(), 2)
        assert y.dtype == tg.int32
        for call, msg in ((lambda: F.avg_pool2d(tg.tensor(a).int(), 2), "'Int'"),
                          (lambda: F.max_pool2d(tg.tensor(a) > 0, 2), "'Bool'"),
                          (lambda: F.adaptive_avg_pool2d(tg.tensor(a), 2), "'Long'"),
                          (lambda: F.layer_norm(tg.tensor(a), (6,)), "'Long'"),
                          (lambda: F.silu(tg.tensor(a)), "'Long'")):
            with pytest.raises(NotImplementedError, match=msg):
                call()

    def test_errors_like_torch(self, torch):
        x = tg.ones(1, 1, 5, 5)
        for fn in (F.max_pool2d, F.avg_pool2d):
            with pytest.raises(RuntimeError, match="pad should be at most half of effective "
                               "kernel size, but got pad=2, kernel_size=2 and dilation=1"):
                fn(x, 2, padding=2)
        with pytest.raises(RuntimeError, match="Output size is too small"):
            F.max_pool2d(tg.ones(1, 1, 1, 1), 2)
        with pytest.raises(RuntimeError, match="Expected 3D or 4D"):
            F.max_pool2d(tg.ones(5, 5), 2)


# ---------------- binary cross-entropy ----------------

class TestBCE:
    @pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
    @pytest.mark.parametrize("wshape", [None, (3,), (2, 3)])
    def test_match_torch(self, torch, reduction, wshape):
        rng = np.random.default_rng(11)
        x, t = rng.uniform(0.05, 0.95, (2, 3)), rng.uniform(0, 1, (2, 3))
        kw = {"reduction": reduction}
        if wshape is not None:
            kw["weight"] = rng.uniform(0.5, 2, wshape)
        _same_fn(torch, "binary_cross_entropy", (x, t), kw, grad_args=(0, 1))
        _same_fn(torch, "binary_cross_entropy_with_logits", (x * 8 - 4, t), kw,
                 grad_args=(0, 1))
        kw["pos_weight"] = rng.uniform(0.5, 2, (3,))
        _same_fn(torch, "binary_cross_entropy_with_logits", (x * 8 - 4, t), kw,
                 grad_args=(0, 1))

    def test_second_order_and_extremes(self, torch):
        rng = np.random.default_rng(12)
        x = tg.tensor(rng.uniform(0.1, 0.9, (4,)), requires_grad=True)
        t = tg.tensor(rng.uniform(0, 1, (4,)), requires_grad=True)
        pw = tg.tensor([0.5, 1.0, 2.0, 3.0], dtype=tg.float64)
        for f in (lambda a, b: F.binary_cross_entropy(a, b),
                  lambda a, b: F.binary_cross_entropy_with_logits(a, b, pos_weight=pw)):
            assert gradcheck(f, (x, t)) and gradgradcheck(f, (x, t))
        out = F.binary_cross_entropy(tg.tensor([0.0, 1.0]), tg.tensor([1.0, 0.0]), reduction="none")
        np.testing.assert_array_equal(_np(out), [100.0, 100.0])     # logs clamped at -100
        big = F.binary_cross_entropy_with_logits(tg.tensor([-200.0, 200.0]), tg.tensor([1.0, 0.0]))
        assert np.isfinite(big.item()) and abs(big.item() - 200.0) < 1e-4

    def test_errors_like_torch(self, torch):
        p, t = tg.rand(3), tg.rand(3)
        with pytest.raises(ValueError, match="Using a target size"):
            F.binary_cross_entropy(p, t[:2])
        with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
            F.binary_cross_entropy(p * 2 + 1, t)
        with pytest.raises(ValueError, match="must be the same as input size"):
            F.binary_cross_entropy_with_logits(p, t[:2])
        with pytest.raises(RuntimeError, match="not differentiable with respect to argument "
                           "'weight'"):
            F.binary_cross_entropy(p, t, weight=tg.ones(3, requires_grad=True))
        with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
            F.binary_cross_entropy(p, t, reduction="bad")
        with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
            F.binary_cross_entropy(p, t.double())

    def test_modules(self, torch):
        assert repr(nn.BCELoss()) == "BCELoss()" and repr(nn.BCEWithLogitsLoss()) == \
            "BCEWithLogitsLoss()"
        m = nn.BCEWithLogitsLoss(weight=tg.ones(3), pos_weight=tg.ones(3))
        tm = torch.nn.BCEWithLogitsLoss(weight=torch.ones(3), pos_weight=torch.ones(3))
        assert list(m.state_dict()) == list(tm.state_dict()) == ["weight", "pos_weight"]
        x, t = np.array([0.2, 0.5, 0.9]), np.array([0.0, 1.0, 1.0])
        for kw in ({}, {"reduction": "sum"}):
            a = nn.BCELoss(**kw)(tg.tensor(x), tg.tensor(t))
            b = torch.nn.BCELoss(**kw)(torch.tensor(x), torch.tensor(t))
            assert abs(a.item() - b.item()) < 1e-12


# ---------------- attention ----------------

def _sdpa_case(torch, shape_q, shape_k, rng, **kw):
    q, k = rng.standard_normal(shape_q), rng.standard_normal(shape_k)
    v = rng.standard_normal(shape_k[:-1] + (5,))
    return _same_fn(torch, "scaled_dot_product_attention", (q, k, v), kw, grad_args=(0, 1, 2))


class TestAttention:
    def test_sdpa_matches_torch(self, torch):
        rng = np.random.default_rng(13)
        _sdpa_case(torch, (2, 3, 4), (2, 6, 4), rng)
        _sdpa_case(torch, (2, 2, 4, 4), (2, 2, 4, 4), rng, is_causal=True)
        _sdpa_case(torch, (2, 3, 4), (2, 6, 4), rng, scale=0.3)
        keep = rng.uniform(size=(3, 6)) > 0.3
        keep[:, 0] = True
        _sdpa_case(torch, (2, 3, 4), (2, 6, 4), rng, attn_mask=keep)
        _sdpa_case(torch, (2, 3, 4), (2, 6, 4), rng, attn_mask=rng.standard_normal((2, 3, 6)))

    def test_sdpa_fully_masked_rows_give_zeros_like_torch(self, torch):
        rng = np.random.default_rng(14)
        keep = np.array([[True, False], [False, False]])
        y = _sdpa_case(torch, (1, 2, 4), (1, 2, 4), rng, attn_mask=keep)
        assert np.isfinite(_np(y)).all()

    def test_sdpa_second_order_and_errors(self):
        rng = np.random.default_rng(15)
        q, k, v = (tg.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
                   for _ in range(3))

        def f(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert gradcheck(f, (q, k, v)) and gradgradcheck(f, (q, k, v))
        with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
            F.scaled_dot_product_attention(q, k, v, attn_mask=tg.ones(3, 3).bool(),
                                           is_causal=True)

    @pytest.mark.parametrize("kw", [{}, {"batch_first": True}, {"bias": False},
                                    {"kdim": 4, "vdim": 6}, {"add_bias_kv": True},
                                    {"add_zero_attn": True}])
    def test_mha_matches_torch(self, torch, kw):
        torch.manual_seed(0)
        tm = torch.nn.MultiheadAttention(8, 2, **kw).double()
        m = nn.MultiheadAttention(8, 2, dtype=tg.float64, **kw)
        assert list(tm.state_dict()) == list(m.state_dict())
        assert [n for n, _ in tm.named_parameters()] == [n for n, _ in m.named_parameters()]
        assert repr(tm) == repr(m)
        _copy(tm, m)
        rng = np.random.default_rng(16)
        L, S, N = 3, 5, 2
        bf = kw.get("batch_first", False)

        def arr(n, d):
            return rng.standard_normal((N, n, d) if bf else (n, N, d))
        q, k, v = arr(L, 8), arr(S, kw.get("kdim", 8)), arr(S, kw.get("vdim", 8))
        kpm = np.zeros((N, S), bool)
        kpm[0, -1] = kpm[1, 0] = True
        causal = np.triu(np.ones((L, S), bool), 1)
        for fw in ({}, {"need_weights": False}, {"key_padding_mask": kpm},
                   {"attn_mask": causal}, {"attn_mask": rng.standard_normal((L, S))},
                   {"average_attn_weights": False},
                   {"attn_mask": causal, "key_padding_mask": kpm, "need_weights": False},
                   {"key_padding_mask": kpm, "need_weights": False}):
            self._mha_call(torch, m, tm, (q, k, v), fw, rng)

    def test_mha_eval_mode_matches_torch_fast_path(self, torch):
        rng = np.random.default_rng(20)
        for bf in (False, True):
            tm = torch.nn.MultiheadAttention(8, 2, batch_first=bf, dropout=0.5).eval()
            m = nn.MultiheadAttention(8, 2, batch_first=bf, dropout=0.5).eval()
            _copy(tm, m)
            x = rng.standard_normal((2, 4, 8)).astype(np.float32)
            kpm = np.zeros((2, 4) if bf else (4, 2), bool)
            kpm[0, -1] = True
            for fw in ({}, {"need_weights": False}, {"key_padding_mask": kpm},
                       {"key_padding_mask": kpm, "need_weights": False}):
                with torch.no_grad():
                    to, _ = tm(*(torch.tensor(x),) * 3,
                               **{a: _conv(torch, b)[1] for a, b in fw.items()})
                with tg.no_grad():
                    go, _ = m(*(tg.tensor(x),) * 3,
                              **{a: _conv(torch, b)[0] for a, b in fw.items()})
                np.testing.assert_allclose(_np(go), to.numpy(), rtol=1e-5, atol=1e-6)
        with pytest.raises(AssertionError, match=r"Expected key_padded_mask.shape\[0\] to be 2"):
            m(*(tg.tensor(x),) * 3, key_padding_mask=tg.zeros(3, 4).bool())

    def _mha_call(self, torch, m, tm, qkv, fw, rng):
        ts = [torch.tensor(a, requires_grad=True) for a in qkv]
        gs = [tg.tensor(a, requires_grad=True) for a in qkv]
        to, tw = tm(*ts, **{a: _conv(torch, b)[1] for a, b in fw.items()})
        go, gw = m(*gs, **{a: _conv(torch, b)[0] for a, b in fw.items()})
        np.testing.assert_allclose(_np(go), to.detach().numpy(), rtol=1e-7, atol=1e-9)
        assert (tw is None) == (gw is None)
        w = rng.standard_normal(tuple(to.shape))
        loss_t = (to * torch.tensor(w)).sum()
        loss_g = (go * tg.tensor(w)).sum()
        if tw is not None:
            np.testing.assert_allclose(_np(gw), tw.detach().numpy(), rtol=1e-7, atol=1e-9)
            loss_t, loss_g = loss_t + tw.sum(), loss_g + gw.sum()
        loss_t.backward()
        loss_g.backward()
        for a, b in zip(ts, gs):
            np.testing.assert_allclose(_np(b.grad), a.grad.numpy(), rtol=1e-7, atol=1e-9)
        for (n1, p1), (n2, p2) in zip(tm.named_parameters(), m.named_parameters()):
            np.testing.assert_allclose(_np(p2.grad), p1.grad.numpy(), rtol=1e-7, atol=1e-9,
                                       err_msg=n1)
        tm.zero_grad()
        m.zero_grad()

    def test_mha_unbatched_init_and_errors(self, torch):
        tm = torch.nn.MultiheadAttention(4, 2).double()
        m = nn.MultiheadAttention(4, 2, dtype=tg.float64)
        np.testing.assert_array_equal(_np(m.in_proj_bias), np.zeros(12))
        np.testing.assert_array_equal(_np(m.out_proj.bias), np.zeros(4))
        bound = np.sqrt(6.0 / (4 + 12))                        # xavier_uniform of (12, 4)
        assert np.abs(_np(m.in_proj_weight)).max() <= bound
        _copy(tm, m)
        x = np.random.default_rng(17).standard_normal((3, 4))
        o, w = m(tg.tensor(x), tg.tensor(x), tg.tensor(x))
        to, tw = tm(torch.tensor(x), torch.tensor(x), torch.tensor(x))
        np.testing.assert_allclose(_np(o), to.detach().numpy(), rtol=1e-7, atol=1e-9)
        assert w.shape == tuple(tw.shape) == (3, 3)
        with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
            nn.MultiheadAttention(7, 2)
        with pytest.raises(ValueError, match="must be greater than 0"):
            nn.MultiheadAttention(0, 2)
        with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal"):
            m(tg.tensor(x), tg.tensor(x), tg.tensor(x), is_causal=True)


# ---------------- compiled == eager ----------------

class _Net(nn.Module):
    """One model using each new module (and GELU, Flatten, Embedding, Dropout)."""

    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleDict({"c": nn.Conv2d(2, 4, 3, padding=1)})
        self.mp, self.aap = nn.MaxPool2d(2), nn.AdaptiveAvgPool2d((3, 2))
        self.ap = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.ln, self.act, self.gelu = nn.LayerNorm(6), nn.SiLU(), nn.GELU("tanh")
        self.attn = nn.MultiheadAttention(6, 2, batch_first=True)
        self.scale = nn.ParameterList([tg.ones(6), tg.zeros(6)])
        self.extra = nn.ParameterDict({"b": tg.zeros(1)})
        self.emb = nn.Embedding(4, 6)
        self.drop = nn.Dropout(0.2)
        self.head, self.flat = nn.Linear(6, 1), nn.Flatten(2)

    def forward(self, x, tok, y):
        h = self.ap(self.mp(self.act(self.convs["c"](x))))
        h = self.flat(self.aap(h)) + self.emb(tok)                  # (N, 4, 6)
        h = self.gelu(self.ln(h)) * self.scale[0] + self.scale[1]
        a, w = self.attn(h, h, h)
        s = F.scaled_dot_product_attention(h, self.drop(a), a, is_causal=True)
        logit = self.head(s).squeeze(-1).mean(-1) + self.extra["b"]
        return (F.binary_cross_entropy_with_logits(logit, y) +
                nn.BCELoss()(F.sigmoid(logit), y) + w.square().sum())


@pytest.mark.parametrize("train", [False, True])
def test_compiled_model_matches_eager(train):
    tg.manual_seed(0)
    m = _Net()
    m.train(train)
    cm = tg.compile(m)
    rng = np.random.default_rng(18)
    for _ in range(2):
        x = tg.tensor(rng.standard_normal((2, 2, 8, 8)).astype(np.float32))
        tok = tg.tensor(rng.integers(0, 4, (2, 4)))
        y = tg.tensor(rng.uniform(0, 1, (2,)).astype(np.float32))
        results = []
        for fn in (m, cm):
            m.zero_grad()
            tg.manual_seed(1)                   # the same dropout masks in both runs
            loss = fn(x, tok, y)
            loss.backward()
            results.append((loss.item(), {n: _np(p.grad) for n, p in m.named_parameters()}))
        (le, ge), (lc, gc) = results
        assert abs(le - lc) <= 1e-5 * max(1.0, abs(le))
        assert ge.keys() == gc.keys()
        for n in ge:
            np.testing.assert_allclose(gc[n], ge[n], rtol=1e-4, atol=1e-6, err_msg=n)
    assert cm.stats.traces == 1
