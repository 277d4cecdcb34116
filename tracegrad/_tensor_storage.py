"""Storage-level facts about a tensor and copying it whole: `stride`, `storage_offset`,
`is_contiguous`, `data_ptr`, and the deepcopy protocol.

A tensor's storage is the numpy buffer at the root of its `.base` chain; strides and offsets
are counted in elements, as PyTorch counts them. `copy.deepcopy` follows PyTorch: only leaves
can be copied; tensors that share storage (a tensor and its views) share it in the copy too
(with one version counter, so in-place checks still see writes through either); `requires_grad`,
`.grad` and user attributes are copied.

Note [Copying and pickling a tensor]
`copy.copy(t)` and `pickle` follow PyTorch too: the result is a new leaf (no history, no
`.grad`) with `t`'s `requires_grad` and user attributes; `copy.copy` shares `t`'s storage
(it is `t.detach()`, flagged again), a pickle carries a copy of the values. Both go through
dispatch or a value read, never around it: Python's default protocol for `__slots__`
classes builds an empty tensor (recorded by a trace as a 0-element constant) and then
overwrites its slots, which a trace never sees, so a compiled call computed with an
empty array. Inside a trace, `copy.copy` is traced as `detach`, and pickling reads every
value (a guard, as `t.numpy()` is) and unpickling makes a constant; `copy.deepcopy` (of
a module, say) copies by a traced `clone`, for Parameters too (nn/parameter.py).
"""
import copy

import numpy as np

from . import _effects
from ._errors import TracegradRuntimeError, op_error
from ._tensor import Tensor, VersionCounter, _wrap_dim


# Types of `.base` of an array owning its memory (none, or a buffer that is no array), so
# `_root` is the array itself: generated checks test this first and skip the call (backends
# register their own: adopt.py's `_Held`)
OWNER_BASES = {type(None), bytearray}


def _root(a):
    """The array owning `a`'s memory (numpy's `.base` chain), or `a` itself."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _address(a):
    return a.__array_interface__["data"][0]


def stride(self, dim=None):
    """Steps in elements between neighbours along each dimension (a tuple), or along `dim`."""
    d = self._data
    st = tuple(s // d.itemsize for s in d.strides)
    _effects.attr_read(self, "stride", st)  # Note [Layout read by Python] in _effects.py
    if dim is None:
        return st
    return st[_wrap_dim(dim, d.ndim, "stride")]


def storage_offset(self):
    """Where this tensor starts in its storage, in elements."""
    d = self._data
    off = (_address(d) - _address(_root(d))) // d.itemsize
    _effects.attr_read(self, "storage_offset", off)
    return off


def is_contiguous(self, memory_format=None):
    """True when the elements lie in row-major order without gaps (as `contiguous()` makes)."""
    return bool(self._data.flags.c_contiguous)


def data_ptr(self):
    """Address of the first element."""
    a = _address(self._data)
    _effects.attr_read(self, "data_ptr", a)
    return a


def __deepcopy__(self, memo):
    if id(self) in memo:
        return memo[id(self)]
    if self._grad_fn is not None:
        raise op_error(TracegradRuntimeError, "deepcopy",
                       "Only Tensors created explicitly by the user (graph leaves) support the "
                       "deepcopy protocol at the moment.",
                       "Copy a leaf, or `.detach()` the tensor first.")
    d = self._data
    root = _root(d)
    if _effects.trace_hook.get() is not None:    # Note [Copying and pickling a tensor]
        new = _traced_deepcopy(self, memo, d, root)
        if new is not None:
            return new
    return _storage_deepcopy(self, memo, d, root)


def _storage_deepcopy(self, memo, d, root):
    """Eager's copy: tensors sharing storage get copies sharing one new storage."""
    new_root = memo.get(id(root))
    if new_root is None:                 # the first tensor of this storage: copy it all
        new_root = memo[id(root)] = root.copy(order="A")
        memo.setdefault(id(memo), []).append(root)   # keep alive: ids must stay unique
    off = _address(d) - _address(root)
    data = np.ndarray(d.shape, d.dtype, buffer=new_root, offset=off, strides=d.strides) \
        if new_root.flags.c_contiguous or new_root.flags.f_contiguous else d.copy()
    new = Tensor._wrap(data)
    new.__class__ = type(self)
    vc = memo.get(id(self._vc))
    if vc is None:
        vc = memo[id(self._vc)] = VersionCounter()
        vc.v = self._vc.v
    new._vc = vc
    new._inference = self._inference
    if self._rg:
        new._rg = True
    memo[id(self)] = new
    if self._grad is not None:
        new._grad = copy.deepcopy(self._grad, memo)
    for k, v in self.__dict__.items():
        if k not in ("_grad", "_accum", "_leaf_hooks", "_base", "_view_chain", "_fn_version",
                     "_base_epoch"):
            new.__dict__[k] = copy.deepcopy(v, memo)
    return new


_INTERNAL = ("_grad", "_accum", "_leaf_hooks", "_base", "_view_chain", "_fn_version",
             "_retains_grad", "_owned", "_shape_epoch", "_base_epoch")


def _user_state(t):
    return {k: v for k, v in t.__dict__.items() if k not in _INTERNAL}


def __copy__(self):
    """`copy.copy(t)` (Note [Copying and pickling a tensor])."""
    new = self.detach()
    if type(self) is not Tensor:
        new.__class__ = type(self)
    if self._rg:
        new.requires_grad_(True)
    new.__dict__.update(_user_state(self))
    return new


def __reduce_ex__(self, proto):
    """`pickle.dumps(t)` (Note [Copying and pickling a tensor])."""
    data = np.array(self.__array__(), copy=True)   # a value read (a guard inside a trace)
    return (_rebuild, (type(self), data, self._rg, _user_state(self)))


def _rebuild(cls, data, requires_grad, state):
    from .ops.creation import tensor
    t = tensor(data)
    if cls is not Tensor:
        t.__class__ = cls
    if requires_grad:
        t.requires_grad_(True)
    t.__dict__.update(state)
    return t


_TRACED_ROOTS = object()       # memo[id(_TRACED_ROOTS)]: storages one traced deepcopy met


def _traced_deepcopy(self, memo, d, root):
    """`copy.deepcopy(t)` inside a trace: the values copied by a traced `clone`, so a
    compiled call copies its own values. An alias of its whole storage (`p.detach()`, what
    `state_dict()` holds: the transfer-learning tutorial's
    `copy.deepcopy(model.state_dict())`) copies so when no other tensor of that deepcopy
    shares the storage. Otherwise (a view, storage shared) None: eager's copy, whose
    storage sharing a traced copy would not keep, and such calls run eagerly."""
    roots = memo.setdefault(id(_TRACED_ROOTS), set())
    whole = (d.shape == root.shape and d.strides == root.strides and d.dtype == root.dtype
             and _address(d) == _address(root) and root.flags.c_contiguous)
    if not whole or id(root) in roots:
        _effects.note("deepcopy", "copy.deepcopy of a view (its copy shares storage with "
                      "the copies of its base, which a traced copy does not keep)")
        roots.add(id(root))
        return None                      # eager's copy: this (tracing) call equals eager
    roots.add(id(root))
    new = self.detach().clone()
    if type(self) is not Tensor:
        new.__class__ = type(self)
    if self._rg:
        new.requires_grad_(True)
    memo[id(self)] = new
    memo[id(root)] = new._data           # a later copy sharing the storage views this one
    memo.setdefault(id(memo), []).append(root)
    if self._grad is not None:
        new._grad = copy.deepcopy(self._grad, memo)
    for k, v in _user_state(self).items():
        new.__dict__[k] = copy.deepcopy(v, memo)
    return new


Tensor.__copy__ = __copy__
Tensor.__reduce_ex__ = __reduce_ex__
Tensor.stride = stride
Tensor.storage_offset = storage_offset
Tensor.is_contiguous = is_contiguous
Tensor.data_ptr = data_ptr
Tensor.__deepcopy__ = __deepcopy__
