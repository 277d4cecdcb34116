"""Large XLA results handed over as numpy arrays without a copy (Note [Adopted results]).

Note [Adopted results]
On the CPU platform an XLA result is host memory that lives as long as its jax Array. A
program's large results need to become numpy arrays: gradients users receive as `.grad`,
and the new values of mutated inputs (a training step's parameters and optimizer state),
which the runner copies into the input's array. Copying costs memory bandwidth: measured on
the 784-512-512-10 step with SGD momentum, about 0.8 ms of a 5 ms step for 2.7 MB of
gradients and 5.4 MB of updates. JAX only hands out read-only views (`np.asarray`), since
its arrays are immutable. But a result only this program holds is nobody else's: `adopt`
wraps its memory in a writable numpy array whose base (`_Held`) keeps the jax Array alive,
so the memory is freed when the last numpy view goes. Nothing else ever sees the buffer: the
jax Array is referenced only by that base.

A result can be an input passed through: jax forwards an argument that a program returns
unchanged (a numpy argument read in place, or the saved value a backward program got), so a
result whose memory is an argument's, or another result's, is copied instead. Small results
are copied too (building the view costs more than copying a few kilobytes). Sharded results
(data parallelism) are copied by `np.array`, as before.

A mutated input's array is replaced by the adopted result instead of being copied into
(`rebind`) when that cannot be observed, under the conditions of Note [Aligned host arrays]
(nothing but the tensor refers to the array): the values and version counter are those the
copy would have given; `data_ptr()` changes, as after `p.data = ...`. XLA's results are
64-byte aligned, so the next call reads the new array in place.
"""
import sys

import numpy as np

from ..._tensor_storage import OWNER_BASES

MIN_BYTES = 1 << 16          # smaller results are copied (as aligned.MIN_BYTES)


class _Held:
    """The base of an adopted array: exposes the result's memory and keeps it alive."""
    __slots__ = ("__array_interface__", "result")


def adopt(r):
    """A writable numpy array over jax Array `r`'s memory (r must be ready and unshared)."""
    h = _Held()
    h.result = r
    h.__array_interface__ = {"shape": r.shape, "typestr": r.dtype.str,
                             "data": (r.unsafe_buffer_pointer(), False), "version": 3}
    return np.asarray(h)


def big(r):
    """Whether `r` is a result worth adopting (a jax Array of at least MIN_BYTES, of a
    numpy dtype)."""
    return (r is not None and not isinstance(r, np.ndarray) and r.nbytes >= MIN_BYTES
            and r.dtype.kind in "biufc")


def taken(arrays):
    """Data addresses of the program's arguments: a result there is not its own."""
    out = set()
    for a in arrays:
        if isinstance(a, np.ndarray):
            out.add(a.__array_interface__["data"][0])
        elif a is not None and getattr(a, "nbytes", 0) >= MIN_BYTES:
            out.add(a.unsafe_buffer_pointer())
    return out


def static_big(v):
    """`big` decided from a program output's IR type (static: shapes are known when the
    program is built), without asking the jax Array (its `nbytes` costs microseconds)."""
    return (v is not None and v.type.nbytes >= MIN_BYTES
            and np.dtype(v.type.dtype.np).kind in "biufc")


def to_host(outs, args, bigs=None, at=None):
    """Fresh writable numpy arrays for `outs` (None stays None): large results adopted,
    the rest copied. `bigs`: `big` of each output, known beforehand (`static_big`). `at`:
    the positions of the only `args` a result can be (None: any)."""
    seen = None
    res = []
    for k, o in enumerate(outs):
        if o is None:
            res.append(None)
        elif type(o) is np.ndarray:              # (spread from one buffer: fresh already)
            res.append(o)
        elif big(o) if bigs is None else bigs[k]:
            if seen is None:
                seen = taken(args if at is None else [args[i] for i in at])
            o.block_until_ready()
            p = o.unsafe_buffer_pointer()
            if p in seen:
                res.append(np.array(o))
            else:
                seen.add(p)
                res.append(adopt(o))
        else:
            res.append(np.array(o))
    return res


def replaceable(t):
    """Whether tensor `t`'s array may be replaced unobservably (see the Note): a root array,
    C-contiguous and writeable, that nothing but `t` refers to. Asked before the call: jax
    keeps a reference to each numpy argument until the next garbage collection."""
    d = t._data
    return (type(d) is np.ndarray and type(d.base) in OWNER_BASES and d.flags.c_contiguous
            and d.flags.writeable and sys.getrefcount(d) == 3)  # t's slot, `d`, the argument


OWNER_BASES.add(_Held)       # (an adopted array owns its memory, as aligned.py's do)
