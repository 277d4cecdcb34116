"""Python ints that change per call do not re-trace where they are only arithmetic (Note
[Integers read per call] in tracing/integers.py): an integer tensor's `.item()` (a count of
correct predictions, returned or accumulated) and an int argument (an epoch, a diffusion
step) are int64 runtime values, exact as Python's ints, of type `int` when returned; any
use that needs the concrete int (range, indexing, formatting, shapes) guards its value and
stays correct. Compiled results are compared with eager ones over calls with changing
values, on the numpy and the jax backends."""
import contextlib
import io
import math
import operator
import random
import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn.functional as F
from tracegrad import nn

BACKENDS = ["numpy", "jax"]
RNG = np.random.default_rng(11)


def _backend(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    return backend


def _same(got, ref, exact_tensors=True):
    """Equal values of equal types, Python scalars to the bit; tensors bit-equal (numpy) or
    close (jax, whose transcendental kernels are not numpy's)."""
    if isinstance(ref, tg.Tensor):
        assert isinstance(got, tg.Tensor) and got.dtype == ref.dtype and got.shape == ref.shape
        assert got.requires_grad == ref.requires_grad
        if exact_tensors:
            assert got.detach().numpy().tobytes() == ref.detach().numpy().tobytes(), (got, ref)
        else:
            np.testing.assert_allclose(got.detach().numpy(), ref.detach().numpy(), rtol=1e-6,
                                       atol=1e-7)
        return
    assert type(got) is type(ref), (got, ref)
    if isinstance(ref, dict):
        assert list(got) == list(ref)
        for k in ref:
            _same(got[k], ref[k], exact_tensors)
    elif isinstance(ref, (tuple, list)):
        assert len(got) == len(ref)
        for a, b in zip(got, ref):
            _same(a, b, exact_tensors)
    elif isinstance(ref, float):
        assert np.float64(got).tobytes() == np.float64(ref).tobytes(), (got, ref)
    else:
        assert got == ref, (got, ref)


def _run(fn, calls, backend="numpy", **options):
    """The compiled `fn` after comparing it with eager `fn` on every call of `calls`
    ([(args, kwargs)])."""
    f = tg.compile(fn, backend=backend, **options)
    for args, kwargs in calls:
        _same(f(*args, **kwargs), fn(*args, **kwargs), exact_tensors=backend == "numpy")
    return f


def _batch(rows=8):
    return (tg.tensor(RNG.standard_normal((rows, 3)).astype(np.float32)),
            tg.tensor(RNG.integers(0, 3, rows)))


def _counts_differ(calls, fn):
    assert len({repr(fn(*a, **k)) for a, k in calls}) >= 3   # the test sees new values


# -- integer .item() -----------------------------------------------------------------

def _correct(x, y):
    return (x.argmax(1) == y).sum().item()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_returned_count_is_an_int_and_traces_once(backend):
    calls = [(_batch(), {}) for _ in range(8)]
    _counts_differ(calls, _correct)
    f = _run(_correct, calls, _backend(backend))
    assert f.stats.traces == 1 and f.stats.cache_hits == 7 and f.stats.eager_calls == 0
    assert all(type(f(*a)) is int for a, _ in calls)


def _metrics(x, y):
    n = _correct(x, y)
    return {"correct": n, "acc": n / len(y), "wrong": len(y) - n, "pair": (n, n * 100 // 3),
            "pct": 100.0 * n / y.shape[0], "half": n // 2, "odd": n % 2, "sq": n ** 2,
            "neg": -n, "abs": abs(n - 4), "two": 2 ** n}


@pytest.mark.parametrize("backend", BACKENDS)
def test_counts_in_containers_with_int_arithmetic_are_exact(backend):
    calls = [(_batch(), {}) for _ in range(8)]
    f = _run(_metrics, calls, _backend(backend))
    assert f.stats.traces == 1 and f.stats.eager_calls == 0


def _accumulate(x, y):
    n = 0
    for k in range(4):
        n += _correct(x[2 * k:2 * k + 2], y[2 * k:2 * k + 2])
    return n, n * 1.0, float(n) if n > 100 else n


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_accumulated_count_is_returned_per_call(backend):
    calls = [(_batch(), {}) for _ in range(6)]
    f = _run(_accumulate, calls, _backend(backend))
    assert f.stats.traces == 1


def _train_setup():
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 3))
    return model, tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def _step(model, opt, x, y):
    opt.zero_grad()
    out = model(x)
    loss = F.cross_entropy(out, y)
    loss.backward()
    opt.step()
    correct = (out.argmax(1) == y).sum().item()
    return {"loss": loss.item(), "correct": correct, "acc": correct / x.shape[0]}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_training_step_returning_loss_and_correct_count(backend):
    batches = [_batch() for _ in range(8)]
    model, opt = _train_setup()
    eager = [_step(model, opt, x, y) for x, y in batches]
    eager_params = [p.detach().numpy().copy() for p in model.parameters()]
    model, opt = _train_setup()
    f = tg.compile(lambda x, y: _step(model, opt, x, y), backend=_backend(backend))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [f(x, y) for x, y in batches]
    assert len({g["correct"] for g in got}) >= 3
    assert [type(g["correct"]) for g in got] == [int] * len(got)
    if backend == "numpy":
        _same(got, eager)
        for p, e in zip(model.parameters(), eager_params):
            assert p.detach().numpy().tobytes() == e.tobytes()
    else:
        assert [g["correct"] for g in got] == [e["correct"] for e in eager]
        np.testing.assert_allclose([g["loss"] for g in got], [e["loss"] for e in eager],
                                   rtol=1e-5)
    # the first call finds no .grad, the second finds them set: two paths, none per count
    assert f.stats.traces <= 2 and f.stats.eager_calls == 0


def test_an_eval_loop_stays_compiled_past_the_cache_limit():
    model, _ = _train_setup()

    @tg.compile(cache_limit=2)
    def evaluate(x, y):
        with tg.no_grad():
            return (model(x).argmax(1) == y).sum().item()
    total = ref = 0
    for _ in range(12):
        x, y = _batch()
        total += evaluate(x, y)
        with tg.no_grad():
            ref += (model(x).argmax(1) == y).sum().item()
    assert total == ref and type(total) is int
    assert evaluate.stats.traces == 1 and evaluate.stats.eager_calls == 0


def _concrete_uses(x, y):
    n = _correct(x, y)
    letters = "abcdefghijk"
    return ([i * i for i in range(n)], letters[n], x[n % 8], f"{n:03d}", "%d|%x" % (n, n),
            bytes(n % 3), [0] * n, math.factorial(n % 6), operator.index(n), str(n), repr(n),
            np.zeros(n).shape, hash(n) == hash(int(n)), n in {1, 2, 3},
            divmod(n, 3), round(n), int(n), float(n), n.bit_length(), max(n, 4), min(1, n))


@pytest.mark.parametrize("backend", BACKENDS)
def test_uses_needing_the_concrete_int_guard_its_value_and_stay_correct(backend):
    calls = [(_batch(), {}) for _ in range(8)]
    f = _run(_concrete_uses, calls, _backend(backend), cache_limit=20)
    assert f.stats.eager_calls == 0
    assert all(any(g.kind == "int" for g in p.guards) for p in f.programs)


@pytest.mark.filterwarnings("ignore:tracegrad.compile")
def test_a_count_as_a_returned_dict_key_is_the_plain_int():
    def fn(x, y):
        return {_correct(x, y): "n"}
    calls = [(_batch(), {}) for _ in range(6)]
    f = _run(fn, calls)
    assert all(type(k) is int for a, _ in calls for k in f(*a))


def _branches(x, y):
    n = _correct(x, y)
    if n > 3:
        return n, "many"
    return -n, bool(n), not n


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_if_on_a_count_gives_a_path_per_outcome(backend):
    calls = [(_batch(), {}) for _ in range(12)]
    f = _run(_branches, calls, _backend(backend))
    assert len({_branches(*a)[1] == "many" for a, _ in calls}) == 2      # both taken
    assert f.stats.traces <= 4                                           # n == 0 too


def _bools(x, y):
    b = (x > 1.5).any().item()
    return b, not b, int(b) + 1


def test_bool_items_stay_guards_on_their_two_values():
    calls = [(_batch(), {}) for _ in range(8)]
    f = _run(_bools, calls)
    assert f.stats.traces <= 2
    assert all(type(f(*a)[0]) is bool for a, _ in calls)


def _meets_tensors(x, y):
    n = _correct(x, y)
    return (x * n, x / (n + 1), y + n, y * n, (y > 0) * n, n - y, y.to(tg.int32) + n,
            tg.tensor(n), tg.tensor([n, n + 1]), tg.full((2,), n), tg.arange(3) + n)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_int_meeting_tensors_is_cast_as_eager_casts_it(backend):
    calls = [(_batch(), {}) for _ in range(6)]
    f = _run(_meets_tensors, calls, _backend(backend))
    assert f.stats.traces == 1


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_an_int_too_large_for_the_tensors_dtype_takes_its_value():
    """Eager casts the Python int to the tensor's dtype through float64 (2**60 + 2**36 + 1
    rounds twice, to 2**60 in float32); the int64 value cast directly would round once."""
    @tg.compile
    def f(x, h, big):
        n = big.sum().item()
        return x * n, h * n, n

    x, h = tg.ones(2), tg.ones(2, dtype=tg.float16)
    for v in (3, 2 ** 60 + 2 ** 36 + 1, 5, 70000, 2 ** 24 + 1, 7):
        big = tg.tensor([v])
        _same(f(x, h, big), f.fn(x, h, big))


def test_int_tensor_dtypes_give_ints_of_the_same_value():
    @tg.compile
    def f(x):
        return x[0].item(), x[1].item() * 3 - 1, x.sum().item()

    for dt in (tg.int32, tg.int64, tg.uint8):
        for k in range(4):
            x = tg.tensor([k, 2 * k + 1], dtype=dt)
            _same(f(x), f.fn(x))


def _arith(a, b, c):
    return (a + b, a - b, a * b, a // b if b else None, a % b if b else None,
            a / b if b else None, a ** 2, a * c, c - a, a * b * c, (a + 1) * 0.5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int64_extremes_give_pythons_exact_results(backend):
    """Past int64 (and past 2**53 for conversions to float), the trace takes the exact
    values: results are Python's big ints and correctly rounded floats."""
    def fn(x):
        a, b, c = (x[i].item() for i in range(3))
        return _arith(a, b, c)

    values = [(3, 4, 5), (2 ** 62, 2 ** 62, 2), (2 ** 63 - 1, -1, 2 ** 40), (-2 ** 63, -1, 3),
              (2 ** 53 + 1, 3, 7), (7, -2, -3), (0, 5, 0), (-7, 2, 2 ** 31)]
    calls = [((tg.tensor(np.array(v, dtype=np.int64)),), {}) for v in values]
    _run(fn, calls, _backend(backend))


@pytest.mark.parametrize("op", ["//", "%", "/"])
def test_division_by_a_zero_count_raises_pythons_error(op):
    ns = {"_correct": _correct}
    exec(f"def fn(x, y):\n    return 10 {op} _correct(x, y)\n", ns)
    fn = ns["fn"]
    f = tg.compile(fn)
    x = tg.tensor([[1.0, 0.0], [0.0, 1.0]])
    for y in ([0, 1], [1, 0], [1, 1], [0, 0], [1, 0]):
        y = tg.tensor(y)
        if _correct(x, y) == 0:
            with pytest.raises(ZeroDivisionError) as ref:
                fn(x, y)
            with pytest.raises(ZeroDivisionError, match=f"^{ref.value}$"):
                f(x, y)
        else:
            _same(f(x, y), fn(x, y))


def _random_expression(rnd, depth):
    if depth == 0 or rnd.random() < 0.3:
        r = rnd.random()
        return (f"a[{rnd.randrange(3)}]" if r < 0.55 else
                repr(rnd.choice([0, 1, 2, -3, 7, 2 ** 40, 2 ** 62])) if r < 0.85 else
                repr(rnd.choice([0.5, -2.0, 1e300])))
    op = rnd.choice(["+", "-", "*", "//", "%", "/", "**"])
    if op == "**":
        return f"({_random_expression(rnd, depth - 1)}) ** {rnd.choice([0, 1, 2, 3, 5])}"
    return f"({_random_expression(rnd, depth - 1)} {op} {_random_expression(rnd, depth - 1)})"


def test_random_int_expressions_match_python():
    rnd = random.Random(3)
    values = [0, 1, -1, 2, 3, -7, 10 ** 6, 2 ** 31, 2 ** 53 + 1, 2 ** 62, 2 ** 63 - 1, -2 ** 63]

    def outcome(fn, x):
        try:
            return ("ok", fn(x))
        except (ZeroDivisionError, OverflowError) as e:
            return ("error", type(e))
    for _ in range(25):
        ns = {}
        exec(f"def fn(x):\n    a = [x[0].item(), x[1].item(), x[2].item()]\n"
             f"    return {_random_expression(rnd, 3)}\n", ns)
        f = tg.compile(ns["fn"], cache_limit=50)
        for _ in range(5):
            x = tg.tensor(np.array([rnd.choice(values) for _ in range(3)], dtype=np.int64))
            got, ref = outcome(f, x), outcome(ns["fn"], x)
            assert got[0] == ref[0] and type(got[1]) is type(ref[1]), (got, ref)
            if got[0] == "ok" and not (ref[1] != ref[1]):
                _same(got[1], ref[1])


@pytest.mark.filterwarnings("ignore:tracegrad.compile")
def test_a_count_stored_outside_is_the_plain_int():
    seen = []

    @tg.compile
    def f(x, y):
        n = _correct(x, y)
        seen.append((n, n + 1))
        return n

    ref = []
    for _ in range(5):
        x, y = _batch()
        assert f(x, y) == _correct(x, y)
        ref.append((_correct(x, y), _correct(x, y) + 1))
    assert seen == ref
    assert all(type(a) is int and type(b) is int for a, b in seen)


def _by_type(v):
    return v if type(v) is int else -1


def test_code_naming_type_keeps_int_items_as_guards():
    def fn(x, y):
        return _by_type(_correct(x, y))

    calls = [(_batch(), {}) for _ in range(6)]
    f = _run(fn, calls)
    assert f.stats.eager_calls == 0
    assert f.stats.traces == len({fn(*a) for a, _ in calls})


# -- int arguments -------------------------------------------------------------------

def _diffusion(x, t, T=1000):
    alpha = 1 - t / T
    return x * alpha + (1 - alpha) * x.sin(), alpha, t + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_int_argument_used_arithmetically_is_read_per_call(backend):
    x = tg.tensor(np.linspace(-1, 1, 6).astype(np.float32))
    calls = [((x, t), {}) for t in (0, 5, 17, 999, 3, 1000, -4, 123)]
    f = _run(_diffusion, calls, _backend(backend))
    # the first value, then the change that makes `t` dynamic: two traces for 8 values
    assert f.stats.traces == 2 and f.stats.eager_calls == 0
    assert "int argument 't' changed value" in f.stats.retraces[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_arguments_by_keyword_and_default(backend):
    x = tg.tensor(np.linspace(-1, 1, 4).astype(np.float32))
    calls = [((x,), {"t": t, "T": 50}) for t in (1, 2, 30, 49)] + \
        [((x,), {"t": t}) for t in (7, 8, 9)]
    f = _run(_diffusion, calls, _backend(backend))
    assert f.stats.traces <= 4 and f.stats.eager_calls == 0


def _schedule(x, epoch, lr):
    scale = lr * (epoch + 1) / (epoch + 2)
    return x * scale, epoch // 3 + epoch % 3, scale, epoch * lr, epoch / lr, epoch + lr


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_and_float_arguments_mix_as_python_mixes_them(backend):
    x = tg.tensor([0.5, -1.0, 2.0])
    calls = [((x, e, lr), {}) for e, lr in [(0, 0.1), (1, 0.05), (2, 0.3), (7, 1.5), (9, 3.0),
                                            (10, 0.001)]]
    f = _run(_schedule, calls, _backend(backend))
    assert f.stats.traces == 2


def _uses_value(x, n):
    return sum(x[i] for i in range(n)), x.reshape(n, -1) if 6 % n == 0 else None, f"{n}"


def test_an_int_argument_used_as_a_range_or_shape_keeps_a_path_per_value():
    x = tg.arange(6.0)
    calls = [((x, n), {}) for n in (1, 2, 3, 2, 1, 3, 6)]
    f = _run(_uses_value, calls)
    # 1; 2 (read per call, found used by value: keyed by value again); 3; 6. The repeats hit
    assert f.stats.traces == 4 and f.stats.cache_hits == 3


def test_a_huge_or_bool_argument_is_keyed_by_value():
    @tg.compile
    def f(x, n):
        return x * 2, n + 1

    x = tg.ones(2)
    for n in (2 ** 70, 2 ** 71, True, False, 3, 4, 2 ** 70):
        _same(f(x, n), f.fn(x, n))


def test_an_int_argument_overflowing_int64_arithmetic_is_exact():
    @tg.compile
    def f(x, n):
        return n * n * n, x * (n % 7)

    x = tg.ones(2)
    for n in (1, 2, 5, 2 ** 40, -2 ** 61, 2 ** 62, 9):
        _same(f(x, n), f.fn(x, n))


def test_explain_names_the_int_read_per_call():
    f = tg.compile(_diffusion)
    x = tg.ones(3)
    for t in (1, 2, 3):
        f(x, t)
    text = f.explain()
    assert "argument 't'" in text


def test_check_mode_accepts_returned_ints():
    calls = [(_batch(), {}) for _ in range(4)]
    f = tg.compile(_metrics, check=True)
    with contextlib.redirect_stdout(io.StringIO()):
        for a, _ in calls:
            _same(f(*a), _metrics(*a))


# -- numbers as operands of primitives -----------------------------------------------

def _wheres(x, a, n):
    c = x > 0
    return (tg.where(c, x, a), tg.where(c, a, x), tg.where(c, a, 0.0),
            tg.where(c, x.to(tg.float16), a), tg.where(c, n, x), tg.where(c, x.long(), n),
            tg.where(c, n, -1), tg.where(c, x.double(), a * n))


@pytest.mark.parametrize("backend", BACKENDS)
def test_where_reads_float_and_int_arguments_per_call(backend):
    x = tg.tensor([0.5, -1.0, 2.0])
    values = [(0.1, 1), (0.3, 2), (1e-8, 3), (-2.5, 4), (0.7, -5), (1 / 3, 7)]
    f = _run(_wheres, [((x, a, n), {}) for a, n in values], _backend(backend))
    assert f.stats.traces == 2 and f.stats.eager_calls == 0
    # an int whose float32 cast would round (past 2**24) takes its value, still exactly
    _same(f(x, 0.5, 2 ** 24 + 1), _wheres(x, 0.5, 2 ** 24 + 1),
          exact_tensors=backend == "numpy")


def test_where_with_a_runtime_number_differentiates_as_eager():
    def h(x, a):
        y = tg.where(x > 0, x * x, a).sum()
        y.backward()
        return y

    f = tg.compile(h)
    for a in (0.1, 0.2, 0.3, 0.4):
        x1 = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
        x2 = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
        _same(f(x1, a), h(x2, a))
        _same(x1.grad, x2.grad)
    assert f.stats.traces == 2


def _attribute_numbers(x, p, lo):
    return x.clamp(min=lo), x.abs() ** p, tg.pow(x.abs(), p)


def test_numbers_as_primitive_attributes_keep_a_path_per_value():
    """Known limit (Note [Integers read per call]): `clamp` bounds and `**` exponents are
    attributes or need C's `pow` (numpy's differs in the last bit); their values are
    guarded, and results stay eager's."""
    x = tg.tensor([0.5, -1.0, 2.0])
    calls = [((x, p, lo), {}) for p, lo in [(2.5, 0.1), (1.5, 0.2), (0.5, -0.3), (3, 0)]]
    f = _run(_attribute_numbers, calls)
    assert f.stats.eager_calls == 0 and f.stats.traces == 4


_SHAPE_OPS = {
    "view": lambda x, n: x.view(n, -1), "zeros": lambda x, n: tg.zeros(n, 2),
    "narrow": lambda x, n: x.narrow(1, 0, n), "slice": lambda x, n: x[:n],
    "split": lambda x, n: x.split(n), "chunk": lambda x, n: x.chunk(n),
    "pad": lambda x, n: F.pad(x, (n, n)), "repeat": lambda x, n: x.repeat(n, 1),
    "arange": lambda x, n: tg.arange(0, n * 2, 2), "topk": lambda x, n: x.flatten().topk(n),
    "one_hot": lambda x, n: F.one_hot(tg.tensor([0, 1]), num_classes=n + 2),
    "sum_dim": lambda x, n: x.sum(dim=n % 2), "clamp": lambda x, n: x.clamp(min=n - 3),
    "mixed_tensor": lambda x, n: tg.tensor([n, 0.5]), "new_full": lambda x, n: x.new_full((2,), n),
}


@pytest.mark.parametrize("name", sorted(_SHAPE_OPS))
def test_ints_as_sizes_dims_and_bounds_of_ops_take_their_values(name):
    """Sizes, dims, paddings and bounds reach a primitive's attributes (at any depth of
    tuples and slices): the exact value, guarded, never a stand-in left in the program."""
    op = _SHAPE_OPS[name]

    def fn(x, c):
        return op(x, c.sum().item())

    f = tg.compile(fn, cache_limit=10)
    x = tg.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) + 1)
    for k in (1, 2, 3, 2, 1):
        c = tg.tensor([k])
        _same(f(x, c), fn(x, c))
    assert f.stats.eager_calls == 0 and f.stats.traces <= 3


@pytest.mark.filterwarnings("ignore:tracegrad.compile")
def test_an_int_argument_stored_on_an_object_is_the_plain_int():
    class Log:
        last = None
    log = Log()

    @tg.compile
    def f(x, t, T=100):
        log.last = t
        return x * (1 - t / T), t * 3

    x = tg.ones(2)
    for t in (1, 2, 3, 4, 3):
        _same(f(x, t), (x * (1 - t / 100), t * 3))
        assert log.last == t and type(log.last) is int


def test_threads_read_their_own_int_arguments():
    import threading

    @tg.compile
    def f(x, t, T=100):
        return x * (1 - t / T), t * 3

    x = tg.ones(2)
    f(x, 1)
    f(x, 2)
    errors = []

    def work(seed):
        rnd = random.Random(seed)
        for _ in range(100):
            t = rnd.randrange(1000)
            a, b = f(x, t)
            if b != 3 * t or a.tolist() != (x * (1 - t / 100)).tolist():
                errors.append(t)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == [] and f.stats.traces == 2
