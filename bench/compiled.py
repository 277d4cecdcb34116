"""Compiled programs vs hand-written numpy (the limit), tracegrad eager and PyTorch eager.

Cases, each timed interleaved in one run (bench/_timing.py, Note [Interleaving]):
- MLP training step (forward, softmax cross-entropy, backward, SGD) at
  batch 32 64-64-10, batch 64 784-128-10 and batch 256 784-512-512-10;
- the tutorial loop (`while y.data.norm() < 1000: y = y * 2`, then `y.backward(v)`);
- a 200-op elementwise chain on shape-(4,) tensors, forward + backward.
The compiled training step is one `tracegrad.compile`d function that computes the loss,
its gradients (`tracegrad.autograd.grad`) and the in-place SGD update, exactly as a user
writes a step. Results are checked against numpy before timing. Also reports the first-call
compile time of the medium MLP step.

    python bench/compiled.py [--rounds N] [--quick]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import _timing as T  # noqa: E402
import tracegrad as tg  # noqa: E402

try:
    import torch
except ImportError:            # the oracle is optional
    torch = None

LR = 0.01


# ---------------- MLP step ----------------
def make_params(sizes, seed=0):
    rng = np.random.default_rng(seed)
    ps = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        ps.append((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32))
        ps.append(np.zeros(b, np.float32))
    return ps


def numpy_step(ps, x, y):
    """Hand-written forward, softmax cross-entropy, backward and SGD (in place)."""
    acts = [x]
    h = x
    n_layers = len(ps) // 2
    for i in range(n_layers):
        h = h @ ps[2 * i] + ps[2 * i + 1]
        if i < n_layers - 1:
            h = np.maximum(h, 0)
        acts.append(h)
    m = h.max(axis=1, keepdims=True)
    e = np.exp(h - m)
    s = e.sum(axis=1, keepdims=True)
    logp = h - m - np.log(s)
    n = x.shape[0]
    loss = -logp[np.arange(n), y].mean()
    g = e / s
    g[np.arange(n), y] -= 1
    g /= n
    for i in range(n_layers - 1, -1, -1):
        a = acts[i]
        gw = a.T @ g
        gb = g.sum(axis=0)
        if i > 0:
            g = g @ ps[2 * i].T
            g *= acts[i] > 0
        ps[2 * i] -= LR * gw
        ps[2 * i + 1] -= LR * gb
    return loss


def tg_loss(ps, x, y):
    h = x
    n_layers = len(ps) // 2
    for i in range(n_layers):
        h = h @ ps[2 * i] + ps[2 * i + 1]
        if i < n_layers - 1:
            h = h.relu()
    logp = h.log_softmax(dim=1)
    return -logp[tg.arange(x.shape[0]), y].mean()


def tg_eager_step(ps, x, y):
    loss = tg_loss(ps, x, y)
    for p in ps:
        p.grad = None
    loss.backward()
    with tg.no_grad():
        for p in ps:
            p -= LR * p.grad
    return loss


def tg_step(ps, x, y):
    loss = tg_loss(ps, x, y)
    grads = tg.autograd.grad(loss, ps)
    with tg.no_grad():
        for p, g in zip(ps, grads):
            p -= LR * g
    return loss.detach()


def torch_step(ps, x, y):
    h = x
    n_layers = len(ps) // 2
    for i in range(n_layers):
        h = h @ ps[2 * i] + ps[2 * i + 1]
        if i < n_layers - 1:
            h = h.relu()
    loss = torch.nn.functional.cross_entropy(h, y)
    for p in ps:
        p.grad = None
    loss.backward()
    with torch.no_grad():
        for p in ps:
            p -= LR * p.grad
    return loss


def mlp_cases(batch, sizes):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch)
    base = make_params(sizes)
    np_ps = [p.copy() for p in base]
    tg_ps = [tg.tensor(p, requires_grad=True) for p in base]
    tge_ps = [tg.tensor(p, requires_grad=True) for p in base]
    tx, ty = tg.tensor(x), tg.tensor(y)
    step = tg.compile(tg_step)
    t0 = time.perf_counter()
    step(tg_ps, tx, ty)
    first = time.perf_counter() - t0
    numpy_step(np_ps, x, y)
    tg_eager_step(tge_ps, tx, ty)
    for a, b, c in zip(np_ps, tg_ps, tge_ps):       # same state after one step
        np.testing.assert_allclose(b.detach().numpy(), a, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(c.detach().numpy(), a, rtol=1e-4, atol=1e-5)
    l1 = numpy_step(np_ps, x, y)
    l2 = step(tg_ps, tx, ty).item()
    assert abs(l1 - l2) < 1e-4 * max(1.0, abs(l1)), (l1, l2)
    cases = {"numpy": lambda: numpy_step(np_ps, x, y),
             "tg compiled": lambda: step(tg_ps, tx, ty),
             "tg eager": lambda: tg_eager_step(tge_ps, tx, ty)}
    if torch is not None:
        t_ps = [torch.tensor(p, requires_grad=True) for p in base]
        txx, tyy = torch.tensor(x), torch.tensor(y)
        cases["torch eager"] = lambda: torch_step(t_ps, txx, tyy)
    return cases, first


# ---------------- tutorial loop ----------------
def loop_cases():
    x0 = np.array([0.8, -1.3, 0.4], np.float32)
    v = np.array([0.1, 1.0, 0.0001], np.float32)

    def numpy_loop():
        y = x0 * 2
        k = 1
        while np.sqrt((y * y).sum()) < 1000:
            y = y * 2
            k += 1
        return v * np.float32(2.0 ** k)

    @tg.compile
    def loop(x):
        y = x * 2
        while y.data.norm() < 1000:
            y = y * 2
        return y

    tx = tg.tensor(x0, requires_grad=True)
    tv = tg.tensor(v)

    def run_tg(fn):
        tx.grad = None
        fn(tx).backward(tv)
        return tx.grad

    eager = loop.__wrapped__
    for _ in range(3):
        np.testing.assert_allclose(run_tg(loop).numpy(), numpy_loop(), rtol=1e-6)
    np.testing.assert_allclose(run_tg(eager).numpy(), numpy_loop(), rtol=1e-6)
    cases = {"numpy": numpy_loop, "tg compiled": lambda: run_tg(loop),
             "tg eager": lambda: run_tg(eager)}
    if torch is not None:
        ttx = torch.tensor(x0, requires_grad=True)
        ttv = torch.tensor(v)

        def torch_loop():
            ttx.grad = None
            y = ttx * 2
            while y.data.norm() < 1000:
                y = y * 2
            y.backward(ttv)
            return ttx.grad
        cases["torch eager"] = torch_loop
    return cases


# ---------------- 200-op chain ----------------
def chain_cases():
    import eager_overhead as EO
    x0 = np.linspace(-1, 1, 4).astype(np.float32)
    w0 = np.full(4, 0.3, np.float32)

    def tg_chain(x, w):
        for _, op, _, _ in EO.CHAIN:
            x = op(x, w)
        return x.sum()

    comp = tg.compile(tg_chain)
    tx = tg.tensor(x0, requires_grad=True)
    tw = tg.tensor(w0, requires_grad=True)

    def run_tg(fn):
        tx.grad = tw.grad = None
        fn(tx, tw).backward()
        return tx.grad

    def numpy_chain():
        return EO.numpy_forward_backward(x0, w0) if hasattr(EO, "numpy_forward_backward") \
            else _numpy_chain(EO, x0, w0)

    ref = _numpy_chain(EO, x0, w0)
    for _ in range(3):
        np.testing.assert_allclose(run_tg(comp).numpy(), ref, rtol=1e-4, atol=1e-6)
    cases = {"numpy": lambda: _numpy_chain(EO, x0, w0), "tg compiled": lambda: run_tg(comp),
             "tg eager": lambda: run_tg(tg_chain)}
    if torch is not None:
        ttx = torch.tensor(x0, requires_grad=True)
        ttw = torch.tensor(w0, requires_grad=True)

        def torch_chain():
            ttx.grad = ttw.grad = None
            x = ttx
            for _, op, _, _ in EO.CHAIN:
                x = op(x, ttw)
            x.sum().backward()
            return ttx.grad
        cases["torch eager"] = torch_chain
    return cases


def _numpy_chain(EO, x0, w0):
    xs = [x0]
    x = x0
    for _, _, f, _ in EO.CHAIN:
        x = f(x, w0)
        xs.append(x)
    g = np.ones_like(x0)
    gw = np.zeros_like(w0)
    for i in range(len(EO.CHAIN) - 1, -1, -1):
        gx, gww = EO.CHAIN[i][3](g, xs[i], xs[i + 1], w0)
        if gww is not None:
            gw += gww
        g = gx
    return g


def report(title, samples, unit=1e6):
    meds = T.medians(samples)
    rows = [[n, meds[n] * unit, T.spread(samples[n]) * 100,
             meds[n] / meds["numpy"]] for n in samples]
    print(f"\n{title}")
    print(T.format_table(["impl", "median us", "spread %", "x numpy"], rows))
    return meds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    rounds = 10 if a.quick else a.rounds
    summary = []
    for batch, sizes in [(32, (64, 64, 10)), (64, (784, 128, 10)), (256, (784, 512, 512, 10))]:
        cases, first = mlp_cases(batch, sizes)
        r = rounds if batch < 256 else max(5, rounds // 4)
        meds = report(f"MLP step batch {batch} {'-'.join(map(str, sizes))}",
                      T.interleaved(cases, r, inner=5 if batch < 256 else 1))
        summary.append((f"MLP {batch} {'-'.join(map(str, sizes))}", meds))
        if sizes == (784, 128, 10):
            print(f"first-call compile time (trace + passes + codegen): {first * 1e3:.0f} ms")
    meds = report("tutorial loop (forward + y.backward(v))", T.interleaved(loop_cases(), rounds,
                                                                           inner=5))
    summary.append(("tutorial loop", meds))
    meds = report("200-op chain on shape (4,), forward + backward",
                  T.interleaved(chain_cases(), max(5, rounds // 2)))
    summary.append(("200-op chain", meds))
    print("\nsummary: ratio to hand-written numpy (lower is better)")
    rows = []
    for name, m in summary:
        rows.append([name, m["tg compiled"] / m["numpy"], m["tg eager"] / m["numpy"],
                     m["torch eager"] / m["numpy"] if "torch eager" in m else None])
    print(T.format_table(["case", "tg compiled", "tg eager", "torch eager"], rows))


if __name__ == "__main__":
    main()
