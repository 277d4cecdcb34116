"""`grad_scaled(x, scale)`: `x` unchanged going forward, its gradient multiplied by `scale`
(broadcast to `x`'s shape, same dtype) going backward; `scale` receives no gradient.

Embedding's `scale_grad_by_freq=True` is built on it (nn/functional.py): each looked-up
row's gradient is divided by how often its index occurs in the mini-batch, which is each
position's gradient scaled by 1 / count(index at that position) before the lookup's
scatter-add, the order PyTorch's embedding backward uses. The forward value is a copy of
`x`, bit for bit (no `x * 1`, no detach arithmetic that would turn -0.0 or inf into
something else).

The backward is its own primitive, `grad_scale_backward(g, scale) = g * scale`, whose
gradient w.r.t. `g` is PyTorch's for embedding's double backward
(`embedding_dense_double_backward` in derivatives.yaml): the incoming gradient, unscaled.
So second-order gradients equal PyTorch's, which are not the derivative of the first
(neither is the scaled first-order gradient: that is the point of the option).
"""
from .._dispatch import dispatch
from . import elementwise as E
from .primitive import Primitive


GRAD_SCALE_BACKWARD = Primitive(
    "grad_scale_backward", lambda g, scale: g * scale,
    vjp=lambda gg, ins, out, n: (gg if n.needs[0] else None, None),
    shape_rule=lambda shapes, attrs: tuple(shapes[0]),
    grad_fn_name="EmbeddingDenseBackwardBackward0",
    doc="g * scale; its gradient w.r.t. g is PyTorch's embedding double backward's")


def _vjp(g, ins, out, n):
    return (dispatch(GRAD_SCALE_BACKWARD, (g, ins[1])) if n.needs[0] else None, None)


GRAD_SCALED = Primitive("grad_scaled", lambda x, scale: x.copy(), vjp=_vjp, saves=(1,),
                        shape_rule=lambda shapes, attrs: tuple(shapes[0]),
                        grad_fn_name="EmbeddingBackward0",
                        doc="x forward; the gradient times `scale` backward")


def grad_scaled(x, scale):
    """`x`, whose gradient is multiplied by `scale` (no gradient to `scale`)."""
    return dispatch(GRAD_SCALED, (x, scale))
