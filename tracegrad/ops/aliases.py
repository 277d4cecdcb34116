"""PyTorch's alias names and small Tensor facts tracegrad lacked: `ravel`, `positive`,
`fix`, `msort`, `argwhere`, `adjoint`/`mH`, `split_with_sizes`, the comparison spellings
(`greater_equal`, `not_equal`, ...), `logical_xor`, and the facts `ndimension`, `nbytes`,
`itemsize`, `is_signed`, `is_nonzero`, `is_same_size`.

Each is an existing op under PyTorch's name and signature (no new primitives), so tracing,
gradients and the JAX lowering come with the op it names.

>>> ravel(tensor([[1, 2], [3, 4]]))
tensor([1, 2, 3, 4])
"""
from .. import _dtype as D
from .._errors import TracegradRuntimeError, op_error
from .._tensor import Tensor
from . import elementwise as E
from . import shape as S
from .inplace_more import logical_xor

__all__ = ["ravel", "absolute", "multiply", "subtract", "greater", "greater_equal", "less",
           "less_equal", "not_equal", "logical_xor", "positive", "fix", "is_nonzero",
           "is_same_size", "adjoint", "msort", "argwhere", "split_with_sizes"]

absolute, multiply, subtract = E.abs, E.mul, E.sub
greater, greater_equal, less, less_equal, not_equal = E.gt, E.ge, E.lt, E.le, E.ne


def ravel(input):
    """The elements as a 1-D tensor (a view when the memory allows, as `reshape`).

    >>> ravel(zeros(2, 3)).shape
    tracegrad.Size([6])
    """
    return S.reshape(input, (-1,))


def positive(input):
    """`input` itself (unary `+`); a bool tensor raises PyTorch's RuntimeError."""
    if input.dtype is D.bool_:
        raise op_error(TracegradRuntimeError, "positive",
                       "The `+` operator, on a bool tensor is not supported.")
    return input


def fix(input):
    """Alias of `trunc` (round toward zero)."""
    from .fmod_prim import trunc
    return trunc(input)


def is_nonzero(input):
    """The truth value of a one-element tensor; empty or larger tensors raise."""
    if input.numel() == 0:
        raise op_error(TracegradRuntimeError, "is_nonzero",
                       "Boolean value of Tensor with no values is ambiguous")
    return bool(input)


def is_same_size(input, other):
    """Whether the two tensors have the same shape."""
    return tuple(input.shape) == tuple(other.shape)


def adjoint(input):
    """The conjugate transpose of the last two dimensions (a view; real tensors only here).

    >>> adjoint(zeros(2, 3)).shape
    tracegrad.Size([3, 2])
    """
    if input.ndim < 2:
        raise op_error(TracegradRuntimeError, "adjoint",
                       "tensor.adjoint() is only supported on matrices or batches of matrices. "
                       f"Got {input.ndim}-D tensor.")
    return S.transpose(input, -2, -1)


def msort(input):
    """`sort(input, dim=0).values`."""
    from .sort import sort
    return sort(input, dim=0)[0]


def argwhere(input):
    """The indices of the nonzero elements, one row each (`nonzero(input)`)."""
    return S.nonzero(input)


def split_with_sizes(input, split_sizes, dim=0):
    """`split` into pieces of the given sizes (which must sum to the dimension's size)."""
    if isinstance(split_sizes, int):
        raise TypeError("split_with_sizes(): argument 'split_sizes' (position 2) must be "
                        f"tuple of ints, not {type(split_sizes).__name__}")
    return S.split(input, list(split_sizes), dim)


# ---- Tensor-only facts ----

def ndimension(self):
    """Alias of `dim()`."""
    return self.ndim


def is_signed(self):
    """Whether the dtype is signed (False for uint8 and bool)."""
    return self.dtype not in (D.uint8, D.bool_)


METHODS = {"ravel": ravel, "greater_equal": greater_equal, "less_equal": less_equal,
           "not_equal": not_equal, "logical_xor": logical_xor, "bitwise_and": E.bitwise_and,
           "bitwise_or": E.bitwise_or, "bitwise_xor": E.bitwise_xor, "positive": positive,
           "fix": fix, "ndimension": ndimension, "is_signed": is_signed,
           "is_nonzero": is_nonzero, "is_same_size": is_same_size, "adjoint": adjoint,
           "msort": msort, "argwhere": argwhere, "split_with_sizes": split_with_sizes}
PROPERTIES = {"nbytes": lambda self: self.numel() * self.element_size(),
              "itemsize": lambda self: self.element_size(),
              "mH": lambda self: adjoint(self)}


def install(tensor_class=Tensor):
    """Attach `METHODS` and `PROPERTIES` to the Tensor class."""
    for name, fn in METHODS.items():
        setattr(tensor_class, name, fn)
    for name, fn in PROPERTIES.items():
        setattr(tensor_class, name, property(fn))
