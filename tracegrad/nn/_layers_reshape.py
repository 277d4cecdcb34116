"""`Unflatten` (the inverse of `Flatten`: one dim into a given shape) and the matching
`Tensor.unflatten` / `tracegrad.unflatten`, a `reshape` with one `-1` allowed."""
from .. import ops as O
from .._errors import TracegradRuntimeError, op_error
from .._tensor import Tensor
from .module import Module


def unflatten(input, dim, sizes):
    """Split dimension `dim` of `input` into `sizes` (one entry may be -1).

    >>> unflatten(tracegrad.zeros(2, 6), 1, (2, 3)).shape
    torch.Size([2, 2, 3])
    """
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise op_error(TracegradRuntimeError, "unflatten", "unflatten: sizes must be non-empty")
    d = dim + input.ndim if dim < 0 else dim
    if not 0 <= d < max(input.ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-input.ndim}, {input.ndim - 1}], but got {dim})")
    known = 1
    for s in sizes:
        known *= s if s != -1 else 1
    n = input.shape[d]
    if -1 not in sizes and known != n or -1 in sizes and (known == 0 or n % known):
        raise op_error(TracegradRuntimeError, "unflatten", f"unflatten: Provided sizes "
                       f"{list(sizes)} don't multiply up to the size of dim {dim} ({n}) in the "
                       "input tensor")
    return O.reshape(input, tuple(input.shape[:d]) + sizes + tuple(input.shape[d + 1:]))


Tensor.unflatten = unflatten


class Unflatten(Module):
    """`Unflatten(dim, unflattened_size)`: `input.unflatten(dim, unflattened_size)`."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        return unflatten(input, self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
