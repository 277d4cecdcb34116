"""PyTorch API gaps that ordinary training code hits first: each behaves eagerly exactly as
PyTorch does (torch as the oracle, skipped without it), and inside `tracegrad.compile` either
compiles to the same values, gradients and effects or falls back loudly."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn as tnn
import tracegrad.nn.functional as TF


def _torch():
    return pytest.importorskip("torch")


def _raises_like(tg_fn, torch_fn):
    """Both raise; same builtin type; tracegrad's message contains torch's."""
    torch = _torch()
    with pytest.raises(Exception) as te:
        torch_fn(torch)
    with pytest.raises(type(te.value)) as ge:
        tg_fn(tg)
    assert str(te.value).splitlines()[0] in str(ge.value)
    return ge.value


# ---------------- class-index targets must be int64 ----------------
LOSSES = {
    "cross_entropy": lambda m, x, t: m.nn.functional.cross_entropy(x, t),
    "nll_loss": lambda m, x, t: m.nn.functional.nll_loss(x.log_softmax(1), t),
    "CrossEntropyLoss": lambda m, x, t: m.nn.CrossEntropyLoss()(x, t),
    "NLLLoss": lambda m, x, t: m.nn.NLLLoss()(x.log_softmax(1), t),
    "cross_entropy_2d": lambda m, x, t: m.nn.functional.cross_entropy(
        x.reshape(3, 4, 1, 1).expand(3, 4, 2, 2), t.reshape(3, 1, 1).expand(3, 2, 2)),
}


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("dtype", ["int32", "bool", "float32"])
def test_class_index_targets_must_be_int64(loss, dtype):
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    t = np.array([0, 1, 2])

    def run(m):
        return LOSSES[loss](m, m.tensor(x), m.tensor(t).to(getattr(m, dtype)))
    err = _raises_like(run, run)
    assert "nll_loss" in str(err)


def test_class_index_int32_target_compiled_raises_like_eager():
    x = tg.randn(3, 4, requires_grad=True)

    @tg.compile
    def step(x, t):
        return TF.cross_entropy(x, t)
    assert step(x, tg.tensor([0, 1, 2])).item() == pytest.approx(
        TF.cross_entropy(x, tg.tensor([0, 1, 2])).item(), rel=1e-6)
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Int"):
        step(x, tg.tensor([0, 1, 2], dtype=tg.int32))


def test_cross_entropy_integer_target_of_input_shape_is_probabilities_error():
    def run(m):
        return m.nn.functional.cross_entropy(m.ones(2, 2), m.tensor([[0, 1], [1, 0]]))
    err = _raises_like(run, run)
    assert "cross_entropy" in str(err)
