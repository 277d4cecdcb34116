"""vjp: derive the backward program of a functional forward graph.

Walks the forward nodes in reverse, calling each primitive's VJP rule under a tracer, so the
backward program is IR recorded from the very rules eager autograd runs (and the same
numerics). Cotangents of values used several times are summed in the order eager's engine
would sum them; nodes that no wrt-input reaches, non-differentiable primitives and symbolic
zeros (no cotangent) are skipped; gradients are cast to their operand's dtype as the engine
does. The rules have no data-dependent branches, so concrete values only serve to run the
kernels while recording: a saved value missing from `values` (a floating array the traced
program freed, Note [Known values] in functionalize.py) is a zero placeholder of its type.
Running the rules draws too where a rule draws (a custom `autograd.Function` whose backward
calls `rand`): those draws are the recording's, not the user's, so every generator is left
as the pass found it; the backward program draws when backward runs, as eager does.

Returns a `VJPResult`: the backward graph (inputs: cotangents, then saved forward values),
`saved` (the forward Values it reads: the partition), `grads` (one backward output per wrt
input, or None) and `differentiated` (forward node indices whose rule ran).
"""
import contextlib
from dataclasses import dataclass, field

import numpy as np

from .. import _mode
from .._tensor import Tensor, from_array
from ..ir.graph import Graph, Value
from ..ir.interpret import interpret
from ..tracing import Tracer


class _RuleNode:
    """What a VJP rule reads from its node: attrs, operand shapes/dtypes and needs."""

    __slots__ = ("prim", "attrs", "shapes", "dtypes", "needs")

    def __init__(self, n, needs):
        self.prim = n.prim
        self.attrs = n.attrs
        self.shapes = tuple(a.type.shape if isinstance(a, Value) else () for a in n.inputs)
        self.dtypes = tuple(a.type.dtype if isinstance(a, Value) else None for a in n.inputs)
        self.needs = needs


@dataclass
class VJPResult:
    graph: Graph
    saved: list
    grads: list
    differentiated: set = field(default_factory=set)
    cotangent_outputs: list = field(default_factory=list)


def requires_grad_values(g, wrt):
    """Forward values that depend differentiably on any of `wrt`."""
    req = set(wrt)
    for n in g.nodes:
        if n.prim.nondiff or n.output.type.dtype.category != 2:
            continue
        if any(a in req for a in n.value_inputs()):
            req.add(n.output)
    return req


def vjp(g, wrt=None, values=None, out_mask=None):
    """Backward graph of functional graph `g` w.r.t. inputs `wrt` (default: float inputs)."""
    with _generators_untouched():
        return _vjp(g, wrt, values, out_mask)


@contextlib.contextmanager
def _generators_untouched():
    """Within the block draw freely: every tracegrad generator is put back on leaving it."""
    from ..ops.generator import _live_generators
    snap = [(gen, gen._rng, gen._rng.bit_generator.state, gen._seed)
            for gen in _live_generators()]
    try:
        yield
    finally:
        for gen, rng, state, seed in snap:
            gen._rng, gen._seed = rng, seed
            rng.bit_generator.state = state


def _vjp(g, wrt, values, out_mask):
    if wrt is None:
        wrt = [v for v in g.inputs if v.type.dtype.is_floating_point]
    if values is None:
        values = g.values if g.values is not None else _placeholder_values(g)
    req = requires_grad_values(g, wrt)
    if out_mask is None:
        out_mask = [True] * len(g.outputs)
    douts = [(k, v) for k, (v, m) in enumerate(zip(g.outputs, out_mask))
             if m and v is not None and v in req]
    tracer = Tracer(g.name + "_backward", phase="bwd")
    ct = {}
    for k, v in douts:
        t = Tensor._wrap(np.ones(v.type.shape, v.type.dtype.np))
        tracer.add_arg(t, f"grad_out{k}", role="cotangent")
        if v in ct:                          # a value returned twice: record the sum
            with _mode.no_grad(), tracer:
                t = ct[v] + t
        ct[v] = t
    wrapped = {}
    saved_of = {}

    def fwd(v):
        t = wrapped.get(v)
        if t is None:
            arr = values.get(v)
            if arr is None:                  # a placeholder: rules only read its type
                arr = np.zeros(v.type.shape, v.type.dtype.np)
            t = Tensor._wrap(arr)
            wrapped[v] = t
            tracer.names[id(t)] = f"saved{len(wrapped) - 1}"
            saved_of[id(t)] = v
        return t

    # saved values written through `.data` later: backward reads the newer contents, as
    # eager does (Note [Writes through .data] in functionalize.py)
    reads = g.saved_reads
    done = set()
    with np.errstate(all="ignore"), _mode.no_grad(), tracer:
        for idx in range(len(g.nodes) - 1, -1, -1):
            n = g.nodes[idx]
            gout = ct.pop(n.output, None)
            if gout is None or n.prim.nondiff:
                continue
            needs = tuple(isinstance(a, Value) and a in req for a in n.inputs)
            if not any(needs):
                continue
            saves = n.prim.saved_for(needs)
            # one entry per operand (None where nothing is saved), as eager's nodes pass them
            ins = tuple((fwd(reads.get((n.output, k), a)) if isinstance(a, Value) else a)
                        if k in saves else None for k, a in enumerate(n.inputs))
            out = fwd(reads.get((n.output, "out"), n.output)) if n.prim.saves_out else None
            tracer.site = n.site
            for a in ins:                    # a rule may wrap a literal array: a constant
                if isinstance(a, np.ndarray) and id(a) not in tracer.by_data:
                    from_array(a)
            grads = n.prim.vjp(gout, ins, out, _RuleNode(n, needs))
            done.add(idx)
            for a, gr, need in zip(n.inputs, grads, needs):
                if not need or gr is None:
                    continue
                if gr._data.dtype != a.type.dtype.np:
                    gr = gr.to(a.type.dtype)
                ct[a] = gr if a not in ct else ct[a] + gr
    bwd = tracer.graph
    # Shapes in the backward program follow from forward shapes, which the forward program
    # already guards (masks: `x[mask]`, `x[mask] = v`), so shape guards here are redundant.
    bwd.guards = [gd for gd in bwd.guards if gd.kind != "shape"]
    if bwd.guards:
        gd = bwd.guards[0]
        raise BackwardDecides(f"a gradient rule takes a data-dependent decision "
                              f"({gd.kind}() at {gd.site}): a backward program is "
                              "straight-line code")
    grads = [tracer.value_of(ct[w]) if w in ct else None for w in wrt]
    bwd.outputs = grads
    saved = [saved_of[id(t)] for v_, t in tracer.captured]
    bwd.pass_log = list(g.pass_log) + [("vjp", {"differentiated": len(done),
                                                "saved": len(saved)})]
    return VJPResult(bwd, saved, grads, done, [k for k, _ in douts])


class BackwardDecides(RuntimeError):
    """A gradient rule recorded a guard (Python took a decision on a tensor's value): the
    op table's rules never do; a custom `autograd.Function`'s `backward` may (`if (g.abs()
    > 1).any(): ...`). The compiler then runs such calls eagerly, with a warning."""


def _placeholder_values(g):
    vals = {}
    ins = [np.ones(v.type.shape, v.type.dtype.np) for v in g.inputs]
    with np.errstate(all="ignore"):
        interpret(g, ins, values=vals, check_guards=False)
    return vals
