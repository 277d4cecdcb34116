"""A tour of `tracegrad.compile`: what the compiler records, derives and generates.

1. The tutorial's data-dependent loop (`while y.data.norm() < 1000: y = y * 2`), compiled.
   Inputs that need different numbers of iterations take different paths; each path is
   traced once, and its guards say which decisions it stands for.
2. An MLP loss: the compiler's stages and what each did, the traced forward IR, the
   backward IR the VJP pass derives, what is saved for backward, the memory plan, and the
   generated numpy code.
3. What compile sees: a training step written the PyTorch way (`zero_grad`, `backward`,
   `step`) compiles to one program; `explain()` lists what it reads through a source each
   call (`.grad`, the learning rate), the effects it replays (`.grad` writes), and the
   guards on the Python state it read. Changing that state re-traces with a reason;
   a side effect the program cannot replay is reported, never dropped.
4. Check mode: `tg.compile(fn, check=True)` (or TRACEGRAD_CHECK=1) runs every call eagerly
   and compiled on the same state and raises `CompileMismatchError` at the first
   difference. Here a divergence is provoked on purpose (the function object is swapped
   behind the compiled one's back) to show what the error says.

    python examples/compile_tour.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tracegrad as tg  # noqa: E402
from tracegrad.ir.printer import value_names  # noqa: E402


def section(title):
    print(f"\n{'=' * 78}\n{title}\n{'=' * 78}")


@tg.compile
def tutorial_loop(x):
    y = x * 2
    while y.data.norm() < 1000:
        y = y * 2
    return y


def loop_demo():
    section("1. The tutorial loop, compiled: one path per iteration count")
    v = tg.tensor([0.1, 1.0, 0.0001])
    for scale in (1.0, 1.0, 300.0, 1.0, 300.0):
        x = (tg.ones(3) * scale).requires_grad_()
        y = tutorial_loop(x)
        y.backward(v)
        print(f"x = {scale:>5} * ones(3): y.grad_fn = {type(y.grad_fn).__name__:25s} "
              f"x.grad = {x.grad}")
    print(f"\nstats: {tutorial_loop.stats}")
    for k, path in enumerate(tutorial_loop.programs):
        outcomes = "".join("T" if g.expected else "F" for g in path.guards)
        site = path.guards[0].site.split(" in ")[0] if path.guards else ""
        print(f"path {k}: {len(path.guards)} guards `bool(norm < 1000)` at {os.path.basename(site)}"
              f" with outcomes {outcomes} -> {outcomes.count('T') + 1} doublings")
    print("\nre-trace reasons (also logged on the `tracegrad` logger):")
    for r in tutorial_loop.stats.retraces:
        print("  -", r)
    print("\nforward code of the shortest path:")
    print(min(tutorial_loop.programs, key=lambda p: len(p.guards)).forward_program.code)


def mlp_loss(w1, b1, w2, b2, x, y):
    h = (x @ w1 + b1).tanh()
    logits = h @ w2 + b2
    return tg.nn.functional.cross_entropy(logits, y)


def mlp_demo():
    section("2. An MLP loss: traced forward, derived backward, generated code")
    tg.manual_seed(0)
    w1 = tg.randn(4, 8, requires_grad=True)
    b1 = tg.zeros(8, requires_grad=True)
    w2 = tg.randn(8, 3, requires_grad=True)
    b2 = tg.zeros(3, requires_grad=True)
    x, y = tg.randn(5, 4), tg.tensor([0, 2, 1, 1, 0])
    loss_fn = tg.compile(mlp_loss)
    for _ in range(2):                    # first call traces, second runs compiled code
        loss = loss_fn(w1, b1, w2, b2, x, y)
        loss.backward()
    eager = mlp_loss(w1, b1, w2, b2, x, y)
    print(f"loss compiled {loss.item():.6f} == eager {eager.item():.6f}; "
          f"grad_fn = {type(loss.grad_fn).__name__}")
    path = loss_fn.programs[0]
    print("\nthe pipeline: one compilation record through these stages, each reporting "
          "what it did (path.log):")
    for stage, stats in path.log:
        print(f"  {stage:<14} {', '.join(f'{k}={v}' for k, v in stats.items())}")
    print("\nforward IR (after functionalize, cse, dce, partition, scheduling):")
    print(path.part.forward)
    print("\nbackward IR (derived by the vjp pass from the primitives' own VJP rules):")
    print(path.part.backward)
    names = value_names(path.part.forward)     # the %names the listing above prints
    print("\nsaved for backward:", ", ".join(f"%{names[v]}: {v.type}" for v in path.part.saved))
    if path.forward_plan is not None:
        print("forward memory plan:", path.forward_plan.summary())
    print("\ngenerated forward code:")
    print(path.forward_program.code)
    print("generated backward code:")
    print(path.backward_program.code)


def sees_demo():
    section("3. What compile sees: sources, effects and guards of a training step")
    import warnings
    nn = tg.nn
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    @tg.compile
    def train_step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    x, y = tg.randn(16, 4), tg.randint(0, 3, (16,))
    for step in range(4):
        opt.param_groups[0]["lr"] = 0.1 / (step + 1)    # a schedule: read per call
        loss = train_step(x, y)
    print(f"loss {loss.item():.4f}; {train_step.stats}")
    report = train_step.explain()
    last = report[report.rindex("== path"):]
    keep = ("== path", "traced because", "read through", "effects replayed", "  %", "  output",
            "guards", "  [py]")
    print("\n".join(line[:150] for line in last.splitlines()[:40]
                    if line.startswith(keep)))
    print("\nchanging the model re-traces, with the reason:")
    model[1] = nn.ReLU()
    train_step(x, y)
    print("  ", train_step.stats.retraces[-1])

    print("\na side effect the program cannot replay is reported at trace time:")
    seen = []

    @tg.compile
    def logged(x):
        seen.append(float(x.sum()))                     # mutates a list the caller holds
        return x * 2

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logged(tg.ones(2))
    print("  ", str(caught[0].message)[:160] if caught else "(no warning)")


def check_demo():
    section("4. Check mode: any difference between compiled and eager raises")
    w = tg.randn(3, requires_grad=True)

    def model(x):
        return (x * w).tanh().sum()

    checked = tg.compile(model, check=True)
    for _ in range(3):
        checked(tg.randn(3)).backward()
    print(f"3 checked calls agreed; {checked.stats}")
    checked.fn = lambda x: (x * w).sin().sum()     # a simulated compiler bug: eager now
    try:                                           # differs from the cached program
        checked(tg.randn(3))
    except tg.CompileMismatchError as e:
        print("CompileMismatchError:")
        print("\n".join("   " + line[:110] for line in str(e).splitlines()[:6]))


if __name__ == "__main__":
    loop_demo()
    mlp_demo()
    sees_demo()
    check_demo()
