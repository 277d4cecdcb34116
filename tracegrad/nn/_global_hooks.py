"""Module hooks registered for every module at once (PyTorch's
`nn.modules.module.register_module_forward_pre_hook`, `register_module_forward_hook`,
`register_module_full_backward_pre_hook`, `register_module_full_backward_hook`).

Note [Global module hooks]
Each kind of hook has one process-wide ordered registry, keyed by a handle id from the
same counter as a module's own hooks (so the `with_kwargs` / `always_call` flag dicts of
both never share an id). `Module.__call__` runs the global hooks of a kind before the
module's own (PyTorch's order), in `_module_hooks.py`. `ACTIVE[0]` counts the registered
hooks of all kinds, so a module call without hooks still costs one list read.
Compiled functions: a global hook is arbitrary Python run around every module call, which
no cached path can replay, so a compiled call made while one is registered runs eagerly,
with a warning (compiler/fallbacks.py), and a trace that registers one (or runs one) is
an effect that keeps its path from being cached.
"""
from collections import OrderedDict

from ._module_helpers import _Handle

FORWARD_PRE = OrderedDict()
FORWARD = OrderedDict()
FORWARD_WITH_KWARGS = {}
FORWARD_ALWAYS_CALLED = {}
BACKWARD_PRE = OrderedDict()
BACKWARD = OrderedDict()
ACTIVE = [0]                  # hooks registered in all four registries


class _GlobalHandle(_Handle):
    """A handle that also keeps `ACTIVE` counting the registered hooks."""

    def remove(self):
        if self._key in self._registry:
            ACTIVE[0] -= 1
        super().remove()


def _add(registry, hook, *flags):
    ACTIVE[0] += 1
    h = _Handle.add(registry, hook, False, *flags)
    return _GlobalHandle(h._registry, h._key, h._extra)


def register_module_forward_pre_hook(hook):
    """`hook(module, args)` runs before every module's forward (before its own pre-hooks);
    it may return replacement args. Returns a handle with `remove()`."""
    return _add(FORWARD_PRE, hook)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """`hook(module, args, output)` (with `with_kwargs=True`: `hook(module, args, kwargs,
    output)`) runs after every module's forward, before its own forward hooks; it may
    return a new output. `always_call=True`: also when forward raises."""
    return _add(FORWARD, hook, FORWARD_WITH_KWARGS if with_kwargs else None,
                FORWARD_ALWAYS_CALLED if always_call else None)


def register_module_full_backward_pre_hook(hook):
    """`hook(module, grad_output)` runs for every module when the gradients w.r.t. its
    outputs are known, before its own backward pre-hooks; it may return new ones."""
    return _add(BACKWARD_PRE, hook)


def register_module_full_backward_hook(hook):
    """`hook(module, grad_input, grad_output)` runs for every module once the gradients
    w.r.t. its inputs are known, before its own full backward hooks; it may return new
    `grad_input`."""
    return _add(BACKWARD, hook)
