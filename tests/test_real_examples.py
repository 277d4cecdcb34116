"""The training examples run end to end, as a user runs them: subprocesses in `--smoke` mode.

`examples/train_mlp.py`, `examples/digits_cnn.py` and `examples/char_gpt.py` each train a
model with a compiled training step. Here each runs a few steps at tiny sizes; we check what
it prints (eager and compiled agree, the compiled step neither falls back to eager nor
re-traces per step), that the plot is written, and that `char_gpt.py --resume` continues a
checkpoint to bit-identical parameters of an uninterrupted run. sklearn, tqdm and matplotlib
are optional: the tests that need them skip without them.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _run(script, *flags):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["OPENBLAS_NUM_THREADS"] = "1"           # the machine running tests is shared
    proc = subprocess.run([sys.executable, str(EXAMPLES / script), "--smoke", *flags],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
    return proc.stdout


def _stats(line):
    """{'calls': n, 'traces': n, 'eager_calls': n, ...} from a printed `.stats` line."""
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def test_train_mlp_eager_and_compiled_agree():
    out = _run("train_mlp.py")
    assert "parameters after training: eager == compiled (max abs difference 0)" in out
    losses = re.findall(r"(eager|compiled)\s+loss ([\d.]+) -> ([\d.]+)", out)
    assert [name for name, *_ in losses] == ["eager", "compiled"]
    assert losses[0][1:] == losses[1][1:]
    assert re.search(r"peak memory of one compiled step: [\d.]+ KiB", out)
    stats = _stats(next(ln for ln in out.splitlines() if ln.startswith("compiled step:")))
    assert stats["eager_calls"] == 0 and stats["retraces"] == 0 and stats["traces"] <= 2
    # explain(): paths, guards, runtime hyper-parameters, replayed .grad writes
    assert "1 path(s)" in out and re.search(r"guards \(\d+\)", out)
    assert "%lr = closure variable 'opt'.param_groups[0]['lr']" in out
    assert "%0.weight.grad = result" in out


def test_digits_cnn_smoke(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    pytest.importorskip("matplotlib")
    png = tmp_path / "digits.png"
    out = _run("digits_cnn.py", "--plot", str(png))
    assert re.search(r"step time \(batch 32\): eager [\d.]+ ms, compiled [\d.]+ ms", out)
    assert len(re.findall(r"^epoch +\d+: train loss [\d.]+ +test accuracy", out, re.M)) == 2
    stats = _stats(next(ln for ln in out.splitlines() if ln.startswith("compiled training")))
    assert stats["eager_calls"] == 0 and stats["retraces"] == 0 and stats["traces"] <= 2
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_char_gpt_resume_matches_uninterrupted_run(tmp_path):
    pytest.importorskip("tqdm")
    pytest.importorskip("matplotlib")
    import tracegrad as tg
    whole, part = tmp_path / "whole.pt", tmp_path / "part.pt"
    png = str(tmp_path / "gpt.png")
    out = _run("char_gpt.py", "--steps", "6", "--ckpt", str(whole), "--plot", png)
    assert "--- step 4, loss" in out and "--- step 6, loss" in out      # samples as it learns
    stats = _stats(next(ln for ln in out.splitlines() if ln.startswith("compiled step:")))
    assert stats["eager_calls"] == 0 and stats["retraces"] == 0 and stats["traces"] <= 2
    _run("char_gpt.py", "--steps", "3", "--ckpt", str(part), "--plot", png)
    assert tg.load(str(part))["step"] == 3
    out = _run("char_gpt.py", "--steps", "6", "--ckpt", str(part), "--plot", png, "--resume")
    assert f"resumed from {part} at step 3" in out
    a, b = tg.load(str(whole)), tg.load(str(part))
    assert a["step"] == b["step"] == 6
    assert a["losses"] == b["losses"]
    assert a["model"].keys() == b["model"].keys()
    for k in a["model"]:
        assert (a["model"][k] == b["model"][k]).all().item(), k
    assert a["scheduler"]["last_epoch"] == b["scheduler"]["last_epoch"] == 6


def test_char_gpt_compiled_step_equals_eager_under_a_schedule():
    """The compiled step (AdamW groups, clip_grad_norm_, LambdaLR stepping inside) follows
    the same learning rates and reaches the same parameters as the eager step."""
    pytest.importorskip("tqdm")
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(EXAMPLES))
    try:
        import char_gpt
    finally:
        sys.path.remove(str(EXAMPLES))
    import tracegrad as tg

    def train(compiled):
        tg.manual_seed(0)
        model = char_gpt.GPT(char_gpt.GPTConfig(vocab_size=11, block_size=8, n_layer=1,
                                                n_head=2, n_embd=8))
        opt = model.configure_optimizer(lr=1e-2, weight_decay=0.1)
        sched = tg.optim.lr_scheduler.LambdaLR(opt, char_gpt.lr_lambda(2, 6))

        def step(x, y):
            opt.zero_grad()
            _, loss = model(x, y)
            loss.backward()
            tg.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            return loss
        step = tg.compile(step) if compiled else step
        data, g = tg.arange(200) % 11, tg.Generator().manual_seed(0)
        lrs = []
        for _ in range(8):
            step(*char_gpt.get_batch(data, 8, 3, g))
            lrs.append(opt.param_groups[0]["lr"])
        return [p.detach().clone() for p in model.parameters()], lrs, step

    (pe, lre, _), (pc, lrc, cstep) = train(False), train(True)
    assert lre == lrc and len(set(lrc)) > 4
    for a, b in zip(pe, pc):
        assert (a - b).abs().max().item() <= 1e-6
    assert cstep.stats.eager_calls == 0 and cstep.stats.traces <= 2
