"""`tracegrad.nn.utils.rnn`: `pad_sequence`, stacking variable-length sequences into one
padded tensor (a composite of `F.pad` and `stack`, so it differentiates and traces).
Packed sequences (`pack_padded_sequence`, `PackedSequence`) are not supported yet.
"""
from ... import ops as O
from ..._errors import TracegradRuntimeError, TracegradValueError, op_error

__all__ = ["pad_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Sequences of shape (L_i, *) padded to the longest and stacked: (B, L, *) when
    `batch_first`, else (L, B, *); the padding goes on `padding_side` ('right' or 'left').

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
