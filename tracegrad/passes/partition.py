"""partition: split forward and backward into two programs and decide what crosses over.

The policy is "save what backward reads": the backward graph's saved inputs (after dead-code
elimination) are exactly the forward values it needs. Program inputs among them are not
saved at all (the runtime keeps a reference and checks their version); the others become
extra outputs of the forward program. Input mutations become trailing forward outputs.
"""
from dataclasses import dataclass, field

from ..ir.graph import Graph
from .simplify import dce


@dataclass
class Partition:
    forward: Graph
    backward: Graph = None
    n_user: int = 0
    saved: list = field(default_factory=list)           # forward Values read by backward
    saved_from_input: dict = field(default_factory=dict)  # saved position -> input position
    mutations: list = field(default_factory=list)       # [(input position, count)]
    grads: list = field(default_factory=list)           # backward output per wrt input
    cotangent_outputs: list = field(default_factory=list)
    recomputed: list = field(default_factory=list)      # forward Values recomputed in backward
    recomputed_as: dict = field(default_factory=dict)   # ... -> the backward Value recomputing it


def partition(fg, vjp_result=None, remat=False, mutation_counts=None):
    """Build the forward/backward program pair from a functional graph and its VJP.

    `mutation_counts` (mutated input Value -> version bumps, from `OutputFacts`) says how far
    each input mutation moves its version counter (1 each when not given).

    With `remat`, cheap elementwise values are recomputed in backward instead of saved
    when that lowers the saved bytes (see passes/remat.py); `remat="ties"` also when it
    keeps them equal (for fusing backends)."""
    inputs = {v: i for i, v in enumerate(fg.inputs)}
    user = list(fg.outputs)
    part = Partition(forward=None, n_user=len(user))
    saved_fwd = []
    if vjp_result is not None:
        bwd = dce(vjp_result.graph)
        n_ct = len(vjp_result.cotangent_outputs)
        saved_list = list(vjp_result.saved)
        if remat:
            from .remat import rematerialize
            bwd, saved_list, part.recomputed, part.recomputed_as = rematerialize(
                fg, bwd, n_ct, saved_list, ties=(remat == "ties"))
        used = {a for n in bwd.nodes for a in n.value_inputs()} | {
            v for v in bwd.outputs if v is not None}
        keep_inputs = bwd.inputs[:n_ct]
        for v, fv in zip(bwd.inputs[n_ct:], saved_list):
            if v in used:
                keep_inputs.append(v)
                part.saved.append(fv)
        bwd.inputs = keep_inputs
        part.backward = bwd
        part.grads = vjp_result.grads
        part.cotangent_outputs = vjp_result.cotangent_outputs
        for k, fv in enumerate(part.saved):
            if fv in inputs:
                part.saved_from_input[k] = inputs[fv]
            else:
                saved_fwd.append(fv)
    muts = fg.mutations
    counts = mutation_counts or {}
    part.mutations = [(inputs[a], counts.get(a, 1)) for a, _ in muts]
    fwd = dce(_with_outputs(fg, user + saved_fwd + [b for _, b in muts]))
    fwd.pass_log.append(("partition", {
        "saved": len(part.saved), "saved_inputs": len(part.saved_from_input),
        "saved_bytes": sum(v.type.nbytes for v in saved_fwd),
        "recomputed": len(part.recomputed), "input_mutations": len(part.mutations)}))
    part.forward = fwd
    return part


def _with_outputs(g, outputs):
    out = g.derive()
    out.inputs = list(g.inputs)
    out.nodes = list(g.nodes)
    out.guards = list(g.guards)
    out.outputs = outputs
    out.mutations = list(g.mutations)
    out.stale = dict(g.stale)
    out.pass_log = list(g.pass_log)
    return out
