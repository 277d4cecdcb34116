"""`bincount`: how often each non-negative integer occurs (or the sum of its weights), a
composite of `scatter_add` so tracing and JAX lowering come with it.

Note [bincount's length]
The result has `max(input.max() + 1, minlength)` entries: a data-dependent shape. Reading
`input.max()` as a Python int records a guard under `compile`, so a batch whose largest
label differs re-traces (as any data-dependent shape does); pass `minlength` >= the number
of classes to keep one path.

PyTorch records a node whose backward refuses to run ("derivative for aten::bincount is not
implemented"); we compute from `weights.detach()`, so the result does not require grad.
"""
from .. import _dtype as D
from .._errors import TracegradNotImplementedError, TracegradRuntimeError, op_error
from .._tensor import Tensor
from . import creation as C
from . import reduction as R
from .gather_scatter import scatter_add

__all__ = ["bincount"]

_MSG = "bincount only supports 1-d non-negative integral inputs."


def bincount(input, weights=None, minlength=0):
    """Counts of each value in a 1-D non-negative integer tensor, `minlength` at least.

    >>> bincount(tensor([1, 3, 1]))
    tensor([0, 2, 0, 1])
    """
    if input.dtype.is_floating_point or input.dtype == D.bool_:
        raise op_error(TracegradNotImplementedError, "bincount", "\"bincount_cpu\" not "
                       f"implemented for '{D.scalar_type_name(input.dtype)}'")
    if input.ndim != 1:
        raise op_error(TracegradRuntimeError, "bincount", _MSG)
    if minlength < 0:
        raise op_error(TracegradRuntimeError, "bincount", "minlength should be >= 0")
    n = input.shape[0]
    if n and bool(R.any(input < 0)):
        raise op_error(TracegradRuntimeError, "bincount", _MSG)
    size = max(int(R.amax(input)) + 1 if n else 0, minlength)
    if weights is None:
        return scatter_add(C.zeros(size, dtype=D.int64), 0, input.long(),
                               C.ones(n, dtype=D.int64))
    if not isinstance(weights, Tensor) or weights.ndim != 1 or weights.shape[0] != n:
        raise op_error(TracegradRuntimeError, "bincount",
                       "weights should be 1-d and have the same length as input")
    dt = weights.dtype if weights.dtype.is_floating_point else D.float64
    w = weights.detach().to(dt)
    return scatter_add(C.zeros(size, dtype=dt), 0, input.long(), w)
