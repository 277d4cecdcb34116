"""Refusing a recomputing backward whose inputs were overwritten behind their version
counters (Note [Inputs written before a recomputing backward]).

Note [Inputs written before a recomputing backward]
A compiled backward may recompute cheap forward values from the call's inputs instead of
keeping them (passes/remat.py: always on the JAX backend, with `memory="min"` on numpy).
Eager keeps them: in `(x * w).sin()`, sin saves its input `h = x * w` as computed. A write
into `w` between the call and `backward()` through the tensor itself bumps its version
counter, and both raise eager's version error. A write through an alias with a counter of
its own (`w.data`) passes that check: eager's backward then reads the new `w` where it saved
`w` itself but the old `h`, while the compiled backward would recompute `h` from the new
`w`, a silently different gradient. So a path that recomputes from inputs remembers which of
its saved inputs the recomputation reads (`remat_saved`), each call's node the eager-write
count at the call, and before backward runs, if eager writes happened since, it looks up
each of those inputs' arrays in `_dispatch.WRITTEN` (the owning array of every eagerly
written memory, by id; an id is an object's for as long as it lives, and the node keeps the
array alive). A match raises, saying how to write instead. Writes through a `numpy()` view
are not seen, by eager or here. If the bounded map was emptied since the call, the write
cannot be ruled out and the backward raises too.
"""
from .._dispatch import EAGER_WRITES, WRITTEN, WRITTEN_CLEARED
from .._errors import TracegradRuntimeError, op_error
from .._tensor_storage import _root


def remat_saved(part):
    """Positions in `part.saved` of the inputs the backward's recomputation reads."""
    if not part.recomputed or not part.saved_from_input:
        return ()
    bwd = part.backward
    making = set(part.recomputed_as.values())
    reads = set()
    for n in bwd.nodes:
        if n.output in making:
            reads.update(n.value_inputs())
    ins = bwd.inputs[len(part.cotangent_outputs):]
    return tuple(k for k, v in enumerate(ins) if k in part.saved_from_input and v in reads)


def check(node, name):
    """Raise when an input the recomputation reads was written since `node`'s call."""
    at = node.written_at
    if at == EAGER_WRITES[0]:
        return
    for k in node.path.remat_saved:
        a = _root(node.saved_arrays[k])                # (as `_dispatch.note_write`)
        if WRITTEN.get(id(a), -1) > at or WRITTEN_CLEARED[0] > at:
            pos = node.path.part.saved_from_input[k]
            raise op_error(
                TracegradRuntimeError, "backward",
                f"input {pos} of the compiled function {name} was modified in place through "
                "an alias with a version counter of its own (such as `.data`) after the call "
                "and before this backward: eager autograd would combine values saved before "
                "that write with the new contents, which this backward cannot reproduce (it "
                "recomputes intermediate values from the inputs instead of keeping them)",
                "Modify the tensor after backward(), or through the tensor itself (then "
                "eager and compiled both raise the version error).")
