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


def rematerialize(fg, bwd, n_ct, saved):
    """Return (backward graph, saved forward values, recomputed values, and for each of
    those the backward Value its recomputation defines)."""
    prod = {n.output: n for n in fg.nodes}
    inputs = set(fg.inputs)
    saved = list(saved)
    saved_in = dict(zip(saved, bwd.inputs[n_ct:]))
    recomputed, recomputed_as = [], {}
    changed = True
    while changed:
        changed = False
        for fv in list(saved):
            node = prod.get(fv)
            if node is None or not node.prim.elementwise or node.prim.impure:
                continue
            ops = [a for a in node.value_inputs()]
            extra = [a for a in ops if a not in saved_in and a not in inputs]
            if extra:
                continue
            new_bytes = sum(a.type.nbytes for a in ops if a not in saved_in)
            if fv.type.nbytes <= new_bytes:
                continue
            # re-emit the node at the top of backward, reading saved/input operands
            for a in ops:
                if a not in saved_in:
                    v = bwd.new_value(a.type, name=f"saved{len(saved)}", role="captured")
                    bwd.inputs.append(v)
                    saved.append(a)
                    saved_in[a] = v
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
