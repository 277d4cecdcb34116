"""The differentiable backward of a compiled call (`create_graph=True`).

Note [Differentiable backward]
The compiled backward program works on plain arrays, so its gradients carry no history. When
grad mode is on during backward, CompiledFunctionBackward instead runs the path's backward
graph through eager dispatch, on the cotangents and on the saved values, and the engine
records it like any eager computation.

For the result to be differentiable with respect to the inputs that require grad, the saved
values that depend on those inputs are recomputed from them through dispatch. Every other
value is a constant of that computation and must have the value the call saw:
- saved values that depend on no input requiring grad come from the saved arrays;
- other values the recomputation reads are recomputed from the inputs, except those that
  depend on a random draw (a second draw would differ, and advance the generator) or on an
  input the call modified in place (that input now holds its new value). The forward
  program returns those as extra trailing outputs ("kept"); a kept pre-modification input
  is copied first (a `clone` node), as the program may write the new value into its buffer.

The plan is made once per path on the partitioned forward graph, before the cleanup passes,
so `detach` nodes (which drop_aliases removes) still cut the recomputed graph.
"""
from .._dispatch import dispatch
from .._tensor import Tensor
from ..ops.creation import zeros
from ..ops.shape import CLONE
from ..ir.types import Value


class ReplayPlan:
    def __init__(self, graph, nodes, keep):
        self.graph = graph      # the forward graph `nodes` belong to (before cleanup passes)
        self.nodes = nodes      # forward nodes re-run through dispatch, in program order
        self.keep = keep        # Values (of `graph`) whose arrays the forward also returns


def plan_replay(part, wrt):
    """A ReplayPlan for `part`; appends the kept values to `part.forward.outputs`.

    `wrt`: positions of the forward inputs that require grad. Call before codegen."""
    g = part.forward
    inputs, mutated = set(g.inputs), {g.inputs[p] for p, _ in part.mutations}
    dep = {g.inputs[i] for i in wrt}          # values depending on an input requiring grad
    volatile = set(mutated)                  # values a recomputation would get wrong
    producer = {}
    for n in g.nodes:
        producer[n.output] = n
        ops = n.value_inputs()
        if any(a in dep for a in ops):
            dep.add(n.output)
        if n.prim.impure or any(a in volatile for a in ops):
            volatile.add(n.output)
    saved = set(part.saved)
    need, keep, seen = set(), [], set()
    stack = [v for v in part.saved if v in dep]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in inputs:
            if v in mutated and v not in dep:
                keep.append(v)
        elif v not in dep and v in saved:
            pass
        elif v not in dep and v in volatile:
            keep.append(v)
        else:
            need.add(v)
            stack.extend(producer[v].value_inputs())
    for v in keep:
        g.outputs.append(g.add_node(CLONE, (v,), {}, v.type) if v in inputs else v)
    return ReplayPlan(g, [n for n in g.nodes if n.output in need], keep)


def replay_backward(path, inputs, grads, saved_arrays, kept_arrays):
    """Input gradients of one compiled call, computed through dispatch (differentiable)."""
    part, plan = path.part, path.replay
    env = dict(zip(plan.graph.inputs, inputs))
    for v, arr in zip(plan.keep, kept_arrays):
        env[v] = Tensor._wrap(arr)
    for v, arr in zip(part.saved, saved_arrays):
        if v not in env:                     # values in `plan.nodes` are recomputed below
            env[v] = Tensor._wrap(arr)
    for n in plan.nodes:
        env[n.output] = dispatch(n.prim, tuple(env[a] if _isval(a) else a for a in n.inputs),
                                 n.attrs)
    cts = []
    for k in part.cotangent_outputs:
        g = grads[k]
        if g is None:
            v = plan.graph.outputs[k]
            g = zeros(v.type.shape, dtype=v.type.dtype)
        cts.append(g)
    bg = part.backward
    benv = dict(zip(bg.inputs, cts + [env[v] for v in part.saved]))
    for n in bg.nodes:
        benv[n.output] = dispatch(n.prim, tuple(benv[a] if _isval(a) else a for a in n.inputs),
                                  n.attrs)
    return tuple(benv[v] if v is not None else None for v in bg.outputs)


def _isval(a):
    return isinstance(a, Value)
