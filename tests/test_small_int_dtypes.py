"""int8, int16 and uint8: dtype objects, promotion, wrapping, indexing, reductions and
compilation, each checked against PyTorch over a matrix of ops x dtypes."""
import warnings

import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")

SMALL = ["int8", "int16", "uint8"]
ALL = SMALL + ["int32", "int64", "bool", "float32", "float64"]


def _make(m, name, seed, shape=(3, 4)):
    r = np.random.default_rng(seed)
    lo, hi = {"uint8": (0, 256), "int16": (-32768, 32768)}.get(name, (-128, 128))
    v = r.integers(lo, hi, size=shape)
    v = v > 0 if name == "bool" else v
    return m.tensor(v.tolist(), dtype=getattr(m, name))


def _outcome(m, fn, args):
    """(kind, payload): a result as (dtype name, values), or the builtin error class."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = fn(m, *args)
    except Exception as e:                    # noqa: BLE001  (compared with torch's)
        import builtins
        base = next(c for c in type(e).__mro__ if getattr(builtins, c.__name__, None) is c)
        return "err", "RuntimeError" if base is NotImplementedError else base.__name__
    if isinstance(r, (torch.Tensor, tg.Tensor)):
        return "ok", (str(r.dtype).split(".")[-1], tuple(r.shape), r.detach().numpy().tolist())
    return "ok", str(r).replace("tracegrad", "torch")


def _same(fn, dtypes, seeds=(0, 1)):
    t_args = [_make(torch, d, s) for d, s in zip(dtypes, seeds)]
    g_args = [_make(tg, d, s) for d, s in zip(dtypes, seeds)]
    want, got = _outcome(torch, fn, t_args), _outcome(tg, fn, g_args)
    if want[0] == "ok" and got[0] == "ok" and want[1][0] in ("float32", "float64"):
        assert want[1][:2] == got[1][:2]
        np.testing.assert_allclose(got[1][2], want[1][2], rtol=1e-6)
    else:
        assert got == want


BINARY = {
    "add": lambda m, a, b: a + b,
    "mul": lambda m, a, b: a * b,
    "sub": lambda m, a, b: a - b,
    "div": lambda m, a, b: a / (b.to(m.int64).abs() + 1).to(b.dtype),
    "true_divide": lambda m, a, b: m.true_divide(a, (b.to(m.int64).abs() + 1).to(b.dtype)),
    "floor_divide": lambda m, a, b: m.floor_divide(a, (b.to(m.int64).abs() % 50 + 1).to(b.dtype)),
    "remainder": lambda m, a, b: m.remainder(a, (b.to(m.int64).abs() % 50 + 1).to(b.dtype)),
    "eq": lambda m, a, b: a == b,
    "lt": lambda m, a, b: a < b,
    "maximum": lambda m, a, b: m.maximum(a, b),
    "where": lambda m, a, b: m.where(a > 0, a, b),
    "bitwise_and": lambda m, a, b: a & b,
    "cat": lambda m, a, b: m.cat([a, b]),
    "matmul": lambda m, a, b: a @ b.T,
}
PAIRS = [(x, y) for x in ALL for y in ALL if (x in SMALL or y in SMALL)]


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_ops_promote_and_wrap_like_torch(op):
    for pair in PAIRS:
        _same(BINARY[op], pair)


UNARY = {
    "neg": lambda m, a: -a, "abs": lambda m, a: a.abs(), "sign": lambda m, a: a.sign(),
    "sum": lambda m, a: a.sum(), "sum_dim": lambda m, a: a.sum(1),
    "sum_dtype": lambda m, a: a.sum(dtype=a.dtype), "prod": lambda m, a: a.prod(1),
    "prod_dtype": lambda m, a: a.prod(1, dtype=a.dtype),
    "cumsum": lambda m, a: a.cumsum(0), "cumsum_dtype": lambda m, a: a.cumsum(0, dtype=a.dtype),
    "mean": lambda m, a: a.mean(), "max": lambda m, a: a.max(), "argmax": lambda m, a: a.argmax(),
    "min_dim": lambda m, a: a.min(1)[0], "sort": lambda m, a: a.sort(1)[0],
    "topk": lambda m, a: a.topk(2)[0], "any": lambda m, a: a.any(), "all": lambda m, a: a.all(1),
    "plus_int": lambda m, a: a + 5, "plus_big_int": lambda m, a: a + 300,
    "times_int": lambda m, a: a * 3, "minus_int": lambda m, a: 3 - a,
    "plus_float": lambda m, a: a + 1.5, "div_int": lambda m, a: a / 2,
    "floordiv_int": lambda m, a: a // 3, "remainder_neg": lambda m, a: m.remainder(a, -3),
    "pow": lambda m, a: a ** 2, "sqrt": lambda m, a: a.abs().sqrt(), "sin": lambda m, a: a.sin(),
    "clamp": lambda m, a: a.clamp(-5, 5), "clamp_wide": lambda m, a: a.clamp(-500, 5),
    "clamp_float": lambda m, a: a.clamp(-5.5, 5.5),
    "lt_big": lambda m, a: a < 1000, "eq_int": lambda m, a: a == 3,
    "eq_float": lambda m, a: a == 3.0,
    "char": lambda m, a: a.char(), "byte": lambda m, a: a.byte(), "short": lambda m, a: a.short(),
    "to_int8": lambda m, a: a.to(m.int8), "to_uint8": lambda m, a: a.to(m.uint8),
    "float": lambda m, a: a.float(), "bitwise_not": lambda m, a: ~a,
    "mask_index": lambda m, a: a[a > 0], "masked_fill": lambda m, a: a.masked_fill(a > 0, 7),
    "relu": lambda m, a: m.relu(a), "softmax": lambda m, a: m.softmax(a, 0),
    "bincount": lambda m, a: m.bincount(a.flatten().abs()),
    "embedding": lambda m, a: m.nn.functional.embedding(a.abs() % 3, m.ones(3, 2)),
    "gather": lambda m, a: a.gather(1, m.tensor([[0], [1], [2]])),
    "requires_grad_": lambda m, a: a.requires_grad_(),
    "iinfo": lambda m, a: (m.iinfo(a.dtype).min, m.iinfo(a.dtype).max, m.iinfo(a.dtype).bits),
    "finfo": lambda m, a: m.finfo(a.dtype), "element_size": lambda m, a: a.element_size(),
    "is_floating_point": lambda m, a: a.is_floating_point(),
    "is_signed": lambda m, a: a.dtype.is_signed,
    "repr": lambda m, a: repr(a), "dtype_str": lambda m, a: str(a.dtype),
    "type": lambda m, a: a.type(),
    "item": lambda m, a: type(a[0, 0].item()).__name__, "tolist": lambda m, a: a.tolist(),
    "promote_types": lambda m, a: (m.promote_types(a.dtype, m.int8),
                                   m.promote_types(a.dtype, m.uint8)),
    "zero_dim_operand": lambda m, a: a + m.tensor(-3, dtype=m.int8),
    "full": lambda m, a: m.full((2,), 3, dtype=a.dtype),
    "arange": lambda m, a: m.arange(5, dtype=a.dtype),
    "full_out_of_range": lambda m, a: m.full((2,), 100000, dtype=a.dtype),
    "tensor_out_of_range": lambda m, a: m.tensor([100000], dtype=a.dtype),
    "fill_out_of_range": lambda m, a: a.fill_(100000),
    "where_out_of_range": lambda m, a: m.where(a > 0, a, 100000),
    "iadd_int": lambda m, a: a.add_(300), "iadd_float": lambda m, a: a.add_(1.5),
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_ops_match_torch(op):
    for d in SMALL:
        _same(UNARY[op], (d,))


def test_python_int_operands_wrap_into_the_tensor_dtype():
    a = tg.tensor([88, -60], dtype=tg.int8)
    assert (a + 300).tolist() == [-124, -16]          # 300 is 44 as an int8
    assert (a < 1000).tolist() == [False, True]       # 1000 is -24 as an int8
    assert (a + 5).dtype is tg.int8 and (a * 2.0).dtype is tg.float32
    assert (tg.tensor([200], dtype=tg.uint8) + tg.tensor([3], dtype=tg.int8)).dtype is tg.int16


def test_uint8_index_is_a_deprecated_mask_and_small_signed_ints_are_refused():
    x = tg.arange(6.).reshape(2, 3)
    with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
        assert x[tg.tensor([1, 0], dtype=tg.uint8)].tolist() == [[0., 1., 2.]]
    with pytest.warns(UserWarning):                      # 0-dim uint8: a mask too, as in torch
        assert tuple(x[tg.tensor(1, dtype=tg.uint8)].shape) == (1, 2, 3)
    with pytest.warns(UserWarning):
        assert x[np.array([1, 0], dtype=np.uint8)].tolist() == [[0., 1., 2.]]
    assert x[tg.tensor(1, dtype=tg.int8)].tolist() == [3., 4., 5.]   # 0-dim: an int
    for d in (tg.int8, tg.int16):
        with pytest.raises(IndexError, match="must be long, int, byte or bool tensors"):
            x[tg.tensor([1, 0], dtype=d)]
    y = x.clone()
    with pytest.warns(UserWarning):
        y[tg.tensor([1, 0], dtype=tg.uint8)] = tg.tensor([5., 6., 7.])
    assert y.tolist() == [[5., 6., 7.], [3., 4., 5.]]
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks"):
        y[tg.tensor([1, 0], dtype=tg.uint8)] = 5.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ty = torch.arange(6.).reshape(2, 3)
        with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks"):
            ty[torch.tensor([1, 0], dtype=torch.uint8)] = 5.0


def test_requires_grad_on_small_ints_raises_like_torch():
    for d in SMALL:
        for make in (lambda: tg.tensor([1, 2], dtype=getattr(tg, d), requires_grad=True),
                     lambda: tg.zeros(2, dtype=getattr(tg, d), requires_grad=True)):
            with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex"):
                make()
        with pytest.raises(RuntimeError, match="only Tensors of floating point dtype"):
            tg.ones(2, dtype=getattr(tg, d)).requires_grad_()


def test_names_conversions_and_legacy_types():
    assert (repr(tg.int8), repr(tg.int16), repr(tg.uint8)) == ("torch.int8", "torch.int16",
                                                             "torch.uint8")
    assert tg.short is tg.int16
    assert tg.from_numpy(np.array([1, 255], np.uint8)).dtype is tg.uint8
    assert tg.tensor(np.int8(3)).dtype is tg.int8
    assert tg.ByteTensor([1, 2]).dtype is tg.uint8 and tg.CharTensor(2).dtype is tg.int8
    assert tg.tensor([1.7]).type("torch.ShortTensor").dtype is tg.int16
    assert isinstance(tg.ones(1, dtype=tg.int16), tg.ShortTensor)
    assert tg.get_rng_state().dtype is tg.uint8      # PyTorch's ByteTensor state
    state = tg.get_rng_state()
    draws = tg.rand(3)
    tg.set_rng_state(state.long())                   # the int64 form older checkpoints hold
    assert tg.equal(tg.rand(3), draws)
    assert tg.ir.types.TensorType((2,), tg.uint8).__str__() in ("u8[2]",)


def test_serialization_round_trips_small_ints(tmp_path):
    t = {d: tg.tensor([1, 2, 3], dtype=getattr(tg, d)) for d in SMALL}
    tg.save(t, tmp_path / "s.pt")
    back = tg.load(tmp_path / "s.pt")
    assert all(back[d].dtype is t[d].dtype and tg.equal(back[d], t[d]) for d in SMALL)


def _program(a, b, w):
    c = a + b                                   # int8 + uint8 -> int16
    d = a * 3 + 300                             # wraps
    s = a.sum() + b.sum(0).sum()                # int64
    f = (a / 2 + w).sum()                       # default float, differentiable in w
    return (c, d, s, f, a.char().short().byte(), a < 1000, a.clamp(-100, 5), b.clamp(-5, 9),
            b.any(),
            tg.where(a > 0, a, b), a.sum(dtype=tg.int8),
            (b > 0).byte().all(1) * 200 + 100 > 250)   # uint8 all() wraps: 300 is 44


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_compiled_small_int_program_equals_eager(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    a, b = _make(tg, "int8", 0), _make(tg, "uint8", 1)
    w = tg.randn(3, 4, requires_grad=True)
    want = _program(a, b, w)
    f = tg.compile(_program) if backend == "numpy" else tg.compile(_program, backend="jax")
    for _ in range(2):
        got = f(a, b, w)
        for x, y in zip(want, got):
            assert x.dtype is y.dtype
            np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy(), rtol=1e-6)
    got[3].backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.ones((3, 4), np.float32))
