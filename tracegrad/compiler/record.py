"""The compilation record of one path: everything compiling a trace learns, in typed fields.

Note [Compilation record]
One trace becomes one `PathRecord` (`record_from_trace` in trace_plan.py): the raw graph, the
facts about its inputs and outputs, the effects and Python state the trace depends on. The
pipeline (compiler/pipeline.py) is a list of stages, each `record -> (record, stats)`: it
returns a new record with the fields it fills (`dataclasses.replace`) and a dict of
statistics the driver logs. What a stage learns is a field here, never an attribute added
to a `Graph` or to the path. `CompiledPath` (path.py) is built from the finished record and
keeps what running needs; it holds the record for introspection (`explain`, dumps, viz) and
for the differentiable backward (Note [Differentiable backward] in replay.py).

The fields fill in pipeline order:
    trace      name, options, raw, values, inputs, outputs, effects, state_guards, replays
    functionalize   functional, facts
    (passes)        functional
    vjp             wrt, vjp (values dropped: no pass needs the traced data after it)
    check_inplace   deferred_errors
    partition       part
    plan_replay     replay
    cleanup         part (forward/backward cleaned)
    lower           forward_program, backward_program (JAX backend), backend_note
    plan_memory     part (scheduled), forward_plan, backward_plan
    codegen         forward_program, backward_program
    decide_eager    eager_reason
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Options:
    """How the user asked to compile (`tracegrad.compile`'s keywords that shape a path)."""
    passes: tuple = ()             # Graph -> Graph passes run on the functional graph
    memory: str = "balanced"       # "balanced" | "min" | "off" (Note [Memory plan])
    poison: bool = False           # debug_nan: fill freed buffers with NaN
    backend: str = "numpy"
    data_parallel: bool = False


@dataclass(frozen=True)
class Inputs:
    """The program's inputs: the argument tensors, then the captured ones."""
    n_args: int
    captured: tuple                # tensors read from closures, globals, modules (by reference)
    differentiable: tuple          # per input: requires grad and is floating point
    rebased: tuple                 # per input: it or its base requires grad (Note in check)
    reordered: frozenset           # positions whose arrays are not in C order (Note [Layouts])


@dataclass(frozen=True)
class Outputs:
    """The structure of the user's result and the autograd state of its tensors."""
    build: object                  # flat list -> the user's structure
    is_tensor: tuple               # per flat leaf
    consts: tuple                  # per flat leaf: the value when it is not a tensor
    single: bool                   # a bare tensor (not `[t]` or `(t,)`)
    requires: tuple                # per tensor output: a gradient can still be asked for
    consumed: dict                 # tensor output k -> grad_fn name, graph already used
    inference: tuple = ()          # per tensor output: an inference tensor when traced
    versions: tuple = ()           # per tensor output: its `_version` when the trace returned


@dataclass
class PathRecord:
    """One path's compilation, from trace to programs (Note [Compilation record])."""
    name: str
    options: Options
    raw: object                    # the traced Graph
    values: dict                   # raw Value -> array seen while tracing (until vjp)
    inputs: Inputs
    outputs: Outputs
    effects: object                # TracePlan (trace_plan.py): sources, replays, .grad plan
    state_guards: list             # Python state the path depends on (compiler/state.py)
    replays: list                  # [(object, method, args, kwargs)] re-run after each call
    trace_eager_reason: str = None  # why the trace alone rules compiling out
    functional: object = None      # the functional forward Graph, after the user's passes
    facts: object = None           # OutputFacts (passes/functionalize.py)
    wrt: list = field(default_factory=list)   # input positions differentiated
    vjp: object = None             # VJPResult, or None when no gradient can flow
    deferred_errors: object = ()   # InplaceCheck: errors eager raises only at backward
    part: object = None            # Partition: the forward/backward program pair
    replay: object = None          # ReplayPlan for create_graph backward
    forward_plan: object = None    # MemoryPlan of the forward program (numpy backend)
    backward_plan: object = None
    forward_program: object = None
    backward_program: object = None
    backend_note: str = None       # JAX backend: what ran it ("jax" / "numpy (fallback...)")
    host_saved: object = None      # JAX backend: unpacks saved arrays for double backward
    eager_reason: str = None       # why this path runs eagerly (None: it is compiled)
    stages: list = field(default_factory=list)  # [(stage, Graph after it)] for explain/dump
    log: list = field(default_factory=list)     # [(stage, stats)] from the pipeline driver

    def graphs(self):
        """The IR graphs the record holds now, by name (what `verify` checks)."""
        out = {"raw": self.raw}
        if self.functional is not None:
            out["functional"] = self.functional
        if self.part is not None:
            out["forward"] = self.part.forward
            if self.part.backward is not None:
                out["backward"] = self.part.backward
        elif self.vjp is not None:
            out["vjp"] = self.vjp.graph
        return out

