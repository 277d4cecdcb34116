"""The randomness guard of `tracegrad.func.vmap` / `jacfwd` (randomness='error').

Every random draw (`rand`/`randn`/`randint`, `randperm`, dropout noise, `multinomial`: the
four places that dispatch an impure draw primitive) calls `check_draw()` first. While a
transform with `randomness='error'` runs its function, `check_draw()` raises torch.func's
error instead of drawing. The check runs when the op's Python code runs: eagerly and while
a function is traced (the transforms key their compiled programs by `randomness`, so a
function is always traced under the guard it runs with).
"""
import contextlib
import threading

from ._errors import TracegradRuntimeError, op_error

_state = threading.local()

MESSAGE = ("vmap: called random operation while in randomness error mode. Please either use "
           "the 'same' or 'different' randomness flags on vmap or perform the randomness "
           "operation out of vmap")


@contextlib.contextmanager
def forbid_random(forbid=True):
    """Within the block (on this thread) random draws raise, if `forbid`."""
    prev = getattr(_state, "forbid", False)
    _state.forbid = prev or forbid
    try:
        yield
    finally:
        _state.forbid = prev


def check_draw():
    if getattr(_state, "forbid", False):
        raise op_error(TracegradRuntimeError, None, MESSAGE)
