"""dce and cse: the two clean-up passes.

`dce(g)`: keeps only nodes that outputs, guards, input mutations, impure nodes (random
draws, which must advance the generator exactly as eager does) or saved values read after
a `.data` write (`saved_reads`) depend on; worklist from
those roots. `cse(g)`: merges nodes with the same primitive, operands and attributes (never
impure ones), rewriting later reads to the first occurrence. Both return a new Graph and
append their statistics to `pass_log`.
"""
import numpy as np

from ..ir.graph import Graph, Guard
from ..ir.types import Value


def _copy_shell(g):
    out = g.derive()
    out.inputs = list(g.inputs)
    out.mutations = list(g.mutations)
    out.stale = dict(g.stale)
    out.saved_reads = dict(g.saved_reads)
    return out


def dce(g, keep=()):
    """Dead-code elimination. `keep`: extra Values that must stay computed."""
    prod = {n.output: i for i, n in enumerate(g.nodes)}
    live = set()
    work = [v for v in g.outputs if v is not None] + [gd.value for gd in g.guards]
    work += [m for pair in g.mutations for m in pair] + list(keep)
    work += [n.output for n in g.nodes if n.prim.impure]
    work += list(g.saved_reads.values())   # what backward reads instead
    while work:
        v = work.pop()
        if v in live:
            continue
        live.add(v)
        i = prod.get(v)
        if i is not None:
            work.extend(g.nodes[i].value_inputs())
    out = _copy_shell(g)
    remap_pos = {}
    kept_index = {}
    for i, n in enumerate(g.nodes):
        remap_pos[i] = len(out.nodes)
        if n.output in live:
            kept_index[i] = len(out.nodes)
            out.nodes.append(n)
    remap_pos[len(g.nodes)] = len(out.nodes)
    out.guards = [Guard(gd.value, gd.kind, gd.expected, gd.site, remap_pos[gd.position])
                  for gd in g.guards]
    out.outputs = list(g.outputs)
    out.stale = {(kept_index[i], w): s for (i, w), s in out.stale.items() if i in kept_index}
    out.pass_log.append(("dce", {"removed": len(g.nodes) - len(out.nodes)}))
    return out


def _key(x):
    if isinstance(x, np.ndarray):
        return ("arr", id(x))
    if isinstance(x, (list, tuple)):
        return tuple(_key(i) for i in x)
    if isinstance(x, dict):
        return tuple((k, _key(v)) for k, v in x.items())
    if isinstance(x, slice):
        return ("slice", x.start, x.stop, x.step)
    if isinstance(x, float) and x != x:
        return ("nan",)
    try:
        hash(x)
        return (type(x).__name__, x)
    except TypeError:
        return ("id", id(x))


def _guard_key(expected):
    try:
        hash(expected)
        return ("h", type(expected), expected)
    except TypeError:                        # arrays (`numpy` guards), lists
        return ("r", type(expected), repr(expected))


def cse(g, apart=frozenset()):
    """Common-subexpression elimination over pure nodes. `apart`: values never merged with
    a twin (see Note [CSE before differentiation])."""
    seen = {}
    rename = {}
    out = _copy_shell(g)
    merged = 0
    kept_index = {}
    pos = {}
    # a node whose saved operands were overwritten in place (`stale`) is never merged with a
    # twin: eager would fail only if backward runs through that very node (check_inplace)
    stale_nodes = {i for i, _ in g.stale}
    read_later = {v for v, _ in g.saved_reads}   # the same, through .data

    def r(v):
        return rename.get(v, v) if isinstance(v, Value) else v

    for i, n in enumerate(g.nodes):
        pos[i] = len(out.nodes)
        ins = tuple(r(a) for a in n.inputs)
        key = None
        if (not n.prim.impure and not n.prim.overwrites and i not in stale_nodes
                and n.output not in read_later and n.output not in apart):
            key = (n.prim, tuple(("v", a.id) if hasattr(a, "id") else _key(a) for a in ins),
                   _key(n.attrs))
            hit = seen.get(key)
            if hit is not None and hit.type == n.output.type:
                rename[n.output] = hit
                merged += 1
                continue
        from ..ir.graph import Node
        node = Node(n.prim, ins, n.attrs, n.output, n.site, n.phase)
        kept_index[i] = len(out.nodes)
        out.nodes.append(node)
        if key is not None:
            seen[key] = n.output
    pos[len(g.nodes)] = len(out.nodes)
    # a guard repeating an earlier guard's check of the same (SSA, so unchanged) value is
    # redundant: dropping it also lets in-place input updates start earlier (a program
    # writes inputs in place only after its last guard)
    out.guards, checked, dup_guards = [], set(), 0
    for gd in g.guards:
        key = (r(gd.value), gd.kind, _guard_key(gd.expected))
        if key in checked:
            dup_guards += 1
            continue
        checked.add(key)
        out.guards.append(Guard(r(gd.value), gd.kind, gd.expected, gd.site, pos[gd.position]))
    out.outputs = [r(v) for v in g.outputs]
    out.mutations = [(a, r(b)) for a, b in out.mutations]
    out.saved_reads = {k: r(v) for k, v in out.saved_reads.items()}
    out.stale = {(kept_index[i], w): s for (i, w), s in out.stale.items() if i in kept_index}
    out.pass_log.append(("cse", {"merged": merged, "duplicate_guards": dup_guards}))
    out.renamed = rename
    return out


__all__ = ["dce", "cse", "Graph"]
