"""liveness: when each storage is alive in a scheduled graph, and what that costs.

Note [Storages and liveness]
A view (a node whose primitive `aliases` an operand) owns no memory: it joins its operand's
storage, and every read of the view keeps that storage alive. A storage is live from the
node that creates it to the last node that reads it or any of its views; graph inputs are
not counted (the caller owns them), and storages that leave the program (outputs, including
values saved for backward and input-mutation results) stay live to the end. The maximum,
over node positions, of the bytes live at that position is the lower bound no buffer
assignment of this schedule can beat.
"""
from dataclasses import dataclass, field
from ..ir.types import Value


@dataclass
class Liveness:
    """Result of `liveness(g)`; positions are node indices."""
    storage_of: dict                 # Value -> root Value owning its memory
    first: dict                      # root -> defining node index
    last: dict                       # root -> last reading node index (len(nodes) if escapes)
    nbytes: dict                     # root -> bytes
    escaping: set                    # roots that leave the program
    naive_bytes: int = 0             # every intermediate in its own allocation
    lower_bound: int = 0             # max live bytes over the schedule
    peak_position: int = 0
    profile: list = field(default_factory=list)   # live bytes after each node


def liveness(g):
    """Compute storages, live ranges, naive bytes and the lower bound of schedule `g`."""
    storage_of = {v: v for v in g.inputs}
    inputs = set(g.inputs)
    first, last, nbytes = {}, {}, {}
    n = len(g.nodes)
    for i, node in enumerate(g.nodes):
        for a in node.value_inputs():
            r = storage_of[a]
            if r not in inputs:
                last[r] = max(last.get(r, i), i)
        if node.prim.aliases is not None and _is_val(node.inputs[node.prim.aliases]):
            storage_of[node.output] = storage_of[node.inputs[node.prim.aliases]]
        else:
            storage_of[node.output] = node.output
            first[node.output] = i
            nbytes[node.output] = node.output.type.nbytes
            last.setdefault(node.output, i)
    for gd in g.guards:
        r = storage_of[gd.value]
        if r not in inputs:
            last[r] = max(last.get(r, 0), min(gd.position, n - 1) if n else 0)
    escaping = set()
    outs = [v for v in g.outputs if v is not None]
    outs += [b for _, b in g.mutations]
    for v in outs:
        r = storage_of.get(v, v)
        if r not in inputs and r in first:
            escaping.add(r)
            last[r] = n
    live = Liveness(storage_of, first, last, nbytes, escaping)
    live.naive_bytes = sum(nbytes.values())
    delta = [0] * (n + 2)
    for r, f in first.items():
        delta[f] += nbytes[r]
        delta[last[r] + 1] -= nbytes[r]
    cur = peak = pos = 0
    for i in range(n + 1):
        cur += delta[i]
        live.profile.append(cur)
        if cur > peak:
            peak, pos = cur, i
    live.lower_bound, live.peak_position = peak, pos
    return live


def _is_val(a):
    return isinstance(a, Value)
