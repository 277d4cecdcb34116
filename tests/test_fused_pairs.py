"""Note [Fused pairs]: a fused kernel gives exactly what its two primitives give in turn,
and compiled cross-entropy steps using it stay bitwise equal to eager ones."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracegrad as tg
from tracegrad.ops import fused_backward as FB
from tracegrad.ops import loss as L
from tracegrad.ops.fused_pairs import _cross_entropy_backward

from training import sgd_step


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.tobytes()


def _pair(g, t, w, y, reduction, ignore_index, shape):
    dense = L._nll_backward_kernel(g, t, w, reduction, ignore_index, shape)
    return FB._log_softmax_backward_kernel(dense, y, 1)


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 9), c=st.integers(1, 7), seed=st.integers(0, 2 ** 16),
       dtype=st.sampled_from([np.float16, np.float32, np.float64]),
       reduction=st.sampled_from(["mean", "sum"]),
       g=st.sampled_from([1.0, 0.5, 3.0, 0.0, -0.0, -1.0, 1e-30, np.inf, np.nan]),
       scale=st.sampled_from([1.0, 30.0, 300.0]),
       ignore=st.sampled_from([-100, 0, 2]), weighted=st.booleans(), bad=st.booleans())
def test_fused_cross_entropy_backward_is_the_pair_bit_for_bit(n, c, seed, dtype, reduction, g,
                                                              scale, ignore, weighted, bad):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c)) * scale).astype(dtype)
    with np.errstate(all="ignore"):
        y = x - np.log(np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)) \
            - x.max(1, keepdims=True)
    y = y.astype(dtype)
    t = rng.integers(0, c, n)
    if bad and n > 1:
        t[0] = -1 if seed % 2 else c            # out of range: the pair's own behaviour
    w = rng.random(c).astype(dtype) if weighted else 1.0
    gg = np.asarray(dtype(g))
    with np.errstate(all="ignore"):
        try:
            want = _pair(gg, t, w, y, reduction, ignore, (n, c))
        except Exception as e:                   # noqa: BLE001 (compared below)
            with pytest.raises(type(e)):
                _cross_entropy_backward(gg, t, w, y, reduction, ignore, (n, c), 1)
            return
        got = _cross_entropy_backward(gg, t, w, y, reduction, ignore, (n, c), 1)
    assert _bits(got) == _bits(want)


@pytest.mark.parametrize("memory", ["balanced", "min", "off"])
def test_compiled_cross_entropy_steps_use_the_fused_kernel_and_equal_eager(memory):
    x = tg.randn(12, 6) * 20                     # large logits: exp(y) underflows to 0
    y = tg.randint(0, 5, (12,))
    sizes, act = (6, 16, 5), tg.nn.ReLU
    me, _, eager = sgd_step(sizes, act)
    mc, _, step = sgd_step(sizes, act)
    compiled = tg.compile(step, memory=memory)
    for _ in range(4):
        assert _bits(compiled(x, y).detach().numpy()) == _bits(eager(x, y).detach().numpy())
    for p, q in zip(mc.parameters(), me.parameters()):
        assert _bits(p.detach().numpy()) == _bits(q.detach().numpy())
        assert _bits(p.grad.numpy()) == _bits(q.grad.numpy())
    assert "cross_entropy_backward" in compiled.programs[-1].forward_program.code
