"""Data-dependent selections: `masked_select` and `unique`, composed of boolean-mask
indexing, sort, cumsum and scatter, so they trace like `x[mask]` does (the result's length
is data-dependent, which the tracer records) and `masked_select` differentiates as indexing.

Note [unique by sort]: the flattened input is sorted; an entry starts a new value where it
differs from its predecessor. The unique values are the sorted entries at those starts, the
inverse index of an entry is the number of starts up to its sorted position minus one
(scattered back through the sort's permutation), and the counts are the gaps between starts.
PyTorch's CPU `unique` sorts whatever `sorted` says, and so does this one.
"""
from .. import _dtype as D
from .._errors import TracegradRuntimeError, op_error
from . import elementwise as E
from . import shape as S

__all__ = ["masked_select", "unique"]


def masked_select(input, mask):
    """The entries of `input` where the bool `mask` (broadcast together) is True, as 1-D."""
    if mask.dtype != D.bool_:
        raise op_error(TracegradRuntimeError, "masked_select", "masked_select: expected "
                       "BoolTensor for mask")
    x, m = S.broadcast_tensors(input, mask)
    return S.reshape(x, (-1,))[S.reshape(m, (-1,))]


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values of `input` in ascending order, with optionally the index of each
    input entry in them (`return_inverse`, input's shape) and each value's count (Note
    [unique by sort]). Not differentiable."""
    from .creation import ones, zeros, tensor
    from .scan import cumsum
    from .sort import sort
    if dim is not None:
        raise op_error(NotImplementedError, "unique", "unique(dim=...) is not supported yet",
                       "Use dim=None (the flattened input).")
    flat = S.reshape(input.detach(), (-1,))
    n = flat.shape[0]
    v, idx = sort(flat)
    starts = ones((n,), dtype=D.bool_)
    if n > 1:
        starts[1:] = E.ne(v[1:], v[:-1])
    values = v[starts]
    out = [values]
    if return_inverse:
        pos = E.sub(cumsum(starts.long(), 0), 1)
        inv = zeros((n,), dtype=D.int64).scatter(0, idx, pos)
        out.append(S.reshape(inv, tuple(input.shape)))
    if return_counts:
        first = S.reshape(S.nonzero(starts), (-1,))
        bounds = S.cat([first, tensor([n], dtype=D.int64)])
        out.append(E.sub(bounds[1:], bounds[:-1]))
    return out[0] if len(out) == 1 else tuple(out)
