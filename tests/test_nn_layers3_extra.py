"""More of this round's nn additions against PyTorch: lazy modules (LazyLinear, LazyConv,
LazyBatchNorm: materialization, checkpoints, compile after a dry run), AlphaDropout /
FeatureAlphaDropout / RReLU (formulas, seeds, compiled == eager), and interpolate's bicubic
mode and antialias handling (helpers of `test_nn_layers3.py`)."""
import numpy as np
import pytest

import tracegrad as tg
from test_ops_training_more import _np, _torch, check_like_torch, raises_like
from test_nn_layers3 import same_repr_and_keys


# ---------------- LazyLinear ----------------
def test_lazy_linear_materializes_on_first_call_like_torch():
    torch = _torch()
    seen = {}
    for m in (torch, tg):
        m.manual_seed(0)
        lin = m.nn.LazyLinear(3)
        w0 = lin.weight
        before = (repr(lin), repr(lin.weight), lin.in_features, lin.has_uninitialized_params(),
                  type(lin.weight).__name__, list(lin.state_dict()))
        with pytest.raises(RuntimeError, match="uninitialized parameter"):
            lin.weight.shape
        y = lin(m.ones(2, 5))
        after = (repr(lin), type(lin).__name__, type(lin.weight).__name__, lin.in_features,
                 tuple(lin.weight.shape), tuple(lin.bias.shape), lin.weight is w0,
                 tuple(y.shape), lin.weight.requires_grad)
        nobias = m.nn.LazyLinear(4, bias=False, dtype=m.float64)
        nobias(m.ones(1, 2, dtype=m.float64))
        seen[m.__name__] = (before, after, repr(nobias), str(nobias.weight.dtype).split(".")[-1])
        bound = 1 / 5 ** 0.5                    # Linear's init for in_features=5
        assert float(lin.weight.detach().abs().max()) <= bound
        assert float(lin.bias.detach().abs().max()) <= bound
    assert seen["tracegrad"] == seen["torch"]


def test_lazy_modules_loaded_from_checkpoints_keep_pytorchs_sizes():
    torch = _torch()
    for m in (torch, tg):
        lin = m.nn.LazyLinear(3)
        lin.load_state_dict({k: m.tensor(v.detach().numpy()) for k, v in
                             torch.nn.Linear(4, 3).state_dict().items()})
        lin(m.ones(1, 4))
        conv = m.nn.LazyConv2d(3, 2)
        conv.load_state_dict({k: m.tensor(v.detach().numpy()) for k, v in
                              torch.nn.Conv2d(4, 3, 2).state_dict().items()})
        conv(m.ones(1, 4, 3, 3))
        assert repr(lin) == "Linear(in_features=4, out_features=3, bias=True)"
        assert repr(conv) == "Conv2d(0, 3, kernel_size=(2, 2), stride=(1, 1))"


def test_lazy_linear_loads_torch_checkpoint_trains_and_compiles_after_dry_run():
    torch = _torch()
    tm = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    gm = tg.nn.Sequential(tg.nn.LazyLinear(4), tg.nn.Tanh(), tg.nn.LazyLinear(2))
    gm.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)
    np.testing.assert_allclose(_np(gm(tg.tensor(x))), _np(tm(torch.tensor(x))), rtol=1e-6)
    # a dry run, then an optimizer and a compiled training step
    model = tg.nn.Sequential(tg.nn.LazyLinear(4), tg.nn.ReLU(), tg.nn.LazyLinear(1))
    lazy = tg.nn.Sequential(tg.nn.LazyLinear(2))
    with pytest.raises(RuntimeError, match="dry run"):   # a compiled function: loud
        tg.compile(lambda xb: lazy(xb))(tg.ones(1, 3))
    model(tg.ones(1, 6))
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    assert len(opt.param_groups[0]["params"]) == 4

    @tg.compile
    def step(xb):
        opt.zero_grad()
        loss = model(xb).pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    losses = [float(step(tg.tensor(x))) for _ in range(3)]
    assert losses[2] < losses[0] and step.stats.eager_calls == 0


def _lazy_net(nn):
    return nn.Sequential(nn.LazyConv2d(4, 3, padding=1), nn.LazyBatchNorm2d(), nn.ReLU(),
                         nn.Flatten(), nn.LazyLinear(5), nn.LazyBatchNorm1d(affine=False),
                         nn.Tanh(), nn.LazyLinear(2))


def _lazy_net_transposed(nn):
    return nn.Sequential(nn.LazyConvTranspose2d(4, 3, stride=2), nn.LazyInstanceNorm2d(),
                         nn.ReLU(), nn.LazyConv2d(2, 2), nn.Flatten(), nn.LazyLinear(3))


def _lazy_net_1d(nn):
    return nn.Sequential(nn.LazyConvTranspose1d(4, 3, groups=2), nn.LazyInstanceNorm1d(),
                         nn.LazyConv1d(6, 2, groups=2), nn.LazyBatchNorm1d())


@pytest.mark.parametrize("make,shape", [("_lazy_net", (4, 3, 5, 5)),
                                        ("_lazy_net_transposed", (2, 3, 4, 4)),
                                        ("_lazy_net_1d", (3, 4, 6))])
def test_lazy_conv_batchnorm_network_like_torch(make, shape):
    """A d2l-style network of lazy layers: the same repr before and after the dry run, the
    same state_dict keys and shapes, and PyTorch's outputs and gradients once its weights
    are loaded."""
    torch = _torch()
    make = globals()[make]
    tm, gm = make(torch.nn), make(tg.nn)
    assert repr(gm) == repr(tm)
    assert list(gm.state_dict()) == list(tm.state_dict())
    assert type(gm[1].running_mean).__name__ == "UninitializedBuffer"
    x = np.random.default_rng(0).standard_normal(shape)
    tm(torch.tensor(x, dtype=torch.float32))
    gm(tg.tensor(x, dtype=tg.float32))
    assert repr(gm) == repr(tm)
    sd = {k: tg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}
    assert [tuple(v.shape) for v in gm.state_dict().values()] == [tuple(v.shape)
                                                                  for v in sd.values()]
    gm.load_state_dict(sd)
    tx, gx = torch.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
    tm.double(), gm.double()
    ty, gy = tm(tx), gm(gx)
    np.testing.assert_allclose(_np(gy), _np(ty), rtol=1e-10, atol=1e-12)
    (ty ** 2).sum().backward()
    (gy ** 2).sum().backward()
    np.testing.assert_allclose(_np(gx.grad), _np(tx.grad), rtol=1e-8, atol=1e-10)
    for (k, a), (_, b) in zip(gm.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(_np(a.grad), _np(b.grad), rtol=1e-8, atol=1e-10, err_msg=k)
    for (k, a), (_, b) in zip(gm.state_dict().items(), tm.state_dict().items()):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6, atol=1e-7, err_msg=k)
    # a lazy checkpoint load: torch's trained weights straight into fresh lazy modules
    fresh = make(tg.nn).double()          # uninitialized, converted: materializes float64
    fresh.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    fresh.eval(), tm.eval()
    assert fresh[0].weight.dtype == tg.float64 and type(fresh[0]).__name__.startswith("Lazy")
    if any("InstanceNorm" in type(m).__name__ for m in fresh):
        # PyTorch too: a loaded lazy norm keeps num_features 0, which its affine check refuses
        with pytest.raises(ValueError, match="num_features"):
            fresh(tg.tensor(x))
    else:
        np.testing.assert_allclose(_np(fresh(tg.tensor(x))), _np(tm(torch.tensor(x))),
                                   rtol=1e-10)
    te, ge = raises_like(lambda m: m.nn.LazyConv2d(4, 3)(m.ones(5)))
    assert str(te) in str(ge)


# ---------------- AlphaDropout, FeatureAlphaDropout, RReLU ----------------
@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout_formula_seed_and_compile(feature):
    F = tg.nn.functional
    fn = F.feature_alpha_dropout if feature else F.alpha_dropout
    x = tg.tensor(np.random.default_rng(0).standard_normal((3, 4, 5)), requires_grad=True)
    shape = (3, 4, 1) if feature else (3, 4, 5)
    tg.manual_seed(2)
    keep = (tg.rand(shape, dtype=tg.float64) < 0.7).double()
    tg.manual_seed(2)
    y = fn(x, 0.3, training=True)
    alpha = 1.7580993408473766
    a = 1 / ((alpha ** 2 * 0.3 + 1) * 0.7) ** 0.5
    expect = _np(x) * _np(keep) * a + alpha * a * (_np(keep) - 1 + 0.3)
    np.testing.assert_allclose(_np(y), expect, rtol=1e-12)
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), np.broadcast_to(_np(keep) * a, x.shape), rtol=1e-12)
    assert fn(x, 0.3) is x                                  # PyTorch's training=False default
    cf = tg.compile(lambda t: fn(t, 0.3, training=True) * 2)
    for seed in (3, 4):
        tg.manual_seed(seed)
        e = fn(x, 0.3, training=True) * 2
        tg.manual_seed(seed)
        assert cf(x).tolist() == e.tolist()
    assert cf.stats.traces == 1
    raises_like(lambda m: m.nn.functional.alpha_dropout(m.ones(2), 1.5))
    name = "FeatureAlphaDropout" if feature else "AlphaDropout"
    same_repr_and_keys(lambda nn: getattr(nn, name)(0.2))
    m = getattr(tg.nn, name)(0.2).eval()
    assert m(x) is x


def test_alpha_dropout_keeps_selu_statistics():
    tg.manual_seed(0)
    x = tg.nn.functional.selu(tg.randn(400000, dtype=tg.float64))
    y = tg.nn.AlphaDropout(0.4)(x)
    assert abs(float(y.mean())) < 0.01 and abs(float(y.std()) - 1) < 0.01


def test_rrelu_like_torch_and_random_slopes():
    check_like_torch(lambda m, x: m.nn.RReLU(0.1, 0.3).eval()(x), [(3, 4)], jax=False)
    check_like_torch(lambda m, x: m.nn.functional.rrelu(x * 1), [(3, 4)], jax=False,
                     gradcheck=False)
    same_repr_and_keys(lambda nn: nn.RReLU(0.1, 0.3, True))
    same_repr_and_keys(lambda nn: nn.RReLU())
    raises_like(lambda m: m.nn.functional.rrelu(m.ones(2), 0.5, 0.2, True))
    x = tg.tensor(np.linspace(-2, 2, 41), requires_grad=True)
    tg.manual_seed(1)
    y = tg.nn.RReLU(0.1, 0.3)(x)
    y.sum().backward()
    slope = _np(x.grad)
    neg = _np(x) < 0
    assert np.all(slope[~neg] == 1) and np.all((slope[neg] >= 0.1) & (slope[neg] <= 0.3))
    assert len(np.unique(slope[neg])) > 5
    np.testing.assert_allclose(_np(y), _np(x) * slope, rtol=1e-12)
    cf = tg.compile(lambda t: tg.nn.functional.rrelu(t, training=True))
    tg.manual_seed(5)
    e = tg.nn.functional.rrelu(x, training=True)
    tg.manual_seed(5)
    assert cf(x).tolist() == e.tolist()


# ---------------- interpolate: bicubic, antialias ----------------
@pytest.mark.parametrize("kw", [dict(size=(9, 11)), dict(size=(3, 4)),
                                dict(scale_factor=2.5), dict(size=(7, 2), align_corners=True),
                                dict(scale_factor=(0.5, 1.5), align_corners=False)])
def test_interpolate_bicubic_like_torch(kw):
    check_like_torch(lambda m, x: m.nn.functional.interpolate(x, mode="bicubic", **kw),
                     [(2, 2, 5, 6)], jax="size" in kw and not kw.get("align_corners"),
                     gradcheck="scale_factor" in kw, dtypes=("float64",))
    x = np.random.default_rng(0).standard_normal((2, 2, 5, 6)).astype(np.float32)
    torch = _torch()             # float32: PyTorch's weights are float32 arithmetic
    np.testing.assert_allclose(
        _np(tg.nn.functional.interpolate(tg.tensor(x), mode="bicubic", **kw)),
        _np(torch.nn.functional.interpolate(torch.tensor(x), mode="bicubic", **kw)),
        rtol=1e-4, atol=1e-5)
    check_like_torch(lambda m, x: m.nn.Upsample(mode="bicubic", **kw)(x), [(1, 1, 4, 4)],
                     jax=False, gradcheck=False, compiled=False)


def test_interpolate_antialias_supported_or_loud():
    check_like_torch(lambda m, x: m.nn.functional.interpolate(
        x, size=(9, 11), mode="bilinear", antialias=True), [(1, 2, 5, 6)], jax=False,
        gradcheck=False)
    te, ge = raises_like(lambda m: m.nn.functional.interpolate(
        m.ones(1, 2, 3), size=5, mode="linear", antialias=True))
    assert str(te) == str(ge)
    for kw in (dict(size=(3, 4), mode="bilinear"), dict(size=(9, 11), mode="bicubic")):
        with pytest.raises(NotImplementedError, match="antialias"):
            tg.nn.functional.interpolate(tg.ones(1, 2, 5, 6), antialias=True, **kw)
