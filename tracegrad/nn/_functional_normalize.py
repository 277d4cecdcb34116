"""`F.normalize`: dividing by a clamped p-norm along a dimension, as PyTorch's."""
from .. import ops as O


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """Divides `input` by its `p`-norm along `dim`, clamped below by `eps`.

    PyTorch's formula: the norm, kept as a dimension, clamped and expanded, so the gradient
    is PyTorch's too."""
    denom = O.clamp(input.norm(p, dim, keepdim=True), min=eps).expand_as(input)
    if out is not None:
        return out.copy_(O.div(input, denom))
    return O.div(input, denom)
