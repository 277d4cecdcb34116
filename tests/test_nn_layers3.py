"""nn layers and functionals real programs use, against PyTorch: RMSNorm / rms_norm,
nn.Buffer, channel dropout, InstanceNorm / instance_norm, padding and upsampling modules,
adaptive max pooling and unpooling, gumbel_softmax, affine_grid / grid_sample,
pdist, LocalResponseNorm and the margin losses.

Each module is built in both libraries with PyTorch's weights copied by `state_dict`
(`_same_module`), and compared for values, input and parameter gradients (float32 and
float64), float64 finite differences, compiled == eager (numpy and, for some, JAX), repr,
state_dict keys and error types (helpers of `test_ops_training_more.py`).
"""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from test_ops_training_more import _np, _torch, check_like_torch, raises_like
from test_ops_real_gaps import _same_module


def _dt(x):
    return str(x.dtype).split(".")[-1]


def module_fn(make, call=None):
    """`fn(m, x, ...)` applying `make(m.nn)` (PyTorch's weights, the input's dtype) to x; the
    parameters' gradients are part of the output (so check_like_torch compares them)."""
    mods = {}

    def fn(m, x, *rest):
        key = (m.__name__, _dt(x))
        if key not in mods:
            mods[key] = _same_module(m, make, key[1])
        mod = mods[key]
        return call(mod, x, *rest) if call else mod(x, *rest)
    fn.mods = mods
    return fn


def compare_param_grads(make, shapes, call=None, seed=0):
    """Fresh float64 modules with PyTorch's weights: one forward and backward of a weighted
    sum; the parameters' gradients agree."""
    torch = _torch()
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    mods = {}
    for m in (torch, tg):
        mod = _same_module(m, make, "float64")
        xs = [m.tensor(a, requires_grad=True) for a in arrays]
        out = call(mod, *xs) if call else mod(*xs)
        w = np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape))
        (out * m.tensor(w)).sum().backward()
        mods[m.__name__] = mod
    tp = dict(mods["torch"].named_parameters())
    gp = dict(mods["tracegrad"].named_parameters())
    assert list(tp) == list(gp)
    for k in tp:
        assert (tp[k].grad is None) == (gp[k].grad is None), k
        if tp[k].grad is not None:
            np.testing.assert_allclose(_np(gp[k].grad), _np(tp[k].grad), rtol=1e-7, atol=1e-9,
                                       err_msg=k)


def same_repr_and_keys(make):
    torch = _torch()
    tm, gm = make(torch.nn), make(tg.nn)
    assert repr(gm) == repr(tm)
    assert list(gm.state_dict()) == list(tm.state_dict())
    for (k, a), (_, b) in zip(gm.state_dict().items(), tm.state_dict().items()):
        assert tuple(a.shape) == tuple(b.shape), k
        assert str(a.dtype) == str(b.dtype), k
    return tm, gm


# ---------------- RMSNorm / rms_norm ----------------
@pytest.mark.parametrize("kw", [dict(), dict(eps=1e-6), dict(elementwise_affine=False)])
@pytest.mark.parametrize("shape", [(4,), (3, 4)])
def test_rmsnorm_module_like_torch(kw, shape):
    fn = module_fn(lambda nn: nn.RMSNorm(shape, **kw))
    check_like_torch(fn, [(2,) + shape], jax=shape == (3, 4))
    compare_param_grads(lambda nn: nn.RMSNorm(shape, **kw), [(2,) + shape])
    same_repr_and_keys(lambda nn: nn.RMSNorm(shape, **kw))


def test_rms_norm_functional_eps_none_weight_and_errors():
    check_like_torch(lambda m, x, w: m.nn.functional.rms_norm(x * 1e-4, (4,), w),
                     [(3, 4), (4,)])
    check_like_torch(lambda m, x: m.nn.functional.rms_norm(x, [2, 4], eps=0.5), [(3, 2, 4)],
                     compiled=False, jax=False)
    for dt in ("float32", "float64"):       # eps=None: the dtype's machine epsilon
        assert tg.nn.functional.rms_norm(tg.full((3,), 1e-8, dtype=getattr(tg, dt)),
                                         (3,)).tolist() == pytest.approx(
            _torch().nn.functional.rms_norm(_torch().full((3,), 1e-8, dtype=getattr(
                _torch(), dt)), (3,)).tolist(), rel=1e-6)
    F = lambda m: m.nn.functional               # noqa: E731
    te, ge = raises_like(lambda m: F(m).rms_norm(m.ones(2, 3), [2, 4]))
    assert str(te) in str(ge)
    te, ge = raises_like(lambda m: F(m).rms_norm(m.ones(2, 3), [3], m.ones(4)))
    assert str(te) in str(ge)
    raises_like(lambda m: F(m).rms_norm(m.ones(2, 3), 3))
    raises_like(lambda m: F(m).rms_norm(m.ones(2, 3), []))
    t = tg.ones(2, 3, requires_grad=True)
    assert type(tg.nn.functional.rms_norm(t, [3]).grad_fn).__name__ == "MulBackward0"


def test_rmsnorm_loads_torch_state_dict_half_precision():
    torch = _torch()
    tm = torch.nn.RMSNorm(4)
    with torch.no_grad():
        tm.weight.uniform_()
    gm = tg.nn.RMSNorm(4)
    gm.load_state_dict({k: tg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float16) * 1e-3
    y = gm.half()(tg.tensor(x))
    ty = tm.half()(torch.tensor(x))
    assert y.dtype == tg.float16
    np.testing.assert_allclose(_np(y), ty.detach().numpy(), rtol=1e-3)


# ---------------- nn.Buffer ----------------
def test_buffer_registers_like_torch():
    torch = _torch()
    out = {}
    for m in (torch, tg):
        class M(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = m.nn.Buffer(m.zeros(3))
                self.b = m.nn.Buffer(m.ones(2), persistent=False)
                self.c = m.nn.Buffer()
                self.lin = m.nn.Linear(2, 2)
        mod = M()
        mod.a = m.ones(3)                       # a plain tensor re-assigned keeps a buffer
        mod.b = m.nn.Buffer(m.ones(2) * 2, persistent=False)
        p = m.ones(2, requires_grad=True)
        buf = m.nn.Buffer(p)
        out[m.__name__] = (list(mod.state_dict()), [n for n, _ in mod.named_buffers()],
                           isinstance(mod.a, m.nn.Buffer), isinstance(mod.b, m.nn.Buffer),
                           isinstance(m.ones(1), m.nn.Buffer), buf.requires_grad, buf.is_leaf,
                           buf.persistent, tuple(mod.c.shape), mod.b.tolist())
        with pytest.raises(KeyError):
            mod.lin = m.nn.Linear(1, 1)
            mod.x = 1
            mod.x = m.nn.Buffer(m.ones(1))
        with pytest.raises(AttributeError):
            class Early(m.nn.Module):
                def __init__(self):
                    self.a = m.nn.Buffer(m.ones(1))
                    super().__init__()
            Early()
    assert out["tracegrad"] == out["torch"]


# ---------------- channel dropout ----------------
@pytest.mark.parametrize("name,shape", [("dropout1d", (2, 5, 3)), ("dropout1d", (5, 3)),
                                        ("dropout2d", (2, 5, 3, 3)), ("dropout3d", (2, 4, 2, 2, 2)),
                                        ("dropout3d", (4, 2, 2, 2))])
def test_channel_dropout_zeroes_whole_channels_and_reproduces(name, shape):
    F = tg.nn.functional
    x = tg.tensor(np.random.default_rng(0).standard_normal(shape) + 5, requires_grad=True)
    tg.manual_seed(3)
    y = getattr(F, name)(x, p=0.4)
    lead = len(shape) - {"dropout1d": 1, "dropout2d": 2, "dropout3d": 3}[name]
    ratio = _np(y) / _np(x)
    per_channel = ratio.reshape(shape[:lead] + (-1,))
    assert np.allclose(per_channel, per_channel[..., :1])            # whole channels
    assert set(np.round(np.unique(per_channel), 6)) <= {0.0, round(1 / 0.6, 6)}
    (y * 2).sum().backward()
    np.testing.assert_allclose(_np(x.grad), 2 * ratio)
    assert type(y.grad_fn).__name__ == "MulBackward0"
    tg.manual_seed(3)
    assert getattr(F, name)(x, p=0.4).tolist() == y.tolist()
    assert getattr(F, name)(x, p=0.4, training=False) is x
    # compiled == eager, drawing the same noise from the generator on every call
    cf = tg.compile(lambda t: getattr(F, name)(t, p=0.4) * 3)
    for _ in range(2):
        tg.manual_seed(7)
        expect = getattr(F, name)(x, p=0.4) * 3
        tg.manual_seed(7)
        assert cf(x).tolist() == expect.tolist()
    assert cf.stats.traces == 1


def test_channel_dropout_modules_inplace_and_errors():
    torch = _torch()
    for m in (torch, tg):
        assert repr(m.nn.Dropout2d(0.2, True)) == "Dropout2d(p=0.2, inplace=True)"
        d = m.nn.Dropout1d(0.5).eval()
        x = m.ones(2, 3, 4)
        assert d(x) is x
        y = m.ones(3, 4)
        out = m.nn.functional.dropout1d(y, 1.0, inplace=True)
        assert out.data_ptr() == y.data_ptr() if m is torch else True
        assert float(y.abs().sum()) == 0.0
    assert repr(tg.nn.Dropout3d()) == repr(torch.nn.Dropout3d())
    te, ge = raises_like(lambda m: m.nn.functional.dropout1d(m.ones(2, 3, 4, 5)))
    assert str(te) == str(ge)
    raises_like(lambda m: m.nn.functional.dropout2d(m.ones(2, 3, 4, 5), p=1.5))
    raises_like(lambda m: m.nn.Dropout3d(p=-0.1))
    for m in (torch, tg):
        with pytest.warns(UserWarning, match="interpreted as shape"):
            m.nn.functional.dropout2d(m.ones(2, 3, 4))
    tg.manual_seed(0)
    x = tg.ones(2, 3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = _np(tg.nn.functional.dropout2d(x, 0.5))
    assert np.allclose(r, r[..., :1])          # (N, C, L): one draw per (n, c)


def test_channel_dropout_on_jax_equals_eager():
    pytest.importorskip("jax")
    x = tg.tensor(np.random.default_rng(0).standard_normal((2, 6, 3, 3)), requires_grad=True)
    f = lambda t: (tg.nn.functional.dropout2d(t, 0.5) * t).sum()      # noqa: E731
    cf = tg.compile(f, backend="jax")
    tg.manual_seed(5)
    e = f(x)
    e.backward()
    eg, x.grad = x.grad, None
    tg.manual_seed(5)
    c = cf(x)
    c.backward()
    np.testing.assert_allclose(_np(c), _np(e), rtol=1e-12)
    np.testing.assert_allclose(_np(x.grad), _np(eg), rtol=1e-12)


# ---------------- InstanceNorm / instance_norm ----------------
IN_CASES = [("InstanceNorm1d", dict(), (2, 3, 5)),
            ("InstanceNorm1d", dict(affine=True), (3, 5)),
            ("InstanceNorm2d", dict(affine=True, track_running_stats=True), (2, 3, 4, 4)),
            ("InstanceNorm2d", dict(track_running_stats=True, momentum=None), (3, 4, 4))]


@pytest.mark.parametrize("kind,kw,shape", IN_CASES)
def test_instance_norm_modules_like_torch(kind, kw, shape):
    make = lambda nn: getattr(nn, kind)(3, **kw)        # noqa: E731
    fn = module_fn(make)
    check_like_torch(fn, [shape], jax=kind == "InstanceNorm2d" and len(shape) == 4,
                     compiled=not kw.get("track_running_stats"))
    if kw.get("affine"):
        compare_param_grads(make, [shape])
    same_repr_and_keys(make)
    if kw.get("track_running_stats"):                   # two steps, then eval mode
        tm, gm = _same_module(_torch(), make, "float64"), _same_module(tg, make, "float64")
        rng = np.random.default_rng(1)
        for x in (rng.standard_normal(shape), rng.standard_normal(shape), None):
            if x is None:
                tm.eval(), gm.eval()
                x = rng.standard_normal(shape)
            np.testing.assert_allclose(_np(gm(tg.tensor(x))), _np(tm(_torch().tensor(x))),
                                       rtol=1e-10)
            for (k, a), (_, b) in zip(gm.state_dict().items(), tm.state_dict().items()):
                np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12, err_msg=k)


def test_instance_norm_running_stats_compiled_equal_eager():
    x = np.random.default_rng(0).standard_normal((2, 3, 6))
    eager = tg.nn.InstanceNorm1d(3, affine=True, track_running_stats=True).double()
    comp = tg.nn.InstanceNorm1d(3, affine=True, track_running_stats=True).double()
    cf = tg.compile(comp)
    for _ in range(3):
        a, b = eager(tg.tensor(x)), cf(tg.tensor(x))
        np.testing.assert_allclose(_np(b), _np(a), rtol=1e-12)
    np.testing.assert_allclose(_np(comp.running_var), _np(eager.running_var), rtol=1e-12)
    np.testing.assert_allclose(_np(comp.running_mean), _np(eager.running_mean), rtol=1e-12)


def test_instance_norm_functional_and_errors():
    check_like_torch(lambda m, x, w, b: m.nn.functional.instance_norm(x, weight=w, bias=b),
                     [(2, 3, 4, 5), (3,), (3,)], jax=False, dtypes=("float64",))
    te, ge = raises_like(lambda m: m.nn.functional.instance_norm(m.ones(2, 3, 1)))
    assert str(te) == str(ge)
    te, ge = raises_like(lambda m: m.nn.InstanceNorm1d(3)(m.ones(2, 3, 4, 5)))
    assert str(te) == str(ge)
    te, ge = raises_like(lambda m: m.nn.InstanceNorm1d(3, affine=True)(m.ones(2, 4, 5)))
    assert str(te) == str(ge)
    te, ge = raises_like(lambda m: m.nn.functional.instance_norm(
        m.ones(2, 3, 4), m.zeros(4), m.ones(4)))
    assert str(te) in str(ge)
    for m in (_torch(), tg):
        with pytest.warns(UserWarning, match="does not match num_features"):
            m.nn.InstanceNorm1d(3)(m.ones(2, 4, 5))
    # a tracking checkpoint into a non-tracking module is refused, as in PyTorch
    sd = tg.nn.InstanceNorm1d(3, track_running_stats=True).state_dict()
    sd._metadata = {}
    raises_like(lambda m: m.nn.InstanceNorm1d(3).load_state_dict(
        {k: m.tensor(v.numpy()) for k, v in sd.items()} | {}))


# ---------------- padding modules, upsampling modules, Softmax2d, leaky_relu_ ----------------
PAD_CASES = [("ZeroPad1d", (2,), (2, 3, 5)), ("ZeroPad2d", ((1, 2, 0, 3),), (2, 3, 4, 5)),
             ("ConstantPad1d", ((1, 3), 2.5), (3, 5)), ("ConstantPad2d", (1, -1.0), (3, 4, 5)),
             ("ReflectionPad1d", (2,), (2, 3, 5)), ("ReflectionPad2d", ((1, 2, 3, 0),),
                                                    (2, 2, 4, 5)),
             ("ReplicationPad1d", ((3, 1),), (3, 5)), ("ReplicationPad2d", (2,), (1, 2, 3, 3)),
             ("CircularPad1d", (2,), (2, 3, 5)), ("CircularPad2d", ((1, 2, 2, 1),), (3, 4, 5)),
             ("ZeroPad3d", (1,), (1, 2, 2, 3, 2)), ("ConstantPad3d", ((1, 0, 2, 1, 0, 1), 0.5),
                                                    (2, 2, 3, 2)),
             ("ReflectionPad3d", ((1, 1, 2, 0, 1, 1),), (1, 1, 3, 3, 3)),
             ("ReplicationPad3d", (1,), (2, 2, 2, 3)), ("CircularPad3d", (1,), (1, 2, 2, 3, 2))]


@pytest.mark.parametrize("name,args,shape", PAD_CASES)
def test_padding_modules_like_torch(name, args, shape):
    check_like_torch(lambda m, x: getattr(m.nn, name)(*args)(x) * 1.5, [shape],
                     jax=name in ("ReflectionPad2d", "CircularPad1d"))
    tm, gm = same_repr_and_keys(lambda nn: getattr(nn, name)(*args))
    assert gm.padding == tm.padding and getattr(gm, "value", None) == getattr(tm, "value", None)


def test_padding_and_softmax2d_errors():
    for f in (lambda m: m.nn.CircularPad2d(1)(m.ones(2, 3)),
              lambda m: m.nn.CircularPad1d(1)(m.ones(3)),
              lambda m: m.nn.CircularPad3d(1)(m.ones(2, 3, 4)),
              lambda m: m.nn.Softmax2d()(m.ones(2)),
              lambda m: m.nn.ReflectionPad1d(3)(m.ones(1, 2, 3))):
        te, ge = raises_like(f)
        if not isinstance(te, RuntimeError):
            assert str(te) == str(ge)


@pytest.mark.parametrize("name,kw,shape", [("UpsamplingNearest2d", dict(scale_factor=2),
                                            (1, 2, 3, 3)),
                                           ("UpsamplingBilinear2d", dict(size=(5, 7)),
                                            (2, 2, 3, 4)),
                                           ("UpsamplingBilinear2d", dict(scale_factor=2),
                                            (1, 1, 3, 3))])
def test_upsampling_modules_like_torch(name, kw, shape):
    check_like_torch(lambda m, x: getattr(m.nn, name)(**kw)(x), [shape],
                     jax=name == "UpsamplingBilinear2d" and "size" in kw)
    tm, gm = same_repr_and_keys(lambda nn: getattr(nn, name)(**kw))
    assert (gm.mode, gm.align_corners, gm.size, gm.scale_factor, gm.name) == \
        (tm.mode, tm.align_corners, tm.size, tm.scale_factor, tm.name)


def test_softmax2d_and_leaky_relu_inplace_like_torch():
    check_like_torch(lambda m, x: m.nn.Softmax2d()(x), [(2, 3, 4, 4)], jax=False)
    check_like_torch(lambda m, x: m.nn.Softmax2d()(x), [(3, 2, 2)], jax=False,
                     gradcheck=False)
    assert repr(tg.nn.Softmax2d()) == "Softmax2d()"

    def leaky(m, x):
        y = x * 2
        out = m.nn.functional.leaky_relu_(y, 0.2)
        assert out is y
        return y
    check_like_torch(leaky, [(3, 4)], jax=False)
