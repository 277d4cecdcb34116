"""Storage-level facts about a tensor and copying it whole: `stride`, `storage_offset`,
`is_contiguous`, `data_ptr`, and the deepcopy protocol.

A tensor's storage is the numpy buffer at the root of its `.base` chain; strides and offsets
are counted in elements, as PyTorch counts them. `copy.deepcopy` follows PyTorch: only leaves
can be copied; tensors that share storage (a tensor and its views) share it in the copy too
(with one version counter, so in-place checks still see writes through either); `requires_grad`,
`.grad` and user attributes are copied.
"""
import copy

import numpy as np

from ._errors import TracegradRuntimeError, op_error
from ._tensor import Tensor, VersionCounter, _wrap_dim


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
    if dim is None:
        return st
    return st[_wrap_dim(dim, d.ndim, "stride")]


def storage_offset(self):
    """Where this tensor starts in its storage, in elements."""
    d = self._data
    return (_address(d) - _address(_root(d))) // d.itemsize


def is_contiguous(self, memory_format=None):
    """True when the elements lie in row-major order without gaps (as `contiguous()` makes)."""
    return bool(self._data.flags.c_contiguous)


def data_ptr(self):
    """Address of the first element."""
    return _address(self._data)


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
        if k not in ("_grad", "_accum", "_leaf_hooks", "_base", "_view_chain", "_fn_version"):
            new.__dict__[k] = copy.deepcopy(v, memo)
    return new


Tensor.stride = stride
Tensor.storage_offset = storage_offset
Tensor.is_contiguous = is_contiguous
Tensor.data_ptr = data_ptr
Tensor.__deepcopy__ = __deepcopy__
