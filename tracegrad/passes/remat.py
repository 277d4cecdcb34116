"""rematerialize: recompute cheap values in backward instead of saving them.

Greedy, one value at a time: a saved forward value produced by an elementwise primitive whose
Value operands are all program inputs or already saved is moved into the backward program
(its node is re-emitted there, reading the saved operands) when that lowers the saved bytes,
i.e. when it is larger than the operands it newly forces to be saved (usually zero: they are
inputs or saved anyway). Greedy rather than min-cut: in the programs measured (MLP steps) the
candidates are isolated activation functions, where one pass finds the same cut.
"""
from ..ir.graph import Node
from ..ir.types import Value


def rematerialize(fg, bwd, n_ct, saved, ties=False):
    """Return (backward graph, saved forward values, recomputed values, and for each of
    those the backward Value its recomputation defines).

    `ties=True` also recomputes a value whose operands are not saved yet (saving them
    instead) when that leaves the saved bytes unchanged (program inputs count as free: they
    are saved by reference), so whole chains of elementwise ops move into backward and only
    their start is saved: what a fusing backend (XLA) wants, where recomputing is free and
    every saved value costs a kernel of its own. Values are then taken latest first, so a
    value's readers are recomputed before it and its node lands before theirs."""
    import heapq
    prod = {n.output: n for n in fg.nodes}
    pos = {n.output: i for i, n in enumerate(fg.nodes)}
    inputs = set(fg.inputs)
    # an input the program writes holds its new contents once backward runs: a value
    # computed from its old contents can only be saved
    written = {a for a, _ in getattr(fg, "mutations", ())}
    saved = list(saved)
    saved_in = dict(zip(saved, bwd.inputs[n_ct:]))
    recomputed, recomputed_as = [], {}
    heap = [(-pos.get(v, -1), v.id, v) for v in saved] if ties else None
    if ties:
        heapq.heapify(heap)
    changed = True
    while changed:
        changed = False
        for fv in _candidates(saved, heap):
            node = prod.get(fv)
            if node is None or not node.prim.elementwise or node.prim.impure:
                continue
            ops = [a for a in node.value_inputs()]
            if any(a in written for a in ops):
                continue
            extra = [a for a in ops if a not in saved_in and a not in inputs]
            if extra and not ties or any(a in recomputed_as for a in ops):
                continue
            new_bytes = sum(a.type.nbytes for a in ops if a not in saved_in
                            and not (ties and a in inputs))
            if fv.type.nbytes < new_bytes or fv.type.nbytes == new_bytes and not ties:
                continue
            # re-emit the node at the top of backward, reading saved/input operands
            for a in ops:
                if a not in saved_in:
                    v = bwd.new_value(a.type, name=f"saved{len(saved)}", role="captured")
                    bwd.inputs.append(v)
                    saved.append(a)
                    saved_in[a] = v
                    if ties:
                        heapq.heappush(heap, (-pos.get(a, -1), a.id, a))
            target = saved_in.pop(fv)
            ins = tuple(saved_in[a] if isinstance(a, Value) else a
                        for a in node.inputs)
            bwd.nodes.insert(0, Node(node.prim, ins, node.attrs, target, node.site, "bwd"))
            bwd.inputs.remove(target)
            for gd in bwd.guards:
                gd.position += 1
            saved.remove(fv)
            recomputed.append(fv)
            recomputed_as[fv] = target
            changed = True
    bwd.pass_log.append(("rematerialize", {"recomputed": len(recomputed)}))
    return bwd, saved, recomputed, recomputed_as


def _candidates(saved, heap):
    """The saved values to try: a snapshot (one sweep), or latest first from `heap`,
    which grows while it is drained."""
    if heap is None:
        yield from list(saved)
        return
    import heapq
    while heap:
        yield heapq.heappop(heap)[2]
