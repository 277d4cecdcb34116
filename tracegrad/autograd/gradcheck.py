"""`gradcheck` and `gradgradcheck`: compare analytical gradients with central finite
differences in float64, as torch.autograd.gradcheck does (raising by default, or returning
False with `raise_exception=False`).
"""
import numpy as np

from .._errors import TracegradRuntimeError
from .._tensor import Tensor, from_array


class GradcheckError(TracegradRuntimeError):
    """Analytical and numerical gradients disagree."""


def _outputs(fn, inputs):
    out = fn(*inputs)
    return (out,) if isinstance(out, Tensor) else tuple(out)


def _numerical(fn, inputs, out_idx, eps):
    """Jacobian d out[out_idx] / d inputs, column by column, by central differences."""
    jacs = []
    for t in inputs:
        if not (isinstance(t, Tensor) and t.requires_grad):
            jacs.append(None)
            continue
        data = t._data           # perturbed in place, element by element in C order (a
        out0 = _outputs(fn, inputs)[out_idx]     # reshape(-1) of a non-contiguous input
        J = np.zeros((data.size, out0._data.size))   # would be a copy, perturbing nothing)
        for k, idx in enumerate(np.ndindex(data.shape)):
            orig = data[idx]
            data[idx] = orig + eps
            hi = _outputs(fn, inputs)[out_idx]._data.astype(np.float64).reshape(-1)
            data[idx] = orig - eps
            lo = _outputs(fn, inputs)[out_idx]._data.astype(np.float64).reshape(-1)
            data[idx] = orig
            J[k] = (hi - lo) / (2 * eps)
        jacs.append(J)
    return jacs


def _analytical(fn, inputs, out_idx):
    from .api import grad
    outs = _outputs(fn, inputs)
    out = outs[out_idx]
    diff = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    jacs = [np.zeros((t._data.size, out._data.size)) for t in diff]
    if not out.requires_grad:
        return jacs
    for j in range(out._data.size):
        g = np.zeros(out._data.size, dtype=out._data.dtype)
        g[j] = 1
        outs = _outputs(fn, inputs)
        gs = grad(outs[out_idx], diff, from_array(g.reshape(out._data.shape)),
                  allow_unused=True)
        for J, gi in zip(jacs, gs):
            if gi is not None:
                J[:, j] = gi._data.reshape(-1)
    return jacs


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, fast_mode=False, **kwargs):
    """True if analytical gradients of `func` at `inputs` match finite differences."""
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    for t in inputs:
        if isinstance(t, Tensor) and t.requires_grad and t.dtype.name != "float64":
            import warnings
            warnings.warn("Input #0 requires gradient and is not a double precision floating "
                          "point. This check will likely fail if all the inputs are not of "
                          "double precision floating point.", UserWarning, stacklevel=2)
    n_out = len(_outputs(func, inputs))
    for oi in range(n_out):
        num = [J for J in _numerical(func, inputs, oi, eps) if J is not None]
        ana = _analytical(func, inputs, oi)
        for k, (a, n) in enumerate(zip(ana, num)):
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                if not raise_exception:
                    return False
                raise GradcheckError(
                    f"Jacobian mismatch for output {oi} with respect to input {k},\n"
                    f"numerical:{n}\nanalytical:{a}\n")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  raise_exception=True, **kwargs):
    """gradcheck of the first derivative (checks second-order gradients)."""
    from .api import grad
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    outs = _outputs(func, inputs)
    rng = np.random.default_rng(0)
    if grad_outputs is None:
        grad_outputs = [from_array(rng.standard_normal(o._data.shape)).requires_grad_(True)
                        for o in outs if o.requires_grad]
    diff = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]

    def first(*args):
        ins, gos = args[:len(inputs)], args[len(inputs):]
        o = [x for x in _outputs(func, ins) if x.requires_grad]
        d = [t for t in ins if isinstance(t, Tensor) and t.requires_grad]
        gs = grad(o, d, list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)
    _ = diff
    return gradcheck(first, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
