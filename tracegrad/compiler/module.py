"""`CompiledModule`: what `tracegrad.compile(module)` returns, itself an `nn.Module`.

Like PyTorch's `OptimizedModule`, the wrapper holds the original as `_orig_mod` (its only
child for `children()`, `apply()`, `train()` and dtype conversion, but kept out of the
`_modules` registry so that no name gains a prefix). Calling the wrapper runs, in order, the
wrapper's forward pre-hooks, the original's, the compiled `_orig_mod.forward`, then the
original's forward hooks and the wrapper's: hooks on either object run eagerly on every
call, Python side effects included (a hook collecting activations sees every call).

Names pass through (shared/API.md): `named_parameters()`, `state_dict()` and
`load_state_dict()` use the original's names, without PyTorch's `_orig_mod.` prefix, so a
checkpoint of the compiled module loads into the plain one and back. Attributes not found on
the wrapper are read from, and all but its own written to, the original.

Note [Forward replaced]
The wrapper compiles `mod.forward` as it was when compiled. A forward replaced later, on
the instance (`model.forward = types.MethodType(new_forward, model)`, as adapters and
debugging patches do) or on the class (`Net.forward = new_forward`), is what eager
`model(x)` runs, and what PyTorch's `OptimizedModule` (which calls `_orig_mod.__call__`)
compiles. So each call compares the function behind `mod.forward` with the one compiled
and, when it changed, retargets the compiled function to the new forward, dropping its
cached paths (`CompiledFunction.retarget`): the call re-traces with that reason. Methods
the forward calls (`self.helper(x)`) are guarded by the state scan (Note [Methods of user
classes] in state.py).

Note [Lazy modules first]
A model built of lazy modules (`nn.LazyLinear`) creates its parameters on its first call,
which a trace cannot record (Note [Lazy modules and compile] in nn/_lazy.py). PyTorch's
compiled module runs that first call's initialization eagerly and compiles from there,
so the wrapper does too: while a lazy submodule is uninitialized, calls run eagerly
(counted in `stats.eager_calls`); once none is, it compiles and never looks again (the
first call looks: a copy's original is still empty while it is being built).

Note [Hooks of submodules]
Hooks of the original's submodules run inside the compiled forward, so their tensor work is
traced and their hook dicts are guarded sources of the compiled function (compiler/state.py):
adding or removing such a hook re-traces. Their Python side effects are reported like any
other (Note [Effects] in _effects.py).

Note [Own __call__]
A model class may override `__call__` (to count calls, cast inputs, add a residual around
`super().__call__(x)`). Eager `model(x)` runs that override, and so does PyTorch's
`OptimizedModule`, which compiles `_orig_mod.__call__`. So for such a class the wrapper
compiles the bound `mod.__call__` instead of `mod.forward`: the override, the original's
hooks and its forward are all traced (their state guarded like any function's, the hook
dicts included), and the wrapper calls it without running the original's hooks again.
Calling only `call_with_hooks(mod, forward)` skipped the override, silently. Installed by
`mod.compile()` the wrapper is what the override's `super().__call__` reaches, so there it
compiles `mod.forward` as usual (as PyTorch's `Module.compile` compiles `_call_impl`).
"""
from ..nn import _state_dict_hooks as _sdh
from ..nn._module_helpers import _IncompatibleKeys
from ..nn.module import Module, call_with_hooks
from .function import CompiledFunction

class CompiledModule(Module):
    """An `nn.Module` whose forward runs the compiled forward of `_orig_mod`."""

    _transparent_to_global_hooks = True    # Note [Global module hooks] (nn/_global_hooks.py)

    def __init__(self, mod, **opts):
        super().__init__()
        object.__setattr__(self, "_orig_mod", mod)
        object.__setattr__(self, "_options", dict(opts))
        own_call = _overrides_call(mod)                   # Note [Own __call__]
        cf = CompiledFunction(mod.__call__ if own_call else mod.forward,
                              name=type(mod).__name__, **opts)
        if not own_call:
            cf.module = mod            # state scan and training flags of the original
        object.__setattr__(self, "_own_call", own_call)
        object.__setattr__(self, "_lazy", True)    # not known yet: Note [Lazy modules first]
        object.__setattr__(self, "_compiled", cf)
        object.__setattr__(self, "_forward", _function_of(mod.forward))

    # -- calling --
    def forward(self, *args, **kwargs):
        mod, cf = self._orig_mod, self._compiled
        if self._lazy:                                   # Note [Lazy modules first]
            if _uninitialized(mod):
                cf.stats.calls += 1
                cf.stats.eager_calls += 1
                if self._own_call and mod.__dict__.get("_compiled_call_impl") is not self:
                    return mod(*args, **kwargs)
                return call_with_hooks(mod, mod.forward, args, kwargs)
            object.__setattr__(self, "_lazy", False)
        if self._own_call:                               # Note [Own __call__]
            if mod.__dict__.get("_compiled_call_impl") is not self:
                return cf(*args, **kwargs)
            # installed by `mod.compile()`: the override runs eagerly around this call
            object.__setattr__(self, "_own_call", False)
            cf.retarget(mod.forward, "first call")
            cf.module = mod
        fwd = mod.forward
        if _function_of(fwd) is not self._forward:      # Note [Forward replaced]
            object.__setattr__(self, "_forward", _function_of(fwd))
            cf.retarget(fwd, f"the forward of {type(mod).__name__} was replaced")
        return call_with_hooks(mod, cf, args, kwargs)

    # -- copies: Note [Copying compiled objects] in function.py --
    def __reduce_ex__(self, protocol):
        """Copied and pickled as the original, the options and the wrapper's own hooks: the
        copy compiles a copy of the original afresh (`copy.deepcopy`, `pickle`), as
        PyTorch's `OptimizedModule` does."""
        own = {k: v for k, v in self.__dict__.items() if k not in ("_orig_mod", "_compiled",
                                                                    "_forward", "_own_call",
                                                                    "_lazy")}
        return (_remake_module, (self._orig_mod, self._options), own)

    def __setstate__(self, state):
        self.__dict__.update(state)

    # -- the original's flags, names and state pass through --
    @property
    def training(self):
        return self._orig_mod.training

    @training.setter
    def training(self, mode):
        self._orig_mod.training = mode

    def named_children(self):
        yield "_orig_mod", self._orig_mod

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """The original's modules under the original's names (the wrapper adds none)."""
        yield from self._orig_mod.named_modules(memo, prefix, remove_duplicate)

    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        # the wrapper's own state-dict hooks around the original's (Note [State-dict hook
        # registries] in nn/_state_dict_hooks.py)
        _sdh.run_state_dict_pre_hooks(self, prefix, keep_vars)
        out = self._orig_mod.state_dict(destination=destination, prefix=prefix,
                                        keep_vars=keep_vars)
        meta = (getattr(out, "_metadata", None) or {}).get(prefix[:-1], {})
        return _sdh.run_state_dict_post_hooks(self, out, prefix, meta)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        d = self.__dict__
        if d.get(_sdh.LOAD_PRE) or d.get(_sdh.LOAD_POST):   # the wrapper's own load hooks
            return Module.load_state_dict(self, state_dict, strict=strict, assign=assign)
        return self._orig_mod.load_state_dict(state_dict, strict=strict, assign=assign)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        """Called by a parent's `load_state_dict`: load the original's whole subtree (each
        module's load hooks too, its post-hooks after its children's)."""
        _sdh.run_load_pre_hooks(self, state_dict, prefix, local_metadata, strict,
                                missing_keys, unexpected_keys, error_msgs)

        def load(m, local, pre):             # (each child its part, as Module's load)
            m._load_from_state_dict(local, pre, dict(local_metadata), strict, missing_keys,
                                    unexpected_keys, error_msgs)
            for name, child in m._modules.items():
                if child is not None:
                    p = pre + name + "."
                    load(child, {k: v for k, v in local.items() if k.startswith(p)}, p)
            _sdh.run_load_post_hooks(m, _IncompatibleKeys(missing_keys, unexpected_keys))
        load(self._orig_mod, state_dict, prefix)

    # -- introspection of the compiled function --
    @property
    def stats(self):
        return self._compiled.stats

    @property
    def programs(self):
        return self._compiled.programs

    def explain(self, code=False):
        return self._compiled.explain(code=code)

    def to_dot(self, **options):
        return self._compiled.to_dot(**options)

    def _tracegrad_drawing(self, color_by=None):
        """What `tracegrad.viz` draws for a compiled module: its compiled forward."""
        return self._compiled._tracegrad_drawing(color_by)

    def _repr_svg_(self):
        return self._compiled._repr_svg_()

    def __repr__(self):
        return f"CompiledModule({repr(self._orig_mod)})"

    # -- attribute fall-through --
    def __getattr__(self, name):
        orig = self.__dict__.get("_orig_mod")
        if orig is None:
            raise AttributeError(f"'CompiledModule' object has no attribute {name!r}")
        return getattr(orig, name)

    def _own(self, name):
        """Whether attribute `name` belongs to the wrapper: a class attribute (`training`,
        `forward`), or one of the wrapper's own (`_orig_mod`, its hook dicts). Every other
        name, private ones too (`self._scale` read by the original's forward), is the
        original's, as in PyTorch's OptimizedModule: a write kept on the wrapper would leave
        the compiled forward reading the old value."""
        d = self.__dict__
        return "_orig_mod" not in d or name in d or hasattr(type(self), name)

    # Note [Registering through the wrapper]
    # `compiled.register_buffer("shift", t)` kept `shift` in the wrapper's own registry,
    # where the original's forward never looks (and `state_dict()`, the original's, never
    # lists it), while `compiled.shift = t` already went to the original. Registering is
    # writing: the original's registries receive it, as from an attribute assignment.
    def register_buffer(self, name, tensor, persistent=True):
        return self._orig_mod.register_buffer(name, tensor, persistent)

    def register_parameter(self, name, param):
        return self._orig_mod.register_parameter(name, param)

    def add_module(self, name, module):
        return self._orig_mod.add_module(name, module)

    def register_module(self, name, module):
        return self._orig_mod.register_module(name, module)

    def __setattr__(self, name, value):
        if self._own(name):
            super().__setattr__(name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        if self._own(name):
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)


def _uninitialized(mod):
    """Whether a lazy submodule of `mod` still has uninitialized parameters."""
    from ..nn._lazy import LazyModuleMixin
    return any(isinstance(m, LazyModuleMixin) and m.has_uninitialized_params()
               for m in mod.modules())


def _overrides_call(mod):
    """Whether the class of `mod` defines its own `__call__` (Note [Own __call__])."""
    return type(mod).__call__ is not Module.__call__


def _function_of(method):
    """The function behind `module.forward`: a bound method's `__func__` (a new bound
    method object on every attribute read), else the callable itself."""
    return getattr(method, "__func__", method)


def _remake_module(mod, options):
    """A fresh CompiledModule of `mod` (the copy's original), with nothing cached."""
    return CompiledModule(mod, **options)
