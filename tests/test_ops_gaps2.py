"""The second batch of PyTorch names real programs hit (torch math and shape composites,
activations, losses and layers): each case runs the same call on tracegrad and PyTorch
(values, dtype, gradients of a random projection of the outputs), checks float64 gradients
by finite differences (tg.autograd.gradcheck), and compiled == eager. The trigonometric
primitives also have op-table rows (tests/op_table.py), which drive numpy, gradient, compile
and JAX checks.
"""
import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")


def _arr(rng, shape, domain):
    if domain == "unit":
        return rng.uniform(-0.8, 0.8, shape)
    if domain == "pos":
        return rng.uniform(0.5, 2.0, shape)
    if domain == "prob":
        return rng.uniform(0.1, 0.9, shape)
    if domain == "sorted":
        return np.sort(rng.standard_normal(shape), axis=-1)
    if domain == "zero":
        return np.zeros(shape)
    if domain == "int":
        return rng.integers(-3, 4, shape)
    return rng.standard_normal(shape)


class C:
    """A case: `f(m, *tensors)` with m the library; tensor specs (shape, domain, grad)."""

    def __init__(self, name, f, *specs, grad=True, compile=True, fd=True):
        self.name, self.f, self.specs = name, f, specs
        self.grad, self.compile, self.fd = grad, compile, fd

    def arrays(self, seed=0):
        rng = np.random.default_rng(seed)
        return [_arr(rng, s, d) for s, d in self.specs]


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _floats(outs):
    return [o for o in outs if o.is_floating_point()]


_NANS = np.where(np.arange(12).reshape(3, 4) % 5 == 1, np.nan, 0.0)

CASES = [
    C("logaddexp", lambda m, a, b: m.logaddexp(a, b), ((2, 3), "real"), ((3,), "real")),
    C("logaddexp2", lambda m, a, b: m.logaddexp2(a, b), ((2, 3), "real"), ((2, 3), "real")),
    C("clamp_min", lambda m, a: m.clamp_min(a, 0.3), ((2, 3), "real")),
    C("clamp_max", lambda m, a: a.clamp_max(-0.2), ((2, 3), "real")),
    C("var_mean", lambda m, a: m.var_mean(a, 1), ((3, 4), "real")),
    C("var_mean_all", lambda m, a: m.var_mean(a, correction=0), ((3, 4), "real")),
    C("std_mean", lambda m, a: m.std_mean(a, dim=(0,), keepdim=True), ((3, 4), "real")),
    C("nansum", lambda m, a: m.nansum(a + m.tensor(_NANS), 1), ((3, 4), "real")),
    C("nanmean", lambda m, a: [m.nanmean(a + m.tensor(_NANS)),
                               a.nanmean(dim=0, keepdim=True)], ((3, 4), "real")),
    C("count_nonzero", lambda m, a: m.count_nonzero(m.relu(a), dim=0), ((3, 4), "real"),
      grad=False),
    C("addcmul", lambda m, a, b, c: m.addcmul(a, b, c, value=0.5), ((2, 3), "real"),
      ((3,), "real"), ((2, 1), "real")),
    C("addcdiv", lambda m, a, b, c: a.addcdiv(b, c, value=-2), ((2, 3), "real"),
      ((2, 3), "real"), ((2, 3), "pos")),
    C("logit", lambda m, a: m.logit(a), ((5,), "prob")),
    C("logit_eps", lambda m, a: m.logit(a * 1.2 - 0.1, eps=0.05), ((6,), "prob")),
    C("cdist", lambda m, a, b: m.cdist(a, b), ((4, 3), "real"), ((5, 3), "real")),
    C("cdist_p1_batched", lambda m, a, b: m.cdist(a, b, p=1.0), ((2, 4, 3), "real"),
      ((2, 5, 3), "real")),
    C("median", lambda m, a: m.median(a), ((7,), "real")),
    C("median_even", lambda m, a: a.median(), ((2, 4), "real")),
    C("median_dim", lambda m, a: m.median(a, 1, keepdim=True), ((3, 4), "real")),
    C("quantile", lambda m, a: m.quantile(a, 0.3), ((9,), "real")),
    C("quantile_dim", lambda m, a: m.quantile(a, m.tensor([0.25, 0.5, 1.0],
                                                              dtype=m.float64), dim=1),
      ((3, 5), "real")),
    C("quantile_interp", lambda m, a: [m.quantile(a, 0.4, dim=0, keepdim=True,
                                                  interpolation=k)
                                       for k in ("lower", "higher", "midpoint", "nearest")],
      ((6, 2), "real")),
    C("searchsorted", lambda m, s, v: [m.searchsorted(s, v), m.searchsorted(s, v, right=True)],
      ((6,), "sorted"), ((2, 3), "real"), grad=False),
    C("searchsorted_batched", lambda m, s, v: m.searchsorted(s, v, side="right"),
      ((2, 6), "sorted"), ((2, 3), "real"), grad=False),
    C("bucketize", lambda m, v, b: [m.bucketize(v, b), m.bucketize(v, b, right=True,
                                                                    out_int32=True)],
      ((2, 3), "int"), ((4,), "sorted"), grad=False),
    C("trapezoid", lambda m, y: [m.trapezoid(y), m.trapezoid(y, dx=0.5, dim=0)],
      ((3, 4), "real")),
    C("trapezoid_x", lambda m, y, x: m.trapezoid(y, x), ((3, 4), "real"), ((4,), "sorted")),
    C("meshgrid", lambda m, a, b: m.meshgrid(a, b, indexing="ij"), ((3,), "real"),
      ((4,), "real")),
    C("meshgrid_xy", lambda m, a, b, c: m.meshgrid([a, b, c], indexing="xy"), ((3,), "real"),
      ((4,), "real"), ((2,), "real")),
    C("rot90", lambda m, a: [m.rot90(a), m.rot90(a, 2), m.rot90(a, -1, [1, 2]),
                             a.rot90(4)], ((2, 3, 4), "real")),
    C("fliplr_flipud", lambda m, a: [m.fliplr(a), m.flipud(a)], ((2, 3), "real")),
    C("movedim", lambda m, a: [m.movedim(a, 0, -1), m.moveaxis(a, (0, 1), (2, 0))],
      ((2, 3, 4), "real")),
    C("tile", lambda m, a: [m.tile(a, (2,)), a.tile((2, 1, 2))], ((2, 3), "real")),
    C("tensordot", lambda m, a, b: [m.tensordot(a, b, dims=1),
                                    m.tensordot(a, b, dims=([0, 1], [1, 0]))],
      ((3, 4), "real"), ((4, 3), "real")),
    C("tensordot_2", lambda m, a, b: m.tensordot(a, b), ((2, 3, 4), "real"),
      ((3, 4, 5), "real")),
    C("kron", lambda m, a, b: m.kron(a, b), ((2, 3), "real"), ((3,), "real")),
    C("diff", lambda m, a, p: [m.diff(a), m.diff(a, n=2, dim=0), a.diff(prepend=p, append=p)],
      ((4, 3), "real"), ((4, 1), "real")),
    C("diff_int", lambda m, a: m.diff(a), ((5,), "int"), grad=False),
    C("block_diag", lambda m, a, b, c: m.block_diag(a, b, c), ((2, 3), "real"),
      ((2,), "real"), ((), "real")),
    C("unique", lambda m, a: [m.unique(a), m.unique(a, return_inverse=True,
                                                      return_counts=True)],
      ((3, 4), "int"), grad=False),
    C("unique_float", lambda m, a: a.round().unique(sorted=True, return_counts=True),
      ((12,), "real"), grad=False),
    C("masked_select", lambda m, a, b: [m.masked_select(a, b > 0), a.masked_select(a > 0.5)],
      ((2, 3), "real"), ((3,), "real")),
    C("cartesian_prod", lambda m, a, b: m.cartesian_prod(a, b), ((3,), "real"),
      ((2,), "real")),
]



def F(m):
    return m.nn.functional


_ACT = ((3, 4), "real")
_KINKS = np.array([-3.0, 3.0, 0.0, 1.0, -1.0, 0.5, -0.5, 6.0, 2.0, -2.0])

CASES += [
    C("elu", lambda m, a: [F(m).elu(a), F(m).elu(a, alpha=0.7)], _ACT),
    C("selu_celu", lambda m, a: [F(m).selu(a), F(m).celu(a, 1.3)], _ACT),
    C("mish", lambda m, a: F(m).mish(a), _ACT),
    C("hardswish_hardsigmoid", lambda m, a: [F(m).hardswish(a * 3), F(m).hardsigmoid(a * 3)],
      _ACT),
    C("relu6_hardtanh", lambda m, a: [F(m).relu6(a * 5), F(m).hardtanh(a, -0.5, 0.8)], _ACT),
    C("softsign_logsigmoid", lambda m, a: [F(m).softsign(a), F(m).logsigmoid(a * 30)], _ACT),
    C("shrinks", lambda m, a: [F(m).tanhshrink(a), F(m).softshrink(a, 0.3),
                               F(m).hardshrink(a, 0.3), F(m).threshold(a, 0.1, -2.0)], _ACT),
    C("kinks", lambda m, a: [F(m).elu(a + m.tensor(_KINKS)), F(m).hardswish(a + m.tensor(_KINKS)),
                             F(m).hardsigmoid(a + m.tensor(_KINKS)),
                             F(m).relu6(a + m.tensor(_KINKS)),
                             F(m).hardtanh(a + m.tensor(_KINKS)),
                             F(m).softshrink(a + m.tensor(_KINKS))],
      ((10,), "zero"), fd=False),       # finite differences would straddle the kinks
    C("glu_softmin", lambda m, a: [F(m).glu(a), F(m).glu(a, 0), F(m).softmin(a, 1)],
      ((4, 6), "real")),
    C("prelu", lambda m, a, w, w1: [F(m).prelu(a, w), F(m).prelu(a, w1)], ((2, 3, 4), "real"),
      ((3,), "pos"), ((1,), "pos")),
    C("pairwise_distance", lambda m, a, b: [F(m).pairwise_distance(a, b),
                                            F(m).pairwise_distance(a, b, p=1, keepdim=True)],
      ((4, 3), "real"), ((4, 3), "real")),
    C("triplet", lambda m, a, p, n: [F(m).triplet_margin_loss(a, p, n),
                                     F(m).triplet_margin_loss(a, p, n, margin=3.0, swap=True,
                                                              reduction="none")],
      ((5, 3), "real"), ((5, 3), "real"), ((5, 3), "real")),
    C("margin_ranking", lambda m, a, b, t: F(m).margin_ranking_loss(a, b, m.sign(t), 0.2),
      ((6,), "real"), ((6,), "real"), ((6,), "real")),
    C("cosine_embedding", lambda m, a, b, t: [
        F(m).cosine_embedding_loss(a, b, m.sign(t), reduction="none"),
        F(m).cosine_embedding_loss(a, b, m.sign(t), margin=0.1)],
      ((5, 3), "real"), ((5, 3), "real"), ((5,), "real")),
    C("hinge_soft_margin", lambda m, a, t: [
        F(m).hinge_embedding_loss(a, m.sign(t).detach()),
        F(m).soft_margin_loss(a, m.sign(t).detach(), reduction="sum")],
      ((6,), "real"), ((6,), "real")),
    C("poisson_nll", lambda m, a, t: [F(m).poisson_nll_loss(a, t),
                                      F(m).poisson_nll_loss(a.exp(), t * 3, log_input=False,
                                                            full=True, reduction="none")],
      ((6,), "real"), ((6,), "pos")),
    C("gaussian_nll", lambda m, a, t, v: [F(m).gaussian_nll_loss(a, t, v),
                                          F(m).gaussian_nll_loss(a, t, v[:, :1] - 0.45,
                                                                 full=True, reduction="sum")],
      ((4, 3), "real"), ((4, 3), "real"), ((4, 3), "pos")),
    C("bilinear", lambda m, a, b, w, bias: [F(m).bilinear(a, b, w, bias),
                                            F(m).bilinear(a, b, w)],
      ((2, 3), "real"), ((2, 4), "real"), ((5, 3, 4), "real"), ((5,), "real")),
    C("pixel_shuffle", lambda m, a: [F(m).pixel_shuffle(a, 2),
                                     F(m).pixel_unshuffle(F(m).pixel_shuffle(a, 2), 2)],
      ((2, 8, 3, 2), "real")),
    C("adaptive_avg_pool1d", lambda m, a: [F(m).adaptive_avg_pool1d(a, 3),
                                           F(m).adaptive_avg_pool1d(a[0], 2)],
      ((2, 3, 7), "real")),
]


# PyTorch's float64 backward kernels of celu, hardsigmoid and hardswish use float32
# constants (`1.0 / alpha.toFloat()`, `1.0f / 6.0f`): their gradients are off by ~1e-8
_GRAD_RTOL = 1e-7


def _run(m, case, arrays, requires_grad):
    ts = [m.tensor(a) if a.dtype.kind != "f" else
          m.tensor(a, requires_grad=requires_grad) for a in arrays]
    return ts, _flat(case.f(m, *ts))


def _project(outs, seed=1):
    rng = np.random.default_rng(seed)
    total = 0.0
    for o in _floats(outs):
        w = rng.standard_normal(tuple(o.shape))
        keep = ~np.isnan(o.detach().numpy())
        total = total + (o.nan_to_num(0.0) * o.new_tensor(w * keep)).sum()
    return total


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_torch(case):
    arrays = case.arrays()
    ts, outs = _run(tg, case, arrays, case.grad)
    tts, touts = _run(torch, case, arrays, case.grad)
    assert len(outs) == len(touts)
    for o, t in zip(outs, touts):
        assert tuple(o.shape) == tuple(t.shape), case.name
        assert str(o.dtype) == str(t.dtype), case.name
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-9,
                                   atol=1e-12, equal_nan=True, err_msg=case.name)
    if not case.grad:
        return
    _project(outs).backward()
    _project(touts).backward()
    for a, b in zip(ts, tts):
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=_GRAD_RTOL, atol=1e-12,
                                       err_msg=case.name)


@pytest.mark.parametrize("case", [c for c in CASES if c.grad and c.fd], ids=lambda c: c.name)
def test_gradcheck(case):
    arrays = case.arrays(seed=3)
    floats = [k for k, a in enumerate(arrays) if a.dtype.kind == "f"]

    def fn(*xs):
        args = list(tg.tensor(a) for a in arrays)
        for k, x in zip(floats, xs):
            args[k] = x
        return tuple(o for o in _floats(_flat(case.f(tg, *args)))
                     if not np.isnan(o.detach().numpy()).any())
    xs = [tg.tensor(arrays[k], requires_grad=True) for k in floats]
    assert tg.autograd.gradcheck(fn, xs, eps=1e-6, atol=1e-5, rtol=1e-3)


@pytest.mark.parametrize("case", [c for c in CASES if c.compile], ids=lambda c: c.name)
def test_compiled_equals_eager(case):
    arrays = case.arrays(seed=5)

    def fn(*ts):
        outs = _flat(case.f(tg, *ts))
        return tuple(outs) + ((_project(outs),) if case.grad else ())
    ts, eager = _run(tg, case, arrays, case.grad)
    eager = fn(*ts)
    if case.grad:
        eager[-1].backward()
    eager_grads = [t.grad for t in ts]
    cts = [tg.tensor(a) if a.dtype.kind != "f" else tg.tensor(a, requires_grad=case.grad)
           for a in arrays]
    compiled = tg.compile(fn)(*cts)
    if case.grad:
        compiled[-1].backward()
    for o, c in zip(eager, compiled):
        assert o.dtype == c.dtype and o.shape == c.shape
        np.testing.assert_allclose(o.detach().numpy(), c.detach().numpy(), rtol=1e-12,
                                   equal_nan=True)
    for g, t in zip(eager_grads, cts):
        if g is not None:
            np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)


_JAX_FAST = ("logaddexp", "cdist", "median_dim", "quantile_dim", "searchsorted", "meshgrid",
             "rot90", "tensordot", "kron", "diff", "block_diag")


def _jax_case(case):
    pytest.importorskip("jax")
    arrays = case.arrays(seed=7)

    def fn(*ts):
        outs = _flat(case.f(tg, *ts))
        return tuple(outs) + ((_project(outs),) if case.grad else ())

    def run(**kw):
        ts = [tg.tensor(a) if a.dtype.kind != "f" else tg.tensor(a, requires_grad=case.grad)
              for a in arrays]
        outs = tg.compile(fn, **kw)(*ts)
        if case.grad:
            outs[-1].backward()
        return outs, [t.grad for t in ts]
    (eo, eg), (jo, jg) = run(), run(backend="jax")
    for a, b in zip(eo, jo):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9,
                                   atol=1e-12, equal_nan=True)
    for a, b in zip(eg, jg):
        if a is not None:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if c.name in _JAX_FAST],
                         ids=lambda c: c.name)
def test_jax_backend_equals_numpy_backend(case):
    _jax_case(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c.name not in _JAX_FAST],
                         ids=lambda c: c.name)
def test_jax_backend_equals_numpy_backend_all(case):
    _jax_case(case)


# ---------------- modules ----------------

_MODULES = [
    ("ELU", (), {"alpha": 0.5}), ("SELU", (), {}), ("CELU", (), {}), ("Mish", (), {}),
    ("Hardswish", (), {}), ("Hardsigmoid", (), {}), ("ReLU6", (), {}),
    ("Hardtanh", (-0.5, 0.5), {}), ("Softsign", (), {}), ("LogSigmoid", (), {}),
    ("Tanhshrink", (), {}), ("Softshrink", (0.2,), {}), ("Hardshrink", (), {}),
    ("Threshold", (0.1, 20.0), {}), ("GLU", (), {}), ("Softmin", (1,), {}),
    ("PReLU", (4,), {}), ("PixelShuffle", (2,), {}), ("PixelUnshuffle", (2,), {}),
    ("AdaptiveAvgPool1d", (3,), {}),
]


@pytest.mark.parametrize("name,args,kw", _MODULES, ids=[m[0] for m in _MODULES])
def test_module_matches_torch(name, args, kw):
    x = np.random.default_rng(0).standard_normal((2, 4, 6, 6) if "Pixel" in name else (2, 4, 6))
    tm = getattr(torch.nn, name)(*args, **kw).double()
    gm = getattr(tg.nn, name)(*args, **kw).double()
    gm.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert repr(gm) == repr(tm)
    a, b = torch.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
    tm(a).square().sum().backward()
    gm(b).square().sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-7, atol=1e-12)
    for (k, p), q in zip(tm.named_parameters(), gm.parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-9, err_msg=k)


def test_inplace_activations_bump_the_version_and_match_torch():
    x = np.random.default_rng(0).standard_normal((3, 4))
    for name in ("ELU", "SELU", "CELU", "Hardswish", "Hardsigmoid", "ReLU6", "Mish"):
        outs = []
        for m in (torch, tg):
            leaf = m.tensor(x, requires_grad=True)
            h = leaf * 2
            v = h._version
            y = getattr(m.nn, name)(inplace=True)(h)
            assert h._version > v and y is h
            y.sum().backward()
            outs.append(leaf.grad.numpy())
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-7, err_msg=name)


def test_loss_modules_match_functional():
    rng = np.random.default_rng(0)
    a, b, c = (tg.tensor(rng.standard_normal((4, 3))) for _ in range(3))
    t = tg.tensor([1.0, -1.0, 1.0, -1.0])
    nn, F = tg.nn, tg.nn.functional
    assert nn.TripletMarginLoss(margin=2.0)(a, b, c).item() == \
        F.triplet_margin_loss(a, b, c, margin=2.0).item()
    assert nn.MarginRankingLoss(0.1)(a[:, 0], b[:, 0], t).item() == \
        F.margin_ranking_loss(a[:, 0], b[:, 0], t, 0.1).item()
    assert nn.CosineEmbeddingLoss()(a, b, t).item() == F.cosine_embedding_loss(a, b, t).item()
    assert nn.HingeEmbeddingLoss()(a[:, 0], t).item() == \
        F.hinge_embedding_loss(a[:, 0], t).item()
    assert nn.SoftMarginLoss()(a[:, 0], t).item() == F.soft_margin_loss(a[:, 0], t).item()
    assert nn.PoissonNLLLoss()(a, b.abs()).item() == F.poisson_nll_loss(a, b.abs()).item()
    assert nn.GaussianNLLLoss()(a, b, c.abs()).item() == \
        F.gaussian_nll_loss(a, b, c.abs()).item()
    assert nn.PairwiseDistance()(a, b).tolist() == F.pairwise_distance(a, b).tolist()
    assert nn.CosineSimilarity()(a, b).tolist() == F.cosine_similarity(a, b).tolist()


def test_bilinear_module_init_and_values_match_torch():
    tm, gm = torch.nn.Bilinear(3, 4, 5).double(), tg.nn.Bilinear(3, 4, 5)
    assert repr(gm) == repr(tm)
    assert gm.weight.shape == (5, 3, 4) and gm.bias.shape == (5,)
    assert float(gm.weight.abs().max()) <= 1 / np.sqrt(3)
    assert tg.nn.Bilinear(3, 4, 5, bias=False).bias is None
    gm.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(0)
    x1, x2 = rng.standard_normal((2, 3)), rng.standard_normal((2, 4))
    np.testing.assert_allclose(gm(tg.tensor(x1), tg.tensor(x2)).detach().numpy(),
                               tm(torch.tensor(x1), torch.tensor(x2)).detach().numpy(),
                               rtol=1e-12)


# ---------------- errors ----------------

_ERRORS = [
    lambda m: m.rot90(m.ones(2, 2), 1, [0]),
    lambda m: m.rot90(m.ones(2, 2), 1, [1, 1]),
    lambda m: m.cdist(m.ones(2, 3), m.ones(2, 4)),
    lambda m: m.tensordot(m.ones(2, 3), m.ones(4, 3), dims=([1], [0])),
    lambda m: m.diff(m.tensor(1.0)),
    lambda m: m.masked_select(m.ones(3), m.ones(3)),
    lambda m: m.quantile(m.ones(3), 1.5),
    lambda m: m.quantile(m.ones(3), 0.5, interpolation="cubic"),
    lambda m: m.block_diag(m.ones(2, 2, 2)),
    lambda m: m.meshgrid(m.ones(2, 2), indexing="ij"),
    lambda m: m.nn.functional.glu(m.ones(3)),
    lambda m: m.nn.functional.pixel_shuffle(m.ones(1, 3, 2, 2), 2),
    lambda m: m.nn.functional.prelu(m.ones(2, 3), m.ones(2)),
    lambda m: m.nn.functional.softshrink(m.ones(2), -1.0),
]


@pytest.mark.parametrize("k", range(len(_ERRORS)))
def test_errors_have_torch_types(k):
    with pytest.raises(Exception) as te:
        _ERRORS[k](torch)
    with pytest.raises(type(te.value)):
        _ERRORS[k](tg)


def test_meshgrid_warns_without_indexing_as_torch():
    with pytest.warns(UserWarning, match="indexing"):
        tg.meshgrid(tg.ones(2), tg.ones(3))


# ---------------- ConvTranspose1d, pad_sequence ----------------

@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1, "output_padding": 1},
                                {"groups": 2, "dilation": 2, "bias": False}],
                         ids=["plain", "strided", "grouped"])
def test_conv_transpose1d_matches_torch(kw):
    tm = torch.nn.ConvTranspose1d(4, 6, 3, **kw).double()
    gm = tg.nn.ConvTranspose1d(4, 6, 3, **kw).double()
    assert repr(gm) == repr(tm)
    gm.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 4, 7))
    a, b = torch.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
    ya, yb = tm(a), gm(b)
    ya.square().sum().backward()
    yb.square().sum().backward()
    np.testing.assert_allclose(yb.detach().numpy(), ya.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gm.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-12)
    y = tg.compile(lambda t: gm(t).square().sum())(tg.tensor(x))
    np.testing.assert_allclose(y.item(), yb.square().sum().item(), rtol=1e-12)


def test_conv_transpose1d_output_size_unbatched_and_gradcheck():
    m = tg.nn.ConvTranspose1d(4, 6, 3, stride=2)
    assert m(tg.randn(4, 5), output_size=[12]).shape == (6, 12)
    with pytest.raises(ValueError):
        m(tg.randn(4, 5), output_size=[20])
    x = tg.randn(1, 2, 4, dtype=tg.float64, requires_grad=True)
    w = tg.randn(2, 3, 3, dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradcheck(lambda x, w: tg.nn.functional.conv_transpose1d(x, w, stride=2),
                                 [x, w])


@pytest.mark.parametrize("kw", [{}, {"batch_first": True, "padding_value": -1.0},
                                {"batch_first": True, "padding_side": "left"}])
def test_pad_sequence_matches_torch(kw):
    from torch.nn.utils import rnn as R
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((n, 3)) for n in (2, 4, 1)]
    a = [torch.tensor(x, requires_grad=True) for x in xs]
    b = [tg.tensor(x, requires_grad=True) for x in xs]
    ya, yb = R.pad_sequence(a, **kw), tg.nn.utils.rnn.pad_sequence(b, **kw)
    np.testing.assert_array_equal(yb.detach().numpy(), ya.detach().numpy())
    (ya * ya).sum().backward()
    (yb * yb).sum().backward()
    for p, q in zip(a, b):
        np.testing.assert_array_equal(q.grad.numpy(), p.grad.numpy())


# ---------------- EmbeddingBag ----------------

_BAGS = [({"input": [[1, 2, 4], [4, 3, 9]]}, "2d"),
         ({"input": [1, 2, 4, 5, 4, 3, 2, 9], "offsets": [0, 4, 4]}, "offsets_empty_bag"),
         ({"input": [1, 2, 4, 5, 4, 3, 2, 9], "offsets": [0, 3, 8],
           "include_last_offset": True}, "include_last_offset")]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("case", [c for c, _ in _BAGS], ids=[i for _, i in _BAGS])
def test_embedding_bag_matches_torch(case, mode):
    W = np.random.default_rng(0).standard_normal((10, 3))
    for pad in (None, 4):
        out = []
        for m in (torch, tg):
            w = m.tensor(W, requires_grad=True)
            off = m.tensor(case["offsets"]) if "offsets" in case else None
            y = m.nn.functional.embedding_bag(
                m.tensor(case["input"]), w, off, mode=mode, padding_idx=pad,
                include_last_offset=case.get("include_last_offset", False))
            (y * y).sum().backward()
            out.append((y.detach().numpy(), w.grad.numpy()))
        np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-12, atol=1e-14)


def test_embedding_bag_per_sample_weights_module_and_compile():
    rng = np.random.default_rng(0)
    tm = torch.nn.EmbeddingBag(10, 3, mode="sum", padding_idx=1).double()
    gm = tg.nn.EmbeddingBag(10, 3, mode="sum", padding_idx=1).double()
    assert repr(gm) == repr(tm)
    assert gm.weight[1].abs().sum().item() == 0
    gm.load_state_dict({"weight": tg.tensor(tm.weight.detach().numpy())})
    idx, off, psw = [1, 2, 4, 5, 4, 3, 2, 9], [0, 4], rng.uniform(0.5, 1.5, 8)
    a, b = torch.tensor(psw, requires_grad=True), tg.tensor(psw, requires_grad=True)
    tm(torch.tensor(idx), torch.tensor(off), a).square().sum().backward()
    gm(tg.tensor(idx), tg.tensor(off), b).square().sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gm.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-12)
    f = tg.compile(lambda i, o: gm(i, o).sum())
    for offs in ([0, 4], [0, 2], [0, 8]):          # new bag layouts reuse the one program
        eager = gm(tg.tensor(idx), tg.tensor(offs)).sum().item()
        assert abs(f(tg.tensor(idx), tg.tensor(offs)).item() - eager) < 1e-12
    assert f.stats.traces == 1
    with pytest.raises(NotImplementedError):
        tg.nn.functional.embedding_bag(tg.tensor([[1, 2]]), gm.weight, mode="mean",
                                       per_sample_weights=tg.ones(1, 2))


# ---------------- autograd behaviour of random ops ----------------

def test_random_fills_on_a_leaf_requiring_grad_name_themselves():
    for fill in ("normal_", "uniform_"):
        x = tg.zeros(3, requires_grad=True)
        with pytest.raises(RuntimeError, match=fill):
            getattr(x, fill)()
        with tg.no_grad():
            getattr(x, fill)()                 # allowed, as in PyTorch
        assert x._version > 0


def test_bernoulli_of_a_tensor_requiring_grad_gives_a_zero_gradient_like_torch():
    for m in (torch, tg):
        p = m.full((4,), 0.5, requires_grad=True)
        out = m.bernoulli(p)
        assert out.requires_grad and out.grad_fn is not None
        out.sum().backward()
        assert p.grad.tolist() == [0.0] * 4
        with m.no_grad():
            assert not m.bernoulli(p).requires_grad
    f = tg.compile(lambda p: tg.bernoulli(p).sum())
    p = tg.full((4,), 0.5, requires_grad=True)
    f(p).backward()
    assert p.grad.tolist() == [0.0] * 4


# ---------------- interpolate: nearest-exact, area ----------------

@pytest.mark.parametrize("mode", ["nearest-exact", "area"])
@pytest.mark.parametrize("kw", [{"size": (4, 9)}, {"scale_factor": 1.7}, {"size": (3, 2)}],
                         ids=["up", "scale", "down"])
def test_interpolate_new_modes_match_torch(mode, kw):
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 5))
    for arr, how in ((x, kw), (x[:, :, 0], {"scale_factor": 1.5})):
        out = []
        for m in (torch, tg):
            a = m.tensor(arr, requires_grad=True)
            y = m.nn.functional.interpolate(a, mode=mode, **how)
            (y * y).sum().backward()
            out.append((y.detach().numpy(), a.grad.numpy()))
        np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-12, atol=1e-14)
    f = tg.compile(lambda t: tg.nn.functional.interpolate(t, mode=mode, **kw).square().sum())
    eager = tg.nn.functional.interpolate(tg.tensor(x), mode=mode, **kw).square().sum()
    assert abs(f(tg.tensor(x)).item() - eager.item()) < 1e-12
