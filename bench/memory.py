"""Peak memory of one training step, one fresh process per configuration.

Configurations: hand-written numpy (in-place SGD as it goes), tracegrad eager
(`loss.backward()` + SGD), tracegrad compiled with planning off, compiled (default,
"balanced") and compiled with rematerialization ("min"), and PyTorch eager when installed.
Models: the medium MLP (batch 64, 784-128-10, relu) and a 50-layer 512-wide tanh MLP at
batch 256. For numpy-backed configurations the figure is tracemalloc's peak during one step
(after a warm-up step that compiles), above parameters and inputs, plus any persistent
scratch arena the program keeps between calls. tracemalloc cannot see PyTorch's allocator,
so PyTorch is measured by the growth of the process's resident set over one step after two
warm-up steps, with its gradients dropped first as the other configurations keep none: the
kernel's peak-RSS mark (VmHWM) is reset just before the step (Linux, /proc/self/clear_refs),
so neither one-time set-up (thread pools, code paged in: ~10 MiB) nor an earlier high-water
mark enters the figure. Comparable only roughly (page granularity, small blocks kept by
malloc). Also prints each compiled program's planned peak against its lower bound.

    python bench/memory.py [--only NAME]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _mlp import (make_params, numpy_step, tg_compiled_body, tg_eager_step,  # noqa: E402
                  torch_step)
MODELS = {"medium": (64, [784, 128, 10], "relu"), "deep": (256, [512] * 51, "tanh")}
CONFIGS = ["numpy", "tg eager", "tg compiled (planning off)", "tg compiled",
           "tg compiled (memory=min)", "torch eager"]


def run_one(model, config):
    """Runs in a fresh process: returns {"peak": bytes, ...}."""
    import tracemalloc
    import numpy as np
    sys.path.insert(0, os.path.join(HERE, ".."))
    batch, sizes, act = MODELS[model]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch)
    base = make_params(sizes)
    info = {}
    if config == "numpy":
        step = lambda: numpy_step(base, x, y, act)  # noqa: E731
    elif config == "torch eager":
        import torch
        ps = [torch.tensor(p, requires_grad=True) for p in base]
        tx, ty = torch.tensor(x), torch.tensor(y)

        step = lambda: torch_step(torch, ps, tx, ty, act)  # noqa: E731
    else:
        import tracegrad as tg
        ps = [tg.tensor(p, requires_grad=True) for p in base]
        tx, ty = tg.tensor(x), tg.tensor(y)
        if config == "tg eager":
            def step():
                tg_eager_step(tg, ps, tx, ty, act)
                for p in ps:                   # drop the grads, as the other steps keep none
                    p.grad = None
        else:
            mem = {"tg compiled (planning off)": "off", "tg compiled": "balanced",
                   "tg compiled (memory=min)": "min"}[config]
            compiled = tg.compile(tg_compiled_body(tg, act), memory=mem)
            step = lambda: compiled(ps, tx, ty)  # noqa: E731
    if config == "torch eager":
        return _torch_peak(step, ps)
    step()                                        # warm-up: traces and compiles
    step()                                        # first compiled run: allocates the arena
    if config.startswith("tg compiled"):
        path = compiled.programs[0]
        plan = path.forward_plan
        info["arena"] = _arena_bytes(path)
        if plan:
            info["planned_peak"] = plan.planned_peak
            info["lower_bound"] = plan.lower_bound
            info["naive"] = plan.naive_bytes
    tracemalloc.start()
    tracemalloc.reset_peak()
    step()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    info["peak"] = peak + info.get("arena", 0)
    info["how"] = "tracemalloc"
    return info


def _arena_bytes(path):
    """Scratch arenas a compiled path keeps between calls (forward and backward program):
    allocated on the first run, so tracemalloc started later does not see them."""
    return sum(p.arena_bytes for p in (path.forward_plan, path.backward_plan) if p is not None)


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no {field} in /proc/self/status")


def _torch_peak(step, ps):
    """Resident-set growth over one PyTorch step (see the module docstring)."""
    import resource
    step()
    step()
    for p in ps:                               # as the numpy-backed steps keep no grads
        p.grad = None
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")                       # reset VmHWM to the current RSS
        before = _status("VmRSS")
        step()
        return {"peak": _status("VmHWM") - before,
                "how": "RSS growth over a warm step (VmHWM reset)"}
    except OSError:                            # not Linux: the process's high-water mark
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        step()
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return {"peak": after - before, "how": "peak RSS growth (may hide growth below an "
                "earlier high-water mark)"}


def run_remat(mode):
    """Swish MLP (8 x 512, batch 256): compiled loss + backward; peak, saved bytes, time."""
    import time
    import tracemalloc
    import numpy as np
    sys.path.insert(0, os.path.join(HERE, ".."))
    import tracegrad as tg
    rng = np.random.default_rng(1)
    ps = [tg.tensor(p, requires_grad=True) for p in make_params([512] * 9)]
    x = tg.tensor(rng.standard_normal((256, 512)).astype(np.float32))

    def loss_fn(ps, x):
        h = x
        for i in range(0, len(ps), 2):
            a = h @ ps[i] + ps[i + 1]
            h = a * a.sigmoid()                    # swish: sigmoid(a) is cheap to recompute
        return (h * h).mean()
    f = tg.compile(loss_fn, memory=mode)

    def step():
        for p in ps:
            p.grad = None
        f(ps, x).backward()
    for _ in range(3):
        step()
    tracemalloc.start()
    tracemalloc.reset_peak()
    step()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    path = f.programs[0]
    arena = _arena_bytes(path)                 # held between calls: part of the peak
    times = []
    for _ in range(15):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    saved = sum(v.type.nbytes for v in path.part.saved if v not in path.part.forward.inputs)
    return {"peak": peak + arena, "arena": arena, "saved": saved,
            "recomputed": len(path.part.recomputed), "ms": sorted(times)[len(times) // 2] * 1e3}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--child", nargs=2)
    ap.add_argument("--remat-child")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(run_one(*a.child)))
        return
    if a.remat_child:
        print(json.dumps(run_remat(a.remat_child)))
        return
    MiB = 2 ** 20
    for model, (batch, sizes, act) in MODELS.items():
        if a.only and a.only != model:
            continue
        print(f"\n{model}: batch {batch}, {len(sizes) - 1} layers {sizes[0]}..{sizes[-1]} ({act})")
        res = {}
        for cfg in CONFIGS:
            if cfg == "torch eager":
                try:
                    import torch  # noqa: F401
                except ImportError:
                    continue
            # glibc: serve blocks >= 64 KiB by mmap and return them on free, so the peak RSS
            # growth of a step follows its live memory (PyTorch's allocator is malloc)
            env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
            out = subprocess.run([sys.executable, __file__, "--child", model, cfg],
                                 capture_output=True, text=True, env=env)
            if out.returncode != 0:
                print(f"  {cfg}: failed\n{out.stderr[-2000:]}")
                continue
            res[cfg] = json.loads(out.stdout.strip().splitlines()[-1])
        base = res.get("numpy", {}).get("peak")
        print(f"  {'configuration':30s} {'peak MiB':>9s} {'x numpy':>8s}  notes")
        for cfg, r in res.items():
            note = r["how"]
            if "planned_peak" in r:
                note += (f"; planned {r['planned_peak'] / MiB:.1f} MiB vs lower bound "
                         f"{r['lower_bound'] / MiB:.1f} MiB ({r['planned_peak'] / max(1, r['lower_bound']):.3f}x),"
                         f" naive {r['naive'] / MiB:.1f} MiB, arena {r['arena'] / MiB:.1f} MiB")
            print(f"  {cfg:30s} {r['peak'] / MiB:9.1f} {r['peak'] / base if base else 0:8.2f}  {note}")

    if a.only in (None, "remat"):
        print("\nrematerialization: swish MLP 8 x 512, batch 256, compiled loss + backward")
        print(f"  {'memory=':10s} {'peak MiB':>9s} {'arena MiB':>10s} {'saved MiB':>10s} "
              f"{'recomputed':>10s} {'step ms':>8s}")
        for mode in ("balanced", "min"):
            out = subprocess.run([sys.executable, __file__, "--remat-child", mode],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                print(f"  {mode}: failed\n{out.stderr[-2000:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"  {mode:10s} {r['peak'] / MiB:9.1f} {r['arena'] / MiB:10.1f} "
                  f"{r['saved'] / MiB:10.1f} {r['recomputed']:10d} {r['ms']:8.2f}")


if __name__ == "__main__":
    main()
