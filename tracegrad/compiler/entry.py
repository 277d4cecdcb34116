"""`tracegrad.compile`: the entry point, choosing what to build for what it is given: a
`CompiledModule` for an `nn.Module` (module.py), a `CompiledFunction` for anything else
callable (function.py)."""
import os

from .._errors import TracegradRuntimeError
from .arguments import check_compile_arguments
from .function import CompiledFunction
from .module import CompiledModule


def compile(fn=None, *, cache_limit=None, passes=None, backend="numpy", memory="balanced",
            debug_nan=False, fullgraph=False, dynamic=None, mode=None, options=None,
            disable=False, check=None, data_parallel=False):
    """Compile a function or an nn.Module (as `@compile`, `compile(fn, cache_limit=...)`).

    `cache_limit`: paths kept before calls run eagerly (default: `tracegrad._dynamo.config.
    recompile_limit`, 8). For a module, `forward` is compiled; its parameters and buffers are read by reference
    each call, and the training flags of all its submodules are part of the entry key.
    `memory`: "balanced" (default: memory-aware order, in-place takeover, packed arena),
    "min" (also recompute cheap values in backward instead of saving them) or "off".
    `debug_nan=True` fills every buffer with NaN when its value dies (results must not change).
    `check=True` (default: env `TRACEGRAD_CHECK=1`) runs every call eagerly and compiled and
    raises `CompileMismatchError` on any difference (compiler/check.py).
    `backend="jax"` runs each path's programs on XLA (tracegrad/backends/jax; needs
    `pip install tracegrad[jax]`); with it, `data_parallel=True` shards the batch dimension
    of the tensor arguments over `jax.devices()` and replicates captured tensors.
    `fullgraph=True` raises `tracegrad._dynamo.exc.Unsupported` where a call would run
    eagerly (compiler/fullgraph.py). As in `torch.compile`: `disable=True` returns `fn`
    itself; `dynamic`, `mode` and `options` are accepted and change nothing (one of `mode`
    and `options`, as PyTorch checks); `backend="inductor"`, PyTorch's default, means the
    default backend here.
    """
    if mode is not None and options is not None:
        raise TracegradRuntimeError("Either mode or options can be specified, but both can't "
                                    "be specified at the same time.")
    if backend == "inductor":
        backend = "numpy"
    check_compile_arguments(fn, backend)
    if disable:
        return (lambda f: f) if fn is None else fn
    if cache_limit is None:              # `torch._dynamo.config.recompile_limit`, default 8
        from .._dynamo import config
        cache_limit = config.recompile_limit
    if check is None:
        check = os.environ.get("TRACEGRAD_CHECK", "") not in ("", "0")
    opts = dict(cache_limit=cache_limit, passes=passes, backend=backend, memory=memory,
                debug_nan=debug_nan, check=check, data_parallel=data_parallel,
                fullgraph=fullgraph)
    if fn is None:
        return lambda f: compile(f, **opts)
    if hasattr(fn, "forward") and hasattr(fn, "parameters") and not isinstance(fn, type):
        return CompiledModule(fn, **opts)       # an nn.Module (compiler/module.py)
    return CompiledFunction(fn, **opts)
