"""A generator's state as a tensor: what `Generator.get_state` / `tracegrad.get_rng_state`
return and `set_state` / `set_rng_state` take back.

Note [RNG state tensors]
PyTorch hands out a generator's state as a 1-D uint8 tensor ("ByteTensor") that users save
in checkpoints, clone, and give back to `set_rng_state`. tracegrad's generator is numpy's
PCG64, so the bytes are its own: a magic tag, the PCG64 state and increment, the cached
32-bit half-draw, and the seed `initial_seed()` reports (PyTorch restores that too). The
tensor is uint8, as PyTorch's; a fresh tensor on every call, never aliasing the generator.
An int64 tensor of byte values (what tracegrad returned before it had uint8) is still
accepted, so older checkpoints load. A state of the wrong type, size or
content raises PyTorch's error type (TypeError / RuntimeError) rather than being
misread. A numpy `bit_generator.state` dict (what `get_state` returned before) is still
accepted, so older checkpoints load.

Inside a traced function both directions are effects that a compiled call cannot replay
from a recording (the state read at trace time would come back as a constant), so they are
reported and such calls run eagerly with a warning (Note [Effects]). Between compiled calls
nothing special is needed: compiled random draws read the generator they were traced with
on every call, so a state set between calls is where the next call draws from.
"""
import numpy as np

from .. import _effects
from .._errors import TracegradRuntimeError, TracegradTypeError

_MAGIC = b"TGR1"
_LAYOUT = ((4, "magic"), (16, "state"), (16, "inc"), (1, "has_uint32"), (4, "uinteger"),
           (1, "has_seed"), (16, "seed"))
STATE_SIZE = sum(n for n, _ in _LAYOUT)


def encode(gen):
    """The state of Generator `gen` as a fresh uint8 tensor of STATE_SIZE bytes."""
    from .._tensor import Tensor
    _effects.note("random", "Generator.get_state() / get_rng_state() (a generator state read)")
    st = gen._rng.bit_generator.state
    seed = gen._seed
    raw = b"".join((_MAGIC, st["state"]["state"].to_bytes(16, "little"),
                    st["state"]["inc"].to_bytes(16, "little"), bytes([st["has_uint32"]]),
                    int(st["uinteger"]).to_bytes(4, "little"), bytes([seed is not None]),
                    int(seed or 0).to_bytes(16, "little", signed=True)))
    return Tensor._wrap(np.frombuffer(raw, np.uint8).copy())


def decode(new_state):
    """(numpy bit_generator state, seed) from what `encode` returned; PyTorch's errors
    for anything else."""
    from .._tensor import Tensor
    if isinstance(new_state, dict) and new_state.get("bit_generator") == "PCG64":
        return new_state, None                                # an older checkpoint's dict
    if not isinstance(new_state, Tensor):
        raise TracegradTypeError(
            f"expected a torch.ByteTensor, but got {type(new_state).__name__}")
    if new_state.is_floating_point() or new_state.dtype.name == "bool":
        raise TracegradTypeError("RNG state must be a torch.ByteTensor")
    arr = new_state.detach().numpy().reshape(-1).astype(np.int64)
    if arr.size != STATE_SIZE:
        raise TracegradRuntimeError(
            f"Expected a CPUGeneratorImplState of size {STATE_SIZE} but found the input RNG "
            f"state size to be {arr.size}")
    if arr.min() < 0 or arr.max() > 255 or bytes(arr.astype(np.uint8)[:4]) != _MAGIC:
        raise TracegradRuntimeError(
            "set_rng_state: this is not a generator state tracegrad produced (use the "
            "tensor get_rng_state() or Generator.get_state() returned)")
    raw, fields, at = bytes(arr.astype(np.uint8)), {}, 0
    for n, name in _LAYOUT:
        fields[name], at = raw[at:at + n], at + n
    state = {"bit_generator": "PCG64",
             "state": {"state": int.from_bytes(fields["state"], "little"),
                       "inc": int.from_bytes(fields["inc"], "little")},
             "has_uint32": fields["has_uint32"][0],
             "uinteger": int.from_bytes(fields["uinteger"], "little")}
    seed = int.from_bytes(fields["seed"], "little", signed=True) if fields["has_seed"][0] \
        else None
    return state, seed


def restore(gen, new_state):
    """Set Generator `gen` to `new_state` (in place: compiled programs hold `gen`)."""
    _effects.note("random", "Generator.set_state() / set_rng_state() "
                            "(a generator state restore)")
    state, seed = decode(new_state)
    gen._rng.bit_generator.state = state
    if seed is not None or not isinstance(new_state, dict):
        gen._seed = seed
    return gen
