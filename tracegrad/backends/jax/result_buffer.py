"""A plain program's small user results returned in one XLA buffer (Note [One result buffer]).

Note [One result buffer]
A plain program (Note [Plain calls] in program.py) hands its first `writable` results to
the user as fresh numpy arrays: a compiled loss and its speculated gradients (Note
[Speculative backward]), a backward program's gradients. Each result costs twice: XLA
allocates and returns one buffer per result (measured on 2 cores: the 200-op chain's fused
forward+backward program, three results, 10.5 us; the same program writing one buffer, 8.6
us), and each jax Array costs `np.array` about 1.9 us to become a numpy array, through
`__array__`'s Python (`_value`, sharding questions, a read-only view, then the copy).

So when those results are at least two, all present, of one dtype and small together
(at most MAX_BYTES), the jitted function writes them into one flat buffer with
`lax.dynamic_update_slice` (`pack`), and the call turns that one jax Array into a numpy
view and copies each result out of it (`unpacker`): fresh, owning, writable, C-contiguous
arrays of the results' shapes, as `np.array` of each gave (so a gradient can still be
adopted as `.grad`, and no two results share memory). The values are the same bits: the
buffer holds each result's elements in row-major order, and the copy reads them back.

`jnp.concatenate` of the results was tried first and dropped: XLA's CPU compiler fuses a
concatenation with its producers into one loop that recomputes the whole chain per element
(the chain's program took 110 us instead of 10), while each `dynamic_update_slice` is done
in place on the buffer after its producer's own fusion (63 fusions, as without it).
"""
import jax.numpy as jnp
import numpy as np
from jax import lax

MAX_BYTES = 1024     # larger results are copied one by one (no gain past a few copies)


class Layout:
    """Where each result lives in the buffer: `parts` of (start, stop, shape), `dtype`."""
    __slots__ = ("dtype", "size", "parts")

    def __init__(self, dtype, parts):
        self.dtype = dtype
        self.parts = parts
        self.size = parts[-1][1] if parts else 0


def layout(values):
    """The Layout of IR `values` in one buffer, or None when they are not worth packing or
    cannot be packed (see the Note)."""
    if len(values) < 2 or any(v is None for v in values):
        return None
    dtypes = {np.dtype(v.type.dtype.np) for v in values}
    if len(dtypes) != 1:
        return None
    dt = dtypes.pop()
    if dt.kind not in "biuf" or sum(v.type.nbytes for v in values) > MAX_BYTES:
        return None
    parts, at = [], 0
    for v in values:
        n = int(np.prod(v.type.shape, dtype=np.int64))
        parts.append((at, at + n, tuple(v.type.shape)))
        at += n
    return Layout(dt, parts)


def pack(outs, lay):
    """(Inside the jitted function) the traced `outs` written into one flat buffer."""
    buf = jnp.zeros((lay.size,), lay.dtype)
    for o, (a, b, _) in zip(outs, lay.parts):
        if b > a:
            buf = lax.dynamic_update_slice(buf, jnp.reshape(o, (b - a,)).astype(lay.dtype),
                                           (a,))
    return buf


def unpacker(lay):
    """`unpack(buf) -> [numpy array per result]` for a buffer laid out by `lay`: each a
    fresh array owning its memory (see the Note)."""
    plan = []                # (index, shape): 0-d an int, 1-d a slice, else slice and shape
    for a, b, shape in lay.parts:
        if len(shape) == 0:
            plan.append((a, None))
        elif len(shape) == 1:
            plan.append((slice(a, b), None))
        else:
            plan.append((slice(a, b), shape))
    asarray, array = np.asarray, np.array

    def unpack(buf):
        h = asarray(buf)                         # (a read-only view of XLA's buffer)
        # `np.array` of a numpy scalar (0-d) or of a slice: a fresh owning copy
        return [array(h[i]) if shape is None else h[i].reshape(shape).copy()
                for i, shape in plan]
    return unpack
