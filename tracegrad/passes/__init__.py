"""tracegrad.passes: pure functions on Graphs, composable into a pipeline.

- `functionalize(g)`: in-place and view effects -> pure SSA (+ input mutations, stale saves);
  `functionalize_with_facts(g)` also returns the output and mutation facts the compiler uses
- `cse(g)`, `dce(g)`: clean-ups
- `vjp(g, wrt)`: the backward program, recorded from the primitives' VJP rules
- `partition(g, vjp_result)`: the forward/backward program pair and what is saved
- `check_inplace(g, differentiated)`: compile-time version of eager's saved-tensor check
- `liveness(g)`, `schedule_memory(g)`, `plan_memory(g)`, `check_plan(g, plan)`: the memory
  side (Note [Memory plan]): lifetimes, a memory-friendly order, buffer reuse, its proof

`DEFAULT_PIPELINE` is what `tracegrad.compile` runs on the functional forward graph before
differentiation; pass your own list as `compile(fn, passes=[...])`.
"""
from .check_inplace import check_inplace
from .functionalize import OutputFacts, functionalize, functionalize_with_facts
from .liveness import liveness
from .partition import Partition, partition
from .plan_memory import MemoryPlan, check_plan, plan_memory
from .schedule import schedule_memory
from .simplify import cse, dce
from .vjp import VJPResult, vjp

DEFAULT_PIPELINE = (cse, dce)

__all__ = ["functionalize", "functionalize_with_facts", "OutputFacts", "cse", "dce", "vjp", "partition", "check_inplace", "Partition",
           "VJPResult", "DEFAULT_PIPELINE", "liveness", "schedule_memory", "plan_memory",
           "check_plan", "MemoryPlan"]
