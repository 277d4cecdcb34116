"""`tg.nn.utils`: gradient clipping and parameter/vector conversion against PyTorch, and
clipping inside a compiled training step equal to eager."""
import numpy as np
import pytest

import tracegrad as tg

SHAPES = [(3, 4), (5,), (2, 2)]


def _pair(torch, seed, dtype="float32"):
    rng = np.random.default_rng(seed)
    ps, qs = [], []
    for sh in SHAPES:
        w, g = rng.standard_normal(sh).astype(dtype), rng.standard_normal(sh).astype(dtype)
        a = tg.tensor(w, requires_grad=True)
        a.grad = tg.tensor(g)
        b = torch.tensor(w, requires_grad=True)
        b.grad = torch.tensor(g)
        ps.append(a)
        qs.append(b)
    return ps, qs


@pytest.mark.parametrize("norm_type", [2.0, 1, "inf", float("inf"), 3.5, 0])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clip_grad_norm_matches_torch(norm_type, max_norm, dtype):
    torch = pytest.importorskip("torch")
    ps, qs = _pair(torch, 1, dtype)
    r1 = tg.nn.utils.clip_grad_norm_(ps, max_norm, norm_type)
    r2 = torch.nn.utils.clip_grad_norm_(qs, max_norm, norm_type)
    assert r1.shape == () and str(r1.dtype) == str(r2.dtype)
    np.testing.assert_allclose(r1.numpy(), r2.numpy(), rtol=1e-6)
    for a, b in zip(ps, qs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


def test_clip_grad_norm_single_tensor_generator_and_no_grads():
    p = tg.tensor([3.0, 4.0], requires_grad=True)
    p.grad = tg.tensor([3.0, 4.0])
    total = tg.nn.utils.clip_grad_norm_(p, 1.0)
    assert total.item() == 5.0
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)
    m = tg.nn.Linear(2, 2)
    assert tg.nn.utils.clip_grad_norm_(m.parameters(), 1.0).item() == 0.0   # no grads
    m.weight.grad = tg.ones(2, 2)
    tg.nn.utils.clip_grad_norm_(m.parameters(), 1.0)                       # generator
    np.testing.assert_allclose(m.weight.grad.numpy(), np.full((2, 2), 0.5), rtol=1e-5)


@pytest.mark.filterwarnings("ignore:invalid value encountered")   # inf * 0, as torch: nan
def test_clip_grad_norm_nonfinite():
    p = tg.zeros(2, requires_grad=True)
    p.grad = tg.tensor([float("inf"), 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        tg.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    total = tg.nn.utils.clip_grad_norm_([p], 1.0)
    assert total.item() == float("inf")


def test_clip_grad_value_matches_torch():
    torch = pytest.importorskip("torch")
    ps, qs = _pair(torch, 2)
    assert tg.nn.utils.clip_grad_value_(ps, 0.3) is None
    torch.nn.utils.clip_grad_value_(qs, 0.3)
    for a, b in zip(ps, qs):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_parameters_vector_round_trip():
    m = tg.nn.Linear(3, 2)
    v = tg.nn.utils.parameters_to_vector(m.parameters())
    assert v.shape == (8,)
    np.testing.assert_array_equal(v.detach().numpy()[:6], m.weight.detach().numpy().ravel())
    tg.nn.utils.vector_to_parameters(tg.arange(8.0), m.parameters())
    assert m.bias.tolist() == [6.0, 7.0] and m.weight.requires_grad
    with pytest.raises(TypeError):
        tg.nn.utils.vector_to_parameters([1.0], m.parameters())


@pytest.mark.filterwarnings("ignore:tracegrad.compile")   # may fall back to eager: still equal
def test_clip_inside_compiled_step_equals_eager():
    def make():
        tg.manual_seed(0)
        return tg.nn.Linear(4, 3)

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean() * 50
        loss.backward()
        total = tg.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        return loss, total

    x, y = tg.randn(8, 4), tg.randn(8, 3)
    m1, m2 = make(), make()
    o1 = tg.optim.SGD(m1.parameters(), lr=0.1)
    o2 = tg.optim.SGD(m2.parameters(), lr=0.1)
    compiled = tg.compile(step)
    for _ in range(3):
        l1, t1 = step(m1, o1, x, y)
        l2, t2 = compiled(m2, o2, x, y)
        np.testing.assert_allclose(l1.item(), l2.item(), rtol=1e-6)
        np.testing.assert_allclose(t1.item(), t2.item(), rtol=1e-6)
    for a, b in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, "inf"])
def test_total_norm_compiled_equals_eager(norm_type):
    def f(a, b):
        total = tg.nn.utils.get_total_norm([a * 2, b], norm_type)
        return total, a * tg.clamp(1.0 / (total + 1e-6), max=1.0)

    a, b = tg.randn(3, 4), tg.randn(5)
    compiled = tg.compile(f)
    for _ in range(2):
        for r1, r2 in zip(f(a, b), compiled(a, b)):
            np.testing.assert_allclose(r1.numpy(), r2.numpy(), rtol=1e-6)
    assert compiled.stats.traces == 1
