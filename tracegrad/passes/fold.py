"""fold_constants and drop_aliases: compile-time evaluation and no-op removal.

`fold_constants(g)`: a node whose operands are all constants (and which is not impure) is
evaluated once at compile time and becomes a `constant` node; e.g. a mean's backward seed
`constant -> neg -> reshape -> expand -> div` turns into one constant. Results larger than
`max_bytes` stay computed (baking big arrays into a program costs memory).

`drop_aliases(g)`: `detach` only matters to autograd; once forward and backward programs
exist (after partition) its output is its operand, so reads are redirected and the node
disappears (dce removes it).

`fold_scalings(g)`: exact merging of repeated scalings by powers of two (see its docstring).

`drop_clones(g)`: a `clone` of a fresh intermediate that nothing else reads is that value
(the trace records the clone `AccumulateGrad` makes of a new `.grad`; see its docstring).
"""
import math

import numpy as np

from ..ir.graph import Guard, Node
from ..ops.shape import CLONE, DATA, DETACH, NOGRAD_WRITE
from ..tracing import CONSTANT
from .simplify import _copy_shell
from ..ir.types import Value


def fold_constants(g, max_bytes=1 << 20):
    """Note [Folded layouts]
    A folded value becomes a C-ordered array. Eager execution may hold the same numbers in
    another layout: a sum's gradient is `expand`ed, a view with stride 0, and a matmul over
    a stride-0 or transposed operand takes another numpy path than over a C-ordered one,
    adding in another order (found in review: a model applied twice in one loss, its weight
    gradient one bit off after the seed's expand was folded). So a result that is not
    C-ordered stays computed, from its constant operands; whatever reads it may still fold
    (an elementwise result of the same numbers is C-ordered)."""
    const = {}
    out = _copy_shell(g)
    folded = 0
    for n in g.nodes:
        if n.prim is CONSTANT:
            const[n.output] = n.attrs["value"]
            out.nodes.append(n)
            continue
        vals = n.value_inputs()
        if (vals and not n.prim.impure and not n.prim.overwrites
                and all(v in const for v in vals) and n.output.type.nbytes <= max_bytes):
            with np.errstate(all="ignore"):
                raw = n.prim.kernel(*[const[a] if a in const else a for a in n.inputs],
                                    **n.attrs)
            if isinstance(raw, np.ndarray) and not raw.flags.c_contiguous:
                # Note [Folded layouts]: keep computing it, as eager does (a constant is
                # a C-ordered copy), but let what reads it fold
                const[n.output] = raw
                out.nodes.append(n)
                continue
            res = np.array(raw, copy=True)
            const[n.output] = res
            out.nodes.append(Node(CONSTANT, (), {"value": res}, n.output, n.site, n.phase))
            folded += 1
            continue
        out.nodes.append(n)
    return _finish(out, g, "fold_constants", {"folded": folded})


def fold_scalings(g):
    """Merge chains of multiplications by Python constants into one, where that is exact.

    `(x * a) * b` becomes `x * (a * b)` when `x * a` is read only by the second product and
    `a`, `b` are powers of two of magnitude at least 1 on a float value (no promotion): such
    products are exact or overflow to the same infinity, so the result is bit-identical to
    eager's two roundings. The backward of a loop that scales by 2 each iteration collapses
    into one multiplication.
    """
    uses = {}
    for n in g.nodes:
        for a in n.value_inputs():
            uses[a] = uses.get(a, 0) + 1
    pinned = {gd.value for gd in g.guards} | {v for v in g.outputs if v is not None}
    pinned |= {b for _, b in g.mutations}
    scaled = {}                               # value -> (operand, factor) for x * factor
    out = _copy_shell(g)
    merged = 0
    for n in g.nodes:
        sc = _scaling(n)
        if sc is not None:
            x, c = sc
            prev = scaled.get(x)
            if prev is not None and uses.get(x) == 1 and x not in pinned:
                x, c = prev[0], prev[1] * c
                n = Node(n.prim, (x, c), n.attrs, n.output, n.site, n.phase)
                merged += 1
            if abs(c) <= 2.0 ** 64:
                scaled[n.output] = (x, c)
        out.nodes.append(n)
    return _finish(out, g, "fold_scalings", {"merged": merged})


def _finish(out, g, name, stats):
    """Same guards and outputs as `g` (node-for-node passes keep positions), and the log."""
    out.guards = list(g.guards)
    out.outputs = list(g.outputs)
    out.pass_log.append((name, stats))
    return out


def _scaling(n):
    """(x, c) when node n computes `x * c` exactly as `fold_scalings` needs, else None."""
    if n.prim.name != "mul" or n.attrs or len(n.inputs) != 2:
        return None
    a, b = n.inputs
    x, c = (a, b) if _is_val(a) else (b, a)
    if not _is_val(x) or _is_val(c) or type(c) not in (int, float):
        return None
    if x.type.dtype != n.output.type.dtype or not n.output.type.dtype.is_floating_point:
        return None
    if not math.isfinite(c) or abs(c) < 1 or math.frexp(c)[0] not in (0.5, -0.5):
        return None
    return x, c


def drop_aliases(g):
    """Redirect reads of `detach` (and `nograd_write`) results to the operand they alias
    (after partition only)."""
    rename = {n.output: n.inputs[n.prim.aliases] for n in g.nodes
              if (n.prim is DETACH or n.prim is DATA or n.prim is NOGRAD_WRITE)
              and _is_val(n.inputs[n.prim.aliases]) and n.output not in g.outputs}
    return _renamed(g, rename, "drop_aliases", {"dropped": len(rename)})


def drop_clones(g, reordered_inputs=()):
    """Drop `clone(v)` nodes whose operand `v` is a fresh intermediate read by nothing else:
    computed by a node that owns its memory (not a view, not a constant baked into the
    program), not an output, a guard or a mutation, and in C order (a clone always is, Note
    [Layouts]). In a functional program such a clone only copies memory nobody else sees.
    After partition only (the forward/backward split must be settled)."""
    from .layout import reordered_values
    prod = g.producers()
    reads = {}
    for n in g.nodes:
        for a in n.value_inputs():
            reads[a] = reads.get(a, 0) + 1
    pinned = set(g.outputs) | {gd.value for gd in g.guards} | {
        v for pair in g.mutations for v in pair}
    shuffled = None
    rename = {}
    for n in g.nodes:
        if n.prim is not CLONE or not _is_val(n.inputs[0]):
            continue
        v = n.inputs[0]
        p = prod.get(v)
        if (p is None or p.prim.aliases is not None or p.prim is CONSTANT or reads[v] != 1
                or v in pinned):
            continue
        if shuffled is None:
            shuffled = reordered_values(g, reordered_inputs)
        if v not in shuffled:
            rename[n.output] = v
    return _renamed(g, rename, "drop_clones", {"dropped": len(rename)})


def _renamed(g, rename, name, stats):
    """`g` without the nodes defining the keys of `rename`, their readers reading the values
    they map to instead."""
    out = g.derive()
    out.inputs = list(g.inputs)

    def r(v):
        while v in rename:
            v = rename[v]
        return v

    for n in g.nodes:
        if n.output in rename:
            continue
        out.nodes.append(Node(n.prim, tuple(r(a) if _is_val(a) else a for a in n.inputs),
                              n.attrs, n.output, n.site, n.phase))
    pos = {}
    k = 0
    for i, n in enumerate(g.nodes):
        pos[i] = k
        if n.output not in rename:
            k += 1
    pos[len(g.nodes)] = k
    out.guards = [Guard(r(gd.value), gd.kind, gd.expected, gd.site, pos[gd.position])
                  for gd in g.guards]
    out.outputs = [r(v) if v is not None else None for v in g.outputs]
    out.mutations = [(a, r(b)) for a, b in g.mutations]
    out.pass_log.append((name, stats))
    return out


def _is_val(a):
    return isinstance(a, Value)
