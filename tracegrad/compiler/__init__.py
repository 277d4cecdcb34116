"""tracegrad.compiler: `compile`, compiled paths, and the `torch.compiler` user functions.

The compiled functions' machinery (function.py and its neighbours), their backward node,
and what user code calls as `torch.compiler.*` (user_api.py)."""
from .function import CompiledFunction, Stats  # noqa: F401
from .entry import compile  # noqa: F401
from .backward_node import CompiledFunctionBackward  # noqa: F401
from .user_api import disable, is_compiling, is_dynamo_compiling, reset  # noqa: F401
