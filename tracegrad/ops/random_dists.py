"""Draws whose distribution reads tensor parameters: `poisson(input)` (torch.poisson) and
`_standard_gamma(input)` (torch._standard_gamma, Gamma(input, 1) draws), from tracegrad's
generators, so `manual_seed` reproduces them (the numbers differ from PyTorch's).

Each is a primitive taking the generator as an explicit operand and marked impure, as
`multinomial` in sampling.py: a compiled program draws anew on every call. numpy's samplers
use rejection, so how many raw numbers a draw consumes depends on the parameters: the jax
backend does not lower them (the path runs on the numpy backend, still correct).
The draws carry no gradient (PyTorch's poisson gradient is zero; a reparameterized gamma
gradient is not provided: `Gamma.rsample` is absent).
"""
import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradNotImplementedError, TracegradRuntimeError, op_error
from .creation import default_generator
from .primitive import Primitive

__all__ = ["poisson"]


def _poisson_kernel(gen, rate):
    r = np.asarray(rate, dtype=np.float64)
    if np.any(~(r >= 0)):
        raise op_error(TracegradRuntimeError, "poisson",
                       "invalid Poisson rate, expected rate to be non-negative")
    return gen._rng.poisson(r).astype(rate.dtype)


def _standard_gamma_kernel(gen, alpha):
    a = np.asarray(alpha, dtype=np.float64)
    bad = ~(a > 0)
    out = gen._rng.standard_gamma(np.where(bad, 1.0, a))
    # as PyTorch's sampler: results (and invalid concentrations) at least the smallest
    # normal number of the dtype, so log(sample) is finite
    tiny = np.finfo(alpha.dtype).tiny
    return np.maximum(np.where(bad, tiny, out), tiny).astype(alpha.dtype)


def _operand1(shapes, attrs):
    return tuple(shapes[1])


POISSON = Primitive("poisson", _poisson_kernel, impure=True, shape_rule=_operand1,
                    may_raise=True)
STANDARD_GAMMA = Primitive("standard_gamma", _standard_gamma_kernel, impure=True,
                           shape_rule=_operand1)


def _float_only(input, op, kernel):
    if not input.is_floating_point():
        from .._dtype import scalar_type_name
        raise op_error(TracegradNotImplementedError, op, f'"{kernel}" not implemented for '
                       f"'{scalar_type_name(input.dtype)}'")


def poisson(input, generator=None):
    """Poisson draws with rates `input` (>= 0), in `input`'s dtype.

    >>> tracegrad.poisson(tensor([0., 0.])).tolist()
    [0.0, 0.0]
    """
    _float_only(input, "poisson", "poisson_cpu")
    return dispatch(POISSON, (generator or default_generator, input.detach()))


def _standard_gamma(input, generator=None):
    """Gamma(input, 1) draws (concentration `input` > 0), in `input`'s dtype."""
    _float_only(input, "_standard_gamma", "gamma_cpu")
    return dispatch(STANDARD_GAMMA, (generator or default_generator, input.detach()))
