"""bench/memory.py measures what its docstring says (each figure in a fresh child process,
run as the benchmark runs it)."""
import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "memory.py"
MiB = 2 ** 20


def _child(*args):
    # the environment the benchmark gives its children (glibc returns large blocks on free)
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    out = subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_remat_peak_counts_the_arenas_kept_between_calls():
    """The scratch arenas are allocated on the first run, before tracemalloc starts: the
    figure must add them, or a plan that moves memory into its arena looks free."""
    r = _child("--remat-child", "min")
    assert r["recomputed"] > 0
    assert 0 < r["arena"] < r["peak"]
