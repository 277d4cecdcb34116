"""Dropout's noise as one random primitive: `keep / (1 - p)` drawn in a single dispatch.

PyTorch's CPU dropout is `input * noise` with `noise = bernoulli(1 - p) / (1 - p)`; the
product is the only differentiable node (`MulBackward0`). The noise used to take four
dispatches (`rand`, `lt`, `to`, `div`); here it is one impure primitive (an RNG draw: never
merged, removed or re-drawn by passes, replayed by compiled programs) computing exactly what
those four computed from the same generator stream, so seeded runs give the same masks.
"""
import numpy as np

from .._dispatch import dispatch
from .._rng_guard import check_draw as _check_draw
from . import shape_rules as SR
from .creation import _rand_kernel
from .generator import default_generator
from .primitive import Primitive


def _noise_kernel(gen, shape, dtype, p):
    keep = _rand_kernel(gen, shape, dtype) < 1.0 - p     # `rand(...) < 1 - p`, as before
    return np.true_divide(keep.astype(dtype), 1.0 - p)


DROPOUT_NOISE = Primitive("dropout_noise", _noise_kernel, impure=True, nondiff=True,
                          shape_rule=SR.attr_shape)


def dropout_noise(shape, dtype, p, generator=None):
    """`(rand(shape) < 1 - p) / (1 - p)` in `dtype` (a numpy dtype), from the generator."""
    _check_draw()
    return dispatch(DROPOUT_NOISE, (generator or default_generator,),
                    {"shape": tuple(shape), "dtype": dtype, "p": float(p)})
