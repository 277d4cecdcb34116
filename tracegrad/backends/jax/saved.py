"""Packing small saved values between a path's forward and backward XLA programs.

Note [Packed saved values]
Every array crossing the boundary of an XLA executable costs a few microseconds on the
host, whatever its size. A backward program reading 100 small saved values (a chain of
elementwise ops on tiny tensors) would spend far more on crossing than on arithmetic. So the
forward program concatenates the small saved values of one dtype into one flat buffer
inside XLA, and returns that one buffer in each of their output slots (the same object, so
the compiler's saved-value list keeps its layout); the backward program takes the buffer
once and slices each value out again, inside XLA. Large values (where a copy would cost more
than crossing) go as they are. `host_saved` unpacks on the host for the rare reader that
needs each value as a numpy array (double backward's eager replay).
"""
import numpy as np

SMALL = 4096             # elements: a saved value up to this size is packed


class Packing:
    """Which forward outputs / backward inputs travel packed, one group per dtype.

    `groups`: [(dtype, [(forward output index, backward input index, shape, offset, size)])]
    """

    def __init__(self, groups):
        self.groups = groups
        self.fwd_packed = {f for _, m in groups for f, _, _, _, _ in m}
        self.bwd_packed = {b for _, m in groups for _, b, _, _, _ in m}

    def host_saved(self, n_ct, saved_arrays):
        """The saved list with each packed slot replaced by its numpy value."""
        out = list(saved_arrays)
        for _, members in self.groups:
            for _, b, shape, off, size in members:
                k = b - n_ct
                out[k] = np.asarray(out[k])[off:off + size].reshape(shape)
        return out


def plan_packing(part):
    """A Packing for a partitioned path (None when fewer than two small values per dtype)."""
    if part.backward is None:
        return None
    n_ct = len(part.cotangent_outputs)
    fwd_pos = part.n_user
    by_dtype = {}
    for k, v in enumerate(part.saved):
        if k in part.saved_from_input:
            continue
        f, fwd_pos = fwd_pos, fwd_pos + 1
        size = int(np.prod(v.type.shape, dtype=np.int64))
        if size <= SMALL:
            by_dtype.setdefault(v.type.dtype.np, []).append((f, n_ct + k, v.type.shape, size))
    groups = []
    for dt, members in by_dtype.items():
        if len(members) < 2:
            continue
        off, laid = 0, []
        for f, b, shape, size in members:
            laid.append((f, b, tuple(shape), off, size))
            off += size
        groups.append((dt, laid))
    return Packing(groups) if groups else None
