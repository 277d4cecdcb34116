"""Random generators: `Generator` (numpy PCG64 state with PyTorch's seeding rules), the
default generator that `manual_seed`/`seed`/`initial_seed` act on, the recorded
`manual_seed` primitive (a seed set inside a traced function is replayed by every compiled
call), and the fresh-entropy log check mode replays (Note [Fresh entropy in check mode]).
The draws themselves (`rand`, `randn`, ...) are ops/creation.py.
"""
import threading
import weakref

import numpy as np

from .. import _effects
from .._device import check_device
from .._dispatch import dispatch
from .._errors import TracegradValueError
from . import rng_state
from . import shape_rules as SR
from .primitive import Primitive

_DEFAULT_SEED = 67280421310721        # PyTorch's: a fresh torch.Generator() starts here


def _seed_value(seed):
    """PyTorch's seed range: any int64 or uint64, negative ones wrapped to uint64."""
    seed = int(seed)
    if not -2 ** 63 <= seed < 2 ** 64:
        raise TracegradValueError("Overflow when unpacking long long")
    return seed % 2 ** 64


# every Generator alive, so work that runs kernels without being the user's call (the VJP
# pass deriving a backward program) can leave them as it found them (`_live_generators`)
_LIVE = weakref.WeakSet()


def _live_generators():
    """The Generator objects alive now."""
    return list(_LIVE)


class Generator:
    """Random state (numpy PCG64). `manual_seed` resets the default generator. A fresh
    `Generator()` starts from PyTorch's default seed, so its draws repeat run to run."""

    def __init__(self, seed=None, device=None):
        if isinstance(seed, str) or type(seed).__name__ == "device":   # Generator("cpu")
            seed, device = None, seed
        check_device(device)
        seed = _DEFAULT_SEED if seed is None else _seed_value(seed)
        self._rng = np.random.default_rng(seed)
        self._seed = seed
        _LIVE.add(self)
        from .._dispatch import trace_hook
        if trace_hook.get() is not None:
            # made inside a traced function: a compiled call reuses this very object, so
            # it is seeded again on every call, as eager makes a fresh one (a recorded seed)
            self.manual_seed(seed)

    @property
    def device(self):
        from .._device import device
        return device("cpu")

    def manual_seed(self, seed):
        seed = _seed_value(seed)
        from .._dispatch import trace_hook
        if trace_hook.get() is not None:     # inside a traced function: a recorded effect,
            dispatch(SEED, (self, seed))       # replayed by every compiled call
            return self
        self._rng = np.random.default_rng(seed)
        self._seed = seed
        return self

    def seed(self):
        """Reseed from fresh OS entropy; returns the new seed (a new one on every call,
        so inside a traced function such calls run eagerly)."""
        _effects.note("random", "Generator.seed() (a fresh seed on every call)")
        s = _fresh_entropy()
        self.manual_seed(s)
        return s

    def initial_seed(self):
        # a Python int the trace would keep as a constant, while `manual_seed` between
        # calls changes it: such calls run eagerly (with a warning)
        _effects.note("random", "Generator.initial_seed() / initial_seed() (a seed that "
                                "manual_seed can change between calls)")
        return self._seed

    def get_state(self):
        """The state as a tensor, for `set_state` (Note [RNG state tensors])."""
        return rng_state.encode(self)

    def set_state(self, new_state):
        """Restore a state `get_state` returned; returns the generator. Inside a traced
        function this runs the calls eagerly (Note [RNG state tensors])."""
        return rng_state.restore(self, new_state)


def _seed_kernel(gen, seed):
    gen._rng = np.random.default_rng(seed)
    gen._seed = seed
    return np.zeros((), np.int64)            # a token: the effect is on the generator


SEED = Primitive("manual_seed", _seed_kernel, impure=True, nondiff=True, shape_rule=SR.scalar)
default_generator = Generator(0)


def manual_seed(seed):
    """Seed the default generator (all rand*/dropout draws); returns it."""
    return default_generator.manual_seed(seed)


def seed():
    """Seed the default generator from fresh OS entropy; returns the seed."""
    # a new seed per call, which a recorded `manual_seed` would replay as a constant
    _effects.note("random", "tracegrad.seed() (a fresh seed on every call)")
    s = _fresh_entropy()
    default_generator.manual_seed(s)
    return s


# Note [Fresh entropy in check mode]: check mode (compiler/check.py) runs a call twice, eagerly
# and compiled; a fresh seed drawn by the first run is handed out again, in order, to the
# second (`_entropy_replay`), so `tracegrad.seed()` inside a checked function compares equal.
_entropy = threading.local()


def _fresh_entropy():
    """A new seed from OS entropy (or the one the check's first run drew, when replaying)."""
    log = getattr(_entropy, "log", None)
    if log is not None and log[0] == "replay" and log[1]:
        return log[1].pop(0)
    s = int(np.random.SeedSequence().entropy % (2 ** 63))
    if log is not None and log[0] == "record":
        log[1].append(s)
    return s


class _entropy_replay:
    """`with _entropy_replay() as r:` records the seeds drawn; `with r.replaying():` hands
    them out again in order."""

    def __enter__(self):
        self.seeds = []
        self._prev = getattr(_entropy, "log", None)
        _entropy.log = ("record", self.seeds)
        return self

    def __exit__(self, *exc):
        _entropy.log = self._prev

    def replaying(self):
        outer = self

        class _Replay:
            def __enter__(self):
                self._prev = getattr(_entropy, "log", None)
                _entropy.log = ("replay", list(outer.seeds))

            def __exit__(self, *exc):
                _entropy.log = self._prev
        return _Replay()


def initial_seed():
    return default_generator.initial_seed()
