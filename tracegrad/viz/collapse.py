"""Collapsing large drawings: repeated blocks of ops become one `×N` box.

Note [Collapsing]
A 50-layer network traced from a Python loop is the same few ops 50 times in a row, and a
drawing with thousands of boxes helps nobody. Within each cluster, ops are read in program
order as a sequence of op names; `find_runs` picks, greedily from the left, the block that
repeats back to back covering the most ops (at least `min_repeat` repetitions, the shortest
such block on ties), and the whole run becomes one box `×N mm → add → tanh`. Edges into or
out of any op of the run attach to the box; edges inside it disappear; parallel edges merge.

Then the nodes around the boxes (inputs, parameters, saved values, gradients, guards,
AccumulateGrad): those of the same kind, in the same cluster, touching the same boxes, at
least `min_repeat` of them, merge into one `×N saved values` node. Repeating this a few
times lets chains fold (leaf -> AccumulateGrad -> box). Deterministic: nothing depends on
hashing order; new ids are `c0`, `c1`, ... in the order boxes are made.
"""
from .drawing import DEdge, DNode
from .style import short

PLURAL = {"input": "inputs", "leaf": "inputs requiring grad", "saved": "saved values",
          "output": "outputs", "guard": "guards", "accumulate": "AccumulateGrad",
          "tensor_leaf": "leaf tensors", "cotangent": "cotangents", "mutation": "input writes"}


def find_runs(keys, min_repeat=3, max_block=64):
    """[(start, block length, repetitions)] of back-to-back repeated blocks in `keys`."""
    codes = {}
    t = tuple(codes.setdefault(k, len(codes)) for k in keys)
    n, i, runs = len(t), 0, []
    while i < n:
        best = (0, 0, 0)
        for size in range(1, min(max_block, (n - i) // min_repeat) + 1):
            block = t[i:i + size]
            r = 1
            while t[i + r * size:i + (r + 1) * size] == block:
                r += 1
            if r >= min_repeat and size * r > best[0]:
                best = (size * r, size, r)
        if best[0]:
            runs.append((i, best[1], best[2]))
            i += best[0]
        else:
            i += 1
    return runs


def collapse(d, min_repeat=3, max_block=64):
    """A new Drawing with repeated op blocks and their surrounding nodes merged."""
    state = _State(d)
    state.collapse_ops(min_repeat, max_block)
    for _ in range(4):
        if not state.group_terminals(min_repeat):
            break
    return d.copy_with(state.nodes, state.edges)


class _State:
    def __init__(self, d):
        self.nodes, self.edges = list(d.nodes), list(d.edges)
        self.boxes = set()
        self.count = 0

    def _new_id(self):
        self.count += 1
        return f"c{self.count - 1}"

    def collapse_ops(self, min_repeat, max_block):
        per_cluster = {}
        for n in self.nodes:
            if n.key is not None:
                per_cluster.setdefault(n.cluster, []).append(n)
        mapping, made = {}, {}
        for cluster, ops in per_cluster.items():
            ops.sort(key=lambda n: n.order)
            for start, size, reps in find_runs([n.key for n in ops], min_repeat, max_block):
                block = [n.key for n in ops[start:start + size]]
                count = (f"{reps} ops" if size == 1 else
                         f"{size} ops × {reps} = {size * reps} ops")
                box = DNode(self._new_id(), "collapsed", (
                    short(f"×{reps} " + " → ".join(block)), count), cluster,
                    tooltip=short(" → ".join(block), 400), order=ops[start].order)
                for n in ops[start:start + size * reps]:
                    mapping[n.id] = box.id
                made[box.id] = box
        self._apply(mapping, made)

    def group_terminals(self, min_repeat):
        ins, outs = {}, {}
        for e in self.edges:
            outs.setdefault(e.src, set()).add(e.dst)
            ins.setdefault(e.dst, set()).add(e.src)
        groups = {}
        for n in self.nodes:
            if n.key is not None or n.id in self.boxes or n.kind in ("collapsed", "note"):
                continue
            touch_in = frozenset(ins.get(n.id, set()) & self.boxes)
            touch_out = frozenset(outs.get(n.id, set()) & self.boxes)
            if touch_in or touch_out:
                summary = n.summary if n.summary is not None else n.lines[-1]
                sig = (n.kind, n.cluster, summary, touch_in, touch_out)
                groups.setdefault(sig, []).append(n)
        mapping, made = {}, {}
        for (kind, cluster, summary, _, _), members in groups.items():
            if len(members) < min_repeat:
                continue
            head = f"×{len(members)} {PLURAL.get(kind, kind)}"
            node = DNode(self._new_id(), kind, (head, summary) if summary else (head,), cluster,
                         tooltip=_member_list(members))
            for m in members:
                mapping[m.id] = node.id
            made[node.id] = node
        self._apply(mapping, made)
        return bool(made)

    def _apply(self, mapping, made):
        """Replace mapped nodes by their box (placed where its first member was)."""
        if not mapping:
            return
        self.boxes |= set(made)
        nodes, placed = [], set()
        for n in self.nodes:
            new = mapping.get(n.id)
            if new is None:
                nodes.append(n)
            elif new not in placed:
                placed.add(new)
                nodes.append(made[new])
        self.nodes = nodes
        merged = {}
        for e in self.edges:
            s, t = mapping.get(e.src, e.src), mapping.get(e.dst, e.dst)
            if s == t and (e.src in mapping or e.dst in mapping):
                continue                      # inside one box
            k = (s, t, e.kind)
            if k in merged:
                merged[k].append(e)
            else:
                merged[k] = [e]
        self.edges = [_merge(s, t, kind, es) for (s, t, kind), es in merged.items()]


def _member_list(members):
    names = list(dict.fromkeys(m.lines[0] for m in members))   # unique, in order
    return short(", ".join(names), 400) if len(names) > 1 else None


def _merge(s, t, kind, es):
    labels = {e.label for e in es}
    label = es[0].label if len(labels) == 1 else None
    tooltip = es[0].tooltip if len(es) == 1 else None
    return DEdge(s, t, label, kind, tooltip, sum(e.count for e in es))
