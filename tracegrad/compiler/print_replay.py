"""Text a traced call prints is printed again by every cached call of its path.

Note [Prints replayed]
Eager code prints on every call: a progress line, the shapes of a batch, a step counter. A
cached path replays only tensor work, so a `print` inside a compiled function printed on
the tracing call alone, and a log read afterwards (or a test capturing stdout) missed every
later call's line. While user code runs under a trace, `builtins.print` is wrapped (as
`warnings.warn` is, Note [Warnings replayed] in warning_replay.py): a call from user code
formats its text as print would (same `sep`, `end`, errors), writes it where print writes,
and records the text as a replayed call of the path (`PathRecord.replays`), written again
after each cached call, in order with the path's other replayed calls, into the file eager's
print would write to (Note [Print targets]): `sys.stdout` looked up again when `file` is
None, so a `contextlib.redirect_stdout` around a later call captures that call's text.

The text is the same on every call of the path when it is made of what the path is keyed
or guarded on: arguments' values and shapes, state the scan guards, numbers read from
tensors (`.item()`, `float(t)` and f-strings of 0-d tensors are guards). A tensor's own
text is not: printing a tensor reads its values without a guard (so that `print(loss)`
does not re-trace per value), so a print whose text formatted a tensor (`print(x)`, a list
or an object holding one) makes calls like this one run eagerly, with a warning naming the
line. Not recorded: prints from library code, from other threads, from replayed calls
(which print again anyway), and through a name bound to the builtin before the trace
(`echo = print`): the profile hook reports those (`_effects.watch_python`), and such calls
run eagerly.
"""
import builtins
import io
import sys
import weakref

from .._effects import _is_user_frame, active
from .patched import Patched

_PRINT = Patched(builtins, "print")


def _reprint(_, text, file, flush):
    """Write a recorded print's text again (a replayed call: `_` is the unused object slot).
    `file`: None (`sys.stdout` now), or a reference to the file the trace wrote to."""
    out = sys.stdout if file is None else file()
    if out is None:                      # no stdout, or the file is gone: nothing to write
        return
    out.write(text)
    if flush:
        out.flush()


def _print(*args, sep=" ", end="\n", file=None, flush=False):
    tracer = active()
    caller = sys._getframe(1)
    if (tracer is None or not getattr(tracer, "recording_prints", False) or tracer.replaying
            or not _is_user_frame(caller)):
        return _PRINT.real(*args, sep=sep, end=end, file=file, flush=flush)
    buf = io.StringIO()
    before = tracer.printed
    tracer.printing += 1                 # str(t) inside print(t) guards nothing
    try:
        _PRINT.real(*args, sep=sep, end=end, file=buf)
    finally:
        tracer.printing -= 1
    text = buf.getvalue()
    if file is None and sys.stdout is not tracer.stdout_at_start:
        file = sys.stdout                # redirected inside the call: Note [Print targets]
    target = None if file is None else _reference(file)
    _reprint(None, text, target, flush)
    if tracer.printed != before:
        site = f"{caller.f_code.co_filename}:{caller.f_lineno} in {caller.f_code.co_name}"
        tracer.note_effect("print", "print() of a tensor's values", None, site=site)
        return None
    tracer.replays.append((None, _reprint, (text, target, flush), {}, frozenset()))
    return None


# Note [Print targets]
# Where a replayed print writes is where eager's print writes on that call: `sys.stdout`
# looked up again when the call printed to the standard output the caller set up; the very
# file object the trace wrote to when the function chose it (`file=log`, or a
# `contextlib.redirect_stdout(buf)` inside the function). Such a file is held weakly: a
# buffer the call made for itself (`with redirect_stdout(io.StringIO()):` to silence a
# helper) is gone when the call returns, and eager wrote into a new one on each call, which
# nobody outside sees, so the replay writes nothing rather than into a buffer kept alive.
def _reference(file):
    try:
        return weakref.ref(file)
    except TypeError:                    # no weak references: held
        return lambda: file


class recording_prints:
    """Context manager: while a trace runs user code, record its prints (Note [Prints
    replayed]) into `tracer.replays`."""

    def __init__(self, tracer):
        self.tracer = tracer

    def __enter__(self):
        _PRINT.enter(_print)
        self.tracer.recording_prints = True
        self.tracer.stdout_at_start = sys.stdout
        return self

    def __exit__(self, *exc):
        self.tracer.recording_prints = False
        self.tracer.stdout_at_start = None
        _PRINT.exit()
        return False
