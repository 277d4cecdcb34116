"""Text a traced call prints is printed again by every cached call of its path.

Note [Prints replayed]
Eager code prints on every call: a progress line, the shapes of a batch, a step counter. A
cached path replays only tensor work, so a `print` inside a compiled function printed on
the tracing call alone, and a log read afterwards (or a test capturing stdout) missed every
later call's line. While user code runs under a trace, `builtins.print` is wrapped (as
`warnings.warn` is, Note [Warnings replayed] in warning_replay.py): a call from user code
formats its text as print would (same `sep`, `end`, errors), writes it where print writes,
and records the text as a replayed call of the path (`PathRecord.replays`), written again
after each cached call, in order with the path's other replayed calls. The file is looked
up on each call as print looks it up: `sys.stdout` when `file` is None, so a
`contextlib.redirect_stdout` around a later call captures that call's text.

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
import threading

from .._effects import _is_user_frame, active

_lock = threading.Lock()
_users = [0]
_real = [builtins.print]


def _reprint(_, text, file, flush):
    """Write a recorded print's text again (a replayed call: `_` is the unused object slot)."""
    out = sys.stdout if file is None else file
    if out is None:                      # print writes nothing when there is no stdout
        return
    out.write(text)
    if flush:
        out.flush()


def _print(*args, sep=" ", end="\n", file=None, flush=False):
    tracer = active()
    caller = sys._getframe(1)
    if (tracer is None or not getattr(tracer, "recording_prints", False) or tracer.replaying
            or not _is_user_frame(caller)):
        return _real[0](*args, sep=sep, end=end, file=file, flush=flush)
    buf = io.StringIO()
    before = tracer.printed
    tracer.printing += 1                 # str(t) inside print(t) guards nothing
    try:
        _real[0](*args, sep=sep, end=end, file=buf)
    finally:
        tracer.printing -= 1
    text = buf.getvalue()
    _reprint(None, text, file, flush)
    if tracer.printed != before:
        site = f"{caller.f_code.co_filename}:{caller.f_lineno} in {caller.f_code.co_name}"
        tracer.note_effect("print", "print() of a tensor's values", None, site=site)
        return None
    tracer.replays.append((None, _reprint, (text, file, flush), {}, frozenset()))
    return None


class recording_prints:
    """Context manager: while a trace runs user code, record its prints (Note [Prints
    replayed]) into `tracer.replays`."""

    def __init__(self, tracer):
        self.tracer = tracer

    def __enter__(self):
        with _lock:
            if _users[0] == 0:
                _real[0] = builtins.print
                builtins.print = _print
            _users[0] += 1
        self.tracer.recording_prints = True
        return self

    def __exit__(self, *exc):
        self.tracer.recording_prints = False
        with _lock:
            _users[0] -= 1
            if _users[0] == 0:
                builtins.print = _real[0]
        return False
