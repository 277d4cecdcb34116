"""`tracegrad.viz`: Graphviz pictures of eager grad_fn graphs, IR graphs and compiled code.

```python
import tracegrad as tg
y = (x * w + 2).sum()
tg.viz.to_dot(y, params={"w": w})          # a graphviz.Digraph (displays in notebooks)
tg.viz.render(f, "f.svg")                  # a compiled function, all its paths -> "f.svg"
```
`to_dot` builds a neutral Drawing (eager.py / ir.py), collapses it when large
(collapse.py) and emits DOT (drawing.py) with the conventions of style.py. Only `render`
and SVG display need the Graphviz `dot` program; building DOT text never does.
"""
import os
import shutil

import graphviz

from .._errors import TracegradRuntimeError, TracegradTypeError, TracegradValueError
from .._tensor import Tensor
from .collapse import collapse as _collapse
from .drawing import emit
from .eager import eager_drawing
from .ir import graph_drawing

__all__ = ["to_dot", "render", "GraphvizNotFound"]

COLLAPSE_THRESHOLD = 300
FORMATS = ("svg", "png", "pdf")


class GraphvizNotFound(TracegradRuntimeError):
    """The Graphviz `dot` program is not installed (needed to render, not to build DOT)."""


def to_dot(obj, *, params=None, color_by=None, plan=None, collapse=None,
           collapse_threshold=COLLAPSE_THRESHOLD):
    """A `graphviz.Digraph` of `obj`.

    `obj` is an eager result Tensor (or a list of them: their grad_fn graph), a
    `tracegrad.ir.Graph`, a compiled function (every cached path) or one of its
    `.programs` (a CompiledPath). `params={name: tensor}` names leaves and saved tensors
    of eager graphs. `color_by="buffer"` colors values by memory-plan buffer: a compiled
    path's own plans, or `plan=` (a `passes.plan_memory` MemoryPlan) for a bare Graph;
    without a plan it is a no-op with a warning. `collapse` merges repeated
    op blocks into `×N` boxes: None (default) does so above `collapse_threshold` nodes,
    True always, False never.

    >>> dot = to_dot((x * w + 2).sum(), params={"w": w})
    >>> print(dot.source)                      # deterministic DOT text
    """
    drawing = _drawing(obj, params, color_by, plan)
    if collapse is None:
        collapse = len(drawing.nodes) > collapse_threshold
    if collapse:
        drawing = _collapse(drawing)
    return emit(drawing)


def _drawing(obj, params, color_by, plan):
    from ..ir.graph import Graph
    if isinstance(obj, Tensor) or (isinstance(obj, (list, tuple)) and obj
                                   and all(isinstance(t, Tensor) for t in obj)):
        if color_by is not None:
            raise TracegradValueError("color_by='buffer' needs a compiled path or IR graph; "
                                      "eager tensors have no memory plan")
        return eager_drawing(obj, params)
    if isinstance(obj, Graph):
        return graph_drawing(obj, color_by, plan)
    draw = getattr(type(obj), "_tracegrad_drawing", None)
    if draw is not None:            # compiled functions, paths and modules draw themselves
        return draw(obj, color_by)
    raise TracegradTypeError(
        f"tracegrad.viz.to_dot: cannot draw a {type(obj).__name__}; pass a result Tensor "
        "(or a list of them), a tracegrad.ir.Graph, a compiled function or one of its "
        ".programs")


def require_dot():
    """Raise GraphvizNotFound, naming the package to install, when `dot` is missing."""
    if shutil.which("dot") is None:
        raise GraphvizNotFound(
            "tracegrad.viz needs the Graphviz 'dot' program to render, and it is not on PATH. "
            "Install the OS package: `apt-get install graphviz` (Debian/Ubuntu), "
            "`brew install graphviz` (macOS) or `conda install graphviz`. "
            "to_dot(...).source works without it.")


def render(obj, path, format=None, **options):
    """Draw `obj` (anything `to_dot` takes, or a Digraph) into file `path`; return its path.

    The format is "svg", "png" or "pdf": by default the one `path` ends with
    (`render(f, "f.png")` writes PNG bytes); `format=` overrides it, and a `path` without
    a suffix gets `.{format}` appended ("svg" when neither says). Options are those of
    `to_dot`. Needs the Graphviz `dot` program.
    """
    path = os.fspath(path)
    format = _render_format(path, format)
    require_dot()
    dot = obj if isinstance(obj, graphviz.Digraph) else to_dot(obj, **options)
    try:
        data = dot.pipe(format=format)
    except graphviz.ExecutableNotFound as e:
        raise GraphvizNotFound(str(e)) from None
    if not os.path.splitext(path)[1]:
        path = f"{path}.{format}"
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _render_format(path, format):
    """The format `render` writes: `format` if given, else `path`'s suffix, else "svg"."""
    if format is not None:
        if format not in FORMATS:
            raise TracegradValueError(
                f"render: format must be one of {FORMATS}, not {format!r}")
        return format
    suffix = os.path.splitext(path)[1].lower().lstrip(".")
    if not suffix:
        return "svg"
    if suffix not in FORMATS:
        raise TracegradValueError(
            f"render: cannot tell the format from {path!r}: the suffix .{suffix} is none of "
            f"{FORMATS}; end the path with .svg, .png or .pdf, or pass format=")
    return suffix


def svg(obj, **options):
    """SVG text of `obj`, or None when `dot` is missing (notebook display falls back to text)."""
    if shutil.which("dot") is None:
        return None
    return to_dot(obj, **options).pipe(format="svg", encoding="utf-8")
