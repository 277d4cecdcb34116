"""Saved-tensor hooks: `autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook)` and
`save_on_cpu` (PyTorch's names), and what recording a node does while they are active.

Note [Saved tensors hooks]
While a `saved_tensors_hooks(pack, unpack)` context is active (per thread, innermost
wins), every tensor an autograd node saves for backward (its operands, its result, a custom
Function's `save_for_backward`) is stored as `pack(tensor)`; backward calls `unpack` on it
and uses what it returns. As in PyTorch:
- packed values carry no version check (an in-place write after the save is not an error:
  what `unpack` returns is used), and the node keeps no reference to the saved tensor
  besides what `pack` returned;
- the unpacked tensor takes the autograd identity of the tensor saved (its grad_fn, or the
  leaf's accumulator), so a double backward through it reaches the same graph.
`record` (_dispatch.py) checks one module-level counter of active contexts (all threads),
so the common case costs a list read. A packed node gets a subclass of its class, of the
same name, whose `apply` unpacks first.

Compiled functions: a compiled program keeps raw arrays, not packed values, so a call made
while hooks are active runs eagerly, with a warning, and so do calls whose trace enters a
`saved_tensors_hooks` context (an effect, Note [Effects] in _effects.py).
"""
import contextvars

from . import _effects

ACTIVE = [0]                 # contexts entered and not exited, in all threads
_STACK = contextvars.ContextVar("tracegrad_saved_tensors_hooks", default=())


class saved_tensors_hooks:
    """`with saved_tensors_hooks(pack_hook, unpack_hook):` tensors saved for backward inside
    are stored as `pack_hook(t)` and restored by `unpack_hook(packed)` (Note [Saved tensors
    hooks]). E.g. keep a float16 copy: `saved_tensors_hooks(lambda t: t.half(),
    lambda t: t.float())`."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook
        self._tokens = []

    def __enter__(self):
        _effects.note("saved_hooks", "saved_tensors_hooks() (tensors saved for backward go "
                      "through Python hooks)")
        self._tokens.append(_STACK.set(_STACK.get() + ((self.pack_hook, self.unpack_hook),)))
        ACTIVE[0] += 1
        return self

    def __exit__(self, *exc):
        _STACK.reset(self._tokens.pop())
        ACTIVE[0] -= 1
        return False


class save_on_cpu(saved_tensors_hooks):
    """PyTorch's `save_on_cpu(pin_memory=False, device_type="cuda")`: saved tensors move to
    the CPU and back. Every tracegrad tensor lives on the CPU: they are kept as they are."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        super().__init__(lambda t: t, lambda t: t)


def active():
    """The innermost (pack, unpack) pair of this thread, or None."""
    stack = _STACK.get()
    return stack[-1] if stack else None


class Packed:
    """What `pack` returned for one saved tensor, with the unpack hook and the tensor's
    autograd identity (its edge) to give back to what `unpack` returns."""

    __slots__ = ("obj", "unpack", "edge", "shape", "dtype")

    def __init__(self, t, pack, unpack):
        from ._tensor import edge_of
        self.edge = edge_of(t) if t.requires_grad else None
        self.shape, self.dtype = t._data.shape, t._data.dtype
        self.obj, self.unpack = pack(t), unpack

    def get(self):
        from ._errors import TracegradTypeError, op_error
        from ._tensor import Tensor
        u = self.unpack(self.obj)
        if not isinstance(u, Tensor):
            raise op_error(TracegradTypeError, "unpack_hook",
                           "Output of saved tensor unpack_hook expected to be a Tensor but "
                           f"got result of type {type(u).__name__}")
        t = Tensor._wrap(u._data)        # a new tensor: never rewire what unpack returned
        t._vc = u._vc
        if self.edge is not None:
            from .autograd.graph import AccumulateGrad
            node, nr = self.edge
            t._rg = True
            if isinstance(node, AccumulateGrad):
                t._accum = node              # a leaf's: gradients reach the leaf
            else:
                t._grad_fn, t._output_nr = node, nr
        return t


def pack_node(node, out):
    """Store the values `node` just saved through the active hooks (Note [Saved tensors
    hooks])."""
    hooks = active()
    if hooks is None:
        return
    from ._tensor import Tensor
    pack, unpack = hooks
    saved = node.saved
    if saved:
        node.saved = tuple([Packed(t, pack, unpack) if isinstance(t, Tensor) else t
                            for t in saved])
        node.versions = (0,) * len(saved)
    if node.out_saved is not None:
        node.out_saved = (Packed(out, pack, unpack), None, None)
    node.__class__ = _packed_class(type(node))


def unpack_all(node):
    """(saved operands, saved result or None) of a packed node, unpacked."""
    from ._errors import TracegradRuntimeError, op_error
    from .autograd.graph import FREED_MSG
    saved, out_saved = node.saved, node.out_saved
    if saved is None and out_saved is None and node.released:
        raise op_error(TracegradRuntimeError, None, FREED_MSG)
    saved = tuple([p.get() if isinstance(p, Packed) else p for p in saved or ()])
    out = None
    if out_saved is not None:
        out = out_saved[0].get()
        out._grad_fn, out._output_nr, out._rg = node, 0, True
    return saved, out


_CLASSES = {}


def _packed_class(cls):
    k = _CLASSES.get(cls)
    if k is None:
        def apply(self, grads):
            saved, out = unpack_all(self)
            return self.prim.vjp(grads[0], saved, out, self)

        def unpack_inputs(self):
            return unpack_all(self)[0]

        def unpack_out(self):
            return unpack_all(self)[1]
        k = _CLASSES[cls] = type(cls.__name__, (cls,), {
            "__slots__": (), "apply": apply, "unpack_inputs": unpack_inputs,
            "unpack_out": unpack_out, "__module__": cls.__module__})
    return k


def pack_ctx(ctx):
    """A custom Function's `save_for_backward` tensors, stored through the active hooks."""
    hooks = active()
    if hooks is None or not ctx._saved:
        return
    from ._tensor import Tensor
    pack, unpack = hooks
    ctx._saved = tuple(Packed(t, pack, unpack) if isinstance(t, Tensor) else t
                       for t in ctx._saved)
    ctx._versions = None
    ctx._packed = True
