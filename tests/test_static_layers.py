"""Note [Static kernels] for a dense layer's ops (ops/static_layers.py): the specialized
`linear`, `relu` and `threshold_backward` kernels give the generic kernels' bits on operands
of their node's types (any layout, NaN and inf included, with and without `out=`), and
decline the nodes whose types send the generic kernel down another branch."""
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tracegrad as tg
from tracegrad.ir.types import TensorType, Value
from tracegrad.ops import REGISTRY
from tracegrad.ops import static_layers as S


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.tobytes()


def _node(name, *arrays):
    return SimpleNamespace(prim=REGISTRY[name], attrs={},
                           inputs=[Value(k, TensorType.of(np.asarray(a)))
                                   for k, a in enumerate(arrays)])


def _raw(name):
    k = REGISTRY[name].kernel
    return getattr(k, "quiet_raw", k)


def _layout(a, how):
    if how == "t" and a.ndim == 2:
        return np.asfortranarray(a)
    if how == "strided":
        return np.repeat(a, 2, axis=-1)[..., ::2]
    return a


_SPECIAL = st.sampled_from([None, np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0])


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 6), i=st.integers(1, 5), o=st.integers(1, 5),
       seed=st.integers(0, 2 ** 16), dtype=st.sampled_from([np.float32, np.float64]),
       bias=st.sampled_from(["1d", "0d", "full"]), layout=st.sampled_from(["c", "t", "strided"]),
       special=_SPECIAL)
def test_static_linear_is_the_generic_kernel(n, i, o, seed, dtype, bias, layout, special):
    rng = np.random.default_rng(seed)
    x = _layout(rng.standard_normal((n, i)).astype(dtype), layout)
    w = _layout(rng.standard_normal((o, i)).astype(dtype), layout)
    b = {"1d": rng.standard_normal(o), "0d": np.asarray(rng.standard_normal()),
         "full": rng.standard_normal((n, o))}[bias].astype(dtype)
    if special is not None:
        x[0, 0] = special
    f = S._linear_specialize(_node("linear", b, x, w))
    with np.errstate(all="ignore"):          # compiled programs run quiet
        assert _bits(f(b, x, w)) == _bits(_raw("linear")(b, x, w))


def test_static_linear_declines_a_broadcasting_2d_bias():
    x, w = np.ones((3, 4), np.float32), np.ones((2, 4), np.float32)
    assert S._linear_specialize(_node("linear", np.ones((1, 2), np.float32), x, w)) is None
    assert S._linear_specialize(_node("linear", np.ones(2, np.float32), x, w)) is not None


@settings(max_examples=150, deadline=None)
@given(shape=st.sampled_from([(5,), (3, 4), (2, 3, 2)]), seed=st.integers(0, 2 ** 16),
       dtype=st.sampled_from([np.float16, np.float32, np.float64]),
       layout=st.sampled_from(["c", "t", "strided"]), special=_SPECIAL,
       into=st.sampled_from([None, "x", "fresh"]))
def test_static_relu_is_the_generic_kernel(shape, seed, dtype, layout, special, into):
    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal(shape).astype(dtype)
    x0.flat[0] = -0.0
    if special is not None:
        x0.flat[-1] = special
    f = S._relu_specialize(_node("relu", x0))
    results = []
    for kernel in (f, _raw("relu")):
        x = _layout(x0.copy(), layout)
        out = {None: None, "x": x, "fresh": np.empty(shape, dtype)}[into]
        r = kernel(x) if out is None else kernel(x, out=out)
        assert out is None or r is out
        results.append(_bits(r))
    assert results[0] == results[1]


def test_static_relu_declines_bool_int_and_0d():
    for x in (np.ones(3, bool), np.ones(3, np.int64), np.float32(1).reshape(())):
        assert S._relu_specialize(_node("relu", x)) is None


@settings(max_examples=150, deadline=None)
@given(shape=st.sampled_from([(5,), (3, 4), (2, 3, 2)]), seed=st.integers(0, 2 ** 16),
       dtype=st.sampled_from([np.float16, np.float32, np.float64]),
       layout=st.sampled_from(["c", "t", "strided"]), gspecial=_SPECIAL, yspecial=_SPECIAL,
       into=st.sampled_from([None, "g", "y", "fresh"]))
def test_static_threshold_backward_is_the_generic_kernel(shape, seed, dtype, layout, gspecial,
                                                         yspecial, into):
    rng = np.random.default_rng(seed)
    g0 = rng.standard_normal(shape).astype(dtype)
    y0 = np.maximum(rng.standard_normal(shape), 0).astype(dtype)
    if gspecial is not None:
        g0.flat[0] = gspecial
    if yspecial is not None:
        y0.flat[-1] = yspecial
    f = S._threshold_backward_specialize(_node("threshold_backward", g0, y0))
    results = []
    for kernel in (f, _raw("threshold_backward")):
        g, y = _layout(g0.copy(), layout), _layout(y0.copy(), layout)
        out = {None: None, "g": g, "y": y, "fresh": np.empty(shape, dtype)}[into]
        r = kernel(g, y) if out is None else kernel(g, y, out=out)
        assert out is None or r is out
        results.append(_bits(r))
    assert results[0] == results[1]


def test_static_threshold_backward_declines_other_types():
    a32, a64 = np.ones((2, 3), np.float32), np.ones((2, 3), np.float64)
    for g, y in [(a32, a64), (a32, np.ones((1, 3), np.float32)),
                 (np.float32(1).reshape(()), np.float32(1).reshape(())),
                 (a32.astype(np.int32), a32.astype(np.int32))]:
        assert S._threshold_backward_specialize(_node("threshold_backward", g, y)) is None
    assert S._threshold_backward_specialize(_node("threshold_backward", a32, a32)) is not None


def test_compiled_relu_mlp_uses_the_static_kernels_and_equals_eager():
    def run(wrap):
        tg.manual_seed(0)
        model = tg.nn.Sequential(tg.nn.Linear(5, 7), tg.nn.ReLU(), tg.nn.Linear(7, 3))

        def f(x):
            model.zero_grad()
            out = model(x)
            (out * out).sum().backward()
            return out
        f = wrap(f)
        x = tg.randn(4, 5)
        x[0, 0] = float("nan")
        res = [_bits(f(x).detach().numpy()) for _ in range(3)]  # the third runs the program
        return res + [_bits(p.grad.numpy()) for p in model.parameters()], f
    eager, _ = run(lambda f: f)
    compiled, f = run(tg.compile)
    assert compiled == eager
    kernels = {k: v.__module__
               for path in f.programs for k, v in path.forward_program.fn.__globals__.items()
               if k.startswith(("k_linear_", "k_threshold_backward_"))}
    assert set(kernels.values()) == {"tracegrad.ops.static_layers"}, kernels
    assert any(k.startswith("k_threshold") for k in kernels), kernels
    relus = [v for path in f.programs for k, v in path.forward_program.fn.__globals__.items()
             if k.startswith("k_relu_")]
    assert relus and {v.__module__ for v in relus} == {"tracegrad.ops.static_layers"}
