"""Device copies of small program inputs that repeat from call to call (Note [Small inputs]).

Note [Small inputs]
A numpy argument costs a jitted executable's C++ entry about 2 us to turn into a device
buffer, however small (measured: the 200-op chain's fused program took 14.4 us with its two
shape-(4,) float32 inputs as numpy arrays, 10.3 us with them as device arrays). A training
loop on small tensors, a learning rate read per call, an integer target reused by an
evaluation loop: such inputs often hold the same values call after call.

So a plain program (Note [Plain calls] in program.py) keeps, per small input position (at
most SMALL_BYTES), the value it was last given, as (shape, dtype, bytes); when a call's
array has that same value again, it passes a device array holding it instead of the numpy
array, made once by `jax.device_put` and reused for as long as the value repeats. Equal
shape, dtype and bytes mean equal values, so the program computes exactly what it would
have from the numpy array: no version counter is trusted (writes through `.data` or a
`numpy()` view pass them) and no numpy array is referenced (the reference counts that
aligned.py and adopt.py read stay as they were). Comparing costs about 0.2 us per input.

`jax.device_put` costs about 30 us, so it runs only when a value is seen on two
consecutive calls, and at one position no more once it has run PUT_LIMIT times without its
copies serving as many calls again (values that alternate, A A B B A A: the copies would
cost more than they save).
"""
import jax
import numpy as np

SMALL_BYTES = 1024
PUT_LIMIT = 16


class SmallInputs:
    """`swap(arrays)`: `arrays` (a list, changed in place) with repeated small numpy inputs
    replaced by device arrays holding the same values (see the Note). Each position's
    value and copy are one tuple, replaced whole: threads calling at once never pair a
    value with another value's copy."""
    __slots__ = ("positions", "device", "last", "puts", "hits")

    def __init__(self, positions, device):
        self.positions = positions
        self.device = device
        n = max(positions) + 1
        self.last = [None] * n          # (shape, dtype, bytes, copy or None) per position
        self.puts, self.hits = [0] * n, [0] * n

    def swap(self, arrays):
        last = self.last
        for i in self.positions:
            a = arrays[i]
            if type(a) is not np.ndarray:
                continue
            b = a.tobytes()
            s = last[i]
            if s is None or s[2] != b or s[0] != a.shape or s[1] != a.dtype:
                last[i] = (a.shape, a.dtype, b, None)
                continue
            c = s[3]
            if c is None:
                if self.puts[i] >= PUT_LIMIT and self.puts[i] > self.hits[i]:
                    continue
                # (a copy of its own: on the CPU, jax may read an aligned numpy array in
                # place, and `a` may be written to later)
                c = jax.device_put(a.copy(), self.device)
                last[i] = (s[0], s[1], b, c)
                self.puts[i] += 1
            else:
                self.hits[i] += 1
            arrays[i] = c
        return arrays


def small_positions(types):
    """Input positions of IR `types` holding at most SMALL_BYTES."""
    return [i for i, t in enumerate(types) if t.nbytes <= SMALL_BYTES]
