"""Keyed and parameter containers: `ModuleDict`, `ParameterList`, `ParameterDict`.

As in PyTorch, they register their entries on themselves: ModuleDict's children under their
keys, ParameterList's parameters under "0", "1", ..., ParameterDict's under their keys, so
`named_parameters()`, `state_dict()` keys and `parameters()` order are PyTorch's. A plain
Tensor stored in a parameter container becomes a Parameter. `ModuleDict.update` keeps a
mapping's order; `ParameterDict.update` sorts a plain (non-ordered) mapping by key, as
PyTorch does.
"""
import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from .._errors import TracegradIndexError, TracegradTypeError, TracegradValueError
from .._tensor import Tensor
from .module import Module
from .parameter import Parameter


def _pairs(values, name):
    """(key, value) pairs of a mapping (ordered as given) or of an iterable of pairs."""
    if isinstance(values, (Mapping, ModuleDict, ParameterDict)):
        return list(values.items())
    if not isinstance(values, Iterable):
        raise TracegradTypeError(f"{name}.update should be called with an iterable of "
                                 f"key/value pairs, but got {type(values).__name__}")
    out = []
    for j, kv in enumerate(values):
        if not isinstance(kv, Iterable):
            raise TracegradTypeError(f"{name} update sequence element #{j} should be "
                                     f"Iterable; is {type(kv).__name__}")
        kv = list(kv)
        if len(kv) != 2:
            raise TracegradValueError(f"{name} update sequence element #{j} has length "
                                      f"{len(kv)}; 2 is required")
        out.append((kv[0], kv[1]))
    return out


class ModuleDict(Module):
    """Child modules by string key: `ModuleDict({'conv': Conv2d(1, 8, 3), 'act': ReLU()})`."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        for key, m in _pairs(modules, "ModuleDict"):
            self[key] = m


def _param(value):
    """A plain Tensor becomes a Parameter (PyTorch's containers do this); others pass."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _describe(p, typename):
    if not isinstance(p, Tensor):
        return f"Object of type: {type(p).__name__}"
    size = "x".join(str(s) for s in p.shape)
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    return f"{kind} containing: [{p.type() if typename else p.dtype} of size {size}]"


class ParameterList(Module):
    """Parameters by position: `ParameterList([Parameter(...), ...])`, keys "0", "1", ..."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _index(self, idx):
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise TracegradIndexError(f"index {idx} is out of range")
        return idx % len(self)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(self._index(idx)))

    def __setitem__(self, idx, param):
        setattr(self, str(self._index(idx)), _param(param))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def append(self, value):
        new = self._size
        self._size += 1
        setattr(self, str(new), _param(value))
        return self

    def extend(self, values):
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TracegradTypeError("ParameterList.extend should be called with an iterable, "
                                     f"but got {type(values).__name__}")
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(f"  ({k}): {_describe(p, False)}" for k, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """Parameters by string key: `ParameterDict({'scale': Parameter(...)})`."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def _attr(self, key):
        if not isinstance(key, str):
            raise TracegradTypeError("Index given to ParameterDict cannot be used as a key as "
                                     f"it is not a string (type is '{type(key).__name__}'). "
                                     "Open an issue on github if you need non-string keys.")
        return key

    def __getitem__(self, key):
        return getattr(self, self._attr(key))

    def __setitem__(self, key, value):
        attr = self._attr(key)
        self._keys[key] = None
        setattr(self, attr, _param(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._attr(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def copy(self):
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def update(self, parameters):
        pairs = _pairs(parameters, "ParametersDict")
        if isinstance(parameters, Mapping) and not isinstance(parameters,
                                                              (OrderedDict, ParameterDict)):
            pairs = sorted(pairs, key=lambda kv: kv[0])
        for k, v in pairs:
            self[k] = v

    def extra_repr(self):
        return "\n".join(f"  ({k}): {_describe(p, True)}" for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")
