"""`F.pad` modes other than 'constant': 'reflect', 'replicate', 'circular', as one
`index_select` per padded dimension with indices computed in numpy (so the gradient is
index_select's: contributions of repeated source positions add up, as in PyTorch).

Index maps for a dimension of size n padded by (l, r), i in [-l, n + r):
    reflect:   -i for i < 0, 2(n - 1) - i for i >= n     (requires l, r < n)
    replicate: clip(i, 0, n - 1)
    circular:  i mod n                                    (requires l, r <= n)
(circular wraps the part a negative pad leaves, as PyTorch does: crop, then wrap).
Like PyTorch, these modes pad the last `len(pad) // 2` dims of a batched or unbatched
input: 1 dim of a 2-D/3-D input, 2 of a 3-D/4-D, 3 of a 4-D/5-D. Negative pads crop.
"""
import numpy as np

from .. import ops as O
from .._errors import TracegradNotImplementedError, TracegradRuntimeError, op_error

MODES = ("reflect", "replicate", "circular")


def source_index(n, lo, hi, mode):
    """The source position of each output position of one padded dimension."""
    i = np.arange(-lo, n + hi)
    if mode == "reflect":
        i = np.abs(i)
        i = np.where(i >= n, 2 * (n - 1) - i, i)
    elif mode == "replicate":
        i = np.clip(i, 0, n - 1)
    else:                        # wraps around what is left after cropping negative pads
        start = max(-lo, 0)
        kept = n - start - max(-hi, 0)
        i = start + np.mod(np.arange(-max(lo, 0), kept + max(hi, 0)), kept)
    return i.astype(np.int64)


def pad_mode(input, pad, mode):
    """`F.pad(input, pad, mode)` for mode in MODES."""
    k = len(pad) // 2
    if len(pad) % 2 or k > 3 or input.ndim not in (k + 1, k + 2):
        raise op_error(TracegradNotImplementedError, "pad",
                       f"Padding size {len(pad)} is not supported for {input.ndim}D input "
                       "tensor.\nSupported combinations for non-constant padding:\n"
                       "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                       "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                       "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    out = input
    for j in range(k):
        d = input.ndim - 1 - j
        lo, hi, n = int(pad[2 * j]), int(pad[2 * j + 1]), input.shape[d]
        if mode == "reflect" and (lo >= n or hi >= n) or \
                mode == "circular" and (lo > n or hi > n):
            raise op_error(TracegradRuntimeError, "pad", "Argument #4: Padding size should be "
                           "less than the corresponding input dimension, but got: padding "
                           f"({lo}, {hi}) at dimension {d} of input {list(input.shape)}")
        if mode == "replicate" and n == 0:
            raise op_error(TracegradRuntimeError, "pad", "padding of an empty dimension")
        if lo or hi:
            out = O.index_select(out, d, O.tensor(source_index(n, lo, hi, mode)))
    return out
