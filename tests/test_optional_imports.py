"""The test suite and the library run without the optional packages (torch, jax, ...).

`python -m pytest -q` must pass on a machine with only tracegrad's own dependencies and its
test extra: tests that need an optional package skip with `pytest.importorskip` inside the
test or a fixture. CI also runs the whole suite once before torch is installed; these
checks catch a stray top-level import on a machine where torch *is* installed.
"""
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
OPTIONAL = {"torch", "jax", "jaxlib", "sklearn", "tqdm", "matplotlib", "functorch"}
PUBLIC_MODULES = ["tracegrad", "tracegrad.nn", "tracegrad.nn.functional", "tracegrad.nn.init",
                  "tracegrad.optim", "tracegrad.autograd", "tracegrad.func", "tracegrad.viz",
                  "tracegrad.utils.data", "tracegrad.compiler", "tracegrad.passes"]


def _imported_roots(stmt):
    if isinstance(stmt, ast.Import):
        return {a.name.split(".")[0] for a in stmt.names}
    if isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
        return {stmt.module.split(".")[0]}
    return set()


def _top_level_imports(tree):
    """Module-level imports that run unconditionally (`try:` bodies and `if` blocks excluded:
    `try: import torch / except ImportError:` is a deliberate, guarded import)."""
    for stmt in tree.body:
        for root in _imported_roots(stmt):
            yield stmt.lineno, root


@pytest.mark.parametrize("path", sorted(TESTS.glob("*.py")), ids=lambda p: p.name)
def test_no_test_module_imports_an_optional_package_at_top_level(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad = [(line, root) for line, root in _top_level_imports(tree) if root in OPTIONAL]
    assert not bad, (
        f"{path.name} imports {', '.join(r for _, r in bad)} at module level (line "
        f"{bad[0][0]}), so the whole run errors at collection without it; use "
        f'`torch = pytest.importorskip("torch")` inside the test or a fixture instead')


def test_importing_tracegrad_loads_no_optional_package():
    code = (
        "import importlib, json, sys\n"
        f"for name in {PUBLIC_MODULES!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as e:\n"
        "        if not (e.name or '').startswith('tracegrad'):\n"
        "            raise\n"
        "print(json.dumps(sorted(m for m in sys.modules if '.' not in m)))\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout.splitlines()[-1]))
    assert not loaded & OPTIONAL, f"tracegrad imported {sorted(loaded & OPTIONAL)}"
