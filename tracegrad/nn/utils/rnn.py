"""`tracegrad.nn.utils.rnn`: padding, unpadding and packing of variable-length sequences.

`pad_sequence` stacks sequences into one padded tensor (a composite of `F.pad` and `stack`,
so it differentiates and traces), `unpad_sequence` is its inverse; the packed sequences
(`PackedSequence`, `pack_padded_sequence`, `pad_packed_sequence`, `pack_sequence`,
`unpack_sequence`) live in `_packed.py`.
"""
from ... import ops as O
from ..._errors import TracegradRuntimeError, TracegradValueError, op_error
from ..._tensor import Tensor
from ._packed import (PackedSequence, PackedSequence_, invert_permutation,  # noqa: F401
                      pack_padded_sequence, pack_sequence, pad_packed_sequence,
                      unpack_sequence)

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Sequences of shape (L_i, *) padded to the longest and stacked.

    The result is (B, L, *) when `batch_first`, else (L, B, *); the padding goes on
    `padding_side` ('right' or 'left').

    >>> pad_sequence([ones(2), ones(3)], batch_first=True).tolist()
    [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    """
    from ..functional import pad
    if padding_side not in ("left", "right"):
        raise TracegradValueError("Expected padding_side to be one of left or right, but got "
                                  f"{padding_side}.")
    sequences = list(sequences)
    if not sequences:
        raise op_error(TracegradRuntimeError, "pad_sequence", "received an empty list of "
                       "sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = longest - s.shape[0]
        amounts = [0, 0] * (s.ndim - 1) + ([extra, 0] if padding_side == "left" else [0, extra])
        padded.append(pad(s, amounts, value=padding_value) if extra else s)
    out = O.stack(padded, 0)
    return out if batch_first else O.transpose(out, 0, 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of the unpadded sequences of a padded batch (the inverse of `pad_sequence`).

    Sequence i is `padded_sequences[:lengths[i], i]` (`[i, :lengths[i]]` when
    `batch_first`). Unlike PyTorch, which transposes
    `padded_sequences` in place when `batch_first` is False, the argument is left as it is.

    >>> [s.tolist() for s in unpad_sequence(tensor([[1, 2], [3, 0]]), tensor([2, 1]), True)]
    [[1, 2], [3]]
    """
    if not batch_first:
        padded_sequences = O.transpose(padded_sequences, 0, 1)
    lens = lengths.tolist() if isinstance(lengths, Tensor) else list(lengths)
    return [seq[:int(n)] for seq, n in zip(padded_sequences.unbind(0), lens, strict=True)]
