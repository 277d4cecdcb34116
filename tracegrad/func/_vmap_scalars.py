"""torch.func.vmap's errors for Python taking a number from a batched value.

Note [Numbers from batched values]
tracegrad's vmap runs the function once per batch element (Note [vmap by looping] in
_vmap.py), so `.item()`, `float(t)`, `int(t)` or `if t > 0:` on a value computed from the
batch element would work, one element at a time, where torch raises: under vmap a batched
tensor has no single value. While a trace records the function (the compiled per-element
function, or an outer `tracegrad.compile`), each such read from user code is checked: if the
value is computed from a batch element (a walk back through the recorded graph), it raises
torch's error. Values that do not depend on the batch (an `in_dims=None` argument, a
parameter) work, as in torch. With `vmap(..., compile=False)` outside a compiled function
nothing is recorded, and the reads work per element.
"""
from .. import _func_levels
from .._errors import TracegradRuntimeError, op_error

_ITEM = ("vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over "
         "calling .item() on a Tensor, please try to rewrite what you're doing with other "
         "operations. If error is occurring somewhere inside PyTorch internals, please file "
         "a bug report.")
_FLOW = ("vmap: It looks like you're attempting to use a Tensor in some data-dependent "
         "control flow. We don't support that yet, please file an issue at "
         "https://github.com/pytorch/pytorch/issues .")
_UNDER_GRAD = ("vmap: It looks like you're either (1) calling .item() on a Tensor or (2) "
               "attempting to use a Tensor in some data-dependent control flow or (3) "
               "encountering this error in PyTorch internals. For (1): we don't support vmap "
               "over calling .item() on a Tensor, please try to rewrite what you're doing "
               "with other operations. For (2): we don't support data-dependent control flow "
               "in vmap yet, please file an issue at https://github.com/pytorch/pytorch/issues "
               ". For (3): please file an issue.")
KINDS = ("item", "float", "int", "bool")


def check(tracer, t, kind):
    """Raise torch's error if `t` (read by user code as a Python number, `kind`) is computed
    from a batch element of an active vmap, as far as `tracer` recorded."""
    sources = {tracer.env.get(id(s)) for s in _func_levels.batched_tensors()}
    sources.discard(None)
    v = tracer.env.get(id(t))
    if v is None:
        v = tracer.by_data.get(id(t._data))
    if v is None or not sources or not _reaches(tracer.graph, v, sources):
        return
    levels = _func_levels.active()
    inner = levels[len(levels) - 1 - levels[::-1].index(_func_levels.VMAP):]
    msg = (_UNDER_GRAD if _func_levels.GRAD in inner else _FLOW if kind == "bool" else _ITEM)
    raise op_error(TracegradRuntimeError, None, msg)


def _reaches(graph, v, sources):
    prod = graph.producers()
    seen, stack = set(), [v]
    while stack:
        x = stack.pop()
        if x in sources:
            return True
        if x in seen:
            continue
        seen.add(x)
        n = prod.get(x)
        if n is not None:
            stack.extend(n.value_inputs())
    return False
