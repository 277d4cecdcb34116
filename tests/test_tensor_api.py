"""The Tensor API surface of API.md section 1: creation, attributes, methods, conversions,
reprs and seeding, each behaving like torch.

`CASES` pairs an expression (evaluated with `L` bound to the library) with the repr PyTorch
prints for it; the same table is also evaluated on torch itself when installed, so the
golden strings are checked against the oracle.
"""
import numpy as np
import pytest

import tracegrad as tg


CASES = [
    ("L.ones(2, 3)", "tensor([[1., 1., 1.],\n        [1., 1., 1.]])"),
    ("L.ones((2, 3))", "tensor([[1., 1., 1.],\n        [1., 1., 1.]])"),
    ("L.ones([2, 3], dtype=L.int64)", "tensor([[1, 1, 1],\n        [1, 1, 1]])"),
    ("L.zeros(2)", "tensor([0., 0.])"),
    ("L.full((2,), 3)", "tensor([3, 3])"),
    ("L.full((2,), 3.5)", "tensor([3.5000, 3.5000])"),
    ("L.full((2, 2), True)", "tensor([[True, True],\n        [True, True]])"),
    ("L.full((2, 2), 1.5, dtype=L.float64)",
     "tensor([[1.5000, 1.5000],\n        [1.5000, 1.5000]], dtype=torch.float64)"),
    ("L.eye(2)", "tensor([[1., 0.],\n        [0., 1.]])"),
    ("L.eye(2, 3)", "tensor([[1., 0., 0.],\n        [0., 1., 0.]])"),
    ("L.arange(5)", "tensor([0, 1, 2, 3, 4])"),
    ("L.arange(1, 4, 0.5)", "tensor([1.0000, 1.5000, 2.0000, 2.5000, 3.0000, 3.5000])"),
    ("L.arange(3, dtype=L.float32)", "tensor([0., 1., 2.])"),
    ("L.linspace(0, 1, 5)", "tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])"),
    ("L.linspace(0, 10, 3, dtype=L.int64)", "tensor([ 0,  5, 10])"),
    ("L.tensor(3)", "tensor(3)"),
    ("L.tensor(3.5)", "tensor(3.5000)"),
    ("L.tensor(True)", "tensor(True)"),
    ("L.tensor([1, 2.5])", "tensor([1.0000, 2.5000])"),
    ("L.tensor([[1, 2], [3, 4]])", "tensor([[1, 2],\n        [3, 4]])"),
    ("L.tensor([True, False])", "tensor([ True, False])"),
    ("L.tensor([])", "tensor([])"),
    ("L.tensor([1, 2], dtype=L.float32)", "tensor([1., 2.])"),
    ("L.tensor([0.1, 0.25], dtype=L.float16)", "tensor([0.1000, 0.2500], dtype=torch.float16)"),
    ("L.tensor([1., 2.], dtype=L.float64)", "tensor([1., 2.], dtype=torch.float64)"),
    ("L.tensor([1, 2], dtype=L.int32)", "tensor([1, 2], dtype=torch.int32)"),
    ("L.tensor([102.4, 1024., 0.1024])", "tensor([1.0240e+02, 1.0240e+03, 1.0240e-01])"),
    ("L.tensor([1e-8, 1.0])", "tensor([1.0000e-08, 1.0000e+00])"),
    ("L.tensor([123456789.0, 1.0])", "tensor([1.2346e+08, 1.0000e+00])"),
    ("L.tensor([[0.5, -1.25], [3.0, 100.0]])",
     "tensor([[  0.5000,  -1.2500],\n        [  3.0000, 100.0000]])"),
    ("L.ones(2, 2, dtype=L.float64, requires_grad=True)",
     "tensor([[1., 1.],\n        [1., 1.]], dtype=torch.float64, requires_grad=True)"),
    ("L.ones(3, requires_grad=True)", "tensor([1., 1., 1.], requires_grad=True)"),
    ("L.zeros_like(L.ones(2, dtype=L.int64))", "tensor([0, 0])"),
    ("L.ones_like(L.ones(2, 2))", "tensor([[1., 1.],\n        [1., 1.]])"),
    ("L.full_like(L.ones(2), 7)", "tensor([7., 7.])"),
    ("L.ones(0, 3)", "tensor([], size=(0, 3))"),
    ("L.arange(6).reshape(2, 3).T", "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])"),
    ("L.tensor([1.7, -2.2]).long()", "tensor([ 1, -2])"),
    ("L.tensor([1, 0]).bool()", "tensor([ True, False])"),
    ("L.tensor([1, 2]).float()", "tensor([1., 2.])"),
    ("L.tensor([1, 2]).double()", "tensor([1., 2.], dtype=torch.float64)"),
    ("L.tensor([1.5]).to(L.float64)", "tensor([1.5000], dtype=torch.float64)"),
    ("L.tensor([1.5, -2.5]).to(L.int32)", "tensor([ 1, -2], dtype=torch.int32)"),
    ("L.tensor(7, dtype=L.int32)", "tensor(7, dtype=torch.int32)"),
    ("L.ones(2, 2, requires_grad=True) + 2",
     "tensor([[3., 3.],\n        [3., 3.]], grad_fn=<AddBackward0>)"),
    ("((L.ones(2, 2, requires_grad=True) + 2) ** 2 * 3).mean()",
     "tensor(27., grad_fn=<MeanBackward0>)"),
    ("L.tensor([1., 2.], requires_grad=True) * 2", "tensor([2., 4.], grad_fn=<MulBackward0>)"),
    ("L.tensor(2., requires_grad=True).clone()", "tensor(2., grad_fn=<CloneBackward0>)"),
]


@pytest.mark.parametrize("expr,expected", CASES, ids=[c[0] for c in CASES])
def test_repr_equals_torch(lib, expr, expected):
    assert repr(eval(expr, {"L": lib})) == expected


@pytest.mark.parametrize("expr", [c[0] for c in CASES], ids=[c[0] for c in CASES])
def test_str_equals_repr(expr):
    t = eval(expr, {"L": tg})
    assert str(t) == repr(t)


# ---------------------------------------------------------------- dtype inference

@pytest.mark.parametrize("expr,dtype", [
    ("L.tensor(1)", "int64"), ("L.tensor(1.0)", "float32"), ("L.tensor(True)", "bool"),
    ("L.tensor([1, 2])", "int64"), ("L.tensor([1, 2.0])", "float32"),
    ("L.tensor([[True], [False]])", "bool"), ("L.tensor([])", "float32"),
    ("L.tensor(np.zeros(2))", "float64"), ("L.tensor(np.zeros(2, np.int32))", "int32"),
    ("L.tensor(np.float64(1.5))", "float64"),
    ("L.arange(3)", "int64"), ("L.arange(3.0)", "float32"), ("L.arange(0, 1, 0.5)", "float32"),
    ("L.linspace(0, 1, 3)", "float32"), ("L.full((1,), 2)", "int64"),
    ("L.full((1,), 2.0)", "float32"), ("L.full((1,), False)", "bool"),
    ("L.zeros(2)", "float32"), ("L.ones(2, dtype=L.float64)", "float64"),
    ("L.empty(2, 3)", "float32"), ("L.eye(3)", "float32"), ("L.rand(2)", "float32"),
    ("L.randn(2)", "float32"), ("L.randint(0, 5, (2,))", "int64"),
    ("L.ones_like(L.ones(2, dtype=L.int32))", "int32"),
    ("L.rand_like(L.ones(2, dtype=L.float64))", "float64"),
    ("L.randn_like(L.ones(2))", "float32"),
    ("L.full_like(L.ones(2, dtype=L.int64), 3)", "int64"),
])
def test_creation_dtypes(lib, expr, dtype):
    assert eval(expr, {"L": lib, "np": np}).dtype == getattr(lib, dtype)


def test_default_dtype_is_float32_and_settable(lib):
    assert lib.get_default_dtype() == lib.float32
    lib.set_default_dtype(lib.float64)
    try:
        assert lib.tensor([1.5]).dtype == lib.float64
        assert lib.ones(2).dtype == lib.float64
    finally:
        lib.set_default_dtype(lib.float32)
    assert lib.tensor([1.5]).dtype == lib.float32


# ---------------------------------------------------------------- creation shapes

@pytest.mark.parametrize("fn", ["zeros", "ones", "empty", "rand", "randn"])
def test_shapes_as_varargs_or_tuple(lib, fn):
    f = getattr(lib, fn)
    assert tuple(f(2, 3).shape) == tuple(f((2, 3)).shape) == tuple(f([2, 3]).shape) == (2, 3)
    assert tuple(f(()).shape) == ()


def test_full_and_randint_shapes(lib):
    assert tuple(lib.full((2, 3), 1.0).shape) == (2, 3)
    assert tuple(lib.randint(0, 3, (4, 2)).shape) == (4, 2)
    assert tuple(lib.randint(3, (5,)).shape) == (5,)
    v = lib.randint(2, 5, (200,)).numpy()
    assert v.min() >= 2 and v.max() <= 4


def test_arange_and_linspace_values(lib):
    np.testing.assert_allclose(lib.arange(1, 2, 0.25).numpy(), [1.0, 1.25, 1.5, 1.75])
    np.testing.assert_allclose(lib.linspace(-1, 1, 5).numpy(), [-1, -0.5, 0, 0.5, 1])
    assert lib.linspace(0, 1, 1).tolist() == [0.0]


def test_requires_grad_at_creation(lib):
    for t in (lib.zeros(2, requires_grad=True), lib.tensor([1.0], requires_grad=True),
              lib.full((2,), 1.0, requires_grad=True), lib.randn(2, requires_grad=True)):
        assert t.requires_grad and t.is_leaf


def test_tensor_copies_its_input(lib):
    a = np.zeros(2)
    t = lib.tensor(a)
    a[0] = 5
    assert t.tolist() == [0.0, 0.0]


def test_from_numpy_shares_memory_both_ways(lib):
    a = np.zeros(3, dtype=np.float32)
    t = lib.from_numpy(a)
    assert t.dtype == lib.float32
    a[0] = 7
    t[1] = 3
    assert t.tolist() == [7.0, 3.0, 0.0]
    assert a.tolist() == [7.0, 3.0, 0.0]


def test_from_numpy_keeps_float64(lib):
    assert lib.from_numpy(np.zeros(2)).dtype == lib.float64


def test_as_tensor_shares_memory_when_possible(lib):
    a = np.zeros(2)
    t = lib.as_tensor(a)
    a[0] = 1
    assert t.tolist() == [1.0, 0.0]
    c = lib.as_tensor(a, dtype=lib.float32)       # conversion: a copy
    a[1] = 2
    assert c.tolist() == [1.0, 0.0]
    x = lib.ones(2)
    assert lib.as_tensor(x) is x
    assert lib.as_tensor([1, 2]).dtype == lib.int64


def test_numpy_shares_memory(lib):
    t = lib.zeros(2)
    t.numpy()[0] = 4
    assert t.tolist() == [4.0, 0.0]


def test_numpy_refused_on_tensor_requiring_grad(lib):
    t = lib.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires "
                                           r"grad. Use tensor.detach\(\).numpy\(\) instead."):
        t.numpy()
    assert t.detach().numpy().tolist() == [1.0, 1.0]


# ---------------------------------------------------------------- attributes and methods

def test_shape_is_a_size_tuple(lib):
    t = lib.ones(2, 3)
    assert isinstance(t.shape, tuple)
    assert t.shape == (2, 3) and t.shape == t.size()
    assert repr(t.shape) == "torch.Size([2, 3])"
    assert repr(lib.tensor(1.0).shape) == "torch.Size([])"
    assert t.shape[1] == 3 and list(t.shape) == [2, 3]


def test_size_dim_numel_ndim(lib):
    t = lib.ones(2, 3, 4)
    assert t.size(0) == 2 and t.size(-1) == 4 and t.size(1) == 3
    assert t.dim() == t.ndim == 3
    assert t.numel() == 24
    assert lib.tensor(5.0).dim() == 0 and lib.tensor(5.0).numel() == 1
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.size(3)


def test_item(lib):
    assert lib.tensor([[2.5]]).item() == 2.5
    assert isinstance(lib.tensor(3).item(), int)
    assert isinstance(lib.tensor(3.0).item(), float)
    assert lib.tensor(True).item() is True
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to "
                                           "Scalar"):
        lib.ones(2).item()


def test_item_on_tensor_requiring_grad(lib):
    assert lib.tensor(2.0, requires_grad=True).item() == 2.0


def test_tolist(lib):
    assert lib.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert lib.tensor(2.5).tolist() == 2.5
    assert lib.tensor([True]).tolist() == [True]
    assert lib.ones(2, requires_grad=True).tolist() == [1.0, 1.0]


def test_clone_copies_data_and_is_differentiable(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    c = x.clone()
    assert type(c.grad_fn).__name__ == "CloneBackward0"
    (c * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    d = lib.tensor([1.0, 2.0])
    e = d.clone()
    e[0] = 9
    assert d.tolist() == [1.0, 2.0] and e._version == 1 and d._version == 0


def test_to_and_conversions(lib):
    x = lib.tensor([1.5, -2.5])
    assert x.to(lib.float64).dtype == lib.float64
    assert x.to(lib.float32) is x                     # no-op returns self
    assert x.float() is x
    assert x.double().dtype == lib.float64
    assert x.long().dtype == lib.int64 and x.long().tolist() == [1, -2]
    assert x.bool().dtype == lib.bool and x.bool().tolist() == [True, True]
    assert lib.tensor([0.0]).bool().tolist() == [False]


def test_conversion_is_differentiable(lib):
    x = lib.tensor([1.5], requires_grad=True)
    y = x.double()
    assert type(y.grad_fn).__name__ == "ToCopyBackward0"
    (y * 2).sum().backward()
    assert x.grad.dtype == lib.float32 and x.grad.tolist() == [2.0]


def test_T_transposes(lib):
    t = lib.arange(6).reshape(2, 3)
    assert tuple(t.T.shape) == (3, 2)
    np.testing.assert_array_equal(t.T.numpy(), np.arange(6).reshape(2, 3).T)
    m = lib.ones(2, 3, requires_grad=True)
    (m.T * lib.arange(2.0)).sum().backward()
    assert m.grad.tolist() == [[0.0] * 3, [1.0] * 3]


def test_T_is_a_view(lib):
    m = lib.zeros(2, 3)
    m.T[2, 1] = 5
    assert m[1, 2].item() == 5 and m._version == 1


def test_dtype_and_device_attributes(lib):
    t = lib.ones(2)
    assert t.dtype == lib.float32 and str(t.dtype) == "torch.float32"
    assert t.is_floating_point() and not lib.ones(2, dtype=lib.int64).is_floating_point()
    assert str(lib.int64) == "torch.int64" and str(lib.bool) == "torch.bool"


def test_data_attribute_is_detached_alias(lib):
    x = lib.ones(2, requires_grad=True)
    d = x.data
    assert not d.requires_grad and d.is_leaf
    d[0] = 3
    assert x.tolist() == [3.0, 1.0]


def test_len_and_iteration(lib):
    t = lib.arange(6).reshape(3, 2)
    assert len(t) == 3
    assert [r.tolist() for r in t] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(TypeError):
        len(lib.tensor(1.0))


def test_python_number_conversions(lib):
    assert float(lib.tensor([2.5])) == 2.5
    assert int(lib.tensor(3.9)) == 3
    assert bool(lib.tensor([1]))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(lib.ones(2))


# ---------------------------------------------------------------- seeding

@pytest.mark.parametrize("draw", ["rand(3, 2)", "randn(4)", "randint(0, 100, (5,))",
                                  "rand_like(L.ones(3))", "randn_like(L.ones(2, 2))"])
def test_manual_seed_reproduces_draws(lib, draw):
    lib.manual_seed(123)
    a = eval("L." + draw, {"L": lib}).numpy().copy()
    b = eval("L." + draw, {"L": lib}).numpy().copy()
    lib.manual_seed(123)
    c = eval("L." + draw, {"L": lib}).numpy().copy()
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)


def test_rand_and_randn_distributions(lib):
    lib.manual_seed(0)
    u = lib.rand(20_000).numpy()
    n = lib.randn(20_000).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03


# ---------------------------------------------------------------- storage and deepcopy

@pytest.mark.parametrize("make", [
    lambda m: m.ones(2, 3),
    lambda m: m.ones(2, 3).t(),
    lambda m: m.arange(24.0).reshape(2, 3, 4)[:, 1:, ::2],
    lambda m: m.ones(3)[None].expand(4, 3),
    lambda m: m.ones(4, 5)[1:, 2],
    lambda m: m.ones(()),
])
def test_stride_offset_and_contiguity(lib, make):
    t = make(lib)
    ref = make(tg)
    assert ref.stride() == t.stride()
    assert ref.is_contiguous() == t.is_contiguous()
    assert ref.storage_offset() == t.storage_offset()
    if t.dim():
        assert ref.stride(-1) == t.stride(-1)
    assert ref.contiguous().is_contiguous()
    assert isinstance(t.data_ptr(), int)


def test_data_ptr_of_a_view_points_into_its_base(lib):
    x = lib.zeros(4, 5)
    assert x[1].data_ptr() == x.data_ptr() + 5 * x.element_size()
    assert x[1].storage_offset() == 5


def test_deepcopy_of_a_used_leaf(lib):
    import copy
    x = lib.ones(2, requires_grad=True)
    (x * 2).sum().backward()
    y = copy.deepcopy(x)
    assert y.is_leaf and y.requires_grad and y.grad is not x.grad
    assert y.grad.tolist() == [2.0, 2.0]
    (y * 3).sum().backward()                # the copy accumulates on its own
    assert y.grad.tolist() == [5.0, 5.0] and x.grad.tolist() == [2.0, 2.0]
    with lib.no_grad():
        y.add_(1)
    assert x.tolist() == [1.0, 1.0]


def test_deepcopy_keeps_shared_storage(lib):
    import copy
    v = lib.zeros(4)
    w = v[:2]
    a, b = copy.deepcopy((v, w))
    a[0] = 5.0
    assert b.tolist() == [5.0, 0.0] and v.tolist() == [0.0] * 4


def test_deepcopy_of_a_non_leaf_raises_like_pytorch(lib):
    import copy
    x = lib.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user"):
        copy.deepcopy(x * 2)
    assert copy.deepcopy(x).requires_grad       # still usable after the error


@pytest.mark.parametrize("key", [None, (Ellipsis, None), (slice(None), None), (None, Ellipsis),
                                 (0, None), (None, None), (slice(0, 1), None, 2),
                                 (None, 1, Ellipsis, slice(None, None, 2), None)])
def test_new_axis_indexing_is_unsqueeze_like_pytorch(key):
    """`x[None]`, `x[..., None]`: the same values, view, gradient and node as PyTorch."""
    torch = pytest.importorskip("torch")
    data = np.arange(24.0).reshape(2, 3, 4)
    xs = [lib.tensor(data, requires_grad=True) for lib in (tg, torch)]
    ys = [x[key] for x in xs]
    assert tuple(ys[0].shape) == tuple(ys[1].shape)
    np.testing.assert_array_equal(ys[0].detach().numpy(), ys[1].detach().numpy())
    assert ys[0].grad_fn.name() == ys[1].grad_fn.name()
    for y in ys:
        (y * y).sum().backward()
    np.testing.assert_array_equal(xs[0].grad.numpy(), xs[1].grad.numpy())
    v = tg.zeros(2, 3)
    v[None][0, 1, 2] = 5.0                    # still a view of v
    assert v[1, 2].item() == 5.0


def test_select_is_the_function_not_the_ops_submodule():
    torch = pytest.importorskip("torch")
    a = np.arange(24.0).reshape(2, 3, 4)
    for dim, index in ((0, 1), (1, -1), (2, 0), (-1, 3)):
        want = torch.select(torch.tensor(a), dim, index).numpy()
        np.testing.assert_array_equal(tg.select(tg.tensor(a), dim, index).numpy(), want)
        x = tg.tensor(a, requires_grad=True)
        x.select(dim, index).sum().backward()
        t = torch.tensor(a, requires_grad=True)
        t.select(dim, index).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
