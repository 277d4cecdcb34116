"""The `torch.compiler` functions user code calls, under the same names in
`tracegrad.compiler` (so `torch.compiler.disable` runs unchanged with `import tracegrad as
torch`): `reset()`, `disable(fn=None, recursive=True, *, reason=None)`, `is_compiling()` and
`is_dynamo_compiling()`.

Note [Disabled functions]
PyTorch runs a function marked `torch.compiler.disable` outside the graph: the graph breaks
around it and its Python runs on every call. A tracegrad path is one program with no breaks,
so a compiled function that calls a disabled one runs eagerly, whole, for the arguments that
reached it (the path records the call as an effect it cannot replay, and the call warns
once, naming the function). `recursive=False` (PyTorch: only that frame is skipped, the
functions it calls are compiled) behaves the same here.
"""
import functools

from .. import _dispatch, _effects
from .function import compiled_functions


def reset():
    """Drop every compiled path of every compiled function; each traces afresh.

    As `torch.compiler.reset()`."""
    for cf in compiled_functions():
        cf.reset("tracegrad.compiler.reset() was called")


def disable(fn=None, recursive=True, *, reason=None):
    """`fn`, marked to run eagerly on every call, even from a compiled function.

    Usable as `@disable` or `@disable(reason=...)` (Note [Disabled functions])."""
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)
    name = getattr(fn, "__name__", None) or type(fn).__name__
    why = f" ({reason})" if reason else ""

    @functools.wraps(fn)
    def run_eagerly(*args, **kwargs):
        tracer = _effects.active()
        if tracer is not None:
            tracer.note_effect("disable", f"a call of '{name}', marked with "
                               f"tracegrad.compiler.disable{why},")
        return fn(*args, **kwargs)
    run_eagerly._tracegrad_disabled = True
    return run_eagerly


def is_compiling():
    """True while tracegrad traces a compiled function; eager calls see False.

    As `torch.compiler.is_compiling()`: a branch taken on it is what every compiled call of
    that path runs."""
    return _dispatch.trace_hook.get() is not None


is_dynamo_compiling = is_compiling
