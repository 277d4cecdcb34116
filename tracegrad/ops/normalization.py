"""Layer normalization as one primitive (`native_layer_norm`, PyTorch's NativeLayerNormBackward0).

Operands: input (*, *normalized_shape), weight and bias (normalized_shape) or the Python
numbers 1.0 / 0.0 when absent (literals keep one primitive for every affine combination);
attributes `ndim` (how many trailing dims are normalized) and `eps`.

The kernel normalizes with the biased variance, `(x - mean) / sqrt(var + eps) * w + b`. The VJP
recomputes mean and 1/std from the saved input with tracegrad ops, so its result is itself
differentiable (second-order gradients come from those ops):
    xhat = (x - mean) * rstd,   gx = g * w
    dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat))     (means over normalized dims)
    dw = sum over leading dims of g * xhat,   db = sum over leading dims of g
"""
import numpy as np

from .._dispatch import dispatch
from . import elementwise as E
from . import shape_rules as SR
from .primitive import Primitive
from .reduction import mean as _mean
from .shape import sum_to


def _ln_kernel(x, w, b, ndim, eps):
    axes = tuple(range(x.ndim - ndim, x.ndim))
    acc = np.float32 if x.dtype == np.float16 else x.dtype   # half accumulates in float
    with np.errstate(all="ignore"):
        xa = x.astype(acc, copy=False)
        mu = np.mean(xa, axis=axes, keepdims=True, dtype=acc)
        xc = xa - mu
        var = np.mean(xc * xc, axis=axes, keepdims=True, dtype=acc)
        y = xc * (1.0 / np.sqrt(var + np.asarray(eps, acc)))
        if not isinstance(w, (int, float)):
            y *= w
        if not isinstance(b, (int, float)):
            y += b
    return y.astype(x.dtype, copy=False)


def _ln_vjp(g, ins, out, n):
    x, w, b = ins
    k, eps = n.attrs["ndim"], n.attrs["eps"]
    dims = tuple(range(-k, 0))
    need_x, need_w, need_b = n.needs
    dx = dw = db = None
    if need_x or need_w:
        xc = E.sub(x, _mean(x, dims, keepdim=True))
        rstd = E.rsqrt(E.add(_mean(E.mul(xc, xc), dims, keepdim=True), eps))
        xhat = E.mul(xc, rstd)
    if need_x:
        gx = g if isinstance(w, (int, float)) else E.mul(g, w)
        inner = E.sub(E.sub(gx, _mean(gx, dims, keepdim=True)),
                      E.mul(xhat, _mean(E.mul(gx, xhat), dims, keepdim=True)))
        dx = E.mul(rstd, inner)
    if need_w:
        dw = sum_to(E.mul(g, xhat), n.shapes[1])
    if need_b:
        db = sum_to(g, n.shapes[2])
    return dx, dw, db


LAYER_NORM = Primitive("native_layer_norm", _ln_kernel, vjp=_ln_vjp, saves_for={0: (0, 1),
                       1: (0,), 2: ()}, grad_fn_name="NativeLayerNormBackward0",
                       shape_rule=SR.same)


def layer_norm(input, ndim, weight=None, bias=None, eps=1e-5):
    """The primitive: normalize the last `ndim` dims of `input`, then scale and shift."""
    return dispatch(LAYER_NORM, (input, 1.0 if weight is None else weight,
                                 0.0 if bias is None else bias),
                    {"ndim": int(ndim), "eps": float(eps)})
