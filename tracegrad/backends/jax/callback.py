"""Opaque primitives (custom `autograd.Function`s, tracing/custom_function.py) lowered as a
`jax.pure_callback` to their kernel, which runs the user's Python `forward` on the host.

The callback returns the result with a flag, True when the forward raised or returned another
shape or dtype than when traced; the flag is a runtime check (`ctx.check`, table.py), so such
a call re-runs on the numpy backend, which raises eager's error or handles the result as the
numpy program does. Operands reach the forward as fresh writable numpy arrays, as on the
numpy backend. The forward runs once per call whose result is used (XLA keeps a callback's
result; the IR's dead-code pass already dropped unused nodes), in no promised order relative
to other callbacks: the tracer only records deterministic forwards that draw no random
numbers (Note [Opaque Functions]).
"""
import jax
import numpy as np

from ...ir.graph import Value


def opaque_rule(ctx, node, *args):
    want = node.output.type
    shape, dt = tuple(want.shape), np.dtype(want.dtype.np)
    traced = [i for i, a in enumerate(node.inputs) if isinstance(a, Value)]

    def host(*arrays):
        ops = list(args)
        for i, a in zip(traced, arrays):
            ops[i] = np.array(a)
        try:
            r = np.asarray(node.prim.kernel(*ops, **node.attrs))
        except Exception:            # noqa: BLE001 -- the numpy re-run raises it again
            return np.zeros(shape, dt), np.True_
        if r.shape != shape or r.dtype != dt:
            return np.zeros(shape, dt), np.True_
        return r, np.False_

    out, bad = jax.pure_callback(
        host, (jax.ShapeDtypeStruct(shape, dt), jax.ShapeDtypeStruct((), np.bool_)),
        *[args[i] for i in traced])
    ctx.check(bad)
    return out
