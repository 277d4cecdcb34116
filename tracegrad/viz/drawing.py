"""A neutral picture model (`Drawing`) and its translation to a `graphviz.Digraph`.

The builders (eager.py, ir.py) describe what to draw as kinds of nodes and edges, inside
nested clusters; collapse.py rewrites a Drawing; `emit` alone knows DOT syntax and applies
the conventions of style.py. Emission follows insertion order everywhere, so the same
object always gives the same DOT text.
"""
from dataclasses import dataclass, field, replace

import graphviz

from . import style


@dataclass
class DNode:
    id: str
    kind: str                 # a key of style.NODE_STYLE
    lines: tuple              # label lines (plain text)
    cluster: tuple = ()       # path of cluster ids, () = top level
    tooltip: str = None
    key: str = None           # op name for collapsing repeated blocks; None = not an op
    order: int = 0            # program order of ops (what "consecutive" means)
    fill: str = None          # overrides the kind's fill color (buffer coloring)
    summary: str = None       # what equal members share when grouped (default: last line)


@dataclass
class DEdge:
    src: str
    dst: str
    label: str = None
    kind: str = None          # a key of style.EDGE_STYLE
    tooltip: str = None
    count: int = 1            # parallel edges merged into this one (collapse.py)


@dataclass
class Drawing:
    name: str = "graph"
    nodes: list = field(default_factory=list)
    edges: list = field(default_factory=list)
    clusters: dict = field(default_factory=dict)    # path tuple -> label, in order
    notes: list = field(default_factory=list)       # DOT comments

    def add(self, id, kind, lines, **kw):
        self.nodes.append(DNode(id, kind, tuple(lines), **kw))
        return id

    def edge(self, src, dst, label=None, kind=None, tooltip=None):
        self.edges.append(DEdge(src, dst, label, kind, tooltip))

    def cluster(self, path, label):
        self.clusters.setdefault(tuple(path), label)
        return tuple(path)

    def copy_with(self, nodes, edges):
        return replace(self, nodes=list(nodes), edges=list(edges),
                       clusters=dict(self.clusters), notes=list(self.notes))


def emit(drawing):
    """The `graphviz.Digraph` of a Drawing."""
    dot = graphviz.Digraph(name=graphviz.nohtml(style.esc(drawing.name)),
                           comment="; ".join(drawing.notes) or None,
                           graph_attr=dict(style.GRAPH_ATTRS),
                           node_attr=dict(style.GRAPH_NODE_ATTRS),
                           edge_attr={"fontsize": "8"})
    by_cluster = {}
    for n in drawing.nodes:
        by_cluster.setdefault(n.cluster, []).append(n)
    _emit_nodes(dot, by_cluster.get((), ()))
    _emit_clusters(dot, (), drawing, by_cluster)
    for e in drawing.edges:
        attrs = dict(style.EDGE_STYLE[e.kind])
        text = " ".join(x for x in (e.label, f"×{e.count}" if e.count > 1 else None) if x)
        if text:
            attrs["label"] = style.label(text)
        if e.tooltip:
            attrs["tooltip"] = style.label(e.tooltip)
        dot.edge(e.src, e.dst, **attrs)
    return dot


def _emit_nodes(g, nodes):
    for n in nodes:
        attrs = dict(style.NODE_STYLE[n.kind])
        if n.fill:
            attrs["fillcolor"] = n.fill
        if n.tooltip:
            attrs["tooltip"] = style.label(n.tooltip)
        g.node(n.id, style.label(*n.lines), **attrs)


def _emit_clusters(parent, path, drawing, by_cluster):
    # Nesting is at most a few levels (function > path > forward/backward): recursion is fine.
    for sub, lbl in drawing.clusters.items():
        if len(sub) != len(path) + 1 or sub[:len(path)] != path:
            continue
        g = graphviz.Digraph(name="cluster_" + "_".join(sub),
                             graph_attr={"label": style.label(lbl), "style": "rounded",
                                         "color": "grey50", "fontsize": "11"})
        _emit_nodes(g, by_cluster.get(sub, ()))
        _emit_clusters(g, sub, drawing, by_cluster)
        parent.subgraph(g)
