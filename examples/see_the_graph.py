"""See the graphs: pictures of what autograd records and what the compiler derives.

Writes three pictures, each as SVG and PNG, with `tracegrad.viz.render` (needs Graphviz `dot`):

1. `eager_graph`: the autograd tutorial's eager graph (`y = x + 2; z = y * y * 3;
   out = z.mean()`), drawn like torchviz: the leaf `x` in blue, backward nodes, the tensors
   they saved in orange.
2. `compiled_mlp`: a compiled MLP loss (tanh hidden layer, mean squared error): its forward
   program, the backward program the compiler derived from it (grey), and the values saved
   between them (orange).
3. `branch_paths`: a function with a data-dependent branch (`if x.sum() > 0`), called with
   inputs that take both branches: two cached paths, each headed by the guard that selects it.

    python examples/see_the_graph.py [--out DIR]      # default DIR: docs/img
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import tracegrad as tg  # noqa: E402


def tutorial_graph():
    """The tutorial's eager graph (its result tensor) and the names of its leaves."""
    x = tg.ones(2, 2, requires_grad=True)
    y = x + 2
    z = y * y * 3
    out = z.mean()
    return out, {"x": x, "y": y}


def mlp_loss(w1, b1, w2, b2, x, y):
    h = (x @ w1 + b1).tanh()
    return ((h @ w2 + b2 - y) ** 2).mean()


def compiled_mlp():
    """One compiled path of an MLP loss (traced on the first call, run compiled on the second)."""
    tg.manual_seed(0)
    params = [tg.randn(4, 8) * 0.5, tg.zeros(8), tg.randn(8, 3) * 0.5, tg.zeros(3)]
    params = [p.requires_grad_() for p in params]
    x, y = tg.randn(5, 4), tg.randn(5, 3)
    loss_fn = tg.compile(mlp_loss)
    for _ in range(2):
        loss_fn(*params, x, y).backward()
    return loss_fn.programs[0]


@tg.compile
def branchy(x, w):
    if x.sum() > 0:
        return (x * w).tanh().sum()
    return (x - w).exp().mean()


def branch_paths():
    """`branchy` after calls that take each branch (two cached paths)."""
    w = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    for sign in (1.0, -1.0, 1.0, -1.0):
        branchy(tg.tensor([1.0, 2.0, 3.0]) * sign, w).backward()
    return branchy


def pictures():
    """[(file stem, object to draw, to_dot options, title, one-line description)]."""
    out, names = tutorial_graph()
    return [
        ("eager_graph", out, {"params": names},
         "eager graph of the tutorial:\ny = x + 2; z = y * y * 3; out = z.mean()",
         "eager autograd graph of the tutorial's out = z.mean(): leaf x (blue), backward "
         "nodes, saved tensors (orange)"),
        ("compiled_mlp", compiled_mlp(), {}, "compiled MLP loss: forward, derived backward, "
         "saved values",
         "compiled MLP loss: forward program, derived backward program (grey), saved values "
         "(orange) between them"),
        ("branch_paths", branch_paths(), {}, "compiled `if x.sum() > 0`: one path per branch",
         "compiled function with `if x.sum() > 0`: one path per branch, each with its guard "
         "(diamond)"),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "img"),
                        help="directory for the pictures (default: docs/img)")
    args = parser.parse_args(argv)
    for stem, obj, options, title, description in pictures():
        dot = tg.viz.to_dot(obj, **options)
        dot.attr(label=title, labelloc="t", fontsize="12")      # a title above the picture
        for fmt in ("svg", "png"):
            path = tg.viz.render(dot, os.path.join(args.out, f"{stem}.{fmt}"), format=fmt)
            print(f"{os.path.relpath(path)}: {description}")


if __name__ == "__main__":
    main()
