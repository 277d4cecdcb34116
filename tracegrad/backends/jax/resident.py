"""Keeping large inputs of a forward program on the device between calls.

Note [Resident inputs]
Tensors stay numpy arrays (`t._data`): eager code reads and writes them, so after every
compiled call the new value of a mutated input (a parameter, an optimizer buffer) is copied
back into its numpy array. What residency saves is the other direction: without it every call
uploads every input again (on CPU, numpy memory that is not 64-byte aligned is copied into a
fresh device buffer: about 0.75 ms per call for the 4.8 MB of parameters and momentum buffers
of a 784-512-512-10 MLP), and XLA allocates fresh buffers for the new values.

So a forward program remembers, per input position holding at least `MIN_BYTES`, a device
array equal to the input's numpy array: for a mutated input, the program's own output (the
new value it wrote back); for any other input, an upload made the second time the same array
arrives at that position (an argument that is a new batch each step is never uploaded twice).
On the next call the device array replaces the numpy array when all of these hold:
- the tensor holds the same numpy array object (a weak reference: `p.data = other`,
  `load_state_dict` replacing arrays, a new batch tensor all fail here);
- its version counter is the one expected (eager in-place writes to the tensor or to any of
  its views and `detach()` results bump it);
- and the bytes are still equal (`memcmp`, about 30 us per MB on CPU, a fifth of an upload).
  The version counter cannot see every write: `p.data` is a tensor with a counter of its own
  over the same array, and `numpy()` views write behind every counter. The comparison makes
  residency value-based: a device array is used only when it holds exactly the bytes eager
  would read now.
Mutated inputs are donated (`donate_argnums`), so XLA writes their new values into the buffers
of the old ones instead of allocating. A donated device array is deleted by the call, so its
entry is taken out before the call and replaced by the new output after it; a call that
raises (a failed guard) or falls back to numpy leaves no entry, and the next call uploads.
The price is memory: each resident input exists twice (its numpy array and its device copy),
as it already did during a call. Residency needs host-addressable device memory (the CPU
platform); elsewhere, and for data-parallel programs, inputs are passed as numpy arrays.
"""
import ctypes
import ctypes.util
import weakref

import numpy as np

MIN_BYTES = 1 << 16      # smaller inputs are cheaper to upload than to compare


def _memcmp():
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        f = ctypes.CDLL(name).memcmp
    except (OSError, AttributeError):
        return None
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return f


_MEMCMP = _memcmp()


def same_bytes(host, dev):
    """Whether C-contiguous numpy array `host` holds exactly the bytes of CPU array `dev`."""
    if _MEMCMP is not None:
        return _MEMCMP(host.__array_interface__["data"][0], dev.unsafe_buffer_pointer(),
                       host.nbytes) == 0
    flat = np.asarray(dev).reshape(-1).view(np.uint8)
    return np.array_equal(host.reshape(-1).view(np.uint8), flat)


class Residency:
    """Device copies of a forward program's large inputs (Note [Resident inputs]).

    `candidates`: input positions whose IR type holds at least MIN_BYTES; `mutated`: {input
    position: (output index, version bump)} for the donated inputs whose new value the
    program returns with the input's own shape and dtype."""

    def __init__(self, candidates, mutated, put):
        self.candidates = candidates
        self.mutated = mutated
        self._put = put                          # numpy array -> device array (x64-aware)
        self._slots = {}                         # position -> (weakref to array, version, dev)

    def arrays(self, inputs):
        """The arrays to call the program with: `t._data`, or a valid device copy of it."""
        arrays = [t._data for t in inputs]
        slots, mutated, put = self._slots, self.mutated, self._put
        for i in self.candidates:
            t = inputs[i]
            d, v = t._data, t._vc.v
            if not d.flags.c_contiguous:
                slots.pop(i, None)
                continue
            if i in mutated:                     # donated: the call consumes the entry
                e = slots.pop(i, None)
                if e is not None and e[0]() is d and e[1] == v and same_bytes(d, e[2]):
                    arrays[i] = e[2]
                continue
            e = slots.get(i)
            if e is None or e[0]() is not d or e[1] != v:
                slots[i] = (weakref.ref(d), v, None)     # first sighting: no upload yet
            elif e[2] is not None and same_bytes(d, e[2]):
                arrays[i] = e[2]
            else:                                # second sighting, or written behind the
                arrays[i] = dev = put(d)         # version counter: upload
                slots[i] = (e[0], v, dev)
        return arrays

    def keep(self, inputs, outs):
        """After a successful call: each donated input's new value becomes its device copy,
        expected at the version the caller's copy-back will give the tensor."""
        slots = self._slots
        for i, (k, bump) in self.mutated.items():
            t, o = inputs[i], outs[k]
            d = t._data
            if (i in self.candidates and d.flags.c_contiguous and not isinstance(o, np.ndarray)
                    and o.dtype == d.dtype and o.shape == d.shape):
                slots[i] = (weakref.ref(d), t._vc.v + bump, o)
