"""The drawing conventions every tracegrad picture shares: colors, shapes, labels, ids.

Note [Drawing conventions]
Users who know torchviz read our pictures without a legend: leaves that require grad are
light blue, saved tensors orange, outputs green, backward ops grey. On top of that: guards
are diamonds labelled with their expected outcome, an operand overwritten in place arrives
on a red edge, a view's operand on a dotted edge, and edges carry the type that flows
(`f32[4,3]`). Node kinds (below) map to one attribute set each, so eager graphs, IR graphs
and compiled paths look alike.

Labels are plain DOT strings (never record or HTML labels): `label()` doubles backslashes
and marks the text `nohtml`, so `<lambda>`, quotes, braces and bars print literally; the
graphviz package adds the surrounding quotes and escapes `"`. Ids are short counters
(`n0`, `v3`) handed out in traversal order, so the same object always prints the same DOT.
"""
import os

import graphviz

from .._dtype import _SHORT_NAMES as _SHORT_DTYPE   # one table with the IR's

# kind -> node attributes (beyond the defaults in GRAPH_NODE_ATTRS)
NODE_STYLE = {
    "op": {},
    "bwd_op": {"fillcolor": "lightgrey"},
    "accumulate": {"fillcolor": "lightgrey"},
    "input": {"shape": "ellipse"},
    "leaf": {"shape": "ellipse", "fillcolor": "lightblue"},
    "tensor_leaf": {"fillcolor": "lightblue"},
    "saved": {"fillcolor": "orange"},
    "output": {"shape": "octagon", "fillcolor": "darkolivegreen1"},
    "mutation": {"shape": "octagon", "fillcolor": "mistyrose", "color": "red"},
    "cotangent": {"shape": "ellipse", "fillcolor": "lightgrey"},
    "guard": {"shape": "diamond", "fillcolor": "lightyellow"},
    "collapsed": {"fillcolor": "lavender", "peripheries": "2"},
    "note": {"shape": "plaintext", "style": "", "fillcolor": ""},
}

# edge kind -> edge attributes
EDGE_STYLE = {
    None: {},
    "inplace": {"color": "red", "penwidth": "2"},
    "view": {"style": "dotted"},
    "saved": {"color": "darkorange", "style": "dashed", "dir": "none"},
    "save": {"color": "darkorange", "style": "dashed"},
    "cotangent": {"style": "dashed", "color": "grey40"},
}

GRAPH_NODE_ATTRS = {"shape": "box", "style": "filled", "fillcolor": "white",
                    "fontsize": "10", "height": "0.2"}
GRAPH_ATTRS = {"ranksep": "0.25", "nodesep": "0.2"}

# colors for `color_by="buffer"` (buffer id modulo the palette)
BUFFER_PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
                  "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f")

MAX_LINE = 48


def esc(text):
    """Text made literal inside a DOT escString (backslashes doubled)."""
    return str(text).replace("\\", "\\\\")


def label(*lines):
    """A multi-line DOT label from plain text lines (`<...>` never becomes HTML)."""
    parts = [p for x in lines if x is not None for p in str(x).split("\n")]
    return graphviz.nohtml("\\n".join(esc(p) for p in parts))


def short(text, width=MAX_LINE):
    """`text` cut to `width` characters with an ellipsis."""
    text = str(text)
    return text if len(text) <= width else text[:width - 1] + "…"


def type_str(shape, dtype):
    """`f32[4,3]` for a shape and a tracegrad or numpy dtype (dtype may be None)."""
    name = getattr(dtype, "name", None) or str(dtype)
    dims = ",".join(str(int(s)) for s in shape)
    return f"{_SHORT_DTYPE.get(name, name)}[{dims}]"


def site_str(site):
    """A user source site without its directory: `model.py:7 in f` (stable across checkouts)."""
    if not site:
        return None
    path, sep, rest = str(site).partition(":")
    return os.path.basename(path) + sep + rest


def buffer_color(buf):
    return BUFFER_PALETTE[int(buf) % len(BUFFER_PALETTE)]


class Ids:
    """Stable ids per prefix (`n0`, `n1`, `v0`, ...), in the order they are asked for."""

    def __init__(self, prefix=""):
        self.prefix = prefix
        self.counts = {}

    def new(self, kind):
        k = self.counts.get(kind, 0)
        self.counts[kind] = k + 1
        return f"{self.prefix}{kind}{k}"
