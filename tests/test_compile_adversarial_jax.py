"""First-law review of `backend="jax"`: programs written the way PyTorch users write them, run
eagerly and compiled on the JAX backend for several calls from identical state, compared on
everything a user sees (values within float tolerance, integers and bools exactly, dtypes,
warnings). Each test is a divergence that was found and fixed; the programs that already
matched are listed in the review's report, not here.
"""
import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg  # noqa: E402

NAN, INF = float("nan"), float("inf")
# values whose conversion to an integer is out of range for some width, or undefined in C
CAST_VALUES = [-1, 300, 255.9, -0.5, 70000, -70000, 1e10, -1e10, NAN, INF, -INF, -129, 128,
               2.0 ** 31, -2.0 ** 31, 2.0 ** 32 + 5, 3e9, 2.0 ** 63, -2.0 ** 63, 1e20, 65535.5,
               2.0 ** 31 - 64, 1.5, -2.5]


@pytest.mark.parametrize("src", ["float16", "bfloat16", "float32", "float64"])
def test_float_to_integer_conversion_is_eagers_for_every_value(src):
    # XLA's conversion saturates (NaN -> 0, 1e20 -> INT_MAX, -1.0 -> uint8 0); eager (numpy,
    # and PyTorch on x86) gives the most negative 32/64-bit value and wraps narrower types
    x = tg.tensor(CAST_VALUES, dtype=tg.float64).to(getattr(tg, src))
    for dst in (tg.int8, tg.uint8, tg.int16, tg.int32, tg.int64, tg.bool):
        comp = tg.compile(lambda x: x.to(dst), backend="jax")
        want = x.to(dst)
        for _ in range(2):
            got = comp(x)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f"{src}->{dst}")


def test_long_of_nan_inside_a_computation():
    def f(x):
        return (x.log() * 10).long() + 1, (x * 1e3).int()
    comp = tg.compile(f, backend="jax")
    x = tg.tensor([-1.0, 0.0, 2.0, 1e10])
    want = f(x)
    for _ in range(3):
        for g, w in zip(comp(x), want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())


def _warnings_of(fn, *args, calls=3):
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        outs = [fn(*args) for _ in range(calls)]
    return outs, [(w.category, str(w.message)) for w in ws]


def test_conversions_warn_as_pytorch_does_never():
    # eager warned "invalid value encountered in cast" (numpy's), on every call; a cached
    # call on XLA had no warning to give. PyTorch converts silently.
    x = tg.tensor([NAN, 1e20, 3.0])
    f = lambda x: x.long() + x.double().float().int()  # noqa: E731
    _, eager = _warnings_of(f, x)
    _, comp = _warnings_of(tg.compile(f, backend="jax"), x)
    assert eager == comp == []


@pytest.mark.parametrize("op", ["var", "std"])
def test_degrees_of_freedom_warning_on_every_call_as_pytorch(op):
    # numpy's RuntimeWarning "Degrees of freedom <= 0 for slice" came from the kernel, so a
    # cached call on XLA never repeated it; PyTorch warns a UserWarning on every call
    f = lambda x: getattr(x, op)(1) * 2  # noqa: E731
    x = tg.ones(3, 1)
    outs, eager = _warnings_of(f, x)
    couts, comp = _warnings_of(tg.compile(f, backend="jax"), x)
    assert len(eager) == 3 and eager == comp
    assert eager[0] == (UserWarning, f"{op}(): degrees of freedom is <= 0. Correction should "
                        "be strictly less than the reduction factor (input numel divided by "
                        "output numel).")
    for o, c in zip(outs, couts):
        np.testing.assert_array_equal(o.numpy(), c.numpy())
    _, fine = _warnings_of(tg.compile(f, backend="jax"), tg.ones(3, 2))
    assert fine == []


def test_degrees_of_freedom_warning_matches_pytorch():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        torch.ones(3, 1).var(1)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        tg.ones(3, 1).var(1)
    assert [(w.category, str(w.message).split(" (Triggered")[0]) for w in ws] == \
        [(w.category, str(w.message)) for w in ours]


POWERS = [lambda b, e: b ** e, lambda b, e: 2 ** e, lambda b, e: (-1) ** e,
          lambda b, e: b ** 3, lambda b, e: b.pow(e[0])]


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8"])
def test_integer_powers_wrap_as_eager_for_large_exponents(dtype):
    # jnp.power reads only the low 6 bits of an integer array exponent: 2 ** 70 gave 64 and
    # 2 ** 64 gave 1 (eager wraps to 0); (-1) ** uint8 raised OverflowError
    rng = np.random.default_rng(0)
    dt = getattr(tg, dtype)
    base = tg.tensor(rng.integers(-5, 6, 64)).to(dt)
    exp = tg.tensor(np.concatenate([[0, 1, 63, 64, 65, 70, 127], rng.integers(0, 128, 57)]))
    exp = exp.to(dt)
    for f in POWERS:
        comp = tg.compile(f, backend="jax")
        want = f(base, exp)
        for _ in range(2):
            got = comp(base, exp)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_number_to_a_negative_integer_tensor_power_is_pytorchs():
    # PyTorch gives 0 for 2 ** -1 on integer tensors (1 and +-1 for bases 1 and -1), eager
    # and compiled alike; an exponent past 63 bits wraps to 0 as well
    comp = tg.compile(lambda e: 2 ** e, backend="jax")
    comp(tg.tensor([1, 2]))
    for e in ([1, -1], [70, -3]):
        want = (2 ** tg.tensor(e)).tolist()
        assert want == [2, 0] if e[0] == 1 else want == [0, 0]
        assert comp(tg.tensor(e)).tolist() == want


def _returned_and_saved(x, w):
    h = x * 2
    return (h * w).sum(), h, h.view(-1)


@pytest.mark.parametrize("which", [1, 2])
def test_inplace_change_of_a_returned_value_backward_recomputes_raises(which):
    # the jax backend recomputes `h` in backward instead of saving it (passes/remat.py), so
    # no saved value shared the returned output's memory: its version went unchecked and
    # backward used the old `h` where eager raises
    comp = tg.compile(_returned_and_saved, backend="jax")
    x = tg.ones(4, 4, requires_grad=True)
    w = tg.ones(4, 4, requires_grad=True)
    for f in (_returned_and_saved, comp, comp, comp):
        out = f(x, w)
        with tg.no_grad():
            out[which].add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out[0].backward()
    out = comp(x, w)                       # unchanged: backward runs
    out[0].backward()
    np.testing.assert_allclose(w.grad.numpy(), np.full((4, 4), 2.0))


def _loss(x, w):
    return (x * w).sum() + (w * w).mean()       # backward reads the inputs x and w alone


@pytest.mark.parametrize("write", ["data", "detach", "no_grad_inplace"])
def test_write_to_a_saved_input_between_forward_and_backward_is_seen(write):
    # a speculating call (Note [Speculative backward]) stashed the gradients computed with
    # the forward's `w`; eager's backward reads `w` as it is when backward runs, and a write
    # through `.data` or `detach()` passes `w`'s version counter
    def run(f):
        x = tg.tensor(np.linspace(-1, 1, 6, dtype=np.float32), requires_grad=True)
        w = tg.tensor(np.linspace(0.5, 1.5, 6, dtype=np.float32), requires_grad=True)
        grads = []
        for i in range(6):
            loss = f(x, w)
            if i >= 3 and write == "data":
                w.data.mul_(0.5)
            elif i >= 3 and write == "detach":
                w.detach()[0] = 3.0
            elif i >= 3:
                with tg.no_grad():
                    x.mul_(2.0)          # a version bump: backward raises
            try:
                loss.backward()
                grads.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
            except RuntimeError as e:
                grads.append(type(e))
        return grads
    eager, comp = run(_loss), run(tg.compile(_loss, backend="jax"))
    for e, c in zip(eager, comp):
        if isinstance(e, type):
            assert e is c
        else:
            for a, b in zip(e, c):
                np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_a_training_loop_still_speculates():
    comp = tg.compile(_loss, backend="jax")
    x = tg.ones(6, requires_grad=True)
    w = tg.ones(6, requires_grad=True)
    for _ in range(4):
        comp(x, w).backward()
    (path,) = [p for e in comp.entries.values() for p in e.paths]
    assert path.speculation.on and path.speculation.box[0]


SQRT_EDGES = [-INF, -4.0, INF, 0.0, -0.0, 2.0]
HALF_POWERS = [lambda x: x ** 0.5, lambda x: x.pow(0.5), lambda x: x ** tg.tensor(0.5),
               lambda x: tg.pow(x, tg.tensor(0.5, dtype=tg.float64)),
               lambda x: x[4] ** tg.tensor(0.5), lambda x: x[0] ** 0.5,
               lambda x: x ** tg.tensor([0.5] * 6), lambda x: x ** 1.5]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_power_of_one_half_is_eagers_square_root(dtype):
    # numpy (and PyTorch) compute a scalar power 0.5 of float32/float64 as a square root:
    # (-inf) ** 0.5 is nan and (-0.0) ** 0.5 is -0.0; XLA's pow gave inf and 0.0
    x = tg.tensor(SQRT_EDGES).to(getattr(tg, dtype))
    for f in HALF_POWERS:
        comp = tg.compile(f, backend="jax")
        want = f(x).numpy()
        for _ in range(2):
            got = comp(x).numpy()
            np.testing.assert_array_equal(got, want)
            finite = ~np.isnan(want)
            np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]))


def test_power_of_one_half_matches_pytorch():
    torch = pytest.importorskip("torch")
    want = (torch.tensor(SQRT_EDGES) ** 0.5).numpy()
    comp = tg.compile(lambda x: x ** 0.5, backend="jax")
    x = tg.tensor(SQRT_EDGES)
    comp(x)
    got = comp(x).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]),
                                  np.signbit(want[~np.isnan(want)]))
