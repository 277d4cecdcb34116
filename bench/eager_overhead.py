"""Eager-mode overhead per op: tracegrad vs PyTorch vs hand-written numpy.

A chain of 200 elementwise ops on shape-(4,) float32 tensors (so the arithmetic is
negligible and what is measured is the per-op machinery: dispatch, dtype rules, wrapping,
recording the graph, and the backward engine), forward then backward. The numpy baseline
is the same math with a hand-written backward: the floor any Python autograd can reach.

    python bench/eager_overhead.py            # 200 rounds
    python bench/eager_overhead.py --quick    # 20 rounds, a smoke run
    python bench/eager_overhead.py --rounds 500

Before timing, the three implementations are checked to give the same output and the
same gradients. Timing is interleaved round-robin (see bench/_timing.py, Note [Interleaving]).
"""
import argparse
import os
import sys

import numpy as np

try:
    from . import _timing as T
except ImportError:                 # run as a script: bench/ is on sys.path
    import _timing as T

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tracegrad  # noqa: E402

N_OPS = 200
SHAPE = (4,)

# ---- the op mix: (name, op on tensors (both libraries), numpy forward, numpy backward) ----
# A 10-op cycle that keeps values bounded over 200 ops: exp only sees tanh's output,
# sigmoid brings the value back into (0, 1) at the end of each cycle.
# numpy backward: bwd(g, x, y, w) -> (grad for x, grad for w or None)
CYCLE = [
    ("mul 1.5", lambda x, w: x * 1.5,
     lambda x, w: x * 1.5, lambda g, x, y, w: (g * 1.5, None)),
    ("add 0.5", lambda x, w: x + 0.5,
     lambda x, w: x + 0.5, lambda g, x, y, w: (g, None)),
    ("sin", lambda x, w: x.sin(),
     lambda x, w: np.sin(x), lambda g, x, y, w: (g * np.cos(x), None)),
    ("mul w", lambda x, w: x * w,
     lambda x, w: x * w, lambda g, x, y, w: (g * w, g * x)),
    ("tanh", lambda x, w: x.tanh(),
     lambda x, w: np.tanh(x), lambda g, x, y, w: (g * (1.0 - y * y), None)),
    ("exp", lambda x, w: x.exp(),
     lambda x, w: np.exp(x), lambda g, x, y, w: (g * y, None)),
    ("sub 1", lambda x, w: x - 1.0,
     lambda x, w: x - 1.0, lambda g, x, y, w: (g, None)),
    ("div 3", lambda x, w: x / 3.0,
     lambda x, w: x / 3.0, lambda g, x, y, w: (g / 3.0, None)),
    ("sigmoid", lambda x, w: x.sigmoid(),
     lambda x, w: 1.0 / (1.0 + np.exp(-x)), lambda g, x, y, w: (g * y * (1.0 - y), None)),
    ("add w", lambda x, w: x + w,
     lambda x, w: x + w, lambda g, x, y, w: (g, g)),
]
CHAIN = [CYCLE[i % len(CYCLE)] for i in range(N_OPS)]


def inputs():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, SHAPE).astype(np.float32)
    w = rng.uniform(0.5, 1.5, SHAPE).astype(np.float32)
    return x, w


def autograd_runner(lib, x0, w0):
    """(forward, forward+backward, leaves) for tracegrad or torch: the same program on both."""
    x = lib.tensor(x0, requires_grad=True)
    w = lib.tensor(w0, requires_grad=True)
    seed = lib.ones(SHAPE)
    ops = [op for _, op, _, _ in CHAIN]

    def forward():
        h = x
        for op in ops:
            h = op(h, w)
        return h

    def forward_backward():
        x.grad = None
        w.grad = None
        forward().backward(seed)

    return forward, forward_backward, (x, w)


def numpy_runner(x, w):
    """The same chain in numpy, with a tape and a hand-written backward."""
    fwds = [f for _, _, f, _ in CHAIN]
    bwds = [b for _, _, _, b in CHAIN]
    seed = np.ones(SHAPE, np.float32)

    def forward():
        tape = []
        h = x
        for f in fwds:
            y = f(h, w)
            tape.append((h, y))
            h = y
        return h, tape

    def forward_backward():
        h, tape = forward()
        g, gw = seed, np.zeros_like(w)
        for b, (xi, yi) in zip(reversed(bwds), reversed(tape)):
            g, dw = b(g, xi, yi, w)
            if dw is not None:
                gw = gw + dw
        return h, g, gw

    return (lambda: forward()[0]), forward_backward


def check_agreement(autograd, numpy_fb):
    """Assert each autograd library computes numpy's values and hand-written gradients."""
    ref_y, ref_gx, ref_gw = numpy_fb()
    for name, (forward, forward_backward, (x, w)) in autograd.items():
        forward_backward()
        for what, got, want in (("output", forward().detach().numpy(), ref_y),
                                ("x.grad", x.grad.numpy(), ref_gx),
                                ("w.grad", w.grad.numpy(), ref_gw)):
            if got.dtype != np.float32 or not np.allclose(got, want, rtol=1e-4, atol=1e-6):
                raise AssertionError(f"{name} {what} differs from numpy:\n{got}\nvs\n{want}")


def build_runners():
    """{name: (forward, forward_backward)} for tracegrad, torch (if importable) and numpy,
    after checking that they agree."""
    x0, w0 = inputs()
    autograd = {"tracegrad": autograd_runner(tracegrad, x0, w0)}
    try:
        import torch
        torch.set_num_threads(1)     # tiny tensors: the thread pool only adds noise
        autograd["torch"] = autograd_runner(torch, x0, w0)
    except ImportError:
        pass
    numpy_f, numpy_fb = numpy_runner(x0, w0)
    check_agreement(autograd, numpy_fb)
    runners = {name: (f, fb) for name, (f, fb, _) in autograd.items()}
    runners["numpy"] = (numpy_f, numpy_fb)
    return runners


def measure(runners, rounds):
    """Interleaved timing of every runner's forward+backward and forward alone.

    Returns ({"fwd+bwd": {name: us per op}, "fwd": {...}}, {name: fwd+bwd samples})."""
    cases = {}
    for name, (forward, forward_backward) in runners.items():
        cases[(name, "fwd+bwd")] = forward_backward
        cases[(name, "fwd")] = forward
    samples = T.interleaved(cases, rounds)
    meds = T.medians(samples)
    per_op = {kind: {name: meds[(name, kind)] * 1e6 / N_OPS for name in runners}
              for kind in ("fwd+bwd", "fwd")}
    return per_op, {name: samples[(name, "fwd+bwd")] for name in runners}


def report(per_op, samples, rounds):
    versions = f"numpy {np.__version__}, tracegrad {tracegrad.__version__}"
    if "torch" in per_op["fwd"]:
        import torch
        versions += f", torch {torch.__version__}"
    print(f"eager overhead: {N_OPS} elementwise ops on float32{list(SHAPE)}, "
          f"{rounds} interleaved rounds, medians ({versions})")
    print()
    rows = [[name, per_op["fwd+bwd"][name], per_op["fwd"][name],
             f"{100 * T.spread(samples[name]):.0f}%"] for name in per_op["fwd"]]
    print(T.format_table(["per op (us)", "fwd+bwd", "fwd only", "IQR fwd+bwd"], rows))
    print()
    pairs = [("tracegrad", "torch"), ("tracegrad", "numpy"), ("torch", "numpy")]
    print(T.format_table(["ratio", "fwd+bwd", "fwd only"],
                         T.ratio_rows([per_op["fwd+bwd"], per_op["fwd"]], pairs)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=200, help="interleaved rounds (default 200)")
    p.add_argument("--quick", action="store_true", help="20 rounds: a smoke run")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    rounds = 20 if args.quick else args.rounds
    per_op, samples = measure(build_runners(), rounds)
    report(per_op, samples, rounds)
    return per_op


if __name__ == "__main__":
    main()
