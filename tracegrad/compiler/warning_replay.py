"""Warnings a traced call issues are issued again by every cached call of its path.

Note [Warnings replayed]
Eager code warns on every call that reaches a `warnings.warn`: the user's own ("lr looks
high"), PyTorch's deprecations and shape warnings raised by the library (`F.mse_loss` with
a target size different from the input's, `F.softmax` without `dim`,
`nn.utils.clip_grad_norm`). A cached path replays only tensor work, so those warnings came
from the tracing call alone: a program recording warnings (`warnings.catch_warnings(record=
True)`, `pytest.warns`, an "always" or "error" filter) saw them vanish after the first step.
While user code runs under a trace, `warnings.warn` is wrapped: each warning is issued as
eager issues it (`warn_explicit` with the location `stacklevel` names and that module's
registry, so filters and "once per location" behave as eagerly) and recorded as a replayed
call of the path (`PathRecord.replays`), issued again after each cached call, in order.
Not recorded: warnings of replayed calls (they run again anyway: a scheduler's order
warning), warnings the compiler and tracer issue about the trace itself (a custom
Function's forward run again: once per class), calls from other threads, warnings issued
by C code (numpy's floating-point RuntimeWarnings), and those of code that bound the
function before the trace (`from warnings import warn`): the wrapper is the module's
attribute `warnings.warn`, which tracegrad and most code call through. A replayed warning
comes after the cached call's program, so before running a path whose warnings the
filters now turn into errors (`simplefilter("error")` after the trace), the path misses
(`would_raise`): the call re-traces, which runs it eagerly, raising where eager raises,
after eager's partial effects.
"""
import os
import sys
import warnings

from .._effects import active
from .patched import Patched

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# warnings about the trace itself, issued once by the code that compiles
_COMPILER = tuple(os.path.join(_PKG, d, "") for d in ("compiler", "tracing"))
_WARN = Patched(warnings, "warn")


def _rewarn(_, message, category, filename, lineno, module_globals):
    """Issue a recorded warning again (a replayed call: `_` is the unused object slot)."""
    warnings.warn_explicit(message, category, filename, lineno,
                           module_globals.get("__name__", "<string>"),
                           module_globals.setdefault("__warningregistry__", {}),
                           module_globals)


def _warn(message, category=None, stacklevel=1, source=None, **kwargs):
    real = _WARN.real
    tracer = active()
    caller = sys._getframe(1)
    if (tracer is None or not getattr(tracer, "recording_warnings", False) or tracer.replaying
            or kwargs or caller.f_code.co_filename.startswith(_COMPILER)):
        return real(message, category, stacklevel + 1, source, **kwargs)
    if isinstance(message, Warning):
        category = type(message)
    elif category is None:
        category = UserWarning
    try:
        frame = sys._getframe(max(stacklevel, 1))
        globs, filename, lineno = frame.f_globals, frame.f_code.co_filename, frame.f_lineno
    except ValueError:                   # beyond the stack: Python names module sys
        globs, filename, lineno = sys.__dict__, "sys", 0
    inside = warnings.filters is not tracer.warning_filters   # Note [Warnings caught inside]
    if inside:
        action = _action(message, category, lineno, globs)
        handled = (warnings.showwarning is not tracer.warning_shows[0]
                   or getattr(warnings, "_showwarnmsg_impl", None) is not tracer.warning_shows[1])
    _rewarn(None, message, category, filename, lineno, globs)
    if inside:
        if action == "ignore":
            return
        if handled or action != tracer.warning_action(message, category, lineno, globs):
            site = f"{filename}:{lineno}"
            tracer.note_effect("warning", "a warning issued inside warnings.catch_warnings() "
                               "in the function (recorded or filtered there, on every "
                               "eager call)", None, site=site)
            return
    tracer.replays.append((None, _rewarn, (message, category, filename, lineno, globs), {},
                           frozenset()))


def recorded(replays):
    """The warnings among a path's replayed calls: [(message, category, filename, lineno,
    module globals)]."""
    return [a for _, method, a, _ in replays if method is _rewarn]


def would_raise(recorded):
    """Whether the warning filters now make one of `recorded` an error."""
    return any(_action(message, category, lineno, globs) == "error"
               for message, category, _, lineno, globs in recorded)


def _action(message, category, lineno, globs, filters=None):
    """The action `filters` (default: the current ones) take on a warning (Python's filter
    matching: the first filter matching message, category, module and line decides)."""
    text = str(message)
    module = globs.get("__name__", "<string>")
    for act, msg, cat, mod, line in warnings.filters if filters is None else filters:
        if ((msg is None or msg.match(text)) and issubclass(category, cat)
                and (mod is None or mod.match(module)) and (line == 0 or line == lineno)):
            return act
    return warnings.defaultaction


# Note [Warnings caught inside]
# A function may manage warnings itself: `with warnings.catch_warnings(record=True) as w:`
# around a call it expects to warn, or `simplefilter("ignore")` inside such a block to
# silence a helper. Eagerly those warnings go to the list or nowhere, on every call; a
# replay after the program would issue them under the caller's filters instead (shown, or
# an error). So a warning issued while the function's own `catch_warnings` block is active
# (the module's filter list is another object than at the start of the trace) is not
# replayed when that block's filters ignore it; when the block records it, or its filters
# act on it otherwise than the caller's would, calls like this one run eagerly.


class recording_warnings:
    """Context manager: while a trace runs user code, record its warnings (Note [Warnings
    replayed]) into `tracer.replays`."""

    def __init__(self, tracer):
        self.tracer = tracer

    def __enter__(self):
        _WARN.enter(_warn)
        tracer = self.tracer
        tracer.recording_warnings = True
        tracer.warning_filters = warnings.filters    # Note [Warnings caught inside]
        tracer.warning_shows = (warnings.showwarning,
                                getattr(warnings, "_showwarnmsg_impl", None))
        start = list(warnings.filters)
        tracer.warning_action = lambda *a: _action(*a, filters=start)
        return self

    def __exit__(self, *exc):
        self.tracer.recording_warnings = False
        _WARN.exit()
        return False
