"""Note [Static kernels] for a classifier's loss (ops/static_loss.py): each specialized
kernel gives the generic kernel's bits on any operands of its node's types, falling back
when a value-dependent precondition fails (targets out of range or ignored, a gradient
seed that is not negative after scaling), and declines nodes whose types it does not cover."""
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracegrad as tg
from tracegrad.ir.types import TensorType, Value
from tracegrad.ops import REGISTRY
from tracegrad.ops import fused_pairs as FP
from tracegrad.ops import static_loss as S

from training import sgd_step


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.tobytes()


def _val(a, k=0):
    return Value(k, TensorType.of(np.asarray(a)))


def _node(name, inputs, attrs):
    return SimpleNamespace(prim=REGISTRY[name], inputs=inputs, attrs=attrs)


def _raw(prim):
    return getattr(prim.kernel, "quiet_raw", prim.kernel)


def _layout(a, how):
    """`a` as a C-ordered, transposed-storage or strided (every other row) array."""
    if how == "t":
        return np.asfortranarray(a) if a.ndim == 2 else a
    if how == "strided":
        big = np.repeat(a, 2, axis=0)
        return big[::2]
    return a


def _targets(rng, n, c, kind):
    t = rng.integers(0, c, n)
    if kind == "ignored":
        t[0] = -100
    elif kind == "negative":
        t[-1] = -3
    elif kind == "too_big":
        t[0] = c
    return t


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 9), c=st.integers(1, 7), seed=st.integers(0, 2 ** 16),
       dtype=st.sampled_from([np.float32, np.float64]), dim=st.sampled_from([0, 1, -1]),
       scale=st.sampled_from([1.0, 30.0, 1e30]), special=st.sampled_from([None, np.nan,
                                                                           np.inf, -np.inf]),
       layout=st.sampled_from(["c", "t", "strided"]))
def test_static_log_softmax_is_the_generic_kernel(n, c, seed, dtype, dim, scale, special,
                                                  layout):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c)) * scale).astype(dtype)
    if special is not None:
        x[rng.integers(0, n), rng.integers(0, c)] = special
    x = _layout(x, layout)
    node = _node("log_softmax", [_val(x)], {"dim": dim})
    f = S._log_softmax_specialize(node)
    with np.errstate(all="ignore"):
        assert _bits(f(x)) == _bits(_raw(REGISTRY["log_softmax"])(x, dim=dim))


def test_static_log_softmax_declines_half_zero_d_and_empty():
    for x in (np.ones((3, 4), np.float16), np.float32(2.0).reshape(()),
              np.ones((0, 4), np.float32)):
        assert S._log_softmax_specialize(_node("log_softmax", [_val(x)], {"dim": 0})) is None


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 9), c=st.integers(1, 7), seed=st.integers(0, 2 ** 16),
       dtype=st.sampled_from([np.float32, np.float64]),
       reduction=st.sampled_from(["mean", "sum"]),
       kind=st.sampled_from(["plain", "ignored", "negative", "too_big"]),
       layout=st.sampled_from(["c", "t", "strided"]), special=st.booleans())
def test_static_nll_loss_is_the_generic_kernel_or_its_error(n, c, seed, dtype, reduction, kind,
                                                            layout, special):
    rng = np.random.default_rng(seed)
    x = _layout(rng.standard_normal((n, c)).astype(dtype), layout)
    if special:
        x[0, 0] = np.nan
    t = _layout(_targets(rng, n, c, kind), "strided" if layout == "strided" else "c")
    node = _node("nll_loss", [_val(x), _val(t, 1), 1.0],
                 {"reduction": reduction, "ignore_index": -100})
    f = S._nll_loss_specialize(node)
    generic = _raw(REGISTRY["nll_loss"])
    try:
        want = generic(x, t, 1.0, reduction, -100)
    except Exception as e:                       # noqa: BLE001 (compared below)
        with pytest.raises(type(e), match=str(e)[:20].replace("(", r"\(").replace(")", r"\)")):
            f(x, t, 1.0)
        return
    assert _bits(f(x, t, 1.0)) == _bits(want)


def test_static_nll_loss_declines_what_types_do_not_decide():
    x, t = np.zeros((4, 3), np.float32), np.zeros(4, np.int64)
    attrs = {"reduction": "mean", "ignore_index": -100}
    ok = [_val(x), _val(t, 1), 1.0]
    assert S._nll_loss_specialize(_node("nll_loss", ok, attrs)) is not None
    declined = [
        ([_val(x), _val(t, 1), _val(np.ones(3, np.float32), 2)], attrs),     # class weights
        ([_val(x), _val(t, 1), np.ones(3, np.float32)], attrs),              # a weight array
        (ok, {"reduction": "none", "ignore_index": -100}),
        (ok, {"reduction": "mean", "ignore_index": 1}),                      # may be a target
        ([_val(x), _val(t.astype(np.int32), 1), 1.0], attrs),
        ([_val(x.astype(np.float16)), _val(t, 1), 1.0], attrs),
        ([_val(np.zeros((2, 3, 2), np.float32)), _val(np.zeros((2, 2), np.int64), 1), 1.0],
         attrs),
        ([_val(np.zeros((0, 3), np.float32)), _val(np.zeros(0, np.int64), 1), 1.0], attrs),
    ]
    for inputs, a in declined:
        assert S._nll_loss_specialize(_node("nll_loss", inputs, a)) is None, (inputs, a)


def _ce_nodes(g, t, w, y, reduction, ignore_index=-100):
    shape = tuple(y.shape)
    first = _node("nll_loss_backward", [_val(g), _val(t, 1), w],
                  {"reduction": reduction, "ignore_index": ignore_index, "shape": shape})
    second = _node("log_softmax_backward", [Value(3, TensorType.of(y)), _val(y, 4)],
                   {"dim": 1})
    return first, second


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 9), c=st.integers(1, 7), seed=st.integers(0, 2 ** 16),
       dtype=st.sampled_from([np.float32, np.float64]),
       reduction=st.sampled_from(["mean", "sum"]),
       g=st.sampled_from([1.0, 0.5, 0.0, -0.0, -1.0, 1e-30, np.inf, np.nan]),
       kind=st.sampled_from(["plain", "ignored", "negative", "too_big"]),
       layout=st.sampled_from(["c", "t", "strided"]))
def test_static_cross_entropy_backward_is_the_fused_kernel(n, c, seed, dtype, reduction, g,
                                                           kind, layout):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c)) * 20
    y = _layout((x - np.log(np.exp(x).sum(1, keepdims=True))).astype(dtype), layout)
    t = _targets(rng, n, c, kind)
    gg = np.asarray(dtype(g))
    f = S._cross_entropy_backward_specialize(*_ce_nodes(gg, t, 1.0, y, reduction))
    args = (gg, t, 1.0, y, reduction, -100, (n, c), 1)
    with np.errstate(all="ignore"):
        try:
            want = FP._cross_entropy_backward(*args)
        except Exception as e:                   # noqa: BLE001 (compared below)
            with pytest.raises(type(e)):
                f(gg, t, 1.0, y)
            return
        assert _bits(f(gg, t, 1.0, y)) == _bits(want)


def test_static_cross_entropy_backward_declines_what_types_do_not_decide():
    g, t, y = np.asarray(np.float32(1)), np.zeros(4, np.int64), np.zeros((4, 3), np.float32)
    assert S._cross_entropy_backward_specialize(*_ce_nodes(g, t, 1.0, y, "mean")) is not None
    for args in [(g, t, 1.0, y, "none"), (g, t, _val(np.ones(3, np.float32), 9), y, "mean"),
                 (g, t, 1.0, y, "mean", 2), (g.astype(np.float64), t, 1.0, y, "mean"),
                 (g, t.astype(np.int32), 1.0, y, "mean"),
                 (g.astype(np.float16), t, 1.0, y.astype(np.float16), "mean")]:
        assert S._cross_entropy_backward_specialize(*_ce_nodes(*args)) is None, args


def _run_both(loss_of, seed, ignored):
    """Eager and compiled SGD steps with `loss_of(out, y)`: losses, weights and grads."""
    res = []
    for wrap in (lambda f: f, tg.compile):
        tg.manual_seed(seed)
        model = tg.nn.Sequential(tg.nn.Linear(6, 8), tg.nn.ReLU(), tg.nn.Linear(8, 4))
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = loss_of(model(x), y)
            loss.backward()
            opt.step()
            return loss
        f = wrap(step)
        tg.manual_seed(seed + 1)
        x = tg.randn(10, 6) * 5
        y = tg.randint(0, 4, (10,))
        y[3] = ignored
        out = [_bits(f(x, y).detach().numpy()) for _ in range(3)]
        out += [(_bits(p.detach().numpy()), _bits(p.grad.numpy())) for p in model.parameters()]
        res.append((out, f))
    return res


@pytest.mark.parametrize("loss_of, ignored", [
    (lambda o, y: tg.nn.functional.cross_entropy(o, y), -100),             # an ignored target
    (lambda o, y: -tg.nn.functional.cross_entropy(o, y, reduction="sum"), 1),  # positive seed
    (lambda o, y: tg.nn.functional.cross_entropy(o, y, ignore_index=2), 2),
])
def test_compiled_steps_falling_back_equal_eager(loss_of, ignored):
    (eager, _), (compiled, f) = _run_both(loss_of, 3, ignored)
    assert compiled == eager
    code = f.programs[-1].forward_program.code
    assert "reduction=" not in code or "ignore_index=2" in code   # specialized unless declined


def test_out_of_range_targets_raise_eagers_error_when_compiled():
    sizes, act = (6, 8, 4), tg.nn.ReLU
    x, y = tg.randn(5, 6), tg.tensor([0, 1, 7, 2, 3])
    _, _, eager = sgd_step(sizes, act)
    _, _, step = sgd_step(sizes, act)
    compiled = tg.compile(step)
    compiled(x, tg.tensor([0, 1, 2, 2, 3]))
    with pytest.raises(Exception) as want:
        eager(x, y)
    with pytest.raises(type(want.value)) as got:
        compiled(x, y)
    assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]
