"""This round's pooling, sampling and loss additions against PyTorch: adaptive max pooling
(values, indices, gradients), max unpooling, affine_grid + grid_sample (every mode, padding
mode and align_corners, gradients in input and grid), gumbel_softmax, pdist,
LocalResponseNorm and the margin losses; float64 finite differences, compiled == eager
(numpy, and JAX for a subset), repr, state_dict keys and errors (helpers of
`test_ops_training_more.py` and `test_nn_layers3.py`)."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from test_ops_training_more import _np, _torch, check_like_torch, raises_like
from test_nn_layers3 import same_repr_and_keys


def _distinct(shape, dtype, seed=0):
    """Values without ties (max pooling's gradient is then unambiguous)."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) / n + rng.standard_normal(shape) * 1e-3
            ).astype(dtype)


# ---------------- adaptive max pooling ----------------
@pytest.mark.parametrize("name,shape,size", [("adaptive_max_pool1d", (2, 3, 7), 3),
                                             ("adaptive_max_pool1d", (3, 5), 5),
                                             ("adaptive_max_pool2d", (2, 3, 5, 7), (3, 4)),
                                             ("adaptive_max_pool2d", (3, 6, 5), (2, None)),
                                             ("adaptive_max_pool2d", (1, 2, 3, 3), 5),
                                             ("adaptive_max_pool3d", (1, 2, 4, 5, 3), (2, None, 2)),
                                             ("adaptive_max_pool3d", (2, 3, 5, 4), 2)])
def test_adaptive_max_pool_like_torch(name, shape, size):
    def fn(m, x):
        vals, idx = getattr(m.nn.functional, name)(x, size, return_indices=True)
        assert str(idx.dtype).endswith("int64")
        return vals * 1 + idx.to(x.dtype) * 0 if m is tg else vals
    check_like_torch(fn, None, arrays=lambda dt: [_distinct(shape, dt)],
                     jax=name.endswith("2d") and len(shape) == 4 and size == (3, 4))
    x = _distinct(shape, "float64")
    torch = _torch()
    tv, ti = getattr(torch.nn.functional, name)(torch.tensor(x), size, return_indices=True)
    gv, gi = getattr(tg.nn.functional, name)(tg.tensor(x), size, return_indices=True)
    assert gi.tolist() == ti.tolist()
    ties = np.zeros(shape)                    # ties: the first maximal position, as PyTorch
    assert getattr(tg.nn.functional, name)(tg.tensor(ties), size, True)[1].tolist() == \
        getattr(torch.nn.functional, name)(torch.tensor(ties), size, True)[1].tolist()
    mod = "AdaptiveMaxPool" + name[-2:]
    same_repr_and_keys(lambda nn: getattr(nn, mod)(size))
    assert tg.nn.AdaptiveMaxPool2d(2, True)(tg.ones(1, 1, 4, 4))[1].shape == (1, 1, 2, 2)


def test_adaptive_max_pool_errors():
    F = lambda m: m.nn.functional            # noqa: E731
    for f in (lambda m: F(m).adaptive_max_pool1d(m.ones(3), 2),
              lambda m: F(m).adaptive_max_pool2d(m.ones(3, 4), 2),
              lambda m: F(m).adaptive_max_pool2d(m.ones(1, 3, 4, 4), (2,)),
              lambda m: F(m).adaptive_max_pool1d(m.ones(2, 3, 0), 2),
              lambda m: F(m).adaptive_max_pool3d(m.ones(2, 3, 4), 2)):
        te, ge = raises_like(f)
        assert str(te) in str(ge)


# ---------------- max unpooling ----------------
@pytest.mark.parametrize("k,shape,kw", [(1, (2, 3, 8), dict(kernel_size=2)),
                                        (1, (3, 9), dict(kernel_size=3, stride=2, padding=1)),
                                        (2, (2, 2, 6, 7), dict(kernel_size=2)),
                                        (2, (2, 5, 5), dict(kernel_size=3, stride=2,
                                                            padding=1))])
def test_max_unpool_inverts_max_pool_like_torch(k, shape, kw):
    def fn(m, x):
        F = m.nn.functional
        pool = getattr(F, f"max_pool{k}d")
        unpool = getattr(F, f"max_unpool{k}d")
        v, i = pool(x, return_indices=True, **kw)
        return unpool(v * 2, i, output_size=tuple(x.shape[-k:]), **kw)
    # overlapping windows (stride < kernel) can pick one position twice: both copies get
    # its gradient (PyTorch's gather backward), which finite differences cannot see
    overlap = kw.get("stride", kw["kernel_size"]) < kw["kernel_size"]
    check_like_torch(fn, None, arrays=lambda dt: [_distinct(shape, dt)], jax=k == 2,
                     gradcheck=not overlap)
    name = f"MaxUnpool{k}d"
    same_repr_and_keys(lambda nn: getattr(nn, name)(**kw))


def test_max_unpool3d_like_torch():
    torch = _torch()          # (tracegrad has no max_pool3d: PyTorch's indices, as data)
    big = _distinct((1, 2, 4, 5, 4), "float64")
    _, idx = torch.nn.functional.max_pool3d(torch.tensor(big), 2, return_indices=True)
    idx = idx.numpy()
    check_like_torch(lambda m, v: m.nn.MaxUnpool3d(2)(v, m.tensor(idx), output_size=(4, 5, 4)),
                     [idx.shape], jax=False)
    same_repr_and_keys(lambda nn: nn.MaxUnpool3d(2, stride=1))


def test_max_unpool_module_default_size_and_errors():
    torch = _torch()
    x = _distinct((1, 2, 4, 4), "float64")
    outs = []
    for m in (torch, tg):
        v, i = m.nn.functional.max_pool2d(m.tensor(x), 2, return_indices=True)
        outs.append(_np(m.nn.MaxUnpool2d(2)(v, i)))
        outs.append(_np(m.nn.MaxUnpool2d(2)(v, i, output_size=(1, 2, 5, 5))))
    np.testing.assert_array_equal(outs[0], outs[2])
    np.testing.assert_array_equal(outs[1], outs[3])
    F = lambda m: m.nn.functional            # noqa: E731
    idx = np.zeros((1, 1, 2, 2), np.int64)
    te, ge = raises_like(lambda m: F(m).max_unpool2d(m.ones(1, 1, 2, 2), m.tensor(idx), 2,
                                                     output_size=(7, 7)))
    assert str(te) == str(ge)
    te, ge = raises_like(lambda m: F(m).max_unpool2d(m.ones(1, 1, 2, 2), m.full((1, 1, 2, 2), 99),
                                                     2))
    assert str(te) in str(ge)
    raises_like(lambda m: F(m).max_unpool2d(m.ones(1, 1, 2, 2), m.tensor(idx[..., :1]), 2))


# ---------------- affine_grid + grid_sample ----------------
def _theta(dt, n=2, k=2):
    rng = np.random.default_rng(4)
    eye = np.eye(k, k + 1)
    return (eye + rng.standard_normal((n, k, k + 1)) * 0.4).astype(dt)


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("mode,padding_mode", [("bilinear", "zeros"), ("bilinear", "border"),
                                               ("bilinear", "reflection"), ("nearest", "zeros"),
                                               ("nearest", "reflection"), ("bicubic", "zeros"),
                                               ("bicubic", "reflection")])
def test_grid_sample_like_torch(mode, padding_mode, align_corners):
    def arrays(dt):
        rng = np.random.default_rng(1)
        return [rng.standard_normal((2, 3, 4, 5)).astype(dt), _theta(dt)]

    def fn(m, x, theta):
        F = m.nn.functional
        grid = F.affine_grid(theta, (2, 3, 5, 6), align_corners=align_corners) * 1.4
        return F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode,
                             align_corners=align_corners)
    jax = mode != "nearest" and padding_mode == "reflection" and align_corners
    # bicubic theta gradients sum large terms: float32 rounding exceeds 1e-5 there
    check_like_torch(fn, None, arrays=arrays, jax=jax, gradcheck=mode != "nearest",
                     dtypes=("float64",) if mode == "bicubic" else ("float32", "float64"))


def test_grid_sample_random_grid_grad_and_boundaries():
    """Free grids (gradient straight into the grid), including points exactly on the image
    border and far outside it."""
    def arrays(dt):
        rng = np.random.default_rng(2)
        g = rng.uniform(-1.6, 1.6, (2, 4, 3, 2))
        g[0, 0, 0] = (-1.0, 1.0)
        g[0, 1, 0] = (1.0, -1.0)
        g[1, 2, 2] = (0.0, -1.0)
        return [rng.standard_normal((2, 2, 3, 4)).astype(dt), g.astype(dt)]
    for pm in ("zeros", "border", "reflection"):
        for ac in (True, False):
            check_like_torch(lambda m, x, g: m.nn.functional.grid_sample(
                x, g, padding_mode=pm, align_corners=ac), None, arrays=arrays,
                gradcheck=False, compiled=pm == "border", jax=False)


@pytest.mark.parametrize("mode,padding_mode", [("bilinear", "zeros"), ("bilinear", "reflection"),
                                               ("nearest", "border")])
def test_grid_sample_volumes_like_torch(mode, padding_mode):
    def arrays(dt):
        rng = np.random.default_rng(6)
        return [rng.standard_normal((2, 2, 3, 4, 3)).astype(dt), _theta(dt, k=3)]

    def fn(m, x, theta):
        F = m.nn.functional
        grid = F.affine_grid(theta, (2, 2, 2, 3, 4), align_corners=False) * 1.3
        return F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode,
                             align_corners=False)
    check_like_torch(fn, None, arrays=arrays, jax=padding_mode == "reflection",
                     gradcheck=mode == "bilinear" and padding_mode == "zeros")


def test_affine_grid_3d_unit_sizes_and_errors():
    check_like_torch(lambda m, th: m.nn.functional.affine_grid(th, (2, 1, 3, 4, 5),
                                                               align_corners=False),
                     None, arrays=lambda dt: [_theta(dt, k=3)], jax=False)
    check_like_torch(lambda m, th: m.nn.functional.affine_grid(th, (2, 1, 1, 4),
                                                               align_corners=False),
                     None, arrays=lambda dt: [_theta(dt)], jax=False, compiled=False)
    F = lambda m: m.nn.functional            # noqa: E731
    for f in (lambda m: F(m).affine_grid(m.ones(2, 2, 3), (2, 1, 4), align_corners=False),
              lambda m: F(m).affine_grid(m.ones(2, 3, 3), (2, 1, 4, 4), align_corners=False),
              lambda m: F(m).affine_grid(m.ones(2, 2, 3, dtype=m.int64), (2, 1, 4, 4)),
              lambda m: F(m).affine_grid(m.ones(2, 2, 3), (2, 1, 0, 4), align_corners=False),
              lambda m: F(m).grid_sample(m.ones(1, 1, 3, 3), m.ones(1, 2, 2, 2), mode="cubic"),
              lambda m: F(m).grid_sample(m.ones(1, 1, 3, 3), m.ones(1, 2, 2, 2),
                                         padding_mode="wrap"),
              lambda m: F(m).grid_sample(m.ones(1, 1, 3, 3), m.ones(1, 2, 2, 3),
                                         align_corners=False),
              lambda m: F(m).grid_sample(m.ones(2, 1, 3, 3), m.ones(1, 2, 2, 2),
                                         align_corners=False),
              lambda m: F(m).grid_sample(m.ones(1, 1, 2, 2, 2), m.zeros(1, 1, 1, 1, 3),
                                         mode="bicubic", align_corners=False)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            te, ge = raises_like(f)
        if isinstance(te, ValueError):
            assert str(te) == str(ge)
    for m in (_torch(), tg):
        with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
            m.nn.functional.affine_grid(m.ones(1, 2, 3), (1, 1, 2, 2))


def test_spatial_transformer_trains_compiled_on_jax():
    """An STN step: localization net -> theta -> affine_grid -> grid_sample -> loss."""
    pytest.importorskip("jax")
    rng = np.random.default_rng(0)
    x = tg.tensor(rng.standard_normal((2, 1, 6, 6)))
    loc = tg.nn.Linear(36, 6).double()

    def f(x):
        theta = loc(x.reshape(2, 36)).reshape(2, 2, 3) * 0.1 + tg.tensor(
            [[1.0, 0, 0], [0, 1.0, 0]], dtype=tg.float64)
        grid = tg.nn.functional.affine_grid(theta, (2, 1, 4, 4), align_corners=False)
        out = tg.nn.functional.grid_sample(x, grid, padding_mode="border",
                                           align_corners=False)
        return (out ** 2).mean()
    e = f(x)
    e.backward()
    eg = [p.grad.numpy().copy() for p in loc.parameters()]
    loc.zero_grad()
    cf = tg.compile(f, backend="jax")
    c = cf(x)
    c.backward()
    np.testing.assert_allclose(_np(c), _np(e), rtol=1e-12)
    for p, g in zip(loc.parameters(), eg):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-10, atol=1e-14)


# ---------------- gumbel_softmax ----------------
def test_gumbel_softmax_samples_reproduce_and_compile():
    F = tg.nn.functional
    logits = tg.tensor(np.log([[0.1, 0.2, 0.7]] * 4000), requires_grad=True)
    tg.manual_seed(0)
    soft = F.gumbel_softmax(logits, tau=0.5)
    assert np.allclose(_np(soft).sum(-1), 1.0)
    tg.manual_seed(0)
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    h = _np(hard)
    assert set(np.unique(h)) == {0.0, 1.0} and np.all(h.sum(-1) == 1)
    np.testing.assert_allclose(h.mean(0), [0.1, 0.2, 0.7], atol=0.03)   # Gumbel-max: exact
    assert np.array_equal(h.argmax(-1), _np(soft).argmax(-1))            # same draw
    # straight-through: the gradient is the soft sample's
    w = tg.tensor(np.random.default_rng(0).standard_normal((4000, 3)))
    (hard * w).sum().backward()
    g_hard, logits.grad = _np(logits.grad), None
    (soft * w).sum().backward()
    np.testing.assert_allclose(g_hard, _np(logits.grad), rtol=1e-10, atol=1e-12)
    with pytest.warns(UserWarning, match="deprecated"):
        F.gumbel_softmax(logits, eps=1e-5)
    x = tg.tensor(np.random.default_rng(1).standard_normal((5, 4)), requires_grad=True)
    f = lambda t: (F.gumbel_softmax(t, tau=0.7, hard=True, dim=0) * t).sum()   # noqa: E731
    for backend in ("numpy", "jax"):
        if backend == "jax":
            pytest.importorskip("jax")
        cf = tg.compile(f, backend=backend)
        for seed in (1, 2):
            tg.manual_seed(seed)
            e = f(x)
            e.backward()
            eg, x.grad = _np(x.grad), None
            tg.manual_seed(seed)
            c = cf(x)
            c.backward()
            np.testing.assert_allclose(_np(c), _np(e), rtol=1e-12)
            np.testing.assert_allclose(_np(x.grad), eg, rtol=1e-12)
            x.grad = None
        assert cf.stats.traces == 1


# ---------------- pdist, LocalResponseNorm ----------------
@pytest.mark.parametrize("p", [2, 1, 3.5, 0])
def test_pdist_like_torch(p):
    check_like_torch(lambda m, x: m.nn.functional.pdist(x, p), [(5, 3)], jax=p == 2,
                     grad=p != 0, gradcheck=p != 0)


def test_pdist_errors():
    for f in (lambda m: m.nn.functional.pdist(m.ones(2, 3, 4)),
              lambda m: m.nn.functional.pdist(m.ones(2, 3), p=-1)):
        te, ge = raises_like(f)
        assert str(te) in str(ge)


@pytest.mark.parametrize("size,shape,kw", [(3, (2, 5, 4, 4), dict()),
                                           (2, (2, 4, 6), dict(alpha=0.1, beta=0.5, k=2.0)),
                                           (5, (1, 3, 2, 2, 2), dict(alpha=1.0))])
def test_local_response_norm_like_torch(size, shape, kw):
    check_like_torch(lambda m, x: m.nn.LocalResponseNorm(size, **kw)(x), [shape],
                     jax=len(shape) == 4)
    same_repr_and_keys(lambda nn: nn.LocalResponseNorm(size, **kw))
    te, ge = raises_like(lambda m: m.nn.functional.local_response_norm(m.ones(2, 3), 2))
    assert str(te) == str(ge)


# ---------------- margin losses ----------------
def _class_target(dt, n=4, c=5, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, c)).astype(dt), rng.integers(0, c, n)]


@pytest.mark.parametrize("kw", [dict(), dict(p=2, margin=0.7), dict(reduction="sum"),
                                dict(reduction="none", weight=True)])
def test_multi_margin_loss_like_torch(kw):
    def fn(m, x, t):
        k = dict(kw)
        if k.pop("weight", None):
            k["weight"] = m.tensor(np.linspace(0.5, 2, 5), dtype=x.dtype)
        return m.nn.MultiMarginLoss(**k)(x, t)
    check_like_torch(fn, None, arrays=_class_target, jax=kw.get("p") == 2, gradcheck=False)
    check_like_torch(lambda m, x, t: m.nn.functional.multi_margin_loss(x[0], t[0]), None,
                     arrays=_class_target, jax=False, compiled=False, gradcheck=False)
    tm, gm = same_repr_and_keys(lambda nn: nn.MultiMarginLoss(weight=(
        _torch() if nn is _torch().nn else tg).ones(3)))
    F = lambda m: m.nn.functional            # noqa: E731
    for f in (lambda m: F(m).multi_margin_loss(m.ones(2, 3), m.tensor([0, 3])),
              lambda m: F(m).multi_margin_loss(m.ones(2, 3), m.tensor([0, 1]), p=3),
              lambda m: F(m).multi_margin_loss(m.ones(2, 3), m.tensor([0, 1, 1]))):
        te, ge = raises_like(f)
        assert str(te) in str(ge)


def _multilabel(dt):
    rng = np.random.default_rng(3)
    t = np.array([[3, 0, -1, 1, 2], [1, 1, 4, -1, -1], [-1, 0, 1, 2, 3], [0, 1, 2, 3, 4]])
    return [rng.standard_normal((4, 5)).astype(dt), t]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss_like_torch(reduction):
    check_like_torch(lambda m, x, t: m.nn.MultiLabelMarginLoss(reduction=reduction)(x, t),
                     None, arrays=_multilabel, jax=reduction == "mean", gradcheck=False)
    check_like_torch(lambda m, x, t: m.nn.functional.multilabel_margin_loss(x[0], t[0]),
                     None, arrays=_multilabel, jax=False, compiled=False, gradcheck=False)
    for f in (lambda m: m.nn.functional.multilabel_margin_loss(m.ones(2, 3),
                                                               m.tensor([[0, 1, -1]])),
              lambda m: m.nn.functional.multilabel_margin_loss(
                  m.ones(2, 3), m.tensor([[0, 5, -1], [0, 1, 2]]))):
        te, ge = raises_like(f)
        assert str(te) in str(ge)


@pytest.mark.parametrize("kw", [dict(), dict(weight=True, reduction="sum"),
                                dict(reduction="none")])
def test_multilabel_soft_margin_loss_like_torch(kw):
    def arrays(dt):
        rng = np.random.default_rng(5)
        return [rng.standard_normal((3, 4)).astype(dt),
                rng.integers(0, 2, (3, 4)).astype(dt)]

    def fn(m, x, y):
        k = dict(kw)
        if k.pop("weight", None):
            k["weight"] = m.tensor(np.linspace(0.5, 2, 4), dtype=x.dtype)
        return m.nn.MultiLabelSoftMarginLoss(**k)(x, y)
    check_like_torch(fn, None, arrays=arrays, jax=not kw)
    same_repr_and_keys(lambda nn: nn.MultiLabelSoftMarginLoss())


@pytest.mark.parametrize("kw", [dict(), dict(swap=True, margin=0.5, reduction="sum"),
                                dict(distance="cosine", reduction="none")])
def test_triplet_margin_with_distance_loss_like_torch(kw):
    def fn(m, a, p, n):
        k = dict(kw)
        if k.pop("distance", None):
            k["distance_function"] = lambda x, y: 1.0 - m.nn.functional.cosine_similarity(x, y)
        return m.nn.TripletMarginWithDistanceLoss(**k)(a, p, n)
    check_like_torch(fn, [(4, 3), (4, 3), (4, 3)], jax=not kw)
    same_repr_and_keys(lambda nn: nn.TripletMarginWithDistanceLoss(margin=0.5))
    te, ge = raises_like(lambda m: m.nn.functional.triplet_margin_with_distance_loss(
        m.ones(2, 3), m.ones(2, 3), m.ones(2, 3), margin=0))
    assert str(te) == str(ge)
    raises_like(lambda m: m.nn.functional.triplet_margin_with_distance_loss(
        m.ones(2, 3), m.ones(3), m.ones(2, 3)))


def test_margin_losses_gradcheck_float64():
    F = tg.nn.functional
    x, t = _class_target("float64")
    w = tg.tensor(np.linspace(0.5, 2, 5))
    xt, tt = tg.tensor(x, requires_grad=True), tg.tensor(t)
    assert tg.autograd.gradcheck(lambda a: F.multi_margin_loss(a, tt, p=2, weight=w), [xt])
    x, t = _multilabel("float64")
    assert tg.autograd.gradcheck(lambda a: F.multilabel_margin_loss(a, tg.tensor(t)),
                                 [tg.tensor(x, requires_grad=True)])


# ---------------- LPPool, ChannelShuffle, upsample aliases ----------------
@pytest.mark.parametrize("name,args,shape", [("LPPool1d", (2, 3), (2, 3, 8)),
                                             ("LPPool1d", (1.5, 2, 1, True), (3, 7)),
                                             ("LPPool2d", (2, 2), (1, 2, 4, 6)),
                                             ("LPPool2d", (3, (2, 3), (1, 2)), (2, 5, 7)),
                                             ("LPPool2d", (float("inf"), 2), (1, 2, 4, 4))])
def test_lp_pool_like_torch(name, args, shape):
    domain = "pos" if args[0] not in (2, float("inf")) else "real"
    check_like_torch(lambda m, x: getattr(m.nn, name)(*args)(x), [shape], domain=domain,
                     jax=name == "LPPool2d" and args[0] == 2,
                     arrays=(lambda dt: [_distinct(shape, dt) - 0.5])
                     if args[0] == float("inf") else None)
    same_repr_and_keys(lambda nn: getattr(nn, name)(*args))


def test_channel_shuffle_and_upsample_aliases_like_torch():
    check_like_torch(lambda m, x: m.nn.ChannelShuffle(3)(x) * x, [(2, 6, 2, 2)], jax=False)
    check_like_torch(lambda m, x: m.nn.functional.channel_shuffle(x, 2), [(1, 4, 3)],
                     jax=False, gradcheck=False)
    same_repr_and_keys(lambda nn: nn.ChannelShuffle(4))
    for f in (lambda m: m.nn.functional.channel_shuffle(m.ones(1, 6, 2), 4),
              lambda m: m.nn.functional.channel_shuffle(m.ones(3), 1)):
        te, ge = raises_like(f)
        assert str(te) in str(ge)
    for name, kw in (("upsample", dict(scale_factor=2, mode="bilinear", align_corners=False)),
                     ("upsample_nearest", dict(size=(5, 3))),
                     ("upsample_bilinear", dict(scale_factor=2))):
        def fn(m, x):
            with pytest.warns(UserWarning, match="deprecated"):
                return getattr(m.nn.functional, name)(x, **kw)
        check_like_torch(fn, [(1, 2, 3, 3)], jax=False, compiled=False, gradcheck=False)


def test_grid_sample_non_finite_grid_like_torch():
    """nan and inf grid entries: PyTorch's values (clipping maps nan to 0), never a crash."""
    torch = _torch()
    x = np.random.default_rng(0).standard_normal((2, 1, 3, 3))
    g = np.array([[[[np.nan, 0.0], [0.2, 0.3]]], [[[0.5, np.inf], [-np.inf, 0.1]]]])
    for mode in ("bilinear", "nearest", "bicubic"):
        for pm in ("zeros", "border", "reflection"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                a = tg.nn.functional.grid_sample(tg.tensor(x), tg.tensor(g), mode=mode,
                                                 padding_mode=pm, align_corners=False)
            b = torch.nn.functional.grid_sample(torch.tensor(x), torch.tensor(g), mode=mode,
                                                padding_mode=pm, align_corners=False)
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-10, atol=1e-12,
                                       equal_nan=True, err_msg=f"{mode} {pm}")
