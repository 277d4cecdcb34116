"""The classic PyTorch "Autograd: automatic differentiation" tutorial, run on tracegrad.

Every step of the tutorial, in its order, printing exactly what PyTorch prints (section
headers aside). The program is written against PyTorch's API; only the import differs:

    python examples/autograd_tour.py            # import tracegrad as torch
    python examples/autograd_tour.py --torch    # the same program on real PyTorch

Run both and diff them: they differ only in object addresses (`<AddBackward0 object at
0x...>`) and in the random numbers drawn by `randn` (the two libraries' generators differ).
"""
import sys

if "--torch" in sys.argv[1:]:
    import torch
else:
    import tracegrad as torch

# The vector-Jacobian section doubles y until its norm reaches 1000, so how many times the
# loop runs depends on the random x. With this seed, in both libraries, |x| lies in
# [1000/1024, 1000/512), so y ends as x * 1024 and x.grad is v * 1024, the tutorial's
# tensor([1.0240e+02, 1.0240e+03, 1.0240e-01]).
SEED = 1


def section(title):
    print(f"\n== {title} ==")


def main():
    torch.manual_seed(SEED)

    section("Tensor")
    x = torch.ones(2, 2, requires_grad=True)
    print(x)

    y = x + 2
    print(y)
    print(y.grad_fn)

    z = y * y * 3
    out = z.mean()
    print(z, out)

    section("requires_grad_")
    a = torch.randn(2, 2)
    a = ((a * 3) / (a - 1))
    print(a.requires_grad)
    a.requires_grad_(True)
    print(a.requires_grad)
    b = (a * a).sum()
    print(b.grad_fn)

    section("Gradients")
    out.backward()
    print(x.grad)

    section("Vector-Jacobian product")
    x = torch.randn(3, requires_grad=True)
    y = x * 2
    while y.data.norm() < 1000:
        y = y * 2
    print(y)

    v = torch.tensor([0.1, 1.0, 0.0001], dtype=torch.float)
    y.backward(v)
    print(x.grad)

    section("no_grad")
    print(x.requires_grad)
    print((x ** 2).requires_grad)
    with torch.no_grad():
        print((x ** 2).requires_grad)


if __name__ == "__main__":
    main()
