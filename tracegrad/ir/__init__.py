"""tracegrad.ir: the typed SSA IR (Graph/Node/Value), its printer, verifier, tracer and a
reference interpreter."""
from .graph import Graph, Guard, Node, Value  # noqa: F401
from .interpret import GuardFailed, interpret  # noqa: F401
from .tracer import Tracer, flatten, trace  # noqa: F401
from .types import TensorType  # noqa: F401
from .verify import IRError, verify  # noqa: F401
