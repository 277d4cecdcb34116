"""Checks of `tracegrad.compile`'s own arguments, made at once (before any call or trace).

Like `torch.compile`, a non-callable is refused immediately (PyTorch asserts; tracegrad raises
TypeError), and an unknown backend is named with the list of valid ones (PyTorch raises
`InvalidBackend`, a RuntimeError; tracegrad's is also a ValueError, as it always was).
"""
from .._errors import TracegradRuntimeError, TracegradTypeError

BACKENDS = ("numpy", "jax")


class InvalidBackend(TracegradRuntimeError, ValueError):
    """`tracegrad.compile(fn, backend=...)` named a backend that does not exist."""


def check_compile_arguments(fn, backend):
    """Raise TypeError if `fn` is given but not callable, InvalidBackend for a bad backend."""
    if fn is not None and not callable(fn):
        raise TracegradTypeError(
            f"tracegrad.compile: expected a callable (a function, a method or an nn.Module), "
            f"but got {type(fn).__name__} ({_short(fn)}). Use `tracegrad.compile(fn)` or "
            "`@tracegrad.compile` above a def.")
    if not isinstance(backend, str) or backend not in BACKENDS:
        valid = ", ".join(repr(b) for b in BACKENDS)
        raise InvalidBackend(
            f"tracegrad.compile: invalid backend {backend!r}; valid backends are {valid} "
            "('numpy' is the default; 'jax' needs `pip install tracegrad[jax]`).")


def _short(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
