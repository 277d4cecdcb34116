"""PyTorch names tracegrad lacked (second batch): the in-place elementwise methods (`abs_`,
`sqrt_`, `atan2_`, `eq_`, `cumsum_`, ...) and their `torch.xxx_` spellings, aliases and
Tensor facts (`ravel`, `msort`, `argwhere`, `nbytes`, `mH`, ...), top-level helpers
(`asarray`, `broadcast_shapes`, `range`, ...) and the `torch.*` spellings of
`nn.functional` ops with torch's positional signatures.

Values and dtypes against PyTorch (float32 and float64), gradients against PyTorch, the
in-place protocol (returns self, one version bump, the leaf error, writes through a view,
PyTorch's cast error), and compiled (numpy and JAX backends) against eager.
"""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from _differential import assert_same_outputs_and_grads, jax_programs_used

torch = pytest.importorskip("torch")

R = np.random.default_rng(11)
DOMAINS = {"any": lambda s: R.standard_normal(s), "unit": lambda s: R.uniform(-0.9, 0.9, s),
           "pos": lambda s: R.uniform(0.3, 2.0, s), "gt1": lambda s: R.uniform(1.2, 3.0, s),
           "prob": lambda s: R.uniform(0.1, 0.9, s)}

# (method, input domain, extra args (a domain name becomes a tensor), kwargs, differentiable)
def _rows(names, domain, args=(), kwargs=None, grad=True):
    return [(n, domain, args, kwargs or {}, grad) for n in names.split()]


INPLACE = (
    _rows("abs_ absolute_ asinh_ arcsinh_ atan_ arctan_ cos_ cosh_ sin_ sinh_ exp2_ square_ "
          "negative_", "any")
    + _rows("acos_ arccos_ asin_ arcsin_ atanh_ arctanh_ tan_", "unit")
    + _rows("acosh_ arccosh_", "gt1")
    + _rows("log_ log10_ sqrt_ rsqrt_ reciprocal_", "pos") + _rows("logit_", "prob")
    + _rows("ceil_ floor_ round_ trunc_ fix_ sign_ logical_not_", "any", grad=False)
    + _rows("round_", "any", (), {"decimals": 2}, False) + _rows("logit_", "any", (0.2,))
    + _rows("atan2_ arctan2_ multiply_ subtract_ clamp_min_", "any", ("any",))
    + _rows("xlogy_ remainder_ divide_ true_divide_", "any", ("pos",))
    + _rows("xlogy_", "pos", (2.5,)) + _rows("remainder_", "any", (0.7,))
    + _rows("floor_divide_", "any", ("pos",), grad=False)
    + _rows("divide_", "any", ("pos",), {"rounding_mode": "floor"}, False)
    + _rows("divide_", "any", (0.3,), {"rounding_mode": "trunc"}, False)
    + _rows("subtract_", "any", ("any",), {"alpha": 2.5})
    + _rows("clamp_min_ clamp_max_", "any", (0.1,)) + _rows("clip_", "any", (-0.5, 0.5))
    + _rows("cumsum_", "any", (1,)) + _rows("cumprod_", "any", (0,))
    + _rows("eq_ ne_ lt_ le_ gt_ ge_ not_equal_ greater_ greater_equal_ less_ less_equal_ "
            "logical_and_ logical_or_ logical_xor_", "any", ("any",), grad=False)
    + _rows("lt_ ge_", "any", (0.0,), grad=False))
# PyTorch has no derivative for these in place (NotImplementedError at backward); tracegrad
# gives the out-of-place op's gradient, which the test compares against
NO_TORCH_INPLACE_GRAD = {"acosh_", "arccosh_", "asinh_", "arcsinh_", "atanh_", "arctanh_"}


def _ids(rows):
    seen = {}
    out = []
    for r in rows:
        seen[r[0]] = seen.get(r[0], 0) + 1
        out.append(f"{r[0]}{seen[r[0]]}")
    return out


def _args_kwargs(row):
    return row[2], row[3]


def _conv(lib, kwargs):
    if lib is tg and "dtype" in kwargs:
        return dict(kwargs, dtype=getattr(tg, str(kwargs["dtype"]).split(".")[-1]))
    return kwargs


def _make(row, shape, dtype):
    args, kwargs = _args_kwargs(row)
    x = DOMAINS[row[1]](shape).astype(dtype)
    extra = [DOMAINS[a](shape).astype(dtype) if isinstance(a, str) else a for a in args]
    return x, extra, kwargs


def _tensor(lib, a, requires_grad=False):
    return lib.tensor(a.copy(), requires_grad=requires_grad) if isinstance(a, np.ndarray) else a


def _check(t, g, rtol):
    assert str(t.dtype).split(".")[-1] == str(g.dtype).split(".")[-1], (t.dtype, g.dtype)
    assert tuple(t.shape) == tuple(g.shape)
    np.testing.assert_allclose(g.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=rtol,
                               equal_nan=True)


@pytest.mark.parametrize("dtype,shape", [(np.float32, (3, 4)), (np.float64, (2, 5))])
@pytest.mark.parametrize("row", INPLACE, ids=_ids(INPLACE))
def test_inplace_values_version_and_self_match_torch(row, dtype, shape):
    x, extra, kwargs = _make(row, shape, dtype)
    outs = []
    for lib in (torch, tg):
        t = _tensor(lib, x)
        v = t._version
        r = getattr(t, row[0])(*[_tensor(lib, a) for a in extra], **_conv(lib, kwargs))
        assert r is t
        assert t._version == v + 1
        outs.append(t)
    _check(*outs, 1e-6 if dtype == np.float64 else 2e-6)


GRAD_ROWS = [r for r in INPLACE if r[4]]


@pytest.mark.parametrize("row", GRAD_ROWS, ids=_ids(GRAD_ROWS))
def test_inplace_gradients_match_torch(row):
    x, extra, kwargs = _make(row, (2, 3), np.float64)
    grads = []
    for lib in (torch, tg):
        leaf = lib.tensor(x.copy(), requires_grad=True)
        others = [_tensor(lib, a, True) for a in extra]
        y = leaf * 1
        if lib is torch and row[0] in NO_TORCH_INPLACE_GRAD:
            y = getattr(torch, row[0][:-1])(y)
        else:
            getattr(y, row[0])(*others, **_conv(lib, kwargs))
        w = lib.tensor(np.linspace(-1, 2, y.numel()).reshape(y.shape))
        (y * w).sum().backward()
        grads.append([leaf.grad] + [o.grad for o in others if hasattr(o, "grad")])
    for t, g in zip(*grads):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", ["abs_", "sqrt_", "atan2_", "eq_", "cumsum_", "round_",
                                  "sign_", "clamp_min_", "divide_"])
def test_inplace_on_a_leaf_that_requires_grad_raises_runtime_error(name):
    row = next(r for r in INPLACE if r[0] == name)
    x, extra, kwargs = _make(row, (2, 3), np.float64)
    for lib in (torch, tg):
        leaf = lib.tensor(np.abs(x), requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable"):
            getattr(leaf, name)(*[_tensor(lib, a) for a in extra], **kwargs)


def test_inplace_writes_through_a_view_and_backpropagates_like_torch():
    x = R.uniform(0.5, 2, (3, 4))
    grads = []
    for lib in (torch, tg):
        leaf = lib.tensor(x, requires_grad=True)
        y = leaf * 2
        y[1].abs_()
        y[:, 0].atan2_(lib.ones(3))
        y.t()[2].cumsum_(0)
        (y * y).sum().backward()
        grads.append((y.detach().numpy().copy(), leaf.grad.numpy().copy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-12)


@pytest.mark.parametrize("call,refused", [
    (lambda x: x[:4].lt_(x[2:]), True), (lambda x: x[:4].atan2_(x[1:5]), True),
    (lambda x: x[:4].divide_(x[2:], rounding_mode="floor"), True),
    (lambda x: x[:4].xlogy_(x[1:5]), True), (lambda x: x.remainder_(x), False),
    (lambda x: x.reshape(2, 3)[:, :2].ge_(x.reshape(2, 3)[:, 1:]), False)])
def test_inplace_operand_overlapping_the_target_is_refused_like_torch(call, refused):
    for lib in (torch, tg):
        x = lib.arange(1.0, 7.0)
        if refused:
            with pytest.raises(RuntimeError, match="refer to a single memory location"):
                call(x)
        else:
            call(x)


@pytest.mark.parametrize("make,name,args", [
    (lambda m: m.tensor([1, 4]), "sqrt_", ()),
    (lambda m: m.tensor([1, 4]), "atan2_", (1.5,)),
    (lambda m: m.tensor([1, 4]), "divide_", (2,)),
    (lambda m: m.tensor([True, False]), "abs_", ()),
    (lambda m: m.zeros(2, 3), "eq_", ("zeros32",)),
    (lambda m: m.zeros(3), "lt_", ("zeros23",)),
    (lambda m: m.zeros(3), "bitwise_and_", (1,)),
])
def test_inplace_errors_match_torch_types(make, name, args):
    shapes = {"zeros32": (3, 2), "zeros23": (2, 3)}
    kinds = []
    for lib in (torch, tg):
        a = [lib.zeros(*shapes[v]) if isinstance(v, str) else v for v in args]
        with pytest.raises(Exception) as info:
            getattr(make(lib), name)(*a)
        kinds.append(type(info.value))
    assert issubclass(kinds[1], kinds[0]), kinds


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
@pytest.mark.parametrize("name,args", [
    ("abs_", ()), ("remainder_", (3,)), ("floor_divide_", (2,)), ("eq_", (1,)),
    ("logical_xor_", (0,)), ("bitwise_and_", (6,)), ("bitwise_or_", (1,)),
    ("bitwise_xor_", (5,)), ("bitwise_not_", ()), ("cumsum_", (0,)), ("sign_", ()),
    ("square_", ()), ("multiply_", (3,)), ("clamp_min_", (1,)), ("fix_", ())])
def test_inplace_on_integer_and_bool_tensors_match_torch(dtype, name, args):
    data = np.array([-3, 0, 2, 7, 5]).astype(dtype)
    res = []
    for lib in (torch, tg):
        t = lib.tensor(data.copy())
        try:
            getattr(t, name)(*args)
            res.append(t)
        except Exception as e:         # noqa: BLE001  (the error type is compared)
            res.append(type(e))
    if isinstance(res[0], type):
        assert isinstance(res[1], type) and issubclass(res[1], res[0]), res
    else:
        assert not isinstance(res[1], type), res[1]
        _check(*res, 0)


# torch.xxx_ function spellings, and the torch.nn-level in-place activations
FUNCS = [("abs_", ()), ("acos_", ()), ("sqrt_", ()), ("exp_", ()), ("log1p_", ()),
         ("erf_", ()), ("erfc_", ()), ("i0_", ()), ("sinc_", ()), ("neg_", ()),
         ("round_", ()), ("xlogy_", (2.0,)), ("clamp_min_", (0.6,)), ("clamp_max_", (0.6,)),
         ("clip_", (0.2, 0.6)), ("nan_to_num_", ()), ("relu_", ()), ("sigmoid_", ()),
         ("tanh_", ()), ("selu_", ()), ("celu_", (0.7,)), ("threshold_", (0.5, -1.0)),
         ("rrelu_", ()), ("zero_", ()), ("fill_", (2.5,)), ("fix_", ()), ("exp2_", ()),
         ("logit_", ())]


@pytest.mark.parametrize("name,args", FUNCS, ids=[f[0] for f in FUNCS])
def test_torch_inplace_functions_match_torch(name, args):
    x = R.uniform(0.1, 0.9, (2, 3)).astype(np.float32)
    outs = []
    for lib in (torch, tg):
        t = lib.tensor(x.copy())
        r = getattr(lib, name)(t, *args)
        assert r is t and t._version == 1
        outs.append(t)
    _check(*outs, 2e-6)


def test_torch_detach_inplace_function():
    x = tg.ones(2, requires_grad=True) * 2
    assert tg.detach_(x) is x and not x.requires_grad and x.grad_fn is None


# ---------------- aliases and small methods ----------------
A = R.standard_normal((3, 4))
IA = np.array([[3, 0, -1], [0, 2, 5]])
ALIASES = [
    ("ravel", lambda m, a: a.ravel(), (A,)),
    ("ravel_fn_of_view", lambda m, a: m.ravel(a.t()), (A,)),
    ("absolute", lambda m, a: m.absolute(a), (A,)),
    ("multiply", lambda m, a, b: m.multiply(a, b), (A, A[0])),
    ("subtract", lambda m, a, b: m.subtract(a, b, alpha=2), (A, A[0])),
    ("greater", lambda m, a: m.greater(a, 0.1), (A,)),
    ("greater_equal", lambda m, a, b: a.greater_equal(b), (A, A[1])),
    ("greater_equal_fn", lambda m, a, b: m.greater_equal(a, b), (A, A[1])),
    ("less", lambda m, a: m.less(a, 0.1), (A,)),
    ("less_equal", lambda m, a, b: a.less_equal(b), (A, A[1])),
    ("not_equal", lambda m, a, b: m.not_equal(a, b), (IA, IA[0])),
    ("not_equal_m", lambda m, a: a.not_equal(0), (IA,)),
    ("logical_xor", lambda m, a, b: m.logical_xor(a, b), (IA, IA[1])),
    ("logical_xor_m", lambda m, a, b: a.logical_xor(b), (A[:2], IA[:, :1].astype(float))),
    ("logical_xor_nan", lambda m, a, b: m.logical_xor(a, b),
     (np.array([np.nan, 0.0, 1.0]), np.array([0.0, 0.0, np.nan]))),
    ("bitwise_and", lambda m, a: a.bitwise_and(6), (IA,)),
    ("bitwise_or", lambda m, a, b: a.bitwise_or(b), (IA, IA[0])),
    ("bitwise_xor", lambda m, a, b: a.bitwise_xor(b), (IA, IA[1])),
    ("positive", lambda m, a: m.positive(a) + a.positive(), (A,)),
    ("fix", lambda m, a: m.fix(a * 3) + (a * 3).fix(), (A,)),
    ("adjoint", lambda m, a: m.adjoint(a) * 2 + a.adjoint(), (A,)),
    ("mH", lambda m, a: a.reshape(3, 2, 2).mH, (A,)),
    ("msort", lambda m, a: m.msort(a) + a.msort(), (A,)),
    ("msort_int", lambda m, a: m.msort(a), (IA,)),
    ("argwhere", lambda m, a: m.argwhere(a), (IA,)),
    ("argwhere_m", lambda m, a: (a > 0).argwhere(), (A,)),
    ("split_with_sizes", lambda m, a: m.split_with_sizes(a, [1, 3], 1)[1], (A,)),
    ("split_with_sizes_m", lambda m, a: a.split_with_sizes([2, 1])[0], (A,)),
    ("fill", lambda m, a: m.fill(a, 2.5), (A,)),
    ("fill_tensor", lambda m, a, v: m.fill(a, v), (A, np.array(1.5))),
    ("detach", lambda m, a: m.detach(a * 2), (A,)),
    ("unflatten", lambda m, a: m.unflatten(a, 1, (2, 2)), (A,)),
]


@pytest.mark.parametrize("name,fn,arrays", ALIASES, ids=[a[0] for a in ALIASES])
def test_alias_values_and_gradients_match_torch(name, fn, arrays):
    outs, ins = [], []
    for lib in (torch, tg):
        ts = [lib.tensor(a.copy(), requires_grad=a.dtype.kind == "f") for a in arrays]
        outs.append(fn(lib, *ts))
        ins.append(ts)
    _check(*outs, 1e-12)
    assert outs[0].requires_grad == outs[1].requires_grad
    if outs[0].requires_grad:
        for lib, out in zip((torch, tg), outs):
            out.backward(lib.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape)))
        for a, b in zip(*ins):
            if a.requires_grad:
                np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-12,
                                           atol=1e-14)


FACTS = [
    ("ndimension", lambda m: m.zeros(2, 3, 4).ndimension()),
    ("nbytes", lambda m: (m.zeros(2, 3).nbytes, m.zeros(3, dtype=m.int16).nbytes,
                          m.zeros(5, dtype=m.bool).nbytes, m.zeros(2, dtype=m.float64).nbytes)),
    ("itemsize", lambda m: [m.zeros(1, dtype=d).itemsize for d in
                            (m.float16, m.float32, m.float64, m.int64, m.uint8, m.bool)]),
    ("is_signed", lambda m: [m.zeros(1, dtype=d).is_signed() for d in
                             (m.float32, m.int8, m.int64, m.uint8, m.bool)]),
    ("is_nonzero", lambda m: [m.is_nonzero(m.tensor(v)) for v in (0.0, [2.0], [[0]], float("nan"),
                                                                    False)]),
    ("is_same_size", lambda m: (m.zeros(2, 3).is_same_size(m.ones(2, 3)),
                                m.is_same_size(m.zeros(2, 3), m.zeros(3, 2)))),
    ("is_inference", lambda m: m.is_inference(m.zeros(1))),
    ("broadcast_shapes", lambda m: (tuple(m.broadcast_shapes((2, 1), (3,), 1)),
                                    tuple(m.broadcast_shapes()),
                                    tuple(m.broadcast_shapes(2, (3, 1), [1, 1, 1])))),
    ("warn_always", lambda m: (m.is_warn_always_enabled(),)),
    ("split_with_sizes_tuple", lambda m: type(m.zeros(4).split_with_sizes([1, 3])).__name__),
]


@pytest.mark.parametrize("name,fn", FACTS, ids=[f[0] for f in FACTS])
def test_tensor_facts_match_torch(name, fn):
    assert fn(tg) == fn(torch)


def test_set_warn_always_reads_back():
    try:
        tg.set_warn_always(True)
        assert tg.is_warn_always_enabled() is True
    finally:
        tg.set_warn_always(False)
    assert tg.is_warn_always_enabled() is False


@pytest.mark.parametrize("fn", [
    lambda m: m.is_nonzero(m.tensor([])),
    lambda m: m.tensor([1.0, 2.0]).is_nonzero(),
    lambda m: m.positive(m.tensor([True])),
    lambda m: m.broadcast_shapes((2,), (3,)),
    lambda m: m.broadcast_shapes((2, -1)),
    lambda m: m.zeros(5).split_with_sizes([2, 2]),
    lambda m: m.adjoint(m.zeros(3)),
    lambda m: m.asarray(m.zeros(2), dtype=m.float64, copy=False),
    lambda m: m.range(0, 1, 0),
    lambda m: m.range(0, 1, -1),
], ids=["nonzero_empty", "nonzero_many", "positive_bool", "broadcast", "broadcast_neg",
        "split_sizes", "adjoint_1d", "asarray_copy_false", "range_step0", "range_sign"])
def test_errors_match_torch(fn):
    kinds, msgs = [], []
    for lib in (torch, tg):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(Exception) as info:
                fn(lib)
        kinds.append(type(info.value))
        msgs.append(str(info.value).split("\n")[0])
    assert issubclass(kinds[1], kinds[0]), kinds
    assert msgs[0].split(".")[0].split("(")[0][:30] in msgs[1], msgs


def test_positive_returns_the_input_itself():
    x = tg.ones(2, requires_grad=True)
    assert tg.positive(x) is x and x.positive() is x


def test_ravel_is_a_view_when_contiguous_else_a_copy():
    for lib in (torch, tg):
        x = lib.zeros(2, 3)
        x.ravel()[0] = 5.0
        assert x[0, 0].item() == 5.0
        x.t().ravel()[1] = 7.0
        assert x[1, 0].item() == 0.0


@pytest.mark.parametrize("args,kwargs", [((1, 4), {}), ((0, 1, 0.25), {}),
                                         ((1, 4), {"dtype": "int64"}), ((5, 1, -1.5), {}),
                                         ((0, 2, 1), {"dtype": "float64"})])
def test_range_matches_torch_and_warns(args, kwargs):
    outs = []
    for lib in (torch, tg):
        kw = {k: getattr(lib, v) for k, v in kwargs.items()}
        with pytest.warns(UserWarning, match="torch.range is deprecated"):
            outs.append(lib.range(*args, **kw))
    _check(*outs, 0)


@pytest.mark.parametrize("s,dtype", [(3, None), (True, None), (2.5, "float64"), (2, "int64")])
def test_scalar_tensor_matches_torch(s, dtype):
    outs = [lib.scalar_tensor(s, **({"dtype": getattr(lib, dtype)} if dtype else {}))
            for lib in (torch, tg)]
    _check(*outs, 0)


def test_asarray_shares_copies_and_converts_like_torch():
    for lib in (torch, tg):
        a = np.zeros(3)
        t = lib.asarray(a)
        a[0] = 5.0
        assert t[0].item() == 5.0 and str(t.dtype).endswith("float64")
        c = lib.asarray(a, copy=True)
        a[1] = 6.0
        assert c[1].item() == 0.0
        assert str(lib.asarray([1, 2]).dtype).endswith("int64")
        assert str(lib.asarray([1.0, 2]).dtype).endswith("float32")
        x = lib.ones(2)
        assert lib.asarray(x) is x
        y = lib.asarray(x, dtype=lib.float64)
        assert str(y.dtype).endswith("float64") and x.dtype == lib.float32
        z = lib.asarray(x, requires_grad=True)
        assert z is x and x.requires_grad              # torch sets it on the tensor itself
        with pytest.warns(UserWarning, match="unspecified requires_grad"):
            assert lib.asarray(x) is x
        v = lib.asarray(x, copy=True)
        assert v is not x and v.requires_grad and not v.is_leaf
        u = lib.asarray(x * 2, requires_grad=False)
        assert not u.requires_grad
        w = lib.asarray(x, requires_grad=False)
        assert w is x and not x.requires_grad          # ... and clears it there too
        with pytest.raises(RuntimeError):
            lib.asarray([1, 2], requires_grad=True)


def test_vmap_is_func_vmap():
    assert tg.vmap is tg.func.vmap
    out = tg.vmap(lambda r: r.sum())(tg.ones(3, 2))
    np.testing.assert_allclose(out.numpy(), [2.0, 2.0, 2.0])


# ---------------- torch.* spellings of nn.functional ops ----------------
X4 = R.standard_normal((2, 4, 3, 3))
X3 = R.standard_normal((2, 4, 6))
W2 = R.standard_normal((6, 4, 2, 2)) * 0.3
W1 = R.standard_normal((6, 4, 3)) * 0.3
P = R.uniform(0.1, 0.9, (3, 4))
Y = R.standard_normal((3, 4))
SIGN = np.sign(R.standard_normal(3))
EMB = R.standard_normal((5, 3))
X5 = R.standard_normal((2, 4, 7, 6, 5))
W3 = R.standard_normal((6, 2, 3, 2, 3)) * 0.3
IDX = np.array([[0, 4, 2], [1, 1, 3]])
FUNCTIONAL = [
    ("conv1d", lambda m, x, w: m.conv1d(x, w, None, 2, 1), (X3, W1)),
    ("conv2d", lambda m, x, w: m.conv2d(x, w, None, 1, 1, 1, 2), (X4, W2[:, :2])),
    ("conv3d", lambda m, x, w, b: m.conv3d(x, w, b, (2, 1, 2), (1, 0, 2), (1, 2, 1), 2),
     (X5, W3, W3[:, 0, 0, 0, 0].copy())),
    ("conv3d_same_unbatched", lambda m, x, w: m.conv3d(x[0], w, None, 1, "same"),
     (X5[:, :2], W3)),
    ("conv3d_valid", lambda m, x, w: m.conv3d(x[:, 2:], w, None, 1, "valid"), (X5, W3)),
    ("conv_transpose3d", lambda m, x, w, b: m.conv_transpose3d(
        x[:, :, :3, :4, :3], w, b, (2, 1, 2), (1, 0, 1), (1, 0, 1), 2, (1, 2, 1)),
     (X5, W3[:4].copy(), W3[:4, 0, 0, 0, 0].copy())),
    ("conv_transpose3d_unbatched", lambda m, x, w: m.conv_transpose3d(x[0, :2], w, None, 3, 2,
                                                                     1, 1, 2),
     (X5, W3[:2].copy())),
    ("max_pool3d", lambda m, x: m.max_pool3d(x, 2), (X5,)),
    ("max_pool3d_args", lambda m, x: m.max_pool3d(x, (3, 2, 2), (2, 1, 2), (1, 1, 0), (2, 1, 1)),
     (X5,)),
    ("max_pool3d_ceil", lambda m, x: m.max_pool3d(x[0], 3, 2, 1, 1, True), (X5,)),
    ("conv_transpose1d", lambda m, x, w: m.conv_transpose1d(x, w, None, 2, 1, 1),
     (X3, W1.transpose(1, 0, 2).copy())),
    ("conv_transpose2d", lambda m, x, w, b: m.conv_transpose2d(x, w, b, 2, 0, 0, 2),
     (X4, W2.transpose(1, 0, 2, 3)[:, :3].copy(), X4[0, 0, 0, :2].repeat(3))),
    ("dropout_eval", lambda m, x: m.dropout(x, 0.5, False), (X3,)),
    ("dropout_p0", lambda m, x: m.dropout(x * 1, 0.0, True), (X3,)),
    ("dropout_p1", lambda m, x: m.dropout(x, 1.0, True), (X3,)),
    ("dropout__p1", lambda m, x: m.dropout_(x * 1, 1.0, True), (X3,)),
    ("alpha_dropout_eval", lambda m, x: m.alpha_dropout(x, 0.5, False), (X3,)),
    ("feature_dropout_eval", lambda m, x: m.feature_dropout(x, 0.5, False), (X3,)),
    ("feature_dropout_p1", lambda m, x: m.feature_dropout(x, 1.0, True), (X3,)),
    ("feature_alpha_dropout_eval", lambda m, x: m.feature_alpha_dropout(x, 0.2, False), (X3,)),
    ("layer_norm", lambda m, x, w: m.layer_norm(x, (6,), w, None, 1e-3), (X3, X3[0, 0])),
    ("group_norm", lambda m, x, w: m.group_norm(x, 2, w, w * 2), (X3, X3[0, :, 0])),
    ("batch_norm", lambda m, x, w: m.batch_norm(x, w, w, None, None, True, 0.1, 1e-5, False),
     (X3, X3[0, :, 1])),
    ("batch_norm_eval", lambda m, x, w: m.batch_norm(x, w, None, w.detach() * 0, w.detach() * 0 + 2,
                                                     False, 0.1, 1e-5, False), (X3, X3[1, :, 1])),
    ("instance_norm", lambda m, x, w: m.instance_norm(x, w, w, None, None, True, 0.1, 1e-5,
                                                      False), (X3, X3[0, :, 2])),
    ("rms_norm", lambda m, x, w: m.rms_norm(x, (6,), w, 1e-6), (X3, X3[1, 1])),
    ("rms_norm_noeps", lambda m, x: m.rms_norm(x, [4, 6]), (X3,)),
    ("embedding", lambda m, w: m.embedding(w, m.tensor(IDX)), (EMB,)),
    ("embedding_pad", lambda m, w: m.embedding(w, m.tensor(IDX), 1), (EMB,)),
    ("pixel_shuffle", lambda m, x: m.pixel_shuffle(x, 2), (X4,)),
    ("pixel_unshuffle", lambda m, x: m.pixel_unshuffle(x.reshape(2, 1, 6, 6), 3), (X4,)),
    ("channel_shuffle", lambda m, x: m.channel_shuffle(x, 2), (X4,)),
    ("celu", lambda m, x: m.celu(x, 0.5), (X3,)),
    ("selu", lambda m, x: m.selu(x), (X3,)),
    ("threshold", lambda m, x: m.threshold(x, 0.1, -2.0), (X3,)),
    ("rrelu_eval", lambda m, x: m.rrelu(x, 0.1, 0.3), (X3,)),
    ("hardshrink", lambda m, x: m.hardshrink(x, 0.4), (X3,)),
    ("prelu", lambda m, x, w: m.prelu(x, w), (X3, np.array([0.1, 0.2, 0.3, 0.4]))),
    ("max_pool1d", lambda m, x: m.max_pool1d(x, 2), (X3,)),
    ("max_pool1d_args", lambda m, x: m.max_pool1d(x, 3, 2, 1, 1, True), (X3,)),
    ("max_pool2d", lambda m, x: m.max_pool2d(x, 2, 1), (X4,)),
    ("avg_pool1d", lambda m, x: m.avg_pool1d(x, 3, 2, 1, False, False), (X3,)),
    ("adaptive_avg_pool1d", lambda m, x: m.adaptive_avg_pool1d(x, 4), (X3,)),
    ("adaptive_max_pool1d", lambda m, x: m.adaptive_max_pool1d(x, 3)[0], (X3,)),
    ("adaptive_max_pool1d_idx", lambda m, x: m.adaptive_max_pool1d(x, 3)[1], (X3,)),
    ("cosine_similarity", lambda m, a, b: m.cosine_similarity(a, b, 0), (Y, P)),
    ("pairwise_distance", lambda m, a, b: m.pairwise_distance(a, b, 1.0), (Y, P)),
    ("pdist", lambda m, a: m.pdist(a), (Y,)),
    ("kl_div", lambda m, a, b: m.kl_div(a, b), (Y, P)),
    ("kl_div_sum_log", lambda m, a, b: m.kl_div(a, b, 2, log_target=True), (Y, Y[::-1])),
    ("kl_div_none", lambda m, a, b: m.kl_div(a, b, 0), (Y, P)),
    ("bilinear", lambda m, a, b, w: m.bilinear(a, b, w), (Y, P, R.standard_normal((2, 4, 4)))),
    ("bce_logits", lambda m, a, b: m.binary_cross_entropy_with_logits(a, b), (Y, P)),
    ("bce_logits_w", lambda m, a, b: m.binary_cross_entropy_with_logits(
        a, b, b.detach(), b[0].detach() + 1, 2), (Y, P)),
    ("bce_logits_mean", lambda m, a, b: m.binary_cross_entropy_with_logits(a, b, None, None, 1),
     (Y, P)),
    ("kl_div_mean", lambda m, a, b: m.kl_div(a, b, 1), (Y, P)),
    ("margin_ranking_sum", lambda m, a, b, s: m.margin_ranking_loss(a, b, s, 0.2, 2),
     (Y[0, :3], P[0, :3], SIGN)),
    ("cosine_embedding_mean", lambda m, a, b, s: m.cosine_embedding_loss(a, b, s, 0.1, 1),
     (Y[:, :3].T.copy(), P[:, :3].T.copy(), SIGN)),
    ("triplet_margin_mean", lambda m, a, b, c: m.triplet_margin_loss(a, b, c, 1.0, 2, 1e-6,
                                                                       False, 1), (Y, P, Y[::-1])),
    ("poisson_nll", lambda m, a, b: m.poisson_nll_loss(a, b, True, False, 1e-8, 1), (Y, P)),
    ("poisson_nll_full", lambda m, a, b: m.poisson_nll_loss(a, b + 1, False, True, 1e-8, 0),
     (P, P)),
    ("margin_ranking", lambda m, a, b, s: m.margin_ranking_loss(a, b, s, 0.2),
     (Y[0, :3], P[0, :3], SIGN)),
    ("hinge_embedding", lambda m, a, s: m.hinge_embedding_loss(a, s, 0.5, 2), (Y[0, :3], SIGN)),
    ("triplet_margin", lambda m, a, b, c: m.triplet_margin_loss(a, b, c, 0.5, 2, 1e-6, True),
     (Y, P, Y[::-1])),
    ("cosine_embedding", lambda m, a, b, s: m.cosine_embedding_loss(a, b, s, 0.1),
     (Y[:, :3].T.copy(), P[:, :3].T.copy(), SIGN)),
    ("constant_pad_nd", lambda m, x: m.constant_pad_nd(x, [1, 2, 0, 1], 0.5), (X3,)),
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")     # PyTorch's, for conv3d
@pytest.mark.parametrize("name,fn,arrays", FUNCTIONAL, ids=[f[0] for f in FUNCTIONAL])
def test_functional_spellings_match_torch(name, fn, arrays):
    outs, ins = [], []
    for lib in (torch, tg):
        ts = [lib.tensor(a.copy(), requires_grad=a is not SIGN) for a in arrays]
        outs.append(fn(lib, *ts))
        ins.append(ts)
    _check(*outs, 1e-10)
    if outs[0].requires_grad:
        for lib, out in zip((torch, tg), outs):
            out.backward(lib.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape)))
        for a, b in zip(*ins):
            if a.requires_grad:
                np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-9,
                                           atol=1e-12)


def test_functional_reduction_must_be_an_int_as_in_torch():
    for lib in (torch, tg):
        with pytest.raises(TypeError):
            lib.kl_div(lib.zeros(2), lib.ones(2), "mean")


def test_torch_kl_div_does_not_warn_about_batchmean():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tg.kl_div(tg.zeros(2), tg.ones(2))


def test_torch_dropout_requires_its_three_arguments():
    for lib in (torch, tg):
        with pytest.raises(TypeError):
            lib.dropout(lib.zeros(2), 0.5)


def test_batch_norm_updates_running_stats_like_torch():
    stats = []
    for lib in (torch, tg):
        mean, var = lib.zeros(4, dtype=lib.float64), lib.ones(4, dtype=lib.float64)
        lib.batch_norm(lib.tensor(X3), None, None, mean, var, True, 0.3, 1e-5, False)
        stats.append((mean.numpy(), var.numpy()))
    for a, b in zip(*stats):
        np.testing.assert_allclose(b, a, rtol=1e-6)


@pytest.mark.parametrize("shape,kwargs", [
    ((2, 3, 7, 6, 5), {"kernel_size": (3, 2, 2), "stride": (2, 1, 2), "padding": (1, 1, 0),
                       "dilation": (2, 1, 1)}),
    ((3, 6, 5, 7), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ((1, 2, 6, 5, 5), {"kernel_size": (2, 3, 3), "stride": 2, "ceil_mode": True})])
def test_max_pool3d_indices_and_gradients_match_torch(shape, kwargs):
    x0 = R.standard_normal(shape)
    res = []
    for lib in (torch, tg):
        x = lib.tensor(x0, requires_grad=True)
        y, i = lib.nn.functional.max_pool3d(x, return_indices=True, **kwargs)
        y.backward(lib.tensor(np.cos(np.arange(y.numel())).reshape(y.shape)))
        res.append((y.detach().numpy(), i.numpy(), x.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("fn", [
    lambda m: m.conv3d(m.zeros(1, 2, 2, 4, 4), m.zeros(3, 2, 3, 3, 3)),
    lambda m: m.conv3d(m.zeros(2, 4, 4, 4), m.zeros(3, 2, 3, 3)),
    lambda m: m.conv3d(m.zeros(1, 2, 4, 4, 4), m.zeros(3, 2, 3, 3, 3), None, 2, "same"),
    lambda m: m.max_pool3d(m.zeros(1, 1, 1, 4, 4), 2),
    lambda m: m.max_pool3d(m.zeros(1, 1, 4, 4, 4), 2, 2, 2),
], ids=["kernel_too_big", "weight_4d", "same_strided", "pool_too_small", "pool_pad"])
def test_3d_errors_match_torch_types(fn):
    for lib in (torch, tg):
        with pytest.raises(RuntimeError):
            fn(lib)


# ---------------- compiled == eager, numpy and JAX backends ----------------
def _program_inplace(x, y):
    a = x * 1
    a.sqrt_().atan2_(y).cumsum_(0)
    b = (y * 1).abs_().log_().clamp_min_(-0.5)
    c = (x * 1).round_(decimals=1).subtract_(y, alpha=2).divide_(y.abs() + 1)
    d = (x * 1).lt_(y).logical_xor_(y > 0)
    e = x.detach().clone()
    tg.exp_(e)
    return [a, b, c, d, e, tg.sigmoid_(x * 1), (x * 1).logit_(0.1), x.clone().fill_(2.0)]


def _program_aliases(x, y):
    return [x.ravel(), tg.msort(x), x.mH, tg.adjoint(x), tg.positive(x) * 1,
            tg.fix(x * 3), x.greater_equal(y), tg.logical_xor(x, y),
            tg.split_with_sizes(x, [1, 2], 1)[1], tg.fill(x, 0.5), tg.unflatten(x, 1, (3, 1))]


def _program_functional(x, w, p):
    return [tg.layer_norm(x, (3,), w), tg.rms_norm(x, (3,)), tg.celu(x, 0.5), tg.selu(x),
            tg.threshold(x, 0.1, -1.0), tg.hardshrink(x), tg.kl_div(x.log_softmax(1), p),
            tg.binary_cross_entropy_with_logits(x, p, None, None, 2),
            tg.constant_pad_nd(x, [1, 1], 2.0), tg.dropout(x, 0.3, False),
            tg.cosine_similarity(x, p), tg.max_pool1d(x.unsqueeze(0), 2)]


def _program_3d(x, w, p):
    return [tg.conv3d(x.reshape(1, 1, 1, 2, 3).expand(1, 1, 3, 2, 3), w.reshape(1, 1, 1, 1, 3),
                      None, 1, (1, 0, 1)),
            tg.max_pool3d(x.reshape(1, 1, 2, 3).expand(2, 3, 2, 3), (2, 2, 2), 1, 1),
            tg.conv_transpose3d(x.reshape(1, 1, 1, 2, 3).expand(1, 1, 2, 2, 3),
                                w.reshape(1, 1, 3, 1, 1), None, 2, 1, 1)]


PROGRAMS = [
    ("inplace", _program_inplace, lambda: [R.uniform(0.5, 2, (2, 3)), R.standard_normal((2, 3))]),
    ("aliases", _program_aliases, lambda: [R.standard_normal((2, 3)), R.standard_normal((2, 3))]),
    ("functional", _program_functional,
     lambda: [R.standard_normal((2, 3)), R.standard_normal(3), R.uniform(0.1, 0.9, (2, 3))]),
    ("3d", _program_3d,
     lambda: [R.standard_normal((2, 3)), R.standard_normal(3), R.uniform(0.1, 0.9, (2, 3))]),
]
# JAX compiles the 3-D programs' many small ops slowly: that pair runs with the slow tests
CASES = [pytest.param(*prog, backend, id=f"{prog[0]}-{backend}",
                      marks=[pytest.mark.slow] if (prog[0], backend) == ("3d", "jax") else [])
         for prog in PROGRAMS for backend in ("numpy", "jax")]


def _loss(outs):
    return sum(((o * (k + 1.5)).sum() for k, o in enumerate(outs)
                if o.dtype.is_floating_point and o.requires_grad), tg.tensor(0.0))


@pytest.mark.parametrize("name,fn,make,backend", CASES)
def test_compiled_matches_eager(name, fn, make, backend):
    if backend == "jax":
        pytest.importorskip("jax")

    def step(*args):
        outs = fn(*args)
        return outs, _loss(outs)

    cf = tg.compile(step, backend=backend)
    for call in range(2):
        arrays = make()
        args = [tg.tensor(a, requires_grad=True) for a in arrays]
        ref_args = [tg.tensor(a, requires_grad=True) for a in arrays]
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # no eager fallback
            outs, loss = cf(*args)
        ref_outs, ref_loss = step(*ref_args)
        assert ref_loss.requires_grad
        assert_same_outputs_and_grads(outs, loss, args, ref_outs, ref_loss, ref_args,
                                      rtol=1e-5)
    assert cf.stats.eager_calls == 0
    if backend == "jax":
        assert jax_programs_used(cf)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_compiled_inplace_on_arguments_writes_back_like_eager(backend):
    if backend == "jax":
        pytest.importorskip("jax")

    def f(x, y, m):
        x.sqrt_().atan2_(y)
        y[0].eq_(m[0])
        m.logical_xor_(m.flip(0))
        tg.clamp_min_(y, 0.25)
        return x.sum() + y.sum()

    cf = tg.compile(f, backend=backend)
    for call in range(2):
        data = [R.uniform(0.5, 2, (3, 3)), R.standard_normal((3, 3)), (R.random((3, 3)) > 0.5)]
        args = [tg.tensor(a.copy()) for a in data]
        ref = [tg.tensor(a.copy()) for a in data]
        v0 = [a._version for a in args]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = cf(*args)
        ref_out = f(*ref)
        np.testing.assert_allclose(out.numpy(), ref_out.numpy(), rtol=1e-12)
        for a, r, v in zip(args, ref, v0):
            np.testing.assert_allclose(a.numpy().astype(float), r.numpy().astype(float),
                                       rtol=1e-12)
            assert a._version > v
    assert cf.stats.eager_calls == 0
