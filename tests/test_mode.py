"""`tracegrad.mode` / `Tensor.mode` against PyTorch: values, indices (Note [Mode's ties] in
ops/mode.py: exact on rows of up to 16 elements, where PyTorch's sort is stable), keepdim,
0-d and integer/bool input, errors, gradients, and compiled (numpy and jax) == eager."""
import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(7)


def _pair(a):
    return tg.tensor(a), torch.tensor(a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("shape,dim", [((6,), 0), ((4, 9), 1), ((5, 3, 7), 0), ((3, 16, 2), 1),
                                       ((2, 3, 5), -1), ((1,), 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_matches_torch_on_short_rows(dtype, shape, dim, keepdim):
    a = RNG.integers(-2, 3, size=shape).astype(dtype)
    x, tx = _pair(a)
    ours, theirs = tg.mode(x, dim, keepdim), torch.mode(tx, dim, keepdim)
    np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
    np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
    assert ours.indices.dtype == tg.int64 and str(ours.values.dtype) == str(theirs.values.dtype)
    assert tuple(ours[0].shape) == tuple(theirs[0].shape)


def test_long_rows_values_match_and_index_is_last_occurrence():
    a = RNG.integers(0, 4, size=(30, 200)).astype(np.float32)
    ours, theirs = tg.mode(tg.tensor(a)), torch.mode(torch.tensor(a))
    np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
    idx = ours.indices.numpy()
    np.testing.assert_array_equal(a[np.arange(30), idx], ours.values.numpy())
    for r in range(30):
        assert idx[r] == np.nonzero(a[r] == ours.values.numpy()[r])[0][-1]


def test_default_dim_method_named_tuple_and_0d():
    x, tx = _pair([[3.0, 1.0, 3.0], [2.0, 2.0, 5.0]])
    v, i = x.mode()
    assert v.tolist() == tx.mode().values.tolist() and i.tolist() == tx.mode().indices.tolist()
    r = tg.mode(x, dim=0, keepdim=True)
    assert r.values is r[0] and r.indices is r[1]
    assert repr(tg.mode(tg.tensor([1.0, 1.0]))).startswith("torch.return_types.mode(")
    z = tg.mode(tg.tensor(5.0))
    assert z.values.item() == 5.0 and z.indices.item() == 0 and z.indices.shape == ()
    b = tg.mode(tg.tensor([True, False, True]))
    assert b.values.item() is True and b.indices.item() == 2


def test_errors_match_torch():
    with pytest.raises(IndexError, match="Dimension out of range"):
        tg.mode(tg.zeros(2, 3), 2)
    with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
        tg.mode(tg.zeros(3, 0), 1)
    r = tg.mode(tg.zeros(0, 3), 1)
    assert r.values.shape == (0,) and r.indices.shape == (0,)


def test_gradient_goes_to_the_selected_index_like_torch():
    a = RNG.integers(0, 3, size=(4, 10)).astype(np.float64)
    x = tg.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    w = RNG.normal(size=(4,))
    (tg.mode(x, 1).values * tg.tensor(w)).sum().backward()
    (torch.mode(tx, 1).values * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    assert type(tg.mode(x, 1).values.grad_fn).__name__ == "ModeBackward0"
    # second order (finite differences cannot check mode: moving a tied element changes it)
    data = [[1.0, 2.0, 2.0], [0.5, 0.5, 3.0]]
    y = tg.tensor(data, dtype=tg.float64, requires_grad=True)
    ty = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    g, = tg.autograd.grad((tg.mode(y, 1).values ** 3).sum(), y, create_graph=True)
    tgr, = torch.autograd.grad((torch.mode(ty, 1).values ** 3).sum(), ty, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), tgr.detach().numpy())
    gg, = tg.autograd.grad(g.sum(), y)
    tgg, = torch.autograd.grad(tgr.sum(), ty)
    np.testing.assert_array_equal(gg.numpy(), tgg.numpy())


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_compiled_matches_eager(backend):
    if backend == "jax":
        pytest.importorskip("jax")

    def step(t):
        v, i = tg.mode(t, 0)
        return (v * v).sum(), i, tg.mode(t, -1, keepdim=True).indices

    for dtype in (tg.float32, tg.float64):
        a = RNG.integers(0, 3, size=(12, 40))
        x = tg.tensor(a, dtype=dtype, requires_grad=True)
        cf = tg.compile(step, backend=backend)
        for _ in range(2):
            out = cf(x)
            out[0].backward()
            got = x.grad.clone()
            x.grad = None
            ref = step(x)
            ref[0].backward()
            assert out[0].item() == ref[0].item()
            np.testing.assert_array_equal(out[1].numpy(), ref[1].numpy())
            np.testing.assert_array_equal(out[2].numpy(), ref[2].numpy())
            np.testing.assert_array_equal(got.numpy(), x.grad.numpy())
            x.grad = None
    ints = tg.tensor(RNG.integers(0, 3, size=(5, 7)))
    cf = tg.compile(lambda t: tg.mode(t, 1), backend=backend)
    cf(ints)
    r, e = cf(ints), tg.mode(ints, 1)
    np.testing.assert_array_equal(r[0].numpy(), e[0].numpy())
    np.testing.assert_array_equal(r[1].numpy(), e[1].numpy())
