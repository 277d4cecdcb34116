"""tracegrad: PyTorch-style define-by-run autograd over numpy that you can see and compile.

`import tracegrad as torch` runs programs written against the documented subset of PyTorch
(see shared/API.md) and gives the same numbers.
"""
from . import _dtype
from ._dtype import (dtype, float16, float32, float64, int32, int64, bool_ as bool,  # noqa
                     int8, int16, uint8, bfloat16,
                     get_default_dtype, set_default_dtype, promote_types)
from ._dtype import can_cast_public as can_cast  # noqa: F401
from ._errors import (TracegradError, TracegradRuntimeError, TracegradTypeError,  # noqa: F401
                      TracegradIndexError, TracegradValueError, InplaceError)
from ._errors import CompileMismatchError  # noqa: F401
from ._mode import (no_grad, enable_grad, set_grad_enabled, inference_mode,  # noqa: F401
                    is_grad_enabled, is_inference_mode_enabled)
from ._tensor import Tensor, Size  # noqa: F401
from . import _tensor_methods  # noqa: F401  (attaches methods and operators)
from . import _tensor_storage  # noqa: F401  (stride, is_contiguous, deepcopy, ...)
from .ops import *  # noqa: F401,F403
from .ops import abs, pow, round, sum, max, min, any, all  # noqa: F401,A004
from .ops.out_arg import WITH_OUT as _WITH_OUT, with_out as _with_out  # noqa: E402
globals().update({_n: _with_out(globals()[_n]) for _n in _WITH_OUT})   # `out=` (torch.add)
__import__("importlib").import_module("._numpy_names", __name__).install(globals(), Tensor)
from . import autograd  # noqa: F401
from .autograd.anomaly_mode import is_anomaly_enabled, is_anomaly_check_nan_enabled  # noqa
from .compiler import compile  # noqa: F401,A004
from .tracing import trace as _trace_graph  # noqa: E402


def trace(fn, *example_args, **example_kwargs):
    """`trace(fn, *example_args)`: run `fn` on the examples and return the recorded IR Graph
    (tracing.trace). `trace(tensor)`: the sum of a matrix's main diagonal, as `torch.trace`.

    >>> g = tracegrad.trace(lambda x: (x * 2).sum(), tracegrad.ones(3))
    """
    if isinstance(fn, Tensor):
        from .ops.linalg_more import trace as matrix_trace
        return matrix_trace(fn, *example_args, **example_kwargs)
    return _trace_graph(fn, *example_args, **example_kwargs)


from .codegen import build  # noqa: F401
from . import ir, passes  # noqa: F401
from . import random  # noqa: F401,A004
# torch.linalg: `from .ops import *` bound the name `linalg` to ops' matmul module, which
# `from . import linalg` would return; import the file itself
linalg = __import__("importlib").import_module(".linalg", __name__)
from .random import get_rng_state, set_rng_state  # noqa: F401
from ._settings import *  # noqa: F401,F403
from ._format import set_printoptions  # noqa: F401
from .ops.aliases import *  # noqa: F401,F403,E402  (ravel, msort, argwhere, ...)
from ._torch_misc import *  # noqa: F401,F403,E402  (asarray, broadcast_shapes, range, ...)
globals().update(__import__("importlib").import_module(  # torch.abs_, torch.relu_, ...
    ".ops.inplace_more", __name__).functions())


def _svg(obj):
    from . import viz                   # notebook display; None (text) without `dot`
    return viz.svg(obj)


ir.graph.set_display(_svg)              # the root wires presentation: ir never imports viz

half, float, double, int, long = float16, float32, float64, int32, int64  # noqa: A001
short = int16
cfloat = None

from ._legacy import (FloatTensor, DoubleTensor, HalfTensor, LongTensor,  # noqa: F401
                      IntTensor, ShortTensor, CharTensor, ByteTensor, BoolTensor)
from . import _tensor_device  # noqa: F401  (Tensor.device, to, cpu, cuda)
from ._device import device, set_default_device, get_default_device  # noqa: F401


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(input):
    return input.numel()


def is_floating_point(input):
    return input.is_floating_point()


def result_type(tensor1, tensor2):
    from .ops.primitive import _operand_dtype
    return _operand_dtype((tensor1, tensor2))


def __getattr__(name):
    # nn / optim / compile / func / viz load lazily so `import tracegrad` stays light.
    import importlib
    if name in ("nn", "optim", "func", "viz", "utils", "cuda", "backends", "amp",
                "distributions", "_dynamo", "special"):
        return importlib.import_module(f".{name}", __name__)
    if name == "vmap":
        return importlib.import_module(".func", __name__).vmap
    if name in ("autocast", "is_autocast_enabled", "get_autocast_dtype"):
        return getattr(importlib.import_module(".amp", __name__), name)
    if name in ("save", "load", "serialization"):
        serialization = importlib.import_module(".serialization", __name__)
        return serialization if name == "serialization" else getattr(serialization, name)
    raise AttributeError(f"module 'tracegrad' has no attribute {name!r}")


from .nn._torch_spellings import names as _spellings  # noqa: E402
globals().update(_spellings())          # torch.conv2d, torch.layer_norm, torch.dropout, ...
del _spellings

# torch.atan2(x, 1.5), torch.eq(1.5, x): TypeError as in PyTorch (no Scalar overload)
__import__("importlib").import_module("._tensor_only_args", __name__).install(globals(), Tensor)

__version__ = "0.1.0"
