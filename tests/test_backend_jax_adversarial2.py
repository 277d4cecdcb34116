"""Adversarial checks of the JAX backend, second round: programs written the PyTorch way
(training steps, optimizers, schedulers, eager writes between calls, errors), each run
eagerly, on the numpy backend and on JAX, and compared."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg
import test_compile_side_effect_counts as counts


# -- a custom forward runs once per call (Note [Forwards run once per call]) ---------------
# The JAX program runs the forward in a host callback; a failing check re-runs the call on
# numpy and a failing op there re-runs it eagerly: the forward ran up to 3 times.

def test_forward_runs_once_when_a_later_op_fails_and_the_call_reruns():
    counts.test_forward_runs_once_when_a_later_op_fails_and_the_call_reruns("jax")


def test_forward_runs_once_when_a_guard_after_it_fails():
    counts.test_forward_runs_once_when_a_guard_after_it_fails("jax")


def test_forward_that_raises_runs_once():
    counts.test_forward_that_raises_runs_once("jax")


@pytest.mark.filterwarnings("ignore:tracegrad.compile. PerCallScale.forward left other")
def test_per_call_ctx_attribute_is_never_the_traced_one():
    counts.test_per_call_ctx_attribute_is_never_the_traced_one("jax")


def test_forward_saving_an_intermediate_runs_once_per_call_and_per_compiled_path():
    counts.test_forward_saving_an_intermediate_runs_once_per_call_and_per_compiled_path("jax")


@pytest.mark.parametrize("fn, n, want", [(counts._three, 3, "cba"), (counts._pairs, 3, "acb"),
                                         (counts._late_leaf, 3, "cab"),
                                         (counts._cat, 4, "acbd")])
def test_hooks_on_several_leaves_fire_in_pytorchs_order(fn, n, want):
    counts.test_hooks_on_several_leaves_fire_in_pytorchs_order(fn, n, want, "jax")


# -- scans accumulate as PyTorch's CPU kernels: float16 in float32, float32 in float64 --

@pytest.mark.parametrize("backend", [None, "numpy", "jax"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_cumsum_and_cumprod_round_as_torch(backend, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 3000)) * 3).astype(dtype)
    p = (1 + rng.standard_normal((300, 2)) * 0.01).astype(dtype)

    def scans(x, p):
        return x.cumsum(1), p.cumprod(0), x.cumsum(0)
    f = scans if backend is None else tg.compile(scans, backend=backend)
    for _ in range(2):                       # the tracing call, then the program
        got = [t.numpy() for t in f(tg.tensor(x), tg.tensor(p))]
    want = [t.numpy() for t in scans(torch.tensor(x), torch.tensor(p))]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)  # float16 cumsum differed in most elements


_SHARDED_RERUN = r"""
import threading
import tracegrad as tg
calls = []
class C(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        calls.append(threading.get_ident())
        ctx.save_for_backward(x)
        return x * 2
    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 2
def fn(x, idx):
    return C.apply(x)[idx].sum()
f = tg.compile(fn, backend="jax", data_parallel=True)
x = tg.ones(8, 2, requires_grad=True)
f(x, tg.tensor([0, 1])).backward()
f(x, tg.tensor([0, 2])).backward()
calls.clear()
try:
    f(x, tg.tensor([0, 70]))
    raise SystemExit("no error")
except IndexError:
    pass
assert len(calls) == 1, calls
print("OK")
"""


def test_sharded_forward_runs_once_when_the_call_reruns():
    # the callback ran on an XLA thread, which did not see the call's memo: it ran twice
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _SHARDED_RERUN], env=env, capture_output=True,
                       text=True, timeout=600, cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("OK")
