"""Random generators of other libraries the traced function can reach (Note [Foreign
generators]).

Note [Foreign generators]
`rng = np.random.default_rng(seed)` (or `np.random.RandomState(seed)`) made once and drawn
from inside the step — random scaling, noise or crops as augmentation — gives new numbers
on every eager call; a cached path replays the first call's draw as a constant. Drawing
from numpy's *global* generator is caught by comparing its state around the trace
(`_effects.watch_python`), and Python's `random.Random` methods by the profile hook; but a
numpy generator object's methods are compiled code no profiler reports. So the state scan
notes every numpy generator it reaches (closure, global, attribute, argument) with its
state, and a trace that moved one is an effect: such calls run eagerly, with a warning
(as for an iterator the trace advanced, Note [Iterators] in state.py). A generator the
function holds but never draws from (it shuffles the data outside) keeps it compiled.
"""
import numpy as np

GENERATORS = (np.random.Generator, np.random.RandomState, np.random.BitGenerator)


def _bit_generator(g):
    if isinstance(g, np.random.BitGenerator):
        return g
    if isinstance(g, np.random.Generator):
        return g.bit_generator
    return g._bit_generator                      # a RandomState


def fingerprint(g):
    """A value that changes when generator `g` draws (its bit generator's state)."""
    return _plain(_bit_generator(g).state)


def _plain(x):
    if isinstance(x, dict):
        return tuple((k, _plain(v)) for k, v in x.items())
    if isinstance(x, np.ndarray):
        return (x.dtype.str, x.shape, x.tobytes())
    return x


def drawn(generators):
    """The `where` of the first generator the trace drew from, or None; `generators`:
    [(generator, where, fingerprint before)]."""
    for g, where, before in generators:
        if fingerprint(g) != before:
            return where
    return None
