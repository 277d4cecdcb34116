"""functionalize: in-place and aliasing effects become pure SSA.

Guarantees: the result has no in-place nodes; every read of a storage sees the contents the
raw program would have seen. An in-place op `t.op_(...)` becomes the functional op; when `t`
is a view, the base's new contents are `view_scatter(base, new_view, chain)`; views taken
before a write are re-derived from the base's newest contents when read again. Writes to
program inputs become `graph.mutations` ([(input, final value)]), copied back by the runtime.
A write under no_grad leaves autograd's history alone in eager mode: the storage's new
contents become `nograd_write(old, new)`, whose gradient flows to `old` unchanged.

It also records, for `vjp`, saved operands overwritten only through `.data`
(`graph.saved_reads`, Note [Writes through .data]), and, for `check_inplace`, which saved
operands would be stale in eager mode
(`graph.stale`: {(node index, operand index or "out"): (site of the overwriting op, saved
version, final version, deferred, grad_fn name of the last overwrite under grad mode, or None)};
`deferred` when every overwrite ran under no_grad, which `check_inplace` no longer needs:
every such error waits for backward). `functionalize_with_facts` also returns the `OutputFacts` the
compiler needs: which outputs are inputs or views of them or of each other, and how each
mutated input's version counter moves.

Note [Known values]
`values` may lack some Values: the tracer keeps floating arrays only while the traced program
does (Note [Traced values] in tracing/tracer.py). A functional node takes the array the trace
computed for its raw node (an in-place node's result is the functional op's result), else
is computed from its operands' arrays when all are known and it draws no random numbers,
else stays unknown; later passes type unknown values by their IR types.

Note [Writes through .data]
`t.data` is an alias of `t`'s storage with its own version counter (the DATA primitive): a
write through it leaves `t`'s version alone, so eager autograd never reports a saved `t`
as modified, and backward reads whatever the storage holds when it runs. A saved operand
(or saved result) whose storage changes afterwards only through `.data` is therefore not
stale: `graph.saved_reads[(node output, operand index or "out")]` names what `vjp` saves
instead: a whole program input itself (backward reads the input tensor when it runs, after
the runtime copied the new contents back, with its version checked, as eager reads it),
else the storage's contents at the end of the program. The forward node itself still
reads the contents it saw.

Note [Storages]
Every raw value belongs to a storage root (itself, unless produced by an aliasing primitive)
and carries the chain of view steps from the root. A write bumps the root's version; reads
compare versions to know when a view must be re-derived.
"""
from dataclasses import dataclass

import numpy as np

from ..ops.shape import DATA, NOGRAD_WRITE, VIEW_SCATTER
from ..ir.types import Value


class _Storage:
    __slots__ = ("current", "version", "writes", "bumps")

    def __init__(self, current):
        self.current = current   # functional Value with the storage's newest contents
        self.version = 0
        self.bumps = 0           # writes seen by the root's version counter (not via `.data`)
        self.writes = []         # (site, under no_grad, grad_fn name) of each in-place op


@dataclass
class OutputFacts:
    """What `functionalize` learns about the program's inputs and outputs beyond the graph
    (kept in the compilation record, Note [Compilation record] in compiler/record.py)."""
    roots: list           # per output: (input position, view chain) if it is that input's
    views: list           # per output: ("view", j, chain) / ("copy",) / None (see below)
    mutation_counts: dict  # mutated input Value -> bumps of its version counter
    grad_mode_writes: set  # input Values written at least once with grad mode on


def functionalize(g, values=None):
    """Return a pure copy of raw graph `g` (see module docstring).

    `values` (raw Value -> array, e.g. the tracer's) is extended with the functional graph's
    values where they are known (Note [Known values]); by default the values `tg.trace`
    attached to `g` are used and attached to the result, so later passes (vjp) see the
    traced data-dependent shapes."""
    return functionalize_with_facts(g, values)[0]


def functionalize_with_facts(g, values=None):
    """`(functional graph, OutputFacts)`: `functionalize` plus what the compiler needs to
    rebuild outputs and replay input mutations."""
    out = g.derive()
    out.values = None
    if values is None and g.values is not None:
        # (`items()`: a traced value's array may die during the copy, and the weak
        # mapping's items() skips it where dict() of it raised KeyError)
        values = out.values = dict(g.values.items())
    out.inputs = list(g.inputs)
    root, chain, seen_ver = {}, {}, {}
    mapping = {}
    storages = {}
    for v in g.inputs:
        root[v], chain[v], seen_ver[v] = v, (), 0
        mapping[v] = v
        storages[v] = _Storage(v)
    quiet = g.nograd_writes
    # (functional node index, operand idx/"out", root, its version, its bumps, raw Value)
    uses = []
    guards = {}
    for gd in g.guards:
        guards.setdefault(gd.position, []).append(gd)
    stats = {"inplace_rewritten": 0, "views_rederived": 0, "scatters": 0}
    values_or_empty = values if values is not None else {}

    def emit(prim, ins, attrs, type, site, phase, raw=None):
        val = out.add_node(prim, ins, attrs, type, site, phase)
        if values is None:
            return val
        if raw is not None:
            # what the trace computed for this very node, if still known (never re-draw,
            # never a second copy of every intermediate while compiling: Note [Known values])
            if raw in values:
                values[val] = values[raw]
        elif not prim.impure and all(a in values for a in ins if _isval(a)):
            with np.errstate(all="ignore"):
                values[val] = np.asarray(prim.kernel(
                    *[values[a] if _isval(a) else a for a in ins], **attrs))
        return val

    def resolve(v):
        r = root[v]
        st = storages[r]
        if v is r:
            return st.current
        if seen_ver[v] != st.version:
            cur = st.current
            for prim, attrs in chain[v]:
                cur = emit(prim, (cur,), attrs, _replay_type(prim, attrs, cur, values),
                           None, "fwd")
            mapping[v] = cur
            seen_ver[v] = st.version
            stats["views_rederived"] += 1
        return mapping[v]

    for i, n in enumerate(g.nodes):
        for gd in guards.get(i, ()):
            out.guards.append(_moved(gd, resolve(gd.value), len(out.nodes)))
        ins = [resolve(a) if _isval(a) else a for a in n.inputs]
        prim = n.prim
        if prim.overwrites:
            t = n.inputs[0]
            r = root[t]
            st = storages[r]
            new = emit(prim.functional, ins, n.attrs, n.output.type, n.site, n.phase,
                       raw=n.output if n.output in values_or_empty else None)
            at = len(out.nodes) - 1
            _note_uses(uses, at, prim.functional, n.inputs, root, storages, skip_first=True)
            # an empty view chain is the whole storage (e.g. the result of an earlier `t.op_()`)
            whole = t is r or not chain[t]
            old = st.current
            if whole:
                st.current = new
            else:
                st.current = emit(VIEW_SCATTER, (st.current, new), {"chain": chain[t]},
                                  st.current.type, n.site, n.phase)
                stats["scatters"] += 1
            # under no_grad, or through a detached alias (`.detach()`, `.data`), autograd
            # still sees the old contents
            silent = n.output in quiet or any(not p.is_view for p, _ in chain[t])
            if silent:
                st.current = emit(NOGRAD_WRITE, (old, st.current), {}, old.type, n.site, n.phase)
            st.version += 1
            if not any(p is DATA for p, _ in chain[t]):   # `.data` has its own counter
                st.bumps += 1
            st.writes.append((n.site, silent,
                              prim.grad_fn_name if whole else "CopySlices"))
            root[n.output], chain[n.output] = r, chain[t]
            # the written tensor keeps its own (new) value: under grad mode a detached alias
            # gets the in-place op's history; under no_grad it re-reads the storage
            seen_ver[n.output] = st.version if whole or n.output not in quiet else -1
            mapping[n.output] = st.current if whole else new
            stats["inplace_rewritten"] += 1
            # the op's own result, not the scatter
            uses.append((at, "out", r, st.version, st.bumps, n.output))
            continue
        new = emit(prim, ins, n.attrs, n.output.type, n.site, n.phase, raw=n.output)
        _note_uses(uses, len(out.nodes) - 1, prim, n.inputs, root, storages)
        if prim.aliases is not None:
            src = n.inputs[prim.aliases]
            r = root[src]
            root[n.output] = r
            chain[n.output] = chain[src] + ((prim, n.attrs),)
            seen_ver[n.output] = storages[r].version
            mapping[n.output] = new
            uses.append((len(out.nodes) - 1, "out", r, storages[r].version, storages[r].bumps,
                         n.output))
        else:
            root[n.output], chain[n.output], seen_ver[n.output] = n.output, (), 0
            mapping[n.output] = new
            storages[n.output] = _Storage(new)
            uses.append((len(out.nodes) - 1, "out", n.output, 0, 0, n.output))
    for gd in guards.get(len(g.nodes), ()):
        out.guards.append(_moved(gd, resolve(gd.value), len(out.nodes)))
    out.outputs = [resolve(v) if v is not None else None for v in g.outputs]
    # Outputs sharing a program input's storage (the input itself, or a view of it): the
    # runtime returns the input / replays the view chain on it, as eager would return.
    in_pos = {v: i for i, v in enumerate(g.inputs)}
    roots = [(in_pos[root[v]], chain[v]) if v is not None and root[v] in in_pos
             else None for v in g.outputs]
    # Outputs sharing another output's storage: a view of an output that is the whole
    # storage -> ("view", j, chain), replayed on output j; any other overlap -> ("copy",),
    # so two returned tensors never share memory without eager's view relationship.
    # The base is the output with the shortest chain on that storage (the whole of it, or
    # its `detach()`), wherever it comes (Note [Bases of returned views]); an output whose
    # chain continues the base's is a view of it.
    base_out = {}
    for k, v in enumerate(g.outputs):
        if v is not None and root[v] not in in_pos:
            j = base_out.get(root[v])
            if j is None or len(chain[v]) < len(chain[g.outputs[j]]):
                base_out[root[v]] = k
    views, seen_root = [], set()
    for k, v in enumerate(g.outputs):
        r = root[v] if v is not None else None
        kind = None
        if r is not None and r not in in_pos:
            j = base_out[r]
            bc = chain[g.outputs[j]]
            if v is not g.outputs[j] and chain[v][:len(bc)] == bc:
                kind = ("view", j, chain[v][len(bc):])
            elif r in seen_root and v not in g.outputs[:k] and v is not g.outputs[j]:
                kind = ("copy",)
            seen_root.add(r)
        views.append(kind)
    # the copy-back needs the new contents, not their autograd identity (NOGRAD_WRITE)
    unwrap = {n.output: n.inputs[1] for n in out.nodes if n.prim is NOGRAD_WRITE}
    out.mutations = [(v, unwrap.get(storages[v].current, storages[v].current))
                     for v in g.inputs if storages[v].version > 0]
    facts = OutputFacts(
        roots, views,
        mutation_counts={v: storages[v].bumps for v in g.inputs if storages[v].version > 0},
        # inputs written at least once with grad mode on (eager rebases their history)
        grad_mode_writes={v for v in g.inputs if any(not w[1] for w in storages[v].writes)})
    out.stale = {}
    out.saved_reads = {}
    for idx, which, r, ver, bumps, raw in uses:
        st = storages[r]
        if st.version != ver and st.bumps == bumps:
            # overwritten through `.data` only: eager's version check cannot see it, and its
            # backward reads the storage as it is then (Note [Writes through .data])
            out.saved_reads[(out.nodes[idx].output, which)] = (
                raw if raw is r and r in in_pos else resolve(raw))
        elif st.version != ver:
            later = st.writes[ver:] or st.writes[-1:]
            # every overwrite under no_grad (an optimizer-style update): eager only fails if
            # backward later runs through the saving node, so the error waits until then
            deferred = all(w[1] for w in later)
            # eager names the tensor's grad_fn, which a write under no_grad leaves alone
            grad_writes = [w for w in st.writes if not w[1]]
            out.stale[(idx, which)] = (later[0][0], ver, st.version, deferred,
                                       grad_writes[-1][2] if grad_writes else None)
    out.pass_log.append(("functionalize", stats))
    return out, facts



def _note_uses(uses, idx, prim, raw_ins, root, storages, skip_first=False):
    for k in prim.saves:
        if k < len(raw_ins) and _isval(raw_ins[k]) and not (skip_first and k == 0):
            r = root[raw_ins[k]]
            st = storages[r]
            uses.append((idx, k, r, st.version, st.bumps, raw_ins[k]))


def _isval(a):
    return isinstance(a, Value)


def _moved(gd, value, position):
    from ..ir.graph import Guard
    return Guard(value, gd.kind, gd.expected, gd.site, position)


def _replay_type(prim, attrs, cur, values):
    from ..ir.types import TensorType
    if values is not None and cur in values:
        return TensorType.of(np.asarray(prim.kernel(values[cur], **attrs)))
    dummy = np.zeros(cur.type.shape, cur.type.dtype.np)
    return TensorType.of(np.asarray(prim.kernel(dummy, **attrs)))
