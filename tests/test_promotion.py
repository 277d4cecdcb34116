"""PyTorch type promotion, case by case: the expected dtype (PyTorch's documented rule) is
checked for tracegrad and, when torch is installed, for torch too, so the table itself is
validated. Also the default dtype switched to float64 (creation and scalar promotion)."""
import numpy as np
import pytest


def _t(m, data, dtype):
    return m.tensor(data, dtype=getattr(m, dtype))


CASES = [
    # (id, expression over library m, expected dtype)
    ("int_tensor+float_scalar", lambda m: _t(m, [1, 2], "int64") + 2.5, "float32"),
    ("int32_tensor*float_scalar", lambda m: _t(m, [1, 2], "int32") * 2.5, "float32"),
    ("int_tensor+int_scalar", lambda m: _t(m, [1, 2], "int32") + 7, "int32"),
    ("float32+float64_zero_dim", lambda m: _t(m, [1.0], "float32") + _t(m, 2.0, "float64"),
     "float32"),
    ("float32_zero_dim+float64_zero_dim",
     lambda m: _t(m, 1.0, "float32") + _t(m, 2.0, "float64"), "float64"),
    ("int32+int64_zero_dim", lambda m: _t(m, [1], "int32") + _t(m, 2, "int64"), "int32"),
    ("int32+int64_tensor", lambda m: _t(m, [1], "int32") + _t(m, [2], "int64"), "int64"),
    ("int64+float64_zero_dim", lambda m: _t(m, [1], "int64") + _t(m, 2.0, "float64"),
     "float64"),
    ("int32+float32_tensor", lambda m: _t(m, [1], "int32") + _t(m, [2.0], "float32"),
     "float32"),
    ("int64+float16_tensor", lambda m: _t(m, [1], "int64") + _t(m, [2.0], "float16"),
     "float16"),
    ("bool+int_scalar", lambda m: _t(m, [True], "bool") + 1, "int64"),
    ("bool+bool", lambda m: _t(m, [True], "bool") + _t(m, [False], "bool"), "bool"),
    ("bool+float_scalar", lambda m: _t(m, [True], "bool") * 1.5, "float32"),
    ("bool+int32_tensor", lambda m: _t(m, [True], "bool") + _t(m, [3], "int32"), "int32"),
    ("float32+bool_scalar", lambda m: _t(m, [1.0], "float32") + True, "float32"),
    ("int64*bool_scalar", lambda m: _t(m, [1], "int64") * True, "int64"),
    ("int_true_division", lambda m: _t(m, [1, 2], "int64") / _t(m, [2, 2], "int64"),
     "float32"),
    ("int_div_int_scalar", lambda m: _t(m, [3], "int32") / 2, "float32"),
    ("int_floor_division", lambda m: _t(m, [3], "int64") // 2, "int64"),
    ("float16+python_float", lambda m: _t(m, [1.0], "float16") + 1.5, "float16"),
    ("float16+float32_zero_dim", lambda m: _t(m, [1.0], "float16") + _t(m, 1.0, "float32"),
     "float16"),
    ("float16+float32_tensor", lambda m: _t(m, [1.0], "float16") + _t(m, [1.0], "float32"),
     "float32"),
    ("compare_float_int", lambda m: _t(m, [1.0], "float32") < 1, "bool"),
    ("compare_int_tensors", lambda m: _t(m, [1], "int32") == _t(m, [1.0], "float64"), "bool"),
    ("int_pow_float_scalar", lambda m: _t(m, [2], "int64") ** 0.5, "float32"),
    ("int_pow_int_tensor", lambda m: _t(m, [2], "int32") ** _t(m, [2], "int64"), "int64"),
    ("scalar_pow_int_tensor", lambda m: 2 ** _t(m, [2], "int64"), "int64"),
    ("scalar_float_pow_int", lambda m: 2.0 ** _t(m, [2], "int64"), "float32"),
    ("rsub_int_float", lambda m: 1.5 - _t(m, [2], "int32"), "float32"),
    ("where_int_float_scalar",
     lambda m: m.where(_t(m, [True, False], "bool"), _t(m, [1, 2], "int64"), 0.5), "float32"),
    ("cat_int32_float64", lambda m: m.cat([_t(m, [1], "int32"), _t(m, [1.0], "float64")]),
     "float64"),
    ("matmul_int32", lambda m: _t(m, [[1]], "int32") @ _t(m, [[2]], "int32"), "int32"),
    ("sum_bool", lambda m: _t(m, [True, True], "bool").sum(), "int64"),
    ("sum_int32", lambda m: _t(m, [1, 2], "int32").sum(), "int64"),
    ("prod_int32", lambda m: _t(m, [1, 2], "int32").prod(), "int64"),
    ("mean_float16", lambda m: _t(m, [1.0, 2.0], "float16").mean(), "float16"),
    ("exp_int", lambda m: m.exp(_t(m, [1], "int64")), "float32"),
    ("sqrt_bool", lambda m: m.sqrt(_t(m, [True], "bool")), "float32"),
    ("abs_int32", lambda m: m.abs(_t(m, [-1], "int32")), "int32"),
    ("maximum_int_float", lambda m: m.maximum(_t(m, [1], "int64"), _t(m, [0.5], "float32")),
     "float32"),
    ("iadd_int_stays_int", lambda m: _iadd(_t(m, [1], "int64"), 2), "int64"),
    ("iadd_float32_float64", lambda m: _iadd(_t(m, [1.0], "float32"), _t(m, [1.0], "float64")),
     "float32"),
    ("tensor_infers_bool", lambda m: m.tensor(True), "bool"),
    ("tensor_infers_int", lambda m: m.tensor([1, 2]), "int64"),
    ("tensor_infers_float", lambda m: m.tensor([1, 2.0]), "float32"),
    ("result_type", lambda m: m.ones(1, dtype=m.result_type(_t(m, [1], "int32"), 1.0)),
     "float32"),
    ("promote_types", lambda m: m.ones(1, dtype=m.promote_types(m.int32, m.float16)),
     "float16"),
]


def _iadd(x, y):
    x += y
    return x


def _dname(t):
    return str(t.dtype).replace("torch.", "")


@pytest.mark.parametrize("fn,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_promotion(fn, expected):
    import tracegrad as tg
    assert _dname(fn(tg)) == expected


@pytest.mark.parametrize("fn,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_promotion_table_agrees_with_torch(fn, expected):
    torch = pytest.importorskip("torch")
    assert _dname(fn(torch)) == expected


DEFAULT64 = [
    ("tensor_of_floats", lambda m: m.tensor([1.5]), "float64"),
    ("ones", lambda m: m.ones(2), "float64"),
    ("arange_float", lambda m: m.arange(0.0, 3.0), "float64"),
    ("arange_int", lambda m: m.arange(3), "int64"),
    ("randn", lambda m: m.randn(2), "float64"),
    ("int_plus_float_scalar", lambda m: _t(m, [1], "int64") + 1.5, "float64"),
    ("float32_plus_float_scalar", lambda m: _t(m, [1.0], "float32") + 1.5, "float32"),
    ("int_true_division", lambda m: _t(m, [1], "int64") / 2, "float64"),
    ("exp_int", lambda m: m.exp(_t(m, [1], "int32")), "float64"),
]


@pytest.mark.parametrize("lib", ["tracegrad", "torch"])
def test_default_dtype_float64_affects_creation_and_scalars(lib):
    m = pytest.importorskip(lib)
    before = m.get_default_dtype()
    m.set_default_dtype(m.float64)
    try:
        assert m.get_default_dtype() is m.float64
        got = {name: _dname(fn(m)) for name, fn, _ in DEFAULT64}
    finally:
        m.set_default_dtype(before)
    assert got == {name: want for name, _, want in DEFAULT64}
    assert m.get_default_dtype() is before
    assert _dname(m.ones(1)) == "float32"


def test_default_dtype_rejects_integer_types():
    import tracegrad as tg
    with pytest.raises(TypeError):
        tg.set_default_dtype(tg.int64)
    assert tg.get_default_dtype() is tg.float32


def test_numpy_operand_promotes_like_a_tensor():
    """A numpy array operand counts as a tensor of its dtype (as torch converts it)."""
    import tracegrad as tg
    assert (tg.ones(2, dtype=tg.int32) + np.ones(2, dtype=np.int32)).dtype is tg.int32
    assert (tg.ones(2) * np.ones(2)).dtype is tg.float64
    assert (np.ones(2, dtype=np.int64) - tg.ones(2, dtype=tg.int64)).dtype is tg.int64


NUMPY_SCALARS = [
    ("f32_times_np_float64", lambda m: m.ones(2) * np.float64(2.0), "float32"),
    ("np_float64_times_f32", lambda m: np.float64(2.0) * m.ones(2), "float32"),
    ("f32_plus_np_int64", lambda m: m.ones(2) + np.int64(3), "float32"),
    ("f16_times_np_float32", lambda m: _t(m, [1.0], "float16") * np.float32(2.0), "float16"),
    ("i64_times_np_int64", lambda m: _t(m, [1], "int64") * np.int64(3), "int64"),
    ("i32_plus_np_int64", lambda m: _t(m, [1], "int32") + np.int64(3), "int32"),
    ("i64_div_np_int32", lambda m: _t(m, [1], "int64") / np.int32(2), "float32"),
    ("i64_times_np_float64", lambda m: _t(m, [1], "int64") * np.float64(2.0), "float32"),
    ("bool_plus_np_bool", lambda m: _t(m, [True], "bool") + np.bool_(True), "float32"),
    ("i64_times_np_bool", lambda m: _t(m, [1], "int64") * np.bool_(True), "float32"),
    ("where_i64_np_int64", lambda m: m.where(_t(m, [True, False], "bool"),
                                             _t(m, [1, 2], "int64"), np.int64(3)), "int64"),
    ("f32_iadd_np_float64", lambda m: m.ones(2).add_(np.float64(0.5)), "float32"),
    ("f32_maximum_sqrt", lambda m: m.ones(2) / np.sqrt(2.0), "float32"),
]


@pytest.mark.parametrize("lib", ["tracegrad", "torch"])
def test_numpy_scalar_operand_promotes_like_a_python_number(lib):
    """`x / np.sqrt(d)`: PyTorch treats numpy scalars as Python numbers (they never upcast a
    tensor's dtype within its category), unlike numpy arrays; a numpy bool counts as a
    float there."""
    m = pytest.importorskip(lib)
    got = {name: _dname(fn(m)) for name, fn, _ in NUMPY_SCALARS}
    assert got == {name: want for name, _, want in NUMPY_SCALARS}


def test_numpy_scalar_operand_values_and_gradients():
    import tracegrad as tg
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * np.float64(3.0) + np.int64(1)
    assert y.dtype is tg.float32
    y.sum().backward()
    assert x.grad.dtype is tg.float32
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(y.detach().numpy(), [4.0, 7.0])
