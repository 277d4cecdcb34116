"""The examples (and the eager benchmark) run as a user runs them: as subprocesses.

`examples/autograd_tour.py` is the classic autograd tutorial. We check its key lines against
the tutorial's documented output and, when torch is installed, that running it on tracegrad
and on PyTorch (`--torch`) prints the same text up to object addresses and random draws.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOUR = ROOT / "examples" / "autograd_tour.py"


def _env():
    env = dict(os.environ)
    # the checkout itself, so the test works with or without `pip install -e .`
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _run(*flags):
    proc = subprocess.run([sys.executable, str(TOUR), *flags], capture_output=True, text=True,
                          env=_env(), cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr       # no warnings either
    return proc.stdout


@pytest.fixture(scope="module")
def tour_out():
    return _run()


def _sections(text):
    """{header: [lines]} split at the tour's `== title ==` headers."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.fullmatch(r"== (.+) ==", line)
        if m:
            cur = out.setdefault(m.group(1), [])
        elif cur is not None and line:
            cur.append(line)
    return out


def test_tensor_section_reprs(tour_out):
    lines = _sections(tour_out)["Tensor"]
    assert lines[0:2] == ["tensor([[1., 1.],", "        [1., 1.]], requires_grad=True)"]
    assert lines[2:4] == ["tensor([[3., 3.],", "        [3., 3.]], grad_fn=<AddBackward0>)"]
    assert re.fullmatch(r"<AddBackward0 object at 0x[0-9a-f]+>", lines[4])
    assert lines[5:7] == ["tensor([[27., 27.],",
                          "        [27., 27.]], grad_fn=<MulBackward0>) "
                          "tensor(27., grad_fn=<MeanBackward0>)"]


def test_requires_grad_section(tour_out):
    lines = _sections(tour_out)["requires_grad_"]
    assert lines[:2] == ["False", "True"]
    assert re.fullmatch(r"<SumBackward0 object at 0x[0-9a-f]+>", lines[2])


def test_gradient_is_4_5(tour_out):
    # d(mean(3 (x+2)^2))/dx = 6 (x+2) / 4 = 4.5 at x = 1
    assert _sections(tour_out)["Gradients"] == ["tensor([[4.5000, 4.5000],",
                                                "        [4.5000, 4.5000]])"]


def test_vector_jacobian_product(tour_out):
    y_line, grad_line = _sections(tour_out)["Vector-Jacobian product"]
    assert re.fullmatch(r"tensor\(\[[-0-9., ]+\], grad_fn=<MulBackward0>\)", y_line)
    values = [float(s) for s in re.findall(r"-?\d+\.\d+", y_line)]
    norm = sum(v * v for v in values) ** 0.5
    assert 1000 <= norm < 2000           # the loop stops at the first doubling past 1000
    assert grad_line == "tensor([1.0240e+02, 1.0240e+03, 1.0240e-01])"


def test_no_grad_prints_true_true_false(tour_out):
    assert _sections(tour_out)["no_grad"] == ["True", "True", "False"]


def _normalise(text):
    text = re.sub(r"object at 0x[0-9a-f]+", "object at 0x?", text)
    # the one print of random values: y after the doubling loop
    return re.sub(r"tensor\(\[[-0-9.,e+ ]+\], grad_fn=<MulBackward0>\)",
                  "tensor([<random>], grad_fn=<MulBackward0>)", text)


def test_same_output_as_pytorch(tour_out):
    pytest.importorskip("torch")
    theirs = _run("--torch")
    assert _normalise(tour_out) == _normalise(theirs)


def test_eager_benchmark_smoke():
    """The benchmark runs, and its start-up check passes: tracegrad's values and gradients
    equal the hand-written numpy backward's (and PyTorch's, when installed)."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "eager_overhead.py"),
                           "--rounds", "2"], capture_output=True, text=True, env=_env(),
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^tracegrad\s+\d+\.\d+\s+\d+\.\d+", proc.stdout, re.M), proc.stdout
    assert "tracegrad / numpy" in proc.stdout
