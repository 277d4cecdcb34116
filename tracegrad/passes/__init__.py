"""tracegrad.passes: pure functions on Graphs, composable into a pipeline.

- `functionalize(g)`: in-place and view effects -> pure SSA (+ input mutations, stale saves)
- `cse(g)`, `dce(g)`: clean-ups
- `vjp(g, wrt)`: the backward program, recorded from the primitives' VJP rules
- `partition(g, vjp_result)`: the forward/backward program pair and what is saved
- `check_inplace(g, differentiated)`: compile-time version of eager's saved-tensor check

`DEFAULT_PIPELINE` is what `tracegrad.compile` runs on the functional forward graph before
differentiation; pass your own list as `compile(fn, passes=[...])`.
"""
from .check_inplace import check_inplace
from .functionalize import functionalize
from .partition import Partition, partition
from .simplify import cse, dce
from .vjp import VJPResult, vjp

DEFAULT_PIPELINE = (cse, dce)

__all__ = ["functionalize", "cse", "dce", "vjp", "partition", "check_inplace", "Partition",
           "VJPResult", "DEFAULT_PIPELINE"]
