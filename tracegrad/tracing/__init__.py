"""tracegrad.tracing: the bridge from eager tensors to the IR.

The tracer runs a user's function eagerly while recording every primitive it dispatches
into an `ir.Graph` (tracer.py). It is the one place that knows both worlds: the IR
(`tracegrad.ir`) is plain data and knows no eager Tensor; passes that record primitives'
VJP rules (passes/vjp.py) and the compiler use this package to do so.
"""
from .flatten import flatten  # noqa: F401
from .tracer import CONSTANT, Effect, Tracer, trace  # noqa: F401
