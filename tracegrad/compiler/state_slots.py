"""Attributes kept in `__slots__` as places the state scan can guard (Note [Slots]).

Note [Slots]
A config or bookkeeping object declared with `__slots__` (or `@dataclass(slots=True)`, or
a namedtuple-like class of the user's) keeps its attributes in slot descriptors, not in
a `__dict__`. The scan (Note [Captured state] in state.py) walked only attribute dicts, so
`cfg.scale = 2.0` between calls, a tensor rebound in a slot, or `counter.n += 1` inside the
step left a cached path running with the first call's values. A `SlotView` makes the
slots of one object look like a read-only mapping — `get(name, default)`, what a guard
reads a dict place with — so each slot is walked and guarded like a dict entry: its value
(scalars by value, tensors as bindings, objects by identity and walked) and, for a slot
not yet assigned, its absence (`c.last = loss` inside the step assigns it: a change of
state, as a new attribute is, Note [New attributes] in state.py).
"""


class SlotView:
    """The slots of `obj` as a mapping from slot name to value (`default` when unset)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def get(self, name, default=None):
        return getattr(self.obj, name, default)

    def __getitem__(self, name):
        return getattr(self.obj, name)


def slot_names(cls):
    """The slot attributes instances of `cls` have, from every class of its MRO (not
    `__dict__` / `__weakref__`); a private `__x` by its mangled name, which `getattr` takes."""
    out = []
    for k in cls.__mro__:
        slots = k.__dict__.get("__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        for s in slots:
            if s in ("__dict__", "__weakref__"):
                continue
            if s.startswith("__") and not s.endswith("__"):
                s = f"_{k.__name__.lstrip('_')}{s}"
            if s not in out:
                out.append(s)
    return out
