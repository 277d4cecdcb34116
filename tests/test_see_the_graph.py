"""`examples/see_the_graph.py` run as a user runs it: it writes the three pictures (SVG and PNG)
the README shows, and each SVG, parsed as XML, holds the graph it promises.

Skipped when the Graphviz `dot` program is missing (rendering needs it).
"""
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("dot") is None,
                                reason="Graphviz `dot` not installed (apt-get install graphviz)")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "see_the_graph.py"
STEMS = ("eager_graph", "compiled_mlp", "branch_paths")
SVG = "{http://www.w3.org/2000/svg}"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
GREEN = "#caff70"          # outputs: `dot` writes the color darkolivegreen1 as hex in SVG


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("img")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("TRACEGRAD_DUMP_DIR", None)
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--out", str(out)], cwd=out,
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return out, proc.stdout


def nodes_of(path):
    """[(DOT id, label text, fill colors, shape tags)] of every node in an SVG file."""
    root = ET.parse(path).getroot()
    found = []
    for g in root.iter(SVG + "g"):
        if g.get("class") != "node":
            continue
        title = g.find(SVG + "title").text
        text = " ".join(t.text or "" for t in g.iter(SVG + "text"))
        # a node with a tooltip nests its shapes in an <a> element
        shapes = [c for c in g.iter() if c.tag in (SVG + "polygon", SVG + "ellipse")]
        found.append((title, text, {c.get("fill") for c in shapes},
                      {c.tag[len(SVG):] for c in shapes}))
    clusters = [g for g in root.iter(SVG + "g") if g.get("class") == "cluster"]
    return found, [" ".join(t.text or "" for t in c.iter(SVG + "text")) for c in clusters]


def test_prints_every_file_with_a_description(run):
    out, stdout = run
    lines = stdout.splitlines()
    assert len(lines) == 2 * len(STEMS)
    for line, (stem, fmt) in zip(lines, [(s, f) for s in STEMS for f in ("svg", "png")]):
        path, _, description = line.partition(": ")
        assert Path(path).name == f"{stem}.{fmt}"
        assert (out / path).resolve() == (out / f"{stem}.{fmt}").resolve()
        assert len(description.split()) >= 5


def test_files_are_valid_svg_and_png(run):
    out, _ = run
    for stem in STEMS:
        root = ET.parse(out / f"{stem}.svg").getroot()
        assert root.tag == SVG + "svg"
        png = (out / f"{stem}.png").read_bytes()
        assert png.startswith(PNG_MAGIC)
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert width > 100 and height > 100


def test_eager_graph_is_the_tutorials(run):
    nodes, clusters = nodes_of(run[0] / "eager_graph.svg")
    assert clusters == []
    texts = [t for _, t, _, _ in nodes]
    # out = mean(mul(mul(y, y), 3)), y = x + 2: one node per grad_fn, as PyTorch records it
    for name, count in [("AddBackward0", 1), ("MulBackward0", 2), ("MeanBackward0", 1),
                        ("AccumulateGrad", 1)]:
        assert sum(t.startswith(name) for t in texts) == count, name
    leaves = [t for _, t, fill, _ in nodes if "lightblue" in fill]
    assert leaves == ["x f32[2,2]"]
    saved = [t for _, t, fill, _ in nodes if "orange" in fill]
    assert "y f32[2,2]" in saved                 # y * y saves y (named after the variable)
    assert [t for _, t, fill, _ in nodes if GREEN in fill] == ["output f32[]"]


def test_compiled_mlp_shows_forward_backward_and_saved_values(run):
    nodes, clusters = nodes_of(run[0] / "compiled_mlp.svg")
    assert sorted(c.split()[0] for c in clusters) == ["backward", "forward"]
    leaves = sorted(t.split()[0] for _, t, fill, _ in nodes if "lightblue" in fill)
    assert leaves == ["%b1", "%b2", "%w1", "%w2"]
    outputs = sorted(t.split()[1] for _, t, fill, _ in nodes if GREEN in fill)
    assert outputs == ["%b1", "%b2", "%w1", "%w2", "0"]     # grad %w1 ..., output 0
    saved = [t for _, t, fill, _ in nodes if "orange" in fill]
    assert saved and all(t.startswith("%saved") for t in saved)
    assert any(t.startswith("tanh(") for _, t, _, _ in nodes)
    assert sum("lightgrey" in fill for _, _, fill, _ in nodes) >= 5   # backward ops


def test_branch_paths_has_one_path_per_branch_with_its_guard(run):
    nodes, clusters = nodes_of(run[0] / "branch_paths.svg")
    paths = sorted(c for c in clusters if c.startswith("path "))
    assert len(paths) == 2
    assert sorted(c.split()[0] for c in clusters if not c.startswith("path ")) == \
        ["backward", "backward", "forward", "forward"]
    guards = sorted(t for _, t, fill, _ in nodes if "lightyellow" in fill)   # diamonds
    assert guards == ["bool(%1) == False", "bool(%1) == True"]
    assert paths == ["path 0: bool(%1) == True", "path 1: bool(%1) == False"]
    assert any("tanh(" in t for _, t, _, _ in nodes) and any("exp(" in t for _, t, _, _ in nodes)
