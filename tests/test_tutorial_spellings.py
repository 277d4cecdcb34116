"""PyTorch spellings that tutorial code types and tracegrad refused: numpy's `axis=` /
`keepdims=` for `dim=` / `keepdim=` (d2l's `y_hat.argmax(axis=1)`), a shape by keyword
(`torch.randn(size=shape)`), the factory form of `normal` with `requires_grad`, and a
`range` as an index (`y_hat[range(len(y_hat)), y]`); eager and compiled, against PyTorch."""
import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")

X = np.arange(12, dtype=np.float32).reshape(3, 4) % 5


@pytest.mark.parametrize("name", ["sum", "mean", "argmax", "argmin", "amax", "logsumexp",
                                  "std", "softmax", "cumsum", "any"])
@pytest.mark.parametrize("kw", [dict(axis=1), dict(axis=0, keepdims=True)])
def test_numpy_keyword_names(name, kw):
    if name in ("softmax", "cumsum") and "keepdims" in kw:
        kw = dict(axis=0)
    if name == "any":
        args = (X > 2,)
    else:
        args = (X,)
    want = getattr(torch.tensor(args[0]), name)(**kw)
    got = getattr(tg.tensor(args[0]), name)(**kw)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    got_fn = getattr(tg, name)(tg.tensor(args[0]), **kw)
    np.testing.assert_allclose(got_fn.numpy(), want.numpy(), rtol=1e-6)


def test_max_with_axis_returns_values_and_indices():
    v, i = tg.tensor(X).max(axis=1)
    tv, ti = torch.tensor(X).max(axis=1)
    assert v.tolist() == tv.tolist() and i.tolist() == ti.tolist()


def test_axis_and_dim_together_is_a_type_error():
    with pytest.raises(TypeError, match="multiple values for argument 'dim'"):
        tg.tensor(X).sum(axis=1, dim=0)


def test_axis_compiles_and_differentiates():
    @tg.compile
    def f(x):
        return (x.softmax(axis=1) * x).sum(axis=0, keepdims=True).sum()
    for _ in range(2):
        x = tg.tensor(X, requires_grad=True)
        f(x).backward()
        tx = torch.tensor(X, requires_grad=True)
        (tx.softmax(axis=1) * tx).sum(axis=0, keepdims=True).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)
    assert f.stats.cache_hits == 1 and f.stats.eager_calls == 0


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_shape_by_keyword(name):
    t = getattr(tg, name)(size=(2, 3), dtype=tg.float64)
    assert t.shape == getattr(torch, name)(size=(2, 3)).shape and t.dtype == tg.float64
    assert getattr(tg, name)(size=[4]).shape == (4,)
    with pytest.raises(TypeError):
        getattr(torch, name)(2, size=(2, 3))
    with pytest.raises(TypeError):
        getattr(tg, name)(2, size=(2, 3))


def test_randn_size_keyword_draws_as_positional():
    tg.manual_seed(3)
    a = tg.randn(size=(2, 3))
    tg.manual_seed(3)
    assert a.tolist() == tg.randn(2, 3).tolist()


def test_normal_factory_form_takes_requires_grad_and_dtype():
    w = tg.normal(0, 0.01, size=(2, 1), requires_grad=True)
    tw = torch.normal(0, 0.01, size=(2, 1), requires_grad=True)
    assert w.requires_grad == tw.requires_grad and w.is_leaf and w.shape == tw.shape
    assert tg.normal(0, 1, (3,), dtype=tg.float64).dtype == tg.float64
    (w * 2).sum().backward()
    assert w.grad.tolist() == [[2.0], [2.0]]


def test_range_as_an_index():
    y = [0, 2, 1]
    want = torch.tensor(X)[range(3), y]
    got = tg.tensor(X)[range(3), y]
    assert got.tolist() == want.tolist()
    assert tg.tensor(X)[range(1, 3)].tolist() == torch.tensor(X)[range(1, 3)].tolist()


def test_range_index_compiles_with_a_gradient():
    @tg.compile
    def cross_entropy(y_hat, y):
        return -tg.log(y_hat[range(len(y_hat)), y]).sum()
    for _ in range(2):
        p = tg.tensor(X + 1, requires_grad=True)
        cross_entropy(p, tg.tensor([0, 2, 1])).backward()
        tp = torch.tensor(X + 1, requires_grad=True)
        (-torch.log(tp[range(3), torch.tensor([0, 2, 1])]).sum()).backward()
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-6)
    assert cross_entropy.stats.cache_hits == 1
