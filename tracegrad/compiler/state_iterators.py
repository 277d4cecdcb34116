"""How far an iterator from outside a compiled function has advanced (Note [Iterators]):
a trace that moved one cannot be replayed, so such calls run eagerly."""
import collections.abc as abc

from .state_guards import _SCALARS


# Note [Iterators]
# `x, y = next(batches)` or `for b in it: ...; break` on an iterator from outside the
# function (a DataLoader's iterator, a generator, `itertools.count()`) advances it: an effect
# no IR node replays, and no call a profile hook reliably sees (`next` does not say on
# what, a `for` loop calls nothing). A cached path would replay the first call's items on
# every call. So the scan notes every iterator it reaches with a fingerprint of how far it
# is (`progress`), and a trace that moved one runs such calls eagerly, with a warning.

def progress(it, depth=0):
    """A value that changes when iterator `it` advances; None when unknown (then `advanced`
    assumes it did): a generator's suspended position and locals (and the generator it
    delegates to), a builtin iterator's pickled state, a Python iterator's attributes."""
    if depth > 4:
        return None
    if hasattr(it, "gi_frame"):                      # a generator
        frame = it.gi_frame
        if frame is None:
            return ("exhausted",)
        inner = it.gi_yieldfrom
        return (frame.f_lasti, tuple(_fingerprint(v, depth) for v in frame.f_locals.values()),
                None if inner is None else progress(inner, depth + 1))
    d = getattr(it, "__dict__", None)
    if d is not None:
        return tuple((k, _fingerprint(v, depth)) for k, v in d.items())
    try:
        return _fingerprint(it.__reduce__(), depth)
    except Exception:                                # noqa: BLE001 -- unknown: None
        return None


def _fingerprint(x, depth):
    if isinstance(x, _SCALARS):
        return x
    if type(x) is tuple:
        return tuple(_fingerprint(v, depth) for v in x)
    if isinstance(x, abc.Iterator):
        return (id(x), progress(x, depth + 1))
    return id(x)


def advanced(iterators):
    """The `where` of the first iterator the trace moved (Note [Iterators]), or None."""
    for it, where, before in iterators:
        if before is None or progress(it) != before:
            return where
    return None
