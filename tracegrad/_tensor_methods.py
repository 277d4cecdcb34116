"""Tensor methods and operators, attached to `Tensor` from the op functions.

Every method is a thin call into an op function (which dispatches a primitive); operators
map to the same functions, in-place operators to the in-place primitives.
"""
import sys

import numpy as np

from . import _dtype as D
from . import _mode
from . import ops as O
from . import _effects, _func_levels
from ._dispatch import dispatch, trace_hook
from ._errors import TracegradRuntimeError, TracegradTypeError, TracegradValueError, op_error
from ._tensor import Tensor, accumulator, from_array
from .ops import elementwise as E
from .ops import shape as S
from .autograd.graph import RemovableHandle, hooked
from .autograd.post_accumulate import PostAccumulateHook


def _attach(names, module=O):
    for n in names:
        setattr(Tensor, n, getattr(module, n))


_attach("""exp log log1p log2 expm1 sqrt rsqrt sin cos tanh sigmoid relu abs sign neg negative reciprocal
erf pow clamp clip maximum minimum floor ceil round sum mean prod amax amin max min argmax argmin
norm var std logsumexp softmax log_softmax matmul mm bmm dot outer einsum expand broadcast_to
view reshape flatten squeeze unsqueeze permute transpose swapaxes t contiguous repeat split
chunk unbind narrow select add sub mul div floor_divide remainder square any all eq ne lt le gt
ge logical_and logical_or logical_not bitwise_not isnan nonzero lerp equal isclose allclose isinf
isfinite isposinf isneginf roll diag nan_to_num xlogy fmod bincount bernoulli trunc tan asin acos
atan sinh cosh asinh acosh atanh log10 atan2 arcsin arccos arctan arcsinh arccosh arctanh arctan2
logaddexp logaddexp2 clamp_min clamp_max nansum nanmean count_nonzero addcmul addcdiv logit median
quantile rot90 fliplr flipud movedim moveaxis tile kron diff masked_select unique
diagonal""".split())
from .ops import special_prim as _SP  # noqa: E402
_attach("lgamma digamma erfc erfinv mvlgamma lgamma_ digamma_ erfc_ erfinv_ erf_ polygamma_ "
        "mvlgamma_".split(), _SP)
Tensor.polygamma = _SP.polygamma_method
from .ops import special_more as _SM  # noqa: E402
_attach("sinc sinc_ exp2".split(), _SM)
from .ops import special_bessel as _SB  # noqa: E402
_attach(["i0", "i0_"], _SB)
from .ops.mode import mode as _mode_op  # noqa: E402
Tensor.mode = _mode_op
from .ops.composite_more import nan_to_num_ as _nan_to_num_  # noqa: E402
Tensor.nan_to_num_ = _nan_to_num_
from .ops.fmod_prim import fmod_ as _fmod_  # noqa: E402
Tensor.fmod_ = _fmod_
from .ops import random_fill as _fill  # noqa: E402
for _name in ("normal_", "uniform_", "bernoulli_", "exponential_", "geometric_", "random_",
              "cauchy_", "log_normal_"):
    setattr(Tensor, _name, getattr(_fill, _name))
from .ops.diagonal_view import fill_diagonal_ as _fill_diagonal_  # noqa: E402
from .ops import index_writes as _IP  # noqa: E402
_attach("index_put_ index_put index_fill_ index_fill index_copy_ index_copy".split(), _IP)
Tensor.fill_diagonal_ = _fill_diagonal_
from .ops import shift_prim as _SH  # noqa: E402
_attach("bitwise_left_shift bitwise_right_shift bitwise_left_shift_ bitwise_right_shift_".split(),
        _SH)
from .ops import composite_missing as _CM  # noqa: E402
_attach("sgn sgn_ frac frac_ fmax fmin swapdims swapdims_ lerp_ addcmul_ addcdiv_".split(), _CM)
Tensor.swapaxes_ = _CM.swapdims_
from .ops.scatter_reduce import scatter_reduce as _srd, scatter_reduce_ as _srd_  # noqa: E402
Tensor.scatter_reduce, Tensor.scatter_reduce_ = _srd, _srd_
from .ops.as_strided import as_strided as _as_strided, as_strided_ as _as_strided_  # noqa: E402
from .ops.as_strided import resize_ as _resize_  # noqa: E402
Tensor.as_strided, Tensor.as_strided_, Tensor.resize_ = _as_strided, _as_strided_, _resize_
from .ops import inplace_shape as _IS  # noqa: E402
_attach("t_ transpose_ unsqueeze_ squeeze_".split(), _IS)
Tensor._is_view = lambda self: self._base is not None
Tensor.where = lambda self, condition, other: E.where(condition, self, other)
Tensor.multiply, Tensor.subtract, Tensor.divide, Tensor.true_divide = E.mul, E.sub, E.div, E.div
Tensor.greater, Tensor.less, Tensor.absolute = E.gt, E.lt, E.abs
Tensor.sum_to_size = lambda self, *size: S.sum_to(self, S._shape_args(size))
from .ops import inplace_more as _IM  # noqa: E402
for _name, _fn in _IM.METHODS.items():       # abs_, sqrt_, eq_, cumsum_, ... (write_result)
    setattr(Tensor, _name, _fn)
from .ops import aliases as _AL  # noqa: E402
_AL.install(Tensor)                          # ravel, positive, msort, nbytes, mH, ...


def _inplace(prim):
    def method(self, *args, **attrs):
        return dispatch(prim, (self,) + args, attrs)
    method.__name__ = prim.name
    return method


Tensor.add_ = lambda self, other, *, alpha=1: dispatch(
    E.ADD_, (self, other if alpha == 1 else E.mul(other, alpha)))
Tensor.sub_ = lambda self, other, *, alpha=1: dispatch(
    E.SUB_, (self, other if alpha == 1 else E.mul(other, alpha)))
Tensor.mul_ = _inplace(E.MUL_)


def _div_(self, other, *, rounding_mode=None):
    """`div_`; with a `rounding_mode` ("trunc" / "floor") as `divide_`."""
    if rounding_mode is None:
        return dispatch(E.DIV_, (self, other))
    from .ops.inplace_more import divide_
    return divide_(self, other, rounding_mode=rounding_mode)


Tensor.div_ = _div_
Tensor.pow_ = E.pow_
Tensor.exp_ = _inplace(E.EXP_)
Tensor.relu_ = _inplace(E.RELU_)
Tensor.sigmoid_ = _inplace(E.SIGMOID_)
Tensor.tanh_ = _inplace(E.TANH_)
Tensor.neg_ = _inplace(E.NEG_)
Tensor.log1p_ = _inplace(E.LOG1P_)
Tensor.log2_ = _inplace(E.LOG2_)
Tensor.expm1_ = _inplace(E.EXPM1_)


def clamp_(self, min=None, max=None):
    """`clamp` in place, its bounds checked as `clamp` checks them; a float bound on an
    integer or bool tensor raises PyTorch's cast error (the result would be floating)."""
    if min is None and max is None:
        raise op_error(TracegradRuntimeError, "clamp_",
                       "torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        from .ops.clamp_tensor import clamp_tensor_
        return clamp_tensor_(self, min, max)
    min, max = (D.python_number(v) if isinstance(v, np.generic) else v for v in (min, max))
    attrs = E._clamp_attrs(min, max)
    if self.dtype.category < 2:
        if any(isinstance(v, float) for v in (min, max)):
            raise op_error(TracegradRuntimeError, "clamp_",
                           f"result type {D.scalar_type_name(D.get_default_dtype())} can't be "
                           "cast to the desired output type "
                           f"{D.scalar_type_name(self.dtype)}.",
                           "Convert the tensor first, e.g. `x = x.float()`.")
    E._check_int_bounds(self.dtype, min, max)
    return dispatch(E.CLAMP_, (self,), attrs)


def zero_(self):
    S.setitem(self, Ellipsis, 0, prim=S.ZERO_)
    return self


def fill_(self, value):
    """Fill with `value` in place (a differentiable op: the old values get zero gradient)."""
    if isinstance(value, Tensor) and value.ndim != 0:
        raise op_error(TracegradRuntimeError, "fill_",
                       "fill_ only supports 0-dimension value tensor but got tensor with "
                       f"{value.ndim} dimensions.", "Use copy_(value) to broadcast a tensor.")
    # a 0-dim tensor value keeps its gradient
    S.setitem(self, Ellipsis, value, prim=S.FILL_TENSOR_ if isinstance(value, Tensor) else S.FILL_)
    return self


def copy_(self, src, non_blocking=False):
    """Copy `src` (broadcast, converted) into self in place."""
    S.setitem(self, Ellipsis, src if isinstance(src, Tensor) else from_array(np.asarray(src)),
              prim=S.COPY_)
    return self


Tensor.clamp_ = clamp_
Tensor.clip_ = clamp_
Tensor.zero_ = zero_
Tensor.fill_ = fill_
Tensor.copy_ = copy_


# ---- operators ----
def _rev(f):
    return lambda self, other: f(other, self)


Tensor.__add__ = E.add
Tensor.__radd__ = _rev(E.add)
Tensor.__sub__ = E.sub
Tensor.__rsub__ = E.rsub
Tensor.__mul__ = E.mul
Tensor.__rmul__ = _rev(E.mul)
Tensor.__truediv__ = E.div
Tensor.__rtruediv__ = lambda self, other: E.mul(E.reciprocal(self), other)  # as torch does
Tensor.__floordiv__ = E.floor_divide
Tensor.__rfloordiv__ = _rev(E.floor_divide)
Tensor.__mod__ = E.remainder
Tensor.__rmod__ = _rev(E.remainder)
Tensor.__pow__ = E.pow
Tensor.__rpow__ = _rev(E.pow)
Tensor.__matmul__ = lambda self, other: O.matmul(self, _tensorize(other))
Tensor.__rmatmul__ = lambda self, other: O.matmul(_tensorize(other), self)
Tensor.__neg__ = E.neg
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = E.abs
Tensor.__invert__ = E.bitwise_not
Tensor.__and__ = E.bitwise_and
Tensor.__rand__ = _rev(E.bitwise_and)
Tensor.__or__ = E.bitwise_or
Tensor.__ror__ = _rev(E.bitwise_or)
Tensor.__xor__ = E.bitwise_xor
Tensor.__rxor__ = _rev(E.bitwise_xor)
Tensor.__lshift__ = _SH.bitwise_left_shift
Tensor.__rlshift__ = _rev(_SH.bitwise_left_shift)
Tensor.__rshift__ = _SH.bitwise_right_shift
Tensor.__rrshift__ = _rev(_SH.bitwise_right_shift)
Tensor.__ilshift__ = _SH.bitwise_left_shift_
Tensor.__irshift__ = _SH.bitwise_right_shift_
Tensor.__eq__ = E.eq
Tensor.__ne__ = E.ne
Tensor.__lt__ = E.lt
Tensor.__le__ = E.le
Tensor.__gt__ = E.gt
Tensor.__ge__ = E.ge
Tensor.__iadd__ = lambda self, other: self.add_(other)
Tensor.__isub__ = lambda self, other: self.sub_(other)
Tensor.__imul__ = lambda self, other: self.mul_(other)
Tensor.__itruediv__ = lambda self, other: self.div_(other)
Tensor.__getitem__ = S.getitem
Tensor.__setitem__ = S.setitem


def _tensorize(x):
    if isinstance(x, Tensor):
        return x
    return from_array(np.asarray(x))


# ---- conversions to Python ----
def _scalar(self, op):
    if self._data.size != 1 and op in ("float", "int"):     # PyTorch: ValueError here
        raise op_error(TracegradValueError, op,
                       "only one element tensors can be converted to Python scalars",
                       "Reduce it first (e.g. `.sum()`), or index one element.")
    if self._data.size != 1:
        raise op_error(TracegradRuntimeError, op,
                       f"a Tensor with {self._data.size} elements cannot be converted to Scalar",
                       "Reduce it first (e.g. `.sum()`), or index one element.")
    return _observe(self, op, self._data.reshape(()).item())


def _scalar_value(self, op):
    """`_scalar`'s checks and value, observing nothing (the caller decides)."""
    if self._data.size != 1:
        _scalar(self, op)                    # raises the same errors
    return self._data.reshape(()).item()


def _observe(t, kind, result):
    """Python took a concrete value from `t`: under a tracer this becomes a guard."""
    hook = trace_hook.get()
    if hook is not None:
        if _func_levels.batched_tensors():
            _vmap_check(hook, t, kind)
        hook.__self__.observe(t, kind, result)
    return result


def _vmap_check(hook, t, kind):
    """Note [Numbers from batched values] (func/_vmap_scalars.py), for reads user code makes."""
    from .func import _vmap_scalars
    if kind not in _vmap_scalars.KINDS:
        return
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename == __file__:
        f = f.f_back
    if f is not None and _effects._is_user_frame(f):
        _vmap_scalars.check(hook.__self__, t, kind)


def item(self):
    """The single value as a Python number.

    Inside a compiled function's trace, a floating tensor's value may come back as a
    `Number` read per call (Note [Numbers taken from tensors] in tracing/numbers.py)."""
    hook = trace_hook.get()
    if hook is None:
        d = self._data
        return d.reshape(()).item() if d.size == 1 else _scalar(self, "item")
    tracer = hook.__self__
    if not getattr(tracer, "item_numbers", False) or not _effects._is_user_frame(
            sys._getframe(1)):           # tracegrad's own `.item()`s keep their guards
        return _scalar(self, "item")
    return _item_number(hook, tracer, self)


def item_for_user(t):
    """`t.item()` of a value a library method hands straight back to its caller as the
    user's own `.item()` would (`GradScaler.get_scale()`): inside a compiled function's
    trace, a `Number` read per call rather than a guard on the value (Note [Numbers taken
    from tensors] in tracing/numbers.py), so a scale that grows every few hundred steps
    does not re-trace the step each time."""
    hook = trace_hook.get()
    if hook is None or not getattr(hook.__self__, "item_numbers", False):
        return t.item()
    return _item_number(hook, hook.__self__, t)


def _item_number(hook, tracer, self):
    value = _scalar_value(self, "item")
    if _func_levels.batched_tensors():
        _vmap_check(hook, self, "item")
    return tracer.item_number(self, value)


def _bool(self):
    if self._data.size != 1:
        raise op_error(TracegradRuntimeError, "bool",
                       f"Boolean value of Tensor with more than one value is ambiguous",
                       "Use .any() or .all().")
    return _observe(self, "bool", bool(self._data.reshape(()).item()))


Tensor.item = item
Tensor.__bool__ = _bool
Tensor.__float__ = lambda self: float(_scalar(self, "float"))
Tensor.__int__ = lambda self: int(_scalar(self, "int"))


def _index(self):
    if self._data.dtype.kind not in "iub" or self._data.size != 1:
        raise op_error(TracegradTypeError, "__index__",
                       "only integer tensors of a single element can be converted to an index")
    return _observe(self, "int", int(self._data.reshape(()).item()))


Tensor.__index__ = _index
Tensor.__iter__ = lambda self: iter(self.unbind(0)) if self.ndim else _iter0()


def _iter0():
    raise TypeError("iteration over a 0-d tensor")


def tolist(self):
    return _observe(self, "tolist", self._data.tolist())


def numpy(self, *, force=False):
    """The data as a numpy array sharing memory (refused while the tensor requires grad)."""
    if self.requires_grad and not force:
        raise op_error(TracegradRuntimeError, "numpy",
                       "Can't call numpy() on Tensor that requires grad.",
                       "Use tensor.detach().numpy() instead.")
    if trace_hook.get() is not None:
        _effects.numpy_read(self)
    return _observe(self, "numpy", self._data)


def _array(self, dtype=None, copy=None):
    a = self._data
    if trace_hook.get() is not None:         # np.asarray(t): Python reads every value, as
        _effects.numpy_read(self)            # t.numpy() does (a guard, writes reported)
        _observe(self, "numpy", a)
    return a.astype(dtype) if dtype is not None else a


_plain_repr = Tensor.__repr__


def _repr(self):
    hook = trace_hook.get()                  # str(t), f"{t}": Python reads every value
    if hook is not None:
        tracer = hook.__self__
        if not getattr(tracer, "printing", 0):
            _observe(self, "numpy", self._data)
            from . import _format                # the text depends on the print options
            for k in _format.OPTIONS:            # too (Note [Settings read and set])
                _effects.setting_read(vars(_format), k, f"the print option {k.lower()}")
        else:                                # Note [Prints replayed]
            tracer.printed = getattr(tracer, "printed", 0) + 1
    return _plain_repr(self)


def _format(self, spec):
    """`f"{t:.3f}"`: a 0-d tensor formats as its value (as PyTorch does), others as repr."""
    if self._data.ndim == 0:
        return format(self.item(), spec)
    return object.__format__(self, spec)


Tensor.tolist = tolist
Tensor.numpy = numpy
Tensor.__array__ = _array
Tensor.__repr__ = Tensor.__str__ = _repr
Tensor.__format__ = _format


# ---- autograd surface ----
def detach(self):
    """A new tensor sharing storage (and version counter) that does not require grad."""
    return dispatch(S.DETACH, (self,))


def detach_(self):
    if self._base is not None:
        raise op_error(TracegradRuntimeError, "detach_",
                       "Can't detach views in-place. Use detach() instead.")
    if self._rg or self._grad_fn is not None:
        tracer = _effects.active()           # Note [detach_ of an argument]
        if tracer is not None:
            unread = getattr(tracer, "unread_argument", None)
            tracer.note_effect("detach_", "detach_() on a tensor that requires grad", self,
                               not (unread is not None and unread(self)))
    self._grad_fn = None
    self._rg = False
    return self


def requires_grad_(self, requires_grad=True):
    """Set requires_grad in place (leaves only); returns self."""
    before = self._rg
    self._set_requires_grad(requires_grad)
    if self._rg != before:
        _effects.note("requires_grad_", f"requires_grad_({requires_grad})", self, eager=False)
    return self


def retain_grad(self):
    """Keep `.grad` for this non-leaf tensor after backward."""
    if not self.requires_grad:
        raise op_error(TracegradRuntimeError, "retain_grad",
                       "can't retain_grad on Tensor that has requires_grad=False")
    if self.is_leaf or self._retains_grad:
        return
    _effects.note("retain_grad", "retain_grad()", self, eager=False)
    import weakref
    ref = weakref.ref(self)

    def hook(g):
        t = ref()
        if t is not None:
            if t.grad is None:
                # a copy either way (differentiable under create_graph), never an alias
                t.grad = g.clone() if _mode.is_grad_enabled() else from_array(g._data.copy())
            else:
                t.grad = t.grad + g
    last = _Last(hook)
    self.grad_fn._add_pre_hook(self._output_nr, last)
    self._retain_hook = (self.grad_fn, self._output_nr, last)
    self._retains_grad = True


def _move_retain_grad(self):
    """An in-place op gave this tensor a new grad_fn: move its retain_grad hook there (as
    PyTorch does), so `.grad` is the gradient of the tensor's current value."""
    node, nr, last = self.__dict__["_retain_hook"]
    fn = self._grad_fn
    if fn is node or fn is None:
        return
    RemovableHandle(node.pre_hooks.get(nr, []), last).remove()
    fn._add_pre_hook(self._output_nr, last)
    self._retain_hook = (fn, self._output_nr, last)


class _Last:
    """Marks the retain_grad hook so it runs after user hooks (as in PyTorch)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, g):
        self.fn(g)


def register_hook(self, hook):
    """`hook(grad)` runs when this tensor's gradient is computed; may return a new grad."""
    if not self.requires_grad:
        raise op_error(TracegradRuntimeError, "register_hook",
                       "cannot register a hook on a tensor that doesn't require gradient")
    _effects.note("hook", "register_hook()", self)
    hooked()                             # Note [Leaf accumulation order] in engine.py
    if self.is_leaf:
        # The tensor owns its leaf hooks (its AccumulateGrad is only weakly held and may be
        # re-created); `accumulator()` installs this same list on every AccumulateGrad.
        lst = self.__dict__.setdefault("_leaf_hooks", [])
        node = accumulator(self)
        if node.pre_hooks is None:
            node.pre_hooks = {}
        node.pre_hooks[0] = lst
    else:
        node = self.grad_fn
        if node.pre_hooks is None:
            node.pre_hooks = {}
        lst = node.pre_hooks.setdefault(self._output_nr, [])
    pos = next((i for i, f in enumerate(lst) if isinstance(f, _Last)), len(lst))
    lst.insert(pos, hook)
    return RemovableHandle(lst, hook)


def register_post_accumulate_grad_hook(self, hook):
    """`hook(tensor)` runs after backward has accumulated into this leaf's `.grad` (Note
    [Post-accumulate-grad hooks] in autograd/post_accumulate.py)."""
    if not self.requires_grad:
        raise op_error(TracegradRuntimeError, "register_post_accumulate_grad_hook",
                       "cannot register a hook on a tensor that doesn't require gradient")
    if not self.is_leaf:
        raise op_error(TracegradRuntimeError, "register_post_accumulate_grad_hook",
                       "post accumulate grad hooks cannot be registered on non-leaf tensors")
    _effects.note("hook", "register_post_accumulate_grad_hook()", self)
    lst = self.__dict__.setdefault("_leaf_hooks", [])
    node = accumulator(self)
    if node.pre_hooks is None:
        node.pre_hooks = {}
    node.pre_hooks[0] = lst
    post = PostAccumulateHook(hook)
    lst.append(post)
    return RemovableHandle(lst, post)


_autograd_backward = None                # autograd.api.backward, bound on first use
_from_stash = _stash_node = None         # compiler.stash_backward's function and node type


def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Compute gradients of this tensor w.r.t. graph leaves (see autograd.backward)."""
    global _autograd_backward, _from_stash, _stash_node
    if _autograd_backward is None:       # (an import statement per call costs ~1 us)
        from .autograd.api import backward as _autograd_backward
        from .compiler.stash_backward import CompiledFunctionBackward as _stash_node
        from .compiler.stash_backward import backward_from_stash as _from_stash
    fn = self._grad_fn                   # Note [Backward from the stash]
    if type(fn) is _stash_node and gradient is None and retain_graph is None \
            and create_graph is False and inputs is None and fn.stash is not None \
            and _from_stash(self):
        return
    _autograd_backward(self, gradient, retain_graph, create_graph, inputs=inputs)


Tensor.detach = detach
Tensor.detach_ = detach_
Tensor.requires_grad_ = requires_grad_
Tensor.retain_grad = retain_grad
Tensor.register_hook = register_hook
Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook
Tensor.backward = backward
Tensor.retains_grad = property(lambda self: self._retains_grad)
Tensor._move_retain_grad = _move_retain_grad


def _get_data(self):
    hook = trace_hook.get()
    if hook is not None:                 # a tracer must know `.data` aliases self
        t = dispatch(S.DATA, (self,))
        t._vc = type(self._vc)()         # .data does not share the version counter
        return t
    t = Tensor._wrap(self._data)
    t._inference = self._inference
    return t


def _set_data(self, value):
    if not isinstance(value, Tensor):
        raise op_error(TracegradTypeError, "data", "data must be set to a Tensor")
    # the tensor now holds other memory: no trace records that (Note [Effects])
    _effects.note("data_set", "assigning .data", self)
    self._data = value._data


Tensor.data = property(_get_data, _set_data)


# ---- dtype conversion ----
# `to`, `cpu`, `cuda` and `device` live in _tensor_device.py.
Tensor.type_as = lambda self, other: S.to_dtype(self, other.dtype)
Tensor.float = lambda self: S.to_dtype(self, D.float32)
Tensor.double = lambda self: S.to_dtype(self, D.float64)
Tensor.half = lambda self: S.to_dtype(self, D.float16)
Tensor.long = lambda self: S.to_dtype(self, D.int64)
Tensor.int = lambda self: S.to_dtype(self, D.int32)
Tensor.short = lambda self: S.to_dtype(self, D.int16)
Tensor.char = lambda self: S.to_dtype(self, D.int8)
Tensor.byte = lambda self: S.to_dtype(self, D.uint8)
Tensor.bfloat16 = lambda self: S.to_dtype(self, D.bfloat16)
Tensor.bool = lambda self: S.to_dtype(self, D.bool_)
Tensor.clone = S.clone
Tensor.view_as = lambda self, other: S.view(self, tuple(other.shape))
Tensor.reshape_as = lambda self, other: S.reshape(self, tuple(other.shape))
Tensor.expand_as = lambda self, other: S.expand(self, tuple(other.shape))
Tensor.T = property(lambda self: S.permute(self, tuple(range(self.ndim))[::-1]))
Tensor.mT = property(lambda self: S.transpose(self, -2, -1))
Tensor.new_zeros = lambda self, *size, dtype=None, requires_grad=False: O.zeros(
    *size, dtype=dtype or self.dtype, requires_grad=requires_grad)
Tensor.new_ones = lambda self, *size, dtype=None, requires_grad=False: O.ones(
    *size, dtype=dtype or self.dtype, requires_grad=requires_grad)
Tensor.new_tensor = lambda self, data, dtype=None, requires_grad=False: O.tensor(
    data, dtype=dtype or self.dtype, requires_grad=requires_grad)
Tensor.new_full = lambda self, size, fill_value, dtype=None, requires_grad=False: O.full(
    size, fill_value, dtype=dtype or self.dtype, requires_grad=requires_grad)
Tensor.type = lambda self, dtype=None: (
    "torch." + D.tensor_type_name(self._data.dtype) if dtype is None else S.to_dtype(self, dtype))
# selection, ordering, scans and structure (ops/gather_scatter.py, sort.py, scan.py, structure.py, ...)
_attach("""gather scatter scatter_add index_add index_add_ index_select masked_fill masked_fill_ scatter_
scatter_add_ sort argsort topk cumsum cumprod tril triu tril_ triu_ repeat_interleave baddbmm
multinomial""".split())
Tensor.flip = O.structure._flip_method
# solvers of torch.linalg that PyTorch also has as Tensor methods (ops/linalg_solvers.py)
_attach("""inverse det logdet slogdet cholesky_solve matrix_exp pinverse matrix_power
cholesky_inverse""".split())
Tensor.cholesky = lambda self, upper=False: O.cholesky(self, upper)
Tensor.addmm = O.addmm
# linear-algebra composites (ops/linalg_more.py)
from .ops import linalg_more as _LM  # noqa: E402
_attach("""mv addmv addmv_ addr addr_ addbmm addbmm_ baddbmm_ addmm_ inner vdot dist cov corrcoef
trace diag_embed diagflat cross""".split(), _LM)
Tensor.ger = O.ger
# elementwise math (ops/elementwise_more.py)
from .ops import elementwise_more as _EM  # noqa: E402
_attach("""hypot hypot_ copysign copysign_ heaviside heaviside_ gcd gcd_ lcm lcm_ float_power
float_power_ frexp ldexp ldexp_ nextafter nextafter_ signbit deg2rad deg2rad_ rad2deg
rad2deg_""".split(), _EM)
# shape and selection (ops/shape_more.py)
from .ops import shape_more as _SHM  # noqa: E402
_attach("""unfold tensor_split hsplit vsplit dsplit take take_along_dim slice_scatter select_scatter
diagonal_scatter as_strided_scatter aminmax""".split(), _SHM)
# running extremes and NaN-aware order statistics (ops/scan_more.py)
from .ops import scan_more as _SCM  # noqa: E402
_attach("cummax cummin logcumsumexp kthvalue nanmedian nanquantile".split(), _SCM)
# index writes and counting (ops/index_more.py, ops/histograms.py)
from .ops import index_more as _IM, histograms as _HI  # noqa: E402
_attach("""put put_ masked_scatter masked_scatter_ index_reduce index_reduce_ renorm
renorm_""".split(), _IM)
_attach("histc histogram unique_consecutive".split(), _HI)


def _hardshrink(self, lambd=0.5):
    from .nn.functional import hardshrink
    return hardshrink(self, lambd)


def _prelu(self, weight):
    from .nn.functional import prelu
    return prelu(self, weight)


Tensor.hardshrink = _hardshrink
Tensor.prelu = _prelu
# the older decomposition spellings (ops/linalg_legacy.py)
from .ops import linalg_legacy as _LL  # noqa: E402
_attach(["svd", "qr"], _LL)
from .ops import igamma_prim as _IG  # noqa: E402
_attach("igamma igammac igamma_ igammac_".split(), _IG)
from .ops import lu_factorization as _LU  # noqa: E402
Tensor.lu = _LU.lu
Tensor.lu_solve = lambda self, LU_data, LU_pivots: _LU.lu_solve(self, LU_data, LU_pivots)
