"""tracegrad.ir: the typed SSA IR (Graph/Node/Value), its printer, verifier and a reference
interpreter. The IR is data: it knows no eager Tensor (the tracer that records it lives in
`tracegrad.tracing`)."""
from .graph import Graph, Guard, Node, Value  # noqa: F401
from .interpret import GuardFailed, interpret  # noqa: F401
from .types import TensorType  # noqa: F401
from .verify import IRError, verify  # noqa: F401
