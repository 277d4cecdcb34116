"""`verify(graph)`: checks SSA, ordering, types and effects; raises IRError saying how to fix."""
from .._errors import TracegradRuntimeError
from .graph import Value
from .types import TensorType


class IRError(TracegradRuntimeError):
    """A graph broke an IR invariant (see Note [IR invariants] in ir/graph.py)."""


def verify(g):
    defined = set()
    for v in g.inputs:
        _check_value(v, "input")
        if v in defined:
            raise IRError(f"{g.name}: input {v!r} appears twice")
        defined.add(v)
    for i, n in enumerate(g.nodes):
        for a in n.inputs:
            if isinstance(a, Value) and a not in defined:
                raise IRError(f"{g.name}: node {i} ({n.prim.name}) reads {a!r} before it is "
                              "defined; nodes must be in topological order")
        if n.output in defined:
            raise IRError(f"{g.name}: {n.output!r} is defined twice (SSA violation) at node "
                          f"{i} ({n.prim.name}); give each result a fresh Value")
        _check_value(n.output, f"node {i} ({n.prim.name})")
        for k in n.prim.overwrites:
            if k >= len(n.inputs) or not isinstance(n.inputs[k], Value):
                raise IRError(f"{g.name}: in-place node {i} ({n.prim.name}) must overwrite a "
                              "Value operand")
            if n.inputs[k].type != n.output.type:
                raise IRError(f"{g.name}: in-place node {i} ({n.prim.name}) changes the type of "
                              f"its overwritten operand ({n.inputs[k].type} -> {n.output.type})")
        defined.add(n.output)
    for gd in g.guards:
        if gd.value not in defined:
            raise IRError(f"{g.name}: guard on undefined value {gd.value!r}")
        if not 0 <= gd.position <= len(g.nodes):
            raise IRError(f"{g.name}: guard position {gd.position} out of range")
    for v in g.outputs:
        if v is not None and v not in defined:
            raise IRError(f"{g.name}: output {v!r} is not defined in the graph")
    return True


def _check_value(v, where):
    if not isinstance(v, Value) or not isinstance(v.type, TensorType):
        raise IRError(f"{where}: every binder needs a Value with a TensorType, got {v!r}")
