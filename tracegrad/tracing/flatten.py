"""`flatten`: a compiled call's outputs (and a traced call's arguments) as leaves plus a
function rebuilding the structure from new leaves, a tiny pytree (Note [Rebuilt outputs]).
"""
import collections
import dataclasses
import enum

import numpy as np

from .._dtype import dtype as DType
from .._effects import is_library_module
from .._tensor import Tensor


def flatten(obj, strict=False):
    """Flatten nested tuples/lists/dicts, namedtuples, tuple subclasses such as `Size`, and
    dataclasses into (leaves, rebuild) (a tiny pytree). Rebuilding makes new containers.

    With `strict` (a compiled call's outputs), sets and frozensets are containers too (a
    new one per call, of that call's items), and a leaf that is neither a tensor nor an
    immutable Python value (a custom object a compiled call would otherwise return, the
    very same one, on every call) raises TypeError naming its type.

    Note [Rebuilt outputs]
    A rebuilt structure is what the function built, object for object: a container met
    twice (`return out, out`, a list in two places of a dict) is one new object met twice;
    a dataclass or a user object is made without running its `__init__` or
    `__post_init__` again (fields set afterwards, `field(init=False)` and attributes
    added later come back as they were); a defaultdict keeps its default factory. A
    container holding itself is refused if `strict` (TypeError), else a leaf; so is, if
    `strict`, a dict keyed by a tensor (its keys are not rebuilt)."""
    leaves = []
    firsts = {}                          # id(container) -> [slot, met again]
    walking = set()

    def shared(x, make):
        """The builder of container `x`, made by `make()`, that also hands the object it
        builds to later occurrences of `x` (Note [Rebuilt outputs])."""
        k = id(x)
        first = firsts.get(k)
        if first is not None:
            first[1] = True
            slot = first[0]
            return lambda it, made: made[slot]
        if k in walking:                 # it contains itself: a leaf (refused if strict)
            if strict:
                raise Unrebuildable(f"a {type(x).__name__} that contains itself")
            leaves.append(x)
            return lambda it, made: next(it)
        walking.add(k)
        build = make()
        walking.discard(k)
        first = firsts[k] = [len(firsts), False]

        def keep(it, made):
            v = build(it, made)
            if first[1]:
                made[first[0]] = v
            return v
        return keep

    def walk(x):
        typ = type(x)
        if isinstance(x, (tuple, list)):
            def make():
                kinds = [walk(i) for i in x]
                if typ in (tuple, list) or not hasattr(x, "_fields"):
                    return lambda it, made: typ(k(it, made) for k in kinds)
                return lambda it, made: typ(*(k(it, made) for k in kinds))   # namedtuples
            return shared(x, make)
        if isinstance(x, dict):
            if strict and any(_holds_tensor(k) for k in x):
                raise Unrebuildable("a dict keyed by a tensor", "its key would be the "
                                    "first call's tensor on every call")

            def make():
                keys = list(x.keys())
                kinds = [walk(x[k]) for k in keys]
                if isinstance(x, collections.defaultdict):
                    factory = x.default_factory
                    return lambda it, made: typ(factory, ((k, f(it, made))
                                                          for k, f in zip(keys, kinds)))
                return lambda it, made: typ((k, f(it, made)) for k, f in zip(keys, kinds))
            return shared(x, make)
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            def make():
                names = list(vars(x)) if hasattr(x, "__dict__") else [
                    f.name for f in dataclasses.fields(x) if hasattr(x, f.name)]
                kinds = [walk(getattr(x, n)) for n in names]
                return lambda it, made: _new_like(typ, {n: k(it, made)
                                                        for n, k in zip(names, kinds)})
            return shared(x, make)
        if strict and isinstance(x, (set, frozenset)):   # a new set per call, built from
            def make():                                  # this call's items
                kinds = [walk(i) for i in x]
                return lambda it, made: typ(k(it, made) for k in kinds)
            return shared(x, make)
        if _plain_object(x):                 # a user class's instance: a new one, rebuilt
            def make():
                names = list(vars(x))
                kinds = [walk(v) for v in vars(x).values()]
                return lambda it, made: _new_like(typ, {n: k(it, made)
                                                        for n, k in zip(names, kinds)})
            return shared(x, make)
        if strict and not isinstance(x, _IMMUTABLE):
            raise Unrebuildable(f"a {typ.__name__} object", "it would return this very "
                                "object, holding the first call's values, on every call")
        leaves.append(x)
        return lambda it, made: next(it)

    build = walk(obj)
    return leaves, lambda new: build(iter(new), {})


class Unrebuildable(TypeError):
    """An output `flatten(strict=True)` cannot rebuild per call; `what` names it."""

    def __init__(self, what, why="a compiled call cannot rebuild it"):
        self.what = what
        super().__init__(f"tracegrad.compile: the function returns {what}, which a compiled "
                         f"call cannot rebuild ({why}). Return tensors, numbers, tuples, "
                         "lists, dicts, namedtuples or dataclasses instead.")


def _holds_tensor(key):
    """Whether a dict key is a tensor or a tuple holding one (made by the call: Note
    [Rebuilt outputs])."""
    return isinstance(key, Tensor) or type(key) is tuple and any(_holds_tensor(k) for k in key)


def _plain_object(x):
    """An instance of a user class holding its state in `__dict__` (no slots, not a
    library type): rebuilt for each compiled call like a dataclass."""
    typ = type(x)
    return (hasattr(x, "__dict__") and not hasattr(typ, "__slots__") and not callable(x)
            and not isinstance(x, (type, Tensor, enum.Enum))
            and not is_library_module(typ.__module__))


def _new_like(typ, state):
    """An instance of `typ` holding `state`, made without `__init__` (frozen dataclasses and
    slots included)."""
    obj = typ.__new__(typ)
    if hasattr(obj, "__dict__"):
        obj.__dict__.update(state)
    else:
        for name, value in state.items():
            object.__setattr__(obj, name, value)
    return obj


_IMMUTABLE = (Tensor, bool, int, float, complex, str, bytes, type(None), type(Ellipsis),
              slice, range, np.dtype, np.generic, DType, enum.Enum)
