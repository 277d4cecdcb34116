"""The training step with the bookkeeping users put in it, eager vs compiled (issue 11).

`bench/train_step.py` times the bare PyTorch idiom. Real steps also keep a step count and a
loss history on the trainer object (`Trainer.step` below: `self.global_step += 1`,
`self.losses.append(loss.item())`). Before Note [Numbers written to Python state] and
Note [Appends to the caller's lists] (compiler/place_writes.py, compiler/append_replay.py),
`tg.compile` ran such a step eagerly from its second call. This prints the medians of
that step per mode (hand-written numpy keeping the same count and history, tracegrad eager,
the step compiled, PyTorch eager) and their ratios to numpy, after checking that every mode
computes the same losses.

    python bench/logged_step.py [--rounds 25] [--only tiny,medium]
"""
import argparse
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import _timing as T  # noqa: E402,I100
import train_step as TS  # noqa: E402

MODES = ["numpy", "tg eager", "tg compile(step)", "torch eager"]


class Trainer:
    """The trainer object as users write it, over `lib` (tracegrad or torch)."""

    def __init__(self, lib, sizes, act, params, compiled=False):
        self.model = TS.build_model(lib, sizes, act, params)
        self.opt = TS.make_optimizer(lib, self.model, "sgd")
        self.loss_fn = lib.nn.CrossEntropyLoss()
        self.global_step, self.losses = 0, []
        if compiled:
            self.step = lib.compile(self.step)

    def step(self, x, y):
        self.opt.zero_grad()
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.global_step += 1
        self.losses.append(loss.item())
        return loss


class NumpyTrainer:
    def __init__(self, params, act):
        self.step_fn = TS.NumpyStep(params, act, "sgd")
        self.global_step, self.losses = 0, []

    def step(self, x, y):
        loss = self.step_fn(x, y)
        self.global_step += 1
        self.losses.append(loss)
        return loss


def setup(mode, size):
    """(trainer, step()) for `mode` at `size`."""
    batch, sizes, act = TS.SIZES[size]
    params = TS.initial_params(sizes)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch)
    if mode == "numpy":
        t = NumpyTrainer(params, act)
        return t, (lambda: t.step(x, y))
    if mode.startswith("torch"):
        import torch
        torch.set_num_threads(1)
        t = Trainer(torch, sizes, act, params)
        tx, ty = torch.tensor(x), torch.tensor(y)
        return t, (lambda: t.step(tx, ty))
    import tracegrad as tg
    t = Trainer(tg, sizes, act, params, compiled=mode == "tg compile(step)")
    tx, ty = tg.tensor(x), tg.tensor(y)
    return t, (lambda: t.step(tx, ty))


def check(modes, size, n=4):
    """Every mode keeps the same count and (to float32 rounding) the same loss history."""
    runs = {}
    for m in modes:
        t, step = setup(m, size)
        for _ in range(n):
            step()
        runs[m] = t
    ref = runs["numpy"]
    for m, t in runs.items():
        assert t.global_step == n and type(t.global_step) is int, m
        assert all(type(v) is float for v in t.losses), m
        np.testing.assert_allclose(t.losses, ref.losses, rtol=1e-5, err_msg=m)
    compiled = runs.get("tg compile(step)")
    return compiled.step.stats if compiled is not None else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--only", default="tiny,medium")
    a = ap.parse_args()
    modes = list(MODES)
    try:
        import torch  # noqa: F401
    except ImportError:
        modes.remove("torch eager")
    for size in a.only.split(","):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stats = check(modes, size)
            inner = {"tiny": 20, "medium": 10, "wide": 2, "deep": 1}[size]
            steps = {m: setup(m, size)[1] for m in modes}

            def repeat(fn):
                def run():
                    for _ in range(inner):
                        fn()
                return run
            samples = T.interleaved({m: repeat(s) for m, s in steps.items()}, a.rounds,
                                    warmup=3, settle=0.02,
                                    apart=[m for m in modes if m.startswith("torch")])
        meds = {m: v / inner for m, v in T.medians(samples).items()}
        batch, sizes, _ = TS.SIZES[size]
        print(f"\n{size}: batch {batch}, {'-'.join(map(str, sizes))}, with a step count "
              "and a loss history on the trainer")
        rows = [[m, f"{meds[m] / meds['numpy']:.2f}", f"{meds[m] * 1e6:.1f}"] for m in modes]
        print(T.format_table(["mode", "x numpy", "us/step"], rows))
        print(f"compiled step after 4 calls: {stats}")


if __name__ == "__main__":
    main()
