"""`nn.Buffer` (PyTorch 2.5+): a marker that makes `module.x = nn.Buffer(t)` register a
buffer, as `register_buffer("x", t)` does.

As in PyTorch, `Buffer(t)` is not a new kind of tensor: it returns `t.detach()` (keeping
its `requires_grad` flag) tagged with `persistent` and `_is_buffer`; `isinstance(b, Buffer)`
tests that tag. `Module.__setattr__` registers such a value as a buffer, persistent or not.
"""
from .._tensor import Tensor


class _BufferMeta(type):
    """`isinstance(t, Buffer)` is true of the tensors `Buffer(...)` returned."""

    def __instancecheck__(cls, instance):
        if cls is Buffer:
            return isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False)
        return super().__instancecheck__(instance)


class Buffer(Tensor, metaclass=_BufferMeta):
    """`Buffer(data=None, *, persistent=True)`: module state that is not a parameter.

    >>> class M(tracegrad.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.mean = Buffer(tracegrad.zeros(3))
    >>> list(M().state_dict())
    ['mean']
    """

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            from ..ops import creation as C
            data = C.empty(0)
        t = data.detach().requires_grad_(data.requires_grad)
        t.persistent = persistent
        t._is_buffer = True
        return t


def is_buffer(value):
    """True for what `Buffer(...)` returned (cheap: no metaclass dispatch)."""
    return isinstance(value, Tensor) and getattr(value, "_is_buffer", False)
