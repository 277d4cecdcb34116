"""Drawings of IR graphs, compiled paths and compiled functions.

An IR graph: one box per node labelled like its printed line (`sum(%1, dims=(0, 1))` and
`%2: f32[]`, values numbered as `str(graph)` numbers them), inputs and outputs as ellipses,
edges labelled with the type that flows, an operand overwritten in place on a red edge, a
view's aliased operand on a dotted edge, guards as diamonds (`bool(%4) == True`), the user
source line in each tooltip.

A compiled path: clusters "forward" and "backward" (backward ops grey), forward inputs that
require grad light blue, each value saved for backward an orange box between the clusters
(forward producer -> saved -> backward readers), each forward output feeding its cotangent
input on a dashed edge, user outputs and gradients green, input mutations on red edges.
A compiled function: one cluster per cached path.

`color_by="buffer"` fills each value with its buffer's color (and names the buffer in the
tooltip) from the path's memory plans (`forward_plan` / `backward_plan`, made by
passes/plan_memory.py) or, for a bare Graph, the `plan=` given.
"""
import warnings

from ..ir.printer import format_literal
from ..ir.printer import value_names as printed_names
from .drawing import Drawing
from .style import MAX_LINE, Ids, buffer_color, short, site_str
from ..ir.types import Value

NO_PLAN_NOTE = ('color_by="buffer": no memory plan for this graph (compiled with memory="off", '
                'or pass plan=tracegrad.passes.plan_memory(graph)); drawn '
                'without buffer colors')


def graph_drawing(g, color_by=None, plan=None):
    """A Drawing of one IR Graph (`plan`: its MemoryPlan, for `color_by="buffer"`)."""
    d = Drawing(g.name)
    buffers = _buffers_or_note(d, g, plan, color_by)
    src, names = draw_graph(d, g, Ids(), (), buffers=buffers)
    for k, v in enumerate(g.outputs):
        if v is not None:
            oid = d.add(f"o{k}", "output", [f"output {k}", str(v.type)])
            d.edge(src[v], oid, str(v.type))
    return d


def path_drawing(path, color_by=None, d=None, base=(), ids=None):
    """A Drawing of one CompiledPath (or add it under cluster `base` of drawing `d`)."""
    d = d or Drawing(path.name)
    ids = ids or Ids()
    part = path.part
    fg, bg = part.forward, part.backward
    fbuf = _buffers_or_note(d, fg, getattr(path, "forward_plan", None), color_by)
    wrt = set(path.wrt)
    fc = d.cluster(base + ("fwd",), "forward")
    fsrc, fnames = draw_graph(d, fg, ids, fc, buffers=fbuf,
                              input_kind=lambda k, v: "leaf" if k in wrt else "input")
    out_ids = []
    grad_of = {k: fg.inputs[pos] for pos, k in getattr(path, "grad_set_plan", ())
               if k is not None and pos < len(fg.inputs)}
    for k, v in enumerate(fg.outputs[:part.n_user]):
        head = f"%{fnames[grad_of[k]]}.grad" if k in grad_of else f"output {k}"
        oid = d.add(ids.new("v"), "output", [head, str(v.type)], cluster=fc,
                    tooltip=f"output {k}: becomes this .grad" if k in grad_of else None)
        d.edge(fsrc[v], oid, str(v.type))
        out_ids.append(oid)
    n_saved_fwd = len(part.saved) - len(part.saved_from_input)
    for (pos, _), v in zip(part.mutations, fg.outputs[part.n_user + n_saved_fwd:]):
        target = "%" + fnames[fg.inputs[pos]]
        mid = d.add(ids.new("v"), "mutation", [f"writes {target}", str(v.type)], cluster=fc,
                    tooltip=f"copied back into input {target} after the call")
        d.edge(fsrc[v], mid, str(v.type), kind="inplace")
    if bg is not None:
        _draw_backward(d, path, ids, base, fsrc, fnames, out_ids, color_by)
    return d


def _draw_backward(d, path, ids, base, fsrc, fnames, out_ids, color_by):
    part, fg, bg = path.part, path.part.forward, path.part.backward
    bnames = value_names(bg)
    n_ct = len(part.cotangent_outputs)
    pre = {}
    for k, fv in enumerate(part.saved):
        bv = bg.inputs[n_ct + k]
        sid = d.add(ids.new("v"), "saved", [f"%{bnames[bv]} = %{fnames[fv]}", str(fv.type)],
                    cluster=base, tooltip="saved by forward for backward")
        d.edge(fsrc[fv], sid, str(fv.type), kind="save")
        pre[bv] = sid
    bbuf = _buffers_or_note(d, bg, getattr(path, "backward_plan", None), color_by)
    bc = d.cluster(base + ("bwd",), "backward")
    bsrc, _ = draw_graph(d, bg, ids, bc, buffers=bbuf, pre=pre, all_bwd=True,
                         input_kind=lambda k, v: "cotangent")
    for j, k in enumerate(part.cotangent_outputs):
        if k < len(out_ids):
            d.edge(out_ids[k], bsrc[bg.inputs[j]], kind="cotangent")
    for j, v in enumerate(bg.outputs):
        if v is None:
            continue
        x = fg.inputs[path.wrt[j]] if j < len(path.wrt) else None
        head = f"grad %{fnames[x]}" if x is not None else f"grad {j}"
        gid = d.add(ids.new("v"), "output", [head, str(v.type)], cluster=bc)
        d.edge(bsrc[v], gid, str(v.type))


def function_drawing(cf, color_by=None):
    """A Drawing of a CompiledFunction: one cluster per cached path."""
    d = Drawing(cf.name)
    programs = cf.programs
    if not programs:
        d.add("empty", "note", [f"{cf.name}: not compiled yet (call it once to trace)"])
    for j, p in enumerate(programs):
        names = value_names(p.part.forward)
        outcomes = ", ".join(f"{gd.kind}(%{names.get(gd.value, gd.value.id)}) == "
                             f"{gd.expected!r}" for gd in p.part.forward.guards)
        d.cluster((f"p{j}",), f"path {j}" + (f": {short(outcomes, 80)}" if outcomes else ""))
        path_drawing(p, color_by, d, (f"p{j}",), Ids(f"p{j}_"))
    return d


def draw_graph(d, g, ids, cluster, *, buffers=None, input_kind=None, pre=None, all_bwd=False):
    """Add g's inputs, nodes and guards to `d`; return ({Value: producer DOT id}, names)."""
    names = value_names(g)
    src = dict(pre or {})
    for k, v in enumerate(g.inputs):
        if v in src:
            continue
        kind = input_kind(k, v) if input_kind else "input"
        # a role the generated name already says (`%captured1`) is not repeated
        role = f" ({v.role})" if v.role not in (None, "arg") and v.name is not None else ""
        src[v] = d.add(ids.new("v"), kind, [f"%{names[v]}{role}", str(v.type)],
                       cluster=cluster, **_buffer_style(buffers, v, None))
    guards = {}
    for gd in g.guards:
        guards.setdefault(gd.position, []).append(gd)
    for i, n in enumerate(g.nodes):
        for gd in guards.get(i, ()):
            _draw_guard(d, gd, src, names, ids, cluster)
        kind = "bwd_op" if all_bwd or n.phase == "bwd" else "op"
        nid = d.add(ids.new("n"), kind, [short(op_text(n, names)), f"%{names[n.output]}: "
                                         f"{n.output.type}"],
                    cluster=cluster, key=n.prim.name, order=i,
                    **_buffer_style(buffers, n.output, site_str(n.site)))
        for k, a in enumerate(n.inputs):
            if _is_value(a):
                d.edge(_src_of(d, src, a, names, ids, cluster), nid, str(a.type),
                       kind=_edge_kind(n.prim, k))
        src[n.output] = nid
    for gd in guards.get(len(g.nodes), ()):
        _draw_guard(d, gd, src, names, ids, cluster)
    return src, names


def _draw_guard(d, gd, src, names, ids, cluster):
    name = names.get(gd.value, gd.value.id)
    text = f"{gd.kind}(%{name}) == {gd.expected!r}"
    tip = site_str(gd.site)
    if len(text) > MAX_LINE:        # `tolist()` of a long tensor: show the start only
        tip = "\n".join(x for x in (tip, short(text, 400)) if x)
    gid = d.add(ids.new("g"), "guard", [short(text)], cluster=cluster, tooltip=tip,
                summary=short(f"{gd.kind}(…) == {gd.expected!r}"))
    d.edge(_src_of(d, src, gd.value, names, ids, cluster), gid, str(gd.value.type))


def _src_of(d, src, v, names, ids, cluster):
    # A value no input or node defines (an unverified graph): draw it rather than fail.
    if v not in src:
        src[v] = d.add(ids.new("v"), "input", [f"%{names.get(v, v.id)} (undefined)",
                                               str(v.type)], cluster=cluster)
    return src[v]


def _edge_kind(prim, k):
    if k in prim.overwrites:
        return "inplace"
    al = prim.aliases
    if al is not None and (k == al if isinstance(al, int) else k in al):
        return "view"
    return None


def op_text(n, names):
    """The right-hand side of the node's printed line: `add_(%0!, 1)`."""
    ops = []
    for k, a in enumerate(n.inputs):
        s = "%" + names[a] if _is_value(a) and a in names else format_literal(a)
        ops.append(s + ("!" if k in n.prim.overwrites else ""))
    ops += [f"{k}={format_literal(v)}" for k, v in n.attrs.items()]
    return f"{n.prim.name}({', '.join(ops)})"


def value_names(g):
    """Printed names, exactly as `str(g)` and explain() print them: inputs keep theirs (an
    unnamed input is `captured1`, `in0`, ..., never a bare number that would collide with
    a node's result), node outputs are numbered in order."""
    return printed_names(g)


def _is_value(a):
    return isinstance(a, Value)


# -- memory plans --

def buffer_assignment(g, plan):
    """{Value: (buffer number, description)} for graph `g` under a `plan_memory` MemoryPlan.

    A buffer is what a value's bytes live in: the caller's input array (views and in-place
    results written into an input join it), an arena slot (by offset: later values reuse
    it), or an allocation of its own shared along takeover chains (`out=` into a dying
    operand). Numbers follow first appearance (inputs, then nodes), so colors are stable.
    """
    from ..passes.liveness import liveness
    storage = liveness(g).storage_of
    chain = getattr(plan, "chain_root", None) or {}
    in_pos = {v: k for k, v in enumerate(g.inputs)}
    into = {g.nodes[i].output: k for i, k in plan.into_input.items()}
    names = value_names(g)

    def where(v):
        r = storage.get(v, v)
        rep = chain.get(r, r)
        for x in (r, rep):
            if x in in_pos:
                return ("in", in_pos[x]), f"input %{names[g.inputs[in_pos[x]]]}"
            if x in into:
                return ("in", into[x]), f"written into input %{names[g.inputs[into[x]]]}"
        if rep in plan.slots:
            off, size = plan.slots[rep]
            return ("arena", off), f"arena offset {off}"
        return ("own", rep.id), f"own allocation of %{names.get(rep, rep.id)}"

    numbers, result = {}, {}
    for v in list(g.inputs) + [n.output for n in g.nodes]:
        key, desc = where(v)
        num = numbers.setdefault(key, len(numbers))
        result[v] = (num, desc)
    return result


def _buffers_or_note(d, g, plan, color_by):
    if color_by is None:
        return None
    if color_by != "buffer":
        raise ValueError(f"color_by must be None or 'buffer', not {color_by!r}")
    if plan is not None:
        return buffer_assignment(g, plan)
    if NO_PLAN_NOTE not in d.notes:
        d.notes.append(NO_PLAN_NOTE)
        warnings.warn(NO_PLAN_NOTE, UserWarning, stacklevel=4)
    return None


def _buffer_style(buffers, v, tooltip):
    hit = buffers.get(v) if buffers else None
    if hit is None:
        return {"tooltip": tooltip}
    num, desc = hit
    tip = f"buffer {num}: {desc}" + (f"\n{tooltip}" if tooltip else "")
    return {"tooltip": tip, "fill": buffer_color(num)}
