"""What one finished trace leaves behind, read off after the user's function returned:
numbers whose `type` or identity the code asked, effects on the caller's objects, the guards
no code read, and the outputs a cached call returns and writes back.

`CompiledFunction._record` (function.py) runs the function under the tracer and the Python
watcher; the steps here take what those saw and turn it into notes, guard sets and the
output builder, in this order:
- `check_number_identity`: code that names `type` or compares a number with `is` cannot
  take the stand-ins of numbers read per call (Note [Float arguments that change]);
- `note_call_effects`: grad mode / default dtype left changed (replayed), iterators
  advanced, foreign generators drawn, arguments or numpy arrays written (each an effect a
  cached call could not repeat: the path runs eagerly, loudly);
- `unread_guards`: guards on state no code the trace ran reads (Note [Captured state] in
  state.py) and the hyper-parameter keys it may read;
- `outputs_of`: the flat outputs and the builder of the returned structure, with the numbers,
  appends and tensors the call writes to Python state appended (Notes [Numbers written to
  Python state], [Appends to the caller's lists], [Tensors written to Python state]).
"""
import numpy as np

from .. import _dtype, _mode
from .._effects import replay_reads
from .._tensor import Tensor
from ..tracing import flatten
from ..tracing.custom_function import CLASS_OF
from ..tracing.flatten import _IMMUTABLE, Unrebuildable
from . import append_replay, place_writes
from .binding import changed_argument
from .caller_arrays import returns_callers_array, written_array
from .dynamic_numbers import REAL_NUMBER_ONLY, compares_number_identity
from .foreign_rng import drawn
from .state_iterators import advanced
from .state_method_reads import unread_method_attr_guards
from .state_unread import (all_names, keys_user_code_may_read, names_type,
                           unread_attribute_guards, unread_hyper_guards,
                           unread_state_guards)
from .trace_settle import set_grad_mode, warn_effects


def check_number_identity(name, floats, watch, numbers, positions, placed):
    """Raise when the traced code named `type` or compared a number by identity while it
    read numbers per call as stand-ins (its result cannot be trusted); make later traces of
    code that needs real numbers key them by value."""
    names = all_names(list(watch.user_codes))
    typed = names_type(list(watch.user_codes))   # Note [The name type] in state_unread.py
    same = compares_number_identity(watch.user_codes)
    if typed or (REAL_NUMBER_ONLY - {"type"}) & names or same:   # Note [Float arguments
        floats.asks_type(numbers)    # that change] (json.dumps of a counter: a stand-in fails)
        if (typed or same) and numbers is not None and numbers.made:
            floats.failed(numbers, positions, placed)
            what = "naming `type`" if typed else "comparing a number by identity"
            raise RuntimeError(
                f"tracegrad.compile: '{name}' ran code {what} for the "
                "first time while it read numbers per call, where `type(x)` or `x is 3` "
                "of such a number differs from eager's; this call's result cannot be "
                "trusted. "
                "Its Python effects have run once. Later calls key floats by value "
                "(Note [Float arguments that change]).")


def note_call_effects(tracer, scanned, site, grad_mode, default_dtype, before, after,
                      arrays):
    """Replay grad mode and the default dtype the call left changed; note the effects a
    cached call could not repeat (`before`/`after`: snapshots of the caller's containers,
    `arrays`: (name, numpy argument, copy taken before the call))."""
    if _mode.grad_enabled() != grad_mode:   # Note [Grad mode left changed]
        tracer.replays.append((_mode.grad_enabled(), set_grad_mode, (), {}, frozenset()))
    if _dtype.get_default_dtype() is not default_dtype:   # Note [Default dtype left changed]
        tracer.replays.append((_dtype.get_default_dtype(), _dtype.set_default_dtype,
                               (), {}, frozenset()))
    moved = advanced(scanned.iterators)
    if moved:
        tracer.note_effect("iterator", f"advancing {moved}, a Python iterator from "
                           "outside the function", None, site=site)
    rng = drawn(scanned.generators)      # Note [Foreign generators] in foreign_rng.py
    if rng:
        tracer.note_effect("random", f"drawing from {rng}, a numpy random generator "
                           "from outside the function", None, site=site)
    changed = before and changed_argument(before, after)
    if changed:
        tracer.note_effect("mutation", f"an assignment into argument '{changed}' (a "
                           "list or dict the caller holds)", None, site=site)
    written = written_array(arrays)
    if written:                          # Note [Writes into numpy array arguments]
        tracer.note_effect("mutation", f"a write into numpy array argument '{written}' "
                           "(the caller's memory, e.g. through torch.from_numpy)", None,
                           site=site)
    tracer.check_numpy_writes()


def unread_guards(tracer, scanned, watch, appends, containers):
    """Mark the state guards no code the trace ran reads (`scanned.unread`,
    `scanned.unread_hyper`); return the hyper-parameter keys user code may read."""
    replay_reads(tracer, watch)
    functions = {CLASS_OF.get(n.prim) for n in tracer.graph.nodes}
    classes = [c for c in functions if c is not None]
    scanned.unread = {id(g) for g in unread_attribute_guards(scanned, watch, classes)}
    # Note [Attributes only some methods read] in state_method_reads.py
    scanned.unread |= {id(g) for g in unread_method_attr_guards(scanned, watch, classes)}
    lists = [a for a, _ in appends]      # Note [Appends to the caller's lists]
    lists += append_replay.unread_lists(watch, scanned.guards, set(containers), lists)
    if lists:
        scanned.unread |= append_replay.dropped_guards(lists, scanned.guards)
    read_keys = keys_user_code_may_read(scanned, watch)
    scanned.unread_hyper = {id(g) for g in unread_hyper_guards(scanned, read_keys)}
    scanned.unread_hyper |= {id(g) for g in unread_state_guards(scanned, watch, read_keys)}
    return read_keys


def outputs_of(name, tracer, scanned, out, site, arrays, number_outs, appends, stored,
               arg_containers=()):
    """`(outs, build)`: the flat outputs of `out` and the builder of the returned structure,
    with the Python-state writes appended; notes outputs a cached call cannot return."""
    try:
        outs, build = flatten(out, strict=True)
    except Unrebuildable as e:
        outs, build = flatten(out)
        # Note [Numpy arrays returned] in caller_arrays.py
        kind = "a numpy array" if any(isinstance(o, np.ndarray) for o in outs) else e.what
        tracer.note_effect("output", f"it returns {kind} (a compiled call would return "
                           "the first call's object every time)", None, site=site)
    else:
        kept = _returned_existing(out, scanned.seen | scanned.containers | set(arg_containers))
        if kept is not None:                 # Note [Containers returned as they are]
            tracer.note_effect("output", f"it returns {kept} that existed before the call "
                               "(a compiled call would return a new one rebuilt from its "
                               "values, not that very object)", None, site=site)
    shared = returns_callers_array(outs, arrays, scanned.guards)
    if shared:                           # Note [Tensors over the caller's arrays]
        tracer.note_effect("numpy", f"it returns a tensor over the memory of {shared} "
                           "(torch.from_numpy), which a compiled call would copy", None,
                           site=site)
    warn_effects(name, tracer)
    if isinstance(out, Tensor):
        build = _single
    if number_outs and all(t is not None for t in number_outs.values()):
        outs = [number_outs.get(k, o) for k, o in enumerate(outs)]
        build = _numbers_out(build, frozenset(number_outs))
    # Notes [Numbers written to Python state], [Appends to the caller's lists]
    writes = [(h, k, t, c, t is not None) for h, k, t, c in
              (tracer.place_writes[0] if tracer.place_writes else ())]
    writes += [(lst, append_replay.APPEND, t, c, number) for lst, items in appends
               for t, c, number in items]
    writes += [(h, k, t, None, False) for h, k, t in stored]
    if writes:
        outs, build = place_writes.with_writes(outs, build, writes)
    return outs, build


def _single(outs):
    return outs[0]


# Note [Containers returned as they are]
# A compiled call rebuilds the structure it returns (Note [Rebuilt outputs] in
# tracing/flatten.py): right for containers the function builds, wrong for one that existed
# before the call (`return cfg`, `return opt.state[p]`, `history.append(l); return
# history`, an argument dict returned): eager returns that very object, and a caller
# writing into it changes the state it came from. Such a call runs eagerly, with a warning.
# Pre-existing means walked by the state scan (state.py) or passed in the arguments;
# tuples are left alone (nothing can be written into one).
def _returned_existing(out, existing):
    """A description of the first mutable container or object in the returned structure
    `out` that is one of `existing` (ids), or None."""
    stack, seen = [out], set()
    while stack:
        x = stack.pop()
        if id(x) in seen or isinstance(x, _IMMUTABLE):   # returned as they are already
            continue
        seen.add(id(x))
        if not isinstance(x, tuple) and id(x) in existing:
            return f"a {type(x).__name__}"
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple, set, frozenset)):
            stack.extend(x)
        elif hasattr(x, "__dict__") and not isinstance(x, type):
            stack.extend(vars(x).values())
    return None


def _numbers_out(build, positions):
    """`build` with the leaves at `positions` (0-d float64 or int64 tensors: returned
    Numbers and Integers) turned into the Python floats and ints eager returns (Note
    [Numbers taken from tensors])."""
    def rebuild(leaves):
        return build([_python_scalar(x._data) if k in positions else x
                      for k, x in enumerate(leaves)])
    return rebuild


def _python_scalar(arr):
    v = np.asarray(arr).reshape(()).item()
    return int(v) if np.asarray(arr).dtype.kind in "iu" else float(v)
