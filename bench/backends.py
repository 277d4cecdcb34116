"""Backends compared: tracegrad compiled on the numpy backend vs on the JAX backend, against
hand-written `jax.jit` and hand-written numpy (the two limits). Not a test.

Cases (timed interleaved, bench/_timing.py):
- the 200-op elementwise chain on shape-(4,) float32 tensors (bench/eager_overhead.py),
  forward + backward, reported per op (median time / 200);
- the MLP training step (forward, softmax cross-entropy, gradients, in-place SGD;
  bench/_mlp.py) at batch 256 784-512-512-10 (`--all`: also the two smaller sizes);
- the same step written as a PyTorch user writes it and compiled whole (`nn.Sequential`,
  `optim.SGD(momentum=0.9)`, zero_grad / backward / step inside, the loss returned as is;
  `_mlp.tg_module_step`) at batch 256 784-512-512-10 (ReLU) and 50 layers 512 wide (tanh),
  against hand-written `jax.jit` with momentum (also with the parameters and buffers
  donated, and also returning the gradients, as a PyTorch step leaves them in `.grad`:
  the price of that semantics, measured apart) and hand-written numpy with momentum.
The hand-written `jax.jit` versions are what a JAX user writes: `jax.value_and_grad` under
`jax.jit`, parameters kept as device arrays between steps. Results are checked against
numpy before timing. Also printed: the first-call time (trace + passes + XLA compile) of
each compiled step.

    python bench/backends.py [--rounds N] [--all] [--quick] [--sync-dispatch]

`--sync-dispatch` turns XLA's CPU async dispatch off (`jax_cpu_enable_async_dispatch`, a
process-wide setting that only takes effect before JAX first runs): the hand-written
`jax.jit` programs above about 1000 flops then run on the calling thread instead of being
handed to a worker, which on a small machine costs tens of microseconds per call. The
tracegrad JAX backend's programs run on the calling thread either way (Note [Synchronous
client] in tracegrad/backends/jax/client.py).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import _timing as T  # noqa: E402
import eager_overhead as EO  # noqa: E402
import tracegrad as tg  # noqa: E402
from _mlp import (LR, MOMENTUM, make_params, numpy_momentum_step, numpy_step,  # noqa: E402
                  tg_compiled_body, tg_module_step)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

if "--sync-dispatch" in sys.argv:        # before JAX first runs (see the docstring)
    jax.config.update("jax_cpu_enable_async_dispatch", False)

NAMES = ("numpy (hand)", "tg numpy backend", "tg jax backend", "jax.jit (hand)")


# ---------------- 200-op chain ----------------
def _numpy_chain(x0, w0):
    xs, x = [x0], x0
    for _, _, f, _ in EO.CHAIN:
        x = f(x, w0)
        xs.append(x)
    g, gw = np.ones_like(x0), np.zeros_like(w0)
    for i in range(len(EO.CHAIN) - 1, -1, -1):
        gx, gww = EO.CHAIN[i][3](g, xs[i], xs[i + 1], w0)
        if gww is not None:
            gw += gww
        g = gx
    return g


def chain_cases():
    x0 = np.linspace(-1, 1, 4).astype(np.float32)
    w0 = np.full(4, 0.3, np.float32)

    def chain(x, w):                     # the same code for tracegrad and jax.numpy arrays
        for _, op, _, _ in EO.CHAIN:
            x = op(x, w)
        return x.sum()

    comp = {b: tg.compile(chain, backend=b) for b in ("numpy", "jax")}
    tx = tg.tensor(x0, requires_grad=True)
    tw = tg.tensor(w0, requires_grad=True)

    def run_tg(fn):
        tx.grad = tw.grad = None
        fn(tx, tw).backward()
        return tx.grad

    jgrad = jax.jit(jax.grad(_jax_chain, argnums=(0, 1)))
    jx, jw = jnp.asarray(x0), jnp.asarray(w0)

    def run_jax():
        gx, gw = jgrad(jx, jw)
        return gx.block_until_ready()

    ref = _numpy_chain(x0, w0)
    for _ in range(3):
        for b in comp:
            np.testing.assert_allclose(run_tg(comp[b]).numpy(), ref, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(np.asarray(run_jax()), ref, rtol=1e-4, atol=1e-6)
    return dict(zip(NAMES, (lambda: _numpy_chain(x0, w0), lambda: run_tg(comp["numpy"]),
                            lambda: run_tg(comp["jax"]), run_jax)))


def _jax_chain(x, w):
    for name, _, _, _ in EO.CHAIN:
        x = _JAX_OPS[name](x, w)
    return x.sum()


_JAX_OPS = {"mul 1.5": lambda x, w: x * 1.5, "add 0.5": lambda x, w: x + 0.5,
            "sin": lambda x, w: jnp.sin(x), "mul w": lambda x, w: x * w,
            "tanh": lambda x, w: jnp.tanh(x), "exp": lambda x, w: jnp.exp(x),
            "sub 1": lambda x, w: x - 1.0, "div 3": lambda x, w: x / 3.0,
            "sigmoid": lambda x, w: jax.nn.sigmoid(x), "add w": lambda x, w: x + w}


# ---------------- MLP step ----------------
def _jax_loss(ps, x, y):
    h = x
    n = len(ps) // 2
    for i in range(n):
        h = h @ ps[2 * i] + ps[2 * i + 1]
        if i < n - 1:
            h = jax.nn.relu(h)
    return -jnp.mean(jax.nn.log_softmax(h, axis=1)[jnp.arange(x.shape[0]), y])


@jax.jit
def _jax_step(ps, x, y):
    loss, gs = jax.value_and_grad(_jax_loss)(ps, x, y)
    return loss, [p - LR * g for p, g in zip(ps, gs)]


def mlp_cases(batch, sizes):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch)
    base = make_params(sizes)
    np_ps = [p.copy() for p in base]
    tx, ty = tg.tensor(x), tg.tensor(y)
    tg_ps = {b: [tg.tensor(p, requires_grad=True) for p in base] for b in ("numpy", "jax")}
    steps, first = {}, {}
    for b in ("numpy", "jax"):
        steps[b] = tg.compile(tg_compiled_body(tg), backend=b)
        t0 = time.perf_counter()
        steps[b](tg_ps[b], tx, ty)
        steps[b](tg_ps[b], tx, ty)       # the first call traces; the second builds nothing
        first[b] = time.perf_counter() - t0
    state = {"ps": [jnp.asarray(p) for p in base]}
    jx, jy = jnp.asarray(x), jnp.asarray(y, dtype=jnp.int32)

    def run_jax():
        loss, state["ps"] = _jax_step(state["ps"], jx, jy)
        return float(loss)
    t0 = time.perf_counter()
    run_jax()
    run_jax()
    first["jax.jit"] = time.perf_counter() - t0
    numpy_step(np_ps, x, y)
    numpy_step(np_ps, x, y)                  # everyone has taken two steps
    for b in ("numpy", "jax"):
        for p, q in zip(tg_ps[b], np_ps):
            np.testing.assert_allclose(p.detach().numpy(), q, rtol=1e-3, atol=1e-4)
    for p, q in zip(state["ps"], np_ps):
        np.testing.assert_allclose(np.asarray(p), q, rtol=1e-3, atol=1e-4)
    cases = dict(zip(NAMES, (lambda: numpy_step(np_ps, x, y),
                             lambda: steps["numpy"](tg_ps["numpy"], tx, ty),
                             lambda: steps["jax"](tg_ps["jax"], tx, ty), run_jax)))
    return cases, first


# ---------------- the idiomatic step: nn + optim, compiled whole ----------------
def _jax_act_loss(act):
    f = jnp.tanh if act == "tanh" else jax.nn.relu

    def loss_fn(ps, x, y):
        h = x
        n = len(ps) // 2
        for i in range(n):
            h = h @ ps[2 * i] + ps[2 * i + 1]
            if i < n - 1:
                h = f(h)
        return -jnp.mean(jax.nn.log_softmax(h, axis=1)[jnp.arange(x.shape[0]), y])
    return loss_fn


def _jax_momentum_step(act, donate, grads=False):
    loss_fn = _jax_act_loss(act)

    def step(ps, bufs, x, y):
        loss, gs = jax.value_and_grad(loss_fn)(ps, x, y)
        bufs = [MOMENTUM * b + g for b, g in zip(bufs, gs)]
        out = loss, [p - LR * b for p, b in zip(ps, bufs)], bufs
        return out + (gs,) if grads else out      # (gradients kept, as `.grad` keeps them)
    return jax.jit(step, donate_argnums=(0, 1) if donate else ())


def module_cases(batch, sizes, act):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch)
    base = make_params(sizes)
    np_ps, np_bufs = [p.copy() for p in base], [np.zeros_like(p) for p in base]
    tx, ty = tg.tensor(x), tg.tensor(y)
    steps, models, first = {}, {}, {}
    for b in ("numpy", "jax"):
        steps[b], models[b] = tg_module_step(tg, sizes, act, base, b)
        t0 = time.perf_counter()
        steps[b](tx, ty)
        steps[b](tx, ty)
        first[b] = time.perf_counter() - t0
    jx, jy = jnp.asarray(x), jnp.asarray(y, dtype=jnp.int32)
    hands, states = {}, {}
    for name, donate, grads in (("jax.jit (hand)", False, False),
                                ("jax.jit (hand, donated)", True, False),
                                ("jax.jit (hand, returns grads)", False, True)):
        fn = _jax_momentum_step(act, donate, grads)
        st = states[name] = {"ps": [jnp.asarray(p) for p in base],
                             "bufs": [jnp.zeros(p.shape, p.dtype) for p in base]}

        def run(fn=fn, st=st):
            loss, st["ps"], st["bufs"], *st["grads"] = fn(st["ps"], st["bufs"], jx, jy)
            return float(loss)
        hands[name] = run
        t0 = time.perf_counter()
        run()
        run()
        first[name] = time.perf_counter() - t0
    numpy_momentum_step(np_ps, np_bufs, x, y, act)
    numpy_momentum_step(np_ps, np_bufs, x, y, act)      # everyone has taken two steps
    for b in ("numpy", "jax"):
        got = [t.detach().numpy() for m in models[b] if hasattr(m, "weight")
               for t in (m.weight.T, m.bias)]
        for p, q in zip(got, np_ps):
            np.testing.assert_allclose(p, q, rtol=1e-3, atol=1e-4)
    for st in states.values():
        for p, q in zip(st["ps"], np_ps):
            np.testing.assert_allclose(np.asarray(p), q, rtol=1e-3, atol=1e-4)
    cases = dict(zip(NAMES, (lambda: numpy_momentum_step(np_ps, np_bufs, x, y, act),
                             lambda: steps["numpy"](tx, ty), lambda: steps["jax"](tx, ty),
                             hands["jax.jit (hand)"])))
    cases["jax.jit (hand, donated)"] = hands["jax.jit (hand, donated)"]
    cases["jax.jit (hand, returns grads)"] = hands["jax.jit (hand, returns grads)"]
    return cases, first


def report(title, samples, per=1):
    meds = T.medians(samples)
    base = meds[NAMES[0]]
    rows = [[n, meds[n] * 1e6 / per, T.spread(samples[n]) * 100, meds[n] / base,
             meds[n] / meds["jax.jit (hand)"]] for n in samples]
    unit = "us/op" if per > 1 else "median us"
    print(f"\n{title}")
    print(T.format_table(["impl", unit, "spread %", "x numpy", "x jax.jit"], rows))
    return meds


MLPS = [(256, (784, 512, 512, 10))]
MODULES = [(256, (784, 512, 512, 10), "relu"), (256, (512,) * 51, "tanh")]
MORE = [(32, (64, 64, 10)), (64, (784, 128, 10))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--all", action="store_true", help="also the two smaller MLP sizes")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sync-dispatch", action="store_true", help="see the docstring")
    a = ap.parse_args()
    rounds = 8 if a.quick else a.rounds
    print(f"jax {jax.__version__} on {jax.devices()}, CPU async dispatch "
          f"{'off' if a.sync_dispatch else 'on'}")
    report("200-op elementwise chain, shape (4,), forward + backward (per op)",
           T.interleaved(chain_cases(), rounds, inner=20), per=len(EO.CHAIN))
    for batch, sizes in (MORE if a.all else []) + MLPS:
        cases, first = mlp_cases(batch, sizes)
        r = max(5, rounds // 3) if batch >= 256 else rounds
        report(f"MLP step batch {batch} {'-'.join(map(str, sizes))} (forward, backward, SGD)",
               T.interleaved(cases, r, inner=1 if batch >= 256 else 5, settle=0.01))
        print("first two calls (trace + passes + compile, then one step): " + ", ".join(
            f"{k} {v * 1e3:.0f} ms" for k, v in first.items()))
    for batch, sizes, act in MODULES:
        cases, first = module_cases(batch, sizes, act)
        shape = ("-".join(map(str, sizes)) if len(sizes) < 6
                 else f"{len(sizes) - 1} layers {sizes[1]} wide")
        report(f"nn.Sequential + optim.SGD(momentum) step compiled whole, batch {batch} "
               f"{shape} ({act})",
               T.interleaved(cases, max(5, rounds // 3), inner=1, settle=0.01))
        print("first two calls: " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in first.items()))


if __name__ == "__main__":
    main()
