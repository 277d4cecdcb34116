"""The same compiled training step on the numpy backend and on the JAX backend, with timings,
then data-parallel over 4 simulated devices.

    python examples/jax_backend.py            # needs `pip install tracegrad[jax]`
    python examples/jax_backend.py --quick

The step is ordinary tracegrad code: a model, cross-entropy, `tg.autograd.grad`, and an
in-place SGD update with momentum. `tg.compile(step, backend="jax")` traces it once, runs the
compiler's passes, lowers the resulting forward program (here forward, backward and update
are one program) to jax.numpy and compiles it with XLA; later calls run XLA's fused kernels.
Parameters stay tracegrad tensors over numpy: the program's in-place updates are copied back
into them after each call, so eager code sees them as usual, and XLA reads the large ones in
place instead of copying them in (their arrays move once to 64-byte aligned memory).

`data_parallel=True` shards the batch (dimension 0 of the step's tensor arguments) over
`jax.devices()` and replicates the parameters; XLA inserts the gradient all-reduce. On one
machine, `XLA_FLAGS=--xla_force_host_platform_device_count=4` makes 4 CPU devices, which this
example sets in a subprocess (the flag must be set before jax is imported). On several hosts,
call `jax.distributed.initialize()` in each process before the first call; `jax.devices()`
then lists every host's devices and the same code shards over all of them.
"""
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tracegrad as tg  # noqa: E402

nn, F = tg.nn, tg.nn.functional


def make_step(sizes, lr=0.05, momentum=0.9, backend="numpy", **options):
    tg.manual_seed(0)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    params = list(model.parameters())
    bufs = [tg.zeros_like(p) for p in params]

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        grads = tg.autograd.grad(loss, params)
        with tg.no_grad():
            for p, g, b in zip(params, grads, bufs):
                b.mul_(momentum).add_(g)
                p.sub_(lr * b)
        return loss.detach()
    return tg.compile(step, backend=backend, **options), params


def data(batch, sizes, steps, seed=0):
    rng = np.random.default_rng(seed)
    return [(tg.tensor(rng.standard_normal((batch, sizes[0])).astype(np.float32)),
             tg.tensor(rng.integers(0, sizes[-1], batch))) for _ in range(steps)]


def train(backend, batch, sizes, steps, **options):
    step, params = make_step(sizes, backend=backend, **options)
    batches = data(batch, sizes, steps)
    t0 = time.perf_counter()
    losses = [step(*batches[0]).item()]               # traces (and compiles with XLA)
    first = time.perf_counter() - t0
    times = []
    for x, y in batches[1:]:
        t0 = time.perf_counter()
        losses.append(step(x, y).item())
        times.append(time.perf_counter() - t0)
    return losses, params, first, float(np.median(times)), step


def compare(batch, sizes, steps):
    print(f"MLP {'-'.join(map(str, sizes))}, batch {batch}, {steps} steps")
    runs = {b: train(b, batch, sizes, steps) for b in ("numpy", "jax")}
    for b, (losses, _, first, med, _) in runs.items():
        print(f"  {b:5} backend: first call {first * 1e3:7.0f} ms, then {med * 1e3:7.2f} ms/step;"
              f" loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    (ln, pn, *_), (lj, pj, *_, step) = runs["numpy"], runs["jax"]
    diff = max(float(np.max(np.abs(a.detach().numpy() - b.detach().numpy())))
               for a, b in zip(pn, pj))
    print(f"  max |loss difference| {max(abs(a - b) for a, b in zip(ln, lj)):.2e}, "
          f"max |parameter difference| {diff:.2e}")
    print(f"  speed-up of the jax backend: {runs['numpy'][3] / runs['jax'][3]:.1f}x")
    return step


SHARDED = """
import sys, numpy as np, jax
sys.path.insert(0, {root!r})
sys.path.insert(0, {here!r})
from jax_backend import train
sizes, batch, steps = {sizes!r}, {batch!r}, {steps!r}
l1, p1, _, t1, _ = train("jax", batch, sizes, steps)
l4, p4, _, t4, step = train("jax", batch, sizes, steps, data_parallel=True)
diff = max(float(np.max(np.abs(a.detach().numpy() - b.detach().numpy()))) for a, b in zip(p1, p4))
print(f"  devices: {{jax.devices()}}")
print(f"  1 device {{t1 * 1e3:.2f}} ms/step, 4 devices {{t4 * 1e3:.2f}} ms/step")
print(f"  max |loss difference| {{max(abs(a - b) for a, b in zip(l1, l4)):.2e}}, "
      f"max |parameter difference| {{diff:.2e}}")
hlo = step.programs[0].forward_program.executable.as_text()
print(f"  all-reduce in the compiled program: {{'all-reduce' in hlo}}")
"""


def sharded(batch, sizes, steps):
    print(f"\ndata_parallel=True over 4 simulated CPU devices (same MLP, batch {batch})")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    code = SHARDED.format(root=os.path.dirname(here), here=here, sizes=sizes, batch=batch,
                          steps=steps)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    print(out.stdout.rstrip() or out.stderr)


def main():
    quick = "--quick" in sys.argv
    sizes = (64, 128, 10) if quick else (784, 512, 512, 10)
    batch, steps = (64, 6) if quick else (256, 20)
    step = compare(batch, sizes, steps)
    if not quick:
        print("\n" + "\n".join(step.explain().splitlines()[-6:]))
    sharded(batch, sizes, steps)


if __name__ == "__main__":
    main()
