"""Packed sequences: `PackedSequence`, `pack_padded_sequence`, `pad_packed_sequence`,
`pack_sequence`, `unpack_sequence` and `invert_permutation`, as in `torch.nn.utils.rnn`.

Note [Packed layout]
A batch of B sequences sorted by decreasing length is stored time step by time step:
`data` holds, for t = 0, 1, ..., the rows of the `batch_sizes[t]` sequences still running
at step t (so `data.shape[0] == sum(lengths)`). `sorted_indices[j]` is the original batch
position of sorted sequence j (None when the input was already sorted, `enforce_sorted`);
`unsorted_indices` is its inverse. `batch_sizes` is an int64 tensor, as PyTorch's (always on
the CPU).

Packing and unpacking are each one `index_select` of rows with an index computed from the
lengths, so gradients flow to the padded input (zero at padding positions) and to the
packed data. The lengths themselves are read as Python ints (`tolist()`): under
`tracegrad.compile` that read is a guard, so a call with other lengths -- a different list,
or the same lengths tensor holding other values -- re-traces its own path instead of
reusing the shapes of the first call.
"""
from typing import NamedTuple, Optional

import numpy as np

from ... import _dtype as D
from ..._errors import TracegradRuntimeError, TracegradValueError, op_error
from ..._tensor import Tensor
from ...ops import creation as C
from ...ops import shape as S
from ...ops.gather_scatter import index_select
from ...ops.sort import argsort

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
           "unpack_sequence", "invert_permutation"]

_NOT_SORTED = ("`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
               "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
               "pack_sequence to sidestep this requirement if you do not need ONNX "
               "exportability.")


class PackedSequence_(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Optional[Tensor]
    unsorted_indices: Optional[Tensor]


class PackedSequence(PackedSequence_):
    """The packed form of a batch of variable-length sequences (a named tuple).

    See Note [Packed layout]. Made by `pack_padded_sequence` / `pack_sequence`; recurrent
    modules take and return it.

    >>> p = pack_sequence([tensor([1, 2, 3]), tensor([4, 5]), tensor([6])])
    >>> p.data.tolist(), p.batch_sizes.tolist()
    ([1, 4, 6, 2, 5, 3], [3, 2, 1])
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:                  # PackedSequence((data, batch_sizes))
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """`data.to(...)`; the same object when nothing changes (the indices stay as they
        are: every tensor lives on the CPU)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def cpu(self, *args, **kwargs):
        return self.to(*args, **kwargs)

    def cuda(self, *args, **kwargs):
        return self.to("cuda", *args, **kwargs)

    def pin_memory(self):
        return self

    def double(self):
        return self.to(dtype=D.float64)

    def float(self):
        return self.to(dtype=D.float32)

    def half(self):
        return self.to(dtype=D.float16)

    def long(self):
        return self.to(dtype=D.int64)

    def int(self):
        return self.to(dtype=D.int32)

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def invert_permutation(permutation):
    """The inverse of a 1-D permutation tensor (None stays None)."""
    if permutation is None:
        return None
    return argsort(permutation)


def _lengths_list(lengths):
    """Python ints from a list, tuple, numpy array or tensor of lengths (converted to int64
    like PyTorch: floats truncate). A tensor's values are read once, a guard when traced."""
    if isinstance(lengths, Tensor):
        if lengths.ndim != 1:
            raise op_error(TracegradRuntimeError, "pack_padded_sequence",
                           "'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f"{lengths.ndim}D cpu {_type_name(lengths.dtype)} tensor")
        return [int(v) for v in S.to_dtype(lengths, D.int64).tolist()]
    arr = np.asarray([int(v) for v in lengths] if isinstance(lengths, (list, tuple))
                     and all(isinstance(v, Tensor) for v in lengths) else lengths)
    if arr.ndim != 1:
        raise op_error(TracegradRuntimeError, "pack_padded_sequence",
                       "'lengths' argument should be a 1D CPU int64 tensor, but got "
                       f"{arr.ndim}D cpu Long tensor")
    return [int(v) for v in arr.astype(np.int64)]


def _type_name(dtype):
    return D.scalar_type_name(dtype)


def _index(values):
    return C.tensor(np.asarray(values, dtype=np.int64).reshape(-1))


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch of sequences with the given `lengths` into a `PackedSequence`.

    `input` is (T, B, *) -- (B, T, *) if `batch_first`; `lengths` a list or a 1-D int
    tensor (read as Python ints: a guard when traced). With `enforce_sorted` the lengths must be
    decreasing; otherwise the batch is sorted here and `sorted_indices` records how.

    >>> p = pack_padded_sequence(ones(3, 2, 1), [3, 1])
    >>> p.batch_sizes.tolist()
    [2, 1, 1]
    """
    lens = _lengths_list(lengths)
    order = None
    if not enforce_sorted:
        order = np.argsort(-np.asarray(lens, dtype=np.int64), kind="stable")
        lens = [lens[i] for i in order]
    b_dim = 0 if batch_first else 1
    if input.ndim < 2 or input.numel() == 0:
        raise op_error(TracegradRuntimeError, "pack_padded_sequence",
                       "Cannot pack empty tensors.")
    steps, batch = input.shape[1 - b_dim], input.shape[b_dim]
    if len(lens) != batch:
        raise op_error(TracegradRuntimeError, "pack_padded_sequence",
                       f"Expected `len(lengths)` to be equal to batch_size, but got "
                       f"{len(lens)} (batch_size={batch})")
    if lens[-1] <= 0:
        raise op_error(TracegradRuntimeError, "pack_padded_sequence",
                       "Length of all samples has to be greater than 0, but found an element "
                       "in 'lengths' that is <= 0")
    if any(a < b for a, b in zip(lens, lens[1:])):
        raise op_error(TracegradRuntimeError, "pack_padded_sequence", _NOT_SORTED)
    if lens[0] > steps:                  # PyTorch reads past the end here; refuse instead
        raise op_error(TracegradRuntimeError, "pack_padded_sequence",
                       f"a sequence length ({lens[0]}) exceeds the padded length of the input "
                       f"({steps})")
    src = np.arange(batch) if order is None else order
    sizes = (np.asarray(lens)[None, :] > np.arange(lens[0])[:, None]).sum(1)
    rows = [src[:n] + t * batch if not batch_first else src[:n] * steps + t
            for t, n in enumerate(sizes)]
    flat = S.reshape(input, (steps * batch,) + tuple(input.shape[2:]))
    data = index_select(flat, 0, _index(np.concatenate(rows)))
    sorted_indices = None if order is None else _index(order)
    return PackedSequence(data, _index(sizes), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of `pack_padded_sequence`: `(padded, lengths)` in the original order.

    The batch is padded with `padding_value` to the longest length (or `total_length`);
    `lengths` is an int64 tensor."""
    sizes = [int(b) for b in sequence.batch_sizes.tolist()]
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise op_error(TracegradValueError, "pad_packed_sequence",
                           "Expected total_length to be at least the length of the longest "
                           f"sequence in input, but got total_length={total_length} and max "
                           f"sequence length being {steps}")
        steps = total_length
    data = sequence.data
    batch, count = sizes[0], data.shape[0]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    lens = (np.asarray(sizes)[None, :] > np.arange(batch)[:, None]).sum(1)   # sorted order
    cols = np.arange(batch)
    if sequence.unsorted_indices is not None:
        cols = np.asarray(sequence.unsorted_indices.tolist(), dtype=np.int64)
    t = np.arange(steps)[:, None]                                            # (T, 1)
    inside = t < lens[cols][None, :]                                          # (T, B)
    src = np.where(inside, offsets[np.minimum(t, len(sizes) - 1)] + cols[None, :], count)
    if batch_first:
        src = src.T
    pad = C.full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype)
    rows = index_select(S.cat([data, pad], 0), 0, _index(src))
    padded = S.reshape(rows, src.shape + tuple(data.shape[1:]))
    return padded, _index(lens[cols])


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of (L_i, *) tensors (`pad_sequence` then `pack_padded_sequence`)."""
    from .rnn import pad_sequence
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of variable-length tensors a `PackedSequence` holds, in original order."""
    from .rnn import unpad_sequence
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
