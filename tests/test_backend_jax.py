"""The JAX backend (`tg.compile(fn, backend="jax")`, tracegrad/backends/jax) against the
numpy backend: every op-table entry (values, dtypes, requires_grad, gradients; integers and
bools exactly, floats to rounding), guards and re-trace counts of a data-dependent loop, an
MLP training step with an optimizer, random draws (host-drawn, so equal to numpy's), double
backward, float64, runtime checks (integer division by zero), the fallback warning, explain,
and a data-parallel step over 4 simulated host devices (in a subprocess).
"""
import os
import subprocess
import sys
import warnings
import zlib

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg  # noqa: E402
from op_table import F32, F64, OPS, flat_outputs, to_lib  # noqa: E402
from tracegrad.backends.jax.lower import rule_for, HOST_PRIMS  # noqa: E402
from tracegrad.ops.primitive import REGISTRY  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rng(info, k):
    return np.random.default_rng(zlib.crc32(f"jax/{info.name}/{k}".encode()))


def _program(info, kwargs):
    def fn(*args):
        outs = flat_outputs(info.op(tg, *args, **kwargs))
        loss = None
        for k, o in enumerate(outs):
            if o.dtype.is_floating_point and o.requires_grad:
                w = np.random.default_rng(k).standard_normal(o.shape)
                term = (o * tg.tensor(w, dtype=o.dtype)).sum()
                loss = term if loss is None else loss + term
        return outs, loss
    return fn


def _call(info, sample, fn):
    args = [to_lib(tg, a, requires_grad=info.differentiable) for a in sample.args]
    outs, loss = fn(*args)
    grads = None
    if loss is not None:
        loss.backward()
        grads = [a.grad for a in args if isinstance(a, tg.Tensor)]
    return outs, loss, grads


def _same(a, b, what, low=False):
    """Integers and bools exactly; floats to float32 / float64 rounding (`low`: a float32
    operand anywhere may round a float64 result)."""
    if a is None or b is None:
        assert a is None and b is None, what
        return
    assert (a.dtype, tuple(a.shape)) == (b.dtype, tuple(b.shape)), what
    assert a.requires_grad == b.requires_grad, f"{what}: requires_grad"
    x, y = a.detach().numpy(), b.detach().numpy()
    if x.dtype.kind in "biu":
        np.testing.assert_array_equal(x, y, err_msg=what)
        return
    tol = 2e-5 if a.dtype in (tg.float32, tg.float16) or low else 1e-10
    np.testing.assert_allclose(y, x, rtol=tol, atol=tol, err_msg=what)


def _compiled_on(backend, fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the fallback warning has its own test
        return tg.compile(fn, backend=backend)


def check_op(info, dtype):
    n = len(info.samples(_rng(info, 0), dtype))
    for si in range(n):
        first = info.samples(_rng(info, 0), dtype)[si]
        on_np = _compiled_on("numpy", _program(info, first.kwargs))
        on_jax = _compiled_on("jax", _program(info, first.kwargs))
        for call in range(2):                # the first call traces, the second runs XLA
            sample = info.samples(_rng(info, call), dtype)[si]
            n_outs, n_loss, n_grads = _call(info, sample, on_np)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                j_outs, j_loss, j_grads = _call(info, sample, on_jax)
            where = f"{info.name}{sample} call {call}"
            low = any(getattr(a, "dtype", None) == np.float32 for a in sample.args)
            assert len(n_outs) == len(j_outs), where
            for k, (a, b) in enumerate(zip(n_outs, j_outs)):
                _same(a, b, f"{where}: output {k}")
            _same(n_loss, j_loss, f"{where}: loss")
            for k, (a, b) in enumerate(zip(n_grads or [], j_grads or [])):
                _same(a, b, f"{where}: grad {k}", low)
        assert on_jax.stats.traces == on_np.stats.traces, where
        assert all(_jax_paths(on_jax)), f"{info.name}{first}: a path fell back to numpy"


# Every op by default would be ~3 minutes of XLA compiles, a third of the default suite: a
# third of the table (every third op, the dtypes still alternating) runs by default, the
# whole table with `-m slow`.
@pytest.mark.parametrize("k,info", [
    pytest.param(k, i, id=i.name, marks=() if k % 3 == 0 else pytest.mark.slow)
    for k, i in enumerate(OPS)])
def test_op_table_jax_equals_numpy_backend(k, info):
    """One dtype per op (XLA compiles take a while): float32 and float64 alternately."""
    ds = [d for d in (F32, F64) if d in info.dtypes] or list(info.dtypes[:1])
    check_op(info, ds[k % len(ds)])


def test_every_primitive_has_a_rule():
    """Of the op table: custom autograd.Function primitives (OPAQUE) are user code."""
    from tracegrad.tracing.custom_function import OPAQUE
    missing = [p.name for p in REGISTRY.values()
               if p not in HOST_PRIMS and p not in OPAQUE and rule_for(p) is None]
    assert missing == []


def _jax_paths(cf):
    from tracegrad.backends.jax.program import JaxProgram
    return [isinstance(p.forward_program, JaxProgram) for p in cf.programs]


def _pair(fn, **kw):
    return (tg.compile(fn, **kw), tg.compile(fn, backend="jax", **kw))


def _loop(x):
    y = x * 2
    while y.norm() < 1000:
        y = y * 2
    return y.sum() * x.mean()


def test_data_dependent_loop_guards_and_retraces_match_numpy_backend():
    on_np, on_jax = _pair(_loop)
    rng = np.random.default_rng(0)
    for scale in (1.0, 1.1, 0.3, 1.0, 50.0, 0.3, 1.05):
        a = (rng.standard_normal(3) * 0 + np.array([1.0, 2.0, 3.0]) * scale).astype(np.float32)
        xs = [tg.tensor(a, requires_grad=True) for _ in range(2)]
        outs = [f(x) for f, x in zip((on_np, on_jax), xs)]
        for o in outs:
            o.backward()
        _same(outs[0], outs[1], f"loop scale {scale}")
        _same(xs[0].grad, xs[1].grad, f"loop grad scale {scale}")
    assert on_jax.stats.traces == on_np.stats.traces >= 3
    assert on_jax.stats.retraces == on_np.stats.retraces
    assert on_jax.stats.cache_hits == on_np.stats.cache_hits >= 3
    assert all(_jax_paths(on_jax))


def _sgd_step(model, lr=0.1, momentum=0.9):
    """A training step as it compiles: loss, `autograd.grad`, in-place SGD with momentum
    (parameters and momentum buffers are captured tensors, updated in place)."""
    F = tg.nn.functional
    params = list(model.parameters())
    bufs = [tg.zeros_like(p) for p in params]

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        grads = tg.autograd.grad(loss, params)
        with tg.no_grad():
            for p, g, b in zip(params, grads, bufs):
                b.mul_(momentum).add_(g)
                p.sub_(lr * b)
        return loss.detach()
    return step


def _mlp_module_step():
    nn = tg.nn
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.25), nn.Linear(32, 5))
    return model, _sgd_step(model)


def test_mlp_training_step_with_optimizer_and_dropout_matches_numpy_backend():
    """A whole step (dropout, cross-entropy, gradients, SGD with momentum) compiled:
    losses and parameters after several steps agree; dropout masks are the same draws."""
    results = []
    for backend in ("numpy", "jax"):
        model, step = _mlp_module_step()
        cf = tg.compile(step, backend=backend)
        rng = np.random.default_rng(1)
        losses = []
        tg.manual_seed(7)
        for _ in range(5):
            x = tg.tensor(rng.standard_normal((16, 12)).astype(np.float32))
            y = tg.tensor(rng.integers(0, 5, 16))
            losses.append(cf(x, y).item())
        results.append((losses, [p.detach().numpy().copy() for p in model.parameters()], cf))
    (ln, pn, cn), (lj, pj, cj) = results
    np.testing.assert_allclose(lj, ln, rtol=1e-5)
    for a, b in zip(pn, pj):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
    assert cj.stats.traces == cn.stats.traces == 1
    assert cj.stats.eager_calls == cn.stats.eager_calls == 0
    assert all(_jax_paths(cj))


def test_random_draws_equal_numpy_backend_and_manual_seed_reproduces():
    def f(x):
        return x * tg.rand(x.shape) + tg.randn(3, 4) - tg.randint(0, 5, (3, 4))
    on_np, on_jax = _pair(f)
    x = tg.ones(3, 4)
    for _ in range(3):
        tg.manual_seed(3)
        a = on_np(x)
        tg.manual_seed(3)
        b = on_jax(x)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert all(_jax_paths(on_jax))


def _small_chain(x, w):
    """Many small saved values: they travel packed (Note [Packed saved values])."""
    h = x @ w
    for _ in range(4):
        h = (h.sin() * w.sum() + h.tanh()).exp() * 0.5
    return (h ** 2).sum()


@pytest.mark.parametrize("f", [lambda x, w: ((x @ w).tanh() ** 2).sum(), _small_chain],
                         ids=["tanh", "packed"])
def test_double_backward_through_jax_compiled_function(f):
    """create_graph=True replays the backward graph through eager dispatch (as on the numpy
    backend: Note [Differentiable backward]); the first-order pass runs on XLA."""
    cf = tg.compile(f, backend="jax")
    rng = np.random.default_rng(2)
    for _ in range(3):
        xa, wa = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
        got, ref = [], []
        for fn, out in ((cf, got), (f, ref)):
            x, w = tg.tensor(xa, requires_grad=True), tg.tensor(wa, requires_grad=True)
            gx, gw = tg.autograd.grad(fn(x, w), (x, w), create_graph=True)
            (gx.pow(2).sum() + gw.sum()).backward()
            out += [gx.detach().numpy(), gw.detach().numpy(), x.grad.numpy(), w.grad.numpy()]
        for a, b in zip(got, ref):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert all(_jax_paths(cf))
    if f is _small_chain:
        assert cf.programs[0].backward_program.pack_in is not None


def test_float64_runs_in_64_bits_without_touching_the_global_flag():
    def f(x):
        return (x * 1e-3).exp().sum() + x.argmax()
    cf = tg.compile(f, backend="jax")
    x = tg.tensor(np.arange(5, dtype=np.float64) + 1e-12)
    for _ in range(2):
        out = cf(x)
    assert out.dtype == tg.float64
    np.testing.assert_allclose(out.item(), f(x).item(), rtol=1e-15)
    assert not jax.config.jax_enable_x64
    assert jax.numpy.ones(1).dtype == np.float32


def test_integer_division_by_zero_raises_like_eager():
    def f(a, b):
        return a // b
    cf = tg.compile(f, backend="jax")
    a, b = tg.tensor([4, 6]), tg.tensor([2, 3])
    assert cf(a, b).tolist() == [2, 2]
    assert cf(a, tg.tensor([1, 2])).tolist() == [4, 3]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        cf(a, tg.tensor([1, 0]))
    assert cf.stats.traces == 1


def test_index_out_of_range_raises_like_eager():
    def f(x, i):
        return x[i] * 2
    cf = tg.compile(f, backend="jax")
    x = tg.arange(5).float()
    assert cf(x, tg.tensor([1, 4])).tolist() == [2.0, 8.0]
    assert cf(x, tg.tensor([0, -1])).tolist() == [0.0, 8.0]
    with pytest.raises(IndexError) as ei:
        cf(x, tg.tensor([0, 5]))
    with pytest.raises(IndexError) as ee:
        f(x, tg.tensor([0, 5]))
    assert str(ei.value).split("\n")[0] == str(ee.value).split("\n")[0]


def test_unlowerable_path_falls_back_to_numpy_with_one_warning(monkeypatch):
    from tracegrad.backends.jax.table import RULES
    from tracegrad.ops.elementwise import SIN
    monkeypatch.delitem(RULES, SIN)
    cf = tg.compile(lambda x: x.sin().sum() * 2, backend="jax")
    x = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    with pytest.warns(UserWarning, match="primitive 'sin'") as rec:
        cf(x)
    assert len([w for w in rec if "cannot lower" in str(w.message)]) == 1
    x2 = tg.tensor([2.0, -1.0, 1.0], requires_grad=True)
    out = cf(x2)
    out.backward()
    np.testing.assert_allclose(out.item(), np.sin([2.0, -1.0, 1.0]).sum() * 2, rtol=1e-6)
    np.testing.assert_allclose(x2.grad.numpy(), 2 * np.cos([2.0, -1.0, 1.0]), rtol=1e-6)
    assert _jax_paths(cf) == [False] and cf.stats.cache_hits == 1
    assert "fallback" in cf.explain()


def _masks(x, w):
    a = x[x > 0]
    d = x.clone()
    d[d < 0] = 0.0
    e = x[:, x[0] > 0]
    return a.sum() * w.sum() + d.sum() + (e * 3).sum() + tg.nonzero(x > 0.5).sum()


def test_boolean_masks_lower_for_the_traced_count_and_guard_it():
    """Note [Data-dependent shapes]: the same values, guards and re-trace reasons as the
    numpy backend; a new count re-traces, a repeated one hits the cache."""
    on_np, on_jax = _pair(_masks)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(4)]
    for a in arrays + arrays[:2]:
        res = []
        for f in (on_np, on_jax):
            x, w = tg.tensor(a, requires_grad=True), tg.tensor([1.0, 2.0], requires_grad=True)
            out = f(x, w)
            out.backward()
            res.append((out, x.grad, w.grad))
        for p, q in zip(*res):
            _same(p, q, "masks")
    assert on_jax.stats.retraces == on_np.stats.retraces
    assert on_jax.stats.cache_hits == on_np.stats.cache_hits >= 2
    assert all(_jax_paths(on_jax))


def test_explain_shows_jaxpr_and_compile_time():
    cf = tg.compile(lambda x: (x.sin() * 2).sum(), backend="jax")
    cf(tg.ones(3, requires_grad=True))
    text = cf.explain()
    assert "backend: jax" in text and "XLA compile" in text
    assert "sin" in text and "lambda ;" in text          # the jaxpr
    assert "lambda ;" in cf.programs[0].forward_program.code


def test_unknown_backend_and_data_parallel_need_jax_backend():
    with pytest.raises(ValueError, match="backend"):
        tg.compile(lambda x: x, backend="tpu")
    with pytest.raises(ValueError, match="data_parallel"):
        tg.compile(lambda x: x, data_parallel=True)


_SHARDED = r"""
import numpy as np, jax, tracegrad as tg
assert len(jax.devices()) == 4, jax.devices()
nn, F = tg.nn, tg.nn.functional

def run(**kw):
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 3))
    params = list(model.parameters())
    bufs = [tg.zeros_like(p) for p in params]
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        grads = tg.autograd.grad(loss, params)
        with tg.no_grad():
            for p, g, b in zip(params, grads, bufs):
                b.mul_(0.9).add_(g)
                p.sub_(0.2 * b)
        return loss.detach()
    cf = tg.compile(step, backend="jax", **kw)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(10):
        x = tg.tensor(rng.standard_normal((32, 20)).astype(np.float32))
        y = tg.tensor(rng.integers(0, 3, 32))
        losses.append(cf(x, y).item())
    assert cf.stats.eager_calls == 0 and cf.stats.traces == 1, cf.stats
    prog = cf.programs[0].forward_program
    assert type(prog).__name__ == "JaxProgram"
    return losses, [p.detach().numpy().copy() for p in model.parameters()], prog

l1, p1, _ = run()
l4, p4, prog = run(data_parallel=True)
np.testing.assert_allclose(l4, l1, rtol=1e-5)
for a, b in zip(p1, p4):
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
text = prog.executable.as_text()
assert "all-reduce" in text, "no gradient all-reduce in the sharded program"

# a sharded forward whose backward runs later, outside the compiled function
w = tg.tensor(np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32),
              requires_grad=True)
def loss(x):
    return ((x @ w).tanh() ** 2).mean()
cl = tg.compile(loss, backend="jax", data_parallel=True)
for i in range(3):
    x = tg.tensor(np.random.default_rng(i).standard_normal((16, 8)).astype(np.float32))
    w.grad = None
    a = cl(x)
    a.backward()
    g = w.grad.numpy().copy()
    w.grad = None
    b = loss(x)
    b.backward()
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-5)
    np.testing.assert_allclose(g, w.grad.numpy(), rtol=1e-4, atol=1e-6)
assert cl.stats.cache_hits == 2
print("OK", l1[0], l1[-1])
"""


def test_data_parallel_step_over_4_host_devices_equals_single_device():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _SHARDED], env=env, capture_output=True,
                       text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("OK")


def test_example_runs():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "jax_backend.py"),
                        "--quick"], env=env, capture_output=True, text=True, timeout=600,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "all-reduce in the compiled program: True" in r.stdout, r.stdout


def _random_program_tests():
    pytest.importorskip("hypothesis")
    import test_compile_random as R
    return R


def test_random_programs_on_jax_equal_eager():
    """The randomized programs of test_compile_random.py (branches and loops on tensor
    values, in-place writes, masks) on the JAX backend: values, gradients, cache reuse."""
    R = _random_program_tests()
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=16, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(prog=R.programs(), seed=st.integers(0, 2 ** 16))
    def check(prog, seed):
        rng = np.random.default_rng(seed)
        cf = tg.compile(R.run_program, cache_limit=64, backend="jax")
        for call in range(4):
            x0, w0 = rng.standard_normal((2, 3, 3))
            if call == 3:
                x0, w0 = prev                            # a repeated input: a cache hit
            prev = (x0, w0)
            e_outs, e_gx, e_gw = R._call(R.run_program, prog, x0, w0)
            c_outs, c_gx, c_gw = R._call(cf, prog, x0, w0)
            assert len(e_outs) == len(c_outs)
            for a, b in zip(e_outs + [e_gx, e_gw], c_outs + [c_gx, c_gw]):
                R._close(a, b)
        assert cf.stats.cache_hits >= 1
        assert all(_jax_paths(cf))
    check()


def _layers(x, w, k, t, e):
    """Rules the op table does not reach: convolution patches, losses with weights and
    ignored rows, gelu/erf, prod with zeros, einsum, batch norm, embedding."""
    F = tg.nn.functional
    c = F.conv2d(x, k, stride=(2, 1), padding=1, dilation=(1, 2))
    c2 = F.conv2d(x, k, padding="same")
    h = c.flatten(1) @ w
    ce = F.cross_entropy(h, t, weight=tg.tensor([1.0, 2.0, 0.5]), ignore_index=1)
    ce2 = F.cross_entropy(h, t, reduction="sum")
    mse = F.mse_loss(h, h.detach() * 0.5 + 1)
    g = F.gelu(h).sum() + F.gelu(h, approximate="tanh").sum() + tg.erf(h).sum()
    p = tg.cat([h, tg.zeros(h.shape[0], 1)], 1).prod(1).sum() + h.prod()
    es = tg.einsum("bi,bj->ij", h, h).sum()
    bn = F.batch_norm(h, None, None, training=True).pow(2).mean()
    em = F.embedding(t, e).sum(0)
    return ce + ce2 + mse + g + p + es + bn + c2.mean() + (em * em).sum()


def test_conv_losses_and_other_rules_match_numpy_backend():
    on_np, on_jax = _pair(_layers)
    rng = np.random.default_rng(5)
    for call in range(3):
        arrs = [rng.standard_normal((2, 2, 5, 6)), rng.standard_normal((36, 3)) * 0.3,
                rng.standard_normal((3, 2, 3, 3)) * 0.3, rng.integers(0, 3, 2),
                rng.standard_normal((3, 4))]
        res = []
        for f in (on_np, on_jax):
            ts = [tg.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrs]
            out = f(*ts)
            out.backward()
            res.append([out] + [t.grad for t in ts if t.requires_grad])
        for k, (a, b) in enumerate(zip(*res)):
            _same(a, b, f"call {call} value {k}")
    assert on_jax.stats.traces == 1 and all(_jax_paths(on_jax))


def test_compiled_module_train_and_eval_match_numpy_backend():
    nn = tg.nn
    outs = {}
    for backend in ("numpy", "jax"):
        tg.manual_seed(0)
        m = nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.3), nn.Tanh(), nn.Linear(8, 2))
        cm = tg.compile(m, backend=backend)
        x = tg.tensor(np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32))
        got = []
        tg.manual_seed(1)
        for mode in ("train", "eval", "train", "eval"):
            getattr(m, mode)()
            y = cm(x)
            y.sum().backward()
            got.append((y, m[0].weight.grad.clone()))
        outs[backend] = (got, cm.stats)
    for (a, ga), (b, gb) in zip(outs["numpy"][0], outs["jax"][0]):
        _same(a, b, "module output")
        _same(ga, gb, "module grad")
    assert outs["jax"][1].traces == outs["numpy"][1].traces == 2


def test_threads_mixing_64_and_32_bit_programs():
    """64-bit mode is entered per call and per thread: concurrent float64 and float32 calls
    each keep their precision."""
    import threading
    f = tg.compile(lambda x: (x.exp() * 2).sum(), backend="jax")
    a64 = tg.tensor(np.linspace(0, 1, 1000))
    a32 = tg.tensor(np.linspace(0, 1, 1000).astype(np.float32))
    ref = float(np.exp(np.linspace(0, 1, 1000)).sum() * 2)
    f(a64), f(a32)
    errors = []

    def work(k):
        for _ in range(50):
            r = f(a64) if k % 2 else f(a32)
            if r.dtype != (tg.float64 if k % 2 else tg.float32):
                errors.append(r.dtype)
            if k % 2 and abs(r.item() - ref) > 1e-9 * ref:
                errors.append(r.item())
    ts = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == [] and f.stats.traces == 2
