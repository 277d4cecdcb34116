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

Note [Callbacks behind guards]
A jitted program cannot stop at a guard (Note [Guards in a jitted program] in lower.py), but
the numpy program does, so on a call that leaves the path (a cached path tried first whose
`.item()` decision now differs) the forward written after the guard never runs there, nor
eagerly. A callback therefore also receives the values of the guards met before its node and
the runtime checks recorded so far; when one guard does not hold, or one check failed, it
returns zeros without running the forward: the host then raises `GuardFailed` or re-runs the
call on numpy, and the zeros are never seen. The forward runs on exactly the calls where the
numpy program reaches it. XLA may run a callback on one of its own threads (it does with
`data_parallel=True`), where the calling call's context is not seen: the program hands the
call's `ForwardMemo` over in `memo_cell`, one call at a time (Note [Forwards run once per
call] in tracing/forward_memo.py).
"""
import jax
import numpy as np

from ...ir.graph import Value
from ...tracing.forward_memo import MEMO


def opaque_rule(ctx, node, *args):
    from .lower import guard_holds
    want = node.output.type
    shape, dt = tuple(want.shape), np.dtype(want.dtype.np)
    traced = [i for i, a in enumerate(node.inputs) if isinstance(a, Value)]
    before = list(ctx.guards)                    # Note [Callbacks behind guards]
    checks = [c for _, c in ctx.checks]
    n_ops, n_guards = len(traced), len(before)
    cell = getattr(ctx, "memo_cell", [None])

    def host(*arrays):
        gvals = arrays[n_ops:n_ops + n_guards]
        if (any(np.asarray(c) for c in arrays[n_ops + n_guards:])
                or not all(guard_holds(gd, v)[0] for (gd, _), v in zip(before, gvals))):
            return np.zeros(shape, dt), np.False_   # the host leaves the path anyway
        ops = list(args)
        for i, a in zip(traced, arrays[:n_ops]):
            ops[i] = np.array(a)
        memo = cell[0]               # XLA may run this on another thread than the call's
        token = MEMO.set(memo) if memo is not None and MEMO.get() is not memo else None
        try:
            r = np.asarray(node.prim.kernel(*ops, **node.attrs))
        except Exception:            # noqa: BLE001 -- the numpy re-run raises it again
            return np.zeros(shape, dt), np.True_
        finally:
            if token is not None:
                MEMO.reset(token)
        if r.shape != shape or r.dtype != dt:
            return np.zeros(shape, dt), np.True_
        return r, np.False_

    out, bad = jax.pure_callback(
        host, (jax.ShapeDtypeStruct(shape, dt), jax.ShapeDtypeStruct((), np.bool_)),
        *[args[i] for i in traced], *[v for _, v in before], *checks)
    ctx.check(bad)
    return out
