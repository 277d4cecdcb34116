"""`Parameter`: a Tensor subclass that a `Module` registers as learnable state.

A Parameter is a leaf that (by default) requires grad. It shares storage and the version
counter with the tensor it was made from (like `detach()`), so `Parameter(t)` costs nothing.
Ops on a Parameter return plain Tensors, as in PyTorch; `isinstance(p, Tensor)` holds.
"""
import numpy as np

from .._errors import TracegradRuntimeError, TracegradTypeError
from .._tensor import Tensor


class Parameter(Tensor):
    """A learnable tensor: `Parameter(data=None, requires_grad=True)`.

    >>> w = Parameter(tracegrad.zeros(2))
    >>> w.is_leaf, w.requires_grad
    (True, True)
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = Tensor._wrap(np.empty((0,), dtype=_default_np()))
        if not isinstance(data, Tensor):
            raise TracegradTypeError(f"Parameter(): argument 'data' must be Tensor, not "
                                     f"{type(data).__name__}")
        p = Tensor._wrap(data._data)
        p.__class__ = cls            # same layout as Tensor: only the type changes
        p._vc = data._vc             # share the version counter, as detach() does
        p._inference = data._inference
        if requires_grad:
            p._set_requires_grad(True, op="Parameter")
        return p

    def __init__(self, data=None, requires_grad=True):
        pass                         # all work happens in __new__ (Tensor.__init__ refuses)

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        # copies made by dispatch: a trace records them (Note [Copying and pickling a
        # tensor] in _tensor_storage.py)
        p = Parameter(self.detach().clone(), self.requires_grad)
        if self.grad is not None:
            p.grad = self.grad.detach().clone()
        memo[id(self)] = p
        return p

    def __reduce_ex__(self, proto):
        return (_rebuild, (self._data.copy(), self.requires_grad))


def _rebuild(data, requires_grad):
    return Parameter(Tensor._wrap(data), requires_grad)


def _default_np():
    from .. import _dtype as D
    return D.get_default_dtype().np


class UninitializedParameter(Parameter):
    """A Parameter with no shape yet; `materialize(shape)` gives it one (and makes it a plain
    Parameter, in place)."""

    cls_to_become = Parameter

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        from .. import _dtype as D
        dtype = D.as_dtype(dtype) if dtype is not None else D.get_default_dtype()
        return Parameter.__new__(cls, Tensor._wrap(np.empty((0,), dtype=dtype.np)),
                                 requires_grad)

    def materialize(self, shape, device=None, dtype=None):
        """Allocate `shape` (uninitialized values) in this object and become a Parameter."""
        from .. import _dtype as D
        dtype = D.as_dtype(dtype) if dtype is not None else self.dtype
        self._data = np.empty(tuple(shape), dtype=dtype.np)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise TracegradRuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error "
            "usually happens in `load_state_dict` when trying to load an uninitialized "
            "parameter into an initialized one. Call `forward` to initialize the parameters "
            "before accessing their attributes.")

    def __repr__(self):
        return "<UninitializedParameter>"

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = UninitializedParameter(self.requires_grad, dtype=self.dtype)
        return memo[id(self)]


class UninitializedBuffer(Tensor):
    """A buffer with no shape yet (a lazy module's running statistics);
    `materialize(shape)` gives it one and makes it a plain Tensor, in place."""

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        from .. import _dtype as D
        dtype = D.as_dtype(dtype) if dtype is not None else D.get_default_dtype()
        t = Tensor._wrap(np.empty((0,), dtype=dtype.np))
        t.__class__ = cls
        return t

    def __init__(self, requires_grad=False, device=None, dtype=None):
        pass

    def materialize(self, shape, device=None, dtype=None):
        from .. import _dtype as D
        dtype = D.as_dtype(dtype) if dtype is not None else self.dtype
        self._data = np.empty(tuple(shape), dtype=dtype.np)
        self.__class__ = Tensor

    shape = UninitializedParameter.shape

    def _as(self, dtype):
        """Still uninitialized, of another dtype (what `module.double()` etc. give)."""
        return UninitializedBuffer(self.requires_grad, dtype=dtype)

    def double(self):
        return self._as("float64")

    def float(self):
        return self._as("float32")

    def half(self):
        return self._as("float16")

    def to(self, *args, **kwargs):
        from .. import _dtype as D
        dtype = kwargs.get("dtype")
        for a in args:
            if isinstance(a, D.dtype) or isinstance(a, Tensor):
                dtype = a.dtype if isinstance(a, Tensor) else a
        return self if dtype is None else self._as(dtype)

    def __repr__(self):
        return "<UninitializedBuffer>"

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = UninitializedBuffer(dtype=self.dtype)
        return memo[id(self)]


from ._buffer import Buffer  # noqa: E402,F401  (PyTorch: torch.nn.parameter.Buffer)
