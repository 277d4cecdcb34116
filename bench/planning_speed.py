"""Does memory planning cost speed? Compiled MLP steps with memory="balanced" (default)
vs memory="off", interleaved in one run (bench/_timing.py), medians and ratios: measured with
either configuration allocating its parameters first, and the geometric mean of the two.

    python bench/planning_speed.py [--rounds N]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import _timing as T  # noqa: E402
import tracegrad as tg  # noqa: E402
from _mlp import make_params, tg_compiled_body  # noqa: E402

CONFIGS = [(32, (64, 64, 10), "relu"), (64, (784, 128, 10), "relu"),
           (256, (784, 512, 512, 10), "relu"), (256, tuple([512] * 51), "tanh")]


def measure(batch, sizes, act, order, rounds):
    """Medians of the step compiled with each memory mode, built in `order`: which one
    allocates its parameters first decides whose weights stay in cache (see Note [Fresh
    processes] in bench/compiled.py), so callers measure both orders."""
    rng = np.random.default_rng(1)
    x = tg.tensor(rng.standard_normal((batch, sizes[0])).astype(np.float32))
    y = tg.tensor(rng.integers(0, sizes[-1], batch))
    cases = {}
    for mode in order:
        ps = [tg.tensor(p, requires_grad=True) for p in make_params(sizes)]
        step = tg.compile(tg_compiled_body(tg, act), memory=mode)
        step(ps, x, y)
        cases[mode] = (lambda s, p: lambda: s(p, x, y))(step, ps)
    big = batch * sizes[1] > 100_000
    return T.medians(T.interleaved(cases, max(8, rounds // (4 if big else 1)),
                                   inner=1 if big else 5, settle=0.01))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    a = ap.parse_args()
    rows = []
    for batch, sizes, act in CONFIGS:
        m1 = measure(batch, sizes, act, ("off", "balanced"), a.rounds)
        m2 = measure(batch, sizes, act, ("balanced", "off"), a.rounds)
        r1, r2 = m1["balanced"] / m1["off"], m2["balanced"] / m2["off"]
        rows.append([f"{len(sizes) - 1}x{sizes[1]} batch {batch}",
                     (m1["off"] + m2["off"]) / 2 * 1e6, (m1["balanced"] + m2["balanced"]) / 2 * 1e6,
                     r1, r2, (r1 * r2) ** 0.5])
    print(T.format_table(["MLP step", "planning off us", "balanced us", "off first",
                          "balanced first", "balanced / off"], rows))


if __name__ == "__main__":
    main()
