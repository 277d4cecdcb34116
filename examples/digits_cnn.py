"""A small CNN on scikit-learn's handwritten digits, with a compiled training step.

The data is `sklearn.datasets.load_digits()`: 1797 grey 8x8 images of the digits 0-9 that ship
with scikit-learn (no download). The code is what a PyTorch user writes (`import tracegrad as
torch`): a `TensorDataset` split with `random_split`, `DataLoader`s, an `nn.Sequential` of
`Conv2d`/`ReLU`/`MaxPool2d`/`Linear`, `nn.CrossEntropyLoss` and Adam. The whole training step
(`zero_grad`, forward, `backward`, `step`) is compiled with `torch.compile(step)`.

Before training it times a few eager and compiled steps on a copy of the model; after
training it prints the test accuracy per epoch and saves a plot of the training loss and the
test accuracy (`docs/img/digits_cnn.png`).

    python examples/digits_cnn.py            # 20 epochs, >= 97% test accuracy
    python examples/digits_cnn.py --smoke    # a few steps on a small subset

Needs scikit-learn, tqdm and matplotlib (`pip install scikit-learn tqdm matplotlib`).
"""
import argparse
import copy
import os
import statistics
import sys
import tempfile
import time

import matplotlib
import numpy as np
from sklearn.datasets import load_digits
from tqdm import tqdm

matplotlib.use("Agg")                   # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
import tracegrad as torch  # noqa: E402
from tracegrad import nn  # noqa: E402
from tracegrad.utils.data import DataLoader, TensorDataset, random_split  # noqa: E402


def digits_dataset(limit=None):
    digits = load_digits()
    x = torch.tensor((digits.images / 16.0).astype(np.float32)).unsqueeze(1)   # N, 1, 8, 8
    y = torch.tensor(digits.target).long()
    if limit:
        x, y = x[:limit], y[:limit]
    return TensorDataset(x, y)


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 16 x 4 x 4
        nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 2 x 2
        nn.Flatten(),
        nn.Linear(32 * 2 * 2, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )


def make_step(model, opt, loss_fn):
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


@torch.no_grad()
def accuracy(model, loader):
    model.eval()
    correct = total = 0
    for x, y in loader:
        correct += (model(x).argmax(dim=1) == y).sum().item()
        total += len(y)
    model.train()
    return correct / total


def time_steps(model, x, y, n):
    """Median seconds per step, eager and compiled, on one copy of the model (training the
    copy, never the model itself)."""
    bench = copy.deepcopy(model)
    step = make_step(bench, torch.optim.Adam(bench.parameters(), lr=1e-3), nn.CrossEntropyLoss())
    compiled = torch.compile(step)
    out = {}
    for name, fn in (("eager", step), ("compiled", compiled)):
        fn(x, y), fn(x, y)                # warm up (the compiled step traces here)
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn(x, y)
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times)
    return out, compiled.stats


def plot(history, path):
    epochs = range(1, len(history["loss"]) + 1)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax1.plot(epochs, history["loss"], marker="o")
    ax1.set(title="training loss (mean per epoch)", xlabel="epoch", ylabel="cross-entropy")
    ax1.grid(alpha=0.3)
    ax2.plot(epochs, [100 * a for a in history["acc"]], marker="o", color="tab:green")
    ax2.set(title="test accuracy", xlabel="epoch", ylabel="%")
    ax2.grid(alpha=0.3)
    fig.suptitle("tracegrad: CNN on sklearn digits (compiled training step)")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="a few steps on a small subset")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--plot", default=None, help="where to save the PNG")
    args = p.parse_args(argv)
    epochs = 2 if args.smoke else args.epochs
    default_plot = (os.path.join(tempfile.gettempdir(), "digits_cnn_smoke.png") if args.smoke
                    else os.path.normpath(os.path.join(ROOT, "docs", "img", "digits_cnn.png")))
    plot_path = args.plot or default_plot

    torch.manual_seed(0)
    data = digits_dataset(limit=200 if args.smoke else None)
    n_test = len(data) // 5
    train_set, test_set = random_split(data, [len(data) - n_test, n_test],
                                       generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True, drop_last=True,
                              generator=torch.Generator().manual_seed(1))
    test_loader = DataLoader(test_set, batch_size=256)
    print(f"digits: {len(train_set)} train / {len(test_set)} test images of 8x8")

    model = make_model()
    x0, y0 = next(iter(train_loader))
    times, bench_stats = time_steps(model, x0, y0, n=3 if args.smoke else 20)
    print(f"step time (batch {len(y0)}): eager {times['eager'] * 1e3:.2f} ms, "
          f"compiled {times['compiled'] * 1e3:.2f} ms "
          f"({times['eager'] / times['compiled']:.2f}x); {bench_stats}")

    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    train_step = torch.compile(make_step(model, opt, nn.CrossEntropyLoss()))
    history = {"loss": [], "acc": []}
    bar = tqdm(range(epochs), desc="epochs")
    for epoch in bar:
        losses = [train_step(x, y).item() for x, y in train_loader]
        history["loss"].append(sum(losses) / len(losses))
        history["acc"].append(accuracy(model, test_loader))
        bar.set_postfix(loss=f"{history['loss'][-1]:.4f}", test_acc=f"{history['acc'][-1]:.3f}")
    for epoch, (loss, acc) in enumerate(zip(history["loss"], history["acc"]), 1):
        print(f"epoch {epoch:2d}: train loss {loss:.4f}  test accuracy {acc:.2%}")
    print(f"compiled training step: {train_step.stats}")
    print(f"final test accuracy: {history['acc'][-1]:.2%}")
    plot(history, plot_path)
    print(f"plot saved to {plot_path}")


if __name__ == "__main__":
    main()
