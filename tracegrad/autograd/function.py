"""`autograd.Function`: user-defined forward/backward pairs with PyTorch's `ctx` API.

`Fn.apply(*args)` runs `forward` with grad recording off, then (if an input requires grad)
attaches one node whose backward calls the user's `backward(ctx, *grad_outputs)`. Saved
tensors are version-checked like any saved value; `mark_dirty` marks in-place-modified
inputs and `mark_non_differentiable` outputs that never require grad.
"""
import numpy as np

from .. import _dispatch, _effects, _func_levels as _levels, _mode
from ..ops import shape_rules as SR
from ..ops.primitive import Primitive
from .._errors import TracegradRuntimeError, TracegradTypeError, op_error
from .._saved_hooks import ACTIVE as _SAVED_HOOKS, Packed, pack_ctx
from .._tensor import Tensor, edge_of
from .graph import FREED_MSG, Node, _version_error
from ..tracing.forward_memo import MEMO, run_forward


_NOT_RUN = object()


class FunctionCtx:
    """The `ctx` object handed to forward and backward."""

    def __init__(self):
        self.needs_input_grad = ()
        self._saved = None
        self._versions = None
        self._released = False
        self._saved_out = None
        self._dirty = ()
        self._non_diff = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise op_error(TracegradTypeError, "save_for_backward",
                               f"save_for_backward can only save variables, but argument {i} "
                               f"is of type {type(t).__name__}.",
                               "Store non-tensors as ctx attributes (`ctx.k = k`).")
        self._saved = tensors

    _packed = False                  # saved through saved_tensors_hooks (_saved_hooks.py)

    @property
    def saved_tensors(self):
        if self._released:
            raise TracegradRuntimeError(FREED_MSG)
        if self._saved is None:
            return ()
        if self._packed:
            return tuple(p.get() if isinstance(p, Packed) else p for p in self._saved)
        for k, (t, v) in enumerate(zip(self._saved, self._versions or ())):
            if t is not None and t._vc.v != v:
                nr = self._saved_out[k] if self._saved_out else None
                if nr is not None:      # an output of this Function: name this node
                    raise _version_error(t, v, self._node, output=True, output_nr=nr)
                raise _version_error(t, v, self._node)
        return tuple(self._saved)

    saved_variables = saved_tensors

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        self._non_diff = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class BackwardCFunction(Node):
    """The grad_fn node of an autograd.Function call (named `<Name>Backward`)."""

    __slots__ = ("fn_cls", "ctx", "out_meta")

    def __repr__(self):             # PyTorch names the module custom Function nodes live in
        return f"<torch.autograd.function.{type(self).__name__} object at {id(self):#x}>"

    def apply(self, grads):
        ctx = self.ctx
        if ctx.materialize_grads:
            grads = [g if g is not None else _zeros(m) for g, m in zip(grads, self.out_meta)]
        res = self.fn_cls.backward(ctx, *grads)
        return check_gradients(self.name(), res, [e is not None for e in self.edges],
                               self.shapes)

    def release(self):
        self.ctx._released = True
        self.ctx._saved = None


def check_gradients(name, res, wanted, shapes):
    """What a Function's `backward` returned, as a tuple of one gradient per input, checked
    as PyTorch checks it: not fewer than the inputs (extra ones must be None), and the shape
    of each input whose gradient is `wanted`. Also used by the compiled VJP rule
    (tracing/custom_function.py), so a compiled backward raises where eager's does."""
    if not isinstance(res, tuple):
        res = (res,)
    n_in = len(wanted)
    if len(res) < n_in or any(g is not None for g in res[n_in:]):
        raise op_error(TracegradRuntimeError, name,
                       f"function {name} returned an incorrect number of gradients "
                       f"(expected {n_in}, got {len(res)})")
    res = tuple(res[:n_in])
    for i, (g, w) in enumerate(zip(res, wanted)):
        if g is not None and w and tuple(g.shape) != tuple(shapes[i]):
            raise op_error(TracegradRuntimeError, name,
                           f"Function {name} returned an invalid gradient at index "
                           f"{i} - got {list(g.shape)} but expected shape compatible with "
                           f"{list(shapes[i])}")
    return res


def _check_dirty(t):
    if t.requires_grad and t._grad_fn is None and t._base is None:
        raise op_error(TracegradRuntimeError, "mark_dirty",
                       "a leaf Variable that requires grad has been used in an in-place "
                       "operation.", "Clone the input before passing it to the Function.")


def _zeros(meta):
    shape, dt = meta
    return Tensor._wrap(np.zeros(shape, dt))


class _FunctionMeta(type):
    def __init__(cls, name, bases, ns):
        super().__init__(name, bases, ns)
        cls._node_cls = type(name + "Backward", (BackwardCFunction,), {"__slots__": ()})


# Note [setup_context]
# PyTorch 2.x lets a Function split its forward: `forward(*args)` computes the result with
# no ctx, and `setup_context(ctx, inputs, output)` saves what backward needs (the style
# functorch transforms require). A class that overrides `setup_context` is called that way
# everywhere `forward` runs (eagerly, inside a trace, and when a compiled backward
# rebuilds ctx): `Function._tg_call_forward` is the one place that knows both styles.

class Function(metaclass=_FunctionMeta):
    """Subclass with static `forward(ctx, *args)` and `backward(ctx, *grads)`; call `.apply`.

    Or the PyTorch 2.x split: `forward(*args)` and `setup_context(ctx, inputs, output)`."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode AD.")

    vjp = backward

    # Note [Functions under transforms]: tracegrad's transforms never call `jvp` or `vmap`
    # (jvp is exact by reverse mode, vmap loops over the batch), but they check that a
    # Function has them where torch.func would call them (_check_transforms). A forward-mode
    # transform goes through `backward`: it equals torch's only where `jvp` agrees with it.
    generate_vmap_rule = False

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @staticmethod
    def vmap(info, in_dims, *args):
        raise NotImplementedError("To use autograd.Function with vmap, you must either "
                                  "override the vmap staticmethod or set "
                                  "generate_vmap_rule=True.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """PyTorch 2.x style: override it to fill `ctx` from the call's `inputs` (a tuple)
        and `output`; `forward(*args)` then takes no `ctx` (Note [setup_context])."""
        raise NotImplementedError("setup_context is not implemented.")

    @classmethod
    def _tg_call_forward(cls, ctx, *args, **kwargs):
        """Run `forward` for one call, filling `ctx` (Note [setup_context])."""
        if cls.setup_context is Function.setup_context:
            return cls.forward(ctx, *args, **kwargs)
        out = cls.forward(*args, **kwargs)
        cls.setup_context(ctx, args, out)
        return out

    @classmethod
    def _check_transforms(cls, levels, needs):
        """torch.func's errors for this Function applied under the transforms `levels`
        (tracegrad/_func_levels.py); tracegrad's own Functions are exempt."""
        if cls.__module__.startswith("tracegrad."):
            return
        doc = "For more details, please see https://pytorch.org/docs/main/notes/extending.func.html"
        if cls.setup_context is Function.setup_context:
            raise op_error(TracegradRuntimeError, None,
                "In order to use an autograd.Function with functorch transforms (vmap, grad, "
                f"jvp, jacrev, ...), it must override the setup_context staticmethod. {doc}")
        if _levels.VMAP in levels and not cls.generate_vmap_rule \
                and cls.vmap is Function.vmap:
            raise op_error(TracegradRuntimeError, None,
                f"You tried to vmap over {cls.__name__}, but it does not have vmap support. "
                "Please override and implement the vmap staticmethod or set "
                f"generate_vmap_rule=True. {doc}")
        if _levels.FORWARD in levels and any(needs) and cls.jvp is Function.jvp:
            raise NotImplementedError("You must implement the jvp function for custom "
                                      "autograd.Function to use it with forward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        if _effects.active() is not None:    # its forward runs outside the trace: the
            from ..tracing.numbers import plain   # floats it gets are plain (Note [Numbers
            args, kwargs = plain(args), plain(kwargs)   # read per call])
        ctx = FunctionCtx()
        tens = [a if isinstance(a, Tensor) else None for a in args]
        needs = tuple(t is not None and t.requires_grad for t in tens)
        levels = _levels.active()
        if levels:
            cls._check_transforms(levels, needs)
        ctx.needs_input_grad = needs
        record = _mode.is_grad_enabled() and any(needs)
        out = _NOT_RUN
        if record and _effects.active() is not None:
            # inside a trace: one opaque node (Note [Opaque Functions]), else run eagerly
            from ..tracing.custom_function import Unsupported, apply_traced
            try:
                if not kwargs:
                    return apply_traced(cls, args, ctx)
            except Unsupported as u:
                if u.ctx is not None:        # forward already ran: never twice
                    out = u.out
            _effects.note("function", f"custom autograd.Function {cls.__name__}.apply() "
                          "(several outputs, keyword arguments, mark_dirty, randomness or the "
                          "autocast dtype)")
        if out is _NOT_RUN:
            with _mode.no_grad():
                if kwargs or MEMO.get() is None:
                    out = cls._tg_call_forward(ctx, *args, **kwargs)
                else:                        # Note [Forwards run once per call]
                    out = run_forward(cls, ctx, args, lambda: cls._tg_call_forward(ctx, *args))
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        if record:
            edges = tuple(edge_of(t) if n else None for t, n in zip(tens, needs))
            node = cls._node_cls(None, None, edges,
                                 tuple(t.shape if t is not None else () for t in tens),
                                 tuple(t._data.dtype if t is not None else None for t in tens),
                                 needs, n_outputs=len(outs))
            node.fn_cls, node.ctx = cls, ctx
            node.out_meta = tuple((o._data.shape, o._data.dtype) if isinstance(o, Tensor)
                                  else ((), np.float32) for o in outs)
            ctx._node = node
            non_diff = {id(t) for t in ctx._non_diff}
            dirty = {id(t) for t in ctx._dirty}
            new_outs = []
            for i, o in enumerate(outs):
                if isinstance(o, Tensor):
                    diff = id(o) not in non_diff       # before an input becomes a view
                    if id(o) in dirty:
                        _check_dirty(o)
                        o._vc.v += 1          # PyTorch bumps the version of dirty outputs
                    elif any(o is t for t in tens):
                        # an input returned as it is: the result is a new view of it, and
                        # the input keeps its own history (other uses of it in the graph
                        # must not go through this Function's backward)
                        o = o.view_as(o)
                    if diff and o.is_floating_point():
                        o._grad_fn = node
                        o._output_nr = i
                        o._rg = True
                        if o._retains_grad:       # a dirty input that retains its grad
                            o._move_retain_grad()
                new_outs.append(o)
            outs = tuple(new_outs)
            if ctx._saved is not None:
                ctx._versions = tuple(t._vc.v if t is not None else 0 for t in ctx._saved)
                ctx._saved_out = tuple(next((i for i, o in enumerate(outs) if o is t), None)
                                       for t in ctx._saved)
                if _SAVED_HOOKS[0]:          # Note [Saved tensors hooks]
                    pack_ctx(ctx)
        else:
            ctx._node = None
            if ctx._saved is not None:
                ctx._versions = tuple(t._vc.v if t is not None else 0 for t in ctx._saved)
        return outs[0] if single else outs


def once_differentiable(fn):
    """Decorator for a Function's `backward` that is not itself differentiable (PyTorch's
    `torch.autograd.function.once_differentiable`): it runs with recording off, and when
    its gradients would be differentiated again (`create_graph=True`), they carry a node
    that raises instead."""
    import functools

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with _mode.no_grad():
            outputs = fn(ctx, *args)
        if _dispatch.trace_hook.get() is not None:
            return _mark_once_differentiable(outputs, args)
        if not _mode.is_grad_enabled():
            return outputs
        inputs = [a for a in args if isinstance(a, Tensor) and a.requires_grad]
        if not inputs:
            return outputs
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        node = _DelayedError(None, None, tuple(edge_of(a) for a in inputs),
                             tuple(a.shape for a in inputs),
                             tuple(a._data.dtype for a in inputs), (True,) * len(inputs))
        wrapped = []
        for k, o in enumerate(outs):
            if isinstance(o, Tensor) and o.is_floating_point():
                o = Tensor._wrap(o._data, True, node)
                o._output_nr = k
            wrapped.append(o)
        return wrapped[0] if single else tuple(wrapped)
    return wrapper


def _raise_delayed(g, ins, out, node):
    raise TracegradRuntimeError("trying to differentiate twice a function that was marked "
                                "with @once_differentiable")


def _barrier_kernel(x, *grad_outputs):
    return np.array(x, copy=True, order="C")


# Note [once_differentiable in compiled code]
# A compiled program records a custom Function's backward as ops (Note [Opaque Functions]
# in tracing/custom_function.py); run with create_graph=True, its backward graph goes
# through eager dispatch (Note [Differentiable backward]), where the ops of a
# once_differentiable backward would be differentiated like any others. So inside a trace
# each result is detached and passes through this copy, whose other operands are the
# backward's gradient arguments: as eager's DelayedError node, it requires grad only when
# one of them does, and its VJP raises.
ONCE_DIFFERENTIABLE = Primitive("once_differentiable", _barrier_kernel, vjp=_raise_delayed,
                                grad_fn_name="DelayedError", shape_rule=SR.same)
ONCE_DIFFERENTIABLE.node_cls.ready_first = True     # as _DelayedError
# (its result operand, cut from the graph by a copy that is never differentiated: a
# `detach` would be dropped from a backward graph by the alias cleanup)
_CONSTANT = Primitive("once_differentiable_result", _barrier_kernel, shape_rule=SR.same)


def _mark_once_differentiable(outputs, args):
    single = not isinstance(outputs, tuple)
    outs = (outputs,) if single else outputs
    grads = tuple(a for a in args if isinstance(a, Tensor))
    outs = tuple(_dispatch.dispatch(ONCE_DIFFERENTIABLE,
                                    (_dispatch.dispatch(_CONSTANT, (o,)),) + grads)
                 if isinstance(o, Tensor) and o.is_floating_point() else o for o in outs)
    return outs[0] if single else outs


class _DelayedError(Node):
    """Raises when a once_differentiable backward's result is differentiated."""

    __slots__ = ()
    ready_first = True               # as PyTorch's Error node: it stops backward at once

    def name(self):
        return "DelayedError"

    def apply(self, grads):
        raise TracegradRuntimeError("trying to differentiate twice a function that was "
                                    "marked with @once_differentiable")