"""Custom `autograd.Function`s inside a trace: one opaque primitive per Function class.

Note [Opaque Functions]
Eagerly, `Fn.apply` runs the user's `forward` with recording off and attaches a node that
calls the user's `backward`. Inside a trace, recording the ops of `forward` would lose the
user's `backward` (a straight-through estimator would get the derivative of `round`, zero).
So the whole call is recorded as one node of a primitive made for the class:
- its kernel runs `forward(ctx, *args)` on the node's arrays (trace hook off, no grad), so
  each compiled call runs the user's Python forward, data-dependent decisions included;
- its VJP rule rebuilds `ctx`, sets `needs_input_grad`, and calls the user's `backward`;
  its ops are recorded like any VJP rule's, so double backward differentiates them.
  When the traced forward saved only its operands or its result and kept no tensor among
  ctx's other attributes (the usual case), the node carries a `CtxTemplate` (where each
  saved tensor came from, and those attributes) and the rule fills `ctx` from it: the
  user's forward runs once per call, as eagerly, the tracing call included. Otherwise
  (a saved intermediate, an object on ctx) the rule runs `forward` again on the saved
  operands, so that saved intermediates are recorded as ops of the backward program: the
  forward's Python side effects then happen once more per compiled path, when compiling
  its backward, with a warning once per class. The tracing call's own backward, which
  runs eagerly, uses that call's `ctx`. A compiled call whose forward leaves another
  `ctx` than the traced one runs eagerly (Note [Per-call ctx attributes]); one attempted
  more than once runs forward once (Note [Forwards run once per call], forward_memo.py).
- The user's `backward` is recorded, not called, by compiled programs: its Python side
  effects happen when a backward program is compiled, not on each compiled call.
Supported: positional arguments that are tensors or plain Python values, one floating
tensor result, a deterministic forward. A Function that returns several tensors, marks
inputs dirty or outputs non-differentiable, draws random numbers or asks
`get_autocast_dtype` in `forward` runs eagerly for such calls, with a warning (Note
[Effects] in _effects.py).
"""
import numpy as np

from .. import _mode
from .._dispatch import trace_hook
from .._dtype import dtype
from .._tensor import Tensor
from ..ops.primitive import Primitive
from .forward_memo import run_forward

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
    from ..amp.autocast_mode import READS as autocast_reads
    needs = ctx.needs_input_grad
    asked = autocast_reads[0]
    out = _forward(cls, ctx, args)
    arrays = [a._data for a in args if isinstance(a, Tensor)]
    if not _supported(ctx, out) or any(np.shares_memory(out._data, a) for a in arrays) \
            or autocast_reads[0] != asked:      # Note [Autocast dtype read in a compiled
        raise Unsupported(ctx, out)             # function] in amp/autocast_mode.py
    template = CtxTemplate.of(ctx, args, out)
    attrs = {"needs": needs}
    saves_out = template is not None and "out" in (template.saved or ())
    if template is not None:
        attrs["ctx"] = template
    out = _effects.active().record_result(_primitive(cls, len(args), saves_out), args,
                                          attrs, out)
    node = out._grad_fn
    if node is not None:                 # this call's eager backward uses this very ctx
        node.attrs = dict(node.attrs, live_ctx=ctx)     # (not the IR node's attributes)
    return out


class CtxTemplate:
    """What a traced forward left in `ctx`, without tensors (Note [Opaque Functions]):
    `saved`, per saved tensor, the operand index it is, "out" or None; `attrs`, ctx's
    other attributes. Compared by identity: two calls are never merged as one."""

    __slots__ = ("attrs", "saved")

    def __init__(self, saved, attrs):
        self.saved, self.attrs = saved, attrs

    @classmethod
    def of(cls, ctx, args, out):
        """The template of `ctx`, or None when it holds other tensors than the operands and
        the result (they could only be rebuilt by running forward again)."""
        saved = []
        for t in ctx._saved or ():
            if t is None:
                saved.append(None)
            elif t is out:
                saved.append("out")
            else:
                k = next((k for k, a in enumerate(args) if a is t), None)
                if k is None:
                    return None
                saved.append(k)
        attrs = {k: v for k, v in vars(ctx).items() if k not in _CTX_STATE}
        if not all(is_plain(v) for v in attrs.values()):
            return None                  # an object may hold this call's tensors
        return cls(None if ctx._saved is None else tuple(saved), attrs)

    def fill(self, ctx, ins, out):
        """Give a fresh `ctx` this call's attributes and saved tensors (`ins`: the operands
        as the rule received them, `out` the result)."""
        # containers anew, as forward makes them anew each call (backward may change them)
        vars(ctx).update({k: type(v)(v) if type(v) in (list, dict, set) else v
                          for k, v in self.attrs.items()})
        if self.saved is not None:
            ctx._saved = tuple(None if s is None else out if s == "out" else ins[s]
                               for s in self.saved)

    def check(self, cls, ctx, ins, out):
        """Raise `CtxChanged` unless this call's forward left in `ctx` what the traced one
        did.

        Note [Per-call ctx attributes]
        The compiled backward is recorded from the traced call's `ctx`: its attributes are
        constants there (`ctx.scale = float(x.abs().max())` is the traced call's scale).
        A compiled call whose forward sets other values, or saves other tensors, would get
        the traced call's gradients, silently. So the kernel compares; on a difference it
        raises, and the call runs again eagerly (Note [Errors inside compiled programs] in
        codegen.py; the forward is not run again: Note [Forwards run once per call] in
        forward_memo.py), with a warning once per class."""
        now = CtxTemplate.of(ctx, ins, out)
        if now is not None and now.saved == self.saved and _same(now.attrs, self.attrs):
            return
        if not cls.__dict__.get("_tg_warned_ctx"):
            setattr(cls, "_tg_warned_ctx", True)
            import warnings
            warnings.warn(f"tracegrad.compile: {cls.__name__}.forward left other ctx "
                          "attributes or saved tensors than when traced; its compiled "
                          "backward would use the traced ones, so such calls run eagerly. "
                          "Save per-call values as tensors (ctx.save_for_backward) to "
                          "compile them", UserWarning, stacklevel=2)
        raise CtxChanged(f"{cls.__name__}.forward left other ctx attributes or saved tensors "
                         "than when traced")

    def __repr__(self):
        return f"CtxTemplate(saved={self.saved}, {sorted(self.attrs)})"


class CtxChanged(RuntimeError):
    """A compiled call's custom forward left another `ctx` than the traced call's (Note
    [Per-call ctx attributes]): the call runs eagerly."""


def _same(a, b):
    if type(a) is not type(b):
        return False
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:                    # noqa: BLE001 -- not comparable: not the same
        return False


# FunctionCtx's own bookkeeping (autograd/function.py), set anew by every call
_CTX_STATE = {"needs_input_grad", "_saved", "_versions", "_released", "_saved_out", "_dirty",
              "_non_diff", "_node"}


PLAIN = (bool, int, float, complex, str, bytes, type(None), np.generic, np.dtype, dtype, type,
         slice, range, type(Ellipsis))


def is_plain(v, depth=0):
    """A value that holds no tensor and no object that might: numbers, strings, dtypes, and
    lists, tuples, dicts and sets of them."""
    if isinstance(v, PLAIN):
        return True
    if depth < 8 and type(v) in (list, tuple, set, frozenset):
        return all(is_plain(x, depth + 1) for x in v)
    if depth < 8 and type(v) is dict:
        return all(is_plain(x, depth + 1) for x in v.values())
    return False


def _forward(cls, ctx, args, fill_ctx=True):
    """`cls.forward(ctx, *args)` with recording off and no grad, or what it gave on an
    earlier attempt at this call (Note [Forwards run once per call] in forward_memo.py);
    raises Unsupported when it draws from any of tracegrad's generators (backward recomputes
    forward: draws must not differ)."""
    rng = _generator_states()
    token = trace_hook.set(None)
    try:
        with _mode.no_grad():
            out = run_forward(cls, ctx, args, lambda: cls._tg_call_forward(ctx, *args), fill_ctx)
    finally:
        trace_hook.reset(token)
    now = _generator_states()
    if any(now.get(k) != v for k, v in rng.items()):      # (one made inside starts fresh)
        raise Unsupported(ctx, out)
    return out


def _generator_states():
    """What changes when any tracegrad generator draws (the default one or a user's
    `Generator` the forward closes over) or is seeded again."""
    from ..ops.generator import _live_generators
    return {id(g): (id(g._rng), g._rng.bit_generator.state) for g in _live_generators()}


def _supported(ctx, out):
    return (isinstance(out, Tensor) and out.is_floating_point() and not ctx._dirty
            and not any(t is out for t in ctx._non_diff))


def _simple(a):
    if isinstance(a, tuple):
        return all(_simple(x) for x in a)
    return isinstance(a, _SIMPLE)


def _primitive(cls, n, saves_out=False):
    """The opaque primitive of `cls` applied to `n` operands, keeping its result for backward
    or not (made once, kept on the class)."""
    table = cls.__dict__.get("_tg_primitives")
    if table is None:
        table = {}
        setattr(cls, "_tg_primitives", table)
    prim = table.get((n, saves_out))
    if prim is None:
        prim = table[(n, saves_out)] = Primitive(
            _unique(f"{cls.__qualname__}.apply"), _kernel(cls), vjp=_vjp(cls),
            grad_fn_name=f"{cls.__name__}Backward", saves=tuple(range(n)),
            saves_out=saves_out, may_raise=True)        # user code may raise on values
        OPAQUE.add(prim)
        CLASS_OF[prim] = cls            # (its backward's code: Note [Unread attributes])
    return prim


OPAQUE = set()   # the primitives made here (user code, not the op table; kept, as REGISTRY does)
CLASS_OF = {}    # each of them -> its Function class


def _unique(name):
    from ..ops.primitive import REGISTRY
    k, out = 2, name
    while out in REGISTRY:           # another class of that name, or another arity
        out, k = f"{name}#{k}", k + 1
    return out


def _kernel(cls):
    def kernel(*operands, needs, ctx=None):
        from ..autograd.function import FunctionCtx
        template = ctx
        ins = [Tensor._wrap(a) if isinstance(a, np.ndarray) else a for a in operands]
        ctx = FunctionCtx()
        ctx.needs_input_grad = needs
        out = _forward(cls, ctx, ins, fill_ctx=template is not None)
        if not _supported(ctx, out):     # the trace saw otherwise: a data-dependent forward
            raise RuntimeError(f"{cls.__name__}.forward returned another kind of result "
                               "than when it was traced (a single floating tensor)")
        if template is not None:         # Note [Per-call ctx attributes]
            template.check(cls, ctx, ins, out)
        res = out._data
        if any(isinstance(a, np.ndarray) and np.shares_memory(res, a) for a in operands):
            res = res.copy()         # a fresh result: the program's buffers never alias
        return res
    kernel.__name__ = f"{cls.__name__}_forward"
    return kernel


def _warn_forward_again(cls):
    if trace_hook.get() is not None and not cls.__dict__.get("_tg_warned_again"):
        setattr(cls, "_tg_warned_again", True)      # once per class
        import warnings
        warnings.warn(f"tracegrad.compile: {cls.__name__}.forward saves for backward a tensor "
                      "it computed (not an input or its result) or keeps tensors on ctx, so "
                      "compiling its backward runs forward once more (its Python side effects "
                      "happen once more per compiled path than eagerly); save the inputs and "
                      "recompute in backward to avoid it", UserWarning, stacklevel=2)


def _vjp(cls):
    def vjp(g, ins, out, node):
        from ..autograd.function import FunctionCtx, check_gradients
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(bool(n) for n in node.needs)
        template = node.attrs.get("ctx")
        live = node.attrs.get("live_ctx")
        if live is not None and trace_hook.get() is None:
            ctx = live                       # the tracing call's backward, run eagerly
        elif template is not None and ctx.needs_input_grad == tuple(node.attrs["needs"]):
            template.fill(ctx, ins, out)
        else:
            _warn_forward_again(cls)
            with _mode.no_grad():
                cls._tg_call_forward(ctx, *ins)  # rebuild ctx: saved tensors, attributes
        grads = check_gradients(cls._node_cls.__name__, cls.backward(ctx, g),
                                [bool(n) for n in ctx.needs_input_grad],
                                [a.shape if isinstance(a, Tensor) else () for a in ins])
        return tuple(gr if isinstance(a, Tensor) and isinstance(gr, Tensor) else None
                     for a, gr in zip(ins, grads))
    return vjp
