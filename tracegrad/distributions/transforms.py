"""Elementwise bijections of `torch.distributions.transforms` that `TransformedDistribution`
pushes samples through: `ExpTransform`, `AffineTransform(loc, scale)`, `SigmoidTransform`,
`TanhTransform`, each with its inverse, `log_abs_det_jacobian(x, y)` (PyTorch's stable
formulas) and the support of its results (the check `log_prob` makes), in tracegrad ops so
they differentiate and compile."""
import math

import numpy as np

from .. import ops as O
from ..nn import functional as F
from .._settings import finfo

__all__ = ["Transform", "ExpTransform", "AffineTransform", "SigmoidTransform",
           "TanhTransform"]


def _same(a, b):
    """Numbers or tensors equal everywhere (how PyTorch compares affine parameters)."""
    if hasattr(a, "shape") or hasattr(b, "shape"):
        return bool(O.all(O.eq(O.as_tensor(a) if not hasattr(a, "shape") else a, b)))
    return a == b


class Transform:
    """An elementwise invertible map `y = t(x)`; `t.inv(y)` is its inverse."""

    codomain = "Real()"

    def __call__(self, x):
        return self._call(x)

    def inv(self, y):
        return self._inverse(y)

    def in_codomain(self, y):
        return O.eq(y, y)

    def forward_shape(self, shape):
        return tuple(shape)

    def __eq__(self, other):            # the parameterless ones: equal by kind (as PyTorch)
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))

    def __repr__(self):
        return f"{type(self).__name__}()"


class ExpTransform(Transform):
    codomain = "GreaterThan(lower_bound=0.0)"

    def _call(self, x):
        return O.exp(x)

    def _inverse(self, y):
        return O.log(y)

    def log_abs_det_jacobian(self, x, y):
        return x

    def in_codomain(self, y):
        return O.gt(y, 0)


class AffineTransform(Transform):
    """`y = loc + scale * x` (numbers or tensors broadcasting with the samples)."""

    def __init__(self, loc, scale, event_dim=0):
        if event_dim != 0:
            raise NotImplementedError("tracegrad's AffineTransform is elementwise (event_dim=0)")
        self.loc, self.scale = loc, scale

    def __eq__(self, other):
        return (type(other) is AffineTransform and _same(self.loc, other.loc)
                and _same(self.scale, other.scale))

    __hash__ = Transform.__hash__

    def _call(self, x):
        return O.add(O.mul(x, self.scale), self.loc)

    def _inverse(self, y):
        return O.div(O.sub(y, self.loc), self.scale)

    def log_abs_det_jacobian(self, x, y):
        scale = self.scale
        if not hasattr(scale, "shape"):
            return O.full(tuple(x.shape), math.log(abs(scale)), dtype=x.dtype)
        return O.expand(O.log(O.abs(scale)), tuple(x.shape))

    def forward_shape(self, shape):
        extra = [tuple(p.shape) for p in (self.loc, self.scale) if hasattr(p, "shape")]
        return tuple(np.broadcast_shapes(tuple(shape), *extra))


class SigmoidTransform(Transform):
    codomain = "Interval(lower_bound=0.0, upper_bound=1.0)"

    def _call(self, x):
        f = finfo(x.dtype)
        return O.clamp(O.sigmoid(x), min=f.tiny, max=1.0 - f.eps)

    def _inverse(self, y):
        f = finfo(y.dtype)
        y = O.clamp(y, min=f.tiny, max=1.0 - f.eps)
        return O.sub(O.log(y), O.log1p(O.neg(y)))

    def log_abs_det_jacobian(self, x, y):
        return O.sub(O.neg(F.softplus(O.neg(x))), F.softplus(x))

    def in_codomain(self, y):
        return O.logical_and(O.ge(y, 0), O.le(y, 1))


class TanhTransform(Transform):
    codomain = "Interval(lower_bound=-1.0, upper_bound=1.0)"

    def _call(self, x):
        return O.tanh(x)

    def _inverse(self, y):
        return O.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        return O.mul(O.sub(O.sub(math.log(2.0), x), F.softplus(O.mul(x, -2.0))), 2.0)

    def in_codomain(self, y):
        return O.logical_and(O.ge(y, -1), O.le(y, 1))
