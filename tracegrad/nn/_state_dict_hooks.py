"""State-dict hooks of `Module` (PyTorch's `register_state_dict_pre_hook`,
`register_state_dict_post_hook`, `register_load_state_dict_pre_hook`,
`register_load_state_dict_post_hook`, and the private `_register_state_dict_hook` and
`_register_load_state_dict_pre_hook` older libraries use to rename keys).

Note [State-dict hook registries]
Each registry is an OrderedDict in the module's `__dict__`, made on first registration
(a module without state-dict hooks carries none, so pickles, copies and the compiled
functions' state scan of existing modules are unchanged); `_Handle` removes an entry and
its flags. When they run, as in PyTorch:
- `state_dict`: the pre-hooks `hook(module, prefix, keep_vars)` before the module saves its
  own entries; the post-hooks `hook(module, state_dict, prefix, local_metadata)` after its
  children saved theirs. A public post-hook must return None (RuntimeError otherwise); a
  private one may return a new state dict, which replaces the destination.
- `load_state_dict`: the pre-hooks at the start of `_load_from_state_dict`, with the
  module's part of the state dict, its metadata, `strict` and the three lists (public ones
  get the module first); the post-hooks `hook(module, incompatible_keys)` after the module
  and its children loaded, before strict's check, so a hook clearing the lists in place
  avoids the error, and must return None (PyTorch's AssertionError otherwise).
A compiled function calling `state_dict()` runs these hooks while tracing like any code it
calls (their Python state is the function's state, guarded or replayed).
"""
from collections import OrderedDict

from .._errors import TracegradRuntimeError
from ._module_helpers import _Handle

PRE, POST, PUBLIC_POST = "_state_dict_pre_hooks", "_state_dict_hooks", "_state_dict_hooks_public"
LOAD_PRE, LOAD_PRE_WITH_MODULE = "_load_state_dict_pre_hooks", "_load_state_dict_pre_hooks_with_module"
LOAD_POST = "_load_state_dict_post_hooks"


def _registry(module, name):
    return module.__dict__.setdefault(name, OrderedDict())


def register_state_dict_pre_hook(self, hook):
    """`hook(module, prefix, keep_vars)` runs before `state_dict()` saves this module's
    entries."""
    return _Handle.add(_registry(self, PRE), hook)


def register_state_dict_post_hook(self, hook):
    """`hook(module, state_dict, prefix, local_metadata)` runs after `state_dict()` saved this
    module and its children; it may change `state_dict` in place and must return None."""
    return _Handle.add(_registry(self, POST), hook, False, _registry(self, PUBLIC_POST))


def _register_state_dict_hook(self, hook):
    """Like `register_state_dict_post_hook`, but the hook may return a new state dict."""
    return _Handle.add(_registry(self, POST), hook)


def register_load_state_dict_pre_hook(self, hook):
    """`hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
    unexpected_keys, error_msgs)` runs before this module loads its entries."""
    return _Handle.add(_registry(self, LOAD_PRE), hook, False,
                       _registry(self, LOAD_PRE_WITH_MODULE))


def _register_load_state_dict_pre_hook(self, hook, with_module=False):
    """The private form: without `with_module`, the hook is called without the module."""
    return _Handle.add(_registry(self, LOAD_PRE), hook, False,
                       _registry(self, LOAD_PRE_WITH_MODULE) if with_module else None)


def register_load_state_dict_post_hook(self, hook):
    """`hook(module, incompatible_keys)` runs after `load_state_dict` loaded this module and
    its children; it may change the key lists in place and must return None."""
    return _Handle.add(_registry(self, LOAD_POST), hook)


def run_state_dict_pre_hooks(module, prefix, keep_vars):
    for hook in list(module.__dict__.get(PRE, {}).values()):
        hook(module, prefix, keep_vars)


def run_state_dict_post_hooks(module, destination, prefix, local_metadata):
    """Returns the destination (a private hook may replace it)."""
    hooks = module.__dict__.get(POST)
    if not hooks:
        return destination
    public = module.__dict__.get(PUBLIC_POST, {})
    for key, hook in list(hooks.items()):
        result = hook(module, destination, prefix, local_metadata)
        if key in public:
            if result is not None:
                raise TracegradRuntimeError("state_dict post-hook must return None")
        elif result is not None:
            destination = result
    return destination


def run_load_pre_hooks(module, state_dict, prefix, local_metadata, strict, missing_keys,
                       unexpected_keys, error_msgs):
    hooks = module.__dict__.get(LOAD_PRE)
    if not hooks:
        return
    with_module = module.__dict__.get(LOAD_PRE_WITH_MODULE, {})
    for key, hook in list(hooks.items()):
        args = (state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                error_msgs)
        hook(module, *args) if key in with_module else hook(*args)


def run_load_post_hooks(module, incompatible_keys):
    for hook in list(module.__dict__.get(LOAD_POST, {}).values()):
        if hook(module, incompatible_keys) is not None:   # PyTorch's AssertionError
            raise AssertionError(
                "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                "expected to return new values, if incompatible_keys need to be modified, "
                "it should be done inplace.")
