"""Compiled programs vs hand-written numpy (the limit), tracegrad eager and PyTorch eager.

Cases, each timed interleaved in one run (bench/_timing.py, Note [Interleaving]; the MLP
steps also follow Note [Thread pools], since numpy's and PyTorch's BLAS threads interfere):
- MLP training step (forward, softmax cross-entropy, backward, SGD) at
  batch 32 64-64-10, batch 64 784-128-10 and batch 256 784-512-512-10;
- the tutorial loop (`while y.data.norm() < 1000: y = y * 2`, then `y.backward(v)`);
- a 200-op elementwise chain on shape-(4,) tensors, forward + backward.
The compiled training step is one `tracegrad.compile`d function that computes the loss,
its gradients (`tracegrad.autograd.grad`) and the in-place SGD update, exactly as a user
writes a step. Results are checked against numpy before timing. Also reports the first-call
compile time of the medium MLP step. Each MLP configuration is measured in several fresh
processes (Note [Fresh processes]); the loop and the chain in this one.

    python bench/compiled.py [--rounds N] [--processes P] [--quick]
"""
import argparse
import json
import os
import statistics
import subprocess
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

from _mlp import make_params, numpy_step, tg_compiled_body, tg_eager_step, torch_step  # noqa


def mlp_cases(batch, sizes, first_alloc=0):
    """The MLP step per implementation; `first_alloc` rotates which one allocates its
    parameters first (Note [Fresh processes])."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch)
    base = make_params(sizes)
    makers = [lambda: [p.copy() for p in base],
              lambda: [tg.tensor(p, requires_grad=True) for p in base],
              lambda: [tg.tensor(p, requires_grad=True) for p in base],
              lambda: [torch.tensor(p, requires_grad=True) for p in base] if torch else None]
    made = {}
    for k in range(len(makers)):
        i = (k + first_alloc) % len(makers)
        made[i] = makers[i]()
    np_ps, tg_ps, tge_ps, t_ps = (made[i] for i in range(len(makers)))
    tx, ty = tg.tensor(x), tg.tensor(y)
    step = tg.compile(tg_compiled_body(tg))
    t0 = time.perf_counter()
    step(tg_ps, tx, ty)
    first = time.perf_counter() - t0
    numpy_step(np_ps, x, y)
    tg_eager_step(tg, tge_ps, tx, ty)
    for a, b, c in zip(np_ps, tg_ps, tge_ps):       # same state after one step
        np.testing.assert_allclose(b.detach().numpy(), a, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(c.detach().numpy(), a, rtol=1e-4, atol=1e-5)
    l1 = numpy_step(np_ps, x, y)
    l2 = step(tg_ps, tx, ty).item()
    assert abs(l1 - l2) < 1e-4 * max(1.0, abs(l1)), (l1, l2)
    cases = {"numpy": lambda: numpy_step(np_ps, x, y),
             "tg compiled": lambda: step(tg_ps, tx, ty),
             "tg eager": lambda: tg_eager_step(tg, tge_ps, tx, ty)}
    if torch is not None:
        txx, tyy = torch.tensor(x), torch.tensor(y)
        cases["torch eager"] = lambda: torch_step(torch, t_ps, txx, tyy)
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


MLPS = [(32, (64, 64, 10)), (64, (784, 128, 10)), (256, (784, 512, 512, 10))]


def one_mlp(batch, sizes, rounds, first_alloc):
    """Medians of one MLP configuration measured in this process (printed as JSON)."""
    cases, first = mlp_cases(batch, sizes, first_alloc)
    r = rounds if batch < 256 else max(5, rounds // 4)
    samples = T.interleaved(cases, r, inner=5 if batch < 256 else 1, settle=0.01,
                            apart=("torch eager",))
    print(json.dumps({"medians": T.medians(samples), "first": first}))


def mlp_in_processes(batch, sizes, rounds, processes):
    """Note [Fresh processes]: at batch 64, 784-128-10 a step's time depends on where its
    arrays land in memory: the final in-place update of the 784x128 weight costs 10 us with
    the array in cache and ~130 us without, and which implementation's weights stay cached
    follows the order in which the implementations allocated them (swapping the order of two
    otherwise identical configurations flipped a 1.2x difference to 0.9x). So each process
    lets another implementation allocate first (`first_alloc`), and the table gives medians
    over the processes and the range of the ratio to numpy; use 4 or more processes so that
    every implementation allocates first once."""
    runs = []
    for k in range(processes):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", str(batch),
                              "-".join(map(str, sizes)), "--rounds", str(rounds),
                              "--first-alloc", str(k % 4)],
                             capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    names = list(runs[0]["medians"])
    ratios = {n: [r["medians"][n] / r["medians"]["numpy"] for r in runs] for n in names}
    meds = {n: statistics.median(r["medians"][n] for r in runs) for n in names}
    rows = [[n, meds[n] * 1e6, statistics.median(ratios[n]), min(ratios[n]), max(ratios[n])]
            for n in names]
    print(f"\nMLP step batch {batch} {'-'.join(map(str, sizes))} ({processes} processes)")
    print(T.format_table(["impl", "median us", "x numpy", "min x", "max x"], rows))
    ratio = {n: statistics.median(ratios[n]) for n in names}
    return ratio, statistics.median(r["first"] for r in runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--processes", type=int, default=4,
                    help="fresh processes per MLP configuration (Note [Fresh processes])")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--one", nargs=2, metavar=("BATCH", "SIZES"), help=argparse.SUPPRESS)
    ap.add_argument("--first-alloc", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    rounds = 10 if a.quick else a.rounds
    if a.one:
        one_mlp(int(a.one[0]), tuple(int(v) for v in a.one[1].split("-")), rounds,
                a.first_alloc)
        return
    summary = []
    for batch, sizes in MLPS:
        ratio, first = mlp_in_processes(batch, sizes, rounds, 1 if a.quick else a.processes)
        summary.append((f"MLP {batch} {'-'.join(map(str, sizes))}", ratio))
        if sizes == (784, 128, 10):
            print(f"first-call compile time (trace + passes + codegen): {first * 1e3:.0f} ms")
    for title, cases, r, inner in (
            ("tutorial loop (forward + y.backward(v))", loop_cases(), rounds, 5),
            ("200-op chain on shape (4,), forward + backward", chain_cases(),
             max(5, rounds // 2), 1)):
        meds = report(title, T.interleaved(cases, r, inner=inner))
        summary.append((title.split(" (")[0].split(" on ")[0],
                        {n: m / meds["numpy"] for n, m in meds.items()}))
    print("\nsummary: ratio to hand-written numpy (lower is better; MLP steps: median over "
          "processes)")
    rows = [[name, m["tg compiled"], m["tg eager"], m.get("torch eager")] for name, m in summary]
    print(T.format_table(["case", "tg compiled", "tg eager", "torch eager"], rows))


if __name__ == "__main__":
    main()
