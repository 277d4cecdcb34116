"""From a trace to a compilation record: what a path learns from its trace beyond the graph.

`record_from_trace` reads the tracer once and returns the `PathRecord` the pipeline starts
from (Note [Compilation record] in record.py): the raw graph and traced values, the facts
about inputs and outputs, and a `TracePlan` of effects (Note [Effects] in _effects.py): the
captured inputs read through a source on every call (`.grad`, runtime hyper-parameters), the
tensor attributes Python read that become guards, the autograd effects replayed around each
call, and the `.grad` assignments after it. `trace_eager_reason` says when the trace alone
rules compiling out. The record keeps no tracer: once it is made, the traced call's tensors
can go. Nothing here runs per call.
"""
from dataclasses import dataclass

from .._tensor import Tensor
from ..passes.layout import in_c_order
from .keys import storage_id
from .record import Inputs, Outputs, PathRecord


@dataclass
class TracePlan:
    """Per-path facts taken from the trace (owner refs are ("arg", i) or a bound tensor)."""
    sources: list          # [(captured index, owner)]: captured input j is owner.grad
    attr_guards: list      # [(owner, attr, value)]: Python read owner.<attr>
    scalar_sources: list   # [(captured index, holder, key, index, len, narrow)]: a number
    #                        read per call from holder[key] (or item `index` of a tuple of
    #                        `len` there; numpy float32 allowed when narrow, _effects.hyper)
    grad_none: list        # owners whose .grad was None when traced
    grad_some: list        # owners whose .grad was set when traced
    pre_effects: list      # [(input position, flag or "detach")]: requires_grad_(flag) or
    #                        detach_() before the program
    post_retain: list      # output positions: retain_grad after the program
    grad_set_plan: list    # [(input position, output k or None)]: .grad after the program
    pre_clear: list        # input positions whose .grad is cleared before the program
    pre_clear_held: list = ()  # of those, the ones whose old .grad a failed call gives back
    hook_checks: list = ()  # [(owner, hooks)]: the leaf's gradient hooks the trace ran
    inner_uses: dict = None  # output k -> outputs computed from it inside the function
    retain_inputs: list = ()  # input positions: retain_grad after the program (a non-leaf
    #                        argument or captured tensor the function called it on)
    place_sources: list = ()  # [(captured index, holder, key)]: captured input j is the
    #                        tensor at holder[key] (Note [Tensors written to Python state])
    eager_reason: str = None


def record_from_trace(name, tracer, out_tensors, build, options, n_args, state_guards=(),
                      grad_sets=()):
    """The `PathRecord` of one trace whose flat results are `out_tensors` (rebuilt by
    `build`) and whose `.grad` assignments are `grad_sets` ([(owner, final .grad or None)])."""
    tensors = [t for _, t in tracer.args] + [t for _, t in tracer.captured]
    effects = plan_from_trace(tracer, out_tensors, grad_sets)
    return PathRecord(
        name=name, options=options, raw=tracer.graph, values=dict(tracer.values),
        inputs=Inputs(
            n_args=n_args, captured=tuple(t for _, t in tracer.captured),
            differentiable=tuple(t.requires_grad and t.is_floating_point() for t in tensors),
            rebased=tuple(t.requires_grad or (t._base is not None and t._base.requires_grad)
                          for t in tensors),
            reordered=frozenset(k for k, t in enumerate(tensors) if not in_c_order(t._data))),
        outputs=_outputs(out_tensors, build, grad_sets, tensors),
        effects=effects, state_guards=list(state_guards),
        replays=list(tracer.mode_replays) + [r[:4] for r in tracer.replays],
        trace_eager_reason=trace_eager_reason(tracer, out_tensors))


def _outputs(out_tensors, build, grad_sets, inputs=()):
    is_tensor = tuple(isinstance(o, Tensor) for o in out_tensors)
    # `.grad` values the function assigned follow the user's outputs (Note [Effects])
    tens = [o for o in out_tensors if isinstance(o, Tensor)]
    tens += [g for _, g in grad_sets if g is not None]
    # an output whose graph the function already ran backward through (retain_graph off)
    # gets no backward program and no saved values: its grad_fn only raises
    stop = {id(t._grad_fn) for t in inputs if t._grad_fn is not None}
    consumed = {k: o._grad_fn.name() for k, o in enumerate(tens)
                if o._grad_fn is not None and _released_behind(o._grad_fn, stop)}
    return Outputs(
        build=build, is_tensor=is_tensor,
        consts=tuple(None if t else o for t, o in zip(is_tensor, out_tensors)),
        # (a build that writes Python state must run on every call: place_writes.py)
        single=(len(out_tensors) == 1 and is_tensor[0] and not hasattr(build, "writes")
                and build(list(out_tensors)) is out_tensors[0]),
        requires=tuple(o.requires_grad and k not in consumed for k, o in enumerate(tens)),
        consumed=consumed,
        # made under inference_mode, outside or inside the function (`with
        # inference_mode(): a = x * 2; return a`): the entry key fixes the outer mode
        inference=tuple(bool(o._inference) for o in tens),
        # in-place ops on a result before it was returned (`y = x * 2; y.add_(1)`) show in
        # its version counter (Note [Versions of fresh outputs] in path.py)
        versions=tuple(o._vc.v for o in tens))


def _released_behind(node, stop):
    """Whether the traced graph behind `node` (up to the inputs' nodes, in `stop`) holds a
    node a backward without retain_graph released. Note [Consumed outputs]: it need not be
    the output's own node: `loss = (w * x).sum(); loss.backward()` releases MulBackward0's
    saved values, while SumBackward0 saves none and is never marked; eager's second
    backward through `loss` raises at MulBackward0, so the output is consumed all the same."""
    from ..autograd.graph import AccumulateGrad
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen or id(n) in stop or isinstance(n, AccumulateGrad):
            continue
        seen.add(id(n))
        if getattr(n, "released", False):
            return True
        todo.extend(e[0] for e in (getattr(n, "edges", None) or ()) if e is not None)
    return False


def plan_from_trace(tracer, out_tensors, grad_sets):
    """The TracePlan of a trace whose user outputs are `out_tensors` and whose `.grad`
    assignments are `grad_sets` ([(owner, final .grad or None)])."""
    inputs = [t for _, t in tracer.args] + [t for _, t in tracer.captured]
    position = {id(t): k for k, t in enumerate(inputs)}
    args = {id(t): i for i, (_, t) in enumerate(tracer.args)}

    def ref(owner):
        return ("arg", args[id(owner)]) if id(owner) in args else owner
    sources = [(j, ref(tracer.sources[v])) for j, (v, _) in enumerate(tracer.captured)
               if v in tracer.sources]
    # Note [.grad reads of tensors the program does not read]: a `.grad` Python looked at
    # is checked on every call for program inputs, and also for tensors from outside the
    # trace the program never computes with (`opt.step()` finding an idle layer's .grad
    # None skips it; if a later call finds it set, eager would update that layer)
    def outside(o):
        return id(o) in position or id(o) not in tracer.env
    seen = set()
    grad_none = [ref(o) for o in tracer.grad_none
                 if outside(o) and not (id(o) in seen or seen.add(id(o)))]
    pre_effects, post_retain, retain_reason = _effect_replays(tracer, out_tensors, position)
    user_outs = [tracer.env.get(id(o)) for o in out_tensors if isinstance(o, Tensor)]
    outs = {id(o) for o in out_tensors}
    retain_inputs = sorted({position[id(e.tensor)] for e in tracer.effects
                            if e.kind == "retain_grad" and id(e.tensor) in position
                            and id(e.tensor) not in outs})
    grad_set_plan, pre_clear, grad_reason = _grad_plan(tracer, grad_sets, position,
                                                       out_tensors)
    held = _held_grads(tracer, inputs, pre_clear)
    return TracePlan(
        sources=sources, attr_guards=_attr_guards(tracer, args, sources),
        scalar_sources=[(j, *tracer.scalar_sources[v]) for j, (v, _) in
                        enumerate(tracer.captured) if v in tracer.scalar_sources],
        grad_none=grad_none, grad_some=[ref(o) for o in tracer.grad_some if outside(o)],
        pre_effects=pre_effects, post_retain=post_retain, retain_inputs=retain_inputs,
        inner_uses=inner_uses(tracer.graph, user_outs),
        grad_set_plan=grad_set_plan,
        place_sources=[(j, *tracer.place_sources[v]) for j, (v, _) in
                       enumerate(tracer.captured) if v in tracer.place_sources],
        pre_clear=pre_clear, pre_clear_held=held,
        hook_checks=_hook_checks([o for o, _ in grad_sets] + tracer.leaves_reached,
                                 position, ref, tracer.hooks_ran),
        eager_reason=retain_reason or grad_reason)


def _held_grads(tracer, inputs, pre_clear):
    """The positions among `pre_clear` whose old `.grad` a call must keep until its program
    has run (Note [Clearing before the program]).

    Note [Clearing before the program]
    A `.grad` the trace set to None before computing anything from it (zero_grad) is
    cleared before the program runs, so the old gradients are freed before the new ones
    exist, as eagerly. If the program then fails (a guard, an op failing on its values:
    Note [Errors inside compiled programs] in codegen.py), the call starts again from its
    own state, so the old `.grad` must come back when eager could have seen it: when the
    function read it (`if p.grad is None`), or when a guard or an op that may fail came
    before the clearing in the trace (eager fails there with the old `.grad` still set).
    Only then is the old `.grad` kept during the program; a step that starts with
    zero_grad keeps none, and its peak memory stays eager's."""
    from ..ops.primitive import may_fail
    read = tracer.grad_read_ids | {id(o) for o in tracer.sources.values()}
    nodes, guards = tracer.graph.nodes, tracer.graph.guards
    held = []
    for pos in pre_clear:
        t = inputs[pos]
        n_nodes, n_guards = tracer.grad_cleared_at.get(id(t), (len(nodes), len(guards)))
        if (id(t) in read or n_guards or any(may_fail(n) for n in nodes[:n_nodes])):
            held.append(pos)
    return held


def _hook_checks(owners, position, ref, hooks_ran):
    """Leaves the trace ran backward into (their `.grad` written inside, or reached by
    `autograd.grad`): the gradient hooks registered on them (`register_hook`, outside the
    function) ran in the trace and are part of the program, so the same hooks must be there
    on every call (a removed or added hook is another program): those the trace ran
    (`hooks_ran`, Note [Hooks changed by the call]), not those left after it."""
    out, seen = [], set()
    for owner in owners:
        if id(owner) in position and id(owner) not in seen:
            seen.add(id(owner))
            hooks = hooks_ran.get(id(owner))
            out.append((ref(owner), leaf_hooks(owner) if hooks is None else hooks))
    return out


# Note [Hooks changed by the call]
# A gradient hook may remove itself when it fires (a "once" hook: `h.remove()` inside it),
# or register or remove other hooks; so may the function after its backward. The program
# holds what the hooks computed, not their changes to the leaf's hook list: checking the
# hooks left after the trace let the next call (which eagerly runs without the removed
# hook) run a program with the hook's gradient rule baked in, silently, and a call finding
# the hook registered again would not remove it. So the path checks the hooks the trace
# ran (taken when backward first reached the leaf, `Tracer.hooks_ran`), and a call that
# changed a reached leaf's hooks after that runs eagerly (`hooks_changed`).
def hooks_changed(tracer):
    """The first leaf the trace ran backward into whose gradient hooks differ, at the end
    of the trace, from those the backward ran (Note [Hooks changed by the call])."""
    for t in tracer.leaves_reached:
        ran = tracer.hooks_ran.get(id(t))
        now = leaf_hooks(t)
        if ran is not None and (len(ran) != len(now) or any(a is not b for a, b in
                                                             zip(ran, now))):
            return t
    return None


def leaf_hooks(t):
    """The gradient hooks registered on leaf `t`, as a tuple (the list register_hook keeps,
    _tensor_methods.py)."""
    return tuple(t.__dict__.get("_leaf_hooks") or ())


# Note [detach_ of an argument]
# d2l's RNN training detaches the carried state in place at the top of each step,
# `for s in state: s.detach_()`, the state being an argument (the last call's output).
# `detach_()` changes the tensor the caller holds (no grad_fn, no requires_grad): an
# autograd effect. When the trace ran it on an argument no recorded node had read yet,
# running it before the program is the same: the program reads the argument only after
# it. So it is replayed there, as `requires_grad_` is ("detach" in `pre_effects`), and the
# backward sends nothing into the graph the argument had. On any other tensor, or after
# a read, it keeps the call eager (`Effect.eager`).
def _effect_replays(tracer, out_tensors, position):
    """`requires_grad_` or `detach_` on an input before the program runs, `retain_grad` on
    a returned tensor after it; and why eager, if a retained output is also computed
    with."""
    outs = {id(o): k for k, o in enumerate(o for o in out_tensors if isinstance(o, Tensor))}
    pre = [(position[id(e.tensor)], "detach" if e.kind == "detach_" else e.tensor._rg)
           for e in tracer.effects
           if e.kind in ("requires_grad_", "detach_") and not e.eager
           and id(e.tensor) in position]
    post = sorted({outs[id(e.tensor)] for e in tracer.effects
                   if e.kind == "retain_grad" and id(e.tensor) in outs})
    # a retained output the function also computes with: its gradient includes what flows
    # back inside the program, which a hook on the compiled node never sees
    used = {v for n in tracer.graph.nodes for v in n.value_inputs()}
    outputs = [tracer.env.get(id(o)) for o in out_tensors if isinstance(o, Tensor)]
    why = ("retain_grad() on a returned tensor the function also computes with"
           if any(outputs[k] in used for k in post) else None)
    return pre, post, why


def inner_uses(graph, outputs):
    """{output k: the other outputs computed from it inside the function} (Note [Gradients
    with respect to an output])."""
    prod = {n.output: n for n in graph.nodes}
    out = {}
    for j, v in enumerate(outputs):
        seen, todo = set(), [v]
        while todo:
            x = todo.pop()
            if x is None or x in seen:
                continue
            seen.add(x)
            n = prod.get(x)
            if n is not None:
                todo.extend(n.value_inputs())
        for k, w in enumerate(outputs):
            if k != j and w is not None and w in seen and w is not v:
                out.setdefault(k, []).append(j)
    return out


def _grad_plan(tracer, grad_sets, position, out_tensors):
    """`.grad` assignments replayed after each call: [(input position, output k or None)],
    the outputs being the hidden ones after the user's tensors; the positions cleared
    before the program (zero_grad first); why eager, if an owner is not a program input."""
    k = sum(isinstance(o, Tensor) for o in out_tensors)    # the first hidden output
    plan, pre_clear, why = [], [], None
    cleared_first = {id(o) for o in tracer.grad_cleared_first}
    for owner, g in grad_sets:
        pos = position.get(id(owner))
        if pos is None:
            why = why or "it assigns .grad of a tensor the compiled program does not read"
            continue
        plan.append((pos, None if g is None else k))
        k += g is not None
        if id(owner) in cleared_first:
            pre_clear.append(pos)
    return plan, pre_clear, why


# what the entry key and captured metadata do not check (Note [Layout read by Python])
_NOT_KEYED = ("grad_fn", "_version", "stride", "storage_offset", "data_ptr")


def _attr_guards(tracer, args, sources):
    """[(owner ref, attr, value)]: tensor attributes Python read from tensors from outside
    the trace, less what the entry key and captured metadata check."""
    captured = {id(t): j for j, (_, t) in enumerate(tracer.captured)}
    sourced = {j for j, _ in sources}
    out = []
    for t, attr, value in tracer.attr_reads.values():
        if id(t) in args:
            if attr in _NOT_KEYED:
                out.append((("arg", args[id(t)]), attr, value))
        elif id(t) in captured:
            if attr in _NOT_KEYED and captured[id(t)] not in sourced:
                out.append((t, attr, value))
        else:
            out.append((t, attr, value))
    return out


def trace_eager_reason(tracer, outs):
    """Why the trace alone rules compiling out, or None (the input-mutation reason needs the
    functional graph: `decide_eager` in pipeline.py).

    - an effect the program cannot replay (`register_hook`, `detach_`, ...);
    - an argument sharing memory with a captured tensor;
    - a new leaf that requires grad (its `.grad` only eager execution can fill);
    - the function changed an input's `.grad` in a way not recorded as an effect."""
    tensors = [t for _, t in tracer.args] + [t for _, t in tracer.captured]
    for e in tracer.effects:
        if e.eager:
            return (f"{e.describe()}: an effect the compiled program cannot replay "
                    "(see 'what compile sees' in the README)")
        if e.kind == "requires_grad_" and id(e.tensor) not in tracer.env:
            return f"{e.describe()} on a tensor the compiled program does not read"
    captured_vcs = {storage_id(t) for _, t in tracer.captured}
    if any(storage_id(t) in captured_vcs for _, t in tracer.args):
        return ("an argument shares memory with a tensor the function reads from a closure, "
                "global or module (the compiled program would read them as separate inputs)")
    if tracer.new_leaves(outs):
        return ("it creates a tensor that requires grad (a new leaf, whose .grad only eager "
                "execution can fill); create it outside and pass it in to compile")
    recorded = {id(t) for t in tracer.grad_sets}
    for t in tracer.grad_writes():
        if id(t) in recorded or id(t._grad) in tracer.env:
            continue                         # a recorded effect (Note [Effects])
        pos = next(i for i, u in enumerate(tensors) if u is t)
        name = tracer.graph.inputs[pos].name or "an input"
        return (f"it changes '{name}.grad' (backward() inside the function); return "
                "gradients from tg.autograd.grad(...) instead to compile it")
    return None
