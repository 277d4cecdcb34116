"""The SSA IR: `Graph`, `Node`, `Value`, and guards.

Note [IR invariants]
- A Graph has ordered `inputs`, `nodes` (a valid topological order) and `outputs`.
- Every `Value` is defined exactly once: as a graph input or as the output of one node.
- A Node holds its `Primitive` object (never a string), operands (Values or literals such as
  Python numbers or a random Generator), typed attributes (`attrs`, exactly the keyword
  arguments of the primitive's kernel), its output Value, the user source site and the phase
  (`"fwd"` or `"bwd"`) that produced it.
- `Guard`s record data-dependent decisions Python took from traced values (`bool(t)`,
  `t.item()`, ...): the Value, the kind of conversion, the expected outcome and the site.
  A guard sits between nodes: `position` is the number of nodes computed before it.
- In-place nodes (`prim.overwrites`) appear only before `functionalize`; they define a new
  Value holding the overwritten storage's new contents.
- A Graph's fields are all declared here; passes keep them current and add none:
  `mutations` [(input Value, Value of its final contents)] are the program's writes to its
  inputs (set by `functionalize`, trailing outputs after `partition`); `stale` {(node index,
  operand index or "out"): (site, saved version, final version, deferred, writer)} marks
  operands overwritten after a node read them (`check_inplace` reads it); `saved_reads`
  {(node output, operand index or "out"): Value} what backward reads instead of a saved
  operand whose storage changed only through `.data` later (Note [Writes through .data] in
  passes/functionalize.py); `nograd_writes`
  (raw graphs) are in-place results written under no_grad; `pass_log` [(pass, stats)];
  `values` {Value: array} the data seen while tracing, when a pass is given it.
  What compiling learns beyond the program (output structure, effects, plans) lives in the
  compilation record (Note [Compilation record] in compiler/record.py), not on the Graph.
Graphs are treated as immutable by passes: a pass builds a new Graph.
"""
import itertools

from .types import TensorType, Value  # noqa: F401  (Value: re-exported)


class Node:
    """One primitive application."""

    __slots__ = ("prim", "inputs", "attrs", "output", "site", "phase")

    def __init__(self, prim, inputs, attrs, output, site=None, phase="fwd"):
        self.prim = prim
        self.inputs = tuple(inputs)
        self.attrs = attrs
        self.output = output
        self.site = site
        self.phase = phase

    def value_inputs(self):
        return [v for v in self.inputs if isinstance(v, Value)]

    def __repr__(self):
        return f"<Node {self.output!r} = {self.prim.name}>"


class Guard:
    """A data-dependent decision: `kind(value) == expected` must hold to stay on this path."""

    __slots__ = ("value", "kind", "expected", "site", "position")

    def __init__(self, value, kind, expected, site, position):
        self.value, self.kind, self.expected = value, kind, expected
        self.site, self.position = site, position

    def describe(self):
        return f"{self.kind}({self.value!r}) == {self.expected!r}"

    def __repr__(self):
        return f"<Guard {self.describe()} at {self.site}>"


class Graph:
    """A typed SSA program. Build with `new_value`/`add_node`, then read `str(graph)`."""

    def __init__(self, name="graph"):
        self.name = name
        self.inputs = []
        self.nodes = []
        self.outputs = []
        self.guards = []
        self.mutations = []         # [(input Value, final Value)]: writes to inputs
        self.stale = {}             # operands overwritten after a node read them
        self.saved_reads = {}       # saved operands written only through `.data` later
        self.nograd_writes = set()  # raw graphs: in-place results written under no_grad
        self.pass_log = []          # [(pass name, stats dict)], appended by passes
        self.values = None          # Value -> concrete array seen while tracing, if known
        self._ids = itertools.count()

    def new_value(self, type, name=None, role=None):
        return Value(next(self._ids), type, name, role)

    def add_input(self, type, name=None, role="arg"):
        v = self.new_value(type, name, role)
        self.inputs.append(v)
        return v

    def add_node(self, prim, inputs, attrs, type, site=None, phase="fwd"):
        out = self.new_value(type)
        self.nodes.append(Node(prim, inputs, attrs, out, site, phase))
        return out

    def derive(self, name=None):
        """An empty graph that continues this one's value numbering and pass log."""
        g = Graph(name or self.name)
        g._ids = itertools.count(max([v.id for v in self.all_values()] + [-1]) + 1)
        g.pass_log = list(self.pass_log)
        g.values = self.values
        return g

    def all_values(self):
        yield from self.inputs
        for n in self.nodes:
            yield n.output

    def producers(self):
        return {n.output: n for n in self.nodes}

    def uses(self):
        """Value -> list of nodes reading it."""
        out = {}
        for n in self.nodes:
            for v in n.value_inputs():
                out.setdefault(v, []).append(n)
        return out

    def verify(self):
        from .verify import verify
        verify(self)
        return self

    def to_networkx(self):
        """A networkx.DiGraph: one vertex per value and node, edges along data flow."""
        import networkx as nx
        G = nx.DiGraph(name=self.name)
        for v in self.inputs:
            G.add_node(f"%{v.id}", kind="input", type=str(v.type), label=repr(v))
        for i, n in enumerate(self.nodes):
            nid = f"n{i}"
            G.add_node(nid, kind="op", prim=n.prim.name, site=n.site, phase=n.phase)
            for v in n.value_inputs():
                G.add_edge(f"%{v.id}", nid)
            G.add_node(f"%{n.output.id}", kind="value", type=str(n.output.type),
                       label=repr(n.output))
            G.add_edge(nid, f"%{n.output.id}")
        for k, v in enumerate(self.outputs):
            G.add_node(f"out{k}", kind="output")
            G.add_edge(f"%{v.id}", f"out{k}")
        return G

    def __str__(self):
        from .printer import format_graph
        return format_graph(self)

    def __repr__(self):
        return f"<Graph {self.name}: {len(self.inputs)} inputs, {len(self.nodes)} nodes>"

    def _repr_svg_(self):
        """Notebook display: the drawing installed by `set_display` (tracegrad's package
        root installs `tracegrad.viz.svg`, so the IR itself never imports viz), or None
        (the notebook shows the text form)."""
        return _display[0](self) if _display else None


_display = []


def set_display(fn):
    """Install `fn(graph) -> svg text or None` as the notebook display of graphs."""
    _display[:] = [fn]


__all__ = ["Graph", "Node", "Value", "Guard", "TensorType"]
