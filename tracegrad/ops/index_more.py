"""Writes and reductions through an index that PyTorch has and tracegrad lacked: `put` /
`put_` (flat indices, `accumulate=`), `masked_scatter` / `masked_scatter_`, `index_reduce` /
`index_reduce_` ("prod", "mean", "amax", "amin"; `include_self`) and `renorm` / `renorm_`.

Composites of `index_put` (a write through an index: PyTorch's overlap refusal comes with
its primitive, Note [Overlapping in-place operands] in _overlap.py), `scatter_reduce` (the 1-D
index spread over `source`'s shape, as index_add does) and norms, so gradients, tracing and
both backends are theirs. `masked_scatter` reads the number of True mask entries as a Python
int (a guard under `compile`, as any data-dependent shape). Unlike PyTorch, `masked_scatter_`
refuses a `source` overlapping the target (PyTorch reads elements it has already written).
"""
from .. import _dtype as D
from .._errors import (TracegradIndexError, TracegradRuntimeError, TracegradTypeError,
                       op_error)
from .._tensor import Tensor, _wrap_dim
from . import elementwise as E
from . import reduction as R
from . import shape as S

__all__ = ["put", "masked_scatter", "index_reduce", "renorm"]


def _fail(op, msg, cls=TracegradRuntimeError):
    return op_error(cls, op, msg)


def _tensor(op, name, v):
    if not isinstance(v, Tensor):
        raise TracegradTypeError(f"{op}(): argument '{name}' must be Tensor, not "
                                 f"{type(v).__name__}")


# ---- put ----
def _put_check(op, input, index, source):
    _tensor(op, "index", index)
    _tensor(op, "source", source)
    if index.dtype is not D.int64:
        raise _fail(op, f"put_(): Expected a long tensor for index, but got "
                    f"{D.scalar_type_name(index.dtype)}")
    if source.dtype is not input.dtype:
        raise _fail(op, "put_(): self and source expected to have the same dtype, but got "
                    f"self.dtype = {D.scalar_type_name(input.dtype)} and source.dtype = "
                    f"{D.scalar_type_name(source.dtype)}")
    if source.numel() != index.numel():
        raise _fail(op, "put_(): Expected source and index to have the same number of "
                    f"elements, but got source.numel() = {source.numel()}, index.numel() = "
                    f"{index.numel()}", TracegradIndexError)
    n = input.numel()
    if index.numel():
        for bad in (int(R.amin(index)), int(R.amax(index))):
            if bad < -n or bad >= n:
                raise _fail(op, f"out of range: tried to access index {bad} on a tensor of "
                            f"{n} elements.", TracegradIndexError)


def put_(input, index, source, accumulate=False):
    """Write `source` into `input` flattened at `index` (negative counts from the end);
    `accumulate=True` adds, repeats included. Returns `input`."""
    from .index_writes import index_put_
    _put_check("put_", input, index, source)
    if accumulate:      # an add_ underneath, which would allow what PyTorch's put_ refuses
        from types import SimpleNamespace
        from .._overlap import check_overlap
        check_overlap(SimpleNamespace(name="put_", writes="indexed"), (input, source), {})
    if not input.is_contiguous():       # no flat view to write through: write the result
        from .composite_missing import write_result
        return write_result("put_", input, put(input, index, source, accumulate))
    flat = S.view(input, (-1,))
    index_put_(flat, (S.reshape(index, (-1,)),), S.reshape(source, (-1,)), accumulate)
    return input


def put(input, index, source, accumulate=False):
    """A copy of `input` with `source` put at the flat `index` (see `put_`)."""
    from .index_writes import index_put
    _put_check("put", input, index, source)
    flat = index_put(S.reshape(input, (-1,)), (S.reshape(index, (-1,)),),
                     S.reshape(source, (-1,)), accumulate)
    return S.reshape(flat, tuple(input.shape))


# ---- masked_scatter ----
def _masked_values(op, shape, mask, source):
    _tensor(op, "mask", mask)
    _tensor(op, "source", source)
    if mask.dtype is not D.bool_:
        raise _fail(op, f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                    f"{D.scalar_type_name(mask.dtype)}")
    m = S.expand(mask, shape)
    n = int(R.sum(m))
    if n > source.numel():
        raise _fail(op, "Number of elements of source < number of ones in mask")
    return m, S.reshape(source, (-1,))[:n]


def masked_scatter_(input, mask, source):
    """Copy `source`'s first elements, in order, into `input` where the bool `mask`
    (broadcast to input) is True. Returns `input`."""
    if source.dtype is not input.dtype:
        raise _fail("masked_scatter_", "masked_scatter: expected self and source to have same "
                    f"dtypes but got {D.scalar_type_name(input.dtype)} and "
                    f"{D.scalar_type_name(source.dtype)}")
    m, vals = _masked_values("masked_scatter_", tuple(input.shape), mask, source)
    input[m] = vals
    return input


def masked_scatter(input, mask, source):
    """A copy of `input` (broadcast with `mask`) with `source`'s first elements written where
    `mask` is True."""
    _tensor("masked_scatter", "mask", mask)
    x, _ = S.broadcast_tensors(input, mask)
    return masked_scatter_(S.clone(x), mask, source)


# ---- index_reduce ----
_REDUCES = ("prod", "mean", "amax", "amin")


def _index_reduce_args(op, input, dim, index, source, reduce):
    from .index_add import _spread
    if reduce not in _REDUCES:
        raise _fail(op, "index_reduce(): Expected reduce to be one of prod, mean, amax or "
                    f"amin but got {reduce}.")
    return _spread(op, input, dim, index, source, 1)


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """A copy of `input` with `source`'s slices along `dim` reduced into the positions
    `index` names ("prod", "mean", "amax", "amin"; `include_self=False` leaves input's own
    value out where something is reduced)."""
    from .scatter_reduce import scatter_reduce
    d, spread, src = _index_reduce_args("index_reduce", input, dim, index, source, reduce)
    if input.ndim == 0:
        return S.reshape(scatter_reduce(S.reshape(input, (1,)), 0, spread, src, reduce,
                                        include_self=include_self), ())
    return scatter_reduce(input, d, spread, src, reduce, include_self=include_self)


def index_reduce_(input, dim, index, source, reduce, *, include_self=True):
    """`index_reduce` in place; returns `input`."""
    from .scatter_reduce import scatter_reduce_
    d, spread, src = _index_reduce_args("index_reduce_", input, dim, index, source, reduce)
    if input.ndim == 0:
        scatter_reduce_(S.reshape(input, (1,)), 0, spread, src, reduce,
                        include_self=include_self)
        return input
    return scatter_reduce_(input, d, spread, src, reduce, include_self=include_self)


# ---- renorm ----
def renorm(input, p, dim, maxnorm):
    """Each slice along `dim` whose `p`-norm exceeds `maxnorm` scaled down to norm `maxnorm`
    (PyTorch's: times maxnorm / (norm + 1e-7)).

    >>> renorm(tensor([[3., 4.], [0.3, 0.4]]), 2, 0, 1.0)
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    """
    if input.ndim <= 1:
        raise _fail("renorm", "renorm: input needs at least 2 dimensions, got "
                    f"{input.ndim} dimensions")
    if not input.dtype.is_floating_point:
        raise _fail("renorm", f'"renorm_out" not implemented for '
                    f"'{D.scalar_type_name(input.dtype)}'")
    if p <= 0:
        raise _fail("renorm", "renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise _fail("renorm", f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = _wrap_dim(dim, input.ndim, "renorm")
    others = tuple(k for k in range(input.ndim) if k != d)
    norm = R.norm(input, p, others, keepdim=True)
    factor = E.where(E.gt(norm, maxnorm), E.div(maxnorm, E.add(norm, 1e-7)), 1.0)
    return E.mul(input, factor.to(input.dtype))


def renorm_(input, p, dim, maxnorm):
    """`renorm` in place."""
    from .elementwise_more import in_place
    return in_place("renorm_", input, renorm, p, dim, maxnorm)
