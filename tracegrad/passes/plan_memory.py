"""plan_memory: decide where every intermediate lives (in-place takeover + a packed arena).

Note [Memory plan]
1. Takeover: an elementwise node whose operand storage dies at that node (same shape and
   dtype as the result; not a program input, not escaping the program, the operand itself
   not a view) writes its result into that operand's buffer (`out=`); the two storages
   merge. A node producing an input-mutation result may likewise write straight into the
   input's own buffer when nothing reads the old input afterwards, no guard and no op that
   may fail on its values follows (Note [Errors inside compiled programs] in codegen.py),
   and the input is not saved for backward: the copy-back then costs nothing. So may the
   earlier ops of its update chain (Note [Update chains]).
2. Arena: the remaining large storages (>= `min_bytes`, produced by kernels that accept
   `out=`) are packed greedily by size into one arena: each takes the lowest offset that
   overlaps no storage alive at the same time. The arena lives for the whole call, so it
   is kept small enough that it plus the peak of the values outside it stays within 5% of
   the lower bound (Note [Capped arena]). Small arrays stay with numpy's allocator
   (for them `out=` does not pay). Arenas are per thread (see codegen), so concurrent calls
   never share scratch memory; values returned to the user never live in the arena.
3. Values eager execution may hold in another memory order than C (a transposed view's
   `tanh`) get neither: see Note [Layouts] in passes/layout.py.
`check_plan` re-verifies a plan by simulating which value occupies each buffer: every read
must find the value it expects (the versioned-storage check of the optimiser's decisions).
"""
from dataclasses import dataclass, field

from .layout import reordered_values
from .liveness import liveness
from ..ir.types import Value

ARENA_MIN_BYTES = 64 * 1024


@dataclass
class MemoryPlan:
    """What codegen needs (`takeover`, `slots`) plus the figures `explain()` reports."""
    takeover: dict = field(default_factory=dict)      # node index -> operand index
    into_input: dict = field(default_factory=dict)    # node index -> graph input index
    slots: dict = field(default_factory=dict)         # storage root Value -> (offset, nbytes)
    arena_bytes: int = 0
    naive_bytes: int = 0
    lower_bound: int = 0
    planned_peak: int = 0
    unplanned_peak: int = 0

    def summary(self):
        return {"naive_bytes": self.naive_bytes, "lower_bound": self.lower_bound,
                "planned_peak": self.planned_peak, "arena_bytes": self.arena_bytes,
                "takeovers": len(self.takeover), "in_place_input_updates": len(self.into_input),
                "arena_values": len(self.slots)}


def accepts_out(prim):
    k = prim.kernel
    return getattr(k, "accepts_out", False) or type(k).__name__ == "ufunc"


def last_may_raise(g):
    """Index of the last node whose kernel may fail on its operands' values, or -1."""
    from ..ops.primitive import may_fail
    return max((i for i, node in enumerate(g.nodes) if may_fail(node)), default=-1)


def elementwise(prim):
    return getattr(prim, "elementwise", False)


def plan_memory(g, protected_inputs=(), min_bytes=ARENA_MIN_BYTES, arena=True,
                reordered_inputs=()):
    """Plan buffers for scheduled graph `g`; `protected_inputs`: input indexes never written;
    `reordered_inputs`: input indexes whose arrays may not be in C order (Note [Layouts])."""
    live = liveness(g)
    # values eager execution may hold in another memory order get no buffer of ours: an
    # `out=` would change the order a later sum adds in (Note [Layouts])
    reordered = reordered_values(g, reordered_inputs)
    storage, last = live.storage_of, live.last
    inputs = {v: k for k, v in enumerate(g.inputs)}
    plan = MemoryPlan(naive_bytes=live.naive_bytes)
    merged = {}                              # storage root -> representative root
    extent = {r: [live.first[r], last[r]] for r in live.first}

    def rep(r):
        while r in merged:
            r = merged[r]
        return r

    input_reads = {}
    for i, node in enumerate(g.nodes):
        for a in node.value_inputs():
            if storage[a] in inputs:
                input_reads[storage[a]] = i
    for gd in g.guards:
        if storage[gd.value] in inputs:
            input_reads[storage[gd.value]] = max(input_reads.get(storage[gd.value], 0),
                                                 gd.position)
    last_guard = max((gd.position for gd in g.guards), default=-1)
    # nothing writes into an input before an op that may still fail on its values: a call
    # that fails then reruns eagerly (Note [Errors inside compiled programs] in codegen.py)
    last_guard = max(last_guard, last_may_raise(g))
    mut_final = {b: a for a, b in g.mutations}
    # outputs other than the mutation results themselves (user outputs, saved values)
    n_out = {}
    for v in g.outputs:
        if v is not None:
            n_out[v] = n_out.get(v, 0) + 1
    returned = {storage.get(v) for v in g.outputs
                if v is not None and (v not in mut_final or n_out[v] > 1)}
    for i, node in enumerate(g.nodes):
        out = node.output
        if node.prim.aliases is not None or not (elementwise(node.prim) and accepts_out(node.prim)):
            continue
        if out in reordered:
            continue
        tgt_in = mut_final.get(out)
        # (not when the input itself, or a view of it, is also returned or saved: that
        # output must keep the contents it had)
        if (tgt_in is not None and out not in returned and tgt_in not in returned
                and i >= last_guard):
            k = inputs[tgt_in]
            if (k not in protected_inputs and tgt_in.type == out.type
                    and input_reads.get(tgt_in, -1) <= i):
                plan.into_input[i] = k
                continue
        for k, a in enumerate(node.inputs):
            if not _is_val(a) or storage[a] is not a or a in inputs:
                continue
            r = rep(a)
            if (r in live.escaping or a.type != out.type or last[a] != i or
                    any(_is_val(b) and b is not a and storage[b] is a for b in node.inputs)):
                continue
            if out in live.escaping or storage[out] is not out:
                continue
            plan.takeover[i] = k
            merged[out] = r
            extent[r][1] = max(extent[r][1], extent[out][1])
            break
    _update_chains(g, plan, live, inputs, input_reads, last_guard, returned, reordered)
    # merged extents: a chain's storage lives from its head to its last member's last use;
    # results written straight into an input live in the caller's memory, not ours
    in_input = {g.nodes[i].output for i in plan.into_input}
    roots = [r for r in live.first if r not in merged and r not in in_input]
    sizes = {r: live.nbytes[r] for r in roots}
    escaping = {rep(r) for r in live.escaping if r not in in_input}
    # lower bound after takeover merging
    n = len(g.nodes)
    lb = plan.lower_bound = _peak(roots, sizes, extent, n)
    cands = []
    if arena:
        for r in roots:
            head = g.nodes[extent[r][0]]
            if (sizes[r] >= min_bytes and r not in escaping and head.output is r
                    and accepts_out(head.prim) and extent[r][0] not in plan.into_input
                    and r not in reordered):
                cands.append(r)
    # greedy-by-size first; a few other orders are tried and the smallest arena wins (the
    # packing problem is NP-hard, and on small graphs ties in size decide the outcome)
    orders = [lambda r: (-sizes[r], extent[r][0]),
              lambda r: (extent[r][0], -sizes[r]),
              lambda r: (-(extent[r][1] - extent[r][0]), -sizes[r]),
              lambda r: (-sizes[r] * (extent[r][1] - extent[r][0] + 1), extent[r][0])]
    def evaluate(members):
        best = ({}, 0)
        for key in orders:
            slots, top = _pack(sorted(members, key=key), sizes, extent)
            if not best[0] or top < best[1]:
                best = (slots, top)
        unplanned = _peak([r for r in roots if r not in best[0]], sizes, extent, n)
        return best[0], best[1], unplanned

    slots, top, unplanned = evaluate(cands)
    # The arena is held for the whole call, so a slot idle at the allocator's peak still
    # counts. Where that pushes the real peak past 5% over the bound, hand values back to
    # numpy's allocator, smallest first (few candidates), or cap the arena (many).
    while cands and top + unplanned > 1.05 * lb and len(cands) <= 32:
        cands = sorted(cands, key=lambda r: sizes[r])[1:]
        slots, top, unplanned = evaluate(cands)
    if cands and top + unplanned > 1.05 * lb:
        slots, top, unplanned = _capped(cands, roots, sizes, extent, n, 1.05 * lb)
    plan.slots, plan.arena_bytes, plan.unplanned_peak = slots, top, unplanned
    plan.planned_peak = top + unplanned
    plan.chain_root = {v: rep(v) for v in live.first}
    return plan


def _update_chains(g, plan, live, inputs, input_reads, last_guard, returned, reordered):
    """Note [Update chains]
    An in-place update written as several ops (`buf.mul_(m).add_(g)`: mul, then add into
    `buf`) ends in a node that writes `buf` directly (`into_input`), but its first op would
    get a scratch buffer of `buf`'s size: one more full-size write to memory not in cache.
    Once nothing reads the input's old value any more (no reader after the head op, no guard
    after it), the head op may write into the input too, as eager's `mul_` does: walking
    back from each `into_input` node, an operand of the input's type that dies there,
    produced by an elementwise `out=`-capable op (not a view, not escaping, not already
    taking over a buffer) moves into the input. `check_plan` simulates the result."""
    storage, last = live.storage_of, live.last
    prod = {node.output: i for i, node in enumerate(g.nodes)}
    todo = list(plan.into_input.items())
    while todo:
        j, k = todo.pop()
        x = g.inputs[k]
        for a in g.nodes[j].inputs:
            h = prod.get(a) if _is_val(a) else None
            if h is None or h in plan.into_input or h in plan.takeover or h < last_guard:
                continue
            head = g.nodes[h]
            if (storage[a] is not a or a.type != x.type or last[a] != j
                    or a in live.escaping or a in returned or a in reordered
                    or head.prim.aliases is not None
                    or not (elementwise(head.prim) and accepts_out(head.prim))
                    or input_reads.get(x, -1) > h):
                continue
            plan.into_input[h] = k
            todo.append((h, k))
            break


def _peak(members, sizes, extent, n):
    delta = [0] * (n + 2)
    for r in members:
        delta[extent[r][0]] += sizes[r]
        delta[extent[r][1] + 1] -= sizes[r]
    cur = peak = 0
    for i in range(n + 1):
        cur += delta[i]
        peak = max(peak, cur)
    return peak


def _pack(order, sizes, extent, cap=None):
    """Place storages in `order` at the lowest offset free over their live range.

    With `cap`, a storage that would end above `cap` bytes is left out of the arena."""
    placed, slots, top = [], {}, 0
    for r in order:
        lo, hi = extent[r]
        busy = sorted((off, off + sz) for (off, sz, a, b) in placed if not (b < lo or a > hi))
        off = 0
        for s, e in busy:
            if off + sizes[r] <= s:
                break
            off = max(off, _align(e))
        if cap is not None and off + sizes[r] > cap:
            continue
        placed.append((off, sizes[r], lo, hi))
        slots[r] = (off, sizes[r])
        top = max(top, off + sizes[r])
    return slots, top


def _capped(cands, roots, sizes, extent, n, target):
    """An arena whose size plus the peak of everything outside it stays within `target`.

    Note [Capped arena]
    Values outside the arena (gradients returned by a backward program, say) may peak late
    while the arena's values peak early; an arena sized for its own peak then adds the two.
    So the arena gets a cap: `target` minus the peak of the values outside it. Packing
    greedily by size under the cap leaves some candidates out; they raise the outside peak,
    the cap drops, and the packing repeats with the remaining candidates. A candidate once
    left out stays out, so this ends (at worst with an empty arena, whose peak is the bound
    itself), and at the fixed point arena + outside peak <= target."""
    inside = sorted(cands, key=lambda r: (-sizes[r], extent[r][0]))
    while True:
        members = set(inside)
        outside = _peak([r for r in roots if r not in members], sizes, extent, n)
        slots, top = _pack(inside, sizes, extent, cap=target - outside)
        if len(slots) == len(inside):
            return slots, top, outside
        inside = [r for r in inside if r in slots]


def _operand_k(node, v):
    for k, a in enumerate(node.inputs):
        if a is v:
            return k
    return None


def _align(x, a=64):
    return (x + a - 1) // a * a


def _is_val(a):
    return isinstance(a, Value)


def check_plan(g, plan):
    """Simulate buffer occupancy; raise InplaceError if the plan could corrupt a value.

    Every storage gets a place, as generated code will give it: its input's buffer, the
    buffer of the operand it takes over, an arena byte range, or a fresh allocation. Writing
    a place evicts whatever occupies overlapping bytes; every read (node operands, guards,
    and the program's outputs at the end) must still find its storage in place. Only
    `into_input` may write a program input (and only that input's mutation result), and
    storages that leave the program never live in the arena."""
    from .._errors import InplaceError
    live = liveness(g)
    storage = live.storage_of
    place, occupant = {}, {}
    for k, v in enumerate(g.inputs):
        place[v] = ("in", k)
        occupant[("in", k)] = v
    mutated = {a for a, b in g.mutations}   # (their new values are outputs: read at the end)
    guards = {}
    for gd in g.guards:
        guards.setdefault(gd.position, []).append(gd.value)

    def fail(msg):
        raise InplaceError(f"memory plan of '{g.name}': {msg}")

    def read(v, where):
        p = place[storage[v]]
        if occupant.get(p) is not storage[v]:
            fail(f"{where} reads {v!r} but its buffer {p} now holds {occupant.get(p)!r}")

    for i, node in enumerate(g.nodes):
        for v in guards.get(i, ()):
            read(v, f"guard before node {i}")
        for a in node.value_inputs():
            read(a, f"node {i} ({node.prim.name})")
        out = node.output
        if storage[out] is not out:
            continue                          # a view: no memory of its own
        if i in plan.into_input:
            k = plan.into_input[i]
            if g.inputs[k] not in mutated:   # its new value or an op of its update chain
                fail(f"node {i} writes program input {k}, which the program does not update")
            p = ("in", k)
        elif i in plan.takeover:
            p = place[storage[node.inputs[plan.takeover[i]]]]
            if p[0] == "in":
                fail(f"node {i} ({node.prim.name}) takes over program input {p[1]}")
            if not elementwise(node.prim):
                fail(f"node {i} ({node.prim.name}) is not elementwise: it cannot write into "
                     "its own operand")
        elif out in plan.slots:
            off, sz = plan.slots[out]
            if sz < out.type.nbytes:
                fail(f"arena slot of {out!r} holds {sz} bytes, needs {out.type.nbytes}")
            p = ("arena", off, sz)
        else:
            p = ("own", out.id)
        if p[0] == "arena":                   # evict every value sharing bytes with p
            hit = [q for q in occupant if q[0] == "arena"
                   and q[1] < p[1] + p[2] and p[1] < q[1] + q[2]]
            if i not in plan.takeover and any(place[storage[a]] in hit
                                              for a in node.value_inputs()):
                fail(f"node {i} ({node.prim.name}) writes {out!r} over bytes of its own operand")
            for key in hit:
                del occupant[key]
        place[out] = p
        occupant[p] = out
    for v in guards.get(len(g.nodes), ()):
        read(v, "guard at the end")
    for v in g.outputs:                       # views of inputs included
        if v is not None:
            read(v, "the program's outputs")
    for r in live.escaping:
        if place[r][0] == "arena":
            fail(f"{r!r} leaves the program but lives in the arena")
    return True
