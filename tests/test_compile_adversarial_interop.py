"""Programs that move values between tensors, numpy and Python, and whose shapes and dtypes
change between calls, run eagerly and compiled over several calls: everything the caller
can see must be the same (outputs and their types, the arguments' contents and versions,
`.grad`, numpy arrays the caller holds, errors). Each fix of an adversarial review has a
test here; the parametrised probes below are programs that already held."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from _differential import assert_same_records, records, view as _view


def _r(seed, *shape, dtype=np.float64):
    a = np.random.default_rng(seed).standard_normal(shape) * 3
    if np.dtype(dtype).kind in "iub":
        a = np.round(a)
    return tg.tensor(a.astype(dtype))


def _same(fn, make, calls=5, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager, compiled, f = records(fn, make, calls, **kw)
    assert_same_records(eager, compiled)
    return f


# -- writes into numpy array arguments (Note [Writes into numpy array arguments])

def test_from_numpy_of_an_array_argument_written_in_place_reaches_the_caller():
    def f(x, arr):
        t = tg.from_numpy(arr)          # shares the caller's memory
        t.add_(x)
        return t.sum()

    f_c = _same(f, lambda i: (_r(i, 3), np.ones(3)))
    assert f_c.stats.eager_calls >= 4
    with pytest.warns(UserWarning, match="numpy array argument 'arr'"):
        tg.compile(f)(_r(0, 3), np.ones(3))


@pytest.mark.parametrize("where", ["item", "dict"])
def test_item_assignment_into_an_array_argument_reaches_the_caller(where):
    def f(x, holder):
        arr = holder if where == "item" else holder["a"]
        arr[0] = 2.0
        return x * 2

    make = (lambda i: (_r(i, 3), np.ones(3))) if where == "item" else (
        lambda i: (_r(i, 3), {"a": np.ones(3)}))
    _same(f, make)


def test_an_array_argument_only_read_still_compiles():
    f = _same(lambda x, arr: x * tg.from_numpy(arr).sum(), lambda i: (_r(i, 3), np.ones(3)))
    assert f.stats.traces == 1 and f.stats.eager_calls == 0


# -- versions of results changed in place before they are returned
# (Note [Versions of fresh outputs] in compiler/path.py)

def _changed_results(x):
    y = x * 2
    y.add_(1)
    z = x.clone()
    z[0] = 3
    w = x + 1
    w.mul_(2)
    w.div_(3)
    return y, z, w, x + 0


def test_results_changed_in_place_keep_their_version_on_cached_calls():
    f = _same(_changed_results, lambda i: (_r(i, 3),), calls=4)
    assert f.stats.traces == 1
    assert [t._version for t in f(_r(9, 3))] == [1, 1, 2, 0]


def test_results_changed_in_place_keep_their_version_on_the_jax_backend():
    pytest.importorskip("jax")           # (XLA may round differently: versions only)
    f = tg.compile(_changed_results, backend="jax")
    for i in range(3):
        assert [t._version for t in f(_r(i, 3))] == [1, 1, 2, 0]
    assert f.stats.traces == 1


def test_version_of_a_changed_result_requiring_grad_and_its_backward_check():
    def f(x):
        y = x.exp()
        z = y * 1
        z.add_(1)
        return y, z

    def run(g):
        x = _r(0, 3).requires_grad_()
        y, z = g(x)
        y.add_(1)                        # exp saved its result: backward must fail
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()
        return y._version, z._version

    cf = tg.compile(f)
    assert run(f) == run(cf) == run(cf) == (1, 1)
    assert cf.stats.traces == 1


# -- Python ints past jax's integer range (Note [Python ints past jax's integers])

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("op", ["mul", "add", "rsub", "eq"])
def test_python_int_past_int32_on_the_jax_backend(dtype, op):
    pytest.importorskip("jax")
    big = {"mul": 2 ** 40, "add": 2 ** 31, "rsub": -2 ** 40, "eq": 2 ** 40}[op]
    fn = {"mul": lambda x: x * big, "add": lambda x: x + big, "rsub": lambda x: big - x,
          "eq": lambda x: x == big}[op]
    f = tg.compile(fn, backend="jax")
    for i in range(2):
        x = _r(i, 3, dtype=dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # int32: the numpy backend, with a warning
            want, got = fn(x), f(x)
        assert _view(got) == _view(want)


# -- numpy arrays returned (Note [Numpy arrays returned] in compiler/function.py)

@pytest.mark.parametrize("body", ["numpy", "asarray", "tuple", "dict", "0-d"])
def test_a_returned_numpy_array_runs_eagerly_with_a_warning(body):
    fn = {"numpy": lambda x: x.numpy(),
          "asarray": lambda x: np.asarray(x) * 2,
          "tuple": lambda x: ((x * 2).sum(), (x * 3).detach().numpy()),
          "dict": lambda x: {"a": (x * 2).numpy(), "b": x},
          "0-d": lambda x: x.sum().numpy()}[body]
    f = _same(fn, lambda i: (_r(i, 3),))
    assert f.stats.eager_calls == 4
    with pytest.warns(UserWarning, match="returns a numpy array"):
        tg.compile(fn)(_r(0, 3))
    x = _r(1, 3)
    if body == "numpy":                  # eager's array shares the tensor's memory
        with pytest.warns(UserWarning):
            assert np.shares_memory(tg.compile(fn)(x), x.numpy())


# -- tensor(...) of tensors, numpy scalars and Python numbers: torch's dtype, eager and traced

_TENSOR_OF = {
    "tensor": "lib.tensor(a)", "items": "lib.tensor([a[0], a[1]])",
    "int32_items": "lib.tensor([b, b])", "half_item": "lib.tensor([c])",
    "f64_and_int": "lib.tensor([a[0], 1])", "int32_and_float": "lib.tensor([b, 1.5])",
    "int32_and_int": "lib.tensor([b, 1])", "half_and_float": "lib.tensor([c, 1.5])",
    "half_and_int": "lib.tensor([c, 1])", "f64_and_bool": "lib.tensor([a[0], True])",
    "nested": "lib.tensor([[b], [c]])", "np_f64_scalar": "lib.tensor([np.float64(1.5), 1.0])",
    "np_i32_scalar": "lib.tensor([np.int32(1), 1])",
}


@pytest.mark.parametrize("name", sorted(_TENSOR_OF))
def test_tensor_of_tensors_takes_torchs_dtype_eager_and_compiled(name):
    torch = pytest.importorskip("torch")

    def program(lib):
        return eval("lambda a, b, c: " + _TENSOR_OF[name], {"lib": lib, "np": np})

    def args(lib, i):
        return (lib.tensor([1.5 + i, 2.5], dtype=lib.float64),
                lib.tensor(2 + i, dtype=lib.int32), lib.tensor(1.5, dtype=lib.float16))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "To copy construct from a tensor" advice
        ref = program(torch)(*args(torch, 0))
    assert str(program(tg)(*args(tg, 0)).dtype) == str(ref.dtype)
    _same(program(tg), lambda i: args(tg, i), calls=3)


# -- the default dtype left changed by the function (Note [Default dtype left changed])

@pytest.fixture
def _default_dtype():
    old = tg.get_default_dtype()
    yield
    tg.set_default_dtype(old)


def test_default_dtype_set_inside_and_left_changed_is_set_on_cached_calls(_default_dtype):
    def f(x):
        tg.set_default_dtype(tg.float64)
        return tg.ones(3) * x

    def make(i):
        tg.set_default_dtype(tg.float32)
        return (_r(i, 3, dtype=np.float32),)

    for g in (f, tg.compile(f)):
        for i in range(3):
            g(*make(i))
            assert tg.get_default_dtype() is tg.float64
    f_c = _same(f, make, calls=3)
    assert f_c.stats.traces == 1


def test_default_dtype_set_on_one_branch_only(_default_dtype):
    def f(x):
        if x.sum() > 0:
            tg.set_default_dtype(tg.float64)
        return tg.zeros(2), x * 2

    seen = []
    for g in (f, tg.compile(f)):
        out = []
        for i in range(6):
            tg.set_default_dtype(tg.float32)
            g(_r(i, 3))
            out.append(tg.get_default_dtype())
        seen.append(out)
    assert seen[0] == seen[1] and len(set(seen[0])) == 2


# -- probes that held: programs users write, over calls whose shapes and dtypes change

_BATCHES = [1, 2, 3, 5, 8, 1, 0, 3]
_DTYPES = [np.float32, np.float64, np.int64, np.int32, np.bool_, np.float16]


def _batch(i):
    return (_r(i, _BATCHES[i], 4),)


def _dtyped(i):
    return (_r(i % 2, 4, dtype=_DTYPES[i % len(_DTYPES)]),)


def _rows(x):
    return tg.stack([r * r.sum() for r in x]) if len(x) else x


def _mask_any(x):
    m = x > 0.5
    return x[m].sum() if bool(m.any()) else x.sum() * 0


_PROBES = {
    # Python values derived from tensors
    "argmax_index": (lambda x: x[int(x.sum(1).argmax())], lambda i: (_r(i, i % 3 + 1, 4),), 4),
    "half_batch": (lambda x: x[: x.shape[0] // 2].sum(0), _batch, 8),
    "len": (lambda x: tg.zeros(len(x)) + x.sum(1).float(), _batch, 8),
    "rows": (_rows, _batch, 8),
    "size_numel_dim": (lambda x: x / x.size(-1) + x.numel() + x.dim(), _batch, 8),
    "mask_any": (_mask_any, _batch, 8),
    "max_shape": (lambda x: x.reshape(max(x.shape), -1), _batch, 8),
    "view_star": (lambda x: x.view(-1, *x.shape[2:]), lambda i: (_r(i, _BATCHES[i], 2, 3),), 8),
    "size_arith": (lambda x: (x.new_zeros(x.shape[:-1] + (x.shape[-1] * 2,)), x.shape + (1,)),
                   _batch, 8),
    "tolist_branch": (lambda x: x * sum(v for v in x.tolist() if v > 0), lambda i: (_r(i, 4),),
                      4),
    "item_types": (lambda x: (x[0].item(), float(x[0]), int(x[0]), bool(x[0])), _dtyped, 6),
    "shape_types": (lambda x: (x.shape, x.size(), x.size(0), x.dtype, x.is_floating_point()),
                    _dtyped, 6),
    # dynamic shapes, broadcasting, empty tensors
    "bcast_size1": (lambda x, y: x * y + x / (1 + y * y),
                    lambda i: (_r(i, _BATCHES[i], 1), _r(i + 1, 1, _BATCHES[i])), 8),
    "empty_reduce": (lambda x: (x.sum(), x.mean(0), x.softmax(-1), x.prod(0)), _batch, 8),
    "creation": (lambda x: (tg.arange(x.shape[0]) * 2, tg.eye(x.shape[0]),
                            tg.linspace(0, 1, x.shape[0] + 1), tg.full_like(x, x.shape[0]),
                            tg.zeros(x.shape[0])), _batch, 8),
    "non_contiguous": (lambda x: (x * 2).sum(0),
                       lambda i: ([_r(i, 4, 3).t(), _r(i, 6, 4)[::2], _r(i, 1, 4).expand(3, 4),
                                   _r(i, 3, 4).flip(0), _r(i, 3, 4)[:, 1:]][i % 5],), 10),
    "scalar_or_one": (lambda x: x.sum() * 2 + x, lambda i: (_r(i) if i % 2 else _r(i, 1),), 4),
    # dtypes changing between calls, promotion with Python scalars
    "mul_int": (lambda x: x * 2, _dtyped, 12),
    "div_int": (lambda x: x / 3, _dtyped, 12),
    "floordiv": (lambda x: x // 2, _dtyped, 12),
    "pow_half": (lambda x: x ** 0.5, _dtyped, 12),
    "mod": (lambda x: x % 3, _dtyped, 12),
    "iadd_float": (lambda x: x.clone().__iadd__(1.5), _dtyped, 12),
    "cumsum": (lambda x: x.cumsum(0), _dtyped, 12),
    "dtype_branch": (lambda x: x * 2 if x.dtype == tg.float64 else x * 3, _dtyped, 6),
    # numpy in and out of the function
    "numpy_roundtrip": (lambda x: tg.from_numpy(np.tanh(x.numpy()) * 2) + x,
                        lambda i: (_r(i, 3),), 4),
    "numpy_index": (lambda x: x[tg.from_numpy(np.argsort(x.detach().numpy()))],
                    lambda i: (_r(i, 4),), 4),
    "numpy_mask": (lambda x: x[tg.from_numpy(x.numpy() > 0)].sum(), lambda i: (_r(i, 4),), 4),
    "numpy_array_arg": (lambda x, a: x * tg.from_numpy(a), lambda i: (_r(i, 3), np.full(3, i)),
                        4),
    "numpy_scalar": (lambda x: x * np.float64(2.5) + np.float32(1.5) * x,
                     lambda i: (_r(i, 3, dtype=_DTYPES[i % 2]),), 4),
    "tensor_of_items": (lambda x: tg.tensor([x[0].item(), x[1].item()]),
                        lambda i: (_r(i, 2, dtype=_DTYPES[i % 6]),), 6),
    # in place on arguments
    "add_": (lambda x: x.add_(1).sum(), lambda i: (_r(i, [3, 3, 4][i % 3]),), 5),
    "mask_assign": (lambda x: x.__setitem__(x < 0, 0) or x * 2, lambda i: (_r(i, 4),), 4),
    "clamp_": (lambda x: x.clamp_(-0.5, 0.5), lambda i: (_r(i, 3),), 4),
    "view_of_arg": (lambda x: x[::2].mul_(10).sum() + x.sum(), lambda i: (_r(i, 5),), 4),
    "overlap": (lambda x: x[1:].__iadd__(x[:-1]) and x, lambda i: (_r(i, 5),), 4),
    "leaf_error": (lambda x: x.add_(1), lambda i: (_r(i, 3).requires_grad_(),), 3),
}


@pytest.mark.parametrize("name", sorted(_PROBES))
def test_probe(name):
    fn, make, calls = _PROBES[name]
    _same(fn, make, calls=calls)


_GRAD_PROBES = {
    "mlp": (lambda x, w: (x @ w).tanh().mean(0),
            lambda i: (_r(i, _BATCHES[i] or 1, 3), _r(9, 3, 2).requires_grad_())),
    "row_index": (lambda x: x[int(x.detach().abs().sum(1).argmax())] * 2,
                  lambda i: (_r(i, i % 3 + 1, 3).requires_grad_(),)),
    "numpy_constant": (lambda x: x * tg.tensor(x.detach().numpy().sum()),
                       lambda i: (_r(i, 3).requires_grad_(),)),
    "gather_argmax": (lambda x: x.gather(1, x.argmax(1, keepdim=True)),
                      lambda i: (_r(i, _BATCHES[i] or 1, 3).requires_grad_(),)),
    "expand_contiguous": (lambda x: x.unsqueeze(0).expand(3, -1).contiguous().sum(0),
                          lambda i: (_r(i, i % 2 + 1).requires_grad_(),)),
}


@pytest.mark.parametrize("name", sorted(_GRAD_PROBES))
def test_grad_probe(name):
    fn, make = _GRAD_PROBES[name]
    _same(fn, make, calls=5, backward=True)


@pytest.mark.parametrize("name, most", [("non_contiguous", 3), ("mul_int", 6),
                                        ("cumsum", 6), ("half_batch", 6)])
def test_probe_traces_once_per_shape_dtype_and_layout(name, most):
    fn, make, calls = _PROBES[name]
    f = _same(fn, make, calls=calls)
    assert f.stats.traces <= most and f.stats.eager_calls == 0


# -- numpy scalars as bounds and fill values: Python numbers, as in PyTorch

_NUMPY_SCALAR_ARGS = {
    "clamp_min": "x.clamp(np.float64(0.1))",
    "clamp_max": "x.clamp(max=np.float64(0.1))",
    "clamp_int_tensor": "x.long().clamp(np.float64(0.5))",
    "clamp_int_bound": "x.clamp(np.int64(1))",
    "hardtanh": "lib.nn.functional.hardtanh(x, np.float64(-0.5), np.float64(0.5))",
    "full": "lib.full((2,), np.float64(1.5))",
    "full_int": "lib.full((2,), np.int32(1))",
    "arange": "lib.arange(np.float64(3))",
}


@pytest.mark.parametrize("name", sorted(_NUMPY_SCALAR_ARGS))
def test_numpy_scalar_arguments_take_torchs_dtype(name):
    torch = pytest.importorskip("torch")

    def program(lib):
        return eval("lambda x: " + _NUMPY_SCALAR_ARGS[name], {"lib": lib, "np": np})

    ref = program(torch)(torch.tensor([1.5, -2.0, 3.0]))
    for f in (program(tg), tg.compile(program(tg))):
        got = f(tg.tensor([1.5, -2.0, 3.0]))
        assert str(got.dtype) == str(ref.dtype)
        assert got.tolist() == ref.tolist()


# -- tensors over a traced tensor's memory (Note [Tensors over a traced tensor's memory])

def _alias_then_write(x):
    y = tg.from_numpy(x.numpy())         # eagerly, y is x's memory
    x.add_(1)
    return y * 1


def _alias_of_intermediate(x):
    y = x * 2
    z = tg.from_numpy(np.asarray(y))
    y.add_(1)
    return z * 1


@pytest.mark.parametrize("fn", [_alias_then_write, _alias_of_intermediate,
                                lambda x: tg.from_numpy(x.numpy()),
                                lambda x: tg.as_tensor(x.numpy()[1:])])
def test_a_tensor_over_another_tensors_memory_stays_an_alias(fn):
    f = _same(fn, lambda i: (tg.ones(3, dtype=tg.float64),), calls=3)
    assert f.stats.eager_calls == 2


def test_a_returned_alias_of_an_argument_sees_the_callers_later_write():
    f = tg.compile(lambda x: tg.from_numpy(x.numpy()))
    for _ in range(3):
        x = tg.ones(3, dtype=tg.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = f(x)
        x.add_(1)
        assert y.tolist() == [2.0, 2.0, 2.0]


# -- tensors over the caller's numpy arrays, returned (Note [Tensors over the caller's
# arrays] in compiler/function.py)

_GLOBAL_BUF = np.ones(3)


@pytest.mark.parametrize("where", ["argument", "argument_view", "global"])
def test_a_returned_tensor_over_the_callers_array_stays_an_alias(where):
    fn = {"argument": lambda x, a: tg.from_numpy(a),
          "argument_view": lambda x, a: tg.as_tensor(a)[1:],
          "global": lambda x, a: tg.from_numpy(_GLOBAL_BUF)}[where]
    seen = []
    for g in (fn, tg.compile(fn)):
        out = []
        for i in range(3):
            _GLOBAL_BUF[:] = 1
            a = np.ones(3)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y = g(tg.ones(3), a)
            (_GLOBAL_BUF if where == "global" else a)[-1] = 100 + i   # the caller's write
            out.append(y.tolist())
        seen.append(out)
    assert seen[0] == seen[1]


def test_a_tensor_computed_from_an_array_argument_still_compiles():
    f = _same(lambda x, a: tg.from_numpy(a) * x, lambda i: (_r(i, 3), np.ones(3)))
    assert f.stats.traces == 1 and f.stats.eager_calls == 0


# -- tensor([...]) of float arguments read per call (Note [Numbers read per call])

_TENSOR_OF_FLOATS = {
    "list": lambda x, a: x * tg.tensor([a, 2.0]).sum(),
    "scalar": lambda x, a: x * tg.tensor(a),
    "float64": lambda x, a: x * tg.tensor([a, a * 3], dtype=tg.float64),
    "float16": lambda x, a: x * tg.tensor([a, 1.0 / 3], dtype=tg.float16).float(),
    "nested": lambda x, a: tg.tensor([[a], [1.0 / 3]]) + x,
    "int_dtype": lambda x, a: x * tg.tensor([a, 2.7], dtype=tg.int64),
}


@pytest.mark.parametrize("name", sorted(_TENSOR_OF_FLOATS))
def test_tensor_of_a_float_argument_is_read_per_call(name):
    f = _same(_TENSOR_OF_FLOATS[name], lambda i: (_r(0, 2), 0.1 * (i + 1) + 1e-9 * i),
              calls=5)
    if name != "int_dtype":              # an integer copy takes the exact value: by value
        assert f.stats.traces == 2


_FULL_OF_FLOATS = {
    "full": lambda x, a: x + tg.full((2,), a),
    "full_2d_view": lambda x, a: (tg.full((3, 2), a) * x).view(6),
    "full_like": lambda x, a: tg.full_like(x, a),
    "full_like_half": lambda x, a: tg.full_like(x, a, dtype=tg.float16),
    "new_full": lambda x, a: x.new_full((2,), a),
    "empty": lambda x, a: tg.full((0, 2), a),
    "in_place_after": lambda x, a: tg.full((2,), a).add_(x),
}


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("name", sorted(_FULL_OF_FLOATS))
def test_full_of_a_float_argument_is_read_per_call(name, backend):
    if backend == "jax":
        pytest.importorskip("jax")
    f = _same(_FULL_OF_FLOATS[name], lambda i: (_r(0, 2), 0.1 * (i + 1) + 1e-9 * i),
              calls=4, backend=backend)
    assert f.stats.traces == 2
