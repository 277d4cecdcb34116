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
from .._dispatch import dispatch, trace_hook
from .._tensor import Tensor
from ..ops.primitive import Primitive

_SIMPLE = (bool, int, float, str, type(None))


class Unsupported(Exception):
    """The call needs eager execution (see Note [Opaque Functions])."""


def apply_traced(cls, args):
    """Record `cls.apply(*args)` as one opaque node; None when it must run eagerly."""
    if not all(isinstance(a, Tensor) or _simple(a) for a in args):
        return None
    needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
    try:
        return dispatch(_primitive(cls, len(args)), tuple(args), {"needs": needs})
    except Unsupported:
        return None


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
            grad_fn_name=f"{cls.__name__}Backward", saves=tuple(range(n)),
            shape_rule=_data_shape)
    return prim


def _unique(name):
    from ..ops.primitive import REGISTRY
    k, out = 2, name
    while out in REGISTRY:           # another class of that name, or another arity
        out, k = f"{name}#{k}", k + 1
    return out


def _data_shape(shapes, attrs):
    return None                      # the user's forward decides (like a data shape)


def _kernel(cls):
    def kernel(*operands, needs):
        from ..ops.creation import default_generator
        from ..autograd.function import FunctionCtx
        ins = [Tensor._wrap(a) if isinstance(a, np.ndarray) else a for a in operands]
        ctx = FunctionCtx()
        ctx.needs_input_grad = needs
        rng = default_generator._rng.bit_generator.state
        token = trace_hook.set(None)
        try:
            with _mode.no_grad():
                out = cls.forward(ctx, *ins)
        finally:
            trace_hook.reset(token)
        if (not isinstance(out, Tensor) or not out.is_floating_point() or ctx._dirty
                or any(t is out for t in ctx._non_diff)
                or default_generator._rng.bit_generator.state != rng):
            raise Unsupported(cls.__name__)
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
