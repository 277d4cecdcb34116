"""Sampling from categorical distributions: multinomial.

A draw is a primitive taking the generator as an explicit operand (as `rand`/`randn` in
creation.py), marked impure, so a compiled program draws anew on every call instead of
replaying the traced numbers. Without replacement it uses PyTorch's method: divide the
weights by exponential noise and keep the `num_samples` largest (zero weights come last).
"""
import numpy as np

from .._dispatch import dispatch
from .._rng_guard import check_draw as _check_draw
from .._errors import TracegradNotImplementedError, TracegradRuntimeError, op_error
from .generator import default_generator
from .primitive import Primitive


def _check_weights(p):
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise op_error(TracegradRuntimeError, "multinomial",
                       "probability tensor contains either `inf`, `nan` or element < 0")
    if np.any(p.sum(-1) <= 0):
        raise op_error(TracegradRuntimeError, "multinomial",
                       "invalid multinomial distribution (sum of probabilities <= 0)")


def _multinomial_kernel(gen, input, num_samples, replacement):
    p = np.asarray(input, dtype=np.float64)
    rows = p.reshape(-1, p.shape[-1])
    _check_weights(rows)
    if replacement:
        cdf = np.cumsum(rows, axis=1)
        cdf /= cdf[:, -1:]
        u = gen._rng.random((rows.shape[0], num_samples))
        idx = (cdf[:, None, :] <= u[:, :, None]).sum(-1)
        idx = np.minimum(idx, rows.shape[1] - 1)
    else:
        noise = gen._rng.exponential(size=rows.shape)
        with np.errstate(divide="ignore"):
            keys = noise / rows                       # zero weight: key inf, chosen last
        idx = np.argsort(keys, axis=1, kind="stable")[:, :num_samples]
    return idx.astype(np.int64).reshape(p.shape[:-1] + (num_samples,))


def _multinomial_shape(shapes, attrs):
    return tuple(shapes[1][:-1]) + (attrs["num_samples"],)


MULTINOMIAL = Primitive("multinomial", _multinomial_kernel, impure=True,
                        shape_rule=_multinomial_shape, may_raise=True)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """int64 indices drawn from the categories of each row of `input` (weights, need not sum
    to one): shape (num_samples,) for 1-D input, (rows, num_samples) for 2-D."""
    if not input.is_floating_point():
        from .reduction import _tname
        raise op_error(TracegradRuntimeError, "multinomial", "multinomial only supports "
                       f"floating-point dtypes for input, got: {_tname(input)}")
    if input.ndim not in (1, 2):
        raise op_error(TracegradRuntimeError, "multinomial", "prob_dist must be 1 or 2 dim")
    if num_samples <= 0:
        raise op_error(TracegradRuntimeError, "multinomial",
                       "cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > input.shape[-1]:
        raise op_error(TracegradRuntimeError, "multinomial",
                       "cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    _check_draw()
    return dispatch(MULTINOMIAL, (generator or default_generator, input),
                    {"num_samples": int(num_samples), "replacement": bool(replacement)})


def bernoulli(input, p=None, *, generator=None):
    """0/1 draws (in `input`'s floating dtype): 1 with probability `input` (or `p`).

    A composite of `rand` (so each compiled call draws anew). PyTorch records a node whose
    gradient is zero: here, when `input` requires grad, a `where` whose condition is always
    true, so the result requires grad and `input` gets a zero gradient, as PyTorch's.

    >>> bernoulli(tensor([0., 1.]))
    tensor([0., 1.])
    """
    from . import creation as C
    from . import elementwise as E
    from . import reduction as R
    if not input.is_floating_point():
        from .._dtype import scalar_type_name
        raise op_error(TracegradNotImplementedError, "bernoulli", "\"bernoulli_tensor_cpu_p_\" "
                       f"not implemented for '{scalar_type_name(input.dtype)}'")
    probs = input if p is None else p
    if p is None and bool(R.any(E.logical_or(E.lt(input, 0), E.gt(input, 1)))):
        raise op_error(TracegradRuntimeError, "bernoulli", "Expected p_in >= 0 && p_in <= 1 "
                       "to be true, but got false.")
    u = C.rand(tuple(input.shape), generator=generator, dtype=input.dtype)
    out = E.lt(u, probs).to(input.dtype)
    if input.requires_grad:
        from .._mode import is_grad_enabled
        if is_grad_enabled():
            out = E.where(E.eq(u, u), out, input)
    return out
