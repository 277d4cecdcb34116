"""The fused backward primitives (tanh_backward, sigmoid_backward, sin_backward,
threshold_backward; see Note [Fused backward primitives] in ops/elementwise.py).

Checked: gradients equal, bit for bit, the composite rules they replaced (first and second
order, float32 and float64); the primitives' own VJPs against finite differences (first and
second order); the `out=` kernel path the memory planner uses, with `out` aliasing either
operand; relu's gradient on non-finite inputs and the grad_fn names against PyTorch.
"""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad.ops import elementwise as E

# op -> the composite VJP rule it used before fusion, written with tracegrad ops on the
# forward input x, its output y and the incoming gradient g
COMPOSITE = {
    "tanh": lambda g, x, y: g * (1.0 - y * y),
    "sigmoid": lambda g, x, y: g * (y * (1.0 - y)),
    "sin": lambda g, x, y: g * x.cos(),
}
FUSED = {                      # the fused op functions, called as (g, saved operand)
    "tanh": (E._tanh_backward, "out"),
    "sigmoid": (E._sigmoid_backward, "out"),
    "sin": (E._sin_backward, "in"),
    "relu": (E._threshold_backward, "out"),
}
KERNELS = [E.TANH_BACKWARD, E.SIGMOID_BACKWARD, E.SIN_BACKWARD, E.THRESHOLD_BACKWARD]


def _leaf(a):
    return tg.tensor(a, requires_grad=True)


def _bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _data(rng, shape, dtype, op):
    x = rng.uniform(-3.0, 3.0, shape).astype(dtype)
    if op == "relu":
        x[np.abs(x) < 0.1] = 0.5          # away from the kink for finite differences
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(), (5,), (3, 4)])
@pytest.mark.parametrize("op", sorted(COMPOSITE))
def test_gradients_bitwise_equal_to_composite_rule(op, shape, dtype):
    rng = np.random.default_rng(len(shape) * 7 + len(op))
    x0, g0, v0 = (rng.uniform(-3.0, 3.0, shape).astype(dtype) for _ in range(3))
    # new: the op's own VJP (fused), first order kept differentiable
    x, g = _leaf(x0), _leaf(g0)
    y = getattr(x, op)()
    (gx,) = tg.autograd.grad(y, x, g, create_graph=True)
    # old: the composite rule on the same forward graph
    x2, g2 = _leaf(x0), _leaf(g0)
    y2 = getattr(x2, op)()
    gx2 = COMPOSITE[op](g2, x2, y2)
    assert _bits_equal(gx.detach().numpy(), gx2.detach().numpy())
    # second order: the gradient of <gx, v> with respect to x and g
    v = tg.tensor(v0)
    new = tg.autograd.grad((gx * v).sum(), (x, g))
    old = tg.autograd.grad((gx2 * v).sum(), (x2, g2))
    for a, b in zip(new, old):
        assert _bits_equal(a.numpy(), b.numpy())


def test_relu_gradient_matches_old_rule_on_finite_values():
    rng = np.random.default_rng(3)
    x0 = rng.uniform(-2, 2, (4, 5)).astype(np.float32)
    g0 = rng.uniform(-2, 2, (4, 5)).astype(np.float32)
    x = _leaf(x0)
    y = x.relu()
    y.backward(tg.tensor(g0))
    # the composite rule was g * (y > 0): equal values (only the sign of masked zeros differs)
    want = g0 * (np.maximum(x0, 0) > 0)
    np.testing.assert_array_equal(x.grad.numpy(), want)
    assert not np.signbit(x.grad.numpy()[x0 <= 0]).any()     # masked entries are +0


@pytest.mark.parametrize("op", sorted(FUSED))
def test_fused_primitive_gradcheck_first_and_second_order(op):
    fn, _ = FUSED[op]
    rng = np.random.default_rng(11)
    g = _leaf(rng.uniform(-2, 2, (3, 2)))
    s = _leaf(_data(rng, (3, 2), np.float64, op))
    if op in ("tanh", "sigmoid"):
        s = _leaf(rng.uniform(-0.9, 0.9, (3, 2)))  # a tanh/sigmoid output's range
    assert tg.autograd.gradcheck(fn, (g, s))
    assert tg.autograd.gradgradcheck(fn, (g, s))


@pytest.mark.parametrize("op", sorted(FUSED))
def test_second_order_of_original_op_by_finite_differences(op):
    """d/dx <d(sum f)/dx, v> from autograd equals differences of first-order gradients."""
    rng = np.random.default_rng(5)
    x0 = _data(rng, (6,), np.float64, op)
    v = rng.standard_normal(6)
    d = rng.standard_normal(6)

    def first(xa):
        x = _leaf(xa)
        (gx,) = tg.autograd.grad(getattr(x, op)().sum(), x, create_graph=True)
        return x, gx

    x, gx = first(x0)
    (hv,) = tg.autograd.grad((gx * tg.tensor(v)).sum(), x, allow_unused=True)
    got = 0.0 if hv is None else float(hv.numpy() @ d)
    eps = 1e-6
    num = (first(x0 + eps * d)[1].detach().numpy() @ v
           - first(x0 - eps * d)[1].detach().numpy() @ v) / (2 * eps)
    assert got == pytest.approx(num, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("prim", KERNELS, ids=lambda p: p.name)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 3), ()])
def test_out_kernel_matches_allocating_kernel_even_when_aliasing(prim, dtype, shape):
    """The memory planner passes `out=` as a fresh buffer or as either operand's buffer."""
    assert prim.kernel.accepts_out and prim.elementwise
    rng = np.random.default_rng(2)
    g = np.asarray(rng.uniform(-2, 2, shape).astype(dtype))
    s = np.asarray(rng.uniform(-1, 1, shape).astype(dtype))
    s.flat[0] = 0.0
    want = np.asarray(prim.kernel(g, s))
    assert want.dtype == np.dtype(dtype)
    fresh = np.full_like(g, np.nan)
    assert prim.kernel(g, s, out=fresh) is fresh and _bits_equal(fresh, want)
    for k in (0, 1):
        ops = [g.copy(), s.copy()]
        res = prim.kernel(*ops, out=ops[k])
        assert res is ops[k] and _bits_equal(res, want)


def test_vjps_dispatch_one_primitive_each():
    """The point of fusing: each backward step is one dispatched op."""
    from tracegrad import _dispatch
    seen = []

    def spy(prim, args, attrs):          # sees every dispatched primitive
        seen.append(prim.name)
        return _dispatch.run(prim, args, attrs)
    for op in FUSED:
        x = _leaf(np.array([0.5, 1.5]))
        y = getattr(x, op)()
        seed = tg.ones(2, dtype=tg.float64)
        seen.clear()
        token = _dispatch.trace_hook.set(spy)
        try:
            y.backward(seed)
        finally:
            _dispatch.trace_hook.reset(token)
        assert seen == [{"relu": "threshold_backward"}.get(op, op + "_backward")]


def test_matches_torch_including_non_finite_gradients_and_node_names():
    torch = pytest.importorskip("torch")
    x0 = np.array([np.nan, -1.0, 2.0, 0.0, 0.7], np.float32)
    g0 = np.array([1.0, np.inf, -3.0, -4.0, np.nan], np.float32)
    for op in sorted(FUSED):
        res = []
        for lib in (tg, torch):
            x = lib.tensor(x0, requires_grad=True)
            (gx,) = lib.autograd.grad(getattr(x, op)(), x, lib.tensor(g0), create_graph=True)
            res.append((gx.detach().numpy(), type(gx.grad_fn).__name__))
        (ours, our_name), (theirs, their_name) = res
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, equal_nan=True, err_msg=op)
        assert np.array_equal(np.signbit(ours), np.signbit(theirs)) or op != "relu"
        assert our_name == their_name


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast"])
def test_relu_gradient_kernel_is_bit_exact_with_torch(dtype, layout):
    """threshold_backward masks the gradient's bits (no branches): every dtype and layout
    the kernel can receive gives PyTorch's bits, +0 where the output is <= 0."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    y = np.maximum(rng.standard_normal((6, 5)), 0).astype(dtype)
    y[0, 0], y[1, :3] = np.nan, 0.0
    g = rng.standard_normal((6, 5)).astype(dtype)
    g[1, :3] = [np.nan, np.inf, -np.inf]
    if layout == "transposed":
        g = np.ascontiguousarray(g.T).T
    elif layout == "broadcast":
        g = np.broadcast_to(np.asarray(-2.0, dtype), y.shape)
    want = torch.ops.aten.threshold_backward(torch.tensor(np.array(g)), torch.tensor(y), 0)
    got = E.THRESHOLD_BACKWARD.kernel(g, y)
    assert _bits_equal(got, want.numpy())


def test_compiled_backward_uses_fused_kernels_and_matches_eager():
    rng = np.random.default_rng(9)
    x0 = rng.uniform(-1, 1, (3, 4))
    w0 = rng.uniform(-1, 1, (4, 4))

    def f(x, w):
        return ((x @ w).tanh().sigmoid().sin() @ w).relu().sum()

    grads = []
    for fn in (f, tg.compile(f)):
        x, w = _leaf(x0), _leaf(w0)
        fn(x, w).backward()
        grads.append((x.grad.numpy(), w.grad.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("into", ["g", "y", "fresh"])
def test_relu_gradient_kernel_writes_out_last_into_either_operand(into):
    """With `out=` the buffer of the gradient or of the relu output (the memory planner
    hands either), the result equals the out-of-place one bit for bit: NaN and inf
    gradients dropped to +0, a NaN output keeping its gradient."""
    rng = np.random.default_rng(11)
    y = np.maximum(rng.standard_normal((8, 7)), 0).astype(np.float32)
    y[0, :2], y[1, :3] = np.nan, 0.0
    g = rng.standard_normal((8, 7)).astype(np.float32)
    g[1, :3] = [np.nan, np.inf, -0.0]
    g[0, 0] = -3.0
    want = E._threshold_backward_kernel(g, y)
    g2, y2 = g.copy(), y.copy()
    out = {"g": g2, "y": y2, "fresh": np.empty_like(g)}[into]
    got = E._threshold_backward_kernel(g2, y2, out=out)
    assert got is out
    assert _bits_equal(got, want)
    assert _bits_equal(want[1:2, :3], np.zeros((1, 3), np.float32))     # +0, not -0 / nan
    assert want[0, 0] == -3.0 and want[0, 1] == g[0, 1]                # NaN y: g kept
