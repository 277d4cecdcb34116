"""`verify(graph)`: checks SSA, ordering, types and effects; raises IRError saying how to fix.

A checker only: it never changes the graph. Tests run it after every pass; the compiler and
eager dispatch never call it (shape rules cost time that hot paths must not pay).
"""
from .._errors import TracegradRuntimeError
from ..ops.shape_rules import operand_shapes
from .types import TensorType, Value


class IRError(TracegradRuntimeError):
    """A graph broke an IR invariant (see Note [IR invariants] in ir/graph.py)."""


def verify(g):
    """Check `g` against Note [IR invariants] and every node's shape rule; True or IRError.

    >>> verify(tracegrad.trace(lambda x: x.sum(0), tracegrad.ones(2, 3)))
    True
    """
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
        _check_shape(g, i, n)
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


def _check_shape(g, i, n):
    """The output type's shape must be what the primitive's shape rule derives from the
    operand types and attributes (Note [Shape rules] in ops/shape_rules.py)."""
    rule = n.prim.shape_rule
    if rule is None:
        return
    shapes = operand_shapes(n.inputs)
    try:
        want = rule(shapes, n.attrs)
    except Exception as e:          # the rule's own complaint, about operands a kernel refuses
        raise IRError(f"{g.name}: node {i} ({n.prim.name}) has operand shapes "
                      f"{_shapes(shapes)} and attributes {_attrs(n.attrs)} that its shape rule "
                      f"rejects ({type(e).__name__}: {e}); whatever built the node gave it "
                      "operands its kernel cannot take") from e
    if want is not None and tuple(want) != tuple(n.output.type.shape):
        at = f" (from {n.site})" if n.site else ""
        raise IRError(f"{g.name}: node {i} ({n.prim.name}){at} has output {n.output!r} typed "
                      f"with shape {tuple(n.output.type.shape)}, but its shape rule gives "
                      f"{tuple(want)} for operand shapes {_shapes(shapes)} and attributes "
                      f"{_attrs(n.attrs)}; a pass that builds such a node must type its output "
                      "from the operands (or TensorType.of the kernel's result), and a new or "
                      f"changed kernel needs its rule in the declaration of {n.prim.name!r} "
                      "updated to match")


def _shapes(shapes):
    return "(" + ", ".join("literal" if s is None else str(tuple(s)) for s in shapes) + ")"


def _attrs(attrs):
    from .printer import format_literal
    return "{" + ", ".join(f"{k}={format_literal(v)}" for k, v in attrs.items()) + "}"
