"""Adversarial review of dtypes, type promotion and process-wide settings in compiled code.

Each program runs eagerly and compiled (numpy and JAX backends) over several calls, with
`_differential.records`: `make(i)` builds call i's arguments and may first change a global
setting, so a cached path that kept the old setting's behaviour differs from eager. Eager
is checked against PyTorch where torch is installed.
"""
import numpy as np
import pytest

import tracegrad as tg
from _differential import assert_same_records, records

BACKENDS = ["numpy", "jax"]


def _backend(name):
    if name == "jax":
        pytest.importorskip("jax")
    return name


@pytest.fixture(autouse=True)
def _restore_settings():
    yield
    tg.use_deterministic_algorithms(False)
    tg.set_num_threads(2)
    tg.set_float32_matmul_precision("highest")
    tg.set_printoptions(profile="default")
    tg.set_default_dtype(tg.float32)


def _same(fn, make, calls=5, backend="numpy", **kw):
    eager, compiled, f = records(fn, make, calls, backend=_backend(backend), **kw)
    assert_same_records(eager, compiled)
    return f


# -- process-wide settings read or set inside the function (Note [Settings read and set])

def _toggling(setter):
    """Arguments of call i, after `setter(i % 2 == 1)` (the setting flips between calls)."""
    def make(i):
        setter(i % 2 == 1)
        return (tg.tensor([1.0, 2.0]),)
    return make


@pytest.mark.parametrize("backend", BACKENDS)
def test_deterministic_setting_read_inside_is_guarded(backend):
    def f(x):
        return x * (2 if tg.are_deterministic_algorithms_enabled() else 3)
    f = _same(f, _toggling(tg.use_deterministic_algorithms), backend=backend)
    assert "deterministic algorithms changed" in str(f.stats)


@pytest.mark.parametrize("backend", BACKENDS)
def test_threads_and_matmul_precision_read_inside_are_guarded(backend):
    def f(x):
        return x * tg.get_num_threads(), tg.get_float32_matmul_precision()
    _same(f, _toggling(lambda on: (tg.set_num_threads(1 if on else 3),
                                   tg.set_float32_matmul_precision("high" if on else
                                                                   "highest"))),
          backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_print_options_changed_between_calls_change_repr(backend):
    def f(x):
        return repr(x * 1.23456), f"{x}"
    _same(f, _toggling(lambda on: tg.set_printoptions(precision=2 if on else 4,
                                                      sci_mode=True if on else None)),
          backend=backend)


def _reset():
    tg.use_deterministic_algorithms(False)
    tg.set_num_threads(3)
    tg.set_float32_matmul_precision("highest")
    tg.set_printoptions(profile="default")


@pytest.mark.parametrize("backend", BACKENDS)
def test_settings_set_inside_are_set_on_every_call(backend):
    def f(x):
        tg.use_deterministic_algorithms(True, warn_only=True)
        tg.set_num_threads(1)
        tg.set_float32_matmul_precision("medium")
        tg.set_printoptions(precision=2)
        return x * 2

    def make(i):
        _reset()
        return (tg.tensor([1.0, 2.0]),)

    def observe(args, out):
        return (out.tolist(), tg.are_deterministic_algorithms_enabled(),
                tg.is_deterministic_algorithms_warn_only_enabled(), tg.get_num_threads(),
                tg.get_float32_matmul_precision(), repr(tg.tensor([1.23456])))
    f = _same(f, make, backend=backend, observe=observe)
    assert f.stats.traces == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_setting_toggled_from_its_own_value_inside(backend):
    def f(x):
        on = tg.are_deterministic_algorithms_enabled()
        tg.use_deterministic_algorithms(not on)
        return x + on

    def observe(args, out):
        return out.tolist(), tg.are_deterministic_algorithms_enabled()
    def make(i):
        if i == 0:                       # each run starts off; then each call flips it
            tg.use_deterministic_algorithms(False)
        return (tg.tensor([1.0]),)
    _same(f, make, backend=backend, observe=observe)


def test_settings_as_torch_reads_them():
    torch = pytest.importorskip("torch")
    for m in (tg, torch):
        m.use_deterministic_algorithms(True, warn_only=True)
        m.set_printoptions(precision=2)
    try:
        assert repr(tg.tensor([1.23456])) == repr(torch.tensor([1.23456]))
        assert (tg.is_deterministic_algorithms_warn_only_enabled()
                == torch.is_deterministic_algorithms_warn_only_enabled())
    finally:
        for m in (tg, torch):
            m.use_deterministic_algorithms(False)
            m.set_printoptions(profile="default")


# -- Python's `%` on floats: a zero result keeps the dividend's sign, as PyTorch (and JAX)

_DIVIDENDS = [-3.0, 6.0, 3.0, -6.0, 0.0, -0.0, 5.5, -5.5, 7.25]
_DIVISORS = [3.0, -3.0, 3.0, -3.0, 3.0, -3.0, float("inf"), float("inf"), -0.5]


def _bits(t):
    return t.detach().numpy().tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_float_remainder_signed_zero_matches_torch(dtype):
    torch = pytest.importorskip("torch")
    def ab(m):
        return (m.tensor(_DIVIDENDS, dtype=getattr(m, dtype)),
                m.tensor(_DIVISORS, dtype=getattr(m, dtype)))
    for f in (lambda m, a, b: a % b, lambda m, a, b: a % 3, lambda m, a, b: a % -3.0,
              lambda m, a, b: m.remainder(a, b[1]), lambda m, a, b: a[1] % b):
        assert _bits(f(tg, *ab(tg))) == f(torch, *ab(torch)).numpy().tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_remainder_compiled_bitwise_equals_eager(backend):
    def f(x, y):
        return x % y, x % 3, (x * 2) % -3.0

    def make(i):
        return (tg.tensor([v + (i % 2) * 3 for v in _DIVIDENDS]), tg.tensor(_DIVISORS))
    _same(f, make, backend=backend)


# -- eager errors PyTorch raises for bool inputs and integer in-place clamps

@pytest.mark.parametrize("op", ["argmax", "argmin", "topk"])
def test_bool_argmax_argmin_topk_raise_like_torch(op):
    args = (1,) if op == "topk" else ()
    with pytest.raises(RuntimeError, match="does not support bool"):
        getattr(tg.tensor([True, False]), op)(*args)
    m = tg.tensor([[True, False], [False, True]])
    assert m.max(1).indices.tolist() == [0, 1] and m.min(0).indices.tolist() == [1, 0]
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="does not support bool"):
        getattr(torch.tensor([True, False]), op)(*args)


@pytest.mark.parametrize("case", [
    ("float bound on int", lambda m: m.tensor([1, 5]).clamp_(0.5, 2), "result type Float"),
    ("float bound on bool", lambda m: m.tensor([True]).clamp_(0.5), "result type Float"),
    ("no bound", lambda m: m.tensor([1.0]).clamp_(), "At least one of 'min' or 'max'"),
    ("int8 overflow", lambda m: m.tensor([1], dtype=m.int8).clamp_(0, 300),
     "without overflow"),
], ids=lambda c: c[0])
def test_inplace_clamp_checks_its_bounds_like_torch(case):
    _, f, msg = case
    with pytest.raises(RuntimeError, match=msg):
        f(tg)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match=msg):
        f(torch)


def test_inplace_clamp_numpy_scalar_bound_keeps_float32():
    x = tg.tensor([1.0, -1.0]).clamp_(np.float64(0.1))
    assert x.dtype is tg.float32 and x.tolist() == pytest.approx([1.0, 0.1])


# -- numpy scalars: `np.True_` is a float to PyTorch, and stays one under a trace

@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_bool_scalar_argument_promotes_as_eager(backend):
    scalars = [2.5, np.True_, True, np.False_, 1, np.float32(1.5), np.int8(3)]

    def f(x, s):
        return x * s, x + s, s * x, x // s if not isinstance(s, bool) and s else x
    _same(f, lambda i: (tg.tensor([1, 2, 3], dtype=tg.int32), scalars[i]),
          calls=len(scalars), backend=backend)


def test_numpy_bool_scalar_in_creation_and_clamp_matches_torch():
    torch = pytest.importorskip("torch")
    for f in (lambda m: m.full((2,), np.True_), lambda m: m.tensor([1, 2]).clamp(np.True_),
              lambda m: m.tensor([True, False]) + np.True_, lambda m: m.arange(np.True_, 3),
              lambda m: m.tensor([1, 2], dtype=m.int32) * np.False_):
        a, b = f(tg), f(torch)
        assert str(a.dtype) == str(b.dtype) and a.tolist() == b.tolist()


# -- Python numbers into an integer dtype: PyTorch's overflow check, not numpy's

@pytest.mark.parametrize("case", [
    ("uint8 negatives wrap", lambda m: m.tensor([[1, -3], [-255, 4]], dtype=m.uint8)),
    ("uint8 scalar", lambda m: m.tensor(-2, dtype=m.uint8)),
    ("floats truncate", lambda m: m.tensor([1.5, -2.0, 127.0], dtype=m.int8)),
    ("bools", lambda m: m.tensor([True, 2], dtype=m.int8)),
    ("past uint8", lambda m: m.tensor([-256], dtype=m.uint8)),
    ("negative float to uint8", lambda m: m.tensor([-0.5], dtype=m.uint8)),
    ("float past int8", lambda m: m.tensor([127.9], dtype=m.int8)),
    ("nan to int", lambda m: m.tensor([float("nan")], dtype=m.int8)),
    ("inf to int32", lambda m: m.tensor([float("inf")], dtype=m.int32)),
    ("past int64", lambda m: m.tensor([2 ** 63], dtype=m.int64)),
], ids=lambda c: c[0])
def test_tensor_from_python_numbers_into_int_dtypes_like_torch(case):
    torch = pytest.importorskip("torch")
    _, f = case

    def outcome(m):
        try:
            t = f(m)
        except (RuntimeError, ValueError) as e:
            return [c for c in type(e).__mro__ if c.__module__ == "builtins"][0], \
                str(e).split("\n")[0].split(": ", 1)[-1]
        return str(t.dtype), t.tolist()
    assert outcome(tg) == outcome(torch)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_of_python_ints_inside_compiled_wraps_as_eager(backend):
    def f(x, k):
        return x + tg.tensor([k, -k], dtype=tg.uint8)
    _same(f, lambda i: (tg.tensor([1, 2], dtype=tg.uint8), [3, 200, -255, 256][i]), calls=4,
          backend=backend)


def test_can_cast_matches_torch():
    torch = pytest.importorskip("torch")
    names = ["bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"]
    for a in names:
        for b in names:
            assert tg.can_cast(getattr(tg, a), getattr(tg, b)) == torch.can_cast(
                getattr(torch, a), getattr(torch, b)), (a, b)
    with pytest.raises(TypeError, match="must be torch.dtype"):
        tg.can_cast(1, tg.int8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dtype_queries_inside_compiled_follow_the_input_dtype(backend):
    dtypes = [tg.float32, tg.float64, tg.int32, tg.float16, tg.int64, tg.bool]

    def f(x):
        k = 2 if tg.can_cast(x.dtype, tg.int32) else 3
        eps = tg.finfo(x.dtype).eps if x.is_floating_point() else 1
        return x.to(tg.promote_types(x.dtype, tg.float16)) * k + eps, str(x.dtype)
    _same(f, lambda i: (tg.tensor([1, 0, 3]).to(dtypes[i]),), calls=len(dtypes),
          backend=backend)


# -- float16: computed in float32 and rounded once (Note [Half precision computed in float])

_HALF = np.concatenate([np.linspace(-6, 6, 60), np.linspace(0.01, 0.99, 7)]).astype(np.float16)
_HALF_OPS = [
    ("sigmoid", lambda m, x: m.sigmoid(x)),
    ("silu", lambda m, x: m.nn.functional.silu(x)),
    ("erfinv", lambda m, x: m.erfinv(x / 7)),
    ("softmax", lambda m, x: m.softmax(x, 0)),
]


@pytest.mark.parametrize("name,f", _HALF_OPS, ids=[n for n, _ in _HALF_OPS])
def test_float16_kernels_round_once_like_torch(name, f):
    torch = pytest.importorskip("torch")
    got, want = f(tg, tg.tensor(_HALF)), f(torch, torch.tensor(_HALF))
    assert got.dtype is tg.float16
    assert _bits(got) == want.numpy().tobytes()


def test_float16_gelu_sinc_rsqrt_within_a_few_ulps_of_torch():
    torch = pytest.importorskip("torch")
    for f in (lambda m, x: m.nn.functional.gelu(x), lambda m, x: m.sinc(x),
              lambda m, x: m.log_softmax(x, 0), lambda m, x: m.rsqrt(x.abs() + 0.5)):
        a = f(tg, tg.tensor(_HALF)).numpy().view(np.int16).astype(int)
        b = f(torch, torch.tensor(_HALF)).numpy().view(np.int16).astype(int)
        assert np.abs(a - b).max() <= 3        # was 3825 ulps for gelu, 29428 for sinc


@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_kernels_compiled_equal_eager(backend):
    def f(x):
        y = x * 2
        return (tg.sigmoid(y), tg.rsqrt(y.abs() + 1), tg.nn.functional.silu(y),
                tg.softmax(y.reshape(-1)[:60].reshape(6, 10), 1), tg.sinc(x),
                (tg.sigmoid(x) * tg.softmax(x, 0)).sum())
    make = (lambda i: (tg.tensor(_HALF + np.float16(i % 2), requires_grad=True),))
    if backend == "numpy":
        _same(f, make, calls=4, backend=backend, backward=True)
        return
    pytest.importorskip("jax")                 # JAX's float rounding may differ by an ulp
    c = tg.compile(f, backend="jax")
    for i in range(4):
        for e, r in zip(f(*make(i)), c(*make(i))):
            assert e.dtype is r.dtype is tg.float16
            np.testing.assert_allclose(r.detach().numpy().astype(np.float32),
                                       e.detach().numpy().astype(np.float32), rtol=2e-3,
                                       atol=1e-4)


def test_python_float_type_as_dtype_is_float64_like_torch():
    torch = pytest.importorskip("torch")
    for m in (tg, torch):
        m.set_default_dtype(m.float32)
    for f in (lambda m: m.zeros(2, dtype=float), lambda m: m.tensor([1], dtype=float),
              lambda m: m.ones(2).to(float), lambda m: m.arange(3, dtype=float),
              lambda m: m.ones(2).sum(dtype=float), lambda m: m.ones(2).to(int),
              lambda m: m.ones(2).to(bool)):
        assert str(f(tg).dtype) == str(f(torch).dtype)


@pytest.mark.parametrize("bound", [65519.0, 1e5, -1e5, 100000])
def test_float16_clamp_bound_past_its_range_raises_like_torch(bound):
    torch = pytest.importorskip("torch")
    for m in (tg, torch):
        with pytest.raises(RuntimeError, match="c10::Half without overflow"):
            m.tensor([1.0], dtype=m.float16).clamp(max=bound)
        with pytest.raises(RuntimeError, match="c10::Half without overflow"):
            m.tensor([1.0], dtype=m.float16).clamp_(min=bound)
    for b in (65504.0, float("inf"), float("nan")):       # representable: no error
        assert str(tg.tensor([1.0], dtype=tg.float16).clamp(max=b)) == str(
            torch.tensor([1.0], dtype=torch.float16).clamp(max=b))


@pytest.mark.parametrize("case", [
    ("end wider", lambda m: m.lerp(m.ones(2), m.ones(2, dtype=m.float64), 0.5), RuntimeError),
    ("end narrower", lambda m: m.lerp(m.ones(2, dtype=m.float64), m.ones(2), 0.5),
     RuntimeError),
    ("weight tensor", lambda m: m.lerp(m.ones(2), m.ones(2), m.ones(2, dtype=m.float64)),
     RuntimeError),
    ("integer", lambda m: m.lerp(m.ones(2, dtype=m.int64), m.ones(2, dtype=m.int64), 0.5),
     NotImplementedError),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_lerp_refuses_mixed_dtypes_like_torch(case):
    _, f, err = case
    torch = pytest.importorskip("torch")
    for m in (tg, torch):
        with pytest.raises(err) as info:
            f(m)
        msg = str(info.value).split("\n")[0].split(": ", 1)[-1]
        if m is tg:
            mine = msg
    assert mine == msg
    zero_dim = tg.lerp(tg.ones(2), tg.ones(2) * 3, tg.tensor(0.25, dtype=tg.float64))
    assert zero_dim.dtype is tg.float32 and zero_dim.tolist() == [1.5, 1.5]


# -- dtypes that change between calls (each re-traces or errors as eager does)

@pytest.mark.parametrize("backend", BACKENDS)
def test_argument_dtype_changes_between_calls(backend):
    dtypes = ["float32", "float64", "int64", "float16", "bool", "float64"]

    def f(x):
        return x * 2.5, x / 2, x // 2 if x.dtype != tg.bool else x, x.sum(), x.float().mean()
    f = _same(f, lambda i: (tg.tensor([1, -2, 3]).to(getattr(tg, dtypes[i])),),
              calls=len(dtypes), backend=backend)
    assert f.stats.traces == 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_mixed_precision_gradients_keep_each_leaf_dtype(backend):
    def f(w, x, s):
        return (w * x + s).pow(2).sum() + (w.double() @ x.double())

    def make(i):
        wd, xd = [("float32", "float64"), ("float64", "float32"), ("float16", "float32"),
                  ("float32", "float64")][i]
        return (tg.tensor([1.5, -2.0], dtype=getattr(tg, wd), requires_grad=True),
                tg.tensor([0.5, 3.0], dtype=getattr(tg, xd), requires_grad=True),
                tg.tensor(0.25, dtype=tg.float64, requires_grad=True))
    eager, compiled, _ = records(f, make, 4, backend=_backend(backend), backward=True)
    if backend == "numpy":
        assert_same_records(eager, compiled)
    for e, c in zip(eager, compiled):           # each .grad has its leaf's dtype
        assert [a[2] for a in e[2][1]] == [a[2] for a in c[2][1]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_default_dtype_changed_between_calls(backend):
    def f(x):
        return x * 1.5, tg.ones(2) + x[:2], tg.tensor([0.1, 0.2, 0.3]) * x, x / 3

    def make(i):
        tg.set_default_dtype(tg.float64 if i % 2 else tg.float32)
        return (tg.tensor([1, 2, 3]),)
    _same(f, make, calls=4, backend=backend)


# -- floats guarded by value: the sign of zero and NaN (Note [Zeros and NaNs guarded])

SCALE = 0.0
_CFG = {"s": 0.0}


@pytest.mark.parametrize("backend", BACKENDS)
def test_global_zero_changing_sign_between_calls(backend):
    global SCALE

    def f(x):
        return x * SCALE, x * _CFG["s"], x + SCALE

    def make(i):
        global SCALE
        SCALE = _CFG["s"] = -0.0 if i % 2 else 0.0
        return (tg.tensor([1.0, -2.0]),)
    try:
        _same(f, make, calls=4, backend=backend)
    finally:
        SCALE = _CFG["s"] = 0.0


def test_global_nan_does_not_retrace_every_call():
    global SCALE
    SCALE = float("nan")
    try:
        f = tg.compile(lambda x: x * SCALE)
        for _ in range(4):
            SCALE = float("nan")                # a new NaN object each call
            assert np.isnan(f(tg.tensor([1.0])).numpy()).all()
        assert f.stats.traces == 1
    finally:
        SCALE = 0.0


def test_subtracting_numpy_bool_scalar_like_torch():
    torch = pytest.importorskip("torch")
    for f in (lambda m: m.tensor([1.0, 2.0]) - np.True_, lambda m: np.True_ - m.tensor([1, 2]),
              lambda m: m.tensor([1.0]).sub(np.True_, alpha=2)):
        a, b = f(tg), f(torch)
        assert str(a.dtype) == str(b.dtype) and a.tolist() == b.tolist()
    for m in (tg, torch):                    # a bool tensor still refuses, naming one bool
        with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):
            m.tensor([True]) - np.True_


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_bool_scalar_subtracted_inside_compiled(backend):
    _same(lambda x, s: (x - s, s - x), lambda i: (tg.tensor([1, -2]).to(
        [tg.float32, tg.int64, tg.int8, tg.float64][i]), [np.True_, np.False_, 1, 2.5][i]),
        calls=4, backend=backend)


def test_jax_zero_dim_boolean_mask_runs_on_numpy_with_a_warning():
    pytest.importorskip("jax")

    def f(x):
        a = x.mean()
        return a[a > 0] * 2
    c = tg.compile(f, backend="jax")
    with pytest.warns(UserWarning, match="zero-dim boolean mask"):
        for xs in ([1.0, 2.0], [-1.0, -2.0], [2.0, 2.0]):
            assert c(tg.tensor(xs)).tolist() == f(tg.tensor(xs)).tolist()


@pytest.mark.parametrize("value", [np.float32(2.5), np.float16(1.5), np.True_, np.float64(2.5),
                                   np.int64(2), np.uint8(3)], ids=repr)
def test_item_assignment_of_numpy_scalars_like_torch(value):
    torch = pytest.importorskip("torch")

    def outcome(m, dtype):
        x = m.zeros(3, dtype=getattr(m, dtype))
        try:
            x[0] = value
            x[1:] = value
        except TypeError as e:
            return "TypeError", str(e).split("\n")[0].split(": ", 1)[-1].split(" Pass")[0]
        return x.tolist(), x.fill_(value).tolist()
    for dtype in ("float32", "int64"):
        assert outcome(tg, dtype) == outcome(torch, dtype)
