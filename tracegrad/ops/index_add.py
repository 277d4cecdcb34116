"""`index_add` / `index_add_`: `source`'s slices along `dim` added into `input` at the
positions a 1-D `index` names (repeats accumulate), scaled by `alpha`; the message-passing
aggregation of graph networks (`agg.index_add_(0, dst, messages)`).

A composite of `scatter_add`: the 1-D index is spread over `source`'s shape, so the
gradients, tracing and the JAX lowering are scatter_add's (Note [Along a dim] in
gather_scatter.py). PyTorch's checks and messages come first, in PyTorch's order."""
from .. import _dtype as D
from .._errors import TracegradIndexError, TracegradRuntimeError, TracegradTypeError, op_error
from .._tensor import Tensor, _wrap_dim
from .gather_scatter import scatter_add, scatter_add_
from .shape import expand, reshape


def _spread(op, input, dim, index, source, alpha):
    """(wrapped dim, index spread to source's shape, source scaled by alpha)."""
    for name, t in (("index", index), ("source", source)):
        if not isinstance(t, Tensor):
            raise op_error(TracegradTypeError, op, f"{op}(): argument '{name}' must be Tensor, "
                           f"not {type(t).__name__}")
    d = _wrap_dim(dim, input.ndim, op)
    if index.ndim > 1:
        raise op_error(TracegradIndexError, op, f"{op}(): Index is supposed to be a vector, "
                       f"but got dim: {index.ndim} with type: "
                       f"{D.scalar_type_name(index.dtype)} and size: {list(index.shape)}")
    if index.dtype not in (D.int64, D.int32):
        raise op_error(TracegradRuntimeError, op, f"{op}(): Expected dtype int32/int64 for "
                       f"index but got: {D.scalar_type_name(index.dtype)}")
    if source.dtype is not input.dtype:
        raise op_error(TracegradRuntimeError, op, f"{op}(): self "
                       f"({D.scalar_type_name(input.dtype)}) and source "
                       f"({D.scalar_type_name(source.dtype)}) must have the same scalar type")
    n = index.shape[0] if index.ndim else 1
    src_n = source.shape[d] if source.ndim else 1
    if source.ndim and n != src_n:
        raise op_error(TracegradRuntimeError, op, f"{op}(): Number of indices ({n}) should be "
                       f"equal to source.size(dim): ({src_n}), for dim: {d}")
    in_shape, src_shape = list(input.shape or (1,)), list(source.shape or (1,))
    if source.ndim != input.ndim or any(a != b for k, (a, b) in
                                        enumerate(zip(in_shape, src_shape)) if k != d):
        raise op_error(TracegradRuntimeError, op, "source tensor shape must match self tensor "
                       "shape, excluding the specified dimension. Got self.shape = "
                       f"{list(input.shape)} source.shape = {list(source.shape)}")
    view = [1] * len(src_shape)
    view[d] = n
    spread = expand(reshape(index, tuple(view)), tuple(src_shape))
    src = reshape(source, tuple(src_shape))
    if alpha != 1:
        src = src * alpha
    return d, spread, src


def index_add(input, dim, index, source, *, alpha=1):
    """A copy of `input` with `alpha * source` added at `index` along `dim`:
    `out[index[i]] += alpha * source[i]` for dim 0."""
    d, spread, src = _spread("index_add", input, dim, index, source, alpha)
    if input.ndim == 0:
        return reshape(scatter_add(reshape(input, (1,)), 0, spread, src), ())
    return scatter_add(input, d, spread, src)


def index_add_(input, dim, index, source, *, alpha=1):
    """In-place `index_add`: returns `input`."""
    d, spread, src = _spread("index_add_", input, dim, index, source, alpha)
    if input.ndim == 0:
        scatter_add_(reshape(input, (1,)), 0, spread, src)
        return input
    return scatter_add_(input, d, spread, src)
