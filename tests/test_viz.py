"""tracegrad.viz: DOT for eager grad_fn graphs, IR graphs and compiled paths.

Golden DOT texts pin the conventions (colors, shapes, labels, stable ids); structural tests
check the same facts against torch's grad_fn graph and against SVGs laid out by the real
Graphviz `dot` (skipped, with the reason, when it is not installed).
"""
import inspect
import re
import shutil
import warnings
import xml.etree.ElementTree as ET

import pytest

import tracegrad as tg
from tracegrad import viz
from tracegrad.viz.collapse import find_runs

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz `dot` not installed (apt-get install graphviz)")

SVG = "{http://www.w3.org/2000/svg}"
NODE_RE = re.compile(r'^\s*(\w+) \[label=("(?:[^"\\]|\\.)*"|[^\s\]]+)(.*)\]$', re.M)
EDGE_RE = re.compile(r'^\s*(\w+) -> (\w+)(?: \[(.*)\])?$', re.M)


def dot_nodes(src):
    """{DOT id: (label text, rest of the attributes)} from DOT source."""
    return {m.group(1): (m.group(2).strip('"'), m.group(3)) for m in NODE_RE.finditer(src)}


def dot_edges(src):
    return [(m.group(1), m.group(2), m.group(3) or "") for m in EDGE_RE.finditer(src)]


def svg_counts(dot):
    root = ET.fromstring(dot.pipe(format="svg"))
    groups = [g.get("class") for g in root.iter(SVG + "g")]
    return groups.count("node"), groups.count("cluster"), root


def line_of(fn, offset):
    return inspect.getsourcelines(fn)[1] + offset


# ---------------------------------------------------------------- eager grad_fn graphs

EAGER_GOLDEN = r"""digraph grad_fn {
	graph [nodesep=0.2 ranksep=0.25]
	node [fillcolor=white fontsize=10 height=0.2 shape=box style=filled]
	edge [fontsize=8]
	v0 [label="output\nf32[]" fillcolor=darkolivegreen1 shape=octagon]
	n0 [label=SumBackward0 fillcolor=lightgrey tooltip="operands: f32[2,3]"]
	n1 [label=AddBackward0 fillcolor=lightgrey tooltip="operands: f32[2,3], -"]
	n2 [label=MulBackward0 fillcolor=lightgrey tooltip="operands: f32[2,3], f32[2,3]"]
	v1 [label="x\nf32[2,3]" fillcolor=orange]
	n3 [label=AccumulateGrad fillcolor=lightgrey]
	v2 [label="w\nf32[2,3]" fillcolor=lightblue]
	n0 -> v0 [label="f32[]"]
	n1 -> n0 [label="f32[2,3]"]
	n2 -> n1 [label="f32[2,3]"]
	n3 -> n2 [label="f32[2,3]"]
	v1 -> n2 [label="input 0" color=darkorange dir=none style=dashed]
	v2 -> n3
}
"""


def _eager_example(lib):
    x = lib.ones(2, 3)
    w = lib.full((2, 3), 0.5, requires_grad=True)
    y = x * w + 2
    return y.sum(), x, w


def test_eager_golden():
    out, x, w = _eager_example(tg)
    dot = viz.to_dot(out, params={"x": x, "w": w})
    assert dot.source == EAGER_GOLDEN
    # deterministic: a fresh identical graph prints the same text
    out2, x2, w2 = _eager_example(tg)
    assert viz.to_dot(out2, params={"x": x2, "w": w2}).source == EAGER_GOLDEN


def test_eager_backward_nodes_are_grey_like_torchviz():
    """DESIGN.md section 7: backward ops grey. Every box of an eager graph is a backward node
    (torchviz fills them light grey); leaves stay blue, saved tensors orange."""
    out, x, w = _eager_example(tg)
    nodes = dot_nodes(viz.to_dot(out, params={"x": x, "w": w}).source)
    for label, rest in nodes.values():
        if label.endswith("Backward0") or label == "AccumulateGrad":
            assert "fillcolor=lightgrey" in rest, label

def _short(name):
    return name.rpartition("::")[2]          # torch::autograd::AccumulateGrad


def _torch_graph(root):
    """Names of torch's backward nodes and the (producer, consumer) name pairs."""
    names, edges, seen, stack = [], [], set(), [root.grad_fn]
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        names.append(_short(fn.name()))
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                edges.append((_short(nxt.name()), _short(fn.name())))
                stack.append(nxt)
    return sorted(names), sorted(edges)


def test_eager_nodes_and_edges_match_torch():
    torch = pytest.importorskip("torch")
    for build in (_eager_example,
                  lambda lib: ((lib.ones(3, 4, requires_grad=True) @ lib.ones(4, 2)).tanh()
                               .sum(),)):
        ours = viz.to_dot(build(tg)[0]).source
        nodes = dot_nodes(ours)
        boxes = {k: v[0] for k, v in nodes.items() if k.startswith("n")}
        our_edges = sorted((boxes[a], boxes[b]) for a, b, _ in dot_edges(ours)
                           if a in boxes and b in boxes)
        names, edges = _torch_graph(build(torch)[0])
        assert sorted(boxes.values()) == names
        assert our_edges == edges


def test_eager_saved_result_leaf_names_and_multiple_roots():
    a = tg.randn(3, requires_grad=True)
    b = tg.randn(3, requires_grad=True)
    t = a.tanh()                      # TanhBackward0 saves its result
    src = viz.to_dot([t, (a * b).sum()], params={"a": a, "b": b}).source
    nodes = dot_nodes(src)
    labels = {k: v[0] for k, v in nodes.items()}
    assert r"output 0\nf32[3]" in labels.values() and r"output 1\nf32[]" in labels.values()
    leaves = [lab for lab, rest in nodes.values() if "lightblue" in rest]
    assert sorted(leaves) == [r"a\nf32[3]", r"b\nf32[3]"]
    # one AccumulateGrad per leaf even though `a` feeds two nodes
    assert sum(lab == "AccumulateGrad" for lab in labels.values()) == 2
    saved_edges = [e for e in dot_edges(src) if "darkorange" in e[2]]
    assert any('label=result' in e[2] for e in saved_edges)       # tanh's saved output
    tanh = next(k for k, lab in labels.items() if lab == "TanhBackward0")
    assert any(dst == tanh and "result" in attrs for _, dst, attrs in saved_edges)


def test_eager_graph_through_a_compiled_call():
    f = tg.compile(lambda x, w: (x * w).sum())
    w = tg.randn(3, requires_grad=True)
    f(tg.randn(3), w)                              # traces
    y = f(tg.randn(3), w) * 2                      # runs the compiled path
    labels = [lab for lab, _ in dot_nodes(viz.to_dot(y, params={"w": w}).source).values()]
    assert any(lab.startswith("CompiledFunctionBackward") for lab in labels)
    assert r"w\nf32[3]" in labels and "AccumulateGrad" in labels


# ---------------------------------------------------------------- IR graphs

IR_GOLDEN = r"""digraph three_ops {
	graph [nodesep=0.2 ranksep=0.25]
	node [fillcolor=white fontsize=10 height=0.2 shape=box style=filled]
	edge [fontsize=8]
	v0 [label="%x\nf32[2,3]" shape=ellipse]
	v1 [label="%w\nf32[3,4]" shape=ellipse]
	n0 [label="mm(%x, %w)\n%0: f32[2,4]" tooltip="test_viz.py:@A@ in three_ops"]
	n1 [label="relu(%0)\n%1: f32[2,4]" tooltip="test_viz.py:@B@ in three_ops"]
	n2 [label="sum(%1, dims=(0, 1), keepdim=False)\n%2: f32[]" tooltip="test_viz.py:@B@ in three_ops"]
	o0 [label="output 0\nf32[]" fillcolor=darkolivegreen1 shape=octagon]
	v0 -> n0 [label="f32[2,3]"]
	v1 -> n0 [label="f32[3,4]"]
	n0 -> n1 [label="f32[2,4]"]
	n1 -> n2 [label="f32[2,4]"]
	n2 -> o0 [label="f32[]"]
}
"""


def three_ops(x, w):
    h = x @ w
    return h.relu().sum()


def test_ir_golden():
    g = tg.trace(three_ops, tg.ones(2, 3), tg.ones(3, 4))
    want = IR_GOLDEN.replace("@A@", str(line_of(three_ops, 1))).replace(
        "@B@", str(line_of(three_ops, 2)))
    assert viz.to_dot(g).source == want


def inplace_and_view(x):
    y = x * 2
    y.add_(1)
    z = y[0]
    return z.t().exp() if z.dim() == 2 else z.exp()


def test_inplace_edge_red_view_edge_dotted():
    g = tg.trace(inplace_and_view, tg.ones(3, 4))
    src = viz.to_dot(g).source
    labels = {k: v[0] for k, v in dot_nodes(src).items()}
    by_prim = {lab.split("(")[0]: k for k, lab in labels.items() if k.startswith("n")}
    edges = {dst: attrs for _, dst, attrs in dot_edges(src)}
    assert "color=red" in edges[by_prim["add_"]]                 # the overwritten operand
    assert "style=dotted" in edges[by_prim["select"]]            # a view of its operand
    assert "color=red" not in edges[by_prim["mul"]] and "dotted" not in edges[by_prim["mul"]]
    assert "!" in labels[by_prim["add_"]]                        # as str(graph) marks it


class _Holder:
    pass


def test_unnamed_inputs_are_named_as_str_graph_names_them():
    """A tensor reached through an attribute has no name; the drawing must call it what
    `str(graph)` and explain() call it (`%captured1`), never a bare number that is also the
    name of a node's result."""
    holder = _Holder()
    holder.w = tg.ones(3, requires_grad=True)

    def f(x):
        return (x * holder.w).exp().sum()
    g = tg.trace(f, tg.ones(3))
    assert "mul(%x, %captured1)" in str(g)
    labels = [lab for lab, _ in dot_nodes(viz.to_dot(g).source).values()]
    assert r"%captured1\nf32[3]" in labels and r"mul(%x, %captured1)\n%0: f32[3]" in labels
    cf = tg.compile(f)
    cf(tg.ones(3)).backward()
    labels = [lab for lab, _ in dot_nodes(viz.to_dot(cf.programs[0]).source).values()]
    assert r"mul(%x, %captured1)\n%0: f32[3]" in labels
    assert r"grad %captured1\nf32[3]" in labels
    assert not any(lab.startswith("%1") for lab in labels)

def guarded(x, w):
    y = x * w
    if y.sum() > 0:
        return y
    return -y


PATH_GOLDEN = r"""digraph guarded {
	graph [nodesep=0.2 ranksep=0.25]
	node [fillcolor=white fontsize=10 height=0.2 shape=box style=filled]
	edge [fontsize=8]
	v3 [label="%saved0 = %x\nf32[2,3]" fillcolor=orange tooltip="saved by forward for backward"]
	subgraph cluster_fwd {
		graph [color=grey50 fontsize=11 label=forward style=rounded]
		v0 [label="%x\nf32[2,3]" shape=ellipse]
		v1 [label="%w\nf32[2,3]" fillcolor=lightblue shape=ellipse]
		n0 [label="mul(%x, %w)\n%0: f32[2,3]" tooltip="test_viz.py:@A@ in guarded"]
		n1 [label="sum(%0, dims=(0, 1), keepdim=False)\n%1: f32[]" tooltip="test_viz.py:@B@ in guarded"]
		n2 [label="gt(%1, 0)\n%2: bool[]" tooltip="test_viz.py:@B@ in guarded"]
		g0 [label="bool(%2) == True" fillcolor=lightyellow shape=diamond tooltip="test_viz.py:@B@ in guarded"]
		v2 [label="output 0\nf32[2,3]" fillcolor=darkolivegreen1 shape=octagon]
	}
	subgraph cluster_bwd {
		graph [color=grey50 fontsize=11 label=backward style=rounded]
		v4 [label="%grad_out0 (cotangent)\nf32[2,3]" fillcolor=lightgrey shape=ellipse]
		n3 [label="mul(%grad_out0, %saved0)\n%0: f32[2,3]" fillcolor=lightgrey tooltip="test_viz.py:@A@ in guarded"]
		v5 [label="grad %w\nf32[2,3]" fillcolor=darkolivegreen1 shape=octagon]
	}
	v0 -> n0 [label="f32[2,3]"]
	v1 -> n0 [label="f32[2,3]"]
	n0 -> n1 [label="f32[2,3]"]
	n1 -> n2 [label="f32[]"]
	n2 -> g0 [label="bool[]"]
	n0 -> v2 [label="f32[2,3]"]
	v0 -> v3 [label="f32[2,3]" color=darkorange style=dashed]
	v4 -> n3 [label="f32[2,3]"]
	v3 -> n3 [label="f32[2,3]"]
	v2 -> v4 [color=grey40 style=dashed]
	n3 -> v5 [label="f32[2,3]"]
}
"""


def _guarded_fn():
    f = tg.compile(guarded)
    f(tg.ones(2, 3), tg.ones(2, 3, requires_grad=True))
    return f


def test_compiled_path_golden():
    f = _guarded_fn()
    want = PATH_GOLDEN.replace("@A@", str(line_of(guarded, 1))).replace(
        "@B@", str(line_of(guarded, 2)))
    assert viz.to_dot(f.programs[0]).source == want


def test_guards_are_diamonds_with_expected_outcome():
    f = _guarded_fn()
    f(-tg.ones(2, 3), tg.ones(2, 3, requires_grad=True))     # the other branch: a 2nd path
    assert len(f.programs) == 2
    src = viz.to_dot(f).source
    guards = [(lab, rest) for lab, rest in dot_nodes(src).values() if "==" in lab]
    assert len(guards) == 2 and all("shape=diamond" in rest for _, rest in guards)
    assert sorted(lab.split(" == ")[1] for lab, _ in guards) == ["False", "True"]
    # raw traced graph too
    raw = viz.to_dot(tg.trace(guarded, tg.ones(2, 3), tg.ones(2, 3))).source
    assert re.search(r'label="bool\(%\d+\) == True" [^\n]*shape=diamond', raw)


def count_positive(x):
    return x * sum(1 for v in x.tolist() if v > 0)


def test_guard_on_a_long_value_keeps_a_readable_diamond():
    """`tolist()` of a 500-element tensor is one guard whose expected outcome has thousands
    of characters: the diamond shows its start (the tooltip a little more), never all of it."""
    f = tg.compile(count_positive)
    f(tg.linspace(-1.0, 1.0, 500))
    src = viz.to_dot(f.programs[0]).source
    (label, rest), = [(lab, rest) for lab, rest in dot_nodes(src).values()
                      if "shape=diamond" in rest]
    assert label.startswith("tolist(%x) == [-1.0, ")
    assert len(label) <= 60 and label.endswith("…")
    assert max(len(line) for line in src.splitlines()) < 1000

def test_compiled_function_one_cluster_per_path():
    f = _guarded_fn()
    f(-tg.ones(2, 3), tg.ones(2, 3, requires_grad=True))
    src = f.to_dot().source
    assert src == viz.to_dot(f).source
    for j in range(2):
        for sub in ("", "_fwd", "_bwd"):
            assert f"subgraph cluster_p{j}{sub} {{" in src
    assert "label=forward" in src and "label=backward" in src
    # backward ops grey, forward ops white
    nodes = dot_nodes(src)
    for j, p in enumerate(f.programs):
        n_fwd, n_bwd = len(p.forward.nodes), len(p.backward.nodes)
        assert all("fillcolor" not in nodes[f"p{j}_n{k}"][1] for k in range(n_fwd))
        assert all("lightgrey" in nodes[f"p{j}_n{k}"][1] for k in range(n_fwd, n_fwd + n_bwd))
    # every id is a short counter, never a memory address
    assert all(re.fullmatch(r"p\d_[nvg]\d+", k) for k in nodes)
    # a never-called compiled function draws a note instead of failing
    assert "not compiled yet" in viz.to_dot(tg.compile(guarded)).source


# ---------------------------------------------------------------- SVG via the real `dot`

@needs_dot
def test_svg_counts_nodes_and_clusters():
    out, x, w = _eager_example(tg)
    n, c, _ = svg_counts(viz.to_dot(out, params={"w": w}))
    # Sum, Add, Mul, AccumulateGrad + leaf w + output + saved x (Mul keeps only what w's
    # gradient reads, as PyTorch does)
    assert (n, c) == (7, 0)
    f = _guarded_fn()
    n, c, _ = svg_counts(viz.to_dot(f.programs[0]))
    # fwd: x, w, mul, sum, gt, guard, output; saved x; bwd: grad_out, mul, grad w
    assert (n, c) == (11, 2)
    f(-tg.ones(2, 3), tg.ones(2, 3, requires_grad=True))
    n, c, _ = svg_counts(viz.to_dot(f))
    assert c == 6 and n == len(dot_nodes(viz.to_dot(f).source))


@needs_dot
def test_render_writes_file_and_returns_path(tmp_path):
    f = _guarded_fn()
    p = viz.render(f, tmp_path / "guarded.svg")
    assert p == str(tmp_path / "guarded.svg")
    root = ET.parse(p).getroot()
    assert root.tag == SVG + "svg"
    p2 = viz.render(f.programs[0].forward, tmp_path / "sub" / "fwd", format="png")
    assert p2 == str(tmp_path / "sub" / "fwd.png")
    with open(p2, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="format"):
        viz.render(f, tmp_path / "x.gif", format="gif")


def test_render_without_dot_names_the_os_package(monkeypatch, tmp_path):
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    f = _guarded_fn()
    with pytest.raises(RuntimeError, match="apt-get install graphviz") as info:
        viz.render(f, tmp_path / "g.svg")
    assert isinstance(info.value, viz.GraphvizNotFound)
    assert not (tmp_path / "g.svg").exists()
    assert f._repr_svg_() is None                 # notebooks fall back to the text repr
    assert "digraph" in viz.to_dot(f).source      # DOT text never needs `dot`


@needs_dot
def test_labels_with_special_characters_render_literally():
    from tracegrad.ir.graph import Graph
    from tracegrad.ir.types import TensorType
    weird = 'a<b>"c\\d{e|f}'
    g = Graph("<lambda>")
    v = g.add_input(TensorType((2,), tg.float32), name=weird)
    g.outputs = [v]
    n, _, root = svg_counts(viz.to_dot(g))
    assert n == 2
    texts = [t.text for t in root.iter(SVG + "text")]
    assert "%" + weird in texts and "<lambda>" in [t.text for t in root.iter(SVG + "title")]


@needs_dot
def test_notebook_reprs_and_package_attribute():
    assert tg.viz is viz
    f = _guarded_fn()
    for obj in (f, f.programs[0], f.programs[0].forward):
        svg = obj._repr_svg_()
        assert ET.fromstring(svg).tag == SVG + "svg"


# ---------------------------------------------------------------- memory plan colors

PALETTE = re.compile(r'fillcolor="#[0-9a-f]{6}"')


def test_color_by_buffer_uses_the_memory_plan():
    f = tg.compile(lambda x, w: ((x @ w).tanh() * 2 + 1).exp().sum())
    f(tg.randn(64, 64), tg.randn(64, 64, requires_grad=True))
    p = f.programs[0]
    src = viz.to_dot(p, color_by="buffer").source
    assert "buffer 0: input %x" in src
    fills = PALETTE.findall(src)
    assert len(fills) >= len(p.forward.nodes)
    # the plan's takeovers put a node in its operand's buffer: equal colors, same buffer
    nodes = dot_nodes(src)
    fwd = p.forward
    dot_id = {v: f"v{j}" for j, v in enumerate(fwd.inputs)}
    dot_id.update({n.output: f"n{j}" for j, n in enumerate(fwd.nodes)})

    def fill(v):
        return re.search(r'fillcolor="(#\w+)"', nodes[dot_id[v]][1]).group(1)
    assert p.forward_plan.takeover
    for i, k in p.forward_plan.takeover.items():
        assert fill(fwd.nodes[i].output) == fill(fwd.nodes[i].inputs[k])
    plain = viz.to_dot(p).source
    assert not PALETTE.search(plain)


def test_color_by_buffer_without_plan_is_a_noted_noop():
    g = tg.trace(three_ops, tg.ones(2, 3), tg.ones(3, 4))
    with pytest.warns(UserWarning, match="no memory plan"):
        src = viz.to_dot(g, color_by="buffer").source
    assert src.startswith("// color_by")
    assert not PALETTE.search(src)
    from tracegrad.passes.plan_memory import plan_memory
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        src = viz.to_dot(g, color_by="buffer", plan=plan_memory(g)).source
    assert "buffer 0: input %x" in src and PALETTE.search(src)


# ---------------------------------------------------------------- large graphs

def test_find_runs():
    seq = ["x"] + ["mm", "add", "tanh"] * 5 + ["sum"] + ["a"] * 4 + ["b", "c"] * 2
    assert find_runs(seq) == [(1, 3, 5), (17, 1, 4)]
    assert find_runs(["a", "b"] * 2) == []          # two repetitions are not collapsed


def _mlp(depth=50, width=8):
    tg.manual_seed(0)
    mods = []
    for _ in range(depth):
        mods += [tg.nn.Linear(width, width), tg.nn.Tanh()]
    return tg.nn.Sequential(*mods)


def test_collapse_compiled_mlp():
    model = _mlp()
    f = tg.compile(lambda x: model(x).sum())
    f(tg.randn(4, 8))
    full = viz.to_dot(f, collapse=False).source
    assert len(dot_nodes(full)) > 300
    small = viz.to_dot(f).source
    nodes = dot_nodes(small)
    assert len(nodes) < 100
    assert any(lab.startswith("×50 ") for lab, _ in nodes.values())
    assert "label=forward" in small and "label=backward" in small
    # every edge still joins drawn nodes
    assert all(a in nodes and b in nodes for a, b, _ in dot_edges(small))


def test_collapse_eager_mlp_names_parameters():
    model = _mlp()
    out = model(tg.randn(4, 8)).sum()
    src = viz.to_dot(out, params=dict(model.named_parameters())).source
    nodes = dot_nodes(src)
    assert len(nodes) < 30
    # each Linear is one AddmmBackward0 node, as in PyTorch
    assert any(lab.startswith("×50 ") and "AddmmBackward0" in lab for lab, _ in nodes.values())
    assert "98.weight" in src                      # member names kept in tooltips
    assert viz.to_dot(out, collapse=False).source.count("AddmmBackward0") == 50


def test_eager_chain_of_10000_ops_needs_no_recursion():
    x = tg.randn(3, requires_grad=True)
    y = x
    for _ in range(10000):
        y = y * 1.0001
    full = viz.to_dot(y, collapse=False).source
    assert full.count("[label=MulBackward0") == 10000
    small = viz.to_dot(y).source
    assert "×10000 MulBackward0" in small and len(dot_nodes(small)) < 10


def test_rejects_other_objects():
    with pytest.raises(TypeError, match="cannot draw"):
        viz.to_dot(42)
    with pytest.raises(ValueError, match="color_by"):
        viz.to_dot(tg.trace(three_ops, tg.ones(2, 3), tg.ones(3, 4)), color_by="dtype")


MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-", "svg": b"<?xml"}


@needs_dot
@pytest.mark.parametrize("name,fmt", [("g.png", "png"), ("g.PNG", "png"), ("g.pdf", "pdf"),
                                      ("g.svg", "svg"), ("g", "svg")])
def test_render_format_follows_the_file_suffix(tmp_path, name, fmt):
    f = _guarded_fn()
    p = viz.render(f, tmp_path / name)
    assert p == str(tmp_path / (name if "." in name else f"{name}.svg"))
    with open(p, "rb") as fh:
        assert fh.read(len(MAGIC[fmt])) == MAGIC[fmt]


@needs_dot
def test_render_format_argument_overrides_the_suffix(tmp_path):
    p = viz.render(_guarded_fn(), tmp_path / "picture.svg", format="png")
    assert p == str(tmp_path / "picture.svg")
    with open(p, "rb") as fh:
        assert fh.read(8) == MAGIC["png"]


def test_render_refuses_an_unknown_suffix_before_drawing(tmp_path):
    with pytest.raises(ValueError, match=r"\.gif") as info:
        viz.render(_guarded_fn(), tmp_path / "g.gif")
    assert "format=" in str(info.value)
    assert not (tmp_path / "g.gif").exists()


def test_a_training_steps_picture_names_gradients_and_optimizer_state():
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(4, 3), tg.nn.ReLU(), tg.nn.Linear(3, 2))
    opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @tg.compile
    def step(x, y):
        opt.zero_grad()
        loss = tg.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        step(tg.ones(5, 4), tg.tensor([0, 1, 1, 0, 1]))
    text = step.explain()
    src = step.to_dot().source
    for name in ("0.weight", "0.bias", "2.weight", "2.bias"):
        assert f"%{name}.momentum_buffer:" in text            # not %captured<k>
        assert f"%{name}.grad" in src and f"writes %{name}.momentum_buffer" in src
    assert "captured" not in "".join(l.split(":")[0] for l in text.splitlines()
                                     if l.startswith("  %"))
