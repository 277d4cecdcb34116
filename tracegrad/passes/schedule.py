"""schedule_memory: reorder a graph's nodes to lower its peak live memory.

Greedy list scheduling: among the nodes whose operands are computed, run the one that
allocates least net of what it frees (bytes of its output minus bytes of storages whose
last read it is), ties broken by the original order. Guards are barriers (no node moves
across one, so a failed guard never sees side effects of later nodes), random draws keep
their relative order, and the result is kept only if its lower bound is not worse than the
original order's. Typical win: in a compiled training step, each parameter update moves up
next to the gradient it consumes, so gradients die one at a time instead of all at the end.

An update of a program input that `plan_memory` could write straight into the input's buffer
(`into_input`: same type, elementwise, `out=`-capable, input not protected) waits for every
other reader of the input's old value in its segment: run earlier it would need a fresh
buffer of the input's size, alive until the copy-back at the end of the program, and one
copy more. (A training step reads `W` for the next layer's gradient after `W`'s own
gradient exists; the update must come after that read to happen in place.)
"""

from ..ir.graph import Guard
from .liveness import liveness
from .plan_memory import accepts_out, elementwise


def schedule_memory(g, protected_inputs=()):
    """Return a copy of `g` in a memory-friendly order (see module docstring).

    `protected_inputs`: indexes of inputs never written in place (as for `plan_memory`)."""
    n = len(g.nodes)
    if n < 3:
        return g
    before = liveness(g)
    storage = before.storage_of
    inputs = set(g.inputs)
    escaping = before.escaping
    prod = {node.output: i for i, node in enumerate(g.nodes)}
    deps = [set() for _ in range(n)]
    users = [[] for _ in range(n)]
    readers = {}
    for i, node in enumerate(g.nodes):
        for a in node.value_inputs():
            j = prod.get(a)
            if j is not None and j not in deps[i]:
                deps[i].add(j)
                users[j].append(i)
            r = storage[a]
            if r not in inputs:
                readers.setdefault(r, set()).add(i)
    last_impure = None
    for i, node in enumerate(g.nodes):
        if node.prim.impure:
            if last_impure is not None and last_impure not in deps[i]:
                deps[i].add(last_impure)
                users[last_impure].append(i)
            last_impure = i
    barriers = sorted({gd.position for gd in g.guards} | {n})
    seg_of = [0] * n
    b = 0
    for i in range(n):
        while i >= barriers[b]:
            b += 1
        seg_of[i] = b
    remaining = {r: len(s) for r, s in readers.items()}
    for gd in g.guards:                 # a guard's value lives up to its barrier anyway
        r = storage[gd.value]
        if r not in inputs:
            remaining[r] = remaining.get(r, 0) + 1
    _updates_after_readers(g, storage, prod, deps, users, seg_of, protected_inputs)
    indeg = [len(d) for d in deps]
    order = []
    for seg in range(len(barriers)):
        members = [i for i in range(n) if seg_of[i] == seg]
        ready = [i for i in members if indeg[i] == 0]
        while ready:
            best = min(ready, key=lambda i: (_net(g.nodes[i], storage, remaining, inputs,
                                                  escaping), i))
            ready.remove(best)
            order.append(best)
            node = g.nodes[best]
            for r in {storage[a] for a in node.value_inputs()}:
                if r in remaining:
                    remaining[r] -= 1
            for u in users[best]:
                indeg[u] -= 1
                if indeg[u] == 0 and seg_of[u] == seg:
                    ready.append(u)
        for gd in g.guards:
            if gd.position == barriers[seg]:
                r = storage[gd.value]
                if r in remaining:
                    remaining[r] -= 1
    if len(order) != n:                 # a dependency crossed a barrier: keep the original
        return g
    out = _reordered(g, order)
    if liveness(out).lower_bound > before.lower_bound:
        return g
    out.pass_log.append(("schedule_memory", {"lower_bound_before": before.lower_bound,
                                             "lower_bound_after": liveness(out).lower_bound}))
    return out


def _updates_after_readers(g, storage, prod, deps, users, seg_of, protected_inputs):
    """Add edges: reader of an input's old value -> the node that can update it in place."""
    index = {v: k for k, v in enumerate(g.inputs)}
    in_readers = {}
    for i, node in enumerate(g.nodes):
        for a in node.value_inputs():
            if storage[a] in index:
                in_readers.setdefault(storage[a], set()).add(i)
    for tgt, final in g.mutations:
        p = prod.get(final)
        if (p is None or index.get(tgt) in protected_inputs or tgt.type != final.type):
            continue
        prim = g.nodes[p].prim
        if prim.aliases is not None or not (elementwise(prim) and accepts_out(prim)):
            continue
        readers = in_readers.get(tgt, set()) - {p}
        if any(seg_of[r] > seg_of[p] for r in readers):
            continue                    # a guard comes between: never in place anyway
        below, todo = set(), [p]        # p's descendants: an edge from them makes a cycle
        while todo:
            for u in users[todo.pop()]:
                if u not in below:
                    below.add(u)
                    todo.append(u)
        for r in readers - below:
            if r not in deps[p]:
                deps[p].add(r)
                users[r].append(p)


def _net(node, storage, remaining, inputs, escaping):
    alloc = 0 if node.prim.aliases is not None else node.output.type.nbytes
    freed = 0
    for r in {storage[a] for a in node.value_inputs()}:
        if r not in inputs and r not in escaping and remaining.get(r) == 1:
            freed += r.type.nbytes
    return alloc - freed


def _reordered(g, order):
    out = g.derive()
    out.inputs = list(g.inputs)
    out.nodes = [g.nodes[i] for i in order]
    new_pos = {old: k for k, old in enumerate(order)}
    # barriers keep their place: position p == number of nodes before the guard
    out.guards = [Guard(gd.value, gd.kind, gd.expected, gd.site, gd.position)
                  for gd in g.guards]
    out.outputs = list(g.outputs)
    out.mutations = list(g.mutations)
    out.stale = {(new_pos[i], w): s for (i, w), s in g.stale.items()}
    out.pass_log = list(g.pass_log)
    return out
