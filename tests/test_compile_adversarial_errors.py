"""Adversarial review of errors in compiled code: bad input raises the exception class PyTorch
raises, names the op and the user's line, leaves eager's state, and the next call works.

Each program runs eagerly and compiled over several calls (the first traces, later ones take
the cached path, a changed shape or dtype re-traces); some calls fail. Compared per call: the
error's type and message, the result, the program's state (parameters, `.grad`s, optimizer
state, buffers, the generator) and the global modes (grad mode, default dtype, anomaly mode).
Error types are also checked against PyTorch where torch is installed.
"""
import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F

BACKENDS = ["numpy", "jax"]
HERE = __file__.rsplit("/", 1)[-1]


def _backend(name):
    if name == "jax":
        pytest.importorskip("jax")
    return name


def _value(v):
    """A comparable snapshot of a result or state entry (tensors as arrays with flags)."""
    if isinstance(v, tg.Tensor):
        return ("T", v.detach().numpy().copy(), v.requires_grad, v.dtype,
                _value(v.grad) if v.is_leaf else None)
    if isinstance(v, (list, tuple)):
        return [_value(a) for a in v]
    if isinstance(v, dict):
        return {k: _value(a) for k, a in v.items()}
    return v


def _same(a, b, backend, where):
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, where
        if backend == "numpy":
            np.testing.assert_array_equal(a, b, err_msg=where)
        else:
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6, err_msg=where)
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for x, y in zip(a, b):
            _same(x, y, backend, where)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], backend, where)
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _modes():
    return (tg.is_grad_enabled(), tg.get_default_dtype(), tg.is_anomaly_enabled())


def _runs(make, calls, backend):
    """Run `make()`'s program on fresh state eagerly and compiled over `calls` (argument
    makers); every call's error (type, message), result, `state()` and global modes must
    be eager's. Returns the compiled function and eager's errors."""
    seen = {}
    for compiled in (False, True):
        tg.manual_seed(0)
        fn, state = make()
        if compiled:
            fn = tg.compile(fn, backend=backend)
        rows = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # no eager fallback for good
            for args in calls:
                try:
                    out, err = _value(fn(*args())), None
                except Exception as e:           # noqa: BLE001 - the error is the outcome
                    out, err = None, (type(e), str(e))
                rows.append((out, err, _value(state()), _modes(), _value(tg.rand(1))))
        seen[compiled] = (rows, fn)
    for k, (e, c) in enumerate(zip(seen[False][0], seen[True][0])):
        assert e[1] == c[1], f"call {k}: eager {e[1]} != compiled {c[1]}"
        for what, a, b in zip(("result", "error", "state", "modes", "generator"), e, c):
            _same(a, b, backend, f"call {k} {what}")
    return seen[True][1], [row[1] for row in seen[False][0]]


def _torch_raises(call):
    """The exception class torch raises for `call(torch)`."""
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as ei:
        call(torch)
    return ei.type


# ---------------- exception classes PyTorch raises ----------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_index_select_out_of_range_along_dim_0_is_an_index_error(backend):
    """PyTorch's index_select raises IndexError ("index out of range in self") along dim 0,
    so `except IndexError` around a table lookup works; eager and compiled alike, on the
    cached path, and the next call is fine."""
    backend = _backend(backend)
    x = tg.arange(12.0).reshape(4, 3)

    def make():
        def f(x, i):
            try:
                return x.index_select(0, i).sum()
            except IndexError:
                return x.sum() * 0
        return f, lambda: []
    ok, bad, neg = ((lambda k: (lambda: (x, tg.tensor(k))))(k)
                    for k in ([0, 3], [0, 4], [-1, 1]))
    cf, _ = _runs(make, [ok, ok, bad, neg, ok], backend)
    assert cf.stats.traces == 1                  # the except branch re-ran eagerly
    with pytest.raises(IndexError, match=r"index_select: index out of range in self \(index 4"
                                         r" is out of bounds for dimension 0 with size 4\)"):
        tg.compile(lambda x, i: x.index_select(0, i), backend=backend)(x, tg.tensor([4]))
    assert _torch_raises(lambda t: t.zeros(4, 3).index_select(0, t.tensor([4]))) is IndexError


def test_index_select_along_other_dims_stays_a_runtime_error_as_pytorchs():
    x = tg.zeros(4, 3)
    with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 1"):
        x.index_select(1, tg.tensor([3]))
    assert _torch_raises(lambda t: t.zeros(4, 3).index_select(1, t.tensor([3]))) is RuntimeError


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_out_of_range_says_dimension_as_pytorch_does(backend):
    """numpy says "axis"; PyTorch's message (and ours) "dimension", eager and compiled."""
    backend = _backend(backend)
    x = tg.ones(4, 2)

    def f(x, i):
        return x[i] * 2
    cf = tg.compile(f, backend=backend)
    cf(x, tg.tensor([0, 3]))
    for fn in (f, cf):
        with pytest.raises(IndexError) as ei:
            fn(x, tg.tensor([0, 4]))
        assert str(ei.value).startswith("index: index 4 is out of bounds for dimension 0 with "
                                        "size 4")
        assert f"{HERE}:{f.__code__.co_firstlineno + 1} in f" in str(ei.value)
    torch = pytest.importorskip("torch")
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 4"):
        torch.ones(4, 2)[torch.tensor([0, 4])]


# ---------------- calls PyTorch refuses that used to succeed silently ----------------
REFUSED = [
    ("narrow past the end", lambda t: t.ones(4).narrow(0, 2, 3), RuntimeError,
     "start (2) + length (3) exceeds dimension size (4)."),
    ("narrow from a negative start past the end", lambda t: t.ones(4).narrow(0, -1, 2),
     RuntimeError, "start (3) + length (2) exceeds dimension size (4)."),
    ("narrow start out of range", lambda t: t.ones(4).narrow(0, -5, 1), IndexError,
     "start out of range (expected to be in range of [-4, 4], but got -5)"),
    ("narrow negative length", lambda t: t.ones(4).narrow(0, 0, -1), RuntimeError,
     "narrow(): length must be non-negative."),
    ("arange against its step", lambda t: t.arange(5, 0, 1), RuntimeError,
     "upper bound and lower bound inconsistent with step sign"),
    ("arange to a negative end", lambda t: t.arange(-3), RuntimeError,
     "upper bound and lower bound inconsistent with step sign"),
    ("outer of a matrix", lambda t: t.outer(t.ones(2, 2), t.ones(2)), RuntimeError,
     "outer: Expected 1-D argument self, but got 2-D"),
    ("outer with a matrix", lambda t: t.outer(t.ones(2), t.ones(2, 2)), RuntimeError,
     "outer: Expected 1-D argument vec2, but got 2-D"),
    ("normal with a negative std", lambda t: t.normal(t.zeros(2), -0.5), RuntimeError,
     "normal expects std >= 0.0, but found std -0.5"),
    ("einsum with too few operands", lambda t: t.einsum("ij,jk", t.ones(2, 3)), RuntimeError,
     "einsum(): fewer operands were provided than specified in the equation"),
    ("einsum with too many operands",
     lambda t: t.einsum("ij,jk->ik", t.ones(2, 3), t.ones(3, 2), t.ones(2)), ValueError,
     "Number of einsum subscripts, 2, must be equal to the number of operands, 3."),
    ("embedding with a 1-D weight",
     lambda t: t.nn.functional.embedding(t.tensor([0]), t.ones(3)), RuntimeError,
     "'weight' must be 2-D"),
    ("a str index", lambda t: t.ones(3)["a"], TypeError, "invalid data type 'str'"),
    ("a list of str index", lambda t: t.ones(3)[["a"]], TypeError, "invalid data type 'str'"),
    ("a float size", lambda t: t.zeros(2.0), TypeError, "size"),
    ("a float in a size", lambda t: t.ones((2, 2.5)), TypeError, "size"),
    ("a float size to randn", lambda t: t.randn(2.5), TypeError, "size"),
    ("masked_select with a mask that does not broadcast",
     lambda t: t.ones(3).masked_select(t.ones(2, dtype=t.bool)), RuntimeError,
     "must match the size of tensor b"),
    ("cosine_similarity of shapes that do not broadcast",
     lambda t: t.nn.functional.cosine_similarity(t.ones(2, 3), t.ones(2, 4)), RuntimeError,
     "The size of tensor a (3) must match the size of tensor b (4) at non-singleton "
     "dimension 1"),
    ("div with an unknown rounding_mode", lambda t: t.ones(2).div(2, rounding_mode="bad"),
     RuntimeError, "div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
     "found 'bad'"),
]


@pytest.mark.parametrize("call, cls, msg", [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])
@pytest.mark.parametrize("backend", ["eager"] + BACKENDS)
def test_calls_pytorch_refuses_raise_its_error_eager_and_compiled(call, cls, msg, backend):
    """These returned a short, empty or flattened result instead of raising; compiled (the
    error at trace time) as eager, naming the op and the user's line, and the compiled
    function still works for good input."""
    fn = lambda: call(tg)                    # noqa: E731 - the user's line
    if backend != "eager":
        fn = tg.compile(fn, backend=_backend(backend))
    with pytest.raises(cls) as ei:
        fn()
    text = str(ei.value)
    assert msg in text and f"(at {__file__}:" in text
    assert text.split(":")[0] in {"narrow", "arange", "outer", "normal", "einsum", "embedding",
                                  "index", "zeros", "broadcast_tensors", "div"}


@pytest.mark.parametrize("call, cls, msg", [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])
def test_pytorch_raises_the_same_for_the_refused_calls(call, cls, msg):
    torch = pytest.importorskip("torch")
    with pytest.raises(cls) as ei, warnings.catch_warnings():
        warnings.simplefilter("ignore")          # torch's note on non-tuple index sequences
        call(torch)
    assert msg in str(ei.value)


def test_the_refused_calls_still_accept_their_edge_cases():
    assert tg.ones(4).narrow(0, 4, 0).shape == (0,)
    assert tg.ones(4).narrow(0, -4, 4).shape == (4,)
    assert tg.ones(4).narrow(-1, -2, 2).shape == (2,)
    assert tg.arange(0, 0, -1).shape == (0,)
    assert tg.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert tg.normal(0.0, 0.0, (2,)).tolist() == [0.0, 0.0]
    assert tg.outer(tg.ones(2), tg.ones(3)).shape == (2, 3)
    assert tg.zeros(np.int64(2), tg.tensor(3)).shape == (2, 3)
    assert tg.zeros(tg.tensor(2)).shape == (2,)                  # a 0-d size, as PyTorch
    assert tg.ones(tg.Size([2, 3])).shape == (2, 3)


# ---------------- failures on the cached path leave eager's state ----------------
def _on_values(op):
    """A program that updates a buffer in place, then runs `op` on its second argument."""
    def make():
        buf = tg.zeros(2)

        def f(x, v):
            with tg.no_grad():
                buf.add_(x)
            return op(v)
        return f, lambda: [buf]
    return make


_V = tg.tensor
ON_VALUES = [
    ("one_hot past num_classes", lambda v: F.one_hot(v, 4).float(),
     _V([1, 3]), _V([1, 4]), RuntimeError),
    ("one_hot negative", lambda v: F.one_hot(v, 4).float(), _V([1, 3]), _V([-1, 0]),
     RuntimeError),
    ("bincount negative", lambda v: tg.bincount(v, minlength=3), _V([0, 2]), _V([-1, 2]),
     RuntimeError),
    ("cholesky of a matrix not positive-definite", tg.linalg.cholesky, tg.eye(2),
     -tg.eye(2), RuntimeError),
    ("integer to a negative Python power", lambda v: v ** -1 if v.sum() > 3 else v,
     _V([1, 2]), _V([-1, 5]), RuntimeError),
    ("a mask's count reshaped", lambda v: v[v > 0].reshape(2, -1), _V([1., 2, 4, 3]),
     _V([1., 2, -1, 3]), RuntimeError),
    ("Categorical probs off the simplex",
     lambda v: tg.distributions.Categorical(probs=v).log_prob(_V(0)), _V([0.5, 0.5]),
     _V([-0.5, 1.5]), ValueError),
    ("index_select past the end", lambda v: tg.ones(3).index_select(0, v), _V([0, 2]),
     _V([0, 3]), IndexError),
]


@pytest.mark.parametrize("op, good, bad, cls", [r[1:] for r in ON_VALUES],
                         ids=[r[0] for r in ON_VALUES])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_op_failing_on_values_of_a_cached_call_leaves_eagers_state(op, good, bad, cls,
                                                                       backend):
    backend = _backend(backend)
    x = tg.ones(2)
    cf, errors = _runs(_on_values(op), [lambda: (x, good), lambda: (x, good),
                                        lambda: (x, bad), lambda: (x, good)], backend)
    assert errors[:2] == [None, None] and errors[3] is None
    assert issubclass(errors[2][0], cls)


def test_the_on_values_failures_are_pytorchs_classes():
    torch = pytest.importorskip("torch")
    T = torch.tensor
    cases = [(lambda: torch.nn.functional.one_hot(T([1, 4]), 4), RuntimeError),
             (lambda: torch.bincount(T([-1, 2])), RuntimeError),
             (lambda: torch.linalg.cholesky(-torch.eye(2)), RuntimeError),
             (lambda: T([-1, 5]) ** -1, RuntimeError),
             (lambda: T([1., 2, 4, 3])[T([1., 2, 4, 3]) > 0].reshape(2, -1), None),
             (lambda: torch.distributions.Categorical(probs=T([-0.5, 1.5])), ValueError)]
    for call, cls in cases:
        if cls is None:
            call()
        else:
            with pytest.raises(cls):
                call()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nonfinite_norm_error_after_backward_leaves_the_grads_and_no_update(backend):
    """clip_grad_norm_(error_if_nonfinite=True) raises between backward and step: eager has
    the new `.grad`s and no update; the next finite step goes on from there."""
    backend = _backend(backend)

    def make():
        w, b = tg.ones(3, requires_grad=True), tg.zeros(1, requires_grad=True)
        opt = tg.optim.SGD([w, b], lr=0.1, momentum=0.9)

        def step(x):
            opt.zero_grad()
            ((w * x).sum() + b).sum().backward()
            n = nn.utils.clip_grad_norm_([w, b], 1.0, error_if_nonfinite=True)
            opt.step()
            return n
        return step, lambda: [w, b, opt.state[w]]
    ok = lambda: (tg.ones(3),)                                     # noqa: E731
    _, errors = _runs(make, [ok, ok, lambda: (tg.full((3,), float("inf")),), ok], backend)
    assert errors[2][0] is not None and "non-finite" in errors[2][1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_user_raise_after_a_mode_switch_leaves_the_mode_as_eager_does(backend):
    """`set_grad_enabled(False)` / `set_default_dtype` called (not as a context) before a
    user `raise`: eager leaves the mode switched; so must the compiled call, and the next
    call (which switches back) works."""
    backend = _backend(backend)

    def make():
        def f(x):
            tg.set_grad_enabled(False)
            tg.set_default_dtype(tg.float64)
            y = x + tg.ones(3)
            if y.sum() > 10:
                raise ValueError(f"too big: {y.sum().item()}")
            tg.set_default_dtype(tg.float32)
            tg.set_grad_enabled(True)
            return y
        return f, lambda: []
    small, big = (lambda: (tg.ones(3),)), (lambda: (tg.full((3,), 5.0),))
    try:
        _, errors = _runs(make, [small, small, big, small], backend)
    finally:
        tg.set_grad_enabled(True)
        tg.set_default_dtype(tg.float32)
    assert errors[2] == (ValueError, "too big: 18.0")


@pytest.mark.parametrize("backend", BACKENDS)
def test_except_branch_around_a_failing_lookup_after_a_step_runs_as_eager(backend):
    backend = _backend(backend)

    def make():
        w = tg.ones(3, requires_grad=True)
        opt = tg.optim.SGD([w], lr=0.1, momentum=0.5)

        def f(x, i):
            opt.zero_grad()
            (w * x).sum().backward()
            opt.step()
            try:
                y = w[i] * 2
            except IndexError:
                y = w.sum() * 0
            with tg.no_grad():
                w.mul_(0.9)
            return y
        return f, lambda: [w, w.grad, opt.state[w]]
    x = tg.ones(3)
    calls = [lambda: (x, tg.tensor([0])), lambda: (x, tg.tensor([1])),
             lambda: (x, tg.tensor([5])), lambda: (x, tg.tensor([2])),
             lambda: (x, tg.tensor([5]))]
    _, errors = _runs(make, calls, backend)
    assert errors == [None] * 5


# ---------------- results PyTorch gives where numpy refuses ----------------
@pytest.mark.parametrize("backend", ["eager"] + BACKENDS)
def test_integer_tensor_to_negative_tensor_powers_are_pytorchs_values(backend):
    """numpy refuses negative integer powers; PyTorch refuses them only for a Python exponent
    (`t ** -1`) and otherwise gives 1, +-1 or 0 (integer division's answer)."""
    def f(a, b):
        return a ** b, 2 ** b
    fn = f if backend == "eager" else tg.compile(f, backend=_backend(backend))
    base, exp = [0, 1, -1, 2, -2, 3, -3, 0], [-1, -1, -1, -1, -1, -2, -3, 0]
    want = ([0, 1, -1, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0, 1])
    for _ in range(2):                       # traced, then cached
        got = fn(tg.tensor(base), tg.tensor(exp))
        assert [g.tolist() for g in got] == list(want)
    assert fn(tg.tensor([2, 3]), tg.tensor([1, 2]))[0].tolist() == [2, 9]
    x = tg.tensor([2, -1])
    x.pow_(tg.tensor([-1, -3]))
    assert x.tolist() == [0, -1]
    torch = pytest.importorskip("torch")
    assert (torch.tensor(base) ** torch.tensor(exp)).tolist() == want[0]
    assert (2 ** torch.tensor(exp)).tolist() == want[1]
