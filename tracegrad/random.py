"""`tracegrad.random`, PyTorch's `torch.random`: the default generator's seed and state.

`get_rng_state()` / `set_rng_state(state)` save and restore the generator every `rand*`,
`dropout` and `randperm` draw uses (the state is a tensor: Note [RNG state tensors] in
ops/rng_state.py); `fork_rng()` restores it when its block ends.

>>> s = get_rng_state(); a = tracegrad.rand(2); set_rng_state(s)
>>> bool((tracegrad.rand(2) == a).all())
True
"""
import contextlib

from .ops.generator import default_generator, initial_seed, manual_seed, seed  # noqa: F401

__all__ = ["set_rng_state", "get_rng_state", "manual_seed", "seed", "initial_seed",
           "fork_rng"]


def get_rng_state():
    """The default generator's state as a tensor (a fresh copy each call)."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator to a state `get_rng_state()` returned."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type=None):
    """Within the block draw freely; on leaving it (also by an exception) the default
    generator is back where it was. `enabled=False` makes it a no-op."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
