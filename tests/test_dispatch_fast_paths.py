"""Dispatch's fast paths (Note [Per-op cost], Note [Scalar operands] in _dispatch.py) must
compute exactly what the general path computes: same values bit for bit, same dtypes, same
graph. Checked against numpy on the raw arrays (with the Python number as numpy receives it)
and against PyTorch's promotion.
"""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad import _dispatch

FLOATS = ["float16", "float32", "float64"]
NUMBERS = [1.5, 0.1, 1 / 3, -3, 2, 7, 12345, 2 ** 24 + 1, 2 ** 70, 1e-8, 1e-300, 65504.0,
           70000.0, 0.0, -0.0, 0, float("inf"), float("-inf"), float("nan")]
BINARY = [("mul", np.multiply), ("add", np.add), ("sub", np.subtract), ("div", np.true_divide),
          ("maximum", np.maximum), ("pow", np.power)]


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.tobytes()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,ufunc", BINARY, ids=[b[0] for b in BINARY])
def test_scalar_operands_give_numpys_exact_result(name, ufunc, dtype):
    rng = np.random.default_rng(1)
    x0 = (rng.standard_normal(7) * 50).astype(dtype)
    x0[0] = -0.0
    # `torch.maximum(x, 0.5)` refuses the number (PyTorch's TypeError); the scalar fast
    # path under test is the op's own, which internal code calls with numbers
    op = getattr(tg.ops, name) if name == "maximum" else getattr(tg, name)
    for v in NUMBERS:
        for shape in ((7,), ()):
            xa = x0 if shape else x0[3].reshape(())
            with np.errstate(all="ignore"):
                want_r, want_l = ufunc(xa, v), ufunc(v, xa)
                if name == "pow" and not shape and want_r.dtype == np.float64:
                    # 0-d float64 powers round as C's pow (Python's **, PyTorch's CPU
                    # kernel): Note [Scalar powers] in ops/elementwise.py
                    want_r = np.asarray(np.float64(xa) ** np.float64(v))
                    want_l = np.asarray(np.float64(v) ** np.float64(xa))
            assert _bits(op(tg.tensor(xa), v).numpy()) == _bits(want_r), (v, shape)
            assert _bits(op(v, tg.tensor(xa)).numpy()) == _bits(want_l), (v, shape)


def test_scalar_cache_holds_read_only_arrays_and_stays_bounded():
    x = tg.tensor([1.0, 2.0])
    for k in range(3000):                         # ever-new numbers
        x * (1.0 + k / 7)
    assert len(_dispatch._SCALARS) <= 1024
    assert all(not a.flags.writeable for a in _dispatch._SCALARS.values())
    # signed zeros and nan are never cached (0.0 == -0.0 as dict keys)
    assert not any(k[0] == 0 or k[0] != k[0] for k in _dispatch._SCALARS)


@pytest.mark.parametrize("a_dtype,b", [("float32", 2.5), ("float16", 3), ("int64", 2.5),
                                       ("int32", 3), ("bool", 1.5), ("float32", True)])
def test_tensor_scalar_promotion_matches_torch(a_dtype, b):
    torch = pytest.importorskip("torch")
    a0 = np.array([1, 0, 3]).astype(a_dtype)
    ours = tg.mul(tg.tensor(a0), b)
    theirs = torch.mul(torch.tensor(a0), b)
    assert str(ours.dtype) == str(theirs.dtype)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("da,db", [("float32", "float32"), ("float32", "float64"),
                                   ("float16", "float32"), ("int64", "float32"),
                                   ("int32", "int64"), ("bool", "float64")])
@pytest.mark.parametrize("zero_d", [False, True])
def test_tensor_tensor_promotion_matches_torch(da, db, zero_d):
    torch = pytest.importorskip("torch")
    a0 = np.array([1, 2, 3]).astype(da)
    b0 = (np.array(2) if zero_d else np.array([2, 0, 1])).astype(db)
    for name in ("add", "mul", "div", "maximum"):
        ours = getattr(tg, name)(tg.tensor(a0), tg.tensor(b0))
        theirs = getattr(torch, name)(torch.tensor(a0), torch.tensor(b0))
        assert str(ours.dtype) == str(theirs.dtype), name
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_numpy_array_and_parameter_operands_take_the_general_path_correctly():
    from tracegrad.nn import Parameter
    w = Parameter(tg.tensor([1.0, 2.0]))
    x = tg.tensor([3.0, 4.0], requires_grad=True)
    y = w * x + np.array([1.0, 1.0])        # numpy float64 operand promotes like a tensor
    assert y.dtype == tg.float64 and type(y.grad_fn).__name__ == "AddBackward0"
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 2.0])


def test_graph_metadata_of_recorded_ops():
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = tg.tensor(3.0, dtype=tg.float64)
    y = a * 2.0
    z = y * b                                 # float32 * 0-d float64 -> float32
    n = z.grad_fn
    assert z.dtype == tg.float32
    assert n.next_functions[0][0] is y.grad_fn and n.next_functions[1] == (None, 0)
    assert n.shapes == ((2,), ()) and n.dtypes == (np.dtype(np.float32), np.dtype(np.float64))
    assert n.needs == (True, False)
    (g,) = tg.autograd.grad(z.sum(), a)
    assert g.dtype == tg.float32
    np.testing.assert_array_equal(g.numpy(), [6.0, 6.0])


def test_run_executes_without_handing_the_call_to_the_trace_hook():
    from tracegrad.ops import elementwise as E
    calls = []
    x = tg.tensor([2.0])
    token = _dispatch.trace_hook.set(lambda *a: calls.append(a))
    try:
        out = _dispatch.run(E.MUL, (x, 3.0), _dispatch.EMPTY)
        assert _dispatch.trace_hook.get() is not None       # restored after the call
    finally:
        _dispatch.trace_hook.reset(token)
    assert calls == [] and out.numpy().tolist() == [6.0]
