"""`compile(fn, fullgraph=True)`: a call that cannot run as one compiled program raises
`Unsupported` (`tracegrad._dynamo.exc.Unsupported`, as `torch._dynamo.exc.Unsupported`)
instead of running eagerly with a warning.

Note [Full graph]
PyTorch users pass `fullgraph=True` to be told, by an error, when any part of a function
would not be compiled. Here every way a call runs eagerly (an effect the program cannot
replay, arguments sharing memory, state the call changes and reads, the cache limit, a
mode that needs eager execution) first says why through `EagerFallbacks._say_eager`;
under `fullgraph=True` that records the reason instead of warning, and the call raises it.
Tracing runs the function, so a call found not compilable while it traces has had its
eager effects once before it raises (PyTorch's Dynamo raises before running); later calls
of such arguments raise the same way. A function called while another one is traced runs
inline in the outer trace, as always, and never raises for this.
"""
from .. import _dispatch
from .._errors import TracegradRuntimeError


class Unsupported(TracegradRuntimeError):
    """A `fullgraph=True` compiled call that would run (partly) eagerly."""


def fullgraph_class(base):
    """`base` (CompiledFunction) with the `fullgraph=True` call."""

    class FullGraph(base):
        def __call__(self, *args, **kwargs):
            if _dispatch.trace_hook.get() is not None or self.check:
                return base.__call__(self, *args, **kwargs)
            n, self._eager_said = self.stats.eager_calls - self._reruns, None
            out = base.__call__(self, *args, **kwargs)
            if self._eager_said is None and self.stats.eager_calls - self._reruns == n:
                return out
            why = self._eager_said or self._eager_last or "runs eagerly"
            why = why.replace(f"tracegrad.compile: '{self.name}' ", "", 1)
            raise Unsupported(
                f"tracegrad.compile(fullgraph=True): '{self.name}' {why}. With "
                "fullgraph=True that is an error: remove what the reason names from the "
                "compiled function, or compile with fullgraph=False to run such calls "
                "eagerly (with a warning).")

    FullGraph.__name__ = FullGraph.__qualname__ = base.__name__
    return FullGraph
