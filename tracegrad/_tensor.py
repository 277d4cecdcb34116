"""The Tensor object: data, storage/version sharing, autograd attributes, and construction.

Methods that compute (math, shape ops, operators) are attached in `_tensor_methods.py` from
the op modules; this file holds only what a tensor *is*.

Note [Layers]
The eager core is layered: `_dtype`, `_mode`, `_effects` < `_tensor` < `_dispatch` < the
primitive table (`ops/`) < `autograd/` < tensor methods, nn, compiler. A lower layer that
must call into a higher one at run time keeps a slot the higher one fills at import
(`_tensor._layers`, `_dispatch._layers`), instead of importing upwards.

Note [Views and versions]
A view shares its base's `VersionCounter` (`_vc`) and its numpy memory; `_base` points to
the root base and `_view_chain` lists the (primitive, attrs) steps that re-derive the view
from the base. After an in-place op through another view rebased the base's grad_fn, a
view's `grad_fn` is regenerated lazily by replaying the chain (as PyTorch does).
"""
import threading

import numpy as np

from . import _dtype as D
from . import _effects, _mode
from ._effects import _get_hook
from ._errors import TracegradRuntimeError, TracegradTypeError, op_error


_new = object.__new__


class _layers:
    """What the layers above the Tensor type install here at import (Note [Layers]):
    `record` from _dispatch.py (re-deriving a view's grad_fn) and `AccumulateGrad` from
    autograd/graph.py (a leaf's gradient sink). The Tensor type never imports them, so
    the package's imports point one way, downwards."""
    record = None
    AccumulateGrad = None


def stale_view_check(view):
    """Refuse a view taken before its base's shape changed in place (Note [Shape changed in
    place] in ops/inplace_shape.py): its view chain is relative to the old shape, so the
    gradient it would derive is wrong; loudly, where PyTorch computes."""
    base = view._base
    if base is not None and view._base_epoch != base._shape_epoch:
        from ._errors import TracegradNotImplementedError
        raise op_error(TracegradNotImplementedError, "view",
                       "this view was taken before its base's shape changed in place (t_(), "
                       "transpose_(), unsqueeze_(), squeeze_(), as_strided_(), resize_()); "
                       "its gradient cannot be derived from the base's new shape.",
                       "Take the view after the in-place shape change, or use the "
                       "out-of-place op (`y = y.t()`).")


class VersionCounter:
    """Shared by a tensor and all its views (and `detach()` results); bumped by in-place ops."""

    __slots__ = ("v",)

    def __init__(self):
        self.v = 0


class Tensor:
    """A multi-dimensional array with PyTorch autograd semantics."""

    __slots__ = ("_data", "_vc", "_rg", "_grad_fn", "_base", "_output_nr", "_inference",
                 "__weakref__", "__dict__")
    __array_priority__ = 1000          # make numpy defer to our reflected operators
    # Set only on leaves or views: class-level defaults, kept in the instance dict once
    # set, so that creating a tensor (twice or so per op) does not write them.
    _grad = None
    _accum = None                      # the leaf's AccumulateGrad node
    _retains_grad = False
    _owned = False                     # a fresh gradient AccumulateGrad may adopt
    _view_chain = ()
    _fn_version = 0
    _shape_epoch = 0                   # in-place shape changes of this base (inplace_shape.py)
    _base_epoch = 0                    # a view: its base's _shape_epoch when it was taken
    _multi_view = None                 # (function, output number): Note [Multi-output views]

    @staticmethod
    def _wrap(data, requires_grad=False, grad_fn=None):
        t = _new(Tensor)
        t._data = data
        t._vc = vc = _new(VersionCounter)     # = VersionCounter(), without a Python-level call
        vc.v = 0
        t._rg = requires_grad
        t._grad_fn = grad_fn
        t._base = None
        t._output_nr = 0
        t._inference = False
        return t

    # `Tensor(data)` / `Tensor(2, 3)` (legacy constructors): see _legacy.py.

    # -- requires_grad: settable only where PyTorch allows it --
    @property
    def requires_grad(self):
        if _get_hook() is not None:
            _effects.attr_read(self, "requires_grad", self._rg)
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag):
        before = self._rg
        self._set_requires_grad(flag)
        if self._rg != before:               # the effect `requires_grad_` records
            _effects.note("requires_grad_", f"requires_grad = {flag!r}", self, eager=False)

    def _set_requires_grad(self, flag, op="requires_grad_"):
        flag = bool(flag)
        if self._grad_fn is not None and not flag:
            raise op_error(TracegradRuntimeError, op,
                           "you can only change requires_grad flags of leaf variables.",
                           "If you want to use a computed variable in a subgraph that doesn't "
                           "require differentiation use var_no_grad = var.detach().")
        if flag and not D.is_float_np(self._data.dtype):
            raise op_error(TracegradRuntimeError, op,
                           "only Tensors of floating point dtype can require gradients.",
                           "Convert first, e.g. `x.float()`.")
        if flag and self._inference and not _mode.inference_enabled():
            raise op_error(TracegradRuntimeError, op,
                           "Setting requires_grad=True on inference tensor outside "
                           "InferenceMode is not allowed.", "Clone it first.")
        self._rg = flag

    @property
    def grad(self):
        g = self._grad
        if _get_hook() is not None:          # inside a trace: `.grad` is read per call
            _effects.grad_read(self, g)
        if g is None and self._grad_fn is not None and not self._retains_grad:
            # PyTorch warns: a non-leaf's .grad is never populated unless retain_grad().
            import warnings
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during autograd.backward(). If you "
                "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                ".retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
                "mistake, make sure you access the leaf Tensor instead.", UserWarning,
                stacklevel=2)
        return g

    @grad.setter
    def grad(self, value):
        if value is not None:
            _check_grad(self, value)
        old, self._grad = self._grad, value
        if _get_hook() is not None:
            _effects.grad_set(self, old)

    # -- basic attributes --
    @property
    def shape(self):
        if _get_hook() is not None:
            _effects.attr_read(self, "shape", self._data.shape)
        return Size(self._data.shape)

    @property
    def dtype(self):
        if _get_hook() is not None:
            _effects.attr_read(self, "dtype", self._data.dtype)
        return D._FROM_NP[self._data.dtype]

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def is_leaf(self):
        if _get_hook() is not None:
            _effects.attr_read(self, "grad_fn", type(self._grad_fn))
        return self._grad_fn is None

    @property
    def grad_fn(self):
        b = self._base
        if b is not None and self._fn_version != self._vc.v and b.requires_grad:
            self._regenerate()
        if _get_hook() is not None:
            _effects.attr_read(self, "grad_fn", type(self._grad_fn))
        return self._grad_fn

    @property
    def _version(self):
        if _get_hook() is not None:
            _effects.attr_read(self, "_version", self._vc.v)
        return self._vc.v

    @property
    def output_nr(self):
        return self._output_nr

    @property
    def is_cuda(self):
        return False

    def _regenerate(self):
        """Re-derive this view's grad_fn from its base's current grad_fn (see Note)."""
        record = _layers.record
        base = self._base
        stale_view_check(self)
        self._fn_version = self._vc.v
        if not base.requires_grad:
            return
        cur = base
        for prim, attrs in self._view_chain:
            nxt = Tensor._wrap(prim.kernel(cur._data, **attrs))
            record(prim, (cur,), attrs, nxt, (True,))
            cur = nxt
        self._grad_fn = cur._grad_fn
        self._output_nr = 0
        self._rg = True

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self._data.shape[_wrap_dim(dim, self._data.ndim, "size")]

    def dim(self):
        return self._data.ndim

    def numel(self):
        return int(self._data.size)

    def nelement(self):
        return int(self._data.size)

    def element_size(self):
        return self._data.itemsize

    def is_floating_point(self):
        return D.is_float_np(self._data.dtype)

    def is_inference(self):
        return self._inference

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __hash__(self):
        return id(self)

    def __repr__(self):
        from ._format import default_suffixes, format_tensor
        fn = self.grad_fn
        suffixes = default_suffixes(self._data, D.get_default_dtype().np,
                                    requires_grad=self.requires_grad and fn is None,
                                    grad_fn_name=fn.name() if fn is not None else None)
        return format_tensor(self._data, suffixes)

    __str__ = __repr__


class Size(tuple):
    """A tensor shape: a tuple that prints as `torch.Size([2, 3])`."""

    def __repr__(self):
        return f"torch.Size({list(self)})"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


def _wrap_dim(dim, ndim, op):
    n = max(ndim, 1)
    if not -n <= dim < n:
        from ._errors import TracegradIndexError
        raise op_error(TracegradIndexError, op,
                       f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                       f"but got {dim})")
    return dim % n


def edge_of(t):
    """The graph edge a gradient for `t` flows into: its grad_fn, or its leaf accumulator."""
    fn = t._grad_fn if t._base is None else t.grad_fn
    if fn is not None:
        return (fn, t._output_nr)
    return (accumulator(t), 0)


def accumulator(t):
    """The (cached) AccumulateGrad node of leaf `t` (owned by `t`; it refers back weakly)."""
    acc = t._accum
    if acc is None:
        AccumulateGrad = _layers.AccumulateGrad
        # Created under a lock so threads never hold two live accumulators (two locks) for
        # one leaf at the same time.
        with _ACCUM_LOCK:
            acc = t._accum
            if acc is None:
                # The tensor owns its accumulator; the accumulator refers back weakly, so
                # no cycle forms and it is built once per leaf, not once per backward.
                acc = AccumulateGrad(t)
                t._accum = acc
                hooks = t.__dict__.get("_leaf_hooks")
                if hooks is not None:
                    acc.pre_hooks = {0: hooks}
    return acc


_ACCUM_LOCK = threading.Lock()


def from_array(arr, requires_grad=False):
    """Wrap a numpy array (no copy) into a Tensor; maps unsupported numpy dtypes."""
    arr = np.asarray(arr)
    if arr.dtype not in D._FROM_NP:
        raise TypeError(f"can't convert np.ndarray of type {arr.dtype}")
    t = Tensor._wrap(arr)
    if _mode.inference_enabled():
        t._inference = True
    hook = _get_hook()
    if hook is not None:
        hook.__self__.constant(t)
    if requires_grad:
        check_factory_requires_grad(t)
        t._set_requires_grad(True)
    return t


def check_factory_requires_grad(t, op="tensor"):
    """A factory's `requires_grad=True` on a non-floating result: PyTorch's wording there,
    which differs from `requires_grad_()`'s."""
    if not D.is_float_np(t._data.dtype):
        raise op_error(TracegradRuntimeError, op, "Only Tensors of floating point and complex "
                       "dtype can require gradients",
                       "Pass a floating dtype, or drop requires_grad=True.")


# PyTorch's names of dtypes in `.grad` assignment errors: (the gradient's, the tensor's)
_GRAD_DTYPE_NAMES = {"float32": ("float", "Float"), "float64": ("double", "Double"),
                     "float16": ("c10::Half", "Half"), "int64": ("long int", "Long"),
                     "int32": ("int", "Int"), "int16": ("short int", "Short"),
                     "int8": ("signed char", "Char"), "uint8": ("unsigned char", "Byte"),
                     "bool": ("bool", "Bool")}


def _check_grad(t, g):
    """`t.grad = g` is checked as PyTorch checks it: a Tensor of t's size and dtype."""
    if not isinstance(g, Tensor):
        raise op_error(TracegradTypeError, "grad", "assigned grad expected to be a Tensor or None but "
                       f"got grad of type {type(g).__name__}")
    if g._data.shape != t._data.shape:
        raise op_error(TracegradRuntimeError, "grad",
                       f"attempting to assign a gradient of size '{list(g._data.shape)}' to a "
                       f"tensor of size '{list(t._data.shape)}'. Please ensure that the "
                       "gradient and the tensor are the same size")
    if g._data.dtype != t._data.dtype:
        name = _GRAD_DTYPE_NAMES.get(g._data.dtype.name, (g._data.dtype.name,))[0]
        own = _GRAD_DTYPE_NAMES.get(t._data.dtype.name, (None, t._data.dtype.name))[1]
        raise op_error(TracegradRuntimeError, "grad",
                       f"attempting to assign a gradient with dtype '{name}' to a tensor with "
                       f"grad_dtype '{own}'. The gradient must match the tensor's grad_dtype "
                       "(defaults to the tensor's dtype).")
