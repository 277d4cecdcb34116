"""Custom `autograd.Function`s inside a trace: one opaque primitive per Function class.

Note [Opaque Functions]
Eagerly, `Fn.apply` runs the user's `forward` with recording off and attaches a node that
calls the user's `backward`. Inside a trace, recording the ops of `forward` would lose the
user's `backward` (a straight-through estimator would get the derivative of `round`, zero).
So the whole call is recorded as one node of a primitive made for the class:
- its kernel runs `forward(ctx, *args)` on the node's arrays (trace hook off, no grad), so
  each compiled call runs the user's Python forward, data-dependent decisions included;
- its VJP rule rebuilds `ctx` by running `forward` again on the saved inputs (so saved
  tensors and `ctx` attributes are those of this call, recorded as ops of the backward
  program), sets `needs_input_grad`, and calls the user's `backward`; its ops are
  recorded like any VJP rule's, so double backward differentiates them.
Supported: positional arguments that are tensors or plain Python values, one floating
tensor result, a deterministic forward. A Function that returns several tensors, marks
inputs dirty or outputs non-differentiable, or draws random numbers in `forward` runs
eagerly for such calls, with a warning (Note [Effects] in _effects.py).
"""
import numpy as np

from .. import _mode
from .._dispatch import trace_hook
from .._tensor import Tensor
from ..ops.primitive import Primitive

_SIMPLE = (bool, int, float, str, type(None))


class Unsupported(Exception):
    """The call needs eager execution (see Note [Opaque Functions]). Carries the forward's
    `ctx` and result when it already ran (an in-place forward must not run twice)."""

    def __init__(self, ctx=None, out=None):
        super().__init__()
        self.ctx, self.out = ctx, out


def apply_traced(cls, args, ctx):
    """Record `cls.apply(*args)` as one opaque node of the active trace. `forward` runs once,
    on the caller's own tensors, as eagerly; raises Unsupported (carrying `ctx` and the
    result when forward ran) when the call must be wired up eagerly instead."""
    from .. import _effects
    if not all(isinstance(a, Tensor) or _simple(a) for a in args):
        raise Unsupported()
    needs = ctx.needs_input_grad
    out = _forward(cls, ctx, args)
    arrays = [a._data for a in args if isinstance(a, Tensor)]
    if not _supported(ctx, out) or any(np.shares_memory(out._data, a) for a in arrays):
        raise Unsupported(ctx, out)
    return _effects.active().record_result(_primitive(cls, len(args)), args,
                                           {"needs": needs}, out)


def _forward(cls, ctx, args):
    """`cls.forward(ctx, *args)` with recording off and no grad; raises Unsupported when it
    draws from tracegrad's generator (backward recomputes forward: draws must not differ)."""
    from ..ops.creation import default_generator
    rng = default_generator._rng.bit_generator.state
    token = trace_hook.set(None)
    try:
        with _mode.no_grad():
            out = cls.forward(ctx, *args)
    finally:
        trace_hook.reset(token)
    if default_generator._rng.bit_generator.state != rng:
        raise Unsupported(ctx, out)
    return out


def _supported(ctx, out):
    return (isinstance(out, Tensor) and out.is_floating_point() and not ctx._dirty
            and not any(t is out for t in ctx._non_diff))


def _simple(a):
    if isinstance(a, tuple):
        return all(_simple(x) for x in a)
    return isinstance(a, _SIMPLE)


def _primitive(cls, n):
    """The opaque primitive of `cls` applied to `n` operands (made once, kept on the class)."""
    table = cls.__dict__.get("_tg_primitives")
    if table is None:
        table = {}
        setattr(cls, "_tg_primitives", table)
    prim = table.get(n)
    if prim is None:
        prim = table[n] = Primitive(
            _unique(f"{cls.__qualname__}.apply"), _kernel(cls), vjp=_vjp(cls),
            grad_fn_name=f"{cls.__name__}Backward", saves=tuple(range(n)))
        OPAQUE.add(prim)
    return prim


OPAQUE = set()   # the primitives made here (user code, not the op table; kept, as REGISTRY does)


def _unique(name):
    from ..ops.primitive import REGISTRY
    k, out = 2, name
    while out in REGISTRY:           # another class of that name, or another arity
        out, k = f"{name}#{k}", k + 1
    return out


def _kernel(cls):
    def kernel(*operands, needs):
        from ..autograd.function import FunctionCtx
        ins = [Tensor._wrap(a) if isinstance(a, np.ndarray) else a for a in operands]
        ctx = FunctionCtx()
        ctx.needs_input_grad = needs
        out = _forward(cls, ctx, ins)
        if not _supported(ctx, out):     # the trace saw otherwise: a data-dependent forward
            raise RuntimeError(f"{cls.__name__}.forward returned another kind of result "
                               "than when it was traced (a single floating tensor)")
        res = out._data
        if any(isinstance(a, np.ndarray) and np.shares_memory(res, a) for a in operands):
            res = res.copy()         # a fresh result: the program's buffers never alias
        return res
    kernel.__name__ = f"{cls.__name__}_forward"
    return kernel


def _vjp(cls):
    def vjp(g, ins, out, node):
        from ..autograd.function import FunctionCtx
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(bool(n) for n in node.needs)
        with _mode.no_grad():
            cls.forward(ctx, *ins)   # rebuild ctx: this call's saved tensors and attributes
        grads = cls.backward(ctx, g)
        if not isinstance(grads, tuple):
            grads = (grads,)
        grads = tuple(grads) + (None,) * (len(ins) - len(grads))
        return tuple(gr if isinstance(a, Tensor) and isinstance(gr, Tensor) else None
                     for a, gr in zip(ins, grads))
    return vjp
