"""`python -m tracegrad explain SCRIPT.py`: runs a script with the dump on and summarizes every
compiled function (paths, guards with file:line, node counts, saved bytes, retrace reasons)."""
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent('''\
    import sys
    import tracegrad as tg

    @tg.compile
    def step(x, w):
        y = x @ w
        if y.sum() > 0:
            return (y * 2).sum()
        return (-y).sum()

    def main():
        w = tg.ones(3, 2, requires_grad=True)
        for s in (1.0, -1.0, 1.0, -1.0):
            step(tg.full((4, 3), s), w).backward()
        local = tg.compile(lambda v: v.exp())     # dropped before the summary is printed
        local(tg.ones(2))
        print("script args:", sys.argv[1:], "name:", __name__)
        if "--fail" in sys.argv:
            raise ValueError("boom from the script")

    if __name__ == "__main__":
        main()
    ''')
GUARD_LINE = SCRIPT.splitlines().index("    if y.sum() > 0:") + 1


def _run(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TRACEGRAD_DUMP_DIR", None)
    return subprocess.run([sys.executable, "-m", "tracegrad", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "train.py"
    p.write_text(SCRIPT)
    return p


def test_explain_summarizes_paths_guards_and_retraces(script, tmp_path):
    out = tmp_path / "dump"
    r = _run("explain", str(script), "--out", str(out), "alpha", "--beta")
    assert r.returncode == 0, r.stderr
    so = r.stdout
    assert "script args: ['alpha', '--beta'] name: __main__" in so
    summary = so[so.index("=== tracegrad explain"):]
    assert "2 compiled function(s)" in summary
    step = summary[summary.index("step ("):summary.index("<lambda>")]
    assert "2 path(s)" in step and "calls=4" in step and "traces=2" in step
    site = f"{script}:{GUARD_LINE} in step"
    assert f"bool(%" in step
    assert f"== True    at {site}" in step and f"== False    at {site}" in step
    assert "path 0: traced because: first call" in step
    assert f"path 1: traced because: guard bool(" in step
    assert "retraces (1):" in step and f"at {site}: expected True, got False" in step
    assert "nodes: forward" in step and "saved for backward" in step
    assert "re-tracing 'step'" in r.stderr              # retraces are logged as they happen
    assert (out / "index.html").is_file()
    assert (out / "step" / "path1" / "guards.txt").is_file()
    assert str(out) in summary


def test_explain_full_report_temp_dir_and_failing_script(script):
    r = _run("explain", "--full", str(script), "--fail")
    assert r.returncode == 1
    assert "boom from the script" in r.stderr
    assert "== path 1 ==" in r.stdout and "backward IR:" in r.stdout   # the full report
    line = [s for s in r.stdout.splitlines() if s.startswith("debug dump: ")][0]
    dump = line.split("debug dump: ")[1].split("  (open")[0]
    try:
        assert os.path.isfile(os.path.join(dump, "index.html"))
    finally:
        import shutil
        shutil.rmtree(dump, ignore_errors=True)


def test_help():
    r = _run("--help")
    assert r.returncode == 0 and "explain" in r.stdout
    r = _run("explain", "--help")
    assert r.returncode == 0 and "SCRIPT.py" in r.stdout and "--out" in r.stdout
    r = _run()
    assert r.returncode == 2 and "explain" in r.stdout
