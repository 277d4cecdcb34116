"""`default_collate` (a list of samples -> one batch) and `default_convert` (one sample,
numpy -> tensors), following PyTorch's rules:

  tensors -> stacked along a new dim 0     numpy arrays -> stacked tensors
  floats -> float64 tensor                 ints -> int64 tensor; bools -> bool tensor
  numpy scalars -> tensor of their dtype   strings/bytes -> left as they are
  dicts -> dict of collated values         namedtuples -> namedtuple of collated fields
  tuples/lists -> list of collated columns (every sample of equal length)
"""
import collections.abc as abc
import numbers

import numpy as np

from ... import _dtype as D
from ..._errors import TracegradRuntimeError, TracegradTypeError
from ..._tensor import Tensor
from ...ops.creation import as_tensor, tensor
from ...ops.shape import stack

_ERR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        "found {}")


def _check_numeric(arr):
    if arr.dtype.kind in "OSUV":
        raise TracegradTypeError(_ERR.format(arr.dtype))


def default_collate(batch):
    """Merge a list of samples into a batch (see the module docstring for the rules)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        _check_numeric(elem)
        return stack([as_tensor(b) for b in batch], 0)
    if isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_)):
        _check_numeric(np.asarray(elem))
        return as_tensor(np.array(batch))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, bool) or isinstance(elem, numbers.Integral):
        return tensor(list(batch))
    if isinstance(elem, numbers.Real):
        return tensor(list(batch), dtype=D.float64)
    if isinstance(elem, abc.Mapping):
        return _same_type(elem, {k: default_collate([d[k] for d in batch]) for k in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise TracegradRuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(s) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TracegradTypeError(_ERR.format(type(elem)))


def _same_type(elem, d):
    try:
        return type(elem)(d)
    except TypeError:                        # a Mapping whose constructor takes other args
        return d


def default_convert(data):
    """Turn numpy arrays (and numpy numbers) in one sample into tensors; the rest as is.
    Used when automatic batching is off (`batch_size=None`)."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return data if data.dtype.kind in "OSUV" else as_tensor(data)
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return as_tensor(data)
    if isinstance(data, abc.Mapping):
        return _same_type(data, {k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
