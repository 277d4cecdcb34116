"""The compiler's middle: the list of stages a path's record goes through, and their driver.

Each stage is `record -> (record, stats)` (Note [Compilation record] in record.py): it
returns a new record with the fields it fills and a dict of statistics. `run_pipeline`
appends `(stage, stats)` to the record's log, logs it (logger `tracegrad.compile`, level
DEBUG) and, when verification is on, checks every graph the record holds against Note [IR
invariants] after the stage, naming the stage that broke one. Verification is on under the
test suite (tests/conftest.py) and with `TRACEGRAD_VERIFY=1`; off by default, since the shape
rules it re-runs cost compile time.

The graph passes a user gives `compile(fn, passes=[...])` (Graph -> Graph) run as stages of
their own between `functionalize` and `vjp`.
"""
import logging
import os
from dataclasses import replace

from ..ir.verify import IRError, verify
from ..passes import check_inplace as _check_inplace
from ..passes import cse, dce, partition as _partition, vjp as _vjp
from ..passes.fold import drop_aliases, drop_clones, fold_constants, fold_scalings
from ..passes.functionalize import functionalize_with_facts
from ..passes.plan_memory import plan_memory as _plan_memory
from ..passes.schedule import schedule_memory
from .replay import plan_replay as _plan_replay

log = logging.getLogger("tracegrad.compile")


def stages_for(options):
    """The stages compiling a path runs, in order, for these `Options`."""
    return ([functionalize] + [graph_pass(p) for p in options.passes]
            + [vjp, check_inplace, partition, plan_replay, cleanup, lower,
               plan_memory, codegen, decide_eager])


def run_pipeline(record, stages, verify_graphs=None):
    """Run `stages` on `record`; returns the final record (see the module docstring)."""
    if verify_graphs is None:
        verify_graphs = os.environ.get("TRACEGRAD_VERIFY", "") not in ("", "0")
    for stage in stages:
        name = stage.__name__
        record, stats = stage(record)
        record.log.append((name, stats))
        log.debug("tracegrad: %s: %s %s", record.name, name, stats)
        if verify_graphs:
            for what, g in record.graphs().items():
                try:
                    verify(g)
                except IRError as e:
                    raise IRError(f"after stage '{name}', the {what} graph of "
                                  f"'{record.name}' is invalid: {e}") from None
    return record


def _graph_stats(g, name):
    """The stats a graph pass logged for itself, else its size."""
    if g.pass_log and g.pass_log[-1][0] == name:
        return dict(g.pass_log[-1][1])
    return {"nodes": len(g.nodes)}


# ---- the stages ----
def functionalize(rec):
    fg, facts = functionalize_with_facts(rec.raw, values=rec.values)
    return (replace(rec, functional=fg, facts=facts, stages=rec.stages + [("functionalize", fg)]),
            _graph_stats(fg, "functionalize"))


def graph_pass(p):
    """A user's (or the default) Graph -> Graph pass as a stage.

    Note [CSE before differentiation]
    Merging two equal computations before the VJP pass is exact forward, but not backward:
    the merged value's gradient is the sum of both users' before it flows on (`x * (a1 +
    a2)` for a square), where eager computes `x * a1 + x * a2`, one rounding apart (found
    by a bitwise run of the random-program test: the two branches of an `if` both squaring
    `x`). So the built-in `cse` leaves floating values that depend on an input requiring
    grad apart; the same computation is then done twice, as eager does it."""
    name = getattr(p, "__name__", type(p).__name__)

    def stage(rec):
        if p is cse:
            g = cse(rec.functional, apart=_differentiable_values(rec))
        else:
            g = p(rec.functional)
        return replace(rec, functional=g, stages=rec.stages + [(name, g)]), _graph_stats(g, name)
    stage.__name__ = name
    return stage


def _differentiable_values(rec):
    """The functional graph's floating values computed from inputs that require grad."""
    g = rec.functional
    out = {g.inputs[i] for i, d in enumerate(rec.inputs.differentiable) if d}
    if not out:
        return frozenset()
    for n in g.nodes:
        if n.output.type.dtype.is_floating_point and any(a in out for a in n.value_inputs()):
            out.add(n.output)
    return frozenset(out)


def vjp(rec):
    """The VJP of the functional graph w.r.t. the inputs that require grad, for the outputs
    whose gradient can still be asked for. The traced values go after it."""
    ins = rec.functional.inputs
    wrt = [i for i, d in enumerate(rec.inputs.differentiable) if d]
    # the trace decides, not the mode outside it: `enable_grad()` inside a call made under
    # no_grad gives outputs that require grad, eagerly and compiled alike
    if not (wrt and any(rec.outputs.requires)):
        return replace(rec, wrt=wrt, values=None), {"differentiated": 0}
    try:
        vr = _vjp(rec.functional, [ins[i] for i in wrt], values=rec.values,
                 out_mask=list(rec.outputs.requires))
    except Exception as e:              # noqa: BLE001 (any error: it is eager's to raise)
        # a gradient rule that refuses (einsum's diagonal), or a custom Function's backward
        # that raises (a gradient of the wrong shape, the user's own check): eager raises
        # it only if backward runs, so calls like these run eagerly, with a warning naming it
        why = (f"the gradient cannot be derived ({type(e).__name__}: {str(e).splitlines()[0]}); "
               "eager execution raises it only when backward runs")
        return (replace(rec, wrt=wrt, values=None,
                        trace_eager_reason=rec.trace_eager_reason or why),
                {"differentiated": 0, "refused": str(e).splitlines()[0]})
    return (replace(rec, wrt=wrt, vjp=vr, values=None, stages=rec.stages + [("vjp", vr.graph)]),
            _graph_stats(vr.graph, "vjp"))


def check_inplace(rec):
    """Errors eager raises at backward (saved values overwritten in place) are kept for the
    backward node, never raised by the call (Note [Inplace errors wait for backward])."""
    if rec.vjp is None:
        return rec, {}
    ins = rec.functional.inputs
    errors = _check_inplace(rec.functional, rec.vjp.differentiated, {ins[i] for i in rec.wrt})
    v = errors.early_input
    if v is not None and rec.trace_eager_reason is None:
        why = (f"a value saved for backward is modified in place, and eager backward would "
               f"accumulate the gradient of '{v.name or 'an input'}' before it raises the "
               "in-place error, which a compiled backward cannot do")
        return (replace(rec, deferred_errors=errors, trace_eager_reason=why),
                dict(errors.stats, eager=why))
    return replace(rec, deferred_errors=errors), dict(errors.stats)


def partition(rec):
    # XLA fuses recomputed elementwise chains into backward (passes/remat.py, ties)
    remat = "ties" if rec.options.backend == "jax" else rec.options.memory == "min"
    part = _partition(rec.functional, rec.vjp, remat=remat,
                      mutation_counts=rec.facts.mutation_counts)
    return replace(rec, part=part), _graph_stats(part.forward, "partition")


def plan_replay(rec):
    """Before the cleanup passes: Note [Differentiable backward] in compiler/replay.py."""
    if rec.part.backward is None:
        return rec, {}
    plan = _plan_replay(rec.part, rec.wrt)
    return replace(rec, replay=plan), {"replayed": len(plan.nodes), "kept": len(plan.keep)}


def cleanup(rec):
    """Aliases and private clones dropped, constants and scalings folded, dead code removed,
    in both programs (the backward's inputs counted as possibly not in C order)."""
    def clean(g, reordered):
        return dce(fold_scalings(fold_constants(drop_clones(drop_aliases(g), reordered))))
    part = replace(rec.part, forward=clean(rec.part.forward, rec.inputs.reordered))
    if part.backward is not None:
        part.backward = clean(part.backward, range(len(part.backward.inputs)))
    stats = {"forward_nodes": len(part.forward.nodes)}
    if part.backward is not None:
        stats["backward_nodes"] = len(part.backward.nodes)
    return replace(rec, part=part), stats


def lower(rec):
    """`backend="jax"`: both programs lowered to XLA (memory planning is XLA's job there). A
    primitive the backend cannot lower leaves the path to the numpy stages, with a warning."""
    if rec.options.backend != "jax":
        return rec, {"backend": rec.options.backend}
    from ..backends.jax import build_path_programs
    new = replace(rec)
    ok = build_path_programs(new, rec.name, data_parallel=rec.options.data_parallel)
    return (new if ok else replace(rec, backend_note=new.backend_note)), {"lowered": ok}


def plan_memory(rec):
    """A memory-friendly order and buffer reuse for both programs (Note [Memory plan])."""
    if rec.forward_program is not None or rec.options.memory == "off":
        return rec, {}
    part = replace(rec.part)
    protected = set(part.saved_from_input.values())
    protected |= {i for i, v in enumerate(part.forward.inputs) if v in part.forward.outputs}
    part.forward = schedule_memory(part.forward, protected_inputs=protected)
    fplan = _plan_memory(part.forward, protected_inputs=protected,
                         reordered_inputs=rec.inputs.reordered)
    bplan = None
    if part.backward is not None:
        part.backward = schedule_memory(part.backward)
        bplan = _plan_memory(part.backward,
                             protected_inputs=set(range(len(part.backward.inputs))),
                             reordered_inputs=_reordered_saves(part, rec.inputs.reordered))
    stats = {"forward_planned_peak": fplan.planned_peak}
    if bplan is not None:
        stats["backward_planned_peak"] = bplan.planned_peak
    return replace(rec, part=part, forward_plan=fplan, backward_plan=bplan), stats


def _reordered_saves(part, reordered_inputs):
    """Backward inputs that may not be in C order: saved values computed from a transposed
    view or a non-C argument (Note [Layouts]). Cotangents arrive from the caller's backward
    and are taken to be C-ordered."""
    from ..passes.layout import reordered_values
    n_ct = len(part.cotangent_outputs)
    fwd = reordered_values(part.forward, reordered_inputs)
    n_fwd = len(part.saved) - len(part.saved_from_input)
    it = iter(part.forward.outputs[part.n_user:part.n_user + n_fwd])
    out = set()
    for k in range(len(part.saved)):
        pos = part.saved_from_input.get(k)
        reordered = pos in reordered_inputs if pos is not None else next(it) in fwd
        if reordered:
            out.add(n_ct + k)
    return out


def codegen(rec):
    """Straight-line Python over numpy for both programs (tracegrad/codegen.py)."""
    if rec.forward_program is not None:
        return rec, {}
    from ..codegen import build
    part, poison = rec.part, rec.options.poison
    # the runner passes each number read per call as one array while it is unchanged
    memo = [rec.inputs.n_args + j for j, *_ in rec.effects.scalar_sources]
    fwd = build(part.forward, rec.name, plan=rec.forward_plan, poison=poison,
                memo_inputs=memo)
    bwd = (build(part.backward, rec.name + "_backward", plan=rec.backward_plan,
                 poison=poison, owned_inputs=True) if part.backward is not None else None)
    stats = {"forward_lines": len(fwd.code.splitlines())}
    if bwd is not None:
        stats["backward_lines"] = len(bwd.code.splitlines())
    return replace(rec, forward_program=fwd, backward_program=bwd), stats


def decide_eager(rec):
    """Why this path must run eagerly, or None: the trace's own reason (trace_plan.py), or an
    input that requires grad (or whose base does) modified in place with grad mode on: eager
    rebases its autograd history on the in-place op, which copying the new values back
    cannot do. (Updates under `no_grad`, like optimizer steps, are compiled.)"""
    why = rec.trace_eager_reason
    if why is None:
        loud = rec.facts.grad_mode_writes
        ins = rec.functional.inputs
        for pos, _ in rec.part.mutations:
            if ins[pos] in loud and rec.inputs.rebased[pos]:
                name = ins[pos].name or f"input {pos}"
                why = (f"'{name}' requires grad and is modified in place (its autograd "
                       "history is rebased by eager execution)")
                break
    why = why or rec.effects.eager_reason
    return replace(rec, eager_reason=why), {"eager": why is not None}
