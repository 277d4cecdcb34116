"""Counting ops: `histc`, `histogram` (bins an int or a tensor of edges, `range=`,
`weight=`, `density=`) and `unique_consecutive` (`return_inverse`, `return_counts`, `dim`).

Composites of comparisons, `searchsorted` and `scatter_add` on the detached input: never
differentiable (PyTorch's histogram records a node whose backward refuses to run; here the
result does not require grad). An element lands in bin floor((x - min) / (max - min) * bins)
as PyTorch computes it, the last edge inclusive; NaN and out-of-range elements are not
counted. Without a range, the data's min and max are read as Python floats (a guard under
`compile`); a NaN or inf among them raises PyTorch's "range ... is not finite".
"""
from .. import _dtype as D
from .._errors import TracegradNotImplementedError, TracegradRuntimeError, op_error
from .._tensor import Tensor, _wrap_dim
from . import creation as C
from . import elementwise as E
from . import reduction as R
from . import shape as S
from .return_types import named

__all__ = ["histc", "histogram", "unique_consecutive"]


def _float_only(op, input):
    if not input.dtype.is_floating_point:
        raise op_error(TracegradNotImplementedError, op, '"histogram_cpu" not implemented for '
                       f"'{D.scalar_type_name(input.dtype)}'")


def _data_range(op, x, lo, hi, pad):
    import math
    if lo == hi and x.numel():
        lo, hi = float(R.amin(x)), float(R.amax(x))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise op_error(TracegradRuntimeError, op, f"{op}: range of [{lo}, {hi}] is not finite")
    if lo == hi:
        lo, hi = lo - pad, hi + pad
    return lo, hi


def _count(x, bins, lo, hi, weight):
    """Counts (or weight sums) of `x` (flat) in `bins` equal bins over [lo, hi]."""
    from .gather_scatter import scatter_add
    pos = E.mul(E.div(E.sub(x, lo), hi - lo), bins)
    inside = E.logical_and(E.ge(x, lo), E.le(x, hi))
    idx = E.clamp(E.floor(E.where(inside, pos, 0.0)), 0, bins - 1).long()
    w = C.ones(x.shape, dtype=x.dtype) if weight is None else S.reshape(weight.detach(), (-1,))
    w = E.where(inside, w, 0.0)
    return scatter_add(C.zeros((bins,), dtype=x.dtype), 0, idx, w)


def histc(input, bins=100, min=0, max=0):
    """Counts of `input`'s elements in `bins` equal bins over [min, max] (the data's range
    when min == max), in input's dtype.

    >>> histc(tensor([1., 2., 1.]), bins=4, min=0, max=3)
    tensor([0., 2., 1., 0.])
    """
    _float_only("histc", input)
    if bins <= 0:
        raise op_error(TracegradRuntimeError, "histc", f"torch.histc: bins must be > 0, but "
                       f"got {bins} for dimension 0")
    if min > max:
        raise op_error(TracegradRuntimeError, "histc", "torch.histc: max must be larger than "
                       "min")
    x = S.reshape(input.detach(), (-1,))
    lo, hi = _data_range("torch.histc", x, float(min), float(max), 1.0)
    return _count(x, int(bins), lo, hi, None)


def histogram(input, bins, *, range=None, weight=None, density=False):
    """(hist, bin_edges): counts (or `weight` sums) of `input` in `bins` equal bins over
    `range` (default the data's), or between the given edges (a 1-D tensor `bins`);
    `density=True` divides by the total and the bin widths."""
    from .composite_math import searchsorted
    _float_only("histogram", input)
    x = S.reshape(input.detach(), (-1,))
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise op_error(TracegradRuntimeError, "histogram", "torch.histogram: if weight tensor "
                       "is provided it should have the same shape as the input tensor")
    if isinstance(bins, Tensor):
        edges = bins.detach().to(input.dtype)
        if edges.ndim != 1 or edges.numel() < 1:
            raise op_error(TracegradRuntimeError, "histogram", "torch.histogram(): bins tensor "
                           "should have one dimension and at least 1 element")
        n = edges.shape[0] - 1
        lo, hi = edges[0], edges[-1]
        inside = E.logical_and(E.ge(x, lo), E.le(x, hi))
        idx = E.clamp(E.sub(searchsorted(edges, x, right=True), 1), 0, max(n - 1, 0))
        from .gather_scatter import scatter_add
        w = C.ones(x.shape, dtype=x.dtype) if weight is None else \
            S.reshape(weight.detach(), (-1,))
        hist = scatter_add(C.zeros((max(n, 0),), dtype=x.dtype), 0, idx,
                           E.where(inside, w, 0.0)) if n > 0 else C.zeros((0,), dtype=x.dtype)
    else:
        if bins <= 0:
            raise op_error(TracegradRuntimeError, "histogram", "torch.histogram(): bins must "
                           f"be > 0, but got {bins} for dimension 0")
        r = (0.0, 0.0) if range is None else (float(range[0]), float(range[1]))
        if r[0] > r[1]:
            raise op_error(TracegradRuntimeError, "histogram", "torch.histogram(): min should "
                           "not exceed max, but got min " f"{r[0]} max {r[1]}")
        lo, hi = _data_range("torch.histogram()", x, r[0], r[1], 0.5)
        edges = C.linspace(lo, hi, int(bins) + 1, dtype=input.dtype)
        hist = _count(x, int(bins), lo, hi, weight)
    if density:
        widths = E.sub(edges[1:], edges[:-1])
        hist = E.div(hist, E.mul(R.sum(hist), widths))
    return named("histogram", ("hist", "bin_edges"), (hist, edges))


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Each run of equal consecutive values (slices along `dim`) kept once; with the run
    number of every input entry (`return_inverse`) and each run's length
    (`return_counts`). Not differentiable.

    >>> unique_consecutive(tensor([1, 1, 2, 2, 3, 1]))
    tensor([1, 2, 3, 1])
    """
    from .scan import cumsum
    x = input.detach()
    if dim is None:
        x, d = S.reshape(x, (-1,)), 0
    else:
        d = _wrap_dim(dim, x.ndim, "unique_consecutive")
    n = x.shape[d] if x.ndim else 1
    if x.ndim == 0:
        x = S.reshape(x, (1,))
    change = C.ones((n,), dtype=D.bool_)
    if n > 1:
        a, b = S.narrow(x, d, 1, n - 1), S.narrow(x, d, 0, n - 1)
        diff = E.ne(a, b)
        if x.ndim > 1:
            from .composite_shape import movedim
            diff = R.any(S.reshape(movedim(diff, d, 0), (n - 1, -1)), 1)
        change[1:] = diff
    keep = S.reshape(S.nonzero(change), (-1,))
    from .gather_scatter import index_select
    values = index_select(x, d, keep)
    out = [values]
    if return_inverse:
        inv = E.sub(cumsum(change.long(), 0), 1)
        out.append(S.reshape(inv, tuple(input.shape)) if dim is None else inv)
    if return_counts:
        bounds = S.cat([keep, C.tensor([n], dtype=D.int64)])
        out.append(E.sub(bounds[1:], bounds[:-1]))
    return out[0] if len(out) == 1 else tuple(out)
