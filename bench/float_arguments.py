"""A learning rate passed to the compiled step as a Python float that changes every call.

The step is the PyTorch idiom with a hand-applied update (`nn.Sequential`, cross entropy,
`zero_grad`/`backward`, then `p.add_(p.grad, alpha=-lr)` under `no_grad`), called with
the value of a cosine schedule each step. Before floats were read per call (Note [Float
arguments that change] in tracegrad/compiler/dynamic_numbers.py) every new value was a new
trace, and past `cache_limit` the step ran eagerly; now the second value makes the
argument a runtime number and every later call is a cache hit. The table compares that
step against the same compiled step called with one fixed rate (the cost of reading the
float per call), eager tracegrad, PyTorch eager (when installed) and hand-written numpy.

    python bench/float_arguments.py            # 200 rounds
    python bench/float_arguments.py --quick    # 20 rounds
"""
import argparse
import math
import os
import sys
import warnings

import numpy as np

try:
    from . import _mlp as M
    from . import _timing as T
except ImportError:                 # run as a script: bench/ is on sys.path
    import _mlp as M
    import _timing as T

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tracegrad  # noqa: E402

SIZES = {"tiny": (32, (64, 64, 10)), "medium": (64, (784, 128, 10))}


def schedule():
    """An endless cosine learning-rate schedule: a new float on every call."""
    k = 0
    while True:
        yield 0.05 * (1 + math.cos(math.pi * (k % 1000) / 1000)) / 2 + 1e-4
        k += 1


def make_step(lib, sizes, params):
    """(model, step(x, y, lr)) written as PyTorch users write it, on `lib`."""
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        lin = lib.nn.Linear(a, b)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(params[2 * i].T.copy()))
            lin.bias.copy_(lib.tensor(params[2 * i + 1]))
        layers.append(lin)
        if i < len(sizes) - 2:
            layers.append(lib.nn.ReLU())
    model = lib.nn.Sequential(*layers)
    loss_fn = lib.nn.CrossEntropyLoss()

    def step(x, y, lr):
        model.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        with lib.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-lr)
        return loss
    return model, step


def cases_for(name, torch):
    batch, sizes = SIZES[name]
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    ys = rng.integers(0, sizes[-1], batch)
    params = M.make_params(sizes)
    cases, compiled_fns = {}, {}

    np_ps = [p.copy() for p in params]
    lrs = schedule()

    def numpy_case():
        M.LR = next(lrs)             # the hand-written step reads its rate from M.LR
        return M.numpy_step(np_ps, xs, ys)
    cases["numpy"] = numpy_case

    tg = tracegrad
    x, y = tg.tensor(xs), tg.tensor(ys)
    for label, compiled, fixed in (("tracegrad eager", False, False),
                                   ("compiled, lr changes", True, False),
                                   ("compiled, lr fixed", True, True)):
        _, step = make_step(tg, sizes, params)
        fn = tg.compile(step) if compiled else step
        if compiled:
            compiled_fns[label] = fn
        gen = schedule()
        cases[label] = (lambda fn=fn, gen=gen, fixed=fixed:
                        fn(x, y, 0.01 if fixed else next(gen)))
    if torch is not None:
        _, tstep = make_step(torch, sizes, params)
        tx, ty = torch.tensor(xs), torch.tensor(ys)
        gen = schedule()
        cases["torch eager"] = lambda: tstep(tx, ty, next(gen))
    return cases, compiled_fns


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds = 20 if args.quick else args.rounds
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    warnings.simplefilter("ignore")
    for name in SIZES:
        cases, compiled_fns = cases_for(name, torch)
        for fn in cases.values():            # first calls: traces, not timed
            for _ in range(3):
                fn()
        samples = T.interleaved(cases, rounds, inner=5, apart=("torch eager",))
        meds = T.medians(samples)
        print(f"\n== {name}: batch {SIZES[name][0]}, {'-'.join(map(str, SIZES[name][1]))} "
              f"(median us per step over {rounds} rounds)")
        print(T.format_table(["case", "us"], [[k, v * 1e6] for k, v in meds.items()]))
        print(T.format_table(["ratio", "x"], T.ratio_rows([meds], [
            ("compiled, lr changes", "compiled, lr fixed"),
            ("compiled, lr changes", "numpy"), ("tracegrad eager", "numpy"),
            ("compiled, lr changes", "tracegrad eager"), ("torch eager", "numpy")])))
        for label, fn in compiled_fns.items():
            st = fn.stats
            print(f"{label}: {st.calls} calls, {st.traces} traces, {st.eager_calls} eager")


if __name__ == "__main__":
    main()
