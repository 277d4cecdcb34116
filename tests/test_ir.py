"""The IR itself: the printed form of traced graphs (a tested contract, compared to exact
golden text), `verify()` accepting every graph the tracer and passes produce and rejecting
hand-built broken ones with IRError, and `to_networkx()` counts."""
import inspect

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import passes
from tracegrad.ir import Graph, IRError, TensorType
from tracegrad.ir.graph import Node
from tracegrad.ops.elementwise import ADD, ADD_, EXP, MUL


# ---- functions whose traces are compared to golden text (line numbers are computed) ----

def mlp(x, w):
    h = (x @ w).tanh()
    return h.sum()


def view_inplace(x):
    y = x * 2
    y[0].mul_(3)
    return y.sum(0)


def doubling_loop(x):
    y = x * 2
    while y.norm() < 10:
        y = y * 2
    return y


def masked(x):
    pos = x[x > 0]
    return pos.exp().mean()


def _line(fn, k):
    """`test_ir.py:N` for the k-th line of `fn`'s body (1 = first line after `def`)."""
    return f"test_ir.py:{inspect.getsourcelines(fn)[1] + k}"


def test_golden_matmul_tanh_sum():
    g = tg.trace(mlp, tg.ones(4, 3), tg.ones(3, 2))
    a, b = _line(mlp, 1), _line(mlp, 2)
    assert str(g) == f"""graph mlp(%x: f32[4,3], %w: f32[3,2]) -> (%2) {{
  %0: f32[4,2]     = mm(%x, %w)                           # {a}
  %1: f32[4,2]     = tanh(%0)                             # {a}
  %2: f32[]        = sum(%1, dims=(0, 1), keepdim=False)  # {b}
}}"""


def test_golden_inplace_on_view_marks_overwritten_operand():
    g = tg.trace(view_inplace, tg.ones(2, 3, dtype=tg.float64))
    a, b, c = (_line(view_inplace, k) for k in (1, 2, 3))
    assert str(g) == f"""graph view_inplace(%x: f64[2,3]) -> (%3) {{
  %0: f64[2,3]     = mul(%x, 2)                             # {a}
  %1: f64[3]       = select(%0, key=(0,))                   # {b}
  %2: f64[3]       = mul_(%1!, 3)                           # {b}
  %3: f64[3]       = sum_dim(%0, dims=(0,), keepdim=False)  # {c}
}}"""
    fg = passes.functionalize(g).verify()
    assert str(fg).splitlines()[4] == (
        f"  %3: f64[2,3]     = view_scatter(%0, %2, chain=(select(key=(0,)),))  # {b}")
    assert "!" not in str(fg)


def test_golden_data_dependent_loop_prints_guards():
    g = tg.trace(doubling_loop, tg.ones(2))
    a, cond, body = (_line(doubling_loop, k) for k in (1, 2, 3))
    norm = "norm({}, p=2, dims=(0,), keepdim=False)"
    lines = [
        "graph doubling_loop(%x: f32[2]) -> (%6) {",
        f"  %0: f32[2]       = mul(%x, 2)                               # {a}",
        f"  %1: f32[]        = {norm.format('%0')}  # {cond}",
        f"  %2: bool[]       = lt(%1, 10)                               # {cond}",
        f"  guard bool(%2) == True                                      # {cond}",
        f"  %3: f32[2]       = mul(%0, 2)                               # {body}",
        f"  %4: f32[]        = {norm.format('%3')}  # {cond}",
        f"  %5: bool[]       = lt(%4, 10)                               # {cond}",
        f"  guard bool(%5) == True                                      # {cond}",
        f"  %6: f32[2]       = mul(%3, 2)                               # {body}",
        f"  %7: f32[]        = {norm.format('%6')}  # {cond}",
        f"  %8: bool[]       = lt(%7, 10)                               # {cond}",
        f"  guard bool(%8) == False                                     # {cond}",
        "}"]
    assert str(g) == "\n".join(lines)


def test_golden_boolean_mask_records_shape_guard():
    g = tg.trace(masked, tg.tensor([1.0, -2.0, 3.0]))
    text = str(g)
    a = _line(masked, 1)
    assert f"  %1: f32[2]       = index(%x, %0, key=($0,))            # {a}" in text
    assert f"  guard shape(%1) == (2,)                                # {a}" in text


def test_printing_is_deterministic_and_typed():
    x, w = tg.randn(4, 3), tg.randn(3, 2)
    assert str(tg.trace(mlp, x, w)) == str(tg.trace(mlp, x, w))
    for line in str(tg.trace(mlp, x, w)).splitlines()[1:-1]:
        assert ": f32[" in line.split("=")[0]          # every binder carries its type


def test_unnamed_inputs_do_not_collide_with_node_numbers():
    holder = type("Holder", (), {})()
    holder.w = tg.ones(3)                               # reached via an attribute: unnamed

    def f(x):
        return (x * holder.w).sum()
    g = tg.trace(f, tg.ones(3))
    head = str(g).splitlines()[0]
    assert head == "graph f(%x: f32[3], %captured1: f32[3]) -> (%1) {"


# ---- verify ----

def _pipeline_graphs(fn, *args):
    """Every graph the compiler builds for fn(*args): raw, after each pass, vjp, partition."""
    raw = tg.trace(fn, *args)
    fg = passes.functionalize(raw)
    c = passes.cse(fg)
    d = passes.dce(c)
    wrt = [v for v, a in zip(d.inputs, args) if a.requires_grad]
    vr = passes.vjp(d, wrt)
    part = passes.partition(d, vr)
    return [raw, fg, c, d, vr.graph, part.forward, part.backward]


def _inplace_mix(x, w):
    y = x * w
    y[1:].add_(w[1:])
    z = y.exp()
    if z.sum() > 0:
        z = z + y
    return z.sum(), y


@pytest.mark.parametrize("fn", [mlp, _inplace_mix], ids=["mlp", "inplace_mix"])
def test_verify_passes_after_every_pass(fn):
    args = (tg.randn(4, 3, requires_grad=True), tg.randn(3, 2, requires_grad=True)) \
        if fn is mlp else (tg.randn(3, requires_grad=True), tg.randn(3, requires_grad=True))
    for g in _pipeline_graphs(fn, *args):
        assert g.verify() is g


def _graph():
    g = Graph("bad")
    x = g.add_input(TensorType((3,), tg.float32), "x")
    return g, x


def test_verify_rejects_use_before_definition():
    g, x = _graph()
    later = g.new_value(TensorType((3,), tg.float32))
    out = g.new_value(TensorType((3,), tg.float32))
    g.nodes.append(Node(ADD, (x, later), {}, out))
    g.nodes.append(Node(EXP, (x,), {}, later))
    with pytest.raises(IRError, match="before it is defined"):
        g.verify()


def test_verify_rejects_double_definition():
    g, x = _graph()
    v = g.add_node(EXP, (x,), {}, TensorType((3,), tg.float32))
    g.nodes.append(Node(MUL, (x, x), {}, v))
    with pytest.raises(IRError, match="defined twice"):
        g.verify()


def test_verify_rejects_inplace_that_changes_type():
    g, x = _graph()
    g.add_node(ADD_, (x, 1.0), {}, TensorType((3,), tg.float64))
    with pytest.raises(IRError, match="changes the type"):
        g.verify()


def test_verify_rejects_inplace_on_literal_and_bad_outputs():
    g, x = _graph()
    g.add_node(ADD_, (1.0, x), {}, TensorType((3,), tg.float32))
    with pytest.raises(IRError, match="must overwrite a Value"):
        g.verify()
    g, x = _graph()
    g.outputs = [g.new_value(TensorType((3,), tg.float32))]
    with pytest.raises(IRError, match="not defined"):
        g.verify()


def test_irerror_is_a_runtime_error():
    assert issubclass(IRError, RuntimeError)


# ---- networkx ----

def test_to_networkx_counts():
    nx = pytest.importorskip("networkx")
    g = tg.trace(mlp, tg.ones(4, 3), tg.ones(3, 2))
    G = g.to_networkx()
    assert isinstance(G, nx.DiGraph)
    # 2 inputs + 3 op vertices + 3 value vertices + 1 output vertex
    assert G.number_of_nodes() == 2 + 3 + 3 + 1
    # mm reads 2, tanh 1, sum 1; each op defines 1 value; 1 output edge
    assert G.number_of_edges() == 4 + 3 + 1
    assert nx.is_directed_acyclic_graph(G)
    ops = [d["prim"] for _, d in G.nodes(data=True) if d["kind"] == "op"]
    assert ops == ["mm", "tanh", "sum"]


def test_graph_values_are_ssa_and_types_match_arrays():
    x = tg.randn(2, 3)
    g = tg.trace(lambda x: (x.t() @ x).softmax(-1), x)
    ids = [v.id for v in g.all_values()]
    assert len(ids) == len(set(ids))
    outs = tg.ir.interpret(passes.functionalize(g), [x.numpy()])
    assert outs[0].shape == g.outputs[0].shape
    assert np.dtype(outs[0].dtype) == g.outputs[0].dtype.np
