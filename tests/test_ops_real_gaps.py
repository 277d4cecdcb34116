"""Ops the real programs of `test_real_programs_dropin.py` found missing, each checked
against PyTorch (values, dtypes, gradients, error types), by float64 finite differences, and
compiled == eager on the numpy and JAX backends (helpers of `test_ops_training_more.py`)."""
import numpy as np
import pytest

import tracegrad as tg
from test_ops_training_more import _np, _torch, check_like_torch, raises_like


# ---------------- fmod ----------------
def _fmod_arrays(dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 4)) * 4).astype(dtype)
    y = (np.abs(rng.standard_normal((4,))) + 0.5).astype(dtype) * np.array([1, -1, 1, -1])
    return [x, y.astype(dtype)]


def test_fmod_tensor_like_torch():
    check_like_torch(lambda m, x, y: m.fmod(x, y), None, arrays=_fmod_arrays)


def test_fmod_scalar_and_method_like_torch():
    check_like_torch(lambda m, x: x.fmod(1.5) + m.fmod(x, -0.7), [(5, 3)])


def test_fmod_ints_inplace_and_errors():
    torch = _torch()
    for m in (torch, tg):
        a = m.tensor([-7, 7, -3, 3])
        assert m.fmod(a, 3).tolist() == [-1, 1, 0, 0]
        assert m.fmod(a, 2.5).dtype == m.float32
        assert m.fmod(m.tensor([5.0]), m.tensor([0.0])).isnan().all()
        b = m.tensor([-5.5, 5.5])
        b.fmod_(2)
        assert b.tolist() == [-1.5, 1.5]
    raises_like(lambda m: m.fmod(m.tensor([5]), 0))
    t = tg.tensor([1.0, 2.0], requires_grad=True)
    assert type(tg.fmod(t, tg.tensor([1.5, 1.5]))).__name__ == "Tensor"
    assert tg.fmod(t, tg.tensor(1.5)).grad_fn.name() == "FmodBackward1"
    assert tg.fmod(t, 1.5).grad_fn.name() == "FmodBackward0"


# ---------------- bincount ----------------
def test_bincount_like_torch():
    torch = _torch()
    for m in (torch, tg):
        x = m.tensor([1, 3, 1, 0, 3, 3])
        assert m.bincount(x).tolist() == [1, 2, 0, 3]
        assert x.bincount(minlength=6).tolist() == [1, 2, 0, 3, 0, 0]
        assert m.bincount(m.tensor([], dtype=m.int64)).tolist() == []
        assert m.bincount(m.tensor([], dtype=m.int64), minlength=2).tolist() == [0, 0]
        w = m.tensor([0.5, 1.0, 2.0, 1.0, 1.0, 1.0])
        out = m.bincount(x, weights=w)
        assert out.dtype == m.float32 and out.tolist() == [1.0, 2.5, 0.0, 3.0]
        assert m.bincount(x, weights=m.tensor([1, 2, 3, 4, 5, 6])).dtype == m.float64
        assert m.bincount(x).dtype == m.int64
    raises_like(lambda m: m.bincount(m.tensor([-1, 2])))
    raises_like(lambda m: m.bincount(m.tensor([[1]])))
    raises_like(lambda m: m.bincount(m.tensor([1.0])))
    raises_like(lambda m: m.bincount(m.tensor([1, 2]), weights=m.tensor([1.0])))


def test_bincount_compiles_with_a_guard_on_its_length():
    f = tg.compile(lambda x: tg.bincount(x, minlength=3) * 2)
    assert f(tg.tensor([0, 1, 1])).tolist() == [2, 4, 0]
    assert f(tg.tensor([2, 1, 1])).tolist() == [0, 4, 2]
    assert f(tg.tensor([4, 1, 1])).tolist() == [0, 4, 0, 0, 2]
    assert f.stats.eager_calls == 0


# ---------------- Tensor.where ----------------
def test_tensor_where_method_like_torch():
    check_like_torch(lambda m, x, y: x.where(x > 0, y) + x.where(x < 0.5, 2.0), [(3, 4), (4,)])
