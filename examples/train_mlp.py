"""Train an MLP the PyTorch way, eagerly and compiled, side by side (issue 11).

The training step is the idiom every PyTorch user writes: `nn.Sequential` of `Linear`/`ReLU`,
`nn.CrossEntropyLoss`, SGD with momentum, and `zero_grad()` / `backward()` / `step()`.
The same step function runs twice on the same synthetic data from the same initial weights:
once as plain Python (eager autograd), once wrapped in `torch.compile`, which traces the
whole step (forward, backward and the optimizer update) into one program.

It prints the median step time of each, the peak memory one step allocates (tracemalloc),
what the compiler says about the compiled step (`explain()`: paths, guards, what it reads
through a source on each call, what effects it replays), and checks that both runs end with
equal parameters.

    python examples/train_mlp.py            # 300 steps, batch 256, 64 -> 256 -> 256 -> 10
    python examples/train_mlp.py --smoke    # a few steps, tiny sizes
"""
import argparse
import copy
import os
import statistics
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tracegrad as torch  # noqa: E402
from tracegrad import nn  # noqa: E402


def make_data(n, features, classes, seed=0):
    """A learnable synthetic problem: labels are the argmax of a fixed random linear map."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    w = torch.randn(features, classes, generator=g)
    y = (x @ w).argmax(dim=1)
    return x, y


def make_step(model, opt, loss_fn):
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def run(steps, batches, epochs):
    """Run each step function over the batches, alternating between them call by call so
    both see the same machine load; return {name: (losses, per-step seconds)}."""
    out = {name: ([], []) for name in steps}
    for _ in range(epochs):
        for x, y in batches:
            for name, step in steps.items():
                t0 = time.perf_counter()
                loss = step(x, y)
                out[name][1].append(time.perf_counter() - t0)
                out[name][0].append(loss.item())
    return out


def peak_memory(step, x, y):
    """Peak bytes Python allocations reach during one call of `step` (numpy included)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    step(x, y)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def explain_summary(compiled):
    """The headline lines of `compiled.explain()` for its most recent path."""
    report = compiled.explain()
    heads = ("compiled function", "== path", "traced because", "guards (", "captured tensors",
             "read through", "effects replayed", "input mutations", "memory:")
    lines, in_list = [], False
    for ln in report.splitlines():
        if ln.startswith(heads):
            lines.append(ln)
            in_list = ln.startswith(("read through", "effects replayed"))
        elif in_list and ln.startswith("  "):
            lines.append(ln)
        else:
            in_list = False
    return "\n".join(ln if len(ln) < 160 else ln[:157] + "..." for ln in lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="a few steps at tiny sizes")
    args = p.parse_args(argv)
    if args.smoke:
        n, batch, sizes, epochs = 64, 16, (8, 16, 16, 3), 2
    else:
        n, batch, sizes, epochs = 7680, 256, (64, 256, 256, 10), 10

    torch.manual_seed(0)
    x, y = make_data(n, sizes[0], sizes[-1])
    batches = list(zip(x.split(batch), y.split(batch)))
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    eager_model = nn.Sequential(*layers[:-1])
    compiled_model = copy.deepcopy(eager_model)
    print(eager_model)

    steps = {}
    for name, model in (("eager", eager_model), ("compiled", compiled_model)):
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        step = make_step(model, opt, nn.CrossEntropyLoss())
        steps[name] = torch.compile(step) if name == "compiled" else step

    results = run(steps, batches, epochs)
    print(f"\n{len(batches) * epochs} steps of batch {batch}:")
    for name, (losses, times) in results.items():
        warm = times[2:] or times          # the compiled step traces on its first calls
        print(f"  {name:9s} loss {losses[0]:.4f} -> {losses[-1]:.4f}   "
              f"median step {statistics.median(warm) * 1e3:7.3f} ms   "
              f"first step {times[0] * 1e3:7.1f} ms")
    e, c = (statistics.median(results[k][1][2:]) for k in ("eager", "compiled"))
    print(f"  compiled speed-up: {e / c:.2f}x")

    xb, yb = batches[0]
    for name, step in steps.items():
        print(f"  peak memory of one {name} step: {peak_memory(step, xb, yb) / 1024:.1f} KiB")

    print(f"\ncompiled step: {steps['compiled'].stats}")
    print(explain_summary(steps["compiled"]))

    # tracegrad has no torch.allclose yet: compare with the largest elementwise difference
    diff = max((a - b).abs().max().item() for a, b in
               zip(eager_model.parameters(), compiled_model.parameters()))
    same = diff <= 1e-5
    print(f"\nparameters after training: eager {'==' if same else '!='} compiled "
          f"(max abs difference {diff:.3g})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
