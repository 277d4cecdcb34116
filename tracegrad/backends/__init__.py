"""`tracegrad.backends`: where compiled programs run, and PyTorch's backend switches.

- Execution backends for compiled paths other than the default numpy code generator: a
  backend consumes a compiled path's final forward and backward IR graphs (after
  functionalize, the VJP pass, partition and the cleanup passes) and returns programs with
  the numpy program's call interface (`program(*input_arrays) -> list of output arrays`).
  It never changes semantics, only where kernels run. `jax/` lowers each path to `jax.jit`.
- The switches PyTorch programs commonly set or query (`backends.cudnn.benchmark = True`,
  `backends.mps.is_available()`), answered as a CPU-only PyTorch build answers them.
  Setting a flag is accepted and changes nothing.
"""
from types import SimpleNamespace


def _false():
    return False


cudnn = SimpleNamespace(is_available=_false, enabled=True, benchmark=False,
                        deterministic=False, allow_tf32=True, version=lambda: None)
mps = SimpleNamespace(is_available=_false, is_built=_false)
cuda = SimpleNamespace(is_built=_false,
                       matmul=SimpleNamespace(allow_tf32=False,
                                              allow_fp16_reduced_precision_reduction=True))
