"""Containers: `Sequential` (chains children) and `ModuleList` (holds them).

Children are registered under the string keys "0", "1", ..., so parameter names and
state_dict keys match PyTorch (`0.weight`, `1.bias`, ...).
"""
import operator
from collections import OrderedDict

from .._errors import TracegradIndexError
from .module import Module


class _IndexedModules(Module):
    """Integer-indexed children with list-like access (shared by the containers)."""

    def _key(self, idx):
        idx = operator.index(idx)
        n = len(self._modules)
        if not -n <= idx < n:
            raise TracegradIndexError(f"index {idx} is out of range")
        return list(self._modules)[idx % n]

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self._sliced(list(self._modules.items())[idx])
        return self._modules[self._key(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in list(self._modules)[idx]:
                del self._modules[k]
        else:
            del self._modules[self._key(idx)]
        self._renumber()

    def _renumber(self):
        mods = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)


class Sequential(_IndexedModules):
    """Applies its children in order: `Sequential(Linear(3, 4), ReLU())(x)`.

    Also accepts an `OrderedDict` of named children.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def _sliced(self, items):
        return Sequential(OrderedDict(items))      # keeps the original keys, as torch does

    def forward(self, input):
        for m in self:
            input = m(input)
        return input


class ModuleList(_IndexedModules):
    """A list of modules whose parameters the parent module sees."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _sliced(self, items):
        return ModuleList(m for _, m in items)

    def __repr__(self):
        """PyTorch's form: runs of equal consecutive children print once, as
        `(0-5): 6 x TransformerEncoderLayer(...)`."""
        from ._module_helpers import _indent
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []                               # [first, last, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [_indent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2)
                 for a, b, r in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"
