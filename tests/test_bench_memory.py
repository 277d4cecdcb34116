"""bench/memory.py measures what its docstring says (each figure in a fresh child process,
run as the benchmark runs it)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "memory.py"
MiB = 2 ** 20


def _child(*args):
    # the environment the benchmark gives its children (glibc returns large blocks on free)
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    out = subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow            # ~10 s: a fresh process measuring the remat step
def test_remat_peak_counts_the_arenas_kept_between_calls():
    """The scratch arenas are allocated on the first run, before tracemalloc starts: the
    figure must add them, or a plan that moves memory into its arena looks free."""
    r = _child("--remat-child", "min")
    assert r["recomputed"] > 0
    assert 0 < r["arena"] < r["peak"]


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_torch_figure_is_a_warm_step_not_one_time_set_up():
    """The medium MLP's step keeps well under 1 MiB alive (hand-written numpy: ~0.5 MiB);
    PyTorch's first step also pages in code and starts thread pools (~10 MiB), which an
    RSS figure taken over that first step would count."""
    pytest.importorskip("torch")
    r = _child("--child", "medium", "torch eager")
    assert "warm step" in r["how"]
    assert 0 < r["peak"] < 3 * MiB
