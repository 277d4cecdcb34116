"""A training step written as PyTorch users write it, in every mode tracegrad offers.

    model = nn.Sequential(nn.Linear(a, b), nn.ReLU(), ..., nn.Linear(y, z))
    loss_fn, opt = nn.CrossEntropyLoss(), optim.SGD(model.parameters(), lr, momentum=0.9)
    def step(x, y):
        opt.zero_grad(); loss = loss_fn(model(x), y); loss.backward(); opt.step()
        return loss

Modes: tracegrad eager; `tg.compile(model)` with eager backward and optimizer; the whole
step compiled (`tg.compile(step)`; if tracegrad falls back to eager, the warning is shown);
PyTorch eager (one thread: the others share this machine; `torch.compile` too with
`--torch-compile`, when its CPU backend works here); hand-written numpy, the limit (the
same math, updates in place as it goes). Sizes: batch 32 64-64-10, batch 64 784-128-10,
batch 256 784-512-512-10 (ReLU) and a 50-layer 512-wide tanh MLP at batch 256.

Reported per size: median step time over interleaved rounds (bench/_timing.py, Notes
[Interleaving] and [Thread pools]) as a ratio to numpy, and microseconds; steady peak
memory of a warm step, the first call's time and peak and the peak of the call that
compiles the whole step, each measured in a fresh process (tracemalloc plus a compiled
program's persistent scratch arenas: "step" is the growth above what is live before a warm
step, the previous step's `.grad` that zero_grad drops counting as freed; "total" is
everything the step holds at its peak: parameters, optimizer state, the `.grad`s PyTorch
semantics keep, transient memory; "first" and "compile" are the peaks of the first call and
of the call that compiles, above what is live before them; PyTorch's allocator is invisible
to tracemalloc, so its figures are the growth of the resident set, see bench/memory.py). All
modes are first checked to compute the same loss for the same parameters.

Every library runs on `--threads` threads (default 1: numpy's BLAS through
OPENBLAS_NUM_THREADS/OMP_NUM_THREADS, set before numpy loads, and `torch.set_num_threads`):
on a small shared machine, BLAS worker threads that spin while others compete for the cores
distort every figure.

    python bench/train_step.py [--quick] [--rounds N] [--only tiny,medium] [--optim adam]
                               [--threads N] [--torch-compile] [--no-memory]
"""
import argparse
import json
import os
import subprocess
import sys
import time
import warnings


def _threads_from_argv(argv):
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


THREADS = _threads_from_argv(sys.argv)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = THREADS            # before numpy (and torch) load their thread pools

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import _timing as T  # noqa: E402,I100

SIZES = {"tiny": (32, [64, 64, 10], "relu"), "medium": (64, [784, 128, 10], "relu"),
         "wide": (256, [784, 512, 512, 10], "relu"), "deep": (256, [512] * 51, "tanh")}
MODES = ["numpy", "tg eager", "tg compile(model)", "tg compile(step)", "torch eager",
         "torch.compile"]
LR, MOMENTUM = 0.01, 0.9
BETAS, EPS = (0.9, 0.999), 1e-8
MiB = 2 ** 20


# ---------------- the step in each library ----------------
def initial_params(sizes, seed=0):
    """[(W (out, in), b (out,)), ...] float32, PyTorch's default Linear init ranges."""
    rng = np.random.default_rng(seed)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        bound = 1 / np.sqrt(a)
        layers.append((rng.uniform(-bound, bound, (b, a)).astype(np.float32),
                       rng.uniform(-bound, bound, b).astype(np.float32)))
    return layers


def build_model(lib, sizes, act, params):
    nn = lib.nn
    mods = []
    for i, (w, b) in enumerate(params):
        lin = nn.Linear(sizes[i], sizes[i + 1])
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(w))
            lin.bias.copy_(lib.tensor(b))
        mods.append(lin)
        if i < len(params) - 1:
            mods.append(nn.Tanh() if act == "tanh" else nn.ReLU())
    return nn.Sequential(*mods)


def make_optimizer(lib, model, optim):
    if optim == "adam":
        return lib.optim.Adam(model.parameters(), lr=LR, betas=BETAS, eps=EPS)
    return lib.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def library_step(lib, model, optim, compile_model=False, compile_step=False):
    """The step as a PyTorch user writes it; `lib` is tracegrad or torch."""
    loss_fn = lib.nn.CrossEntropyLoss()
    opt = make_optimizer(lib, model, optim)
    net = lib.compile(model) if compile_model else model

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss
    return lib.compile(step) if compile_step else step


class NumpyStep:
    """Hand-written forward, softmax cross-entropy, backward and the optimizer update,
    each parameter updated as soon as its gradient exists, activations dropped after use."""

    def __init__(self, params, act, optim):
        self.ps = [(w.copy(), b.copy()) for w, b in params]
        self.act, self.optim, self.t = act, optim, 0
        self.state = [[np.zeros_like(a) for a in wb] for wb in self.ps] if optim == "sgd" \
            else [[(np.zeros_like(a), np.zeros_like(a)) for a in wb] for wb in self.ps]

    def __call__(self, x, y):
        acts, h = [x], x
        n_layers = len(self.ps)
        for i, (w, b) in enumerate(self.ps):
            h = h @ w.T
            h += b
            if i < n_layers - 1:
                np.tanh(h, out=h) if self.act == "tanh" else np.maximum(h, 0, out=h)
            acts.append(h)
        n, rows = x.shape[0], np.arange(x.shape[0])
        h -= h.max(axis=1, keepdims=True)
        picked = h[rows, y]
        np.exp(h, out=h)
        s = h.sum(axis=1, keepdims=True)
        loss = float((np.log(s).ravel() - picked).mean())
        g = h
        g /= s
        g[rows, y] -= 1
        g /= n
        self.t += 1
        for i in range(n_layers - 1, -1, -1):
            w, b = self.ps[i]
            a = acts[i]
            gw, gb = g.T @ a, g.sum(axis=0)
            if i > 0:
                g2 = g @ w
                if self.act == "tanh":
                    g2 *= 1 - a * a
                else:
                    g2 *= a > 0
                g = g2
            self._update(i, 0, w, gw)
            self._update(i, 1, b, gb)
            acts[i + 1] = None
        return loss

    def _update(self, i, k, p, g):
        if self.optim == "sgd":
            buf = self.state[i][k]
            if self.t == 1:
                buf[...] = g
            else:
                buf *= MOMENTUM
                buf += g
            buf_lr = np.multiply(buf, LR, out=g)
            p -= buf_lr
            return
        m, v = self.state[i][k]
        m += (g - m) * (1 - BETAS[0])
        v *= BETAS[1]
        v += (g * (1 - BETAS[1])) * g
        step_size = LR / (1 - BETAS[0] ** self.t)
        denom = np.sqrt(v)
        denom /= (1 - BETAS[1] ** self.t) ** 0.5
        denom += EPS
        np.divide(m, denom, out=g)
        g *= -step_size
        p += g


# ---------------- one mode, set up ----------------
def setup(mode, size, optim):
    """(step(), info) for `mode` at `size`: a zero-argument callable running one step."""
    batch, sizes, act = SIZES[size]
    params = initial_params(sizes)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch)
    info = {}
    if mode == "numpy":
        f = NumpyStep(params, act, optim)
        return (lambda: f(x, y)), info, None
    if mode.startswith("torch"):
        import torch
        torch.set_num_threads(int(THREADS))
        model = build_model(torch, sizes, act, params)
        f = library_step(torch, model, optim, compile_step=mode == "torch.compile")
        tx, ty = torch.tensor(x), torch.tensor(y)
        return (lambda: f(tx, ty)), info, [p for p in model.parameters()]
    import tracegrad as tg
    model = build_model(tg, sizes, act, params)
    f = library_step(tg, model, optim, compile_model=mode == "tg compile(model)",
                     compile_step=mode == "tg compile(step)")
    tx, ty = tg.tensor(x), tg.tensor(y)
    info["compiled"] = f if mode == "tg compile(step)" else None
    return (lambda: f(tx, ty)), info, None


def _loss_value(v):
    return float(v if isinstance(v, float) else v.item())


def _arena_bytes(step_info):
    """Scratch arenas a compiled path keeps between calls (invisible to tracemalloc)."""
    f = step_info.get("compiled")
    total = 0
    for path in getattr(f, "programs", None) or ():
        for plan in (getattr(path, "forward_plan", None), getattr(path, "backward_plan", None)):
            total += getattr(plan, "arena_bytes", 0) or 0
    return total


# ---------------- fresh-process measurements ----------------
def child_first_time(mode, size, optim):
    """The first call's time (trace, passes, code generation), with no tracemalloc slowing
    its allocations (in a fresh process)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step, _, _ = setup(mode, size, optim)
        t0 = time.perf_counter()
        step()
        return {"first_s": time.perf_counter() - t0}


def child_memory(mode, size, optim):
    """Two figures of a warm step (in a fresh process): its growth above what is live
    before it (the previous step's `.grad`, which zero_grad drops, counts as freed) and the
    total footprint at its peak (parameters, optimizer state, the `.grad`s PyTorch semantics
    keep between steps, and the step's transient memory)."""
    import tracemalloc
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if not mode.startswith("torch"):
            import tracegrad  # noqa: F401  (the library's own import is not the step's)
            tracemalloc.start()             # everything the step holds is traced
        step, info, torch_params = setup(mode, size, optim)
        if mode.startswith("torch"):
            return _torch_memory(step, torch_params)
        for _ in range(3):
            step()
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        step()
        peak = tracemalloc.get_traced_memory()[1] + _arena_bytes(info)
        tracemalloc.stop()
    return {"steady_peak": peak - before, "total_peak": peak,
            "warnings": sorted({str(w.message)[:200] for w in caught})}


def child_first_peak(mode, size, optim):
    """tracemalloc peak of the very first call (tracing and compiling included), and for
    the whole step compiled, of the call that builds the program, above what is live before
    it: a first call that creates optimizer state (momentum buffers) changes state it
    reads, so it is traced but not cached, and the second call traces again and compiles."""
    import tracemalloc
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step, info, _ = setup(mode, size, optim)
        if mode.startswith("torch"):
            return {}
        tracemalloc.start()
        step()
        out = {"first_peak": tracemalloc.get_traced_memory()[1]}
        f = info.get("compiled")
        for _ in range(3):
            if f is None or f.programs:
                break
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            step()
            out["compile_peak"] = tracemalloc.get_traced_memory()[1] - before
        if f is not None and f.programs and "compile_peak" not in out:
            out["compile_peak"] = out["first_peak"]
        tracemalloc.stop()
    return out


def _rss(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(field)


def _torch_memory(step, params):
    """PyTorch: resident-set growth of the first and of a warm step (VmHWM reset), the
    previous step's gradients dropped first (the tracemalloc figures of the other modes do
    not see memory allocated before they start either)."""
    def grown(fn):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = _rss("VmRSS")
        t0 = time.perf_counter()
        fn()
        return _rss("VmHWM") - before, time.perf_counter() - t0
    try:
        first_peak, first_s = grown(step)
        step()
        for p in params:
            p.grad = None
        steady, _ = grown(step)
    except OSError:
        return {}
    return {"first_s": first_s, "first_peak": first_peak, "steady_peak": steady,
            "how": "RSS growth"}


def in_fresh_process(kind, mode, size, optim):
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    cmd = [sys.executable, __file__, "--child", kind, mode, size, "--optim", optim,
           "--threads", THREADS]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "?"}
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------- timing ----------------
def check_same_loss(steps):
    """Every mode's first loss equals numpy's (same parameters, same batch)."""
    ref = _loss_value(steps["numpy"]())
    for name, step in steps.items():
        if name == "numpy":
            continue
        got = _loss_value(step())
        if not np.isclose(got, ref, rtol=1e-4, atol=1e-5):
            raise SystemExit(f"{name}: first loss {got} differs from numpy's {ref}")


def time_size(size, modes, optim, rounds):
    steps = {}
    for mode in modes:
        steps[mode] = setup(mode, size, optim)[0]
    # fresh set-ups for the check (each step trains its own copy of the parameters)
    check = {m: setup(m, size, optim)[0] for m in modes}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_same_loss(check)
        del check
        inner = {"tiny": 20, "medium": 10, "wide": 2, "deep": 1}[size]

        def repeat(fn):
            def run():
                for _ in range(inner):
                    fn()
            return run
        samples = T.interleaved({m: repeat(s) for m, s in steps.items()}, rounds, warmup=3,
                                settle=0.02, apart=[m for m in modes if m.startswith("torch")],
                                pause=0.2)
    return {m: v / inner for m, v in T.medians(samples).items()}


def torch_compile_works():
    """torch.compile needs a working CPU backend (a C++ compiler); try a tiny model."""
    try:
        out = subprocess.run([sys.executable, "-c", "import torch; f = torch.compile("
                              "torch.nn.Linear(3, 2)); f(torch.randn(4, 3)).sum().backward()"],
                             capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        return False
    return out.returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="few rounds, tiny and medium only")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--only", help="comma-separated sizes: " + ",".join(SIZES))
    ap.add_argument("--optim", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--torch-compile", action="store_true")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--threads", default="1", help="threads for numpy's BLAS and torch")
    ap.add_argument("--child", nargs=3)
    a = ap.parse_args()
    if a.child:
        kind, mode, size = a.child
        fn = {"memory": child_memory, "first": child_first_peak,
              "time": child_first_time}[kind]
        print(json.dumps(fn(mode, size, a.optim)))
        return
    sizes = a.only.split(",") if a.only else (["tiny", "medium"] if a.quick else list(SIZES))
    rounds = a.rounds or (7 if a.quick else 25)
    modes = [m for m in MODES if m != "torch.compile"]
    try:
        import torch  # noqa: F401
    except ImportError:
        modes = [m for m in modes if not m.startswith("torch")]
    if a.torch_compile and "torch eager" in modes:
        if torch_compile_works():
            modes.append("torch.compile")
        else:
            print("torch.compile: no working CPU backend here, skipped")
    import tracegrad as tg
    print(f"train step ({a.optim}), numpy {np.__version__}, tracegrad {tg.__version__}, "
          f"{THREADS} thread(s), {rounds} rounds, medians")
    for size in sizes:
        report(size, modes, a.optim, rounds, not a.no_memory)


def report(size, modes, optim, rounds, memory):
    batch, sizes, act = SIZES[size]
    shape = "-".join(map(str, sizes)) if len(sizes) < 6 else f"{len(sizes) - 1} layers x {sizes[1]}"
    print(f"\n{size}: batch {batch}, {shape} ({act})")
    meds = time_size(size, modes, optim, rounds)
    mem = {}
    if memory:
        for m in modes:
            mem[m] = in_fresh_process("memory", m, size, optim)
            mem[m].update(in_fresh_process("first", m, size, optim))
            if not m.startswith("torch"):      # (PyTorch's: timed in its memory run)
                mem[m].update(in_fresh_process("time", m, size, optim))
    rows = []
    base = meds.get("numpy")
    base_mem = mem.get("numpy", {}).get("total_peak")
    for m in modes:
        r = mem.get(m, {})
        sp, tp = r.get("steady_peak"), r.get("total_peak")
        rows.append([m, meds[m] / base, meds[m] * 1e6,
                     None if sp is None else sp / MiB,
                     None if tp is None else tp / MiB,
                     None if tp is None or not base_mem else tp / base_mem,
                     None if r.get("first_s") is None else r["first_s"] * 1e3,
                     None if r.get("first_peak") is None else r["first_peak"] / MiB,
                     None if r.get("compile_peak") is None else r["compile_peak"] / MiB])
    print(T.format_table(["mode", "x numpy", "us/step", "step MiB", "total MiB",
                          "x numpy total", "first ms", "first MiB", "compile MiB"], rows))
    first = {m: mem.get(m, {}).get("first_peak") for m in ("tg eager", "tg compile(step)")}
    if all(first.values()):
        print(f"first call, compile(step) / eager: "
              f"{first['tg compile(step)'] / first['tg eager']:.2f}")
    if "torch eager" in meds:
        print(f"tracegrad eager / torch eager: {meds['tg eager'] / meds['torch eager']:.2f}")
    for m in modes:
        for w in mem.get(m, {}).get("warnings", ()):
            print(f"  {m}: warning: {w}")
        if "error" in mem.get(m, {}):
            print(f"  {m}: memory run failed: {mem[m]['error']}")
    if any("RSS" in mem.get(m, {}).get("how", "") for m in modes):
        print("  (PyTorch memory: resident-set growth, not tracemalloc; compare roughly)")


if __name__ == "__main__":
    main()
