"""PyTorch ops tracegrad lacked: bitwise shifts (`<<`, `>>`, in place), `sgn`, `frac`,
`fmax`/`fmin`, `swapdims`, `lerp_`/`addcmul_`/`addcdiv_`, `clamp` with tensor bounds,
`scatter_reduce`, and the in-place shape ops (`t_`, `transpose_`, `swapdims_`,
`unsqueeze_`, `squeeze_`).

Values, dtypes and error types against PyTorch; gradients against PyTorch and float64
finite differences (first and second order); compiled (numpy and JAX backends) against
eager; the in-place shape ops' autograd, version and view behaviour against PyTorch, and
their loud eager fallback inside a compiled function.
"""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from _differential import assert_same_outputs_and_grads, jax_programs_used
from tracegrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

NAN = np.nan
R = np.random.default_rng(7)


def _lib(m, a, grad=False):
    if not isinstance(a, np.ndarray):
        return a
    t = m.tensor(a.copy())
    if grad and a.dtype.kind == "f":
        t.requires_grad_(True)
    return t


# (name, fn(lib, *tensors), arrays): values and dtypes checked against PyTorch
I64 = np.array([1, -2, 3, 7, -8, 0])
SH = np.array([1, 64, -1, 2, 63, 0])
CASES = [
    ("lshift", lambda m, a, b: a << b, (I64, SH)),
    ("rshift", lambda m, a, b: a >> b, (I64, SH)),
    ("lshift_scalar", lambda m, a: a << 3, (I64,)),
    ("rlshift", lambda m, a: 2 << a.abs(), (I64,)),
    ("rshift_fn", lambda m, a: m.bitwise_right_shift(a, 1), (I64,)),
    ("lshift_fn_int8", lambda m, a, b: m.bitwise_left_shift(a, b),
     (np.array([-3, 5, 100], np.int8), np.array([7, 8, 1], np.int8))),
    ("rshift_uint8", lambda m, a, b: a >> b,
     (np.array([200, 7, 255], np.uint8), np.array([3, 9, 0], np.uint8))),
    ("lshift_bool_int", lambda m, a: a << 2, (np.array([True, False]),)),
    ("lshift_method_", lambda m, a: a.clone().bitwise_left_shift_(2), (I64,)),
    ("sgn", lambda m, a: m.sgn(a), (np.array([-2.0, 0.0, -0.0, NAN, 3.0]),)),
    ("sgn_int", lambda m, a: a.sgn(), (I64,)),
    ("sgn_bool", lambda m, a: m.sgn(a), (np.array([True, False]),)),
    ("sign_bool", lambda m, a: m.sign(a), (np.array([True, False]),)),
    ("frac", lambda m, a: m.frac(a), (np.array([-1.5, 2.25, 3.0, -0.0, NAN, np.inf]),)),
    ("frac_", lambda m, a: a.clone().frac_(), (np.array([-1.5, 2.25]),)),
    ("fmax", lambda m, a, b: m.fmax(a, b),
     (np.array([1.0, NAN, NAN, 2.0]), np.array([NAN, 2.0, NAN, 1.0]))),
    ("fmin", lambda m, a, b: m.fmin(a, b),
     (np.array([1.0, NAN, NAN, 2.0]), np.array([NAN, 2.0, NAN, 1.0]))),
    ("fmax_int_float", lambda m, a, b: a.fmax(b), (np.array([1, 5]), np.array([1.5, NAN]))),
    ("fmin_broadcast", lambda m, a, b: m.fmin(a, b), (R.standard_normal((3, 1)),
                                                       R.standard_normal(4))),
    ("swapdims", lambda m, a: m.swapdims(a, 0, 2), (R.standard_normal((2, 3, 4)),)),
    ("lerp_", lambda m, a, b: a.clone().lerp_(b, 0.25), (R.standard_normal(3),
                                                         R.standard_normal(3))),
    ("addcmul_int", lambda m, a, b, c: a.clone().addcmul_(b, c, value=2),
     (np.array([1, 2]), np.array([3, 4]), np.array([5, 6]))),
    ("addcdiv_", lambda m, a, b, c: a.clone().addcdiv_(b, c, value=0.5),
     (R.standard_normal(3), R.standard_normal(3), R.standard_normal(3) + 3)),
    ("clamp_tensors", lambda m, a, lo, hi: m.clamp(a, min=lo, max=hi),
     (np.array([1.0, 5, NAN, 3, 2, 0.5, 7]), np.array([2, NAN, 4, 3, 2, 1.0, 3]),
      np.array([1.0, 9, 9, 3, 2, 1, NAN]))),
    ("clamp_min_only", lambda m, a, lo: a.clamp(min=lo), (np.array([1.0, 5, 9]),
                                                           np.array([2.0, 6, NAN]))),
    ("clamp_broadcast", lambda m, a, lo, hi: a.clip(lo, hi),
     (R.standard_normal(4), R.standard_normal((3, 1)) - 1, R.standard_normal((3, 4)) + 1)),
    ("clamp_int_float", lambda m, a, lo: m.clamp(a, min=lo), (np.array([1, 5, 9]),
                                                               np.array([2.5, 3, 4]))),
    ("clamp_bool", lambda m, a, lo: m.clamp(a, min=lo), (np.array([True, False]),
                                                          np.array([False, True]))),
    ("clamp_f32_f64", lambda m, a, lo: m.clamp(a, min=lo),
     (np.array([1, 5, 9], np.float32), np.array(2.0))),
    ("clamp_min_fn", lambda m, a, lo: m.clamp_min(a, lo), (np.array([1.0, 5, 9]),
                                                            np.array([2.0, 6, 7]))),
    ("clamp_", lambda m, a, lo: a.clone().clamp_(min=lo), (np.array([1.0, 5, 9]),
                                                           np.array([2.0, 6, 7]))),
]
for _r in ("sum", "prod", "mean", "amax", "amin"):
    for _inc in (True, False):
        CASES.append((f"scatter_reduce_{_r}_{_inc}",
                      lambda m, x, i, s, r=_r, inc=_inc: m.scatter_reduce(x, 0, i, s, r,
                                                                          include_self=inc),
                      (np.array([1, -7, 3, 4]), np.array([0, 0, 2, 1, 1]),
                       np.array([5, 6, 7, 0, -2]))))
        CASES.append((f"scatter_reduce_f_{_r}_{_inc}",
                      lambda m, x, i, s, r=_r, inc=_inc: x.scatter_reduce(1, i, s, r,
                                                                          include_self=inc),
                      (R.standard_normal((2, 3)), R.integers(0, 3, (2, 4)),
                       R.standard_normal((2, 4)))))
CASES += [
    ("scatter_reduce_nan_amax", lambda m, x, i, s: x.scatter_reduce(0, i, s, "amax"),
     (np.array([1.0, 2, 3]), np.array([0, 1, 1]), np.array([NAN, 5.0, 1.0]))),
    ("scatter_reduce_0d", lambda m, x, i, s: x.scatter_reduce(0, i, s, "mean"),
     (np.array(2.0), np.array([0, 0]), np.array([4.0, 6.0]))),
    ("scatter_reduce_", lambda m, x, i, s: x.clone().scatter_reduce_(0, i, s, "prod"),
     (np.array([1.0, 2, 3]), np.array([0, 0]), np.array([3.0, 4.0]))),
    ("scatter_reduce_src_larger", lambda m, x, i, s: x.scatter_reduce(1, i, s, "mean"),
     (np.array([[1, 2, 3]]), np.array([[2, 2]]), np.array([[4, 9, 100]]))),
    ("scatter_reduce_int32_index", lambda m, x, i, s: x.scatter_reduce(0, i, s, "sum"),
     (np.array([1, 2]), np.array([1, 1], np.int32), np.array([3, 4]))),
]


def _same(a, b):
    assert str(a.dtype).replace("torch.", "") == str(b.dtype).replace("tracegrad.", "") \
        .replace("torch.", ""), (a.dtype, b.dtype)
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6, atol=1e-7,
                               equal_nan=True)


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_values_match_torch(name, fn, arrays):
    _same(fn(torch, *[_lib(torch, a) for a in arrays]), fn(tg, *[_lib(tg, a) for a in arrays]))


def _grad_cases():
    return [c for c in CASES if torch.tensor(c[2][0].copy()).is_floating_point()
            and "int_float" not in c[0]]


@pytest.mark.parametrize("name,fn,arrays", _grad_cases(), ids=[c[0] for c in _grad_cases()])
def test_gradients_match_torch(name, fn, arrays):
    t_in = [_lib(torch, a, True) for a in arrays]
    g_in = [_lib(tg, a, True) for a in arrays]
    t_out, g_out = fn(torch, *t_in), fn(tg, *g_in)
    if not t_out.requires_grad:
        assert not g_out.requires_grad
        return
    w = np.random.default_rng(1).standard_normal(t_out.shape)
    (t_out * torch.tensor(w, dtype=t_out.dtype)).sum().backward()
    (g_out * tg.tensor(w, dtype=g_out.dtype)).sum().backward()
    for a, b in zip(t_in, g_in):
        if isinstance(a, torch.Tensor) and a.requires_grad:
            np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(force=True), rtol=1e-6,
                                       atol=1e-9)


# ---------------- float64 finite differences, first and second order ----------------
def _f64(*shape):
    a = R.standard_normal(shape)
    return tg.tensor(a, requires_grad=True)


def _distinct(n, shift=0.0):
    """float64 values pairwise apart (no ties for max/min/clamp), none near zero."""
    return tg.tensor(R.permutation(n).astype(float) * 0.37 + 0.5 + shift + R.random(n) * 0.01,
                     requires_grad=True)


FD = [
    ("frac", lambda x: tg.frac(x * 0.3), lambda: [_f64(5)]),
    ("fmax", tg.fmax, lambda: [_distinct(6), _distinct(6, 0.05)]),
    ("fmin", tg.fmin, lambda: [_distinct(6), _distinct(6, 0.05)]),
    ("clamp_both", lambda x, lo, hi: tg.clamp(x, lo, hi),
     lambda: [_distinct(8), _distinct(8, 0.11), _distinct(8, 1.13)]),
    ("clamp_min", lambda x, lo: x.clamp(min=lo), lambda: [_distinct(6), _distinct(6, 0.13)]),
    ("clamp_max", lambda x, hi: x.clamp(max=hi), lambda: [_distinct(6), _distinct(6, 0.13)]),
    ("lerp_", lambda a, b, w: (a * 1).lerp_(b, w), lambda: [_f64(4), _f64(4), _f64(4)]),
    ("addcdiv_", lambda a, b, c: (a * 1).addcdiv_(b, c, value=0.7),
     lambda: [_f64(4), _f64(4), _distinct(4)]),
]
_INDEX = tg.tensor([[0, 2, 0, 1], [1, 1, 0, 2]])
for _r in ("sum", "prod", "mean", "amax", "amin"):
    for _inc in (True, False):
        FD.append((f"scatter_reduce_{_r}_{_inc}",
                   lambda x, s, r=_r, inc=_inc: x.scatter_reduce(1, _INDEX, s, r, include_self=inc),
                   lambda: [_distinct(6).reshape(2, 3), _distinct(8, 0.05).reshape(2, 4)]))


@pytest.mark.parametrize("name,fn,make", FD, ids=[c[0] for c in FD])
def test_gradcheck_and_gradgradcheck(name, fn, make):
    inputs = make()
    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs)


def test_scatter_reduce_prod_with_zeros_matches_torch():
    x = np.array([[0.0, 2.0, 3.0], [1.5, 0.0, -2.0]])
    s = np.array([[0.0, 4.0, 5.0, 0.0], [2.0, 0.0, 3.0, 1.0]])
    idx = np.array([[0, 0, 1, 2], [1, 1, 2, 2]])
    for inc in (True, False):
        outs = []
        for m in (torch, tg):
            xt, st = _lib(m, x, True), _lib(m, s, True)
            (xt.scatter_reduce(1, m.tensor(idx), st, "prod", include_self=inc)
             * m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=m.float64)).sum().backward()
            outs.append((xt.grad.numpy(), st.grad.numpy()))
        np.testing.assert_allclose(outs[1][0], outs[0][0])
        np.testing.assert_allclose(outs[1][1], outs[0][1])


# ---------------- errors: PyTorch's types ----------------
ERRORS = [
    ("lshift_float", lambda m: m.tensor([1.5]) << 1),
    ("rshift_float_rhs", lambda m: m.tensor([1]) >> m.tensor([1.0])),
    ("lshift_bool", lambda m: m.tensor([True]) << m.tensor([True])),
    ("ilshift_float", lambda m: m.tensor([1.0]).__ilshift__(1)),
    ("frac_int", lambda m: m.frac(m.tensor([1, 2]))),
    ("fmax_number", lambda m: m.fmax(m.tensor([1.0]), 1.5)),
    ("addcdiv_ints", lambda m: m.tensor([1, 2]).addcdiv_(m.tensor([3, 4]), m.tensor([1, 1]))),
    ("addcmul_broadcast_grow", lambda m: m.tensor([1.0, 2.0]).addcmul_(
        m.tensor([[3.0, 4.0]]), m.tensor([1.0, 1.0]))),
    ("lerp_int", lambda m: m.tensor([1, 2]).lerp_(m.tensor([1, 1]), 0.5)),
    ("clamp_mixed_bounds", lambda m: m.clamp(m.tensor([1.0]), min=0.0, max=m.tensor([3.0]))),
    ("clamp_int_float_bound_inplace", lambda m: m.tensor([1, 5]).clamp_(min=m.tensor([2.0]))),
    ("clamp_inplace_grow", lambda m: m.tensor([1.0, 5]).clamp_(min=m.tensor([[2.0, 3]]))),
    ("scatter_reduce_bad_reduce", lambda m: m.tensor([1, 2]).scatter_reduce(
        0, m.tensor([0]), m.tensor([1]), "add")),
    ("scatter_reduce_dtype", lambda m: m.tensor([1, 2]).scatter_reduce(
        0, m.tensor([0]), m.tensor([1.0]), "sum")),
    ("scatter_reduce_oob", lambda m: m.tensor([1, 2]).scatter_reduce(
        0, m.tensor([5]), m.tensor([1]), "sum")),
    ("scatter_reduce_float_index", lambda m: m.tensor([1, 2]).scatter_reduce(
        0, m.tensor([0.0]), m.tensor([1]), "sum")),
    ("t_3d", lambda m: m.zeros(2, 3, 4).t_()),
    ("t_leaf", lambda m: m.zeros(2, 3, requires_grad=True).t_()),
    ("unsqueeze_leaf", lambda m: m.zeros(2, requires_grad=True).unsqueeze_(0)),
    ("transpose_bad_dim", lambda m: m.zeros(2, 3).transpose_(0, 5)),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch_types(name, fn):
    with pytest.raises(Exception) as te:
        fn(torch)
    with pytest.raises(Exception) as ge:
        fn(tg)
    assert isinstance(ge.value, type(te.value)), (te.value, ge.value)


def test_error_messages_close_to_torch():
    with pytest.raises(NotImplementedError, match='"lshift_cpu" not implemented for \'Float\''):
        tg.tensor([1.5]) << 1
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, "
                                           "amax or amin, got add"):
        tg.tensor([1, 2]).scatter_reduce(0, tg.tensor([0]), tg.tensor([1]), "add")
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        tg.zeros(2, 3, requires_grad=True).t_()
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        tg.tensor([1, 5]).clamp_(min=tg.tensor([2.0]))


# ---------------- in place: shifts and composites ----------------
def test_inplace_shift_writes_through_a_view_and_bumps_the_version():
    for m in (torch, tg):
        a = m.tensor([1, 2, 3])
        v = a[:2]
        v <<= 3
        v >>= m.tensor([1, 0])
        assert a.tolist() == [4, 16, 3] and a._version == 2


def test_inplace_composites_on_a_leaf_that_requires_grad_raise():
    for f in (lambda x: x.lerp_(x.detach(), 0.5), lambda x: x.addcmul_(x.detach(), x.detach()),
              lambda x: x.frac_(), lambda x: x.clamp_(min=tg.zeros(3))):
        with pytest.raises(RuntimeError, match="leaf Variable"):
            f(tg.ones(3, requires_grad=True))


# ---------------- in-place shape ops: autograd, versions, views ----------------
SHAPE_OPS = [
    ("t_", lambda x: x.t_(), (2, 3)),
    ("transpose_", lambda x: x.transpose_(0, 2), (2, 3, 4)),
    ("swapdims_", lambda x: x.swapdims_(-1, 0), (2, 3)),
    ("swapaxes_", lambda x: x.swapaxes_(1, 0), (2, 3)),
    ("unsqueeze_", lambda x: x.unsqueeze_(-1), (2, 3)),
    ("squeeze_", lambda x: x.squeeze_(), (1, 3, 1)),
    ("squeeze_dim", lambda x: x.squeeze_(0), (1, 3, 1)),
]


@pytest.mark.parametrize("name,op,shape", SHAPE_OPS, ids=[s[0] for s in SHAPE_OPS])
def test_shape_op_on_non_leaf_matches_torch(name, op, shape):
    a = R.standard_normal(shape)
    res = []
    for m in (torch, tg):
        x = m.tensor(a, requires_grad=True)
        y = x * 2
        r = op(y)
        assert r is y
        w = m.tensor(np.arange(y.numel(), dtype=float).reshape(tuple(y.shape)))
        (y * w).sum().backward()
        res.append((tuple(y.shape), y._version, y.is_leaf, y.detach().numpy().copy(),
                    x.grad.numpy()))
    (s0, v0, l0, d0, g0), (s1, v1, l1, d1, g1) = res
    assert (s1, v1, l1) == (s0, v0, l0)
    np.testing.assert_array_equal(d1, d0)
    np.testing.assert_allclose(g1, g0)


def test_shape_op_on_a_leaf_under_no_grad_matches_torch():
    for m in (torch, tg):
        x = m.zeros(2, 3, requires_grad=True)
        with m.no_grad():
            x.t_()
        assert tuple(x.shape) == (3, 2) and x.is_leaf and x.requires_grad and x._version == 1


def test_shape_op_keeps_memory_shared_with_views_and_view_stays_a_view():
    for m in (torch, tg):
        base = m.zeros(2, 3)
        v = base[0]
        v.unsqueeze_(0)
        assert tuple(v.shape) == (1, 3) and v._base is base and base._version == 1
        v[0, 1] = 5.0
        assert base[0, 1].item() == 5.0
        h = m.zeros(2, 3)
        h.t_()
        h[2, 0] = 7.0          # writes the transposed layout: h was (2, 3) memory
        assert h.T[0, 2].item() == 7.0


def test_shape_op_on_a_view_of_a_non_leaf_backpropagates_like_torch():
    a = R.standard_normal((2, 3))
    grads = []
    for m in (torch, tg):
        x = m.tensor(a, requires_grad=True)
        y = x * 3
        v = y[1]
        v.unsqueeze_(0)
        v.mul_(m.tensor([[1.0, 2.0, 3.0]]))          # an in-place write through the view
        (y * y).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0])



@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_shape_op_inside_compile_falls_back_loudly_to_eager(backend):
    if backend == "jax":
        pytest.importorskip("jax")

    def f(x):
        y = x * 2
        y.t_()
        return y @ x

    cf = tg.compile(f, backend=backend)
    seen = []
    for _ in range(3):
        x = tg.tensor(R.standard_normal((2, 3)), requires_grad=True)
        x2 = tg.tensor(x.detach().numpy().copy(), requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = cf(x)
        seen += [str(w.message) for w in caught]
        ref = f(x2)
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy())
        out.sum().backward()
        ref.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy())
    assert cf.stats.eager_calls >= 1 and any("t_()" in m for m in seen), seen


# ---------------- compiled == eager, numpy and JAX backends ----------------
def _program_shifts(a, b):
    c = a.clone()
    c <<= 1
    return [a << b, a >> b, 3 << a.abs(), c, tg.bitwise_right_shift(a, 2)]


def _program_math(x, y, z):
    w = (x * 1).lerp_(y, 0.3)
    w.addcmul_(y, z, value=0.5).addcdiv_(y, z.abs() + 1)
    return [tg.fmax(x, y), tg.fmin(x, y), tg.frac(x * 3), tg.sgn(x), w, (x > 0).sign(),
            tg.swapdims(z.reshape(2, 2), 0, 1)]


def _program_clamp(x, lo, hi):
    v = x * 1
    v.clamp_(min=lo)
    return [tg.clamp(x, lo, hi), x.clamp(max=hi), v, x.clip(min=lo.reshape(1, 4))]


def _program_scatter_reduce(x, s, i):
    outs = [x.scatter_reduce(1, i, s, r, include_self=inc)
            for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)]
    y = x * 1
    y.scatter_reduce_(1, i, s, "amax", include_self=False)
    return outs + [y]


def _program_scatter_reduce_nan(x, s, i):
    return [x.scatter_reduce(0, i, s, r, include_self=inc) for r in ("amax", "amin", "mean")
            for inc in (True, False)]


PROGRAMS = [
    ("shifts", _program_shifts, lambda: [tg.tensor(R.integers(-50, 50, 6)),
                                         tg.tensor(R.permutation([1, 64, -1, 70, 0, 63]))]),
    ("math", _program_math, lambda: [tg.tensor(R.standard_normal(4), requires_grad=True),
                                     tg.tensor(R.standard_normal(4), requires_grad=True),
                                     tg.tensor(R.standard_normal(4), requires_grad=True)]),
    ("clamp", _program_clamp, lambda: [tg.tensor(R.standard_normal((3, 4)), requires_grad=True),
                                       tg.tensor(R.standard_normal(4) - 0.5, requires_grad=True),
                                       tg.tensor(R.standard_normal((3, 1)) + 0.5,
                                                 requires_grad=True)]),
    ("scatter_reduce", _program_scatter_reduce,
     lambda: [tg.tensor(R.standard_normal((2, 3)), requires_grad=True),
              tg.tensor(R.standard_normal((2, 4)), requires_grad=True),
              tg.tensor(R.integers(0, 3, (2, 4)))]),
    ("scatter_reduce_nan", _program_scatter_reduce_nan,
     lambda: [tg.tensor([1.0, NAN, 3.0, 4.0]), tg.tensor([NAN, 5.0, 1.0, 2.0, 0.5]),
              tg.tensor([0, 1, 1, 3, 3])]),
    ("scatter_reduce_int", _program_scatter_reduce_nan,
     lambda: [tg.tensor([1, -7, 3, 4]), tg.tensor([5, 6, 7, 0, -2]),
              tg.tensor([0, 0, 2, 1, 1])]),
]


def _loss(outs):
    return sum(((o * (k + 1.5)).sum() for k, o in enumerate(outs)
                if o.dtype.is_floating_point and o.requires_grad), tg.tensor(0.0))


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("name,fn,make", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_compiled_matches_eager(name, fn, make, backend):
    if backend == "jax":
        pytest.importorskip("jax")

    def step(*args):
        outs = fn(*args)
        return outs, _loss(outs)

    cf = tg.compile(step, backend=backend)
    for call in range(2):
        args = make()
        ref_args = [tg.tensor(a.detach().numpy().copy(), requires_grad=a.requires_grad)
                    for a in args]
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # no eager fallback
            outs, loss = cf(*args)
        ref_outs, ref_loss = step(*ref_args)
        assert_same_outputs_and_grads(outs, loss, args, ref_outs, ref_loss, ref_args)
    assert cf.stats.eager_calls == 0
    if backend == "jax":
        assert jax_programs_used(cf)


# ---------------- as_strided, as_strided_, resize_ ----------------
STRIDED = [
    ("windows", lambda m, x: x.as_strided((4, 3), (1, 1))),
    ("transposed", lambda m, x: m.as_strided(x, (2, 3), (1, 2))),
    ("offset", lambda m, x: x.as_strided((2, 2), (2, 1), 2)),
    ("zero_stride", lambda m, x: x.as_strided((3, 2), (0, 1), 1)),
    ("of_a_view", lambda m, x: x[2:].as_strided((2,), (2,))),
    ("2d_input", lambda m, x: x.reshape(2, 3).as_strided((3, 2), (1, 3))),
]


@pytest.mark.parametrize("name,fn", STRIDED, ids=[s[0] for s in STRIDED])
def test_as_strided_values_and_gradients_match_torch(name, fn):
    a = R.standard_normal(6)
    res = []
    for m in (torch, tg):
        x = m.tensor(a, requires_grad=True)
        y = fn(m, x * 1)
        w = m.tensor(np.arange(y.numel(), dtype=float).reshape(tuple(y.shape)) - 2.5)
        (y * w).sum().backward()
        res.append((y.detach().numpy().copy(), x.grad.numpy()))
    np.testing.assert_allclose(res[1][0], res[0][0])
    np.testing.assert_allclose(res[1][1], res[0][1])


def test_as_strided_gradcheck_and_gradgradcheck():
    x = _f64(6)
    fn = lambda t: (t * t).as_strided((3, 3), (1, 1)) * 1.5   # noqa: E731
    assert gradcheck(fn, [x])
    assert gradgradcheck(fn, [x])


def test_as_strided_shares_memory_both_ways_like_torch():
    for m in (torch, tg):
        x = m.arange(6.0)
        y = x.as_strided((2, 2), (1, 2))
        y[0, 1] = 100.0
        x[3] = -1.0
        assert x.tolist() == [0.0, 1.0, 100.0, -1.0, 4.0, 5.0]
        assert y.tolist() == [[0.0, 100.0], [1.0, -1.0]] and x._version == 2


AS_STRIDED_ERRORS = [
    ("negative_stride", lambda m: m.arange(6.0).as_strided((2, 2), (1, -1))),
    ("length_mismatch", lambda m: m.arange(6.0).as_strided((2, 2), (1,))),
    ("past_storage", lambda m: m.arange(6.0).as_strided((3, 3), (2, 2))),
    ("negative_offset", lambda m: m.arange(6.0).as_strided((2,), (1,), -1)),
    ("resize_requires_grad", lambda m: m.arange(6.0, requires_grad=True).resize_(2, 3)),
    ("resize_negative", lambda m: m.zeros(3).resize_(-2)),
    ("as_strided_leaf", lambda m: m.zeros(6, requires_grad=True).as_strided_((2,), (1,))),
]


@pytest.mark.parametrize("name,fn", AS_STRIDED_ERRORS, ids=[e[0] for e in AS_STRIDED_ERRORS])
def test_as_strided_and_resize_errors_match_torch_types(name, fn):
    with pytest.raises(Exception) as te:
        fn(torch)
    with pytest.raises(Exception) as ge:
        fn(tg)
    assert isinstance(ge.value, type(te.value)), (te.value, ge.value)


def test_as_strided_outside_the_tensors_elements_is_refused_loudly():
    x = tg.arange(6.0)
    with pytest.raises(NotImplementedError, match="not supported"):
        x[2:].as_strided((2,), (1,), 0)            # PyTorch reads the base's storage here
    with pytest.raises(NotImplementedError, match="not supported"):
        x.reshape(2, 3).t().as_strided((2,), (1,))


def test_as_strided_inplace_and_resize_match_torch():
    res = []
    for m in (torch, tg):
        x = m.tensor(R.standard_normal(6) if not res else res[0][-1], requires_grad=True)
        z = x * 1
        z.as_strided_((2, 2), (2, 1), 1)
        (z * m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=z.dtype)).sum().backward()
        a = m.arange(6.0)
        a.resize_(2, 2)
        shrunk = (a.tolist(), a._version)
        a.resize_(3, 3)
        grown = (tuple(a.shape), a.flatten()[:4].tolist(), a._version)
        b = m.arange(6.0)
        v = b[1:3]
        v.resize_(1, 2)
        res.append((tuple(z.shape), z._version, x.grad.numpy(), shrunk, grown, v.tolist(),
                    v._base is b, x.detach().numpy()))
    (s0, v0, g0, sh0, gr0, vv0, b0, _), (s1, v1, g1, sh1, gr1, vv1, b1, _) = res
    assert (s1, v1, sh1, gr1, vv1, b1) == (s0, v0, sh0, gr0, vv0, b0)
    np.testing.assert_allclose(g1, g0)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_as_strided_compiled_matches_eager_with_writes_through_the_view(backend):
    if backend == "jax":
        pytest.importorskip("jax")

    def f(x, w):
        y = (x * 1).as_strided((3, 3), (1, 1))
        z = x * 2
        v = z.as_strided((2, 2), (1, 2), 1)
        v.mul_(w)                                    # a write through the strided view
        return y * 2, z, y.sum() + z.sum()

    cf = tg.compile(f, backend=backend)
    for _ in range(2):
        a, b = R.standard_normal(6), R.standard_normal((2, 2))
        x, w = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        x2, w2 = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = cf(x, w)
        ref = f(x2, w2)
        for o, r in zip(out, ref):
            np.testing.assert_allclose(o.detach().numpy(), r.detach().numpy(), rtol=1e-12)
        out[2].backward()
        ref[2].backward()
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy())
        np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy())
    assert cf.stats.eager_calls == 0
    if backend == "jax":
        assert jax_programs_used(cf)


@pytest.mark.parametrize("op", [lambda y: y.resize_(3, 2), lambda y: y.as_strided_((3,), (2,))])
def test_resize_and_as_strided_inside_compile_run_eagerly_with_a_warning(op):
    def f(x):
        y = x * 2
        op(y)
        return y + 1

    cf = tg.compile(f)
    seen = []
    for _ in range(2):
        x = tg.tensor(R.standard_normal(6))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = cf(x)
        seen += [str(w.message) for w in caught]
        np.testing.assert_allclose(out.numpy(), f(x).numpy())
    assert cf.stats.eager_calls >= 1 and any("runs eagerly" in m for m in seen), seen


def test_views_taken_before_a_shape_change_refuse_to_derive_gradients_loudly():
    """Note [Shape changed in place]: their chain is relative to the old shape (PyTorch
    re-derives them through the storage); silently wrong gradients are refused."""
    x = tg.tensor(R.standard_normal((2, 3)), requires_grad=True)
    h = x * 1
    vv = h.view(3, 2)
    h.t_()
    with pytest.raises(NotImplementedError, match="taken before its base's shape changed"):
        vv * 2
    with pytest.raises(NotImplementedError, match="taken before its base's shape changed"):
        vv.mul_(2.0)
    with tg.no_grad():                      # no gradient to derive: values only, as PyTorch
        b = tg.zeros(2, 3)
        early = b.view(3, 2)
        b.t_()
        early[0, 1] = 4.0
        assert b[1, 0].item() == 4.0


def test_views_taken_after_a_shape_change_backpropagate_like_torch():
    a = R.standard_normal((2, 3))
    grads = []
    for m in (torch, tg):
        x = m.tensor(a, requires_grad=True)
        h = x * 1
        h.t_()
        v = h[1:]
        v.mul_(m.tensor([[2.0, 3.0], [4.0, 5.0]], dtype=m.float64))
        (h * m.arange(6.0, dtype=m.float64).view(3, 2)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0])
