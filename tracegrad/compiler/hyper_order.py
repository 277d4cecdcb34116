"""Hyper-parameters a traced call changed before or between its optimizer's reads of them.

Note [Hyper-parameters written in a call]
An optimizer's step reads its learning rate, momentum, betas, ... through `_effects.hyper`:
a compiled path reads each such place once per call, before its program runs, and replayed
calls (a scheduler's `step`) run after it. That is eager's order when the step reads the
place before anything in the call writes it (`opt.step(); sched.step()`). It is not when
the call writes the place first:
- `sched.step(); opt.step()` (PyTorch warns about the order, and trains with the new
  rate): eager's update used the rate the scheduler just set, a cached call the rate from
  before it;
- `g["lr"] = warmup(...)` assigned by the function before `opt.step()`, in a place whose
  guard the write broke only when user code spelled no key (a replayed call owns it);
- two steps in one call with a scheduler step or an assignment between them: the second
  read saw the first read's value, in the trace too (`Tracer.hyper_source` checks that).
The first case is found here: the value the step read differs from the value the place
held when the call started (the scan's value guard on it, among those `_settle_state` in
function.py turned into runtime reads; a place user code names keeps its guard, which the
write breaks, so that call is not cached). Such a path computes the trace's (eager's)
result and calls like it run eagerly, with a warning naming the place.
"""
from ..tracing.tracer import same_number


def written_before_read(tracer, guards):
    """Note an eager effect on `tracer` for each hyper-parameter the trace read with another
    value than the one its place held at the call's start. `guards`: the scan's value
    guards on the places read per call (they record the start value)."""
    for holder, key, index, first in tracer.hyper_first.values():
        for g in guards:
            if g.holder is not holder or g.key != key or g.mode != "eq":
                continue
            start = g.expected
            if index is not None:
                if not isinstance(start, tuple) or len(start) <= index:
                    continue
                start = start[index]
            if not same_number(start, first):
                where = g.where if index is None else f"{g.where}[{index}]"
                tracer.note_effect("hyper", f"{where} changed from {start!r} to {first!r} "
                                   "during the call before the optimizer read it (a "
                                   "scheduler's step() or an assignment before opt.step(): "
                                   "step the scheduler after the optimizer)", None,
                                   site=getattr(tracer.graph, "name", None))
                break
