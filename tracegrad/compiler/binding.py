"""Binding a call's arguments by name, into the leaves and structure the entry key uses.

Note [Binding by name]
`f(p, t)` and `f(target=t, pred=p)` are the same call; `f(x)` and `f(x, scale=1.0)` are the
same call when 1.0 is the default. So arguments are bound to the signature
(`inspect.Signature.bind`, defaults applied) and flattened in *parameter* order, never in
the order the caller wrote them. The structure the flattening walked (container types,
lengths, dict keys in order) is part of the key: a dict with the same keys in another
order is another structure, because the traced function may iterate over it.
Python scalars key by type and exact value: `-0.0` and `0.0`, `True` and `1`, and `nan`
(equal to itself by bit pattern here) each keep their identity.

The common call — positional tensors and numbers matching the parameters one to one, no
defaults left over — skips `inspect` entirely.

Note [Flat through *args]
`def step(*batch)` (or `def f(x, *rest)`) called with positional tensors and numbers only,
no defaults left over, binds its leaves one to one to the call's `args`, in order: the
*args tuple is the only container, and its length is the number of leaves, already in the
key. Such a call is flat (structure None), like a call of `def step(x, y, t)`, so what
flat calls get holds for it too: a float that changes between calls is read per call
(Note [Float arguments that change] in dynamic_numbers.py: positional substitution is
exact here) instead of keyed by value, a re-trace per value.
"""
import functools
import inspect
import math

from .._tensor import Tensor
from .state import MUTABLE_COLLECTIONS

_FLAT = (Tensor, bool, int, float, str, type(None))


class Binder:
    """`bind(args, kwargs) -> (leaves, structure, containers)` for one function.

    `leaves` are the flattened argument values in parameter order, `structure` a hashable
    summary of the containers walked (None when there were none), `containers` the ids of
    the lists, dicts and sets the caller passed (mutating them is a visible side effect)."""

    def __init__(self, fn):
        self.fn = fn
        self.defaults = _defaults(fn)
        try:
            self.sig = inspect.signature(fn)
        except (TypeError, ValueError):
            self.sig = None
        params = list(self.sig.parameters.values()) if self.sig is not None else []
        simple = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        self.n_simple = len(params) if simple else -1
        self.names = [p.name for p in params]

    def bind(self, args, kwargs):
        if not kwargs and len(args) == self.n_simple and all(
                type(a) in _FLAT or isinstance(a, Tensor) for a in args):
            return list(args), None, ()
        self._refresh()
        if self.sig is None:
            values = [args, kwargs]
        else:
            try:
                ba = self.sig.bind(*args, **kwargs)
            except TypeError:
                return None, None, ()        # let the call itself raise Python's error
            ba.apply_defaults()
            values = list(ba.arguments.values())
        leaves, struct, containers = [], [], []
        for v in values:
            _walk(v, leaves, struct, containers)
        flat = all(s == 0 for s in struct) and self.sig is not None
        if not flat and self.sig is not None and not kwargs and len(leaves) == len(args) \
                and all(type(a) in _FLAT or isinstance(a, Tensor) for a in args):
            # Note [Flat through *args]
            flat = True
        return leaves, (None if flat else tuple(struct)), containers


    def leaf_names(self, args, kwargs):
        """A readable name per leaf `bind` gives: the parameter's name, and inside the
        containers passed the path to the leaf (`batch[0]`, `cfg['lr']`, `packed.
        batch_sizes` for a named tuple's field). None when the call does not bind."""
        bound = self._bound(args, kwargs)
        if bound is None:
            return None
        names = []
        for name, v in bound.items():
            _walk_names(v, name, names)
        return names

    def _bound(self, args, kwargs):
        """The call's arguments by parameter name, defaults applied; None when the call
        does not bind."""
        if self.sig is None:
            return None
        try:
            ba = self.sig.bind(*args, **kwargs)
        except TypeError:
            return None
        ba.apply_defaults()
        return ba.arguments

    def _refresh(self):
        """Re-read the signature when the function's defaults were replaced since
        (`f.__defaults__ = ...`): `inspect.Signature` holds the defaults it was made with,
        and binding with stale ones would key and run the call with the old values."""
        now = _defaults(self.fn)
        if len(now) != len(self.defaults) or any(a is not b for a, b in zip(now, self.defaults)):
            self.defaults = now
            try:
                self.sig = inspect.signature(self.fn)
            except (TypeError, ValueError):
                self.sig = None

    def leaf_places(self, args, kwargs):
        """Per leaf `bind` gives, where it sits: ("arg", name) for a direct argument,
        (holder, key) for an item of a list or dict the caller passed (a place a trace can
        put a stand-in into and take it out of again), None inside anything else (a tuple).
        None when the call does not bind."""
        bound = self._bound(args, kwargs)
        if bound is None:
            return None
        places = []
        for name, v in bound.items():
            _walk_places(v, ("arg", name), places)
        return places

    def snapshot(self, args, kwargs):
        """What the containers among the arguments hold, per parameter: [(name, leaves,
        structure)] (Note [Assignments into argument containers]); [] when unbindable."""
        if self.sig is None:
            named = [("arguments", [args, kwargs])]
        else:
            try:
                ba = self.sig.bind(*args, **kwargs)
            except TypeError:
                return []
            ba.apply_defaults()
            named = list(ba.arguments.items())
        out = []
        for name, v in named:
            leaves, struct = [], []
            _walk(v, leaves, struct, [])
            if any(s != 0 for s in struct):
                out.append((name, leaves, struct))
        return out


def _defaults(fn):
    """The objects holding `fn`'s defaults (a bound method's, a partial's arguments), and
    what a partial's keyword dict holds: it is changed in place (`p.keywords["w"] = t`),
    and the signature, made from it, must then be made again."""
    f = getattr(fn, "__func__", fn)
    keywords = getattr(fn, "keywords", None)
    held = tuple(keywords.items()) if type(keywords) is dict else ()
    return (getattr(f, "__defaults__", None), getattr(f, "__kwdefaults__", None),
            getattr(fn, "args", None), keywords) + tuple(v for kv in held for v in kv)


def changed_argument(before, after):
    """The name of the first parameter whose containers `after` (a `snapshot` taken after
    the call) no longer hold as in `before`, or None.

    Note [Assignments into argument containers]
    `d["y"] = t`, `xs[0] = t`, `del d["k"]` or `xs += [t]` on a list or dict the caller
    passed are bytecodes, not calls: the profile hook that reports `xs.append(t)` (Note
    [Effects]) never sees them, and a cached path, which replays only the recorded ops,
    would leave the caller's container as it was. So the trace compares what each argument's
    containers hold (keys, lengths, and each item by identity) before and after the call."""
    for (name, l0, s0), (_, l1, s1) in zip(before, after):
        if s0 != s1 or len(l0) != len(l1) or any(a is not b for a, b in zip(l0, l1)):
            return name
    return None


def _walk(x, leaves, struct, containers):
    t = type(x)
    if t in _FLAT or isinstance(x, Tensor):
        leaves.append(x)
        struct.append(0)
    elif isinstance(x, dict):
        containers.append(id(x))
        struct.append(("d", t, tuple(x.keys())))
        for v in x.values():
            _walk(v, leaves, struct, containers)
    elif isinstance(x, (tuple, list)):
        if isinstance(x, list):              # subclasses too (Note [Container kinds])
            containers.append(id(x))
        struct.append(("l", t, len(x)))
        for v in x:
            _walk(v, leaves, struct, containers)
    else:
        if isinstance(x, MUTABLE_COLLECTIONS):  # a set, a deque: their mutators are effects
            containers.append(id(x))
        leaves.append(x)
        struct.append(0)


@functools.lru_cache(maxsize=256)
def swappable(struct):
    """The leaf indexes of a call of structure `struct` (from `Binder.bind`) that sit
    directly in an argument, a list or a dict (exact types): the places `leaf_places`
    names, where a trace can put a stand-in and take it out again. Derived from the
    structure alone, once per structure."""
    out, leaf, pos = set(), 0, 0

    def walk(pos, ok):
        nonlocal leaf
        e = struct[pos]
        if e == 0:
            if ok:
                out.add(leaf)
            leaf += 1
            return pos + 1
        kind, t, n = e
        inner = t is dict if kind == "d" else t is list
        pos += 1
        for _ in range(len(n) if kind == "d" else n):
            pos = walk(pos, inner)
        return pos
    while pos < len(struct):
        pos = walk(pos, True)
    return frozenset(out)


def _walk_places(x, place, places):
    """The place of each leaf `_walk` finds in `x` (held at `place`), in its order."""
    t = type(x)
    if t in _FLAT or isinstance(x, Tensor):
        places.append(place)
    elif isinstance(x, dict):
        for k, v in x.items():
            _walk_places(v, (x, k) if type(x) is dict else None, places)
    elif isinstance(x, (tuple, list)):
        for k, v in enumerate(x):
            _walk_places(v, (x, k) if type(x) is list else None, places)
    else:
        places.append(place)


def _walk_names(x, prefix, names):
    """The names of the leaves `_walk` finds in `x`, in its order."""
    t = type(x)
    if t in _FLAT or isinstance(x, Tensor):
        names.append(prefix)
    elif isinstance(x, dict):
        for k, v in x.items():
            _walk_names(v, f"{prefix}[{k!r}]", names)
    elif isinstance(x, (tuple, list)):
        fields = getattr(t, "_fields", None)     # a named tuple: its field names
        for i, v in enumerate(x):
            _walk_names(v, f"{prefix}.{fields[i]}" if fields and i < len(fields)
                        else f"{prefix}[{i}]", names)
    else:
        names.append(prefix)


def scalar_key(x):
    """A hashable key keeping the identity of a Python scalar (Note [Binding by name])."""
    if type(x) is float:
        return ("f", x.hex() if not math.isnan(x) else "nan")
    return (type(x), x)
