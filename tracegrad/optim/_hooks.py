"""Optimizer hooks, PyTorch's: around `step()` (per optimizer and global) and around
`state_dict()` / `load_state_dict()`.

    opt.register_step_pre_hook(hook)          # hook(opt, args, kwargs) -> None or (args, kwargs);
                                              # args are step's, the optimizer first
    opt.register_step_post_hook(hook)         # hook(opt, args, kwargs) -> None
    register_optimizer_step_pre_hook(hook)    # every optimizer (tracegrad.optim.optimizer)
    opt.register_state_dict_pre_hook(hook)    # hook(opt)
    opt.register_state_dict_post_hook(hook)   # hook(opt, state_dict) -> state_dict or None
    opt.register_load_state_dict_pre_hook(hook)   # hook(opt, state_dict) -> state_dict or None
    opt.register_load_state_dict_post_hook(hook)  # hook(opt)

Order (PyTorch's): global step pre-hooks, then the optimizer's; the optimizer's post-hooks,
then the global ones. Every subclass's `step` is wrapped once, when the class is defined
(`Optimizer.__init_subclass__`); without hooks the wrapper only calls it. Inside a compiled
training step the hooks run in the trace like any code the step calls: what they read is
guarded (they are reached through the optimizer), a hook updating tensors under no_grad
(clamping weights, an EMA) becomes part of the program, and one counting its calls makes
the step run eagerly, with a warning.
"""
import functools
from collections import OrderedDict
from itertools import chain

from .._errors import TracegradRuntimeError
from ..nn._module_helpers import _Handle

_GLOBAL_PRE = OrderedDict()
_GLOBAL_POST = OrderedDict()
REGISTRIES = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
              "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
              "_optimizer_load_state_dict_pre_hooks", "_optimizer_load_state_dict_post_hooks")


def register_optimizer_step_pre_hook(hook):
    """`hook(optimizer, args, kwargs)` runs before every optimizer's `step()`; it may return
    `(new_args, new_kwargs)`. Returns a handle whose `remove()` unregisters it."""
    return _Handle.add(_GLOBAL_PRE, hook)


def register_optimizer_step_post_hook(hook):
    """`hook(optimizer, args, kwargs)` runs after every optimizer's `step()`."""
    return _Handle.add(_GLOBAL_POST, hook)


def add_registries(opt):
    """Give `opt` its (empty) hook registries; kept ones stay (`__setstate__`). It holds
    the global step hooks too: a compiled step reaches what its optimizer holds, so a
    global hook registered or removed between calls is seen (its state is guarded)."""
    for name in REGISTRIES:
        opt.__dict__.setdefault(name, OrderedDict())
    opt.__dict__["_optimizer_global_step_hooks"] = (_GLOBAL_PRE, _GLOBAL_POST)


def with_step_hooks(unhooked):
    """`unhooked` (a step method) running the step hooks around it (this module's
    docstring)."""
    if getattr(unhooked, "_runs_step_hooks", False):
        return unhooked

    @functools.wraps(unhooked)
    def step(self, *args, **kwargs):
        # (named `step`, its first argument `self`: the compiler sees the call of a step
        # method, Note [Hyper-parameters unread]; as PyTorch's, the hooks' `args` start
        # with the optimizer itself)
        d = self.__dict__
        pre, post = d.get("_optimizer_step_pre_hooks"), d.get("_optimizer_step_post_hooks")
        global_pre, global_post = d.get("_optimizer_global_step_hooks", ({}, {}))
        if not (pre or post or global_pre or global_post):
            return unhooked(self, *args, **kwargs)
        args = (self,) + args
        for hook in chain(tuple(global_pre.values()), tuple((pre or {}).values())):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise TracegradRuntimeError(
                        f"{unhooked} must return None or a tuple of (new_args, new_kwargs), "
                        f"but got {result}.")
                args, kwargs = result
        out = unhooked(*args, **kwargs)
        for hook in chain(tuple((post or {}).values()), tuple(global_post.values())):
            hook(self, args, kwargs)
        return out
    step._runs_step_hooks = True
    return step


class HookMethods:
    """The registration methods `Optimizer` inherits."""

    def register_step_pre_hook(self, hook):
        """`hook(optimizer, args, kwargs)` runs before `step()`; returning `(new_args,
        new_kwargs)` replaces its arguments. Returns a handle (`handle.remove()`)."""
        return _Handle.add(self.__dict__["_optimizer_step_pre_hooks"], hook)

    def register_step_post_hook(self, hook):
        """`hook(optimizer, args, kwargs)` runs after `step()`."""
        return _Handle.add(self.__dict__["_optimizer_step_post_hooks"], hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """`hook(optimizer)` runs before `state_dict()` builds its result."""
        return _Handle.add(self.__dict__["_optimizer_state_dict_pre_hooks"], hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """`hook(optimizer, state_dict)` runs on `state_dict()`'s result; may return a new
        one."""
        return _Handle.add(self.__dict__["_optimizer_state_dict_post_hooks"], hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """`hook(optimizer, state_dict)` runs on a shallow copy of what `load_state_dict()`
        was given; may return the state dict to load instead."""
        return _Handle.add(self.__dict__["_optimizer_load_state_dict_pre_hooks"], hook,
                           prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """`hook(optimizer)` runs after `load_state_dict()` has loaded."""
        return _Handle.add(self.__dict__["_optimizer_load_state_dict_post_hooks"], hook,
                           prepend)


def state_dict_hooked(state_dict):
    """`Optimizer.state_dict` running its pre- and post-hooks."""
    @functools.wraps(state_dict)
    def hooked_state_dict(self):
        d = self.__dict__
        for hook in tuple(d.get("_optimizer_state_dict_pre_hooks", {}).values()):
            hook(self)
        out = state_dict(self)
        for hook in tuple(d.get("_optimizer_state_dict_post_hooks", {}).values()):
            new = hook(self, out)
            if new is not None:
                out = new
        return out
    return hooked_state_dict


def load_state_dict_hooked(load_state_dict):
    """`Optimizer.load_state_dict` running its pre-hooks on a shallow copy, then its
    post-hooks."""
    @functools.wraps(load_state_dict)
    def hooked_load_state_dict(self, state_dict):
        d = self.__dict__
        pre = tuple(d.get("_optimizer_load_state_dict_pre_hooks", {}).values())
        if pre:
            state_dict = state_dict.copy()
        for hook in pre:
            new = hook(self, state_dict)
            if new is not None:
                state_dict = new
        out = load_state_dict(self, state_dict)
        for hook in tuple(d.get("_optimizer_load_state_dict_post_hooks", {}).values()):
            hook(self)
        return out
    return hooked_load_state_dict
