"""Draws whose distribution reads tensor parameters: `poisson(input)` (torch.poisson) and
`_standard_gamma(input)` (torch._standard_gamma, Gamma(input, 1) draws) and
`binomial(count, prob)` (torch.binomial), from tracegrad's
generators, so `manual_seed` reproduces them (the numbers differ from PyTorch's).

Each is a primitive taking the generator as an explicit operand and marked impure, as
`multinomial` in sampling.py: a compiled program draws anew on every call. numpy's samplers
use rejection, so how many raw numbers a draw consumes depends on the parameters: the jax
backend does not lower them (the path runs on the numpy backend, still correct).
Poisson draws pass a zero gradient to a rate that requires grad (as PyTorch); binomial
draws record a node whose backward raises (as PyTorch's). Gamma draws
are differentiable in the concentration by the implicit reparameterization gradient
dx/dalpha = -(dP/dalpha) / pdf
(`standard_gamma_grad`, computed exactly by a series; PyTorch approximates it to ~1e-4),
first order only: like PyTorch, its own derivative raises NotImplementedError.
"""
import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradNotImplementedError, TracegradRuntimeError, op_error
from . import elementwise as E
from . import shape_rules as SR
from . import special_kernels as K
from .generator import default_generator
from .primitive import Primitive

__all__ = ["poisson", "binomial"]


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


def _standard_gamma_vjp(g, ins, out, n):
    return (None, E.mul(g, dispatch(STANDARD_GAMMA_GRAD, (ins[1], out))))


def _standard_gamma_grad_kernel(alpha, x):
    return np.asarray(K.standard_gamma_grad(alpha, x), dtype=alpha.dtype)


def _no_double_backward(g, ins, out, n):
    raise op_error(TracegradNotImplementedError, "_standard_gamma_grad",
                   "the derivative for '_standard_gamma_grad' is not implemented.")


POISSON = Primitive("poisson", _poisson_kernel, impure=True, shape_rule=_operand1,
                    may_raise=True)
STANDARD_GAMMA = Primitive("standard_gamma", _standard_gamma_kernel, impure=True,
                           shape_rule=_operand1, vjp=_standard_gamma_vjp, saves=(1,),
                           saves_out=True, grad_fn_name="StandardGammaBackward0")
STANDARD_GAMMA_GRAD = Primitive("standard_gamma_grad", _standard_gamma_grad_kernel,
                                vjp=_no_double_backward, saves=(0, 1),
                                shape_rule=SR.broadcast, grad_fn_name="StandardGammaGradBackward0")


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
    out = dispatch(POISSON, (generator or default_generator, input.detach()))
    if input.requires_grad:
        from .._mode import is_grad_enabled
        if is_grad_enabled():       # PyTorch records a node whose gradient is zero
            out = E.where(E.eq(out, out), out, input)
    return out


def _standard_gamma(input, generator=None):
    """Gamma(input, 1) draws (concentration `input` > 0), in `input`'s dtype, differentiable
    in `input` by the implicit reparameterization gradient (special_kernels.standard_gamma_grad;
    first order only, as PyTorch's)."""
    _float_only(input, "_standard_gamma", "gamma_cpu")
    return dispatch(STANDARD_GAMMA, (generator or default_generator, input))


def _binomial_kernel(gen, count, prob):
    c, p = np.broadcast_arrays(np.asarray(count, np.float64), np.asarray(prob, np.float64))
    bad = ~((p >= 0) & (p <= 1))
    n = np.where(c > 0, np.floor(np.where(np.isfinite(c), c, 0)), 0).astype(np.int64)
    out = gen._rng.binomial(n, np.where(bad, 0.0, p)).astype(count.dtype)
    return np.where(bad, np.nan, out).astype(count.dtype)


def _binomial_vjp(g, ins, out, n):
    # PyTorch records a node (the result requires grad) whose backward refuses to run
    raise op_error(TracegradRuntimeError, None, "derivative for aten::binomial is not "
                   "implemented")


def _broadcast12(shapes, attrs):
    return SR.broadcast(shapes[1:], attrs)


BINOMIAL = Primitive("binomial", _binomial_kernel, impure=True, shape_rule=_broadcast12,
                     vjp=_binomial_vjp, grad_fn_name="NotImplemented")


def binomial(count, prob, generator=None):
    """Binomial draws: successes in `count` trials of probability `prob` (broadcast), in
    count's dtype; NaN where prob is outside [0, 1]. Not differentiable (backward raises).

    >>> tracegrad.binomial(tensor([0., 4.]), tensor([0.5, 1.0])).tolist()
    [0.0, 4.0]
    """
    if not count.is_floating_point():
        from .._dtype import scalar_type_name
        from .._errors import TracegradValueError
        raise op_error(TracegradValueError, None, "binomial only supports floating-point "
                       f"dtypes for count, got: {scalar_type_name(count.dtype)}")
    if prob.dtype is not count.dtype:
        from .._dtype import scalar_type_name
        raise op_error(TracegradRuntimeError, None, f"Found dtype "
                       f"{scalar_type_name(prob.dtype)} but expected "
                       f"{scalar_type_name(count.dtype)}")
    return dispatch(BINOMIAL, (generator or default_generator, count, prob))
