"""What a finished trace leaves to its path besides the IR: the `.grad` assignments that become
hidden outputs, the state guards the path keeps (and those the trace itself broke), grad
mode to set again, and warnings about side effects that run only while tracing."""
import warnings

from .. import _mode
from .._errors import user_stacklevel
from .._tensor import Tensor
from .state import owned_holders
from .state_guards import StateGuard, changed_by_trace


def grad_outputs(tracer, outs):
    """`.grad` assignments of the trace (backward() or `p.grad = ...` inside): [(owner, final
    .grad)], the tensors among them becoming hidden outputs after the user's (Note [Effects])."""
    grad_sets = tracer.grad_results()
    for o, g in grad_sets:
        if g is not None and id(g) not in tracer.env:
            tracer.note_effect("grad_write", "assigning .grad a tensor from outside the trace", o)
    grad_sets = [(o, g) for o, g in grad_sets if g is None or id(g) in tracer.env]
    for o, _ in grad_sets:
        # Note [Owners of .grad writes]: a parameter the trace never computed with whose
        # .grad it assigns (zero_grad() clearing an unused head's gradient) becomes a
        # captured input, so the program can replay the assignment on it every call
        if id(o) not in tracer.env:
            tracer.value_of(o)
    tracer.graph.outputs = [tracer.value_of(o) for o in outs if isinstance(o, Tensor)] + [
        tracer.env[id(g)] for _, g in grad_sets if g is not None]
    return grad_sets


def with_view_bases(tracer, outs, build):
    """(outs, build) with, after the user's results, the trace-made bases of returned views.

    Note [Bases of returned views]
    Eagerly, `y = x * 2; return y[1:], y[:2]` returns two views of one tensor `y`: both have
    `_base`, share a version counter, and a write through one shows through the other. A
    compiled call makes `y` a hidden output (rebuilt outputs never show it) and each view
    again on it after the call (functionalize's OutputFacts.views, CompiledPath.view_out),
    so gradients flow through the view ops and the memory is shared as eagerly. Views of
    inputs need no base: they are made again on the input (OutputFacts.roots)."""
    extra, seen = [], {id(o) for o in outs}
    for o in outs:
        b = o._base if isinstance(o, Tensor) else None
        if b is not None and id(b) in tracer.env and id(b) not in tracer.input_ids \
                and id(b) not in seen:
            seen.add(id(b))
            extra.append(b)
    if not extra:
        return outs, build
    n = len(outs)

    def rebuild(leaves):
        return build(leaves[:n])
    if hasattr(build, "writes"):             # (place_writes.with_writes: shown by explain)
        rebuild.writes = build.writes
    return list(outs) + extra, rebuild


def settle_state(tracer, scanned, read_keys=frozenset(), placed=()):
    """(state guards of the path, guards of places read as runtime numbers, guards the trace
    itself broke). Captured tensors' bindings come first, then every container and scalar
    guard (Note [Captured state]); places replayed calls rewrite are theirs, not guards;
    places read through `hyper` are program inputs, not guards, unless user code the trace
    ran may also read them directly (`loss * opt.param_groups[0]["lr"]`: a constant of the
    trace, which only the guard keeps from going stale). `read_keys`: the keys that user
    code may have read (`state.keys_user_code_may_read`, Note [Hyper-parameters unread]).
    `placed`: places that held a Number during the trace, read only through it (Note
    [Float attributes that change] in dynamic_numbers.py)."""
    bindings = scanned.bindings
    unread = getattr(scanned, "unread", ())   # Note [Unread attributes] in state_unread.py
    guards = [g for _, t in tracer.captured for g in bindings.get(id(t), ())] + [
        g for g in scanned.guards if id(g) not in unread]
    owned = owned_holders([o for o, *_ in tracer.replays])
    places = tracer.scalar_places()
    runtime = [g for g in guards if any(g.holder is h and g.key == k for h, k in places)
               and (g.key not in read_keys or any(g.holder is h and g.key == k
                                                  for h, k in placed))]
    guards = [g for g in guards if all(g is not r for r in runtime)]
    # and those of a path that never read them (Note [Hyper-parameters unread] in state_unread.py)
    unread_hyper = getattr(scanned, "unread_hyper", ())
    guards = [g for g in guards if id(g) not in unread_hyper]
    dropped, changed = changed_by_trace(guards + [g for gs in bindings.values() for g in gs],
                                        owned)
    guards = [g for g in guards if all(g is not d for d in dropped)]
    # training flags a train()/eval() call of the trace set: guarded at their values on
    # entry, and set again after each call (Note [Mode set while tracing] in module.py)
    moded = {id(vars(m)) for obj, *_ in tracer.mode_replays for m in obj.modules()}
    changed = [g for g in changed if not (g.key == "training" and id(g.holder) in moded)]
    # settings read at the value the call began with (Note [Settings read and set])
    guards += [StateGuard(h, k, v, "eq", where)
               for h, k, v, where in tracer.setting_reads.values()]
    return guards, runtime, changed


def set_grad_mode(flag):
    """Note [Grad mode left changed]
    `tg.set_grad_enabled(False)` called as a plain function (not as a `with` block) inside
    the function leaves grad mode changed after it returns. The entry key fixes the mode a
    call starts in, and the trace the mode it ends in: each cached call of the path sets it
    again after its program (a replayed call, `PathRecord.replays`)."""
    _mode._grad_enabled.set(flag)


def warn_effects(name, tracer):
    """Once per trace, name the Python side effects that run only while tracing."""
    for e in tracer.effects:
        if not e.eager and e.kind == "print":
            warnings.warn(f"tracegrad.compile: '{name}' calls {e.describe()}; it runs only "
                          "while tracing, not on cached calls. Print outside the compiled "
                          "function, or return the value.", UserWarning, stacklevel=user_stacklevel())
