"""`index_put_`, `index_fill_`, `index_copy_` and their out-of-place forms: writes at index
tensors, as compositions of item assignment (`x[key] = v`, ops/shape.py `setitem`), so their
gradients, tracing, functionalization and JAX lowering are those of `x[idx] = v`.

`index_put_(indices, values, accumulate=True)` adds instead of assigning, repeated indices
adding up (PyTorch's rule; `x[idx] += v` keeps one of the repeats): the values are placed by
`index_backward` (numpy's `add.at`, the gradient of indexing) into zeros and added to `x`.

>>> x = tg.zeros(3); x.index_put_((tg.tensor([0, 0, 2]),), tg.tensor(1.0), accumulate=True)
tensor([2., 0., 1.])
"""
from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import TracegradIndexError, TracegradRuntimeError, TracegradTypeError, op_error
from .._tensor import Tensor, _wrap_dim
from .shape import INDEX, INDEX_BACKWARD, _normalize_key, clone, expand, setitem


def index_put_(input, indices, values, accumulate=False):
    """`input[indices] = values` in place (`+=` with repeats adding up if `accumulate`)."""
    if not isinstance(indices, (tuple, list)):
        raise op_error(TracegradTypeError, "index_put_", "index_put_(): argument 'indices' "
                       f"must be tuple of Tensors, not {type(indices).__name__}")
    if not isinstance(values, Tensor):
        raise op_error(TracegradTypeError, "index_put_", "index_put_(): argument 'values' "
                       f"must be Tensor, not {type(values).__name__}")
    if values.dtype is not input.dtype:
        raise op_error(TracegradRuntimeError, "index_put_", "Index put requires the source and "
                       "destination dtypes match, got "
                       f"{D.scalar_type_name(input.dtype)} for the destination and "
                       f"{D.scalar_type_name(values.dtype)} for the source.")
    key = tuple(slice(None) if i is None else i for i in indices)
    if not accumulate:
        setitem(input, key, values)
        return input
    k, tensors, _ = _normalize_key(input, key)
    shape = dispatch(INDEX, (input,) + tuple(tensors), {"key": k}).shape
    v = values
    if tuple(v.shape) != tuple(shape):
        v = expand(v, tuple(shape))
    added = dispatch(INDEX_BACKWARD, (v,) + tuple(tensors),
                     {"shape": tuple(input.shape), "key": k})
    return input.add_(added)


def index_put(input, indices, values, accumulate=False):
    """A copy of `input` with `index_put_` applied."""
    return index_put_(clone(input), indices, values, accumulate)


def _along(op, input, dim, index):
    """The key selecting `index` (1-D or 0-dim int64) along `dim`."""
    if not isinstance(index, Tensor):
        raise op_error(TracegradTypeError, op, f"{op}(): argument 'index' must be Tensor, not "
                       f"{type(index).__name__}")
    if index.dtype is not D.int64:
        raise op_error(TracegradRuntimeError, op, f"{op}(): Expected a long tensor for index, "
                       f"but got {D.scalar_type_name(index.dtype)}")
    if index.ndim > 1:
        raise op_error(TracegradIndexError, op, f"{op}(): Index is supposed to be a vector")
    d = _wrap_dim(dim, input.ndim, op)
    return (slice(None),) * d + (index.reshape(-1),)


def index_fill_(input, dim, index, value):
    """Fill the slices at `index` along `dim` with `value` (a number or 0-dim tensor)."""
    if isinstance(value, Tensor) and value.ndim:
        raise op_error(TracegradRuntimeError, "index_fill_", "index_fill_ only supports a "
                       f"0-dimensional value tensor, but got tensor with {value.ndim} "
                       "dimension(s).")
    setitem(input, _along("index_fill_", input, dim, index), value)
    return input


def index_fill(input, dim, index, value):
    return index_fill_(clone(input), dim, index, value)


def index_copy_(input, dim, index, source):
    """Copy `source`'s slices along `dim` into `input` at `index`."""
    if not isinstance(source, Tensor):
        raise op_error(TracegradTypeError, "index_copy_", "index_copy_(): argument 'source' "
                       f"must be Tensor, not {type(source).__name__}")
    if source.dtype is not input.dtype:
        raise op_error(TracegradRuntimeError, "index_copy_", "index_copy_(): self and source "
                       "expected to have the same dtype, but got (self) "
                       f"{D.scalar_type_name(input.dtype)} and (source) "
                       f"{D.scalar_type_name(source.dtype)}")
    key = _along("index_copy_", input, dim, index)
    n = index.numel()
    d = len(key) - 1
    want = tuple(input.shape[:d]) + (n,) + tuple(input.shape[d + 1:])
    if source.ndim and tuple(source.shape) != want:
        raise op_error(TracegradRuntimeError, "index_copy_", "index_copy_(): Source/destination "
                       f"tensor must have same slice shapes. Destination slice shape: "
                       f"{list(want)} and source slice shape: {list(source.shape)}")
    setitem(input, key, source)
    return input


def index_copy(input, dim, index, source):
    return index_copy_(clone(input), dim, index, source)
