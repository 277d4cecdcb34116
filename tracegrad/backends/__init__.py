"""Execution backends for compiled paths other than the default numpy code generator.

A backend consumes a compiled path's final forward and backward IR graphs (after
functionalize, the VJP pass, partition and the cleanup passes) and returns programs with the
numpy program's call interface (`program(*input_arrays) -> list of output arrays`). It never
changes semantics, only where kernels run. `jax/` lowers each path to `jax.jit`.
"""
