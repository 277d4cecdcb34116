"""tracegrad.compiler: `compile`, compiled paths and the CompiledFunctionBackward node."""
from .function import CompiledFunction, Stats  # noqa: F401
from .entry import compile  # noqa: F401
from .backward_node import CompiledFunctionBackward  # noqa: F401
