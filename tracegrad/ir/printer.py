"""Deterministic text form of a Graph (a tested contract).

```
graph f(%x: f32[4,3], %w: f32[3,2]) -> (%2) {
  %0: f32[4,2] = matmul(%x, %w)               # model.py:7
  %1: f32[4,2] = tanh(%0)                     # model.py:7
  %2: f32[]    = sum(%1, dims=(0, 1), keepdim=False)  # model.py:8
}
```
Values are renumbered in definition order; inputs keep their names. Operands overwritten in
place carry `!`; guards print as `guard bool(%3) == True`.
"""
import os

import numpy as np
from .types import Value


def _site(site):
    if not site:
        return ""
    path, _, rest = site.partition(":")
    line = rest.split(" ")[0]
    return f"{os.path.basename(path)}:{line}"


def format_literal(x):
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, np.dtype):
        return f"{x.name}"
    if isinstance(x, slice):
        parts = ["" if p is None else str(p) for p in (x.start, x.stop, x.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if x.step is not None else "")
    if x is Ellipsis:
        return "..."
    if isinstance(x, tuple) and len(x) == 2 and hasattr(x[0], "kernel") \
            and isinstance(x[1], dict):              # one step of a view chain
        return f"{x[0].name}({', '.join(f'{k}={format_literal(v)}' for k, v in x[1].items())})"
    if isinstance(x, tuple):
        inner = ", ".join(format_literal(i) for i in x)
        return f"({inner}{',' if len(x) == 1 else ''})"
    if isinstance(x, list):
        return "[" + ", ".join(format_literal(i) for i in x) + "]"
    if isinstance(x, np.ndarray):
        return f"array<{x.dtype.name}{list(x.shape)}>"
    name = getattr(x, "name", None)
    if hasattr(x, "kernel") and name:
        return name                                  # a primitive inside attrs (view chains)
    if type(x).__name__ == "Generator":
        return "<generator>"
    return repr(x)


_PREFIX = {"captured": "captured", "saved": "saved", "cotangent": "grad_out"}


def value_names(g):
    """Value -> printed name (without `%`); explain() uses it to name guards the same way."""
    names = {}
    for i, v in enumerate(g.inputs):            # unnamed inputs must not look like nodes
        names[v] = v.name if v.name is not None else f"{_PREFIX.get(v.role, 'in')}{i}"
    for counter, n in enumerate(g.nodes):
        names[n.output] = str(counter)
    return names


def format_graph(g):
    names = value_names(g)

    def nm(v):
        return "%" + names.get(v, f"?{v.id}")

    ins = ", ".join(f"{nm(v)}: {v.type}" for v in g.inputs)
    outs = ", ".join(nm(v) if v is not None else "None" for v in g.outputs)
    lines = [f"graph {g.name}({ins}) -> ({outs}) {{"]
    guards = {}
    for gd in g.guards:
        guards.setdefault(gd.position, []).append(gd)
    body = []
    for i, n in enumerate(g.nodes):
        for gd in guards.get(i, ()):
            body.append((f"  guard {gd.kind}({nm(gd.value)}) == {gd.expected!r}", gd.site))
        ops = []
        for k, a in enumerate(n.inputs):
            s = nm(a) if isinstance(a, Value) and a in names else format_literal(a)
            if k in n.prim.overwrites:
                s += "!"
            ops.append(s)
        ops += [f"{k}={format_literal(v)}" for k, v in n.attrs.items()]
        head = f"  {nm(n.output)}: {n.output.type}"
        body.append((f"{head:<18} = {n.prim.name}({', '.join(ops)})", n.site))
    for gd in guards.get(len(g.nodes), ()):
        body.append((f"  guard {gd.kind}({nm(gd.value)}) == {gd.expected!r}", gd.site))
    width = max([len(t) for t, _ in body] + [0])
    for text, site in body:
        s = _site(site)
        lines.append(f"{text:<{width}}  # {s}" if s else text)
    lines.append("}")
    return "\n".join(lines)
