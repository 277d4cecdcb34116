"""Memory overlap between the tensor an in-place op writes and the tensors it reads, with
PyTorch's verdicts: a read that partly overlaps the write (`x += x.t()`, `x[1:] = x[:-1]`,
`x.mul_(x[0])`) raises instead of computing something that depends on the order of the
element loop.

Note [Overlapping in-place operands]
numpy computes `f(operands)` first and copies the result into the target, so any overlap
gives the "as if cloned first" answer. PyTorch's kernels read and write in one loop and
refuse what they cannot do safely, classifying each pair (target, operand) as
- full: the same elements in the same order (`x.add_(x)`, `x.copy_(x.view(4, 4))`): fine;
- partial: one dense block of memory each, the blocks intersect, and they are not the same
  block with the same strides: an error;
- too hard: either is not one dense block (`x[:, 1:]`, an expanded view): not checked;
- none: disjoint blocks, or different storages.
Elementwise ops and `copy_` refuse partial overlap; indexed writes (`x[idx] = v`, `scatter_`,
`index_add_`) also refuse full overlap of a non-scalar operand. tracegrad raises the same
errors, in eager mode and while tracing (which runs the same check), and otherwise keeps
numpy's answer where PyTorch's is undefined ("too hard"). The verdict depends on the layout
of the memory: inside a trace, the strides of the non-contiguous arguments on the written
storage become guards (`_effects.layout_read`), so a compiled call whose argument has
another layout (`w.t()` rather than `w[:, ::2]`) re-traces instead of skipping the error.
"""
import numpy as np

from ._effects import layout_read
from ._errors import TracegradRuntimeError, op_error
from ._tensor_storage import _address, _root

NO, FULL, PARTIAL, TOO_HARD = "no", "full", "partial", "too hard"



def _dense(a):
    """Whether `a`'s elements fill one block of memory without gaps or repeats (PyTorch's
    is_non_overlapping_and_dense), in some order of its dimensions."""
    dims = sorted((st, n) for st, n in zip(a.strides, a.shape) if n != 1)
    step = a.itemsize
    for st, n in dims:
        if st != step:
            return False
        step *= n
    return True


def overlap(a, b):
    """PyTorch's overlap status of numpy arrays `a` and `b` (see the Note above)."""
    if a is b:
        return FULL
    if a.size == 0 or b.size == 0 or _root(a) is not _root(b):
        return NO
    if not (_dense(a) and _dense(b)):
        return TOO_HARD
    lo_a, lo_b = _address(a), _address(b)     # dense: no negative strides
    hi_a, hi_b = lo_a + a.nbytes, lo_b + b.nbytes
    if lo_a == lo_b and hi_a == hi_b:
        same = a.shape == b.shape and all(
            sa == sb for sa, sb, n in zip(a.strides, b.strides, a.shape) if n != 1)
        return FULL if same else PARTIAL
    return PARTIAL if lo_a < hi_b and lo_b < hi_a else NO


def check_overlap(prim, args, attrs):
    """Raise PyTorch's RuntimeError when in-place `prim` writing `args[0]` reads an operand
    (a tensor in `args[1:]`) that overlaps the write in a way PyTorch refuses."""
    target = args[0]._data
    root = None
    for t in args[1:]:
        a = getattr(t, "_data", None)
        if a is None or a.ndim == 0:
            continue
        if a.base is None and target.base is None and a is not target:
            continue                     # two arrays owning their memory: apart (the common
        #                                  case: `p.add_(g)`, no `_root` walk on the hot path)
        if root is None:
            root = _root(target)
        if _root(a) is not root:
            continue
        layout_read(root)
        status = overlap(_written(prim, target, args, attrs), a)
        if status == PARTIAL or (status == FULL and prim.writes == "indexed"):
            raise op_error(TracegradRuntimeError, prim.name,
                           "unsupported operation: some elements of the input tensor and the "
                           "written-to tensor refer to a single memory location.",
                           "Please clone() the tensor before performing the operation.")


def _written(prim, target, args, attrs):
    """The region `prim` writes: `target[key]` for a basic-index write, else all of it."""
    if prim.writes != "slice" or len(args) != 2:
        return target
    from .ops.shape import _fill
    key = _fill(attrs["key"], ())
    return target[key if Ellipsis in key else key + (Ellipsis,)]
