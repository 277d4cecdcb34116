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

Note [Small results in one buffer]
A program that is not plain (guards, runtime checks, large results adopted: a training step)
has many small results too: the loss, bias gradients, and the new values of small
parameters and optimizer state, which the runner copies into their tensors' arrays. Each
became a numpy array through its own jax Array conversion, and after a large program that
Python runs with cold caches: measured on 2 cores after the 784-512-512-10 step's program,
twenty small numpy operations that take 25 us in a loop took 85 to 150 us. So such a
program writes its small results of the most common dtype (`SmallResults.plan_for`: at
least two, each below the adoption size, adopt.MIN_BYTES, together at most SMALL_TOTAL
bytes) into one buffer as above, returning None in their places, and the call spreads the
buffer back (`spread`, one conversion): a user result as a fresh owning copy, as `np.array` gave; a
mutated input's new value as a read-only view, which the runner copies into the input's
array, as it copied the jax Array before. Saved values stay jax arrays (the backward
program reads them as they are). Measured in one process against the same step with one
result per array: 0 to 3% of the step's time (four runs), its JaxProgram call alone from
1.09x-1.11x to 1.05x of the hand-written `jax.jit` step.
"""
import jax.numpy as jnp
import numpy as np
from jax import lax

MAX_BYTES = 1024     # larger results are copied one by one (no gain past a few copies)
SMALL_TOTAL = 1 << 22    # Note [Small results in one buffer]


class Layout:
    """Where each result lives in the buffer: `parts` of (start, stop, shape), `dtype`."""
    __slots__ = ("dtype", "size", "parts")

    def __init__(self, dtype, parts):
        self.dtype = dtype
        self.parts = parts
        self.size = parts[-1][1] if parts else 0


def layout(values, max_bytes=MAX_BYTES):
    """The Layout of IR `values` in one buffer, or None when they are not worth packing or
    cannot be packed (see the Note)."""
    if len(values) < 2 or any(v is None for v in values):
        return None
    dtypes = {np.dtype(v.type.dtype.np) for v in values}
    if len(dtypes) != 1:
        return None
    dt = dtypes.pop()
    if dt.kind not in "biuf" or sum(v.type.nbytes for v in values) > max_bytes:
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


class SmallResults:
    """Note [Small results in one buffer]: `pack(outs)` inside the jitted function, `spread`
    on the host; `positions` are the packed results' indices, the first `writable` of the
    program's results being the user's."""
    __slots__ = ("positions", "lay", "plan")

    def __init__(self, positions, lay, writable):
        self.positions, self.lay = positions, lay
        self.plan = [(k, a, b, shape, k < writable)
                     for k, (a, b, shape) in zip(positions, lay.parts)]

    @classmethod
    def plan_for(cls, outputs, writable, mutated, max_each):
        """The plan for IR `outputs` (user results first, `mutated`: indices of mutated
        inputs' new values), or None when fewer than two small results share a dtype."""
        cand = [k for k in list(range(writable)) + sorted(mutated)
                if outputs[k] is not None and 0 < outputs[k].type.nbytes < max_each
                and np.dtype(outputs[k].type.dtype.np).kind in "biuf"]
        by = {}
        for k in cand:
            by.setdefault(np.dtype(outputs[k].type.dtype.np), []).append(k)
        if not by:
            return None
        ks = max(by.values(), key=len)
        lay = layout([outputs[k] for k in ks], SMALL_TOTAL)
        return None if lay is None else cls(ks, lay, writable)

    def pack(self, outs):
        """(Inside the jitted function) `outs` with the small results moved into one buffer
        appended at the end (None in their places)."""
        outs = list(outs)
        buf = pack([outs[k] for k in self.positions], self.lay)
        for k in self.positions:
            outs[k] = None
        return outs + [buf]

    def spread(self, outs):
        """(On the host) `outs` as the program computed them, the buffer spread back."""
        outs = list(outs)
        h = np.asarray(outs.pop())            # (a read-only view of XLA's buffer; waits)
        for k, a, b, shape, user in self.plan:
            v = h[a:b].reshape(shape)
            outs[k] = v.copy() if user else v
        return outs
