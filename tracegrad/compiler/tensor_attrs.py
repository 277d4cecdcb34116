"""Python attributes users put on tensor arguments: their part of the entry key, and the
trace's writes to them.

Note [Attributes of tensor arguments]
A tensor can carry Python attributes of its own (`x.scale = 2.0`, `batch.mask = m`,
`x.is_padded = True`) that a function reads. The state scan walks those of the tensors
it reaches (Note [Attributes of tensors] in state.py), but a tensor argument is a new
object on most calls and is not scanned: a path traced with `x.tag == 3.0` would have
served `x.tag == 5.0` with the stale 3.0. So the public attributes of each tensor
argument are part of its entry key (`attrs_key`): numbers, strings, None and tuples of
them by exact value; lists, dicts and sets of such scalars by type and contents; a tensor
by identity (a program reads its data live) and its own attributes, one level deep. The
objects held by identity are kept alive by the entry (`attr_objects`), so no new object
can reuse the id. Names starting with `_` are the engine's (`_grad`, `_accum`,
`_leaf_hooks`, `_retains_grad`, ...) and not keyed; the common tensor has no attributes
at all, and its key part is None.

Two things run eagerly, with a warning (`attrs_written`):
- a function that sets or changes such an attribute (`x.calls = x.calls + 1`,
  `x.history.append(v)`): a Python effect the compiled program cannot replay; the trace
  compares each argument's key part after the call with the one before it;
- an attribute holding any other object (a module, a config object, a function): what
  it holds may change in place, and nothing scans it, so no guard could say when a path
  is stale.
"""
from .._tensor import Tensor
from .binding import scalar_key

_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_CONTAINERS = (list, dict, set, frozenset)


def attrs_key(t, deep=True):
    """The hashable key part of tensor `t`'s public Python attributes, None without any."""
    d = t.__dict__
    if not d:
        return None
    pub = [(k, v) for k, v in d.items() if k[:1] != "_"]
    if not pub:
        return None
    pub.sort(key=lambda kv: kv[0])
    return tuple((k, _value_key(v, deep)) for k, v in pub)


def _value_key(v, deep):
    if isinstance(v, _SCALARS):
        return ("s", scalar_key(v))
    if type(v) is tuple and all(isinstance(x, _SCALARS) for x in v):
        return ("t", tuple(scalar_key(x) for x in v))
    if type(v) in _CONTAINERS:
        # (in iteration order: a function looping over them sees that order)
        flat = [x for kv in v.items() for x in kv] if type(v) is dict else list(v)
        if all(isinstance(x, _SCALARS) for x in flat):
            return ("c", type(v).__name__, tuple(scalar_key(x) for x in flat))
    if isinstance(v, Tensor) and deep:
        return ("T", id(v), attrs_key(v, False) if v.__dict__ else None)
    return ("obj", id(v), type(v).__name__)


def attr_objects(t):
    """The attribute values of `t` its key holds by identity (the entry keeps them)."""
    d = t.__dict__
    return [v for k, v in d.items() if k[:1] != "_" and not isinstance(v, _SCALARS)] \
        if d else []


def written_attrs(before, after):
    """The attribute names whose key parts differ between `before` and `after`."""
    b, a = dict(before or ()), dict(after or ())
    return sorted(k for k in b.keys() | a.keys() if b.get(k) != a.get(k))


def attrs_written(tracer, key, leaves, names, site):
    """Note an eager effect for each tensor argument whose public attributes the trace
    changed: `key` holds their parts from before the call."""
    for i, (part, x) in enumerate(zip(key[0], leaves)):
        if part[0] != "T" or len(part) < 9:
            continue
        who = f"'{names[i]}'" if i < len(names) and key[4] is None else f"{i}"
        after = attrs_key(x) if x.__dict__ else None
        if after != part[8]:
            said = ", ".join(f"'{k}'" for k in written_attrs(part[8], after))
            tracer.note_effect("attribute", f"setting Python attribute {said} of tensor "
                               f"argument {who}", x, site=site)
            continue
        held = [(k, v[2]) for k, v in (after or ()) if v[0] == "obj"]
        if held:
            tracer.note_effect("attribute", f"tensor argument {who} carries Python attribute "
                               f"'{held[0][0]}' holding a {held[0][1]} object (what it "
                               "holds is not checked between calls)", x, site=site)
