"""Introspection of compiled functions: explain(), .stats, .programs entries (.forward,
.backward, .code, .memory) and the TRACEGRAD_DUMP_DIR debug dump."""
import inspect
import logging
import os
import re

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.compiler import dump as dump_mod


def _branchy():
    """A compiled function with a data-dependent branch; returns (fn, line of the `if`)."""
    def loss(x, w):
        y = (x @ w).tanh()
        if y.sum() > 0:
            return (y * 2).sum()
        return (y * y).sum()
    src, first = inspect.getsourcelines(loss)
    line = first + next(i for i, s in enumerate(src) if "if y.sum()" in s)
    return tg.compile(loss), line


def _run_both_branches(f):
    w = tg.ones(3, 2, requires_grad=True)
    for s in (1.0, -1.0, 1.0, -1.0):
        f(tg.full((4, 3), s), w).backward()
    return w


def test_stats_and_retrace_reason_name_the_guard():
    f, line = _branchy()
    _run_both_branches(f)
    st = f.stats
    assert (st.calls, st.traces, st.cache_hits) == (4, 2, 2)
    assert len(st.retraces) == 1
    reason = st.retraces[0]
    assert f"{__file__}:{line}" in reason and "expected True, got False" in reason
    text = str(st)
    assert "traces=2" in text and reason in text
    assert reason in repr(st)


def test_explain_reports_guards_passes_and_saved_values():
    f, line = _branchy()
    _run_both_branches(f)
    text = f.explain()
    assert repr(text) == str(text)                 # displays as text at a prompt
    assert "2 path(s)" in text
    sections = text.split("== path ")[1:]
    assert len(sections) == 2
    first, second = sections
    assert "traced because: first call" in first
    assert "traced because: guard bool(" in second and "expected True, got False" in second
    site = f"{os.path.basename(__file__)}:{line}"
    for sec, expected in ((first, True), (second, False)):
        assert re.search(rf"bool\(%\d+\) == {expected}\s+at .*{re.escape(site)}", sec)
        assert "| if y.sum() > 0:" in sec               # the guard's source line
        for p in ("functionalize", "cse", "dce", "vjp"):
            assert re.search(rf"^\s+{p}\b", sec, re.M), p
        assert "removed=" in sec and "merged=" in sec
        assert "forward IR:" in sec and "backward IR:" in sec
        assert "saved for backward:" in sec
        assert re.search(r"%x: f32\[4,3\] \(48 B\)\s+input, kept by reference", sec)
        assert "(arg, requires grad)" in sec
    # the tanh output is saved on the path whose backward reads it (y * 2 needs only tanh')
    assert re.search(r"f32\[4,2\] \(32 B\)\s+from tanh at", first)


def test_explain_shows_captured_tensors_and_mutations():
    bias = tg.ones(3)

    @tg.compile
    def step(x):
        x.add_(bias)
        return x * 2
    x = tg.zeros(3)
    step(x)
    step(x)
    np.testing.assert_array_equal(x.numpy(), [2.0, 2.0, 2.0])
    text = step.explain()
    assert "captured tensors (read by reference each call): %bias: f32[3]" in text
    assert "input mutations (copied back after each call): %x (1 in-place write(s))" in text
    assert "inplace_rewritten=1" in text
    assert "backward: none" in text


def test_programs_expose_ir_code_and_memory():
    f, _ = _branchy()
    _run_both_branches(f)
    p = f.programs[0]
    assert isinstance(p.forward, tg.ir.Graph) and isinstance(p.backward, tg.ir.Graph)
    assert p.forward is p.part.forward and p.backward is p.part.backward
    assert p.guards and p.guards[0].kind == "bool"
    code = p.code
    assert p.forward_program.code in code and p.backward_program.code in code
    assert code.index("forward program") < code.index("backward program")
    mem = p.memory
    assert mem.input_bytes == 4 * 3 * 4 + 3 * 2 * 4
    assert mem.saved_bytes == sum(v.type.nbytes for v in p.part.saved) > 0
    assert mem.saved_input_bytes == 48                  # x is saved by reference
    assert mem.forward_naive_bytes > 0 and mem.backward_naive_bytes > 0
    assert mem.naive_bytes == mem.forward_naive_bytes + mem.backward_naive_bytes
    assert "saved for backward" in str(mem)
    g = tg.compile(lambda x: x.exp())
    g(tg.ones(2))
    assert g.programs[0].backward is None and "(none" in g.programs[0].code


def test_programs_are_in_creation_order_across_entries():
    f = tg.compile(lambda x: x * 2 if x.sum() > 0 else x * 3)
    f(tg.ones(2))
    f(tg.ones(3))
    f(-tg.ones(2))                     # a second path of the first entry
    f(-tg.ones(2, dtype=tg.float64))
    shapes = [p.forward.inputs[0].type.shape for p in f.programs]
    assert shapes == [(2,), (3,), (2,), (2,)]
    reasons = [p.trace_reason for p in f.programs]
    assert reasons[0] == "first call"
    assert "shape changed ((2,) -> (3,))" in reasons[1]
    assert reasons[2].startswith("guard bool(")
    assert "dtype changed" in reasons[3]


# -- the debug dump --

@pytest.fixture
def dump_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAD_DUMP_DIR", str(tmp_path))
    return tmp_path


def test_dump_writes_ir_per_pass_code_guards_and_index(dump_dir):
    f, line = _branchy()
    _run_both_branches(f)
    fdir = dump_dir / "loss"
    assert sorted(p.name for p in fdir.iterdir() if p.is_dir()) == ["path0", "path1"]
    for k, path in enumerate(f.programs):
        d = fdir / f"path{k}"
        names = sorted(os.listdir(d))
        assert names[:5] == ["00_raw.txt", "01_functionalize.txt", "02_cse.txt", "03_dce.txt",
                             "04_vjp.txt"]
        assert str(path.raw) in (d / "00_raw.txt").read_text()
        assert "merged=" in (d / "02_cse.txt").read_text()
        assert str(path.forward) in (d / "05_forward.txt").read_text()
        assert str(path.backward) in (d / "06_backward.txt").read_text()
        assert (d / "forward.py").read_text() == path.forward_program.code
        assert (d / "backward.py").read_text() == path.backward_program.code
        guards = (d / "guards.txt").read_text()
        assert f"{__file__}:{line}" in guards and "if y.sum() > 0:" in guards
        assert ("graph.svg" in names) != ("graph_note.txt" in names)
        if "graph.svg" in names:
            assert "<svg" in (d / "graph.svg").read_text()
    assert "first call" in (fdir / "path0" / "guards.txt").read_text()
    assert "expected True, got False" in (fdir / "path1" / "guards.txt").read_text()
    assert "2 path(s)" in (fdir / "explain.txt").read_text()
    index = (dump_dir / "index.html").read_text()
    hrefs = re.findall(r'href="([^"]+)"', index)
    for k in range(2):
        for name in ("00_raw.txt", "forward.py", "backward.py", "guards.txt"):
            assert f"loss/path{k}/{name}" in hrefs
    for h in hrefs:
        assert (dump_dir / h).is_file(), h


def test_dump_without_dot_writes_a_note(dump_dir, monkeypatch):
    monkeypatch.setattr(dump_mod.shutil, "which", lambda name: None)
    f = tg.compile(lambda x: x.sin())
    f(tg.ones(2))
    d = dump_dir / "_lambda_" / "path0"
    assert not (d / "graph.svg").exists()
    assert "dot" in (d / "graph_note.txt").read_text()
    assert "graph.svg skipped" in (dump_dir / "index.html").read_text()


def test_same_name_functions_get_separate_dirs_and_reruns_replace(dump_dir):
    def make(k):
        def fn(x):
            return x * k
        return tg.compile(fn)
    a, b = make(2), make(3)
    a(tg.ones(2))
    b(tg.ones(2))
    assert (dump_dir / "fn" / "path0").is_dir() and (dump_dir / "fn_2" / "path0").is_dir()
    assert "mul(%x, 2)" in (dump_dir / "fn" / "path0" / "00_raw.txt").read_text()
    assert "mul(%x, 3)" in (dump_dir / "fn_2" / "path0" / "00_raw.txt").read_text()


def test_dump_failure_never_breaks_compilation(dump_dir, monkeypatch, caplog):
    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(dump_mod, "_write_path", boom)
    f = tg.compile(lambda x: (x * 3).sum())
    x = tg.ones(2, requires_grad=True)
    with caplog.at_level(logging.WARNING, logger="tracegrad"):
        y = f(x)
    y.backward()
    assert y.item() == 6.0 and x.grad.tolist() == [3.0, 3.0]
    assert any("debug dump" in r.getMessage() and "disk full" in r.getMessage()
               for r in caplog.records)


def test_no_dump_without_env(tmp_path, monkeypatch):
    monkeypatch.delenv("TRACEGRAD_DUMP_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    f = tg.compile(lambda x: x + 1)
    f(tg.ones(1))
    assert os.listdir(tmp_path) == []
