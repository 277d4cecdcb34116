"""In-place shape changes: `t_`, `transpose_`, `swapdims_`/`swapaxes_`, `unsqueeze_`,
`squeeze_`.

Note [Shape changed in place]
PyTorch's in-place view ops change a tensor's metadata, not its values: the tensor becomes
the view the out-of-place op would return (same memory), keeps its identity, and takes that
view's grad_fn (`TBackward1`, `UnsqueezeBackward1`, ... here the view primitive's node). As
in PyTorch they bump the version counter, refuse a leaf that requires grad in grad mode,
and a view stays a view of its base (its view chain grows by the step, so a later in-place
write through it rebases the base correctly).
The IR has no node for "this tensor now has another shape": inside a compiled function the
change is reported as an effect the program cannot replay, so the call runs eagerly with a
warning naming the line (Note [Effects] in _effects.py). The trace itself stays coherent:
the tensor is rebound to the view's value.
Known gap, made loud: views taken of a (non-view) tensor *before* its shape changed keep a
view chain relative to its old shape (PyTorch re-derives them through the storage's
geometry). Their values stay right (memory is shared), but re-deriving their grad_fn from
the base (after a later write, or the version bump itself, while the base requires grad)
or writing through them would use the old chain, so that raises NotImplementedError
(`_tensor.stale_view_check`): the base counts its shape changes (`_shape_epoch`), a view
remembers the count when taken (`_base_epoch`).
"""
from .. import _effects, _mode
from .._dispatch import trace_hook
from .._errors import InplaceError, TracegradRuntimeError, op_error
from . import shape as S

__all__ = []


def _check_target(op, t):
    if t._inference and not _mode.inference_enabled():
        raise op_error(InplaceError, op, "Inplace update to inference tensor outside "
                       "InferenceMode is not allowed.", "You can make a clone to get a "
                       "normal tensor before doing inplace update.")
    if (_mode.is_grad_enabled() and t._rg and t._grad_fn is None and t._base is None):
        raise op_error(InplaceError, op, "a leaf Variable that requires grad is being used in "
                       "an in-place operation.", "Wrap the update in `with torch.no_grad():`, "
                       "or clone the tensor first.")


def _become(op, t, view):
    """Make `t` the view `view` of itself (Note [Shape changed in place])."""
    hook = trace_hook.get()
    t._data = view._data
    if t._base is not None:                   # a view stays a view of its root base
        t._view_chain = view._view_chain
    if view._grad_fn is not None or t._grad_fn is not None:
        t._grad_fn = view._grad_fn
        t._output_nr = view._output_nr
    t._vc.v += 1
    if t._base is not None:
        t._fn_version = t._vc.v
    else:                                     # views taken before now are stale (Note)
        t._shape_epoch += 1
    if hook is not None:
        tracer = hook.__self__
        v = tracer.env.get(id(view))
        if v is not None:
            tracer.env[id(t)] = v
        _effects.note("shape_inplace", f"{op}() (a shape change in place, which a compiled "
                      "program cannot express)", t)
    return t


def _apply(op, t, fn):
    _check_target(op, t)
    return _become(op, t, fn(t))


def t_(input):
    """`t()` in place: a 2-D tensor becomes its transpose (same memory)."""
    if input.ndim > 2:
        raise op_error(TracegradRuntimeError, "t_",
                       f"t_() expects a tensor with <= 2 dimensions, but self is {input.ndim}D",
                       "Use .transpose_(dim0, dim1) for batched matrices.")
    return _apply("t_", input, S.t)


def transpose_(input, dim0, dim1):
    """`transpose(dim0, dim1)` in place (same memory)."""
    return _apply("transpose_", input, lambda t: S.transpose(t, dim0, dim1))


def swapdims_(input, dim0, dim1):
    """Alias of `transpose_`."""
    return _apply("swapdims_", input, lambda t: S.transpose(t, dim0, dim1))


swapaxes_ = swapdims_


def unsqueeze_(input, dim):
    """`unsqueeze(dim)` in place."""
    return _apply("unsqueeze_", input, lambda t: S.unsqueeze(t, dim))


def squeeze_(input, dim=None):
    """`squeeze(dim)` in place (every size-1 dimension when `dim` is None)."""
    return _apply("squeeze_", input, lambda t: S.squeeze(t, dim))
